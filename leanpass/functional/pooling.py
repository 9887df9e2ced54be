"""Pooling: ``max_pool2d``, ``avg_pool2d`` and their 1-D forms. Each returns ``(ans, vjp)``.

Average pooling is a depthwise convolution with a constant kernel (``conv2d`` with ``groups``
equal to the channels), so its rules are the convolution's. Max pooling sends each window's
cotangent to one entry, the first maximum in the window (as PyTorch does on ties); its rule
multiplies the cotangent by that one-hot choice and adds the windows back in place: a reshape
when the windows tile the input, otherwise a transposed depthwise convolution with one-hot kernels.
Both are made of recorded operations, so they differentiate again. The forward-mode rules
(``_<op>_jvp``, in its record): average pooling is linear, so its rule pools the tangent; max
pooling's takes the tangent at each window's chosen entry, the same first maximum.

>>> x = np.array([[[[1.0, 2.0], [4.0, 4.0]]]])
>>> ans, vjp = max_pool2d(x, 2)
>>> ans
array([[[[4.]]]])
>>> vjp(np.ones((1, 1, 1, 1)))[0]
array([[[[0., 0.],
         [1., 0.]]]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import conv as _conv
from ._registry import op

_window_view: Any = np.lib.stride_tricks.sliding_window_view  # (NumPy 1.x's stubs refuse the tuple axis it takes)


def _params(x: Any, kernel_size: Any, stride: Any, padding: Any, dilation: Any, where: str) -> Any:
    k = _conv.pair(kernel_size, "kernel_size", where)
    s = k if stride is None else _conv.pair(stride, "stride", where)
    p = _conv.pair(padding, "padding", where, 0)
    d = _conv.pair(dilation, "dilation", where)
    shape = tuple(np.shape(x))
    if len(shape) != 4:
        raise ValueError(f"{where}: the input must have 4 axes (N, C, H, W), got shape {shape}")
    if p[0] > k[0] // 2 or p[1] > k[1] // 2:
        raise ValueError(f"{where}: padding {p} must be at most half the kernel_size {k}")
    for axis in (0, 1):
        span = d[axis] * (k[axis] - 1) + 1
        if span > shape[2 + axis] + 2 * p[axis]:
            raise ValueError(
                f"{where}: the kernel ({span} with dilation {d[axis]}) is larger than the padded input "
                f"({shape[2 + axis] + 2 * p[axis]}); input {shape}, kernel_size {k}, padding {p}"
            )
    out = tuple(_conv.out_size(shape[2 + a], k[a], s[a], d[a], (p[a], p[a])) for a in (0, 1))
    return k, s, p, d, out


def max_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> tuple[Any, Any]:
    """The maximum of each ``kernel_size`` window of ``x`` ``(N, C, H, W)``; ``stride`` defaults to ``kernel_size``.

    Padding counts as ``-inf`` (it is never the maximum).

    >>> max_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2)[0][0, 0]
    array([[ 5.,  7.],
           [13., 15.]])
    """
    k, s, p, d, out = _params(x, kernel_size, stride, padding, dilation, "max_pool2d")
    xr = _conv._raw(x)
    n, c, h, w = np.shape(xr)
    xp = np.pad(xr, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=-np.inf) if p != (0, 0) else xr
    tiled = s == k and d == (1, 1)
    if tiled:  # windows that tile the input: taps are views of one reshape, channels last (as convs leave them)
        xh = np.transpose(xp, (0, 2, 3, 1))[:, :out[0] * k[0], :out[1] * k[1]]
        tiles = xh.reshape(n, out[0], k[0], out[1], k[1], c)
        taps = [tiles[:, :, a, :, b] for a in range(k[0]) for b in range(k[1])]
    else:
        win = _window_view(xp, (d[0] * (k[0] - 1) + 1, d[1] * (k[1] - 1) + 1), axis=(2, 3))
        win = win[:, :, :(out[0] - 1) * s[0] + 1:s[0], :(out[1] - 1) * s[1] + 1:s[1], ::d[0], ::d[1]]
        taps = [win[..., a, b] for a in range(k[0]) for b in range(k[1])]
    # The maximum tap by tap, then the first tap holding it: each window's one-hot choice.
    ans = taps[0]
    for t in taps[1:]:
        ans = np.maximum(ans, t)
    chosen = []
    taken = None
    for t in taps:
        hit = t == ans
        chosen.append(hit if taken is None else hit & ~taken)
        taken = hit if taken is None else taken | hit
    if tiled:
        # (N, Ho, kH, Wo, kW, C): the input's own layout, so the rule needs no transposing copy
        rows = [np.stack(chosen[a * k[1]:(a + 1) * k[1]], axis=3) for a in range(k[0])]
        onehot = np.stack(rows, axis=2)  # kept as booleans: a quarter of the memory until the backward pass

        def vjp(g: Any) -> tuple[Any, ...]:
            gh = np.transpose(g, (0, 2, 3, 1))[:, :, None, :, None]
            z = (onehot * gh).reshape(n, out[0] * k[0], out[1] * k[1], c).transpose(0, 3, 1, 2)
            rest = ((-p[0], h + p[0] - out[0] * k[0]), (-p[1], w + p[1] - out[1] * k[1]))
            return (_conv._pad_crop(z, rest) if rest != ((0, 0), (0, 0)) else z), None, None, None, None

        return np.transpose(ans, (0, 3, 1, 2)), vjp
    onehot = np.stack(chosen, axis=-1).reshape(n, c, out[0], out[1], k[0], k[1])

    def vjp_general(g: Any) -> tuple[Any, ...]:
        return _unwindow(g[..., None, None] * onehot, (h, w), k, s, p, d), None, None, None, None

    return ans, vjp_general


def _max_pool2d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0,
                    dilation: Any = 1) -> Any:
    """The tangent at each window's first maximum, the entry the VJP sends the window's cotangent to
    (none where the window holds a NaN, as there): the taps are visited last to first, each writing where
    it holds the maximum, so that the first one's write is the one that stays."""
    k, s, p, d, out = _params(x, kernel_size, stride, padding, dilation, "max_pool2d")
    t, xr, ar = ts[0], _conv._raw(x), _conv._raw(ans)
    if p != (0, 0):
        widths = ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1]))
        xr, t = np.pad(xr, widths, constant_values=-np.inf), np.pad(t, widths)
    rows, cols = (out[0] - 1) * s[0] + 1, (out[1] - 1) * s[1] + 1
    ndarrays = type(t) is np.ndarray and type(xr) is np.ndarray and type(ar) is np.ndarray
    tangent: Any = np.zeros(np.shape(ar), t.dtype) if ndarrays else 0
    hit = np.empty(np.shape(ar), bool) if ndarrays else None
    for a in reversed(range(k[0])):
        for b in reversed(range(k[1])):
            tap = (slice(None), slice(None), slice(a * d[0], a * d[0] + rows, s[0]),
                   slice(b * d[1], b * d[1] + cols, s[1]))
            if ndarrays:
                np.equal(xr[tap], ar, out=hit)
                np.copyto(tangent, t[tap], where=hit)
            else:  # (a Tensor inside another transform, or vmap's stand-ins: recorded or batched)
                tangent = np.where(xr[tap] == ar, t[tap], tangent)
    return tangent


