"""The batching rules of NumPy's functions (``np.sum``, ``np.einsum``, ``np.linalg.solve``, ...).

Each rule is called with the arguments of one per-example call and the ``vmap`` level, and
makes one NumPy call on the whole batch (the batched values have the batch axis in front).
They register themselves in ``leanpass.transforms.vmap.batching.RULES``; the ufuncs, indexing and the
operators are batched in ``leanpass.transforms.vmap.batching`` itself.

>>> import numpy as np
>>> from leanpass.transforms.vmap.batching import RULES
>>> np.einsum in RULES and np.linalg.solve in RULES
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from numpy._globals import _NoValue  # (np._NoValue, which NumPy 1.x's stubs do not declare)

from ...functional.linalg import rhs_is_vector
from .batched import (
    Batched,
    Level,
    _align,
    _axes,
    _axis,
    _batch_shape,
    _flat,
    _front,
    _is,
    _name,
    _ndim,
    _spread,
    _spread_like,
    register,
)

_f: Any  # (the loop variables of the registrations below)
_call: Any


def _rule(*funcs: Any) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def add(rule: Callable[..., Any]) -> Callable[..., Any]:
        for f in funcs:
            register(f, rule)
        return rule

    return add


def _no_out(func: Any, kwargs: dict[str, Any]) -> None:
    if kwargs and kwargs.pop("out", None) is not None:
        raise TypeError(f"vmap: {_name(func)} with out= would write into an array; use the result instead")


def _elementwise(func: Any) -> Callable[..., Any]:
    """A function whose array arguments broadcast together elementwise (where, clip, isclose, ...)."""

    def rule(lvl: Level, *args: Any, **kwargs: Any) -> Any:
        _no_out(func, kwargs)
        keys = [k for k, v in kwargs.items() if type(v) is Batched]
        vals, _ = _align(lvl, (*args, *(kwargs[k] for k in keys)))
        for k, v in zip(keys, vals[len(args):]):
            kwargs[k] = v
        return Batched(func(*vals[:len(args)], **kwargs), lvl)

    return rule


for _f in (np.clip, np.isclose, np.nan_to_num, np.round, np.around, np.real, np.copy, np.fix, np.sinc):
    register(_f, _elementwise(_f))


@_rule(np.where)
def _where(lvl: Level, cond: Any, *xy: Any) -> Any:
    if not xy:
        raise TypeError("vmap: np.where(condition) gives each example its own number of indices; "
                        "use np.where(condition, x, y)")
    vals, _ = _align(lvl, (cond, *xy))
    return Batched(np.where(*vals), lvl)


@_rule(np.select)
def _select(lvl: Level, condlist: Any, choicelist: Any, default: Any = 0) -> Any:
    vals, _ = _align(lvl, (*condlist, *choicelist, default))
    k = len(condlist)
    return Batched(np.select(vals[:k], vals[k:2 * k], vals[-1]), lvl)


def _spread_all(lvl: Level, *xs: Any) -> list[Any]:
    return [_spread(lvl, x) for x in xs]


def _reduction(func: Any, flat_none: bool = False, default: Any = None, call: Any = None) -> Callable[..., Any]:
    """A function of ``(a, axis, ...)`` reducing per example (``flat_none``: axis None means flattened).
    ``call`` does the same on the batch (``np.add.reduce`` for ``np.sum``: no Python wrapper)."""
    call = call or func

    def rule(lvl: Level, a: Any, axis: Any = default, *args: Any, **kwargs: Any) -> Any:
        _no_out(func, kwargs)
        if "axis" in kwargs:
            axis = kwargs.pop("axis")
        if not _is(a, lvl):
            raise TypeError(f"vmap: {_name(func)} with a batched argument other than the array has no batching rule")
        where = kwargs.get("where")
        if type(where) is Batched:
            kwargs["where"] = _align(lvl, (a, where))[0][1]
        v = a.value
        nd = v.ndim - 1
        flat = axis is None and flat_none
        if flat:
            v = _flat(v)
            ax: Any = 1
        elif nd == 0 and axis in (None, 0, -1, ()):
            ax = () if axis is None or axis == () else None  # a 0-d example: nothing to reduce
            if ax is None:
                raise np.exceptions.AxisError(axis, 0)
        else:
            ax = _axes(axis, nd)
        out = func(v, ax, *args, **kwargs) if args else call(v, axis=ax, **kwargs)
        if flat and kwargs.get("keepdims"):  # (argmax(keepdims=True) of the flattened example: all axes kept, size 1)
            out = out.reshape(out.shape[:1] + (1,) * nd)
        return Batched(out, lvl)

    return rule


for _f, _call in ((np.sum, np.add.reduce), (np.prod, np.multiply.reduce), (np.max, np.maximum.reduce),
                 (np.min, np.minimum.reduce), (np.amax, np.maximum.reduce), (np.amin, np.minimum.reduce)):
    register(_f, _reduction(_f, call=_call))
for _f in (np.mean, np.any, np.all, np.std, np.var, np.ptp,
           np.nansum, np.nanmean, np.nanprod, np.nanmax, np.nanmin, np.nanstd, np.nanvar, np.median,
           np.nanmedian, np.count_nonzero):
    register(_f, _reduction(_f))
if hasattr(np.linalg, "vector_norm"):  # (NumPy >= 2)
    register(np.linalg.vector_norm, _reduction(np.linalg.vector_norm))
for _f in (np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.cumsum, np.cumprod, np.nancumsum, np.nancumprod):
    register(_f, _reduction(_f, flat_none=True))
for _f in (np.sort, np.argsort):
    register(_f, _reduction(_f, flat_none=True, default=-1))


def _partition_rule(func: Any) -> Callable[..., Any]:
    def rule(lvl: Level, a: Any, kth: Any, axis: Any = -1, **kwargs: Any) -> Any:
        if type(kth) is Batched:
            raise TypeError(f"vmap: {_name(func)} with a batched kth has no batching rule")
        v = a.value
        if axis is None:
            v, ax = _flat(v), 1
        else:
            ax = _axis(axis, v.ndim - 1)
        return Batched(func(v, kth, ax, **kwargs), lvl)

    return rule


register(np.partition, _partition_rule(np.partition))
register(np.argpartition, _partition_rule(np.argpartition))


@_rule(np.diff)
def _diff(lvl: Level, a: Any, n: int = 1, axis: int = -1, prepend: Any = _NoValue, append: Any = _NoValue) -> Any:
    parts = [p for p in (prepend, append) if p is not _NoValue]
    if parts:  # join them first, per example
        ax = axis
        pieces = [a]
        nd = a.ndim
        shape = a.shape
        def full(p: Any) -> Any:
            if _ndim(p) == 0:
                s = list(shape)
                s[_axis(ax, nd) - 1] = 1
                return np.broadcast_to(p, tuple(s))
            return p
        if prepend is not _NoValue:
            pieces.insert(0, full(prepend))
        if append is not _NoValue:
            pieces.append(full(append))
        a = np.concatenate(pieces, axis=axis)
    a = a if _is(a, lvl) else Batched(_spread(lvl, a), lvl)
    return Batched(np.diff(a.value, n, axis=_axis(axis, a.ndim)), lvl)


# shapes
@_rule(np.shape)
def _shape(lvl: Level, a: Any) -> Any:
    return a.shape if _is(a, lvl) else np.shape(a)


@_rule(np.ndim)
def _ndim_rule(lvl: Level, a: Any) -> Any:
    return a.ndim


@_rule(np.size)
def _size(lvl: Level, a: Any, axis: Any = None) -> Any:
    return a.size if axis is None else a.shape[axis]


@_rule(np.result_type)
def _result_type(lvl: Level, *xs: Any) -> Any:
    return np.result_type(*(x.dtype if type(x) is Batched else x for x in xs))


@_rule(np.iscomplexobj)
def _iscomplexobj(lvl: Level, x: Any) -> bool:
    return x.dtype.kind == "c"


@_rule(np.isrealobj)
def _isrealobj(lvl: Level, x: Any) -> bool:
    return x.dtype.kind != "c"


@_rule(np.reshape)
def _reshape(lvl: Level, a: Any, shape: Any = None, order: str = "C", **kwargs: Any) -> Any:
    if shape is None:
        shape = kwargs.pop("newshape")
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    v = a.value
    return Batched(v.reshape(_batch_shape(v, shape), order=order), lvl)


@_rule(np.ravel)
def _ravel(lvl: Level, a: Any, order: str = "C") -> Any:
    v = a.value
    return Batched(v.reshape(_batch_shape(v, (-1,)), order=order), lvl)


@_rule(np.transpose)
def _transpose(lvl: Level, a: Any, axes: Any = None) -> Any:
    nd = a.ndim
    perm = (0,) + (tuple(range(nd, 0, -1)) if axes is None else tuple(_axis(x, nd) for x in axes))
    return Batched(np.transpose(a.value, perm), lvl)


if hasattr(np, "permute_dims"):  # (NumPy >= 2)
    register(np.permute_dims, _transpose)


@_rule(np.swapaxes)
def _swapaxes(lvl: Level, a: Any, axis1: int, axis2: int) -> Any:
    nd = a.ndim
    return Batched(np.swapaxes(a.value, _axis(axis1, nd), _axis(axis2, nd)), lvl)


@_rule(np.moveaxis)
def _moveaxis(lvl: Level, a: Any, source: Any, destination: Any) -> Any:
    nd = a.ndim
    src = _axes(source if isinstance(source, (tuple, list)) else (source,), nd)
    dst = _axes(destination if isinstance(destination, (tuple, list)) else (destination,), nd)
    return Batched(np.moveaxis(a.value, src, dst), lvl)


@_rule(np.expand_dims)
def _expand_dims(lvl: Level, a: Any, axis: Any) -> Any:
    out = a.ndim + (len(axis) if isinstance(axis, (tuple, list)) else 1)
    return Batched(np.expand_dims(a.value, _axes(tuple(axis) if isinstance(axis, list) else axis, out)), lvl)


@_rule(np.squeeze)
def _squeeze(lvl: Level, a: Any, axis: Any = None) -> Any:
    v = a.value
    if axis is None:
        axis = tuple(i for i, s in enumerate(a.shape) if s == 1)
    return Batched(np.squeeze(v, _axes(axis, a.ndim)), lvl)


@_rule(np.broadcast_to)
def _broadcast_to(lvl: Level, array: Any, shape: Any, subok: bool = False) -> Any:
    shape = (shape,) if isinstance(shape, (int, np.integer)) else tuple(shape)
    v = _front(array.value, array.ndim, len(shape))
    return Batched(np.broadcast_to(v, (v.shape[0],) + shape), lvl)


@_rule(np.broadcast_arrays)
def _broadcast_arrays(lvl: Level, *args: Any, subok: bool = False) -> Any:
    shape = np.broadcast_shapes(*(np.shape(a) for a in args))
    return tuple(np.broadcast_to(a, shape) for a in args)


def _atleast_rule(k: int) -> Callable[..., Any]:
    def rule(lvl: Level, *arys: Any) -> Any:
        outs: list[Any] = []
        for a in arys:
            if not _is(a, lvl):
                outs.append((np.atleast_1d, np.atleast_2d, np.atleast_3d)[k - 1](a))
                continue
            nd = a.ndim
            v = a.value
            if nd < k:
                s = v.shape
                if k == 3 and nd == 2:
                    v = v.reshape(s + (1,))
                elif k == 3 and nd == 1:
                    v = v.reshape(s[:1] + (1,) + s[1:] + (1,))
                else:
                    v = v.reshape(s[:1] + (1,) * (k - nd) + s[1:])
            outs.append(Batched(v, lvl))
        return outs[0] if len(outs) == 1 else outs

    return rule


register(np.atleast_1d, _atleast_rule(1))
register(np.atleast_2d, _atleast_rule(2))
register(np.atleast_3d, _atleast_rule(3))


def _joined(lvl: Level, arrays: Any) -> tuple[list[Any], int]:
    arrays = list(arrays)
    nd = max(_ndim(a) for a in arrays)
    return [_spread(lvl, a) for a in arrays], nd


@_rule(np.concatenate)
def _concatenate(lvl: Level, arrays: Any, axis: Any = 0, out: Any = None, **kwargs: Any) -> Any:
    _no_out(np.concatenate, {"out": out})
    vals, nd = _joined(lvl, arrays)
    if axis is None:
        return Batched(np.concatenate([_flat(v) for v in vals], axis=1, **kwargs), lvl)
    return Batched(np.concatenate(vals, axis=_axis(axis, nd), **kwargs), lvl)


@_rule(np.stack)
def _stack(lvl: Level, arrays: Any, axis: int = 0, out: Any = None, **kwargs: Any) -> Any:
    _no_out(np.stack, {"out": out})
    vals, nd = _joined(lvl, arrays)
    return Batched(np.stack(vals, axis=_axis(axis, nd + 1), **kwargs), lvl)


@_rule(np.hstack)
def _hstack(lvl: Level, tup: Any, **kwargs: Any) -> Any:
    arrs = [np.atleast_1d(a) for a in tup]
    return np.concatenate(arrs, axis=0 if all(_ndim(a) == 1 for a in arrs) else 1)


@_rule(np.vstack)
def _vstack(lvl: Level, tup: Any, **kwargs: Any) -> Any:
    return np.concatenate([np.atleast_2d(a) for a in tup], axis=0)


@_rule(np.column_stack)
def _column_stack(lvl: Level, tup: Any) -> Any:
    return np.concatenate([np.reshape(a, (-1, 1)) if _ndim(a) < 2 else a for a in tup], axis=1)


def _split_rule(func: Any) -> Callable[..., Any]:
    def rule(lvl: Level, ary: Any, indices_or_sections: Any, axis: int = 0) -> Any:
        return [Batched(p, lvl) for p in func(ary.value, indices_or_sections, axis=_axis(axis, ary.ndim))]

    return rule


register(np.split, _split_rule(np.split))
register(np.array_split, _split_rule(np.array_split))


@_rule(np.tile)
def _tile(lvl: Level, a: Any, reps: Any) -> Any:
    reps = (reps,) if isinstance(reps, (int, np.integer)) else tuple(reps)
    nd = a.ndim
    v = _front(a.value, nd, len(reps))
    reps = (1,) * (max(nd, len(reps)) - len(reps)) + reps
    return Batched(np.tile(v, (1,) + reps), lvl)


@_rule(np.repeat)
def _repeat(lvl: Level, a: Any, repeats: Any, axis: Any = None) -> Any:
    if type(repeats) is Batched:
        raise TypeError("vmap: np.repeat with batched repeats gives each example its own size")
    v = a.value
    if axis is None:
        return Batched(np.repeat(_flat(v), repeats, axis=1), lvl)
    return Batched(np.repeat(v, repeats, axis=_axis(axis, a.ndim)), lvl)


@_rule(np.flip)
def _flip(lvl: Level, m: Any, axis: Any = None) -> Any:
    return Batched(np.flip(m.value, _axes(axis, m.ndim)), lvl)


@_rule(np.roll)
def _roll(lvl: Level, a: Any, shift: Any, axis: Any = None) -> Any:
    v = a.value
    if axis is None:
        return Batched(np.roll(_flat(v), shift, axis=1).reshape(v.shape), lvl)
    return Batched(np.roll(v, shift, axis=_axes(axis, a.ndim)), lvl)


@_rule(np.diagonal)
def _diagonal(lvl: Level, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Any:
    nd = a.ndim
    return Batched(np.diagonal(a.value, offset, _axis(axis1, nd), _axis(axis2, nd)), lvl)


@_rule(np.trace)
def _trace(lvl: Level, a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None,
           out: Any = None) -> Any:
    _no_out(np.trace, {"out": out})
    nd = a.ndim
    return Batched(np.trace(a.value, offset, _axis(axis1, nd), _axis(axis2, nd), dtype), lvl)


@_rule(np.diag)
def _diag(lvl: Level, v: Any, k: int = 0) -> Any:
    if v.ndim == 2:
        return Batched(np.diagonal(v.value, k, 1, 2), lvl)
    n = v.shape[0] + abs(k)
    eye = np.eye(n, k=k, dtype=bool)
    out = np.zeros((v.value.shape[0], n, n), v.dtype)
    out[:, eye] = v.value
    return Batched(out, lvl)


def _triangle(func: Any) -> Callable[..., Any]:
    def rule(lvl: Level, m: Any, k: int = 0) -> Any:
        return Batched(func(m.value, k), lvl)  # (both act on the last two axes)

    return rule


register(np.tril, _triangle(np.tril))
register(np.triu, _triangle(np.triu))


@_rule(np.pad)
def _pad(lvl: Level, array: Any, pad_width: Any, mode: Any = "constant", **kwargs: Any) -> Any:
    if type(pad_width) is Batched or any(type(v) is Batched for v in kwargs.values()):
        raise TypeError("vmap: np.pad with batched widths or values has no batching rule")
    widths = np.broadcast_to(np.asarray(pad_width, dtype=np.intp), (array.ndim, 2))
    return Batched(np.pad(array.value, ((0, 0), *map(tuple, widths)), mode, **kwargs), lvl)


@_rule(np.take)
def _take(lvl: Level, a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    _no_out(np.take, {"out": out})
    if mode != "raise":
        raise TypeError(f"vmap: np.take with mode={mode!r} has no batching rule")
    if axis is None:
        a = np.reshape(a, (-1,))
        axis = 0
    nd = _ndim(a)
    if not _is(a, lvl):
        a = Batched(_spread(lvl, a), lvl)
    return a[(slice(None),) * (_axis(axis, nd) - 1) + (indices,)]


@_rule(np.take_along_axis)
def _take_along_axis(lvl: Level, arr: Any, indices: Any, axis: Any = -1) -> Any:
    if axis is None:
        arr, indices, axis = np.reshape(arr, (-1,)), np.reshape(indices, (-1,)), 0
    nd = _ndim(arr)
    av = arr.value if _is(arr, lvl) else arr[None]
    iv = indices.value if _is(indices, lvl) else indices[None]
    return Batched(np.take_along_axis(av, iv, axis=_axis(axis, nd)), lvl)


@_rule(np.searchsorted)
def _searchsorted(lvl: Level, a: Any, v: Any, side: Any = "left", sorter: Any = None) -> Any:
    if _is(a, lvl) or type(sorter) is Batched:
        raise TypeError("vmap: np.searchsorted over a batched sorted array has no batching rule")
    return Batched(np.searchsorted(a, v.value, side, sorter), lvl)


def _like_rule(func: Any) -> Callable[..., Any]:
    def rule(lvl: Level, a: Any, *args: Any, shape: Any = None, **kwargs: Any) -> Any:
        pe = a.shape if shape is None else ((shape,) if isinstance(shape, (int, np.integer)) else tuple(shape))
        if func is np.full_like:
            fill = args[0] if args else kwargs.pop("fill_value")
            dtype = args[1] if len(args) > 1 else kwargs.pop("dtype", None)
            out = np.zeros_like(a.value, dtype=dtype, shape=(lvl.size,) + pe)
            out[...] = _spread_like(lvl, fill, out, 0)
            return Batched(out, lvl)
        return Batched(func(a.value, *args, shape=(lvl.size,) + pe, **kwargs), lvl)

    return rule


for _f in (np.zeros_like, np.ones_like, np.empty_like, np.full_like):
    register(_f, _like_rule(_f if _f is not np.empty_like else np.zeros_like))


@_rule(np.copyto)
def _copyto(lvl: Level, dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> None:
    if not _is(dst, lvl):
        raise TypeError("vmap: np.copyto would write batched values into a plain array")
    if type(where) is Batched:
        mask = _front(where.value, where.ndim, dst.ndim)
        dst.value[...] = np.where(mask, _spread_like(lvl, src, dst.value, 0), dst.value)
        return
    np.copyto(dst.value, _spread_like(lvl, src, dst.value, 0), casting=casting, where=where)


def _all_of(func: Any) -> Callable[..., Any]:
    """allclose / array_equal: one answer per example."""

    def rule(lvl: Level, a: Any, b: Any, *args: Any, **kwargs: Any) -> Any:
        va, vb = _spread_all(lvl, a, b)
        if func is np.array_equal:
            if np.shape(a) != np.shape(b):
                return Batched(np.zeros(lvl.size, bool), lvl)
            same = va == vb if not kwargs.get("equal_nan") else (va == vb) | (np.isnan(va) & np.isnan(vb))
        else:
            same = np.isclose(va, vb, *args, **kwargs)
        return Batched(np.all(_flat(same), axis=1), lvl)

    return rule


register(np.allclose, _all_of(np.allclose))
register(np.array_equal, _all_of(np.array_equal))


def _refuse(what: str) -> Callable[..., Any]:
    def rule(lvl: Level, *args: Any, **kwargs: Any) -> Any:
        raise TypeError(f"vmap: {what} gives each example its own number of results, so it cannot be batched")

    return rule


for _f in (np.nonzero, np.argwhere, np.flatnonzero, np.unique, np.extract, np.compress, np.trim_zeros):
    register(_f, _refuse(_name(_f)))


# ----- products --------------------------------------------------------------------------------------
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


@_rule(np.einsum)
def _einsum(lvl: Level, subscripts: Any, *operands: Any, **kwargs: Any) -> Any:
    _no_out(np.einsum, kwargs)
    if not isinstance(subscripts, str):
        raise TypeError("vmap: np.einsum in its interleaved form has no batching rule; pass a subscripts string")
    text = subscripts.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    ins = lhs.split(",")
    if not arrow:  # NumPy's implicit output: ..., then the letters used once, sorted
        letters = lhs.replace("...", "").replace(",", "")
        out = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    z = next(c for c in _LETTERS if c not in text)
    vals = []
    for i, x in enumerate(operands):
        if _is(x, lvl):
            ins[i] = z + ins[i]
            vals.append(x.value)
        else:
            vals.append(x)
    return Batched(np.einsum(f"{','.join(ins)}->{z}{out}", *vals, **kwargs), lvl)


@_rule(np.einsum_path)
def _einsum_path(lvl: Level, subscripts: Any, *operands: Any, **kwargs: Any) -> Any:
    """The contraction order for one example's shapes (the batch letter only rides along)."""
    shapes = [np.empty(np.shape(x)) for x in operands]  # (np.shape gives an example's shape)
    return np.einsum_path(subscripts, *shapes, **kwargs)


