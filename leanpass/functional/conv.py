"""Convolutions: ``conv2d``, ``conv_transpose2d``, ``conv2d_weight`` and ``conv1d``. Each returns ``(ans, vjp)``.

Three bilinear routines close over each other, so a gradient of a gradient needs nothing new:

- ``conv2d(x, w)``: ``x̄ = conv_transpose2d(ȳ, w)``, ``w̄ = conv2d_weight(x, ȳ)``
- ``conv_transpose2d(x, w)``: ``x̄ = conv2d(ȳ, w)``, ``w̄ = conv2d_weight(ȳ, x)``
- ``conv2d_weight(x, g)``: ``x̄ = conv_transpose2d(g, w̄)``, ``ḡ = conv2d(x, w̄)``

Layouts are PyTorch's: ``x`` is ``(N, C, H, W)``, a convolution's weight ``(C_out, C_in / groups,
kH, kW)``, a transposed convolution's ``(C_in, C_out / groups, kH, kW)``. Inside, the arithmetic runs
channels-last: the padded input is one NHWC copy, its windows one strided view, and the product one
BLAS matrix multiplication (im2col); wide 3x3 stride-1 layers use Winograd's F(4x4, 3x3), which needs
a quarter of the multiplications. Outputs are NCHW views of NHWC arrays, so the next layer's NHWC
view costs nothing.

>>> x = np.arange(16.0).reshape(1, 1, 4, 4)
>>> w = np.ones((1, 1, 2, 2))
>>> y, vjp = conv2d(x, w)
>>> y[0, 0]
array([[10., 14., 18.],
       [26., 30., 34.],
       [42., 46., 50.]])
>>> vjp(np.ones_like(y))[0][0, 0]
array([[1., 2., 2., 1.],
       [2., 4., 4., 2.],
       [2., 4., 4., 2.],
       [1., 2., 2., 1.]])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _lift

_window_view = np.lib.stride_tricks.sliding_window_view
Pads = tuple[tuple[int, int], tuple[int, int]]
Pair = tuple[int, int]

_Tensor: Any = None  # leanpass.tensor.Tensor, once the Tensor layer is loaded


def _is_tensor(a: Any) -> bool:
    global _Tensor
    if _Tensor is None:
        from ..tensor import Tensor

        _Tensor = Tensor
    return type(a) is _Tensor


def _raw(a: Any) -> Any:
    """The array inside a Tensor (the forward of a replayed rule runs on the values)."""
    return a._data if _is_tensor(a) else a


def _call(fn: Any, name: str, *args: Any) -> Any:
    """Run the op ``fn`` on arrays, or record it when a Tensor is among ``args`` (a replayed rule)."""
    if _lift.apply is not None and any(_is_tensor(a) for a in args):
        return _lift.apply(fn, name, *args)
    return fn(*args)[0]


# ----- parameters ----------------------------------------------------------------------------------
def pair(v: Any, name: str, where: str, low: int = 1) -> Pair:
    """An int or a pair of ints as a pair, each at least ``low`` (a ValueError naming ``name`` otherwise)."""
    parts = (v, v) if isinstance(v, (int, np.integer)) else tuple(v) if isinstance(v, (tuple, list)) else None
    if parts is None or len(parts) != 2 or not all(isinstance(p, (int, np.integer)) for p in parts):
        raise ValueError(f"{where}: {name} must be an int or a pair of ints, got {v!r}")
    if any(p < low for p in parts):
        raise ValueError(f"{where}: {name} must be >= {low}, got {v!r}")
    return int(parts[0]), int(parts[1])


def padding_pairs(padding: Any, kernel: Pair, stride: Pair, dilation: Pair, where: str) -> Pads:
    """``padding`` (an int, a pair, ``"same"``, ``"valid"`` or per-side pairs) as ``((top, bottom), (left, right))``."""
    if isinstance(padding, str):
        if padding == "valid":
            return (0, 0), (0, 0)
        if padding == "same":
            if stride != (1, 1):
                raise ValueError(
                    f"{where}: padding='same' needs stride 1, got stride={stride}; give the padding as numbers")
            totals = [d * (k - 1) for d, k in zip(dilation, kernel)]
            return (totals[0] // 2, totals[0] - totals[0] // 2), (totals[1] // 2, totals[1] - totals[1] // 2)
        raise ValueError(f"{where}: padding must be an int, a pair, 'same' or 'valid', got {padding!r}")
    if isinstance(padding, (tuple, list)) and len(padding) == 2 and all(isinstance(p, (tuple, list)) for p in padding):
        a, b = pair(padding[0], "padding", where, 0), pair(padding[1], "padding", where, 0)
        return a, b
    p, q = pair(padding, "padding", where, 0)
    return (p, p), (q, q)


def out_size(n: int, k: int, s: int, d: int, pads: Pair) -> int:
    """The output length of a convolution along one axis."""
    return (n + pads[0] + pads[1] - d * (k - 1) - 1) // s + 1


def check_conv(xshape: tuple[int, ...], wshape: tuple[int, ...], groups: int, where: str, pads: Pads,
               dilation: Pair, transposed: bool = False) -> None:
    """ValueErrors naming the shapes for inputs a convolution cannot take."""
    if len(xshape) != 4:
        raise ValueError(f"{where}: the input must have 4 axes (N, C, H, W), got shape {xshape}")
    if len(wshape) != 4:
        raise ValueError(f"{where}: the weight must have 4 axes, got shape {wshape}")
    if not isinstance(groups, (int, np.integer)) or groups < 1:
        raise ValueError(f"{where}: groups must be an int >= 1, got {groups!r}")
    c = xshape[1]
    if c % groups or wshape[0] % groups:
        raise ValueError(
            f"{where}: groups={groups} must divide the input channels ({c}) and the weight's first axis "
            f"({wshape[0]}); input {xshape}, weight {wshape}"
        )
    if transposed:
        if wshape[0] != c:
            raise ValueError(
                f"{where}: the input has {c} channels but the weight (C_in, C_out/groups, kH, kW) = {wshape} "
                f"expects {wshape[0]}; input {xshape}"
            )
        return
    if wshape[1] * groups != c:
        raise ValueError(
            f"{where}: the input has {c} channels but the weight (C_out, C_in/groups, kH, kW) = {wshape} with "
            f"groups={groups} expects {wshape[1] * groups}; input {xshape}"
        )
    for axis, name in ((0, "height"), (1, "width")):
        span = dilation[axis] * (wshape[2 + axis] - 1) + 1
        padded = xshape[2 + axis] + sum(pads[axis])
        if span > padded:
            raise ValueError(
                f"{where}: the kernel's {name} ({span} with dilation {dilation[axis]}) is larger than the padded "
                f"input's ({padded}); input {xshape}, weight {wshape}, padding {pads}"
            )


# ----- the raw routines (arrays in, arrays out) ------------------------------------------------------
def _pad_crop(x: Any, pads: Pads) -> Any:
    """Pad the last two axes with zeros where ``pads`` is positive, crop where it is negative."""
    (t, b), (lf, r) = pads
    if min(t, b, lf, r) < 0:
        h, w = x.shape[-2], x.shape[-1]
        x = x[..., max(-t, 0):h - max(-b, 0), max(-lf, 0):w - max(-r, 0)]
        t, b, lf, r = max(t, 0), max(b, 0), max(lf, 0), max(r, 0)
    if t or b or lf or r:
        x = np.pad(x, ((0, 0),) * (x.ndim - 2) + ((t, b), (lf, r)))
    return x


def _nhwc_windows(x: Any, kernel: Pair, stride: Pair, pads: Pads, dilation: Pair, out: Pair) -> Any:
    """The windows of NCHW ``x`` as a view ``(N, Ho, Wo, C, kH, kW)`` of one padded NHWC copy."""
    xh = np.transpose(x, (0, 2, 3, 1))
    if any(pads[0]) or any(pads[1]):
        xh = np.pad(xh, ((0, 0), pads[0], pads[1], (0, 0)))
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out
    win = _window_view(xh, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(1, 2))
    return win[:, :(ho - 1) * sh + 1:sh, :(wo - 1) * sw + 1:sw, :, ::dh, ::dw]


def _im2col(x: Any, kernel: Pair, stride: Pair, pads: Pads, dilation: Pair, out: Pair, groups: int) -> Any:
    """``(groups, N*Ho*Wo, kH*kW*C/groups)``: each row one window, channels last (one copy)."""
    win = _nhwc_windows(x, kernel, stride, pads, dilation, out)
    n, ho, wo, c, kh, kw = win.shape
    g = groups
    if g == 1:
        return win.transpose(0, 1, 2, 4, 5, 3).reshape(1, n * ho * wo, kh * kw * c)
    win = win.reshape(n, ho, wo, g, c // g, kh, kw)
    return win.transpose(3, 0, 1, 2, 5, 6, 4).reshape(g, n * ho * wo, kh * kw * (c // g))


def _weight_matrix(w: Any, groups: int) -> Any:
    """A weight ``(O, C/g, kH, kW)`` as ``(g, kH*kW*C/g, O/g)``, matching the columns of ``_im2col``."""
    o, cg, kh, kw = w.shape
    og = o // groups
    return w.reshape(groups, og, cg, kh, kw).transpose(0, 3, 4, 2, 1).reshape(groups, kh * kw * cg, og)


def _nchw(y: Any, n: int, out: Pair) -> Any:
    """``(g, N*Ho*Wo, O/g)`` products as an NCHW view of channels-last data."""
    g, _, og = y.shape
    if g == 1:
        return y.reshape(n, out[0], out[1], og).transpose(0, 3, 1, 2)
    return y.reshape(g, n, out[0], out[1], og).transpose(1, 0, 4, 2, 3).reshape(n, g * og, out[0], out[1])


def _conv_raw(x: Any, w: Any, stride: Pair, pads: Pads, dilation: Pair, groups: int) -> tuple[Any, Any]:
    """The convolution of arrays, and what its weight gradient can reuse: the im2col columns, or
    Winograd's transformed input (a tuple)."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    out = (out_size(h, kh, stride[0], dilation[0], pads[0]), out_size(wd, kw, stride[1], dilation[1], pads[1]))
    if _winograd_fits(x.shape, w.shape, stride, dilation, groups):
        return _winograd(x, w, pads, out)
    cols = _im2col(x, (kh, kw), stride, pads, dilation, out, groups)
    y = np.matmul(cols, _weight_matrix(w, groups))
    return _nchw(y, n, out), cols


