"""Pytrees: nests of dict / list / tuple (and registered classes) with arrays or Tensors at the leaves.

>>> leaves, treedef = tree_flatten({"w": [1.0, 2.0], "b": 3.0})
>>> leaves
[1.0, 2.0, 3.0]
>>> tree_unflatten(treedef, [10.0, 20.0, 30.0])
{'w': [10.0, 20.0], 'b': 30.0}
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, NamedTuple

from ..functional._lift import is_tensor


class TreeDef(NamedTuple):
    """The structure of a pytree without its leaves: a node kind, its metadata and children."""

    kind: Any  # None for a leaf, else the container type
    meta: Any  # dict keys, a registered class's static data, ...
    children: tuple[TreeDef, ...]


_LEAF = TreeDef(None, None, ())
_treedef = tuple.__new__  # builds a TreeDef in C (its generated __new__ is Python)
_NOTHING = object()
# type -> (flatten(obj) -> (children, meta), unflatten(meta, children) -> obj)
_REGISTRY: dict[type, tuple[Callable[[Any], tuple[Iterable[Any], Any]], Callable[[Any, list[Any]], Any]]] = {
    list: (lambda x: (x, None), lambda meta, ch: ch),  # children are only iterated; ``ch`` is a fresh list
    tuple: (lambda x: (x, None), lambda meta, ch: tuple(ch)),
    dict: (lambda x: (x.values(), tuple(x)), lambda meta, ch: dict(zip(meta, ch))),
    type(None): (lambda x: ((), None), lambda meta, ch: None),
}

# ----- remembered flattens of frozen modules --------------------------------------------------------
# A frozen module (a frozen dataclass, registered with frozen=True) never changes after it is built:
# flattening it again walks the same objects, so the result can be remembered on the instance (in
# its __dict__, under _CACHE). Sound because an entry is kept only when every node of the tree is
# frozen too (tuples, None, frozen registered classes; a list or dict anywhere could be mutated),
# each entry records the registry's epoch (register_pytree starts a new one: a leaf type may have
# become a container), and tree_unflatten only records a module built from a treedef that a walk
# produced and from leaves that a walk would take as leaves. An entry holds the leaves and the
# treedef, never the module: no reference cycle. Module.replace and copy / deepcopy / pickle
# (Module.__getstate__) leave the entry behind.
_CACHE = "_tree_flatten_cache"  # -> (epoch, leaves tuple, treedef)
_FROZEN_CLASSES: set[type] = set()
_epoch = object()
# id -> (the treedef of a walked frozen tree (kept alive: ids stay unique), its builder once written)
_TRUSTED: dict[int, tuple[TreeDef, Any]] = {}
_LEAF_TYPES: set[type] = set()  # types met as leaves that are not containers (one lookup each)


def register_pytree(
    cls: type,
    flatten: Callable[[Any], tuple[Iterable[Any], Any]],
    unflatten: Callable[[Any, list[Any]], Any],
    *,
    frozen: bool = False,
) -> None:
    """Teach the pytree functions a container type.

    ``flatten(obj) -> (children, meta)`` (children: a list, tuple or any iterable) and
    ``unflatten(meta, children) -> obj`` (children: a new list). ``frozen=True`` promises that
    the class is a frozen dataclass whose ``flatten`` returns its own field values (as
    ``leanpass.nn`` modules do): ``tree_flatten`` may then remember an instance's result.

    >>> class Pair:
    ...     def __init__(self, a, b): self.a, self.b = a, b
    >>> register_pytree(Pair, lambda p: ([p.a, p.b], None), lambda meta, ch: Pair(*ch))
    >>> tree_flatten(Pair(1.0, 2.0))[0]
    [1.0, 2.0]
    """
    global _epoch
    _REGISTRY[cls] = (flatten, unflatten)
    (_FROZEN_CLASSES.add if frozen else _FROZEN_CLASSES.discard)(cls)
    _epoch = object()  # a leaf type may now be a container: forget every remembered flatten
    _TRUSTED.clear()
    _LEAF_TYPES.clear()


def _entry(x: Any) -> Any:
    entry = _REGISTRY.get(type(x))
    if entry is None and isinstance(x, tuple) and hasattr(x, "_fields") and type(x) is not TreeDef:  # a NamedTuple
        cls = type(x)
        return (lambda t: (t, None), lambda meta, ch: cls(*ch))
    return entry


def tree_flatten(tree: Any) -> tuple[list[Any], TreeDef]:
    """The leaves of ``tree`` in order, and its structure.

    A ``TreeDef`` in the tree is a leaf. A frozen module is walked once: later flattens of it (or
    of any tree holding it) take its leaves and structure as remembered.

    >>> tree_flatten((1.0, {"a": 2.0}))[0]
    [1.0, 2.0]
    """
    leaves: list[Any] = []
    return leaves, _walk(tree, leaves, True)


def _frozen(td: TreeDef) -> bool:
    """Whether every node of ``td`` is a leaf, a tuple, None or a frozen dataclass registered frozen."""
    stack = [td]
    while stack:
        kind, _, kids = stack.pop()
        if kind is not None and kind is not tuple and kind is not type(None):
            params = getattr(kind, "__dataclass_params__", None)
            if kind not in _FROZEN_CLASSES or params is None or not params.frozen:
                return False
        stack.extend(kids)
    return True


def _walk(x: Any, leaves: list[Any], remember: bool = False) -> TreeDef:
    """The structure of ``x``, its leaves appended to ``leaves``. With ``remember``, a frozen module
    (the outermost ones) is taken from its remembered flatten, and its flatten is remembered."""
    # A module-level function, not a closure that calls itself: a self-referencing closure is a
    # reference cycle, which keeps ``leaves`` (and every array in it) alive until the cyclic GC runs.
    if remember and type(x) in _FROZEN_CLASSES:
        d = x.__dict__
        hit = d.get(_CACHE)
        if hit is not None and hit[0] is _epoch:
            leaves.extend(hit[1])
            return hit[2]  # (the very treedef remembered: lp.jit's signature check tests it by identity)
        start = len(leaves)
        treedef = _walk(x, leaves)
        if _frozen(treedef):
            d[_CACHE] = (_epoch, tuple(leaves[start:]), treedef)
            if len(_TRUSTED) >= 64:
                _TRUSTED.clear()
            _TRUSTED[id(treedef)] = (treedef, None)
        return treedef
    entry = _REGISTRY.get(type(x))
    if entry is None:
        entry = _entry(x)  # a NamedTuple, or a leaf
        if entry is None:
            leaves.append(x)
            return _LEAF
    children, meta = entry[0](x)
    kids = []
    for c in children:
        if type(c) not in _REGISTRY and not isinstance(c, tuple):  # a leaf: no call for it
            leaves.append(c)
            kids.append(_LEAF)
        else:
            kids.append(_walk(c, leaves, remember))
    return _treedef(TreeDef, (type(x), meta, tuple(kids)))


def tree_unflatten(treedef: TreeDef, leaves: list[Any]) -> Any:
    """Rebuild a pytree of ``treedef``'s structure from ``leaves``.

    ``leaves`` must hold exactly as many leaves as the structure has (a ValueError otherwise).

    >>> leaves, treedef = tree_flatten([1.0, (2.0, 3.0)])
    >>> tree_unflatten(treedef, [4.0, 5.0, 6.0])
    [4.0, (5.0, 6.0)]
    >>> tree_unflatten(treedef, [4.0, 5.0])
    Traceback (most recent call last):
    ...
    ValueError: tree_unflatten: the structure has 3 leaves, but 2 were given
    """
    trusted = _TRUSTED.get(id(treedef))
    if trusted is not None and trusted[0] is treedef and type(leaves) is list:  # a frozen module
        if trusted[1] is None:
            trusted = _TRUSTED[id(treedef)] = (treedef, _builder(treedef))
        count, build = trusted[1]
        if len(leaves) != count:
            raise ValueError(f"tree_unflatten: the structure has {count} leaves, but {len(leaves)} were given")
        tree = build(leaves)
        for x in leaves:  # remember its flatten, unless a leaf given is a container
            if type(x) not in _LEAF_TYPES:
                if type(x) in _REGISTRY or isinstance(x, tuple):  # a container given as a leaf
                    return tree
                _LEAF_TYPES.add(type(x))
        tree.__dict__[_CACHE] = (_epoch, tuple(leaves), treedef)
        return tree
    it = iter(leaves)
    try:
        tree = next(it) if treedef[0] is None else _build(treedef, it)
        extra = next(it, _NOTHING) is not _NOTHING
    except StopIteration:
        extra = True
    if extra:
        raise ValueError(
            f"tree_unflatten: the structure has {tree_num_leaves(treedef)} leaves, but "
            f"{len(leaves)} were given"
        )
    return tree


def _builder(td: TreeDef, remember: bool = False) -> tuple[int, Callable[[list[Any]], Any]]:
    """``(leaf count, leaves -> tree)`` for a structure met again and again (a model's, each step).

    The function is written out as one Python expression, as ``dataclasses`` writes ``__init__``:
    ``u0(m0, [(u1(m1, [L[0], L[1]]), u1(m2, [L[2], L[3]]))])`` for an MLP of two Linear layers,
    so no walk over the structure is left to do. Very deep structures keep ``_build``. With
    ``remember`` (``lp.jit``'s outputs), each outermost frozen module is built by ``tree_unflatten``,
    which remembers its flatten: the next flatten of it (the next step's argument) is a lookup.
    """
    names: dict[str, Any] = {}
    count = [0]
    try:
        code = compile(f"lambda L: {_write(td, names, count, remember)}", "<leanpass tree_unflatten>", "eval")
    except (RecursionError, SyntaxError, MemoryError):  # too deep to write out
        return tree_num_leaves(td), lambda leaves: _build(td, iter(leaves))
    return count[0], eval(code, names)  # noqa: S307 - our own expression, written from the treedef


def _write(td: TreeDef, names: dict[str, Any], count: list[int], remember: Any = False, leaf: str = "L[{}]",
           stmts: list[str] | None = None) -> str:
    """The expression building ``td`` from the list ``L`` (or the leaves named by ``leaf``); ``names``
    gets what it refers to. ``remember``: see ``_builder``, or an epoch (see ``_statements``). Given
    ``stmts``, a class whose unflatten carries ``fields`` is built by statements appended there."""
    kind, meta, kids = td
    if kind is None:
        count[0] += 1
        return leaf.format(count[0] - 1)
    if remember is True and kind in _FROZEN_CLASSES:
        i = len(names)
        names[f"d{i}"], names["T"] = td, tree_unflatten
        start = count[0]
        count[0] += tree_num_leaves(td)
        return f"T(d{i}, L[{start}:{count[0]}])"
    if remember is not False and remember is not True and kind in _FROZEN_CLASSES and _frozen(td):
        i = len(names)
        start = count[0]
        built = _write(td, names, count, False, leaf, stmts)
        names[f"d{i}"], names["R"], names["E"] = td, _remember, remember
        return f"R({built}, ({''.join(leaf.format(k) + ', ' for k in range(start, count[0]))}), d{i}, E)"
    parts = [_write(k, names, count, remember, leaf, stmts) for k in kids]
    if kind is tuple:
        return f"({', '.join(parts)},)" if kids else "()"
    i = len(names)
    entry = _REGISTRY.get(kind)
    if entry is None:  # a NamedTuple
        names[f"u{i}"] = kind
        return f"u{i}({', '.join(parts)})"
    names[f"u{i}"], names[f"m{i}"] = entry[1], meta
    unflatten: Any = entry[1]
    fields = getattr(unflatten, "fields", None)
    if fields is not None and stmts is not None:  # (field, "ch" or "meta", index): its __dict__, written out
        names["NEW"], names[f"c{i}"] = object.__new__, unflatten.cls
        values = [parts[j] if where == "ch" else f"m{i}[{j}]" for _, where, j in fields]
        stmts.append(f"M{i} = NEW(c{i}); D = M{i}.__dict__; "
                     + "; ".join(f"D[{f!r}] = {v}" for (f, _, _), v in zip(fields, values)))
        return f"M{i}"
    return f"u{i}(m{i}, [{', '.join(parts)}])"


def _statements(td: TreeDef, names: dict[str, Any], leaf: str, epoch: Any) -> tuple[list[str], str]:
    """Statements and an expression building ``td`` from leaves named ``leaf.format(i)``, for a caller
    whose leaves are leaves of the walk that made ``td`` at ``epoch`` (``lp.jit``'s outputs): each
    outermost frozen module remembers its flatten, as ``tree_unflatten`` does it after checking the
    leaves. A registered unflatten may carry ``fields``, ``(name, "ch" or "meta", index)`` for each
    field, and ``cls``: it makes ``object.__new__(cls)`` with those values in its ``__dict__``, in order
    (leanpass.nn's modules); it is then written out inline. Raises RecursionError for a structure too
    deep to write out.
    """
    stmts: list[str] = []
    expr = _write(td, names, [0], epoch, leaf, stmts)
    return stmts, expr


def _remember(tree: Any, leaves: tuple[Any, ...], td: TreeDef, epoch: Any) -> Any:
    tree.__dict__[_CACHE] = (epoch, leaves, td)  # (of an older epoch, it is ignored as any such entry)
    return tree


def _build(td: TreeDef, it: Any) -> Any:
    kind, meta, kids = td  # a container: leaves are taken inline, here and in tree_unflatten
    children = []  # a loop, not a comprehension: no call of its own (Python 3.11)
    for c in kids:
        children.append(next(it) if c[0] is None else _build(c, it))
    if kind is tuple:
        return tuple(children)
    entry = _REGISTRY.get(kind)
    if entry is None:  # a NamedTuple
        return kind(*children)
    return entry[1](meta, children)


def tree_num_leaves(treedef: TreeDef) -> int:
    """How many leaves a structure holds.

    >>> tree_num_leaves(tree_flatten({"a": [1.0, 2.0], "b": None})[1])
    2
    """
    count = 0
    stack = [treedef]
    while stack:
        td = stack.pop()
        if td.kind is None:
            count += 1
        else:
            stack.extend(td.children)
    return count


def _describe(td: TreeDef) -> str:
    """A short name for the node at the top of ``td``, for messages."""
    if td.kind is None:
        return "a leaf"
    if td.kind is type(None):
        return "None"
    if td.kind is dict:
        return f"a dict with keys {list(td.meta)}"
    return f"a {td.kind.__name__} of {len(td.children)}"


def _first_difference(a: TreeDef, b: TreeDef) -> str:
    """Where two different structures first differ, in words (``a`` is the reference)."""
    stack = [(a, b, "")]
    while stack:
        x, y, path = stack.pop()
        where = path or "the root"
        if x.kind is not y.kind or len(x.children) != len(y.children):
            return f"at {where}: {_describe(x)} vs {_describe(y)}"
        if x.meta != y.meta:
            if x.kind is dict and set(x.meta) == set(y.meta):
                return (f"at {where}: the same dict keys in a different order ({list(x.meta)} vs "
                        f"{list(y.meta)}); build the dicts with their keys in the same order")
            return f"at {where}: {_describe(x)} vs {_describe(y)}"
        names = [f"[{k!r}]" for k in x.meta] if x.kind is dict else [f"[{i}]" for i in range(len(x.children))]
        stack.extend(reversed([(cx, cy, path + n) for cx, cy, n in zip(x.children, y.children, names)]))
    return "they are the same"


def repeats(leaves: list[Any]) -> bool:
    """Whether one object stands at several places of ``leaves`` (a Tensor there is tied weights:
    one variable, see ``leanpass.grad``).

    >>> a = [1.0]
    >>> repeats([a, a]), repeats([[1.0], [1.0]])
    (True, False)
    """
    return len(set(map(id, leaves))) < len(leaves)


def tree_map(f: Callable[..., Any], tree: Any, *rest: Any) -> Any:
    """Apply ``f`` to each leaf (and the matching leaves of ``rest``), keeping the structure.

    Tied leaves stay tied: where ``tree`` holds one Tensor at several places (and ``rest`` holds
    the same objects at those places too), ``f`` is called once and its result put at each.

    >>> tree_map(lambda x, y: x + y, {"a": 1.0, "b": [2.0]}, {"a": 10.0, "b": [20.0]})
    {'a': 11.0, 'b': [22.0]}
    """
    leaves, treedef = tree_flatten(tree)
    others = []
    for r in rest:
        r_leaves, r_def = tree_flatten(r)
        if r_def != treedef:
            raise ValueError(
                "tree_map: the trees have different structures "
                f"({_first_difference(treedef, r_def)}); every tree must have the same containers "
                "and keys as the first."
            )
        others.append(r_leaves)
    if not repeats(leaves):  # (the usual case)
        return tree_unflatten(treedef, [f(*xs) for xs in zip(leaves, *others)])
    out = []
    made: dict[tuple[int, ...], Any] = {}  # the ids of a repeated Tensor and its partners -> f's result
    for xs in zip(leaves, *others):
        if not is_tensor(xs[0]):
            out.append(f(*xs))
            continue
        key = tuple(map(id, xs))
        if key not in made:
            made[key] = f(*xs)
        out.append(made[key])
    return tree_unflatten(treedef, out)


# ----- names of the leaves, for error messages ------------------------------------------------------
# leanpass.nn's names of a module's children (``set_child_names``): ``names(cls, n)`` is
# ``[".weight", ".bias"]``, or None for a class it does not name.
_names: Callable[[type, int], list[str] | None] | None = None


def set_child_names(names: Callable[[type, int], list[str] | None]) -> None:
    """How error messages name the ``n`` children of a registered class ``cls``: ``names(cls, n)`` gives
    a list such as ``[".weight", ".bias"]``, or None to number them (``[0]``, ``[1]``).

    >>> import leanpass.nn  # (which names its modules' children as it loads)
    >>> child_names(leanpass.nn.Linear, 2)
    ['.weight', '.bias']
    """
    global _names
    _names = names


def child_names(cls: type, n: int) -> list[str]:
    """Names for the ``n`` children of a node of kind ``cls`` in error messages (``.weight``, ``[0]``).

    >>> child_names(tuple, 2)
    ['[0]', '[1]']
    """
    named = _names(cls, n) if _names is not None else None
    return named if named is not None and len(named) == n else [f"[{i}]" for i in range(n)]


def leaf_paths(treedef: TreeDef) -> list[str]:
    """The paths of a tree's leaves, in order (``.layers[0].weight``, ``['w']``), for error messages.

    >>> leaf_paths(tree_flatten({"w": [1.0, 2.0], "b": 3.0})[1])
    ["['w'][0]", "['w'][1]", "['b']"]
    """
    paths: list[str] = []
    stack = [(treedef, "")]
    while stack:
        td, path = stack.pop()
        if td.kind is None:
            paths.append(path or "<root>")
            continue
        names = [f"[{k!r}]" for k in td.meta] if td.kind is dict else child_names(td.kind, len(td.children))
        stack.extend(reversed([(c, path + n) for c, n in zip(td.children, names)]))
    return paths
