"""The documentation site's MkDocs hooks and griffe extension (mkdocs.yml names this file twice).

The site is README.md (its first page) and every page of docs/, then an API reference generated
from the package's public names: ``reference_pages()`` lists each public module's ``__all__`` (and
every public name of ``leanpass`` itself, the lazily loaded ones included), so a name or a module
added to the package appears in the reference without editing anything here, and
tests/test_docsite.py checks that the built site holds an entry for each.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re
import types
from pathlib import Path
from typing import Any

import griffe

ROOT = Path(__file__).resolve().parent.parent
# The guides in reading order (a name not in docs/ is skipped); any other page of docs/ follows them, by file name.
GUIDE_ORDER = ["operations.md", "autodiff.md", "training.md", "transformers.md", "jit.md", "performance.md",
               "distributed.md", "autograd.md", "coming-from-0.1.md", "writing-ops.md", "anatomy.md"]
# Folders of leanpass/ that are layers of the implementation: what they hold is public under
# ``leanpass`` (``lp.exp``, ``lp.jit``, ``lp.linalg``, ...), not under their own paths.
LAYERS = {"core", "numpy", "scipy", "transforms", "tools", "examples"}
SECTIONS = {  # defining module -> heading on the ``leanpass`` page
    "leanpass.core.tensor": "Tensors and recording",
    "leanpass.core.tree": "Pytrees",
    "leanpass.transforms.reverse_mode": "Reverse mode",
    "leanpass.transforms.forward_mode": "Forward mode",
    "leanpass.transforms.jacobians": "Jacobians and Hessians",
    "leanpass.transforms.vmap.batching": "vmap",
    "leanpass.transforms.jit.jitted": "jit",
    "leanpass.numpy.basics": "NumPy: the basics",
    "leanpass.numpy.math": "NumPy: math, reductions and scans",
    "leanpass.numpy.products": "NumPy: products",
    "leanpass.numpy.arrays": "NumPy: arranging arrays",
    "leanpass.numpy.convolution": "Convolution, pooling and normalisation",
    "leanpass.checkpoint": "Checkpoints",
    "leanpass.tools.graph": "Graphs",
    "leanpass.tools.debug": "Debugging",
}


def guide_pages() -> list[str]:
    """The pages of docs/ in the site's order."""
    found = sorted(p.name for p in (ROOT / "docs").glob("*.md"))
    return [p for p in GUIDE_ORDER if p in found] + [p for p in found if p not in GUIDE_ORDER]


def public_names(module: types.ModuleType) -> list[str]:
    """A module's public names: its ``__all__`` (with, for ``leanpass``, the lazily loaded ones),
    or else the public names defined in it."""
    names = list(getattr(module, "__all__", None) or [
        n for n, v in vars(module).items()
        if not n.startswith("_") and getattr(v, "__module__", None) == module.__name__])
    names += [n for n in getattr(module, "_LAZY", {}) if n not in names]
    return names


def public_modules() -> list[str]:
    """``leanpass`` and every public module under it: the modules among its public names
    (``lp.nn``, ``lp.linalg``, ...), their public submodules (``nn.init``), and every module
    of the package's top folder that is not a layer of the implementation (``leanpass.testing``)."""
    import leanpass

    found = ["leanpass"]
    for name in public_names(leanpass):
        value = getattr(leanpass, name)
        if isinstance(value, types.ModuleType):
            found.append(value.__name__)
    for info in pkgutil.iter_modules(leanpass.__path__):
        if not info.name.startswith("_") and info.name not in LAYERS:
            found.append(f"leanpass.{info.name}")
    for name in list(found):
        for sub in getattr(importlib.import_module(name), "__all__", []):
            value = getattr(importlib.import_module(name), sub)
            if isinstance(value, types.ModuleType):
                found.append(value.__name__)
    return sorted(set(found), key=lambda m: (m != "leanpass", m))


def shown_as(module: str) -> str:
    """How users reach a module: ``lp.linalg`` for ``leanpass.numpy.linalg``."""
    import leanpass

    for name in public_names(leanpass):
        value = getattr(leanpass, name)
        if isinstance(value, types.ModuleType) and value.__name__ == module:
            return f"leanpass.{name}"
    return module


def page_name(module: str) -> str:
    return f"reference/{shown_as(module)}.md"