op("max_pool2d", max_pool2d, jvp=_max_pool2d_jvp, keeps=("work",))


def _unwindow(cols: Any, size: tuple[int, int], k: Any, s: Any, p: Any, d: Any) -> Any:
    """Add windows ``(N, C, Ho, Wo, kH, kW)`` back into an ``(N, C, H, W)`` input (the adjoint of taking them):
    a transposed depthwise convolution whose one-hot kernels pick one tap each."""
    n, c, ho, wo = cols.shape[:4]
    taps = k[0] * k[1]
    z = cols.transpose(0, 1, 4, 5, 2, 3).reshape(n, c * taps, ho, wo)
    onehot = np.eye(taps, dtype=np.result_type(_conv._raw(cols))).reshape(1, taps, 1, k[0], k[1])
    weight = np.broadcast_to(onehot, (c, taps, 1, k[0], k[1])).reshape(c * taps, 1, k[0], k[1])
    pads = ((p[0], p[0]), (p[1], p[1]))
    return _conv._call(_conv.conv_transpose_input, "conv_transpose_input", z, weight, size, s, pads, d, c)


def avg_pool2d(x: Any, kernel_size: Any, stride: Any = None, padding: Any = 0) -> tuple[Any, Any]:
    """The mean of each ``kernel_size`` window of ``x`` ``(N, C, H, W)``, padding counted as zeros (PyTorch's default).

    >>> avg_pool2d(np.arange(16.0).reshape(1, 1, 4, 4), 2)[0][0, 0]
    array([[ 2.5,  4.5],
           [10.5, 12.5]])
    """
    k, s, p, _, _ = _params(x, kernel_size, stride, padding, 1, "avg_pool2d")
    xr = _conv._raw(x)
    c = np.shape(xr)[1]
    dt = np.result_type(xr)
    weight = np.full((c, 1, k[0], k[1]), 1.0 / (k[0] * k[1]), dtype=dt if dt.kind == "f" else np.float64)
    ans, rule = _conv.conv2d(x, weight, None, s, p, 1, c, need=(True, False, False))
    return ans, lambda g: (rule(g)[0], None, None, None)