def _flip_transpose(w: Any, groups: int) -> Any:
    """The kernel of the transposed convolution: ``(O, C/g, kH, kW)`` -> ``(C, O/g, kH, kW)``, flipped."""
    o, cg, kh, kw = w.shape
    wt = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(groups * cg, o // groups, kh, kw)
    return wt[:, :, ::-1, ::-1]


def _conv_t_raw(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, groups: int) -> Any:
    """The transpose of the convolution with weight ``w`` (its input gradient), output size ``size``.

    A convolution of ``g``, dilated by the stride and padded, with the flipped, transposed kernel.
    """
    _, _, kh, kw = w.shape
    if stride != (1, 1):
        return _conv_t_phases(g, w, size, stride, pads, dilation, groups)
    z = g
    new = []
    for axis, k in ((0, kh), (1, kw)):
        reach = dilation[axis] * (k - 1)
        left = reach - pads[axis][0]
        right = size[axis] + reach - z.shape[2 + axis] - left
        new.append((left, right))
    if min(new[0] + new[1]) >= 0:  # the usual case: the convolution pads (channels-last, in one copy)
        return _conv_raw(z, _flip_transpose(w, groups), (1, 1), (new[0], new[1]), dilation, groups)[0]
    zp = _pad_crop(z, (new[0], new[1]))
    return _conv_raw(zp, _flip_transpose(w, groups), (1, 1), ((0, 0), (0, 0)), dilation, groups)[0]


def _conv_t_phases(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, groups: int) -> Any:
    """The transposed convolution of a strided one, phase by phase, with no multiplications by inserted zeros.

    The input rows ``j = s*m + r`` of one phase ``r`` (in padded coordinates) receive only the taps
    ``a`` with ``a*d = s*q + r``: a stride-1 transposed convolution of ``g`` with those taps (a
    dilated sub-kernel), shifted by the first tap's ``q``. The ``s*s`` phase results interleave
    (a stack and a reshape) into the padded input's gradient, which is then cut to ``size``.
    """
    n = g.shape[0]
    kernel = (w.shape[2], w.shape[3])
    rows = [-(-(pads[a][0] + size[a]) // stride[a]) for a in (0, 1)]  # m per phase, covering the input
    taps = []  # per axis and phase: (first tap, tap step, dilation of the sub-kernel, its shift) or None
    for a in (0, 1):
        s, d, k = stride[a], dilation[a], kernel[a]
        step = s // np.gcd(s, d)
        per = []
        for r in range(s):
            first = next((t for t in range(k) if (t * d - r) % s == 0), None)
            per.append(None if first is None else (first, step, d * step // s, (first * d - r) // s))
        taps.append(per)
    c = w.shape[1] * groups
    blocks = []
    for r0 in range(stride[0]):
        line = []
        for r1 in range(stride[1]):
            t0, t1 = taps[0][r0], taps[1][r1]
            if t0 is None or t1 is None:
                line.append(np.zeros((n, rows[0], rows[1], c), dtype=np.result_type(g, w)))
                continue
            sub = w[:, :, t0[0]::t0[1], t1[0]::t1[1]]
            part = _conv_t_raw(g, sub, (rows[0], rows[1]), (1, 1), ((-t0[3], 0), (-t1[3], 0)), (t0[2], t1[2]), groups)
            line.append(np.transpose(part, (0, 2, 3, 1)))  # channels last: the interleaving copies stay contiguous
        blocks.append(np.stack(line, axis=3))  # (N, M0, M1, s1, C)
    full = np.stack(blocks, axis=2).reshape(n, rows[0] * stride[0], rows[1] * stride[1], c)
    cut = full[:, pads[0][0]:pads[0][0] + size[0], pads[1][0]:pads[1][0] + size[1]]
    return np.transpose(cut, (0, 3, 1, 2))


def _wgrad_cols(cols: Any, g: Any, wshape: tuple[int, ...], groups: int) -> Any:
    """The weight gradient from the forward's columns: ``cols^T @ g`` per group."""
    o, cg, kh, kw = wshape
    n, _, ho, wo = g.shape
    gm = np.transpose(g, (0, 2, 3, 1)).reshape(n * ho * wo, groups, o // groups)
    dw = np.matmul(np.swapaxes(cols, 1, 2), np.swapaxes(gm, 0, 1))  # (g, kH*kW*C/g, O/g)
    return dw.reshape(groups, kh, kw, cg, o // groups).transpose(0, 4, 3, 1, 2).reshape(o, cg, kh, kw)


def _wgrad_raw(x: Any, g: Any, wshape: tuple[int, ...], stride: Pair, pads: Pads, dilation: Pair,
               groups: int) -> Any:
    cols = _im2col(x, (wshape[2], wshape[3]), stride, pads, dilation, (g.shape[2], g.shape[3]), groups)
    return _wgrad_cols(cols, g, wshape, groups)


# ----- Winograd F(4x4, 3x3) ----------------------------------------------------------------------------
# Lavin & Gray's transforms for 4x4 outputs from 6x6 input tiles: Y = A^T [(G w G^T) * (B^T d B)] A.
_BT = np.array([[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0], [0, 4, -4, -1, 1, 0],
                [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]], dtype=np.float64)
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64)
_AT = np.array([[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0], [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]],
               dtype=np.float64)
WINOGRAD_MIN_CHANNELS = 32  # below this, its fixed cost of ~20 NumPy calls outweighs the saved multiplications


def _winograd_fits(xshape: tuple[int, ...], wshape: tuple[int, ...], stride: Pair, dilation: Pair, groups: int) -> bool:
    return (wshape[2] == 3 and wshape[3] == 3 and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and min(xshape[1], wshape[0]) >= WINOGRAD_MIN_CHANNELS and xshape[2] >= 8 and xshape[3] >= 8)


def _winograd(x: Any, w: Any, pads: Pads, out: Pair) -> Any:
    """A 3x3, stride-1 convolution by F(4x4, 3x3): 36 matrix products over tiles instead of 9 over pixels."""
    n, c = x.shape[0], x.shape[1]
    o = w.shape[0]
    ho, wo = out
    th, tw = -(-ho // 4), -(-wo // 4)
    dt = x.dtype
    bt, g_, at = _BT.astype(dt), _G.astype(dt), _AT.astype(dt)
    # Pad so that th x tw tiles of 6x6 (stride 4) fit, as NHWC.
    xh = np.transpose(x, (0, 2, 3, 1))
    xh = np.pad(xh, ((0, 0), (pads[0][0], 4 * th + 2 - x.shape[2] - pads[0][0]),
                     (pads[1][0], 4 * tw + 2 - x.shape[3] - pads[1][0]), (0, 0)))
    tiles = _window_view(xh, (6, 6), axis=(1, 2))[:, ::4, ::4]  # (N, th, tw, C, 6, 6)
    v = np.tensordot(bt, tiles, axes=([1], [4]))  # (6i, N, th, tw, C, 6b)
    v = np.matmul(v, bt.T)  # (6i, N, th, tw, C, 6j)
    v = np.transpose(v, (0, 5, 1, 2, 3, 4)).reshape(36, n * th * tw, c)
    u = np.matmul(np.matmul(g_, w), g_.T)  # (O, C, 6, 6)
    u = np.transpose(u, (2, 3, 1, 0)).reshape(36, c, o)
    m = np.matmul(v, u).reshape(6, 6, n * th * tw * o)  # (6i, 6j, tiles * O)
    y = np.tensordot(at, m, axes=([1], [0]))  # (4a, 6j, tiles*O)
    y = np.tensordot(at, y, axes=([1], [1]))  # (4b, 4a, tiles*O)
    y = y.reshape(4, 4, n, th, tw, o).transpose(2, 3, 1, 4, 0, 5).reshape(n, 4 * th, 4 * tw, o)
    return y[:, :ho, :wo].transpose(0, 3, 1, 2), (v, th, tw)


def _winograd_wgrad(saved: Any, g: Any, wshape: tuple[int, ...]) -> Any:
    """The weight gradient of a Winograd convolution, by its adjoint: ``w̄ = G^T [V^T (A ȳ A^T)] G``.

    ``saved`` is the forward's transformed input ``V`` (36, tiles, C) and the tile counts; a
    quarter of the multiplications of the im2col weight gradient, and no second im2col.
    """
    v, th, tw = saved
    n, o, ho, wo = g.shape
    dt = g.dtype
    g_, at = _G.astype(dt), _AT.astype(dt)
    gh = np.pad(np.transpose(g, (0, 2, 3, 1)), ((0, 0), (0, 4 * th - ho), (0, 4 * tw - wo), (0, 0)))
    ybar = gh.reshape(n, th, 4, tw, 4, o).transpose(2, 4, 0, 1, 3, 5).reshape(4, 4, n * th * tw * o)
    mbar = np.tensordot(at.T, ybar, axes=([1], [0]))  # (6i, 4b, tiles*O)
    mbar = np.tensordot(at.T, mbar, axes=([1], [1]))  # (6j, 6i, tiles*O)
    mbar = np.transpose(mbar, (1, 0, 2)).reshape(36, n * th * tw, o)
    ubar = np.matmul(np.swapaxes(v, 1, 2), mbar).reshape(6, 6, wshape[1], o)  # (6i, 6j, C, O)
    wbar = np.tensordot(np.tensordot(g_.T, ubar, axes=([1], [0])), g_, axes=([1], [0]))  # (3k, C, O, 3l)
    return np.transpose(wbar, (2, 1, 0, 3))


def _crop(y: Any, shape: tuple[int, ...]) -> Any:
    """``y`` cut to ``shape``'s height and width: a convolution of an output that ``output_padding`` or a
    dilation made longer than its input covers rows the input never reached."""
    if y.shape[2] == shape[2] and y.shape[3] == shape[3]:
        return y
    return y[:, :, :shape[2], :shape[3]]


# ----- the ops ---------------------------------------------------------------------------------------------
def _none_need(need: Any, n: int) -> tuple[bool, ...]:
    return (True,) * n if need is None else tuple(need)


def conv2d(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
           *, need: Any = None) -> tuple[Any, Any]:
    """2-D convolution (a cross-correlation, as in PyTorch) of ``x`` ``(N, C, H, W)`` with ``w`` ``(O, C/g, kH, kW)``.

    ``b`` (``(O,)`` or None) is added per output channel. ``stride``, ``dilation``: an int or a pair;
    ``padding``: an int, a pair, ``"same"``, ``"valid"`` or per-side pairs ``((top, bottom), (left, right))``.

    >>> y, vjp = conv2d(np.ones((2, 4, 5, 5)), np.ones((6, 2, 3, 3)), np.zeros(6), padding=1, groups=2)
    >>> y.shape, float(y[0, 0, 2, 2]), float(y[0, 0, 0, 0])
    ((2, 6, 5, 5), 18.0, 8.0)
    >>> [None if c is None else c.shape for c in vjp(np.ones_like(y))[:3]]
    [(2, 4, 5, 5), (6, 2, 3, 3), (6,)]
    """
    where = "conv2d"
    xr, wr = _raw(x), _raw(w)
    kernel = (int(np.shape(wr)[2]), int(np.shape(wr)[3])) if np.ndim(wr) == 4 else (1, 1)
    st, dil = pair(stride, "stride", where), pair(dilation, "dilation", where)
    pads = padding_pairs(padding, kernel, st, dil, where)
    check_conv(np.shape(xr), np.shape(wr), groups, where, pads, dil)
    if b is not None and np.shape(_raw(b)) != (np.shape(wr)[0],):
        raise ValueError(f"{where}: the bias must have shape ({np.shape(wr)[0]},), got {np.shape(_raw(b))}")
    y, cols = _conv_raw(xr, wr, st, pads, dil, groups)
    if b is not None:
        y = y + _raw(b).reshape(-1, 1, 1)
    size = (int(np.shape(xr)[2]), int(np.shape(xr)[3]))
    wshape = tuple(np.shape(wr))
    nx, nw, nb = _none_need(need, 3)[:3]

    def vjp(g: Any) -> tuple[Any, ...]:
        gx = _call(conv_transpose_input, "conv_transpose_input", g, w, size, st, pads, dil, groups) if nx else None
        if not nw:
            gw = None
        elif not _is_tensor(g) and not _is_tensor(x):  # reuse the forward's columns or transformed input
            gw = _winograd_wgrad(cols, g, wshape) if isinstance(cols, tuple) else _wgrad_cols(cols, g, wshape, groups)
        else:
            gw = _call(conv2d_weight, "conv2d_weight", x, g, wshape, st, pads, dil, groups)
        gb = None if b is None or not nb else g.sum(axis=(0, 2, 3))
        return gx, gw, gb, None, None, None, None

    return y, vjp


def conv_transpose_input(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, groups: int,
                         *, need: Any = None) -> tuple[Any, Any]:
    """The transpose of ``conv2d`` in its input (its input gradient), with the output's spatial ``size``.

    ``w`` has the convolution's layout ``(O, C/groups, kH, kW)``; ``g`` is ``(N, O, Ho, Wo)``.

    >>> conv_transpose_input(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), (3, 3), (1, 1), ((0, 0), (0, 0)),
    ...                      (1, 1), 1)[0][0, 0]
    array([[1., 2., 1.],
           [2., 4., 2.],
           [1., 2., 1.]])
    """
    gr, wr = _raw(g), _raw(w)
    y = _conv_t_raw(gr, wr, size, stride, pads, dilation, groups)
    wshape, gshape = tuple(np.shape(wr)), tuple(np.shape(gr))
    ng, nw = _none_need(need, 2)[:2]

    def vjp(h: Any) -> tuple[Any, ...]:
        gg = _crop(_call(conv2d, "conv2d", h, w, None, stride, pads, dilation, groups), gshape) if ng else None
        gw = _call(conv2d_weight, "conv2d_weight", h, g, wshape, stride, pads, dilation, groups) if nw else None
        return gg, gw, None, None, None, None, None

    return y, vjp


def conv2d_weight(x: Any, g: Any, wshape: tuple[int, ...], stride: Pair, pads: Pads, dilation: Pair,
                  groups: int, *, need: Any = None) -> tuple[Any, Any]:
    """The gradient of ``conv2d`` in its weight (of shape ``wshape``), bilinear in ``x`` and ``g``.

    >>> conv2d_weight(np.ones((1, 1, 3, 3)), np.ones((1, 1, 2, 2)), (1, 1, 2, 2), (1, 1), ((0, 0), (0, 0)),
    ...               (1, 1), 1)[0][0, 0]
    array([[4., 4.],
           [4., 4.]])
    """
    xr, gr = _raw(x), _raw(g)
    dw = _wgrad_raw(xr, gr, wshape, stride, pads, dilation, groups)
    size = (int(np.shape(xr)[2]), int(np.shape(xr)[3]))
    gshape = tuple(np.shape(gr))
    nx, ng = _none_need(need, 2)[:2]

    def vjp(h: Any) -> tuple[Any, ...]:
        gx = (_call(conv_transpose_input, "conv_transpose_input", g, h, size, stride, pads, dilation, groups)
              if nx else None)
        gg = _crop(_call(conv2d, "conv2d", x, h, None, stride, pads, dilation, groups), gshape) if ng else None
        return gx, gg, None, None, None, None, None

    return dw, vjp


def conv_transpose2d(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, output_padding: Any = 0,
                     dilation: Any = 1, groups: int = 1, *, need: Any = None) -> tuple[Any, Any]:
    """Transposed 2-D convolution of ``x`` ``(N, C_in, H, W)`` with ``w`` ``(C_in, C_out/groups, kH, kW)`` (PyTorch's).

    The output is ``(H - 1) * stride - 2 * padding + dilation * (kH - 1) + output_padding + 1`` high
    (``output_padding`` < stride or dilation picks among the sizes a strided convolution maps to ``H``).

    >>> y, _ = conv_transpose2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 2, 2)), stride=2)
    >>> y[0, 0]
    array([[1., 1., 1., 1.],
           [1., 1., 1., 1.],
           [1., 1., 1., 1.],
           [1., 1., 1., 1.]])
    """
    where = "conv_transpose2d"
    xr, wr = _raw(x), _raw(w)
    st, dil = pair(stride, "stride", where), pair(dilation, "dilation", where)
    if isinstance(padding, str):
        raise ValueError(f"{where}: padding must be an int or a pair, got {padding!r}")
    kernel = (int(np.shape(wr)[2]), int(np.shape(wr)[3])) if np.ndim(wr) == 4 else (1, 1)
    pads = padding_pairs(padding, kernel, st, dil, where)
    op = pair(output_padding, "output_padding", where, 0)
    check_conv(np.shape(xr), np.shape(wr), groups, where, pads, dil, transposed=True)
    for axis in (0, 1):
        if op[axis] >= max(st[axis], dil[axis]):
            raise ValueError(f"{where}: output_padding {op} must be smaller than the stride {st} or the dilation {dil}")
    size = tuple((np.shape(xr)[2 + a] - 1) * st[a] - sum(pads[a]) + dil[a] * (kernel[a] - 1) + op[a] + 1
                 for a in (0, 1))
    if min(size) < 1:
        raise ValueError(f"{where}: the output would be {size} high and wide (input {np.shape(xr)}, padding {pads})")
    if b is not None and np.shape(_raw(b)) != (np.shape(wr)[1] * groups,):
        raise ValueError(f"{where}: the bias must have shape ({np.shape(wr)[1] * groups},), got {np.shape(_raw(b))}")
    y = _conv_t_raw(xr, wr, size, st, pads, dil, groups)
    if b is not None:
        y = y + _raw(b).reshape(-1, 1, 1)
    wshape, xshape = tuple(np.shape(wr)), tuple(np.shape(xr))
    nx, nw, nb = _none_need(need, 3)[:3]

    def vjp(g: Any) -> tuple[Any, ...]:
        gx = _crop(_call(conv2d, "conv2d", g, w, None, st, pads, dil, groups), xshape) if nx else None
        gw = _call(conv2d_weight, "conv2d_weight", g, x, wshape, st, pads, dil, groups) if nw else None
        gb = None if b is None or not nb else g.sum(axis=(0, 2, 3))
        return gx, gw, gb, None, None, None, None, None

    return y, vjp


def conv1d(x: Any, w: Any, b: Any = None, stride: Any = 1, padding: Any = 0, dilation: Any = 1, groups: int = 1,
           *, need: Any = None) -> tuple[Any, Any]:
    """1-D convolution of ``x`` ``(N, C, L)`` with ``w`` ``(O, C/groups, K)``: ``conv2d`` on a height of 1.

    >>> conv1d(np.arange(5.0).reshape(1, 1, 5), np.ones((1, 1, 2)))[0]
    array([[[1., 3., 5., 7.]]])
    """
    where = "conv1d"
    xr, wr = _raw(x), _raw(w)
    if np.ndim(xr) != 3:
        raise ValueError(f"{where}: the input must have 3 axes (N, C, L), got shape {np.shape(xr)}")
    if np.ndim(wr) != 3:
        raise ValueError(f"{where}: the weight must have 3 axes (C_out, C_in/groups, K), got shape {np.shape(wr)}")
    if isinstance(padding, str):
        pad2: Any = padding
    elif isinstance(padding, (tuple, list)):
        pad2 = ((0, 0), tuple(padding))
    else:
        pad2 = (0, padding)
    st = (1, stride) if isinstance(stride, (int, np.integer)) else stride
    dil = (1, dilation) if isinstance(dilation, (int, np.integer)) else dilation
    if isinstance(st, (tuple, list)) and len(st) != 2:
        raise ValueError(f"{where}: stride must be an int, got {stride!r}")
    y2, vjp2 = conv2d(np.expand_dims(xr, 2), np.expand_dims(wr, 2), None if b is None else _raw(b), st, pad2, dil,
                      groups, need=need)
    xshape, wshape = np.shape(xr), np.shape(wr)
    if not _is_tensor(x) and not _is_tensor(w):
        def vjp(g: Any) -> tuple[Any, ...]:
            gx, gw, gb = vjp2(np.expand_dims(g, 2))[:3]
            return (None if gx is None else gx.reshape(xshape), None if gw is None else gw.reshape(wshape), gb,
                    None, None, None, None)

        return y2[:, :, 0], vjp

    def replayed(g: Any) -> tuple[Any, ...]:  # on Tensors: the same rule, recorded
        _, rule = conv2d(np.expand_dims(x, 2), np.expand_dims(w, 2), b, st, pad2, dil, groups, need=need)
        gx, gw, gb = rule(np.expand_dims(g, 2))[:3]
        return (None if gx is None else gx.reshape(xshape), None if gw is None else gw.reshape(wshape), gb,
                None, None, None, None)

    return y2[:, :, 0], replayed