@_rule(np.tensordot)
def _tensordot(lvl: Level, a: Any, b: Any, axes: Any = 2) -> Any:
    na, nb = _ndim(a), _ndim(b)
    ax_a: list[Any]
    ax_b: list[Any]
    if isinstance(axes, (int, np.integer)):
        if not 0 <= axes <= min(na, nb):
            raise ValueError(f"tensordot: axes={axes} but the operands have {na} and {nb} axes")
        ax_a, ax_b = list(range(na - axes, na)), list(range(axes))
    else:
        ax_a, ax_b = ([x] if isinstance(x, (int, np.integer)) else list(x) for x in axes)
    ax_a = [_axis(int(x), na) - 1 for x in ax_a]
    ax_b = [_axis(int(x), nb) - 1 for x in ax_b]
    la = [_LETTERS[i] for i in range(na)]
    lb = [_LETTERS[na + i] for i in range(nb)]
    for i, j in zip(ax_a, ax_b):
        lb[j] = la[i]
    out = [c for i, c in enumerate(la) if i not in ax_a] + [c for j, c in enumerate(lb) if j not in ax_b]
    return _einsum(lvl, f"{''.join(la)},{''.join(lb)}->{''.join(out)}", a, b)


@_rule(np.dot)
def _dot(lvl: Level, a: Any, b: Any, out: Any = None) -> Any:
    _no_out(np.dot, {"out": out})
    na, nb = _ndim(a), _ndim(b)
    if na == 0 or nb == 0:
        return np.multiply(a, b)
    if nb <= 2:
        return np.matmul(a, b)
    return _tensordot(lvl, a, b, ([na - 1], [nb - 2]))


