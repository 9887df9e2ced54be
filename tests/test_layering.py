"""The package layers, checked statically: imports point only down, there are no import cycles, no
module writes another module's globals (a layer hooks another only through a named function of the
lower module), and ``import leanpass`` stays small.

Layers, lowest first (a module may import its own layer or lower ones, without a cycle):

* L0 ``functional``: the pure ops on arrays (NumPy and the standard library only);
* L1 ``core``: Tensor, the reverse pass, pytrees, and the named extension points the layers above call;
* L2 ``numpy``, ``scipy``: the NumPy- and SciPy-style functions on Tensors;
* L3 ``transforms``: grad/vjp, jvp, jacobians, vmap, jit;
* L4 ``nn``, ``optim``, ``tools``, ``checkpoint``, ``data``, ``datasets``, ``distributed``, ``testing``,
  ``plugin_registry``, ``ops``;
* L5 ``leanpass/__init__.py``, the facade;
* L6 ``examples``: programs written against the public API (``import leanpass as lp``), as a user's are.

Each check has an allowlist that may only shrink: an entry that no longer occurs fails the test too,
so that it is deleted with the fix.
"""

from __future__ import annotations

import ast
import functools
import shutil
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1] / "leanpass"

LAYERS = {
    "functional": 0,
    "core": 1,
    "numpy": 2, "scipy": 2,
    "transforms": 3,
    **{name: 4 for name in ("nn", "optim", "tools", "checkpoint", "data", "datasets", "distributed", "testing",
                            "plugin_registry", "ops")},
    "examples": 6,
}

# The ratchets. Each entry is a finding that is known and still to be removed.
UPWARD_ALLOWED: set[tuple[str, str]] = set()
CYCLES_ALLOWED: set[frozenset[str]] = set()
WRITES_ALLOWED: set[tuple[str, str]] = set()
# Modules (and packages) `import leanpass` must not load: they load on first use. (SciPy itself too.)
NOT_ON_IMPORT = ("leanpass.nn", "leanpass.optim", "leanpass.transforms.vmap", "leanpass.transforms.jit",
                 "leanpass.scipy", "leanpass.numpy.linalg", "leanpass.numpy.convolution", "scipy",
                 *(f"leanpass.functional.{m}" for m in ("conv", "pooling", "padding", "norms", "linalg", "special",
                                                         "_erf", "_scratch")),
                 "leanpass.plugin_registry", "leanpass.ops", "importlib.metadata", "leanpass.core.graph")

_MUTATORS = {"update", "add", "append", "extend", "insert", "setdefault", "pop", "popitem", "remove", "discard",
             "clear", "__setitem__", "__delitem__"}


# ----- reading the source ----------------------------------------------------------------------------

def modules(root: Path = ROOT) -> dict[str, Path]:
    """Every module of the package under ``root``: dotted name -> file."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = list(path.relative_to(root.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def is_package(name: str, mods: dict[str, Path]) -> bool:
    return mods[name].name == "__init__.py"


def layer(name: str) -> int:
    parts = name.split(".")
    return 5 if len(parts) == 1 else LAYERS[parts[1]]


def _resolve(name: str, mods: dict[str, Path], node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` in module ``name`` reads from."""
    if not node.level:
        return node.module or ""
    base = name.split(".")
    if not is_package(name, mods):
        base.pop()
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(name: str, tree: ast.AST, mods: dict[str, Path]) -> Iterable[tuple[str, str, int]]:
    """``(imported module, local name it is bound to or "", line)`` for every import in the module, at any
    depth (function-level imports included), but not those under ``if TYPE_CHECKING:``."""
    skip = {id(n) for node in _nodes(tree) if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
            for sub in node.body for n in ast.walk(sub)}
    for node in _nodes(tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "leanpass":
                    yield alias.name, alias.asname or "", node.lineno
        elif isinstance(node, ast.ImportFrom):
            source = _resolve(name, mods, node)
            if source.split(".")[0] != "leanpass":
                continue
            for alias in node.names:
                sub = f"{source}.{alias.name}"
                if sub in mods:  # `from . import tensor`: the submodule
                    yield sub, alias.asname or alias.name, node.lineno
                else:
                    yield source, "", node.lineno


def _literal(tree: ast.AST, target: str) -> object:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == target for t in targets) and node.value is not None:
                return ast.literal_eval(node.value)
    raise LookupError(target)


