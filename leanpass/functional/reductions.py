"""Reductions and the softmax family. Each returns ``(ans, vjp)`` with ``vjp(g) -> (gx,)``.

Each op's forward-mode rule ``_<op>_jvp(tangents, ans, x, ...)`` (see ``_tangent.py``) follows it,
declared in its record (``op(...)``) below it; ``sum`` and ``mean`` are linear, so their rule is the op itself.

``axis`` may be None (all axes), an int (negative counts from the end) or a tuple of ints.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._lift import constant, weak
from ._registry import op
from ._tangent import of_first

Axis = Any  # None | int | tuple[int, ...]
Tangents = tuple[Any, ...]  # a forward-mode rule's tangents, one per input (see _tangent.py)


def _reduced_axes(ndim: int, axis: Axis) -> set[int]:
    """The set of axes (non-negative) that a reduction over ``axis`` removes."""
    if axis is None:
        return set(range(ndim))
    axes = axis if isinstance(axis, tuple) else (axis,)
    if not ndim:  # a 0-d input has nothing to reduce (NumPy's sum and max accept axis 0 or -1)
        return set()
    return {a % ndim for a in axes}


def _kept_shape(shape: tuple[int, ...], axis: Axis) -> tuple[int, ...]:
    """``shape`` with the reduced axes kept as size 1."""
    reduced = _reduced_axes(len(shape), axis)
    return tuple(1 if i in reduced else n for i, n in enumerate(shape))


def _dropped_shape(shape: tuple[int, ...], axis: Axis) -> tuple[int, ...]:
    """``shape`` with the reduced axes removed (the result shape without ``keepdims``)."""
    reduced = _reduced_axes(len(shape), axis)
    return tuple(n for i, n in enumerate(shape) if i not in reduced)


def _restore(g: Any, shape: tuple[int, ...], axis: Axis, keepdims: bool) -> Any:
    """Broadcast a reduction's cotangent back to the input's shape."""
    if not keepdims and axis is not None:
        g = g.reshape(_kept_shape(shape, axis))
    if isinstance(g, (np.ndarray, np.generic)):  # raw arrays: one C copy, faster than broadcast_to
        out = np.empty(shape, g.dtype)
        np.copyto(out, g)
        return out
    return np.broadcast_to(g, shape)  # a Tensor, in a differentiable backward pass


_add_reduce: Any = np.add.reduce


def _shape(x: Any) -> tuple[int, ...]:
    """``x.shape``, also for Python numbers (and without np.shape's dispatch cost)."""
    try:
        return x.shape
    except AttributeError:
        return np.shape(x)


def _count(shape: tuple[int, ...], axis: Axis) -> int:
    """How many elements each output of a reduction over ``axis`` summarises."""
    return math.prod(shape[i] for i in _reduced_axes(len(shape), axis))


def sum(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:  # noqa: A001
    """Sum over ``axis``. The cotangent is broadcast back to the input's shape.

    >>> ans, vjp = sum(np.array([[1.0, 2.0], [3.0, 4.0]]), 0)
    >>> ans, vjp(np.array([1.0, 2.0]))
    (array([4., 6.]), (array([[1., 2.],
           [1., 2.]]),))
    """
    shape = _shape(x)
    ans = _add_reduce(x, axis=axis, keepdims=keepdims)  # np.sum, without its Python wrapper
    return ans, lambda g: (_restore(g, shape, axis, keepdims),)


op("sum", sum, jvp=of_first(sum), keeps=("shape",), numpy=(np.sum,))


def mean(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:
    """Mean over ``axis``. The cotangent is broadcast back and divided by the element count.

    >>> mean(np.array([1.0, 2.0, 3.0, 4.0]))[1](np.array(1.0))
    (array([0.25, 0.25, 0.25, 0.25]),)
    """
    shape = _shape(x)
    n = _count(shape, axis)
    if not shape and axis is not None and axis != ():  # as np.mean: a 0-d input has no axis
        raise np.exceptions.AxisError(axis, 0)
    total = _add_reduce(x, axis=axis, keepdims=keepdims)  # np.mean, without its wrapper
    return total / weak(n, total), lambda g: (_restore(g / weak(n, g), shape, axis, keepdims),)


op("mean", mean, jvp=of_first(mean), keeps=("shape",), numpy=(np.mean,))


def max(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:  # noqa: A001
    """Maximum over ``axis``. The cotangent is split evenly between tied maxima.

    >>> max(np.array([1.0, 3.0, 3.0]))[1](np.array(1.0))
    (array([0. , 0.5, 0.5]),)
    """
    return _extreme(np.max, x, axis, keepdims)


def min(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:  # noqa: A001
    """Minimum over ``axis``. The cotangent is split evenly between tied minima.

    >>> min(np.array([2.0, 1.0, 5.0]))[1](np.array(1.0))
    (array([0., 1., 0.]),)
    """
    return _extreme(np.min, x, axis, keepdims)


def _extreme(reduce: Any, x: Any, axis: Axis, keepdims: bool) -> tuple[Any, Any]:
    shape = _shape(x)
    ans = reduce(x, axis=axis, keepdims=keepdims)

    def vjp(g: Any) -> tuple[Any]:
        hit = (x == _restore(ans, shape, axis, keepdims)).astype(g.dtype)
        ties = np.sum(hit, axis=axis, keepdims=True)
        return (_restore(g, shape, axis, keepdims) * (hit / ties),)

    return ans, vjp


def _extreme_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    """Forward-mode rule of max and min: the tangent at the extreme, averaged over ties."""
    t = ts[0]
    hit = (x == _restore(ans, _shape(x), axis, keepdims)).astype(t.dtype)  # (np.asarray would leave jit's trace)
    return np.sum(t * (hit / np.sum(hit, axis=axis, keepdims=True)), axis=axis, keepdims=keepdims)


op("max", max, jvp=_extreme_jvp, keeps=("x", "ans"), numpy=(np.max,))
op("min", min, jvp=_extreme_jvp, keeps=("x", "ans"), numpy=(np.min,))


def _dof(shape: tuple[int, ...], axis: Axis, ddof: int, name: str) -> int:
    """``n - ddof``, the divisor of a variance; a clear error when it is not positive."""
    n = _count(shape, axis)
    if n - ddof <= 0:
        raise ValueError(
            f"{name}: ddof={ddof} leaves no degrees of freedom: each result summarises {n} "
            f"element(s) of an input of shape {shape} (axis={axis!r}). Use ddof < {n}, or "
            "reduce over more elements."
        )
    return n - ddof


def var(x: Any, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> tuple[Any, Any]:
    """Variance over ``axis`` with ``ddof`` delta degrees of freedom. Cotangent ``2 g (x - mean) / (n - ddof)``.

    >>> var(np.array([1.0, 3.0]))[0]
    np.float64(1.0)
    >>> var(np.array([1.0, 3.0]), ddof=1)[1](np.array(1.0))
    (array([-2.,  2.]),)
    """
    shape = _shape(x)
    dof = _dof(shape, axis, ddof, "var")
    centred = x - np.mean(x, axis=axis, keepdims=True)
    total = np.sum(centred * centred, axis=axis, keepdims=keepdims)
    ans = total / weak(dof, total)
    return ans, lambda g: (_restore(g, shape, axis, keepdims) * (weak(2, centred) * centred / weak(dof, centred)),)


def _var_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    dof = _dof(_shape(x), axis, ddof, "var")
    centred = x - np.mean(x, axis=axis, keepdims=True)
    dot = np.sum(centred * ts[0], axis=axis, keepdims=keepdims)
    return dot * weak(2 / dof, dot)


op("var", var, jvp=_var_jvp, keeps=("work",), numpy=(np.var,))


def std(x: Any, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> tuple[Any, Any]:
    """Standard deviation, ``sqrt(var)``. Cotangent ``g (x - mean) / ((n - ddof) * ans)``.

    Where all the elements are equal (``ans == 0``, a kink like ``abs`` at 0) the gradient is
    0, not nan.

    >>> std(np.array([1.0, 3.0]))[0]
    np.float64(1.0)
    >>> std(np.array([2.0, 2.0]))[1](np.array(1.0))
    (array([0., 0.]),)
    """
    shape = _shape(x)
    dof = _dof(shape, axis, ddof, "std")
    centred = x - np.mean(x, axis=axis, keepdims=True)
    total = np.sum(centred * centred, axis=axis, keepdims=keepdims)
    v = total / weak(dof, total)
    ans = np.sqrt(v)

    def vjp(g: Any) -> tuple[Any]:
        # The zero-spread convention, kept finite at every order: the rule never divides by
        # (or differentiates) sqrt at 0, it takes sqrt of 1 there and then selects 0.
        zero = v == 0
        scale = np.where(zero, weak(0, g), g / (weak(dof, v) * np.sqrt(np.where(zero, weak(1, v), v))))
        return (_restore(scale, shape, axis, keepdims) * centred,)

    return ans, vjp


def _std_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = None, ddof: int = 0, keepdims: bool = False) -> Any:
    dof = _dof(_shape(x), axis, ddof, "std")
    centred = x - np.mean(x, axis=axis, keepdims=True)
    total = np.sum(centred * centred, axis=axis, keepdims=keepdims)
    v = total / weak(dof, total)
    zero = v == 0  # the VJP's zero-spread convention: 0, with no sqrt at 0 differentiated
    dot = np.sum(centred * ts[0], axis=axis, keepdims=keepdims)
    return np.where(zero, weak(0, dot), dot / (weak(dof, v) * np.sqrt(np.where(zero, weak(1, v), v))))


op("std", std, jvp=_std_jvp, keeps=("work",), numpy=(np.std,))


def _shifted(x: Any, axis: Axis) -> tuple[Any, Any]:
    """``x`` minus its per-slice maximum (a constant, never differentiated), and that maximum.

    The softmax family exponentiates the shifted values, so nothing overflows. At the edges the
    results are the limits: a slice of all ``-inf`` is shifted by 0 (its maximum is taken as
    0), and a slice with ``+inf`` entries becomes 0 at those entries and ``-inf`` elsewhere, so
    its softmax puts all the weight, shared evenly, on the infinite entries (no ``inf - inf``).
    """
    a = constant(x)
    a = a if hasattr(a, "size") else np.asarray(a)
    m = np.max(a, axis=axis, keepdims=True, initial=-np.inf) if a.size == 0 else np.max(a, axis=axis, keepdims=True)
    top = np.where(m == -np.inf, 0, m).astype(m.dtype)
    shifted = x - np.where(np.isfinite(m), m, 0).astype(m.dtype)
    pinf = m == np.inf
    if np.any(pinf):
        shifted = np.where(pinf, np.where(a == np.inf, 0, -np.inf).astype(m.dtype), shifted)
    return shifted, top


def logsumexp(x: Any, axis: Axis = None, keepdims: bool = False) -> tuple[Any, Any]:
    """``log(sum(exp(x)))`` over ``axis``, stable for large inputs; all ``-inf`` gives ``-inf``.

    The cotangent is ``g * softmax(x)``, and 0 (not nan) for a slice of all ``-inf``.

    >>> ans, vjp = logsumexp(np.array([1000.0, 1000.0]))
    >>> round(float(ans) - 1000.0, 6), vjp(np.array(1.0))
    (0.693147, (array([0.5, 0.5]),))
    """
    shape = _shape(x)
    shifted, top = _shifted(x, axis)
    e = np.exp(shifted)
    s = np.sum(e, axis=axis, keepdims=True)
    with np.errstate(divide="ignore"):
        ans_kept = np.log(s) + top
    ans = ans_kept if keepdims else ans_kept.reshape(_dropped_shape(shape, axis))

    def vjp(g: Any) -> tuple[Any]:
        weights = e / np.where(s == 0, weak(1, s), s)
        return (_restore(g, shape, axis, keepdims) * weights,)

    return ans, vjp


def _logsumexp_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = None, keepdims: bool = False) -> Any:
    e = np.exp(_shifted(x, axis)[0])
    s = np.sum(e, axis=axis, keepdims=True)
    weights = e / np.where(s == 0, weak(1, s), s)  # softmax(x), as in the VJP; 0 for a slice of all -inf
    return np.sum(ts[0] * weights, axis=axis, keepdims=keepdims)


op("logsumexp", logsumexp, jvp=_logsumexp_jvp, keeps=("work",))


def softmax(x: Any, axis: Axis = -1) -> tuple[Any, Any]:
    """``exp(x) / sum(exp(x))`` along ``axis``, stable for large inputs. Cotangent ``ans * (g - sum(g * ans))``.

    ``-inf`` entries (masked positions) get probability 0; a slice of all ``-inf`` has no
    distribution and gives ``nan`` (0 / 0), without a warning.

    >>> softmax(np.array([1000.0, 1000.0]))[0]
    array([0.5, 0.5])
    >>> softmax(np.array([0.0, -np.inf]))[0]
    array([1., 0.])
    """
    e = np.exp(_shifted(x, axis)[0])
    with np.errstate(invalid="ignore"):
        ans = e / np.sum(e, axis=axis, keepdims=True)
    return ans, lambda g: (ans * (g - np.sum(g * ans, axis=axis, keepdims=True)),)


def _softmax_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = -1) -> Any:
    t = ts[0]
    return ans * (t - np.sum(ans * t, axis=axis, keepdims=True))


op("softmax", softmax, jvp=_softmax_jvp, keeps=("ans",))


def log_softmax(x: Any, axis: Axis = -1) -> tuple[Any, Any]:
    """``x - logsumexp(x)`` along ``axis``, stable for large inputs. Cotangent ``g - softmax(x) * sum(g)``.

    A slice of all ``-inf`` gives ``nan`` (``-inf - -inf``), without a warning.

    >>> log_softmax(np.array([0.0, 0.0]))[0]
    array([-0.69314718, -0.69314718])
    """
    shifted = _shifted(x, axis)[0]
    with np.errstate(divide="ignore", invalid="ignore"):
        ans = shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))
    return ans, lambda g: (g - np.exp(ans) * np.sum(g, axis=axis, keepdims=True),)


def _log_softmax_jvp(ts: Tangents, ans: Any, x: Any, axis: Axis = -1) -> Any:
    t = ts[0]
    return t - np.sum(np.exp(ans) * t, axis=axis, keepdims=True)


op("log_softmax", log_softmax, jvp=_log_softmax_jvp, keeps=("ans",))