def _avg_pool2d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, *params: Any) -> Any:
    return _conv._call(avg_pool2d, "avg_pool2d", ts[0], *params)


op("avg_pool2d", avg_pool2d, jvp=_avg_pool2d_jvp, keeps=("x", "work"))


def max_pool1d(x: Any, kernel_size: int, stride: Any = None, padding: int = 0, dilation: int = 1) -> tuple[Any, Any]:
    """``max_pool2d`` of ``x`` ``(N, C, L)`` along its last axis.

    >>> max_pool1d(np.array([[[1.0, 3.0, 2.0, 0.0]]]), 2)[0]
    array([[[3., 2.]]])
    """
    return _one_d(max_pool2d, "max_pool1d", x, kernel_size, stride, padding, dilation)


def avg_pool1d(x: Any, kernel_size: int, stride: Any = None, padding: int = 0) -> tuple[Any, Any]:
    """``avg_pool2d`` of ``x`` ``(N, C, L)`` along its last axis.

    >>> avg_pool1d(np.array([[[1.0, 3.0, 2.0, 0.0]]]), 2)[0]
    array([[[2., 1.]]])
    """
    return _one_d(avg_pool2d, "avg_pool1d", x, kernel_size, stride, padding)


def _max_pool1d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, kernel_size: int, stride: Any = None, padding: int = 0,
                    dilation: int = 1) -> Any:
    x2, ans2 = np.expand_dims(_conv._raw(x), 2), np.expand_dims(_conv._raw(ans), 2)
    st = None if stride is None else (1, stride)
    return _max_pool2d_jvp((np.expand_dims(ts[0], 2),), ans2, x2, (1, kernel_size), st, (0, padding),
                           (1, dilation))[:, :, 0]


op("max_pool1d", max_pool1d, jvp=_max_pool1d_jvp, keeps=("work",))


def _avg_pool1d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, *params: Any) -> Any:
    return _conv._call(avg_pool1d, "avg_pool1d", ts[0], *params)


op("avg_pool1d", avg_pool1d, jvp=_avg_pool1d_jvp, keeps=("x", "work"))


def _one_d(op: Any, where: str, x: Any, kernel_size: Any, stride: Any, padding: Any, *rest: Any) -> tuple[Any, Any]:
    shape = tuple(np.shape(_conv._raw(x)))
    if len(shape) != 3:
        raise ValueError(f"{where}: the input must have 3 axes (N, C, L), got shape {shape}")
    for name, v in (("kernel_size", kernel_size), ("stride", stride), ("padding", padding)):
        if v is not None and not isinstance(v, (int, np.integer)):
            raise ValueError(f"{where}: {name} must be an int, got {v!r}")
    extra = tuple((1, r) for r in rest)
    st = None if stride is None else (1, stride)
    ans, rule = op(np.expand_dims(x, 2), (1, kernel_size), st, (0, padding), *extra)

    def vjp(g: Any) -> tuple[Any, ...]:
        return (rule(np.expand_dims(g, 2))[0].reshape(shape),) + (None,) * (3 + len(rest))

    return ans[:, :, 0], vjp