def reference_pages() -> dict[str, str]:
    """Reference page path -> its Markdown, one page per public module; each public name is one
    ``::: path`` entry (mkdocstrings renders it from the docstring)."""
    modules = public_modules()
    pages = {}
    for name in modules:
        module = importlib.import_module(name)
        title = shown_as(name)
        groups: dict[str, list[str]] = {}
        for public in public_names(module):
            value = getattr(module, public)
            if isinstance(value, types.ModuleType):
                groups.setdefault("Modules", []).append(
                    f"- [`{title}.{public}`]({shown_as(value.__name__)}.md)")
                continue
            where = getattr(value, "__module__", None) if inspect.isclass(value) or callable(value) else None
            qualname = getattr(value, "__qualname__", None)
            if where is None or qualname is None or not where.startswith("leanpass"):
                where, qualname = name, public  # a constant: documented where it is reached
            elif "<locals>" in qualname:  # a wrapper made by a function (on NumPy 1.x, functional.add)
                qualname = value.__name__
            section = SECTIONS.get(where, "") if name == "leanpass" else ""
            if qualname != public and "." not in qualname:
                other = next((n for n in public_names(module) if n == qualname), None)
                if other is not None:  # an alias (lp.radians is lp.deg2rad): one entry, and a line here
                    groups.setdefault(section, []).append(f"`{title}.{public}` is [`{title}.{other}`]"
                                                          f"[{where}.{qualname}].\n")
                    continue
            groups.setdefault(section, []).append(
                f"::: {where}.{qualname}\n    options:\n      heading: \"{title}.{public}\"\n"
                f"      toc_label: \"{public}\"\n")
        lines = [f"# {title}\n", f"::: {name}\n    options:\n      members: false\n      show_root_heading: false\n"]
        order = ["Modules", "", *SECTIONS.values()]
        for section in sorted(groups, key=lambda s: (order.index(s) if s in order else len(order), s)):
            if section:
                lines.append(f"## {section}\n")
            lines += groups[section]
            lines.append("")
        pages[page_name(name)] = "\n".join(lines)
    index = ["# API reference\n", "Every public module of LeanPass, and on its page every public name, "
             "generated from the docstrings. `import leanpass as lp`.\n"]
    index += [f"- [`{shown_as(m)}`]({shown_as(m)}.md)" for m in modules]
    pages["reference/index.md"] = "\n".join(index) + "\n"
    return pages


def readme_page() -> str:
    """README.md as the site's first page, its links into docs/ pointed at the site's pages."""
    text = (ROOT / "README.md").read_text()
    return re.sub(r"\]\(docs/", "](", text)


# ---- MkDocs hooks ----

def on_config(config: Any) -> Any:
    """The navigation: README, the guides (every page of docs/), the API reference."""
    pages = reference_pages()
    modules = [p for p in pages if p != "reference/index.md"]
    config["nav"] = [{"Home": "index.md"}, *guide_pages(),
                     {"API reference": ["reference/index.md", *modules]}]
    return config


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    files.append(File.generated(config, "index.md", content=readme_page()))
    for path, text in reference_pages().items():
        files.append(File.generated(config, path, content=text))
    return files


# ---- griffe: docstrings' doctests as code blocks ----

DOCTEST = re.compile(r"^(?:>>>|\.\.\.)( |$)")


def fence_doctests(text: str) -> str:
    """Wrap each run of ``>>>`` lines and their printed output in a ```pycon block (in Markdown,
    ``>>>`` would be quotes three deep)."""
    out: list[str] = []
    inside = False
    for line in text.splitlines():
        if DOCTEST.match(line.lstrip()) and not inside:
            out.append("```pycon")
            inside = True
        elif inside and not line.strip():
            out.append("```")
            inside = False
        out.append(line)
    if inside:
        out.append("```")
    return "\n".join(out)


def shown(default: Any) -> str:
    """A default value as written in code (``np.float32``, not ``<class 'numpy.float32'>``)."""
    if inspect.isclass(default) or inspect.isfunction(default):
        module = "np." if default.__module__ == "numpy" else ""
        return module + default.__qualname__
    return repr(default)


class Doctests(griffe.Extension):
    """Fence the doctests of every docstring mkdocstrings renders."""

    def on_instance(self, *, obj: Any, **kwargs: Any) -> None:
        if obj.docstring is not None and ">>>" in obj.docstring.value:
            obj.docstring.value = fence_doctests(obj.docstring.value)

    def on_class_members(self, *, node: Any, cls: Any, **kwargs: Any) -> None:
        """A class's signature from its constructor as Python sees it (a module's classes present
        themselves as ``leanpass.nn.Linear``, so griffe would find their ``__init__`` as an alias
        of itself)."""
        runtime = getattr(node, "obj", None)
        if not inspect.isclass(runtime) or "__init__" not in vars(runtime):
            return
        try:
            signature = inspect.signature(runtime)
        except (TypeError, ValueError):
            return
        kinds = {p.kind: griffe.ParameterKind[p.kind.name.lower()] for p in signature.parameters.values()}
        parameters = griffe.Parameters(*[
            griffe.Parameter(p.name, kind=kinds[p.kind],
                             annotation=None if p.annotation is p.empty else str(p.annotation),
                             default=None if p.default is p.empty else shown(p.default))
            for p in signature.parameters.values()])
        init = griffe.Function("__init__", parameters=parameters, parent=cls)
        cls.set_member("__init__", init)

    def on_attribute_instance(self, *, node: Any, attr: Any, **kwargs: Any) -> None:
        """A constant's docstring: not its type's (a dict's "dict() -> new empty dictionary"), but what it is."""
        runtime = getattr(node, "obj", None)
        doc = type(runtime).__doc__
        inherited = isinstance(doc, str) and attr.docstring is not None
        if inherited and attr.docstring.value.strip() == inspect.cleandoc(doc).strip():
            attr.docstring = None
        if attr.docstring is None and runtime is not None and not callable(runtime):
            size = f" of {len(runtime)} entries" if isinstance(runtime, (dict, list, tuple, set, frozenset)) else ""
            where = "the class" if attr.parent is not None and attr.parent.is_class else "the module"
            attr.docstring = griffe.Docstring(f"A `{type(runtime).__name__}`{size} (see {where} above).",
                                              parent=attr)
