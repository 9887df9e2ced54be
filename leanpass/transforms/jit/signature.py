"""The signature of a call of a jitted function (what must match for a program to be replayed), and
the check of it written out as Python for the last signature replayed.

A signature is the arguments' pytree structure (``leanpass.core.tree``), each leaf's key (an
array's or Tensor's type, shape, dtype and layout, a number's type, a static leaf's value), the
static arguments' values and which Tensors are one object (tied weights).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ...core import tree as _tree
from ...core.tensor import Tensor
from .recording import _NUMBERS


class _UnderVmapError(Exception):
    """The arguments (or the results) are batched by an enclosing vmap: the function runs without jit."""



def _leaf_key(x: Any, where: str) -> Any:
    t = type(x)
    if t is Tensor:
        d = x._data
        if type(d) is np.ndarray:
            return (t, d.shape, d.dtype, _layout(d), x._marks != 0)
        if getattr(d, "_lp_batched", False):
            raise _UnderVmapError
        return (t, type(d), x._marks != 0)
    if t is np.ndarray:
        return (t, x.shape, x.dtype, _layout(x))
    if t in _NUMBERS:
        return t
    if isinstance(x, np.generic):
        return (t,)
    if isinstance(x, np.random.Generator):
        return np.random.Generator
    if isinstance(x, np.ndarray):
        raise TypeError(f"{where}: ndarray subclasses ({t.__name__}) are not supported as jit arguments")
    if getattr(x, "_lp_batched", False):
        raise _UnderVmapError
    if not isinstance(x, _STATIC_LEAVES) and not callable(x):
        raise TypeError(
            f"{where}: an argument holds a {t.__name__}, which is neither an array, a Tensor, a number nor a "
            "pytree of them; jit could not see a change to what it holds. Pass arrays, register the class "
            "with lp.register_pytree, or pass it as a static argument (static_argnums; then it must be "
            "hashable, and a new value traces again)"
        )
    return ("static", t, x)


# Leaves that are part of a structure rather than data (an optimizer state's treedef, a dtype, ...).
_STATIC_LEAVES = (str, bytes, type(None), type, np.dtype, _tree.TreeDef, slice, type(Ellipsis))


def _tie(leaves: list[Any], leaf_keys: list[Any]) -> bool:
    """A Tensor at several leaves (tied weights) is one input, as in ``grad``: each later place's key
    becomes ``("tied", first place)``, so the tie pattern is part of the signature. True if any is."""
    first: dict[int, int] = {}
    for k, x in enumerate(leaves):
        if type(x) is Tensor:
            j = first.setdefault(id(x), k)
            if j != k:
                leaf_keys[k] = ("tied", j)
    return len(first) < sum(type(x) is Tensor for x in leaves)


def _layout(a: np.ndarray) -> Any:
    """None for a C-contiguous array, else its strides: views and copies depend on the layout."""
    return None if a.flags.c_contiguous else a.strides


def _checker(key: Any, nargs: int) -> Any:
    """``check(args, kwargs) -> raw leaves or None`` for one signature, written out as Python.

    It tests each argument's type, structure, shape and dtype in line (a frozen module by its
    remembered flatten) and returns the arrays the program takes, or None when anything
    differs (the general path then flattens and looks the signature up). None when the
    structure has containers it cannot write a test for.
    """
    spec, statics, leaf_keys = key
    names: dict[str, Any] = {"Tensor": Tensor, "nd": np.ndarray, "tree": _tree, "CACHE": _tree._CACHE,
                             "Gen": np.random.Generator, "REGISTRY": _tree._REGISTRY}
    lines = ["def check(args, kwargs):", f"    if len(args) != {nargs}: return None"]
    leaves: list[str] = []
    counter = [0]
    tensors: dict[int, str] = {}  # leaf index -> the name of its Tensor
    separate: dict[Any, list[str]] = {}  # Tensors of one key that must be separate objects (not tied)

    def name(obj: Any) -> str:
        n = f"n{len(names)}"
        names[n] = obj
        return n

    def tmp() -> str:
        counter[0] += 1
        return f"t{counter[0]}"

    def leaf(expr: str) -> None:
        k = leaf_keys[len(leaves)]
        t = tmp()
        lines.append(f"    {t} = {expr}")
        if type(k) is tuple and k[0] == "tied":  # the Tensor of an earlier place (the program ignores it)
            lines.append(f"    if {t} is not {tensors[k[1]]}: return None")
            leaves.append("None")
            return
        if type(k) is tuple and k[0] is Tensor:
            tensors[len(leaves)] = t
            separate.setdefault(k, []).append(t)
            d = tmp()
            lines.append(f"    if type({t}) is not Tensor: return None")
            lines.append(f"    {d} = {t}._data")
            if len(k) == 5:
                lines.append(f"    if type({d}) is not nd or {d}.shape != {k[1]!r} or {d}.dtype is not {name(k[2])}:")
                lines.append("        return None")
                lines.append(_layout_check(d, k[3]))
            else:
                lines.append(f"    if type({d}) is not {name(k[1])}: return None")
            lines.append(f"    if {'not ' if k[-1] else ''}{t}._marks: return None")
            leaves.append(d)
            return
        if type(k) is tuple and k[0] is np.ndarray:
            lines.append(f"    if type({t}) is not nd or {t}.shape != {k[1]!r} or {t}.dtype is not {name(k[2])}:")
            lines.append("        return None")
            lines.append(_layout_check(t, k[3]))
        elif k in _NUMBERS:
            lines.append(f"    if type({t}) is not {k.__name__}: return None")
        elif k is np.random.Generator:
            lines.append(f"    if not isinstance({t}, Gen): return None")
        elif type(k) is tuple and len(k) == 1:
            lines.append(f"    if type({t}) is not {name(k[0])}: return None")
        else:  # a static leaf
            c = name(k[2])
            lines.append(f"    if type({t}) is not {name(k[1])} or ({t} is not {c} and {t} != {c}): return None")
        leaves.append(t)

    def node(s: Any, expr: str) -> None:
        if s.kind is None:
            leaf(expr)
            return
        t = tmp()
        lines.append(f"    {t} = {expr}")
        if s.kind in _tree._FROZEN_CLASSES:  # a frozen module: its remembered flatten (tree.py), if it has one
            if not _tree._frozen(s):  # (it never has)
                raise _NoCheckerError
            td = s
            h = tmp()
            lines.append(f"    if type({t}) is not {name(td.kind)}: return None")
            lines.append(f"    {h} = {t}.__dict__.get(CACHE)")
            lines.append(f"    if {h} is None or {h}[0] is not tree._epoch or {h}[2] is not {name(td)}: return None")
            lines.append(f"    {h} = {h}[1]")
            for i in range(_tree.tree_num_leaves(td)):
                leaf(f"{h}[{i}]")
            return
        kind, meta, kids = s
        if kind is tuple or kind is list:
            lines.append(f"    if type({t}) is not {kind.__name__} or len({t}) != {len(kids)}: return None")
            for i, c in enumerate(kids):
                node(c, f"{t}[{i}]")
        elif kind is dict:
            lines.append(f"    if type({t}) is not dict or tuple({t}) != {name(meta)}: return None")
            for k_, c in zip(meta, kids):
                node(c, f"{t}[{name(k_)}]")
        elif kind is type(None):
            lines.append(f"    if {t} is not None: return None")
        elif _tree._REGISTRY.get(kind) is None and issubclass(kind, tuple):  # a NamedTuple
            lines.append(f"    if type({t}) is not {name(kind)}: return None")
            for i, c in enumerate(kids):
                node(c, f"{t}[{i}]")
        elif kind in _tree._REGISTRY:  # a registered class (an optimizer's state): its own flatten, called
            entry, ch, m = name(_tree._REGISTRY[kind]), tmp(), tmp()
            lines.append(f"    if type({t}) is not {name(kind)} or REGISTRY.get({name(kind)}) is not {entry}: "
                         "return None")
            lines.append(f"    {ch}, {m} = {entry}[0]({t})")
            lines.append(f"    if {m} is not {name(meta)} and {m} != {name(meta)}: return None")
            lines.append(f"    {ch} = tuple({ch})")
            lines.append(f"    if len({ch}) != {len(kids)}: return None")
            for i, c in enumerate(kids):
                node(c, f"{ch}[{i}]")
        else:
            raise _NoCheckerError

    try:
        (arg_kind, _, arg_kids), kw_spec = spec[2]
        static = dict(statics)
        for i, c in enumerate(arg_kids):
            if i in static:
                v = name(static[i])
                lines.append(f"    if args[{i}] is not {v} and args[{i}] != {v}: return None")
            else:
                node(c, f"args[{i}]")
        if kw_spec.kind is dict and not kw_spec.meta:  # (no keyword arguments: ``**kwargs`` is a dict)
            lines.append("    if kwargs: return None")
        else:
            node(kw_spec, "kwargs")
    except _NoCheckerError:
        return None
    for group in separate.values():  # (only Tensors alike can be one object; a set is quicker beyond five)
        if len(group) > 5:
            lines.append(f"    if len({{{', '.join(group)}}}) != {len(group)}: return None")
        elif len(group) > 1:
            pairs = [f"{a} is {b}" for i, a in enumerate(group) for b in group[i + 1:]]
            lines.append(f"    if {' or '.join(pairs)}: return None")
    lines.append(f"    return [{', '.join(leaves)}]")
    exec(compile("\n".join(lines) + "\n", "<leanpass jit check>", "exec"), names)  # noqa: S102
    return names["check"]


def _layout_check(x: str, layout: Any) -> str:
    if layout is None:
        return f"    if not {x}.flags.c_contiguous: return None"
    return f"    if {x}.flags.c_contiguous or {x}.strides != {layout!r}: return None"


class _NoCheckerError(Exception):
    """The signature has a container the written-out check does not know."""


def _leaf_names(args: tuple[Any, ...], kwargs: dict[str, Any], statics: list[tuple[int, Any]]) -> list[str]:
    """The name of each argument leaf in an error message: ``args[0]['w']``, ``kwargs['x']``."""
    static = dict(statics)

    def paths(td: Any, where: str) -> list[str]:
        if td.kind is None:
            return [where]
        keys = [f"[{k!r}]" for k in td.meta] if td.kind is dict else [f"[{i}]" for i in range(len(td.children))]
        return [p for k, c in zip(keys, td.children) for p in paths(c, where + k)]

    dynamic = tuple(None if i in static else a for i, a in enumerate(args))
    td_args, td_kwargs = _tree.tree_flatten((dynamic, kwargs))[1].children
    return paths(td_args, "args") + paths(td_kwargs, "kwargs")


def _difference(old: Any, new: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                statics: list[tuple[int, Any]]) -> str:
    """What changed from signature ``old`` to ``new``, for the warning about traces for new signatures."""
    if old is None or old[0] != new[0] or len(old[2]) != len(new[2]):
        return "the last change: the structure of the arguments"
    for (i, a), (_, b) in zip(old[1], new[1]):
        if a is not b and a != b:
            return f"the last change: static argument {i}, {a!r:.40} then {b!r:.40}"
    for k, (a, b) in enumerate(zip(old[2], new[2])):
        if a != b:
            names = _leaf_names(args, kwargs, statics)
            name = names[k]
            ties = [f"the same Tensor as {names[x[1]]}" if type(x) is tuple and x[0] == "tied" else "" for x in (a, b)]
            if ties[0] or ties[1]:  # a tied Tensor (one object at several places)
                return f"the last change: {name}, {ties[0] or 'a Tensor of its own'} then {ties[1] or 'one of its own'}"
            if type(a) is tuple and type(b) is tuple and a[0] == b[0] and a[0] in (np.ndarray, Tensor) and len(a) > 3:
                for i, what in ((1, "shape"), (2, "dtype"), (3, "layout")):
                    if a[i] != b[i]:
                        show = [repr(a[1]), str(a[2]), f"strides {a[3]}" if a[3] else "C order"][i - 1]
                        then = [repr(b[1]), str(b[2]), f"strides {b[3]}" if b[3] else "C order"][i - 1]
                        return f"the last change: {name}, {what} {show} then {then}"
            return f"the last change: {name}"
    return "the last change: the arguments"
