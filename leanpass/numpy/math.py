"""NumPy's math on Tensors: the elementwise functions of ``functional.ELEMENTWISE`` (``lp.log1p``,
``lp.arctan2``, ``lp.erf``, ...), and the reductions and scans (``lp.prod``, ``lp.cumsum``,
``lp.sort``, ``lp.median``, ``lp.quantile``, ...), with NumPy's signatures.

The reductions beyond ``prod``, ``cumsum`` and ``cumprod`` are written with other ops, so their
gradients need no rule of their own: ``sort`` and ``partition`` are a ``take_along_axis`` by the
(stable) order of the values, so each entry gets the gradient of the place it was sorted to, and
tied entries keep their own; ``median`` and ``quantile`` interpolate between sorted entries, so the
gradient reaches the one or two entries they select.

>>> x = Tensor([3.0, 1.0, 2.0], requires_grad=True)
>>> lp.median(x).backward()
>>> x.grad
Tensor([0., 0., 1.])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, _binary, _unary, _value
from ..functional import _lift
from ..functional._lift import weak
from .arrays import moveaxis, take_along_axis
from .basics import _axis, _tensor, concatenate, flatten, mean, reshape, sum, where
from .basics import max as _max
from .basics import min as _min


def _unary_function(name: str) -> Callable[..., Tensor]:
    fn = F.OPS[name]

    def call(x: ArrayLike) -> Tensor:
        return _unary(fn, name, _tensor(x))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = (
        f"NumPy's ``{name}`` elementwise, differentiable (see ``functional.ELEMENTWISE[{name!r}]``).\n\n"
        f">>> x = np.array({[1.25, 1.5] if name == 'arccosh' else [0.25, 0.5]})\n"
        f">>> np.allclose(lp.{name}(Tensor(x)).numpy(), "
        f"F.ELEMENTWISE[{name!r}][0](x))\nTrue\n"
    )
    return call


def _binary_function(name: str) -> Callable[..., Tensor]:
    fn = F.OPS[name]

    def call(x: ArrayLike, y: ArrayLike) -> Tensor:
        return _binary(fn, name, _tensor(x), _tensor(y))

    call.__name__ = call.__qualname__ = name
    call.__doc__ = (
        f"NumPy's ``{name}`` elementwise with broadcasting, differentiable in both inputs "
        f"(see ``functional.ELEMENTWISE[{name!r}]``).\n\n"
        f">>> x, y = np.array([0.25, 0.5]), np.array([1.5, -2.0])\n>>> np.allclose(lp.{name}(Tensor(x), y).numpy(), "
        f"F.ELEMENTWISE[{name!r}][0](x, y))\nTrue\n"
    )
    return call


(log1p, expm1, exp2, log2, log10, tan, arcsin, arccos, arctan, sinh, cosh, arcsinh, arccosh, arctanh, cbrt,
 fabs, reciprocal, sinc, deg2rad, rad2deg, erf, erfc, floor, ceil, trunc, rint, sign) = (
    _unary_function(n) for n in (
        "log1p", "expm1", "exp2", "log2", "log10", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh",
        "arcsinh", "arccosh", "arctanh", "cbrt", "fabs", "reciprocal", "sinc", "deg2rad", "rad2deg", "erf",
        "erfc", "floor", "ceil", "trunc", "rint", "sign"))
arctan2, hypot, logaddexp2, fmax, fmin, remainder, fmod = (
    _binary_function(n) for n in ("arctan2", "hypot", "logaddexp2", "fmax", "fmin", "remainder", "fmod"))
radians, degrees, mod = deg2rad, rad2deg, remainder


def round(x: ArrayLike, decimals: int = 0) -> Tensor:
    """Round to ``decimals`` places (half to even, as NumPy); the gradient is 0.

    >>> lp.round(Tensor([0.5, 1.5, 2.25]), 1)
    Tensor([0.5, 1.5, 2.2])
    """
    return _unary(F.OPS["round"], "round", _tensor(x), decimals)


def nan_to_num(x: ArrayLike, copy: bool = True, nan: float = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Tensor:
    """``nan`` and infinities replaced by numbers, as ``np.nan_to_num``; the gradient passes where ``x``
    is finite and is 0 at the replaced entries.

    >>> lp.nan_to_num(Tensor([np.nan, 1.0, np.inf]), posinf=9.0)
    Tensor([0., 1., 9.])
    """
    return _unary(F.OPS["nan_to_num"], "nan_to_num", _tensor(x), True, nan, posinf, neginf)


# ----- reductions and scans ----------------------------------------------------------------------
def prod(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Product over ``axis``; the gradient is exact where entries are 0.

    >>> lp.grad(lambda t: lp.prod(t))(np.array([2.0, 0.0, 4.0]))
    array([0., 8., 0.])
    """
    return _unary(F.prod, "prod", _tensor(x), axis, bool(keepdims))


