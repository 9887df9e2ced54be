"""``vmap``: a vectorising map, by batching the NumPy calls that LeanPass's code makes.

``vmap(f)(xs)`` runs ``f`` once, on stand-ins for the arrays: a :class:`Batched` holds the array
of every example with the mapped axis in front, and implements NumPy's protocols
(``__array_ufunc__``, ``__array_function__``, operators, indexing, the array methods). Each
NumPy call on one becomes one NumPy call on the whole batch, by a rule per NumPy function
(:data:`RULES`, written in ``rules.py``; the ufuncs share one, in ``batched.py``). LeanPass's
ops, their VJP rules, the losses and the optimizers are written with NumPy calls, so they run
on stand-ins unchanged, inside Tensors too: ``vmap(grad(loss))`` gives per-example gradients,
``grad`` of a function using ``vmap`` differentiates it, and ``vmap(vmap(f))`` nests (each
``vmap`` call is a level; a stand-in of an inner level holds stand-ins of the outer levels).

What cannot be batched says so: a NumPy function without a rule raises a TypeError naming it,
and a stand-in refuses to become a plain array (``np.asarray``, ``float``): there is no loop
over the examples to fall back on. ``bool()`` of a batched value answers when every example
agrees, and raises otherwise.

>>> import numpy as np
>>> import leanpass as lp
>>> lp.vmap(lambda x: np.sum(x * x))(np.array([[1.0, 2.0], [3.0, 4.0]]))
array([ 5., 25.])
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core import engine
from ...core.tensor import Tensor, _const, apply
from ...core.tree import _REGISTRY, TreeDef, child_names, tree_flatten, tree_unflatten
from ...functional import _lift
from ...functional._registry import op
from .batched import RULES as RULES  # (NumPy function -> its batching rule)
from .batched import Batched, Level, _is, _ndim


# ----- the transform ----------------------------------------------------------------------------------
def _to_batch(x: Any, axis: int, lvl: Level) -> tuple[Any, Any]:
    """Op: the batched value of ``x`` (mapped over ``axis``); its VJP takes the batch back out."""
    if type(x) is Tensor:  # replayed in a higher-order pass: only the rule is used
        return None, functools.partial(_to_batch_vjp, axis, lvl)
    v = x if axis == 0 else np.moveaxis(x, axis, 0)
    return Batched(v, lvl), functools.partial(_to_batch_vjp, axis, lvl)


def _to_batch_vjp(axis: int, lvl: Level, g: Any) -> tuple[Any, None, None]:
    return _lifted(_from_batch, "vmap_unbatch", g, axis, lvl), None, None


def _from_batch(x: Any, axis: int, lvl: Level) -> tuple[Any, Any]:
    """Op: the array of every example (batch axis at ``axis``) of a value of one example."""
    data = x._data if type(x) is Tensor else x
    batched = _is(data, lvl)
    rule = functools.partial(_from_batch_vjp, axis, lvl, batched)
    if type(x) is Tensor:
        return None, rule
    v = x.value if batched else np.broadcast_to(x, (lvl.size,) + np.shape(x))
    return (v if axis == 0 else np.moveaxis(v, 0, axis)), rule


def _from_batch_vjp(axis: int, lvl: Level, batched: bool, g: Any) -> tuple[Any, None, None]:
    if batched:
        return _lifted(_to_batch, "vmap_batch", g, axis, lvl), None, None
    return np.sum(g, axis=axis), None, None


def _sum_batch(x: Any, lvl: Level) -> tuple[Any, Any]:
    """Op: the sum over the examples of level ``lvl`` (where a per-example gradient meets an input
    that all examples share); its VJP gives every example the same cotangent."""
    rule = functools.partial(_sum_batch_vjp, lvl)
    if type(x) is Tensor:
        return None, rule
    return _summed(x, lvl), rule


def _summed(x: Any, lvl: Level) -> Any:
    if x.level is lvl:
        return np.sum(x.value, axis=0)
    return Batched(_summed(x.value, lvl), x.level)  # a newer level's stand-in holding lvl's


def _sum_batch_vjp(lvl: Level, g: Any) -> tuple[Any, None]:
    return _lifted(_spread_op, "vmap_spread", g, lvl), None


def _spread_op(x: Any, lvl: Level) -> tuple[Any, Any]:
    """Op: ``x`` given to every example of level ``lvl`` (the transpose of ``_sum_batch``)."""
    rule = functools.partial(_spread_vjp, lvl)
    if type(x) is Tensor:
        return None, rule
    return _spread_in(x, lvl), rule


def _spread_in(x: Any, lvl: Level) -> Any:
    if type(x) is Batched and x.level.id > lvl.id:
        return Batched(_spread_in(x.value, lvl), x.level)
    return Batched(np.broadcast_to(x, (lvl.size,) + np.shape(x)), lvl)


def _spread_vjp(lvl: Level, g: Any) -> tuple[Any, None]:
    return _lifted(_sum_batch, "vmap_sum", g, lvl), None


# Their forward-mode rules (``jvp`` through a vmap): each op is linear, so it maps the tangent
# as it maps the value. A tangent the same for every example (not batched at ``lvl``) sums to
# ``size`` times itself.
def _to_batch_jvp(ts: tuple[Any, ...], ans: Any, x: Any, axis: int, lvl: Level) -> Any:
    return _lifted(_to_batch, "vmap_batch", ts[0], axis, lvl)


def _from_batch_jvp(ts: tuple[Any, ...], ans: Any, x: Any, axis: int, lvl: Level) -> Any:
    return _lifted(_from_batch, "vmap_unbatch", ts[0], axis, lvl)


def _sum_batch_jvp(ts: tuple[Any, ...], ans: Any, x: Any, lvl: Level) -> Any:
    t = ts[0]
    if lvl not in _levels(t._data if type(t) is Tensor else t):
        return t * lvl.size
    return _lifted(_sum_batch, "vmap_sum", t, lvl)


def _spread_jvp(ts: tuple[Any, ...], ans: Any, x: Any, lvl: Level) -> Any:
    return _lifted(_spread_op, "vmap_spread", ts[0], lvl)


# Their records: ops of vmap's own, kept out of functional.OPS (internal); each op's VJP keeps only
# its parameters (the axis and the level).
op("vmap_batch", _to_batch, jvp=_to_batch_jvp, keeps=("axis", "lvl"), internal=True)
op("vmap_unbatch", _from_batch, jvp=_from_batch_jvp, keeps=("axis", "lvl"), internal=True)
op("vmap_sum", _sum_batch, jvp=_sum_batch_jvp, keeps=("lvl",), internal=True)
op("vmap_spread", _spread_op, jvp=_spread_jvp, keeps=("lvl",), internal=True)


def _lifted(op: Any, name: str, x: Any, *params: Any) -> Any:
    """``op`` on raw values, or recorded on a Tensor (a differentiable backward pass)."""
    if type(x) is Tensor:
        return apply(op, name, x, *params)
    return op(x, *params)[0]


def _levels(x: Any) -> list[Level]:
    out = []
    while type(x) is Batched:
        out.append(x.level)
        x = x.value
    return out


def settle(c: Any, parent: Any, mask: int) -> Any:
    """A cotangent for ``parent``, summed over the examples of every ``vmap`` level that the
    differentiation (marks ``mask``) encloses and that ``parent`` is not batched over: there
    one input serves all examples, so its gradient is the sum of theirs. (A level made outside
    the differentiation, as in ``vmap(grad(f))``, keeps its examples apart.)"""
    data = c._data if type(c) is Tensor else c
    if type(data) is not Batched:
        return c
    depth = -1 if mask == -1 else mask.bit_length() - 2  # the transform whose bit is 2 << its level
    if data.level.depth <= depth and type(data.value) is not Batched:
        return c  # vmap(grad(f)): the examples stay apart (the common case, decided quickly)
    mine = _levels(parent._data)
    for lvl in _levels(data):
        if lvl.depth > depth and lvl not in mine:
            c = _lifted(_sum_batch, "vmap_sum", c, lvl)
    return c


def _spread_target(index: Any, x: Any, copy: bool) -> Any:
    """``x`` made batched over every level of a batched ``index``: a plain array can neither be
    indexed by per-example indices nor receive per-example values (``copy``: writable)."""
    if type(x) is not np.ndarray and type(x) is not Batched:
        return x  # a Tensor (a replayed rule): its own indexing records the op
    for p in index if type(index) is tuple else (index,):
        if type(p) is Batched:
            for lvl in reversed(_levels(p)):
                if lvl not in _levels(x):
                    x = _spread_in(x, lvl)
                    if copy:
                        x = x.copy()
    return x


def _prefix(axes: Any, td: TreeDef, where: str) -> list[Any]:
    """One axis per leaf of ``td``, from ``axes``: an int or None for the whole subtree, or a
    container of the same structure (a pytree prefix)."""
    if axes is None or isinstance(axes, (int, np.integer)):
        return [None if axes is None else int(axes)] * _count(td)
    kind = td.kind
    if kind is None or not (type(axes) is kind or (kind in (list, tuple) and type(axes) in (list, tuple))):
        raise ValueError(
            f"vmap: {where} is {_show(axes)} but the argument there is "
            f"{'a leaf' if kind is None else 'a ' + kind.__name__}; give an int or None for it, or a "
            "container of the same structure."
        )
    if kind is dict:
        if set(axes) != set(td.meta):
            raise ValueError(f"vmap: {where} has keys {sorted(axes)} but the argument has keys {sorted(td.meta)}")
        subs = [axes[k] for k in td.meta]
        names = [f"{where}[{k!r}]" for k in td.meta]
    elif kind in (list, tuple):
        if len(axes) != len(td.children):
            raise ValueError(
                f"vmap: {where} has {len(axes)} entries but the argument there has {len(td.children)}"
            )
        subs = list(axes)
        names = [f"{where}[{i}]" for i in range(len(subs))]
    else:
        children, _ = _REGISTRY[kind][0](axes)
        subs = list(children)
        names = [f"{where}.<child {i}>" for i in range(len(subs))]
    out = []
    for sub, child, name in zip(subs, td.children, names):
        out.extend(_prefix(sub, child, name))
    return out


def _count(td: TreeDef) -> int:
    return 1 if td.kind is None else sum(_count(c) for c in td.children)


def _show(axes: Any) -> str:
    return repr(axes) if len(repr(axes)) < 60 else type(axes).__name__


def _paths(td: TreeDef, where: str) -> list[str]:
    """The names of ``td``'s leaves for messages: ``args[0]['w']``, ``args[0].layers[0].weight``."""
    if td.kind is None:
        return [where]
    if td.kind is dict:
        keys = [f"[{k!r}]" for k in td.meta]
    elif td.kind in (list, tuple):
        keys = [f"[{i}]" for i in range(len(td.children))]
    else:  # a module: its fields' names
        keys = child_names(td.kind, len(td.children))
    return [p for k, c in zip(keys, td.children) for p in _paths(c, where + k)]