@_rule(np.vdot)
def _vdot(lvl: Level, a: Any, b: Any) -> Any:
    return np.sum(np.reshape(a, (-1,)) * np.reshape(b, (-1,)))


@_rule(np.inner)
def _inner(lvl: Level, a: Any, b: Any) -> Any:
    if _ndim(a) == 0 or _ndim(b) == 0:
        return np.multiply(a, b)
    return _tensordot(lvl, a, b, ([-1], [-1]))


@_rule(np.outer)
def _outer(lvl: Level, a: Any, b: Any, out: Any = None) -> Any:
    _no_out(np.outer, {"out": out})
    return np.multiply(np.reshape(a, (-1, 1)), np.reshape(b, (1, -1)))


@_rule(np.kron)
def _kron(lvl: Level, a: Any, b: Any) -> Any:
    if _ndim(a) != _ndim(b):
        raise TypeError("vmap: np.kron of operands with different numbers of axes has no batching rule")
    nd = _ndim(a)
    va, vb = _spread_all(lvl, a, b)
    n = lvl.size
    shape_a, shape_b = va.shape[1:], vb.shape[1:]
    ea = va.reshape((n,) + tuple(x for s in shape_a for x in (s, 1)))
    eb = vb.reshape((n,) + tuple(x for s in shape_b for x in (1, s)))
    del nd
    return Batched((ea * eb).reshape((n,) + tuple(p * q for p, q in zip(shape_a, shape_b))), lvl)