def lazy_loads(mods: dict[str, Path], trees: dict[str, ast.AST]) -> Iterable[tuple[str, str]]:
    """The imports made by name at run time: functional's families (``_LAZY_OPS``) and the facade's ``_LAZY``."""
    manifests = []
    for name, tree in trees.items():
        if name.startswith("leanpass.functional"):
            for target in ("_LAZY_OPS", "LAZY"):
                try:
                    manifests.append(_literal(tree, target))
                except (LookupError, ValueError):  # (not there, or not a literal: a name for the manifest)
                    pass
    assert manifests, "functional's manifest of the families that load on first use was not found"
    for manifest in manifests:
        for family in manifest:  # type: ignore[attr-defined]
            yield "leanpass.functional", f"leanpass.functional.{family}"  # (the package's names load them)
    facade = trees["leanpass"]
    for node in ast.walk(facade):  # (_LAZY is a dict display with ** entries: read its string values)
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets):
            for value in ast.walk(node.value):
                if isinstance(value, ast.Constant) and isinstance(value.value, str) \
                        and f"leanpass.{value.value}" in mods:
                    yield "leanpass", f"leanpass.{value.value}"


@functools.lru_cache(maxsize=4)
def parse(root: Path = ROOT) -> tuple[dict[str, Path], dict[str, ast.Module]]:
    mods = modules(root)
    return mods, {name: ast.parse(path.read_text(), str(path)) for name, path in mods.items()}


@functools.lru_cache(maxsize=256)
def _nodes(tree: ast.AST) -> list[ast.AST]:
    """Every node of ``tree`` (walked once per module: the checks below look at them several times)."""
    return list(ast.walk(tree))


def graph(root: Path = ROOT) -> dict[str, set[str]]:
    """module -> the modules it imports (explicitly, at any depth, plus the loads by name)."""
    mods, trees = parse(root)
    edges: dict[str, set[str]] = {name: set() for name in mods}
    for name, tree in trees.items():
        for target, _, _ in imports(name, tree, mods):
            if target in mods and target != name:
                edges[name].add(target)
    for source, target in lazy_loads(mods, trees):
        edges[source].add(target)
    return edges


# ----- the checks -----------------------------------------------------------------------------------

def upward_imports(root: Path = ROOT) -> set[tuple[str, str]]:
    """``(importer, imported)`` where the imported module sits in a higher layer."""
    return {(a, b) for a, targets in graph(root).items() for b in targets if layer(b) > layer(a)}


def cycles(root: Path = ROOT) -> set[frozenset[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    edges = graph(root)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: set[frozenset[str]] = set()

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.add(frozenset(component))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def _module_attribute(node: ast.AST, aliases: dict[str, str]) -> str | None:
    """``mod.name`` (also ``mod.name[k]`` / ``mod.name.attr``) where ``mod`` is an imported leanpass module."""
    while isinstance(node, (ast.Subscript, ast.Attribute)):
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases:
            return f"{aliases[node.value.id]}.{node.attr}"
        node = node.value
    return None


def _imported_names(name: str, tree: ast.AST, mods: dict[str, Path]) -> dict[str, str]:
    """Local name -> ``module.NAME`` for each ``from module import NAME`` of a global (not a submodule)."""
    out = {}
    for node in _nodes(tree):
        if isinstance(node, ast.ImportFrom):
            source = _resolve(name, mods, node)
            if source in mods and source != name:
                for alias in node.names:
                    if f"{source}.{alias.name}" not in mods and alias.name != "*":
                        out[alias.asname or alias.name] = f"{source}.{alias.name}"
    return out


def global_writes(root: Path = ROOT) -> set[tuple[str, str]]:
    """``(writer, module.name)``: an assignment, augmented assignment, ``del``, ``setattr`` or mutating call
    (``.update``, ``.add``, ``.append``, ``.setdefault``, ...) on a global of another leanpass module, reached
    through the module (``mod.TABLE[k] = v``) or through the imported name (``from mod import TABLE``)."""
    mods, trees = parse(root)
    found = set()
    for name, tree in trees.items():
        aliases = {local: target for target, local, _ in imports(name, tree, mods) if local and target in mods}
        names = _imported_names(name, tree, mods)
        for node in _nodes(tree):  # the imported containers' contents: ``TABLE[k] = v``, ``TABLE.update(...)``
            if isinstance(node, (ast.Assign, ast.AugAssign, ast.Delete)):
                for target in node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]:
                    if isinstance(target, ast.Subscript) and isinstance(target.value, ast.Name) \
                            and target.value.id in names:
                        found.add((name, names[target.value.id]))
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in _MUTATORS \
                    and isinstance(node.func.value, ast.Name) and node.func.value.id in names:
                found.add((name, names[node.func.value.id]))
        for node in _nodes(tree):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Delete):
                targets = list(node.targets)
            elif isinstance(node, ast.Call):
                func = node.func
                if isinstance(func, ast.Name) and func.id in ("setattr", "delattr") and len(node.args) >= 2:
                    obj, attr = node.args[0], node.args[1]
                    if isinstance(obj, ast.Name) and obj.id in aliases:
                        what = attr.value if isinstance(attr, ast.Constant) else ast.unparse(attr)
                        found.add((name, f"{aliases[obj.id]}.{what}"))
                elif isinstance(func, ast.Attribute) and func.attr in _MUTATORS:
                    written = _module_attribute(func.value, aliases)
                    if written is None and node.args and isinstance(func.value, ast.Name) \
                            and func.value.id in ("dict", "set", "list"):  # dict.__setitem__(mod.TABLE, ...)
                        written = _module_attribute(node.args[0], aliases)
                    if written is not None:
                        found.add((name, written))
            for target in targets:
                for t in ast.walk(target) if isinstance(target, (ast.Tuple, ast.List)) else [target]:
                    written = _module_attribute(t, aliases)
                    if written is not None:
                        found.add((name, written))
    return found