def _sizes_differ(td: TreeDef, kwargs: dict[str, Any], leaves: list[Any], axes: list[Any],
                  axes_tree: Any) -> ValueError:
    """The error for mapped axes of different sizes: what each argument has, and the ``in_axes`` that
    maps only the arguments that agree on the batch size (the others look shared: parameters, say)."""
    names = _paths(td, "args")
    owners = [f"args[{k}]" for k, child in enumerate(td.children) for _ in range(_count(child))]
    if kwargs:
        k_td = tree_flatten(kwargs)[1]
        names += _paths(k_td, "kwargs")
        owners += [f"kwargs[{key!r}]" for key, child in zip(k_td.meta, k_td.children) for _ in range(_count(child))]
    groups: dict[str, list[tuple[str, int, int]]] = {}  # argument -> (leaf, size, axis) of each mapped leaf
    for name, owner, x, ax in zip(names, owners, leaves, axes):
        shape = np.shape(x._data if type(x) is Tensor else x)
        if ax is not None and -len(shape) <= ax < len(shape):
            groups.setdefault(owner, []).append((name, shape[ax], ax))
    sizes = {owner: sorted({n for _, n, _ in g}) for owner, g in groups.items()}
    agreed = [s[0] for s in sizes.values() if len(s) == 1]
    # The batch size: the one most arguments agree on (on a tie, the later one's: data comes after parameters).
    batch = max(reversed(agreed), key=agreed.count) if agreed else None
    tie = batch is not None and sum(agreed.count(n) == agreed.count(batch) for n in set(agreed)) > 1
    said = []
    for owner, g in groups.items():
        if len(sizes[owner]) == 1:
            said.append(f"{owner} has size {g[0][1]} along axis {g[0][2]}")
        else:
            firsts = {n: f"{name} has size {n} along axis {ax}" for name, n, ax in reversed(g)}
            said.append(f"{owner} has leaves of sizes {', '.join(map(str, sizes[owner]))} "
                        f"({'; '.join(firsts[n] for n in sizes[owner])})")
    message = (f"vmap: mapped axes have different sizes: {'; '.join(said)}. Every mapped argument needs the same "
               "batch size.")
    shared = [owner for owner in groups if sizes[owner] != [batch]]
    positional = [o for o in shared if o.startswith("args")]
    if positional and len(shared) < len(groups):
        entries = []
        for k in range(len(td.children)):
            given = axes_tree[k] if type(axes_tree) is tuple else axes_tree
            entries.append("None" if f"args[{k}]" in positional else repr(given))
        suggestion = f"in_axes=({', '.join(entries)}{',' if len(entries) == 1 else ''})"
        if tie:
            message += (" Map with None the arguments that are the same for every example (parameters, say): "
                        f"for a batch of size {batch}, {suggestion}.")
        else:
            it = "it" if len(positional) == 1 else "them"
            message += (f" If {' and '.join(positional)} {'is' if it == 'it' else 'are'} the same for every example "
                        f"(parameters, say), do not map {it}: {suggestion} maps only the arguments of batch size "
                        f"{batch}.")
    if any(o.startswith("kwargs") for o in (groups if tie else shared)):
        message += " Keyword arguments are always mapped over their axis 0: pass a shared one positionally, with None."
    return ValueError(message)


