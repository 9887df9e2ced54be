"""Every public name can be found: it is in its module's ``__all__`` and ``dir()`` (the lazily loaded
ones too, without loading them), it imports, and every ``lp.NAME`` the docs use resolves.

The lists come from the code itself (the facade's ``_LAZY``, the names each package defines), so a
name added to the API without being added to ``__all__`` fails here.
"""

from __future__ import annotations

import importlib
import json
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

import leanpass

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]

# The public modules: the facade, the modules it hands out by name (lp.nn, lp.optim, lp.losses, lp.linalg,
# lp.special, ...), and those imported by their path (leanpass.functional, .testing, .distributed).
# (leanpass.ops is not among them: its names are the ops registered at run time; test_plugins checks its dir())
LAZY_MODULES = sorted({f"leanpass.{path}" for name, path in leanpass._LAZY.items()
                       if path.rpartition(".")[2] == name and path != "ops"})
PUBLIC = ["leanpass", "leanpass.functional", "leanpass.testing", "leanpass.distributed", *LAZY_MODULES]
# The packages, whose __init__ gathers the names of the modules under it: what they define is public
PACKAGES = ["leanpass", "leanpass.nn", "leanpass.optim", "leanpass.functional", "leanpass.datasets"]
NOT_API = {"Any", "TYPE_CHECKING", "annotations", "np"}


def test_the_public_modules_are_found() -> None:
    assert {"leanpass.nn", "leanpass.optim", "leanpass.nn.losses", "leanpass.numpy.linalg"} <= set(PUBLIC)


@pytest.mark.parametrize("name", PUBLIC)
def test_dir_lists_all_of_all_and_nothing_else_public(name: str) -> None:
    module = importlib.import_module(name)
    names = module.__all__
    assert len(names) == len(set(names)), f"{name}.__all__ names some twice"
    listed = dir(module)
    assert set(names) <= set(listed)
    assert {n for n in listed if not n.startswith("_")} == set(names), f"dir({name}) lists names not in __all__"
    assert not NOT_API & set(listed)
    assert "__doc__" in listed and "__name__" in listed
    for attr in names:
        assert getattr(module, attr) is not None
    star: dict = {}
    exec(f"from {name} import *", star)
    assert set(names) <= set(star)


@pytest.mark.parametrize("name", PACKAGES)
def test_every_public_function_and_class_of_a_package_is_in_all(name: str) -> None:
    """What a package's modules define and it imports under a public name is API: it must be in __all__."""
    module = importlib.import_module(name)
    missing = [attr for attr, value in vars(module).items()
               if not attr.startswith("_") and isinstance(value, (type, types.FunctionType))
               and getattr(value, "__module__", "").startswith(name) and attr not in module.__all__]
    assert not missing, f"{name} defines public names that are not in its __all__ (add them): {missing}"


def test_every_lazily_loaded_name_is_in_all() -> None:
    assert not set(leanpass._LAZY) - set(leanpass.__all__), "add the new lazily loaded names to __all__"
    nn = importlib.import_module("leanpass.nn")
    assert not set(nn._CONV_LAYERS) - set(nn.__all__)
    functional = importlib.import_module("leanpass.functional")
    assert not set(functional._LAZY_MODULE) - set(functional.__all__)


def test_dir_loads_nothing_and_lists_the_lazy_names() -> None:
    """In a fresh interpreter dir() lists the lazily loaded names (jit, save, conv2d, nn.Conv2d, ...)
    without importing their modules: `import leanpass` stays as cheap as it was."""
    code = """if True:
        import json, sys
        import leanpass, leanpass.nn, leanpass.functional
        before = set(sys.modules)
        names = {m: dir(sys.modules[m]) for m in ("leanpass", "leanpass.nn", "leanpass.functional")}
        lazy = {"leanpass": sorted(leanpass._LAZY), "leanpass.nn": list(leanpass.nn._CONV_LAYERS),
                "leanpass.functional": sorted(leanpass.functional._LAZY_MODULE)}
        print(json.dumps({"loaded": sorted(set(sys.modules) - before), "names": names, "lazy": lazy,
                          "unloaded": [f"leanpass.{p}" not in sys.modules for p in leanpass._LAZY.values()]}))
        """
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    got = json.loads(out.stdout)
    assert got["loaded"] == []
    assert any(got["unloaded"])  # the check means something: some lazy modules were not loaded
    for module, names in got["names"].items():
        assert set(got["lazy"][module]) <= set(names), module
        assert not NOT_API & set(names), module
    top = set(got["names"]["leanpass"])
    assert {"jit", "vmap", "save", "load", "hessian", "draw_graph", "debug_nans", "conv2d"} <= top
    assert {"Conv2d", "BatchNorm", "MaxPool2d"} <= set(got["names"]["leanpass.nn"])


# `lp.grad`, `leanpass.nn.Linear`, `nn.Conv2d`, `optim.adam`, `losses.mse`, `F.exp`, `lp.linalg.solve`:
# a base the docs import under that name, then attributes (not part of a longer name or a file's path).
MENTION = re.compile(r"(?<![\w./])(lp|leanpass|nn|optim|losses|F)((?:\.(?!(?:py|md)\b)[A-Za-z_]\w*)+)(?![\w.])")
BASES = {"lp": "leanpass", "leanpass": "leanpass", "nn": "leanpass.nn", "optim": "leanpass.optim",
         "losses": "leanpass.nn.losses", "F": "leanpass.functional"}


def mentions() -> list[tuple[str, str]]:
    # (a line that speaks of PyTorch may use its names: torch's `nn.Sequential`, `optim.SGD`)
    # (`lp.ops.cube` names an op the page itself registers)
    found = {(path.name, m.group(0)) for path in DOCS for line in path.read_text().splitlines()
             if "torch" not in line.lower() for m in MENTION.finditer(line) if ".ops." not in m.group(0)}
    return sorted(found)


def resolve(text: str) -> object:
    base, *parts = text.split(".")
    path = BASES[base]
    obj: object = importlib.import_module(path)
    for part in parts:
        if hasattr(obj, part):
            obj = getattr(obj, part)
        else:  # a module not imported yet (leanpass.examples.digits)
            path = f"{path}.{part}"
            obj = importlib.import_module(path)
        if isinstance(obj, types.ModuleType):
            path = obj.__name__
    return obj


def test_the_docs_mention_names() -> None:
    assert len(mentions()) > 100 and ("README.md", "lp.grad") in mentions()


@pytest.mark.parametrize(("page", "text"), mentions())
def test_every_name_the_docs_use_resolves(page: str, text: str) -> None:
    try:
        resolve(text)
    except (AttributeError, ImportError) as e:
        pytest.fail(f"{page} mentions {text}, which does not resolve: {e}")
    base, _, rest = text.partition(".")
    top = rest.split(".")[0]
    module = importlib.import_module(BASES[base])
    if hasattr(module, "__all__") and not isinstance(getattr(module, top), types.ModuleType):
        assert top in dir(module), f"{page} mentions {text}, but dir({module.__name__}) does not list {top}"
