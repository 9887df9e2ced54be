"""Products and running totals: ``prod``, ``cumsum``, ``cumprod``. Each returns ``(ans, vjp)``.

The product rules are exact where entries are 0 (any number of them, at every order): without
zeros they divide (``g * ans / x``); with zeros they form, for each entry, the product of the
others with no division, which costs memory quadratic in the length of the reduced axis, only
then. Each op's forward-mode rule ``_<op>_jvp(tangents, ans, x, ...)`` follows it (see
``_tangent.py``), exact at zeros in the same way, declared in their records.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._registry import op
from ._tangent import of_first
from .reductions import _restore, _shape

Axis = Any  # None | int | tuple[int, ...]
Tangents = tuple[Any, ...]  # a forward-mode rule's tangents, one per input (see _tangent.py)


def _axes(ndim: int, axis: Axis) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(ndim))
    return tuple(sorted(a % ndim for a in (axis if isinstance(axis, tuple) else (axis,)))) if ndim else ()


def prod(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:
    """Product over ``axis``. Cotangent ``g * (product of the other entries)``, exact at zeros.

    >>> prod(np.array([2.0, 3.0, 4.0]))[1](np.array(1.0))
    (array([12.,  8.,  6.]),)
    >>> prod(np.array([2.0, 0.0, 4.0]))[1](np.array(1.0))
    (array([0., 8., 0.]),)
    """
    shape = _shape(x)
    ans = np.prod(x, axis=axis, keepdims=keepdims)

    def vjp(g: Any) -> tuple[Any]:
        spread = _restore(g, shape, axis, keepdims)
        if not np.any(x == 0):
            return (spread * (_restore(ans, shape, axis, keepdims) / x),)
        return (spread * _others(x, _axes(len(shape), axis)),)

    return ans, vjp


def _prod_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    """``sum(t * (product of the other entries))`` over ``axis``: the VJP's factors, summed instead of spread."""
    t = ts[0]
    if not np.any(x == 0):
        return np.sum(t * (_restore(ans, _shape(x), axis, keepdims) / x), axis=axis, keepdims=keepdims)
    return np.sum(t * _others(x, _axes(len(_shape(x)), axis)), axis=axis, keepdims=keepdims)


op("prod", prod, jvp=_prod_jvp, keeps=("x", "ans"), numpy=(np.prod,))


def _others(x: Any, axes: tuple[int, ...]) -> Any:
    """For each entry of ``x``, the product of the other entries of its slice over ``axes``."""
    shape = _shape(x)
    kept = tuple(a for a in range(len(shape)) if a not in axes)
    n = math.prod(shape[a] for a in axes)
    y = np.reshape(np.transpose(x, kept + axes), tuple(shape[a] for a in kept) + (n,))
    square = np.where(np.eye(n, dtype=bool), 1, np.expand_dims(y, -2))  # row j: the slice with x_j = 1
    others = np.reshape(np.prod(square, axis=-1), tuple(shape[a] for a in kept + axes))
    return np.transpose(others, tuple(np.argsort(kept + axes)))


def cumsum(x: Any, axis: int | None = None) -> tuple[Any, Any]:
    """Running sum along ``axis`` (of the flattened input when None). Cotangent: the running sum of
    ``g`` from the end.

    >>> cumsum(np.array([1.0, 2.0, 3.0]))[1](np.array([1.0, 1.0, 1.0]))
    (array([3., 2., 1.]),)
    """
    shape = _shape(x)
    ans = np.cumsum(x, axis=axis)
    ax = 0 if axis is None else axis
    return ans, lambda g: (np.reshape(_from_end(g, ax), shape),)


op("cumsum", cumsum, jvp=of_first(cumsum), numpy=(np.cumsum,))


def _from_end(g: Any, axis: int) -> Any:
    """The running sum of ``g`` along ``axis``, from the last entry back."""
    return np.flip(np.cumsum(np.flip(g, axis), axis), axis)


def cumprod(x: Any, axis: int | None = None) -> tuple[Any, Any]:
    """Running product along ``axis`` (of the flattened input when None), exact at zeros.

    Cotangent of ``x_j``: ``sum_{i >= j} g_i * prod_{k <= i, k != j} x_k``.

    >>> cumprod(np.array([2.0, 3.0, 4.0]))[1](np.ones(3))
    (array([16., 10.,  6.]),)
    >>> cumprod(np.array([2.0, 0.0, 4.0]))[1](np.ones(3))
    (array([ 1., 10.,  0.]),)
    """
    shape = _shape(x)
    ans = np.cumprod(x, axis=axis)
    ax = 0 if axis is None else axis

    def vjp(g: Any) -> tuple[Any]:
        flat = np.reshape(x, (-1,)) if axis is None else x
        if not np.any(flat == 0):
            return (np.reshape(_from_end(g * ans, ax) / flat, shape),)
        return (np.reshape(_cumprod_exact(flat, ans, g, ax), shape),)

    return ans, vjp


def _cumprod_jvp(ts: Tangents, ans: Any, x: Any, axis: int | None = None) -> Any:
    """``sum_{j <= i} t_j * prod_{k <= i, k != j} x_k``: ``ans * cumsum(t / x)`` without zeros."""
    t = ts[0]
    if axis is None:
        x, t = np.reshape(x, (-1,)), np.reshape(t, (-1,))
    ax = 0 if axis is None else axis
    if not np.any(x == 0):
        return ans * np.cumsum(t / x, axis=ax)
    y, a, u = (np.moveaxis(v, ax, -1) for v in (x, ans, t))
    n = _shape(y)[-1]
    later = np.arange(n) > np.arange(n)[:, None]  # later[j, i]: i > j
    runs = np.cumprod(np.where(later, np.expand_dims(y, -2), 1), axis=-1)  # [j, i]: prod_{j<k<=i} x_k
    before = np.concatenate([np.ones_like(a[..., :1]), a[..., :-1]], axis=-1)  # prod_{k<j} x_k
    upto = later | np.eye(n, dtype=bool)  # j <= i
    return np.moveaxis(np.sum(np.where(upto, np.expand_dims(before * u, -1) * runs, 0), axis=-2), -1, ax)


op("cumprod", cumprod, jvp=_cumprod_jvp, keeps=("x", "ans"), numpy=(np.cumprod,))


def _cumprod_exact(x: Any, ans: Any, g: Any, axis: int) -> Any:
    """cumprod's cotangent without division: ``before_j * sum_{i >= j} g_i prod_{j < k <= i} x_k``."""
    y, a, h = (np.moveaxis(v, axis, -1) for v in (x, ans, g))
    n = _shape(y)[-1]
    later = np.arange(n) > np.arange(n)[:, None]  # later[j, i]: i > j
    runs = np.cumprod(np.where(later, np.expand_dims(y, -2), 1), axis=-1)  # [j, i]: prod_{j<k<=i} x_k
    after = np.sum(np.where(later | np.eye(n, dtype=bool), np.expand_dims(h, -2) * runs, 0), axis=-1)
    before = np.concatenate([np.ones_like(a[..., :1]), a[..., :-1]], axis=-1)  # prod_{k<j} x_k
    return np.moveaxis(before * after, -1, axis)