def vmap(f: Callable[..., Any], in_axes: Any = 0, out_axes: Any = 0) -> Callable[..., Any]:
    """Map ``f`` over an axis of its arguments, as one vectorised call: the results stacked.

    ``vmap(f)(xs)`` equals stacking ``f(x)`` for each ``x`` in ``xs``, computed by batching
    every NumPy call ``f`` makes. ``in_axes`` says which axis of each argument is mapped: an
    int, ``None`` (the argument is shared by all examples), or a tuple with one entry per
    argument, each itself an int, None or a pytree prefix of that argument (a dict of axes for
    a dict of arrays). ``out_axes`` places the batch axis in the outputs likewise. It nests
    (``vmap(vmap(f))``) and composes with ``grad`` both ways: ``vmap(grad(loss), in_axes=(None,
    0, 0))(params, xs, ys)`` gives one gradient per example.

    >>> import leanpass as lp
    >>> w = np.array([1.0, 2.0])
    >>> lp.vmap(lambda x, w: x @ w, in_axes=(0, None))(np.eye(2), w)
    array([1., 2.])
    >>> lp.vmap(lp.grad(lambda w, x: (x @ w) ** 2), in_axes=(None, 0))(w, np.eye(2))
    array([[2., 0.],
           [0., 4.]])
    """

    @functools.wraps(f)
    def mapped(*args: Any, **kwargs: Any) -> Any:
        axes_tree = tuple(in_axes) if type(in_axes) is list else in_axes
        if type(axes_tree) is tuple and len(axes_tree) != len(args):
            raise ValueError(
                f"vmap: in_axes has {len(axes_tree)} entries but the function got {len(args)} "
                "arguments; give one entry per argument (None for one that is not mapped)."
            )
        leaves, td = tree_flatten(args)
        axes = _prefix(axes_tree, td, "in_axes")
        if kwargs:  # (keyword arguments are mapped over their first axis, as in JAX)
            k_leaves, k_td = tree_flatten(kwargs)
            leaves, axes = leaves + k_leaves, axes + [0] * len(k_leaves)
        size = None
        for i, (x, ax) in enumerate(zip(leaves, axes)):
            if ax is None:
                continue
            shape = np.shape(x._data if type(x) is Tensor else x)
            if not -len(shape) <= ax < len(shape):
                raise ValueError(
                    f"vmap: in_axes={ax} for {_arg_name(td, kwargs, i)} of shape {shape}, which has no axis {ax}"
                    f"{' (it is a scalar: map it with None)' if not shape else ''}."
                )
            n = shape[ax]
            if size is None:
                size = n
            elif n != size:
                raise _sizes_differ(td, kwargs, leaves, axes, axes_tree)
        if size is None:
            raise ValueError("vmap: in_axes maps no argument (all None); map at least one axis")
        lvl = Level(size, engine._level.get())
        ins = []
        entered: dict[tuple[int, int], Any] = {}  # a Tensor at several places (tied): entered once
        for x, ax in zip(leaves, axes):
            if ax is None:
                ins.append(x)
                continue
            ax %= np.ndim(x._data if type(x) is Tensor else x)
            if type(x) is Tensor:
                key = (id(x), ax)
                if key not in entered:
                    entered[key] = _enter(x, ax, lvl)
                ins.append(entered[key])
            else:
                ins.append(_enter(x, ax, lvl))
        n_args = _count(td)
        new_kwargs = tree_unflatten(k_td, ins[n_args:]) if kwargs else {}
        out = f(*tree_unflatten(td, ins[:n_args]), **new_kwargs)
        out_leaves, out_td = tree_flatten(out)
        oaxes = _prefix(out_axes, out_td, "out_axes")
        outs = [_leave(o, ax, lvl, out_td, i) for i, (o, ax) in enumerate(zip(out_leaves, oaxes))]
        return tree_unflatten(out_td, outs)

    return mapped