# ----- windows (convolutions) -------------------------------------------------------------------------
_sliding = np.lib.stride_tricks.sliding_window_view


@_rule(_sliding)
def _sliding_window_view(lvl: Level, x: Any, window_shape: Any, axis: Any = None, **kwargs: Any) -> Any:
    nd = x.ndim
    if axis is None:
        axis = tuple(range(nd))
    return Batched(_sliding(x.value, window_shape, axis=_axes(axis, nd), **kwargs), lvl)


# ----- linear algebra: NumPy's batches over leading axes natively ----------------------------------------
def _stacked(func: Any) -> Callable[..., Any]:
    """A function of matrices that NumPy applies to stacks of them (inv, det, cholesky, ...)."""

    def rule(lvl: Level, a: Any, *args: Any, **kwargs: Any) -> Any:
        if any(type(x) is Batched for x in args):
            raise TypeError(f"vmap: {_name(func)} with a batched argument other than the matrix has no batching rule")
        out = func(a.value, *args, **kwargs)
        if isinstance(out, tuple):  # (slogdet, eigh, svd, qr: named tuples of arrays)
            return type(out)(*(Batched(o, lvl) for o in out))
        return Batched(out, lvl)

    return rule


for _f in (np.linalg.inv, np.linalg.det, np.linalg.slogdet, np.linalg.cholesky, np.linalg.eigh, np.linalg.eigvalsh,
           np.linalg.svd, np.linalg.qr, np.linalg.pinv, np.linalg.matrix_power, np.linalg.eigvals, np.linalg.eig):
    register(_f, _stacked(_f))