def _check(found: set, allowed: set, what: str) -> None:
    new, gone = found - allowed, allowed - found
    show = (lambda s: sorted(map(sorted, s))) if what == "cycles" else sorted
    assert not new, f"{what}: {show(new)}"
    assert not gone, f"{what}: fixed, delete from the allowlist: {show(gone)}"


def test_every_module_has_a_layer():
    missing = sorted({name.split(".")[1] for name in modules() if name != "leanpass"} - set(LAYERS))
    assert not missing, f"modules and packages of leanpass missing from the layer table (LAYERS): {missing}"


def test_no_upward_import():
    _check(upward_imports(), UPWARD_ALLOWED, "upward imports")


def test_no_import_cycle():
    _check(cycles(), CYCLES_ALLOWED, "cycles")


def test_no_module_writes_another_modules_globals():
    _check(global_writes(), WRITES_ALLOWED, "cross-module global writes")


def test_import_leanpass_loads_only_the_core():
    code = "import sys, leanpass; print('\\n'.join(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    loaded = set(out.split())
    assert "leanpass.core.tensor" in loaded
    early = sorted(m for m in loaded for lazy in NOT_ON_IMPORT if m == lazy or m.startswith(lazy + "."))
    assert not early, f"`import leanpass` loads modules meant to load on first use: {early}"


# ----- the guard itself -----------------------------------------------------------------------------

@pytest.fixture
def copy(tmp_path):
    shutil.copytree(ROOT, tmp_path / "leanpass", ignore=shutil.ignore_patterns("__pycache__", "*.npz"))
    return tmp_path / "leanpass"


def _append(path: Path, code: str) -> None:
    path.write_text(path.read_text() + "\n" + code + "\n")
    parse.cache_clear()


def test_guard_reports_an_upward_import_and_a_cycle(copy):
    _append(copy / "functional" / "binary.py", "def f():\n    from .. import nn\n    return nn\n")
    assert ("leanpass.functional.binary", "leanpass.nn") in upward_imports(copy)
    _append(copy / "functional" / "_tangent.py", "def g():\n    from . import binary\n    return binary\n")
    found = cycles(copy)
    assert any({"leanpass.functional._tangent", "leanpass.functional.binary"} <= c for c in found)


def test_guard_reports_a_write_to_another_modules_global(copy):
    _append(copy / "numpy" / "basics.py", "from ..core import tensor as _t\n_t._no_grad_entered = 1\n"
            "setattr(_t, '_PLAIN', ())\n_t._ABSENT.x = 1\n")
    _append(copy / "numpy" / "math.py", "from ..functional import _lift\n_lift.ARRAYS += (int,)\n"
            "def h():\n    _lift.CACHE.setdefault(1, 2)\n")
    found = global_writes(copy)
    assert {("leanpass.numpy.basics", "leanpass.core.tensor._no_grad_entered"),
            ("leanpass.numpy.basics", "leanpass.core.tensor._PLAIN"),
            ("leanpass.numpy.basics", "leanpass.core.tensor._ABSENT"),
            ("leanpass.numpy.math", "leanpass.functional._lift.ARRAYS"),
            ("leanpass.numpy.math", "leanpass.functional._lift.CACHE")} <= found