def _enter(x: Any, axis: int, lvl: Level) -> Any:
    if type(x) is Tensor:
        if x._marks:
            return apply(_to_batch, "vmap_batch", x, axis, lvl)
        return _const(_to_batch(x._data, axis, lvl)[0])
    if not isinstance(x, _lift.ARRAYS):  # (a stand-in of jit stays one: np.asarray would make it a constant)
        x = np.asarray(x)
    v = np.moveaxis(x, axis, 0) if axis else x
    if type(v) is np.ndarray:
        v = v.view()
        v.flags.writeable = False  # (nothing the user holds is written to)
    return Batched(v, lvl)


def _arg_name(td: TreeDef, kwargs: dict[str, Any], i: int) -> str:
    """The name of argument leaf ``i`` in an error message: ``args[0]['w']``, ``kwargs['x']``."""
    paths = _paths(td, "args")
    if kwargs:
        paths += _paths(tree_flatten(kwargs)[1], "kwargs")
    return paths[i]


def _leave(o: Any, axis: Any, lvl: Level, td: TreeDef, i: int) -> Any:
    """Output leaf ``i`` (of the output tree ``td``) as the array of all examples."""
    data = o._data if type(o) is Tensor else o
    if axis is None:
        if _is(data, lvl):
            raise ValueError(f"vmap: out_axes is None for {_paths(td, 'output')[i]}, but it differs between examples")
        return o
    if not isinstance(data, (np.ndarray, np.generic, Batched, int, float, bool)):
        raise TypeError(f"vmap: the mapped function returned {type(o).__name__} at {_paths(td, 'output')[i]}; "
                        "return arrays or Tensors")
    nd = _ndim(data) + 1
    if not -nd <= axis < nd:
        raise ValueError(f"vmap: out_axes={axis} for {_paths(td, 'output')[i]}, which has {nd - 1} axes per example")
    axis %= nd
    if type(o) is Tensor:
        if o._marks:
            return apply(_from_batch, "vmap_unbatch", o, axis, lvl)
        return _const(_from_batch(data, axis, lvl)[0])
    return _from_batch(data, axis, lvl)[0]


from . import rules as _batching_rules  # noqa: E402, F401 (registers the rules of NumPy's functions)

engine.set_cotangent_hook(settle)  # the reverse pass sums per-example gradients where they meet shared inputs
_lift.set_index_spread(_spread_target)
_lift.register_array_type(Batched)  # (an operand like an array; code that takes "an array, else convert" keeps it)