@_rule(np.linalg.solve)
def _solve(lvl: Level, a: Any, b: Any) -> Any:
    vector = rhs_is_vector(_ndim(a), _ndim(b))  # (per example, as NumPy reads it)
    av, bv = _spread(lvl, a), _spread(lvl, b)
    if vector:
        bv = bv[..., None]
    # one rank for both, the per-example batch axes lined up from the right behind the batch axis
    # (NumPy would line them up with it), and no rank-dependent reading of b is left to NumPy
    nd = max(av.ndim, bv.ndim) - 1
    out = np.linalg.solve(_front(av, av.ndim - 1, nd), _front(bv, bv.ndim - 1, nd))
    return Batched(out[..., 0] if vector else out, lvl)


@_rule(np.linalg.norm)
def _norm(lvl: Level, x: Any, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Any:
    nd = x.ndim
    v = x.value
    if axis is None:
        if ord is None:
            out = np.linalg.norm(_flat(v), axis=1)
            return Batched(out.reshape(out.shape + (1,) * nd) if keepdims else out, lvl)
        axis = tuple(range(nd))
    ax = _axes(axis, nd)
    return Batched(np.linalg.norm(v, ord, ax, keepdims), lvl)


def _matrix_transpose(lvl: Level, x: Any) -> Any:
    return Batched(np.swapaxes(x.value, -1, -2), lvl)


# (NumPy >= 2 has them; a rule is registered under a function's own name only, never under another's)
for _f in (getattr(np.linalg, "matrix_transpose", None), getattr(np, "matrix_transpose", None)):
    if _f is not None:
        register(_f, _matrix_transpose)