def cumsum(x: ArrayLike, axis: int | None = None) -> Tensor:
    """Running sum along ``axis`` (over the flattened ``x`` when None).

    >>> lp.cumsum(Tensor([[1.0, 2.0], [3.0, 4.0]]), axis=1)
    Tensor([[1., 3.],
            [3., 7.]])
    """
    return _unary(F.cumsum, "cumsum", _tensor(x), axis)


def cumprod(x: ArrayLike, axis: int | None = None) -> Tensor:
    """Running product along ``axis`` (over the flattened ``x`` when None); exact gradient at zeros.

    >>> lp.cumprod(Tensor([1.0, 2.0, 3.0]))
    Tensor([1., 2., 6.])
    """
    return _unary(F.cumprod, "cumprod", _tensor(x), axis)


def nansum(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Sum over ``axis`` treating ``nan`` as 0 (which then gets no gradient).

    >>> lp.nansum(Tensor([1.0, np.nan, 2.0]))
    Tensor(3.)
    """
    x = _tensor(x)
    return sum(where(np.isnan(_value(x)), 0.0, x), axis, keepdims)


def nanmean(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis`` of the entries that are not ``nan``.

    >>> lp.nanmean(Tensor([1.0, np.nan, 2.0]))
    Tensor(1.5)
    """
    x = _tensor(x)
    missing = np.isnan(_value(x))
    with np.errstate(invalid="ignore", divide="ignore"):  # an all-nan slice: 0 / 0, nan as NumPy
        total = sum(where(missing, 0.0, x), axis, keepdims)
        return total / np.sum(~missing, axis=axis, keepdims=keepdims).astype(_value(total).dtype)


def ptp(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """``max - min`` over ``axis`` (ties split the gradient evenly, as in ``max``).

    >>> lp.ptp(Tensor([[1.0, 5.0], [2.0, 2.5]]), axis=1)
    Tensor([4. , 0.5])
    """
    x = _tensor(x)
    return _max(x, axis, keepdims) - _min(x, axis, keepdims)


def average(a: ArrayLike, axis: Any = None, weights: ArrayLike | None = None, returned: bool = False,
            keepdims: bool = False) -> Any:
    """The mean over ``axis``, weighted by ``weights`` (which may be Tensors too), as ``np.average``.

    1-D weights with an integer ``axis`` weigh along that axis; otherwise they have ``a``'s shape.
    ``returned=True`` also gives the sum of the weights.

    >>> lp.average(Tensor([1.0, 2.0, 4.0]), weights=[1.0, 1.0, 2.0])
    Tensor(2.75)
    """
    a = _tensor(a)
    if weights is None:
        avg = mean(a, axis, keepdims)
        count = np.size(_value(a)) // max(np.size(_value(avg)), 1)
        return (avg, Tensor(np.full(np.shape(_value(avg)), count, dtype=_value(avg).dtype))) if returned else avg
    w = _tensor(weights)
    ashape, wshape = np.shape(_value(a)), np.shape(_value(w))
    if wshape != ashape:
        if axis is None:
            raise TypeError("average: axis must be given when the weights' shape differs from the array's")
        if len(wshape) != 1 or not isinstance(axis, (int, np.integer)):
            raise TypeError("average: 1-D weights need an integer axis; otherwise give weights of the array's shape")
        if wshape[0] != ashape[_axis(int(axis), len(ashape), "average")]:
            raise ValueError("average: the length of the weights differs from the array's along axis")
        w = reshape(w, tuple(wshape[0] if i == axis % len(ashape) else 1 for i in range(len(ashape))))
    total = sum(a * w, axis, keepdims)
    scale = sum(w * np.ones(ashape, dtype=_value(total).dtype), axis, keepdims)
    if np.any(_value(scale) == 0.0):
        raise ZeroDivisionError("average: the weights sum to zero, so the average is not defined")
    avg = total / scale
    return (avg, scale) if returned else avg


def sort(x: ArrayLike, axis: int | None = -1) -> Tensor:
    """Sorted along ``axis`` (of the flattened ``x`` when None). Each entry's gradient is that of the
    place it was sorted to; ties keep their original order (a stable sort), as in PyTorch and JAX.

    >>> lp.grad(lambda t: (lp.sort(t) * np.array([1.0, 2.0, 3.0])).sum())(np.array([3.0, 1.0, 3.0]))
    array([2., 1., 3.])
    """
    x = _tensor(x)
    if axis is None:
        x, axis = flatten(x), 0
    order = np.argsort(_value(x), axis=axis, kind="stable")
    return take_along_axis(x, order, axis)


def partition(x: ArrayLike, kth: Any, axis: int | None = -1) -> Tensor:
    """Partly sorted along ``axis``: the ``kth`` entry in its sorted place, smaller ones before it and
    larger ones after (as ``np.partition``); the gradient follows each entry to its place.

    >>> lp.partition(Tensor([3.0, 1.0, 2.0, 0.0]), 1)[1]
    Tensor(1.)
    """
    x = _tensor(x)
    if axis is None:
        x, axis = flatten(x), 0
    return take_along_axis(x, np.argpartition(_value(x), kth, axis=axis), axis)


def topk(x: ArrayLike, k: int, axis: int = -1, largest: bool = True, sorted: bool = True) -> tuple[Tensor, Any]:
    """The ``k`` largest (or, with ``largest=False``, smallest) entries along ``axis`` and their indices,
    as ``torch.topk``: ``(values, indices)``, both with ``k`` entries along ``axis``.

    The values are differentiable: each selected entry gets the gradient of the place it was
    selected to, the others 0. The indices are an integer array (int64), not differentiable.
    Ties are resolved deterministically: among equal values the lower index comes first. NaN counts
    as larger than every number (as in PyTorch). The results are always in order (largest first, or
    smallest first), whatever ``sorted`` says. ``k`` must be between 0 and the size of the axis.

    >>> values, indices = lp.topk(Tensor([1.0, 3.0, 2.0, 3.0]), 2)
    >>> values, indices
    (Tensor([3., 3.]), array([1, 3]))
    >>> lp.grad(lambda t: lp.topk(t, 2)[0].sum())(np.array([1.0, 3.0, 2.0, 3.0]))
    array([0., 1., 0., 1.])
    """
    x = _tensor(x)
    data = _value(x)
    data = data if _lift.is_array(data) else np.asarray(data)
    shape = np.shape(data)
    if not shape:
        raise ValueError("topk: the input is 0-d; it needs an axis to choose the k entries along")
    if not isinstance(axis, (int, np.integer)) or isinstance(axis, bool):
        raise TypeError(f"topk: axis must be an int, got {axis!r}")
    if not -len(shape) <= axis < len(shape):
        raise np.exceptions.AxisError(f"topk: axis {axis} is out of range for an input with {len(shape)} axes")
    axis = int(axis) % len(shape)
    n = shape[axis]
    if not isinstance(k, (int, np.integer)) or isinstance(k, bool):
        raise TypeError(f"topk: k must be an int, got {k!r}")
    if not 0 <= k <= n:
        raise ValueError(f"topk: k={int(k)} is out of range: axis {axis} of the input {shape} has {n} entries, so "
                         f"k must be between 0 and {n}")
    first = tuple(slice(None) if a != axis else slice(0, int(k)) for a in range(len(shape)))
    if largest:  # a stable sort of the reversed values, reversed: largest first, ties by the lower index
        flip = tuple(slice(None) if a != axis else slice(None, None, -1) for a in range(len(shape)))
        order = (n - 1) - np.argsort(data[flip], axis=axis, kind="stable")[flip]
    else:
        order = np.argsort(data, axis=axis, kind="stable")
    indices = order[first]
    return take_along_axis(x, indices, axis), indices


def _along_last(x: Any, axis: Any) -> Any:
    """``x`` with the axes in ``axis`` (all for None) moved to the end and flattened into one axis."""
    shape = np.shape(_value(x))
    axes = tuple(range(len(shape))) if axis is None else tuple(
        sorted(_axis(a, len(shape), "quantile") for a in (axis if isinstance(axis, tuple) else (axis,))))
    kept = tuple(i for i in range(len(shape)) if i not in axes)
    moved = moveaxis(x, axes, tuple(range(len(kept), len(shape)))) if axes else x
    return reshape(moved, tuple(shape[i] for i in kept) + (-1,))


def quantile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False) -> Tensor:
    """The ``q``-th quantiles (``q`` in [0, 1]) over ``axis``, interpolated linearly between sorted
    entries as NumPy's default method; the result has the shape ``q.shape + reduced shape``.

    >>> lp.quantile(Tensor([1.0, 2.0, 3.0, 4.0]), [0.25, 0.5])
    Tensor([1.75, 2.5 ])
    """
    if out is not None:
        raise TypeError("quantile: out= is not supported with Tensors; use the result instead")
    if method != "linear":
        raise TypeError(f"quantile on a Tensor supports method='linear' (NumPy's default), not {method!r}")
    qs = _lift.asarray(_value(q)).astype(float)  # (kept traced under jit)
    if np.any((qs < 0) | (qs > 1)):
        raise ValueError("quantile: q must be in the range [0, 1]")
    flat = _along_last(_tensor(a), axis)
    n = np.shape(_value(flat))[-1]
    ordered = sort(flat, axis=-1)
    pos = qs * (n - 1)
    lo = np.floor(pos).astype(np.intp)
    below, above = _pick(ordered, lo), _pick(ordered, np.minimum(lo + 1, n - 1))
    t = (pos - lo).astype(_value(ordered).dtype)
    t = t.reshape(qs.shape + (1,) * (np.ndim(_value(below)) - qs.ndim))
    diff = above - below
    result = where(t >= 0.5, above - diff * (weak(1, t) - t), below + diff * t)  # NumPy's lerp, bit for bit
    result = where(np.isnan(_value(flat)).any(axis=-1), np.nan, result)  # nan in a slice: nan, as NumPy
    return reshape(result, qs.shape + _result_shape(a, axis, keepdims))


def _pick(ordered: Tensor, idx: np.ndarray) -> Tensor:
    """``ordered[..., idx]`` with the axes of ``idx`` moved to the front (quantile's output layout)."""
    picked = ordered[..., idx]
    if idx.ndim == 0:
        return picked
    nd = np.ndim(_value(picked))
    return moveaxis(picked, tuple(range(nd - idx.ndim, nd)), tuple(range(idx.ndim)))


def _result_shape(a: Any, axis: Any, keepdims: bool) -> tuple[int, ...]:
    shape = np.shape(_value(a))
    return np.sum(np.zeros(shape, dtype=bool), axis=axis, keepdims=keepdims).shape


def percentile(a: ArrayLike, q: ArrayLike, axis: Any = None, out: Any = None, overwrite_input: bool = False,
               method: str = "linear", keepdims: bool = False) -> Tensor:
    """The ``q``-th percentiles (``q`` in [0, 100]): ``quantile(a, q / 100)``.

    >>> lp.percentile(Tensor([1.0, 2.0, 3.0, 4.0]), 50)
    Tensor(2.5)
    """
    return quantile(a, np.true_divide(_value(q), 100), axis, out, overwrite_input, method, keepdims)


def median(a: ArrayLike, axis: Any = None, out: Any = None, overwrite_input: bool = False,
           keepdims: bool = False) -> Tensor:
    """The median over ``axis``: the middle entry, or the mean of the two middle entries; the gradient
    goes to them.

    >>> lp.median(Tensor([[1.0, 4.0, 2.0, 3.0]]), axis=1)
    Tensor([2.5])
    """
    if out is not None:
        raise TypeError("median: out= is not supported with Tensors; use the result instead")
    flat = _along_last(_tensor(a), axis)
    n = np.shape(_value(flat))[-1]
    ordered = sort(flat, axis=-1)
    middle = ordered[..., n // 2] if n % 2 else mean(ordered[..., n // 2 - 1:n // 2 + 1], axis=-1)
    middle = where(np.isnan(_value(flat)).any(axis=-1), np.nan, middle)  # nan in a slice: nan, as NumPy
    return reshape(middle, _result_shape(a, axis, keepdims))


def diff(a: ArrayLike, n: int = 1, axis: int = -1, prepend: Any = None, append: Any = None) -> Tensor:
    """The ``n``-th differences along ``axis`` (``a[1:] - a[:-1]``, ``n`` times), as ``np.diff``, with
    optional values to ``prepend`` / ``append`` first (which may be Tensors).

    >>> lp.diff(Tensor([1.0, 4.0, 9.0, 16.0]), n=2)
    Tensor([2., 2.])
    """
    x = _tensor(a)
    nd = np.ndim(_value(x))
    if nd == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    if n < 0:
        raise ValueError(f"diff: order must be non-negative but got {n}")
    ax = _axis(axis, nd, "diff")
    if n == 0:  # (as NumPy: nothing prepended or appended either)
        return x
    parts = []
    for extra in (prepend, x, append):
        if extra is None:
            continue
        if extra is not x and np.ndim(_value(extra)) == 0:
            shape = list(np.shape(_value(x)))
            shape[ax] = 1
            extra = _broadcast_value(extra, tuple(shape))
        parts.append(extra)
    x = concatenate(parts, axis=ax) if len(parts) > 1 else x
    lead = (slice(None),) * ax
    for _ in range(n):
        x = x[lead + (slice(1, None),)] - x[lead + (slice(None, -1),)]
    return x


def _broadcast_value(v: Any, shape: tuple[int, ...]) -> Any:
    from .basics import broadcast_to

    return broadcast_to(_tensor(v), shape) if type(v) is Tensor else np.broadcast_to(v, shape)


def trace(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The sum along a diagonal (``offset`` above the main one), as ``np.trace``.

    >>> lp.grad(lambda m: lp.trace(m))(np.ones((2, 2)))
    array([[1., 0.],
           [0., 1.]])
    """
    from .arrays import diagonal

    return sum(diagonal(_tensor(a), offset, axis1, axis2), axis=-1)


__all__ = [
    "log1p", "expm1", "exp2", "log2", "log10", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "arcsinh",
    "arccosh", "arctanh", "cbrt", "fabs", "reciprocal", "sinc", "deg2rad", "rad2deg", "radians", "degrees", "erf",
    "erfc", "floor", "ceil", "trunc", "rint", "sign", "round", "nan_to_num", "arctan2", "hypot", "logaddexp2",
    "fmax", "fmin", "remainder", "mod", "fmod", "prod", "cumsum", "cumprod", "nansum", "nanmean", "ptp", "average",
    "sort", "partition", "topk", "quantile", "percentile", "median", "diff", "trace",
]
