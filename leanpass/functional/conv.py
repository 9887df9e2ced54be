"""Convolutions: ``conv2d``, ``conv_transpose2d``, ``conv2d_weight`` and ``conv1d``. Each returns ``(ans, vjp)``.

Three bilinear routines close over each other, so a gradient of a gradient needs nothing new:

- ``conv2d(x, w)``: ``x̄ = conv_transpose2d(ȳ, w)``, ``w̄ = conv2d_weight(x, ȳ)``
- ``conv_transpose2d(x, w)``: ``x̄ = conv2d(ȳ, w)``, ``w̄ = conv2d_weight(ȳ, x)``
- ``conv2d_weight(x, g)``: ``x̄ = conv_transpose2d(g, w̄)``, ``ḡ = conv2d(x, w̄)``

Layouts are PyTorch's: ``x`` is ``(N, C, H, W)``, a convolution's weight ``(C_out, C_in / groups,
kH, kW)``, a transposed convolution's ``(C_in, C_out / groups, kH, kW)``. Inside, the arithmetic runs
channels-last: the padded input is one NHWC copy, its windows one strided view, and the product one
BLAS matrix multiplication (im2col); wide 3x3 stride-1 layers use Winograd's F(4x4, 3x3), which needs
a quarter of the multiplications, where the values are finite and within range (``_in_range``).
Outputs are NCHW views of NHWC arrays, so the next layer's NHWC view costs nothing. The input
gradient is chosen per shape too: Winograd's transposed transforms,
col2im (one product, then each kernel tap's share added in) for strided layers and those with few
input channels, otherwise a convolution of the padded gradient with the flipped kernel. On plain
arrays, temporaries go into reused buffers (``_scratch``); under ``jit`` the same algorithms write into
fresh traced arrays instead, so a compiled function gives eager's bits. ``vmap``'s stand-ins and the
Tensors of a replayed rule take general forms of the same algorithms (im2col for Winograd's shapes).

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
from ._registry import op
from ._scratch import buffer as _buffer
from ._scratch import float_arrays as _float_arrays
from ._scratch import float_arrays_or_traced as _float_arrays_or_traced
from ._scratch import like as _like
from ._scratch import work as _work

_window_view: Any = np.lib.stride_tricks.sliding_window_view  # (NumPy 1.x's stubs refuse the tuple axis it takes)
Pads = tuple[tuple[int, int], tuple[int, int]]
Pair = tuple[int, int]

_is_tensor = _lift.is_tensor


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
    if min(wshape[2:]) < 1:
        raise ValueError(f"{where}: the kernel must be at least 1x1, got a weight of shape {wshape}")
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
    return _windows(xh, kernel, stride, dilation, out)


def _windows(xh: Any, kernel: Pair, stride: Pair, dilation: Pair, out: Pair) -> Any:
    """The windows of padded NHWC ``xh`` as a view ``(N, Ho, Wo, C, kH, kW)``."""
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out
    win = _window_view(xh, (dh * (kh - 1) + 1, dw * (kw - 1) + 1), axis=(1, 2))
    return win[:, :(ho - 1) * sh + 1:sh, :(wo - 1) * sw + 1:sw, :, ::dh, ::dw]


def _im2col(x: Any, kernel: Pair, stride: Pair, pads: Pads, dilation: Pair, out: Pair, groups: int,
            scratch: bool = False) -> Any:
    """``(groups, N*Ho*Wo, kH*kW*C/groups)``: each row one window, channels last (one copy). ``scratch``:
    the caller is done with them before the next convolution (they may go into a reused buffer)."""
    if groups == 1 and _float_arrays(x):
        return _im2col_buffered(x, kernel, stride, pads, dilation, out, scratch)
    win = _nhwc_windows(x, kernel, stride, pads, dilation, out)
    n, ho, wo, c, kh, kw = win.shape
    g = groups
    if g == 1:
        return win.transpose(0, 1, 2, 4, 5, 3).reshape(1, n * ho * wo, kh * kw * c)
    win = win.reshape(n, ho, wo, g, c // g, kh, kw)
    return win.transpose(3, 0, 1, 2, 5, 6, 4).reshape(g, n * ho * wo, kh * kw * (c // g))


def _im2col_buffered(x: Any, kernel: Pair, stride: Pair, pads: Pads, dilation: Pair, out: Pair, scratch: bool) -> Any:
    """``_im2col`` of a plain array: padded in a reused buffer (``np.pad`` costs more than the copy on small
    layers), copied tap by tap when there are few channels (a strided copy of 1-channel windows is slow)."""
    n, c, h, wd = x.shape
    (kh, kw), (sh, sw), (dh, dw), (ho, wo) = kernel, stride, dilation, out
    xh = x.transpose(0, 2, 3, 1)
    if any(pads[0]) or any(pads[1]):
        xp = _buffer("pad", (n, h + sum(pads[0]), wd + sum(pads[1]), c), x.dtype, border=pads)
        xp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd] = xh
        xh = xp
    shape = (n, ho, wo, kh, kw, c)
    cols = _buffer("cols", shape, x.dtype) if scratch else np.empty(shape, x.dtype)  # (never a view of "pad")
    if c < 8:
        for a in range(kh):
            for b in range(kw):
                cols[:, :, :, a, b] = xh[:, a * dh:a * dh + (ho - 1) * sh + 1:sh, b * dw:b * dw + (wo - 1) * sw + 1:sw]
    else:
        np.copyto(cols, _windows(xh, kernel, stride, dilation, out).transpose(0, 1, 2, 4, 5, 3))
    return cols.reshape(1, n * ho * wo, kh * kw * c)


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


def _conv_raw(x: Any, w: Any, stride: Pair, pads: Pads, dilation: Pair, groups: int,
              keep: bool = True) -> tuple[Any, Any]:
    """The convolution of arrays, and what its weight gradient can reuse: the im2col columns, or
    Winograd's transformed input (a tuple). ``keep=False``: the caller drops the columns."""
    n, _, h, wd = x.shape
    o, cg, kh, kw = w.shape
    out = (out_size(h, kh, stride[0], dilation[0], pads[0]), out_size(wd, kw, stride[1], dilation[1], pads[1]))
    if _winograd_fits(x, w, stride, dilation, groups):
        return _winograd(x, w, pads, out)
    cols = _im2col(x, (kh, kw), stride, pads, dilation, out, groups, scratch=not keep)
    y = np.matmul(cols, _weight_matrix(w, groups))
    return _nchw(y, n, out), cols


def _flip_transpose(w: Any, groups: int) -> Any:
    """The kernel of the transposed convolution: ``(O, C/g, kH, kW)`` -> ``(C, O/g, kH, kW)``, flipped."""
    o, cg, kh, kw = w.shape
    wt = w.reshape(groups, o // groups, cg, kh, kw).transpose(0, 2, 1, 3, 4).reshape(groups * cg, o // groups, kh, kw)
    return wt[:, :, ::-1, ::-1]


def _conv_t_raw(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, groups: int) -> Any:
    """The transpose of the convolution with weight ``w`` (its input gradient), output size ``size``.

    Winograd's transposed transforms where the convolution is a Winograd one; col2im for strided
    layers and few input channels; else phase by phase (strided, grouped) or a convolution of the
    padded ``g`` with the flipped, transposed kernel.
    """
    _, _, kh, kw = w.shape
    if _winograd_t_fits(g, w, size, pads, stride, dilation, groups):
        return _winograd_t(g, w, size, pads)
    if _col2im_fits(g, w, size, stride, pads, dilation, groups):
        return _col2im(g, w, size, stride, pads, dilation)
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
        return _conv_raw(z, _flip_transpose(w, groups), (1, 1), (new[0], new[1]), dilation, groups, keep=False)[0]
    zp = _pad_crop(z, (new[0], new[1]))
    return _conv_raw(zp, _flip_transpose(w, groups), (1, 1), ((0, 0), (0, 0)), dilation, groups, keep=False)[0]


def _col2im_fits(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, groups: int) -> bool:
    """col2im for plain arrays, strided (the phases' many small products cost more) or with few input
    channels (an im2col of ``g`` would copy O * 9 numbers per pixel to compute a handful)."""
    o, c, kh, kw = w.shape
    return (groups == 1 and (stride != (1, 1) or c < 8) and min(pads[0] + pads[1]) >= 0
            and all(dilation[a] * (w.shape[2 + a] - 1) + stride[a] * (g.shape[2 + a] - 1) < size[a] + sum(pads[a])
                    for a in (0, 1)))


def _col2im(g: Any, w: Any, size: Pair, stride: Pair, pads: Pads, dilation: Pair, rows: Any = None) -> Any:
    """The transposed convolution by col2im: one product gives each window's gradient, and each kernel
    tap's slice of them is added into the padded input's gradient (channels last).

    The sum is kept phase by phase, ``(N, sH, sW, H/sH, W/sW, C)``, so that each tap adds one
    contiguous block per row of windows (a strided slice would add ``C`` numbers at a time).
    """
    n, o, ho, wo = g.shape
    _, c, kh, kw = w.shape
    (sh, sw), (dh, dw), dt = stride, dilation, np.result_type(g, w)
    gm = _nhwc_rows(g) if rows is None else rows
    taps = w.transpose(2, 3, 0, 1).reshape(kh * kw, o, c)
    buffered = _float_arrays(g, w)
    dcols = np.matmul(gm, taps, out=_buffer("dcols", (kh * kw, n * ho * wo, c), dt) if buffered else None)
    hq, wq = -(-(size[0] + sum(pads[0])) // sh), -(-(size[1] + sum(pads[1])) // sw)
    phases: Any = np.zeros((n, sh, sw, hq, wq, c), dt) if buffered else None
    for a in range(kh):
        (qa, ra), i = divmod(a * dh, sh), a * kw
        for b in range(kw):
            qb, rb = divmod(b * dw, sw)
            tap = dcols[i + b].reshape(n, ho, wo, c)  # (tap-major: each one contiguous)
            if buffered:
                phases[:, ra, rb, qa:qa + ho, qb:qb + wo] += tap
            else:  # stand-ins: the same sums in the same order, each tap padded into place
                placed = np.pad(tap[:, None, None], ((0, 0), (ra, sh - 1 - ra), (rb, sw - 1 - rb),
                                                     (qa, hq - qa - ho), (qb, wq - qb - wo), (0, 0)))
                phases = placed if phases is None else phases + placed
    dxp = phases.transpose(0, 3, 1, 4, 2, 5).reshape(n, hq * sh, wq * sw, c)  # (a view when the stride is 1)
    return dxp[:, pads[0][0]:pads[0][0] + size[0], pads[1][0]:pads[1][0] + size[1]].transpose(0, 3, 1, 2)


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


def _nhwc_rows(g: Any) -> Any:
    """``(N, C, H, W)`` as the matrix ``(N*H*W, C)`` (a view when the data is channels-last)."""
    n, c, h, w = g.shape
    return np.transpose(g, (0, 2, 3, 1)).reshape(n * h * w, c)  # (-1 fails on no values)


def _wgrad_cols(cols: Any, g: Any, wshape: tuple[int, ...], groups: int, rows: Any = None) -> Any:
    """The weight gradient from the forward's columns: ``cols^T @ g`` per group (``rows``: g as ``_nhwc_rows``)."""
    o, cg, kh, kw = wshape
    gm = _nhwc_rows(g) if rows is None else rows
    gm = gm.reshape(gm.shape[0], groups, o // groups)
    dw = np.matmul(np.swapaxes(cols, 1, 2), np.swapaxes(gm, 0, 1))  # (g, kH*kW*C/g, O/g)
    return dw.reshape(groups, kh, kw, cg, o // groups).transpose(0, 4, 3, 1, 2).reshape(o, cg, kh, kw)


def _wgrad_raw(x: Any, g: Any, wshape: tuple[int, ...], stride: Pair, pads: Pads, dilation: Pair,
               groups: int) -> Any:
    cols = _im2col(x, (wshape[2], wshape[3]), stride, pads, dilation, (g.shape[2], g.shape[3]), groups, True)
    return _wgrad_cols(cols, g, wshape, groups)


# ----- Winograd F(4x4, 3x3) ----------------------------------------------------------------------------
# Lavin & Gray's transforms for 4x4 outputs from 6x6 input tiles (stride 4): Y = A^T [(G w G^T) * (B^T d B)] A.
# B^T, A^T and their transposes have small integer entries, so each product with them is written out as a
# dozen adds of strided slices into preallocated buffers (out=): a tensordot would first copy the
# overlapping tiles out, and fresh temporaries of this size cost page faults. Each transform acts on one
# axis of the tiles, then on the other. Under jit the buffers are fresh traced arrays (the same sums, so eager's
# bits); vmap's stand-ins and Tensors (a rule replayed for a higher derivative) take im2col.
_G = np.array([[1 / 4, 0, 0], [-1 / 6, -1 / 6, -1 / 6], [-1 / 6, 1 / 6, -1 / 6],
               [1 / 24, 1 / 12, 1 / 6], [1 / 24, -1 / 12, 1 / 6], [0, 0, 1]], dtype=np.float64)
WINOGRAD_MIN_CHANNELS = 32  # below this, its fixed cost of ~150 NumPy calls outweighs the saved multiplications
WINOGRAD_MAX_RANGE = 32  # Winograd only for arrays with no magnitude above this many times their mean nonzero one


def _in_range(a: Any) -> bool:
    """Whether ``a`` is finite with no magnitude above ``WINOGRAD_MAX_RANGE`` times the mean of its nonzero ones.

    Winograd's transforms mix the 6x6 pixels of a tile and the 3x3 taps of a kernel, so an output's
    rounding error follows the largest magnitude in its tile rather than its own window's: a value far
    above the rest would move outputs it does not reach, and an inf or a NaN would spread over its tile.
    Such arrays take im2col (docs/performance.md states the bound this keeps). Zeros add no rounding
    error, so they do not count: a sparse array (a relu's output, a max pooling's cotangent) keeps
    Winograd. Three reductions of ``|a|``; under ``jit`` they are traced and the outcome is a guard of
    the program, kept under ``strict=True`` too (either way the result is the convolution).
    """
    if a.size == 0:
        return True
    mags = np.abs(a.ravel(order="K"))  # (in the order of memory: the same sums eager and under jit)
    with np.errstate(over="ignore", invalid="ignore"):
        total = mags.sum()
        ok = np.isfinite(total) & (mags.max() * (np.count_nonzero(mags > 0) / WINOGRAD_MAX_RANGE) <= total)
    return bool(ok) if type(ok) is np.bool_ else ok._tr.guard(ok, "choice", "a convolution's choice of algorithm")


def _winograd_sized(wshape: tuple[int, ...], channels: int, size: tuple[int, ...], stride: Pair, dilation: Pair,
                    groups: int) -> bool:
    """A 3x3, stride-1 convolution with many channels and at least 8x8 input pixels: where Winograd wins."""
    return (tuple(wshape[2:]) == (3, 3) and stride == (1, 1) and dilation == (1, 1) and groups == 1
            and min(channels, wshape[0]) >= WINOGRAD_MIN_CHANNELS and min(size) >= 8)


def _winograd_fits(x: Any, w: Any, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Winograd for the convolution of ``x`` with ``w`` (plain arrays of a Winograd size)."""
    return (_winograd_sized(w.shape, x.shape[1], x.shape[2:], stride, dilation, groups)
            and _float_arrays_or_traced(x, w) and _in_range(x) and _in_range(w))


def _split(a: Any) -> list[Any]:
    """The slices of an array along its first axis (also of a stand-in of jit, which has no iterator)."""
    return [a[k] for k in range(len(a))]


def _fresh(shape: tuple[int, ...], dtype: Any, like: Any) -> Any:
    """A new array to fill (one a caller keeps): ``np.empty``, or traced zeros like a stand-in of jit."""
    return np.empty(shape, dtype) if type(like) is np.ndarray else np.zeros_like(like, shape=shape, dtype=dtype)


def _every4(a: Any, axis: int, k: int, count: int) -> Any:
    """The view of ``a`` at positions ``k, k + 4, ..., k + 4 (count - 1)`` along ``axis``."""
    index = [slice(None)] * a.ndim
    index[axis] = slice(k, k + 4 * count - 3, 4)
    return a[tuple(index)]


def _bt(d: list[Any], out: list[Any], tmp: list[Any]) -> None:
    """``out[i] = sum_k B^T[i, k] d[k]`` for six slices ``d`` (the input transform along one axis)."""
    d0, d1, d2, d3, d4, d5 = d
    o0, o1, o2, o3, o4, o5 = out
    t, u = tmp
    np.subtract(d4, d2, out=t)
    np.subtract(d0, d2, out=o0)
    o0 *= 4
    o0 += t  # 4 d0 - 5 d2 + d4
    np.subtract(d1, d3, out=o5)
    o5 *= 4
    o5 += d5
    o5 -= d3  # 4 d1 - 5 d3 + d5
    np.multiply(d2, 3, out=u)
    np.subtract(t, u, out=o1)  # d4 - 4 d2
    np.multiply(d1, 4, out=u)
    np.subtract(d3, u, out=u)  # d3 - 4 d1
    np.subtract(o1, u, out=o2)
    o1 += u
    np.subtract(d3, d1, out=u)
    u *= 2
    np.add(t, u, out=o3)  # (d4 - d2) + 2 (d3 - d1)
    np.subtract(t, u, out=o4)


def _b_overlapping(v: list[Any], out: Any, axis: int, count: int, tmp: list[Any]) -> None:
    """``sum_i B^T[i, k] v[i]`` into the ``4 count + 2`` positions of ``out`` along ``axis``, adding where the
    tiles (6 wide, 4 apart) overlap: the transpose of the input transform, for the input gradient."""
    v0, v1, v2, v3, v4, v5 = v
    p12, m12, p34, m34, x = tmp
    np.add(v1, v2, out=p12)
    np.subtract(v1, v2, out=m12)
    np.add(v3, v4, out=p34)
    np.subtract(v3, v4, out=m34)
    np.multiply(v0, 4, out=_every4(out, axis, 0, count))
    o1 = np.subtract(v5, m12, out=_every4(out, axis, 1, count))
    o1 *= 4
    np.multiply(m34, 2, out=x)
    o1 -= x  # -4 (v1 - v2) - 2 (v3 - v4) + 4 v5
    o3 = np.add(m12, x, out=_every4(out, axis, 3, count))
    np.multiply(v5, 5, out=x)
    o3 -= x  # (v1 - v2) + 2 (v3 - v4) - 5 v5
    o2 = np.multiply(v0, -5, out=_every4(out, axis, 2, count))
    np.multiply(p12, 4, out=x)
    o2 -= x
    o2 -= p34  # -5 v0 - 4 (v1 + v2) - (v3 + v4)
    index = [slice(None)] * out.ndim
    index[axis] = slice(4 * count, None)
    out[tuple(index)] = 0  # the last tile's two extra positions, which no next tile starts on
    o4 = _every4(out, axis, 4, count)
    o4 += v0
    o4 += p12
    o4 += p34
    o5 = _every4(out, axis, 5, count)
    o5 += v5


def _at(m: list[Any], out: list[Any], tmp: list[Any]) -> None:
    """``out[a] = sum_i A^T[a, i] m[i]``: four outputs from six slices (the output transform along one axis)."""
    m0, m1, m2, m3, m4, m5 = m
    y0, y1, y2, y3 = out
    s, d, p, q = tmp
    np.add(m1, m2, out=s)
    np.subtract(m1, m2, out=d)
    np.add(m3, m4, out=p)
    np.subtract(m3, m4, out=q)
    np.add(m0, s, out=y0)
    y0 += p
    np.multiply(q, 2, out=y1)
    y1 += d
    np.multiply(p, 4, out=y2)
    y2 += s
    np.multiply(q, 8, out=y3)
    y3 += d
    y3 += m5


def _a(y: list[Any], out: list[Any], tmp: list[Any]) -> None:
    """``out[i] = sum_a A^T[a, i] y[a]``: six from four (the transpose of the output transform)."""
    y0, y1, y2, y3 = y
    i0, i1, i2, i3, i4, i5 = out
    e, o = tmp
    np.add(y0, y2, out=e)
    np.add(y1, y3, out=o)
    np.add(e, o, out=i1)
    np.subtract(e, o, out=i2)
    np.multiply(y2, 4, out=e)
    e += y0
    np.multiply(y3, 4, out=o)
    o += y1
    o *= 2
    np.add(e, o, out=i3)  # y0 + 2 y1 + 4 y2 + 8 y3
    np.subtract(e, o, out=i4)
    np.copyto(i0, y0)
    np.copyto(i5, y3)


def _winograd_input(x: Any, pads: Pads, th: int, tw: int) -> Any:
    """``V = B^T d B`` for the ``th x tw`` 6x6 tiles of each image of NCHW ``x`` padded by ``pads``: (36, tiles, C)."""
    n, c, h, wd = x.shape
    dt = x.dtype
    xp = _work("x", (n, 4 * th + 2, 4 * tw + 2, c), dt, x, border=(pads, h, wd))  # NHWC: the products are GEMMs
    xp[:, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd] = x.transpose(0, 2, 3, 1)
    rows = _work("rows", (6, n, th, 4 * tw + 2, c), dt, x)
    _bt([_every4(xp, 1, k, th) for k in range(6)], _split(rows), _split(_work("t1", (2,) + rows.shape[1:], dt, x)))
    v = _fresh((6, 6, n, th, tw, c), dt, x)
    _bt([_every4(rows, 3, k, tw) for k in range(6)], [v[:, j] for j in range(6)],
        _split(_work("t2", (2, 6, n, th, tw, c), dt, x)))
    return v.reshape(36, n * th * tw, c)


def _winograd_weight(w: Any) -> Any:
    """``U = G w G^T`` for a weight ``(O, C, 3, 3)``, as (36, C, O): one product with ``G ⊗ G``."""
    o, c = w.shape[:2]
    gg = np.kron(_G, _G).astype(w.dtype)  # (36, 9): [6 i + j, 3 k + l] = G[i, k] G[j, l]
    return np.matmul(w.reshape(o * c, 9), gg.T).T.copy().reshape(36, o, c).transpose(0, 2, 1)  # (a copy jit records)


def _winograd_output(m: Any, n: int, th: int, tw: int, out: Pair) -> Any:
    """``A^T M A`` per tile of the products ``M`` (36, tiles, O): the NCHW output, a view of NHWC data."""
    o, dt = m.shape[2], m.dtype
    m6 = m.reshape(6, 6, n, th, tw, o)
    half = _work("half", (4, 6, n, th, tw, o), dt, m)
    _at(_split(m6), _split(half), _split(_work("t1", (4, 6, n, th, tw, o), dt, m)))
    y = _fresh((n, th, 4, tw, 4, o), dt, m)
    _at([half[:, j] for j in range(6)], _split(y.transpose(4, 2, 0, 1, 3, 5)),  # (b, a, N, th, tw, O)
        _split(_work("t2", (4, 4, n, th, tw, o), dt, m)))
    return y.reshape(n, 4 * th, 4 * tw, o)[:, :out[0], :out[1]].transpose(0, 3, 1, 2)


def _winograd_grad_output(g: Any, th: int, tw: int) -> Any:
    """``A ȳ A^T`` per 4x4 tile of the output gradient ``g`` (N, O, Ho, Wo): (36, tiles, O)."""
    n, o, ho, wo = g.shape
    dt = g.dtype
    gh = g.transpose(0, 2, 3, 1)
    if (ho, wo) != (4 * th, 4 * tw) or type(g) is not np.ndarray or not gh.flags.c_contiguous:
        gh = _work("g", (n, 4 * th, 4 * tw, o), dt, g, border=(ho, wo))
        gh[:, :ho, :wo] = g.transpose(0, 2, 3, 1)
    rows = _work("rows", (6, n, th, 4 * tw, o), dt, g)
    _a([_every4(gh, 1, a, th) for a in range(4)], _split(rows), _split(_work("t1", (2,) + rows.shape[1:], dt, g)))
    mbar = _work("mbar", (6, 6, n, th, tw, o), dt, g)
    _a([_every4(rows, 3, b, tw) for b in range(4)], [mbar[:, j] for j in range(6)],
       _split(_work("t2", (2, 6, n, th, tw, o), dt, g)))
    return mbar.reshape(36, n * th * tw, o)


def _winograd_input_adjoint(vbar: Any, n: int, th: int, tw: int, pads: Pads, size: Pair) -> Any:
    """``B V̄ B^T`` per tile, the overlapping tiles added up and the padding cut: the input gradient (NCHW view)."""
    c, dt = vbar.shape[2], vbar.dtype
    v6 = vbar.reshape(6, 6, n, th, tw, c)
    rows = _work("rows", (6, n, th, 4 * tw + 2, c), dt, vbar)
    _b_overlapping([v6[:, j] for j in range(6)], rows, 3, tw, _split(_work("t5", (5, 6, n, th, tw, c), dt, vbar)))
    dxp = _fresh((n, 4 * th + 2, 4 * tw + 2, c), dt, vbar)
    _b_overlapping(_split(rows), dxp, 1, th, _split(_work("t5", (5, n, th, 4 * tw + 2, c), dt, vbar)))
    (t, _), (lf, _) = pads
    return dxp[:, t:t + size[0], lf:lf + size[1]].transpose(0, 3, 1, 2)


def _winograd_weight_adjoint(ubar: Any) -> Any:
    """``G^T Ū G`` for the products' weight gradient ``Ū`` (36, C, O): the weight gradient (O, C, 3, 3)."""
    c, o = ubar.shape[1:]
    gg = np.kron(_G, _G).astype(ubar.dtype)
    return np.matmul(gg.T, np.swapaxes(ubar, 1, 2).reshape(36, o * c)).T.reshape(o, c, 3, 3)


def _winograd(x: Any, w: Any, pads: Pads, out: Pair) -> tuple[Any, Any]:
    """A 3x3, stride-1 convolution by F(4x4, 3x3): 36 matrix products over tiles instead of 9 over pixels.

    Also returns what the gradients reuse: the transformed input and weight and the tile counts.
    """
    th, tw = -(-out[0] // 4), -(-out[1] // 4)
    v, u = _winograd_input(x, pads, th, tw), _winograd_weight(w)
    m = np.matmul(v, u, out=_work("m", (36, v.shape[1], u.shape[2]), v.dtype, _like(v, u)))
    return _winograd_output(m, x.shape[0], th, tw, out), (v, u, th, tw)


def _winograd_grads(saved: Any, g: Any, pads: Pads, size: Pair, nx: bool, nw: bool) -> tuple[Any, Any]:
    """The input and weight gradients of a Winograd convolution by its transpose, sharing ``A ȳ A^T``:
    ``x̄ = B [(A ȳ A^T) U^T] B^T`` tile by tile, ``w̄ = G^T [V^T (A ȳ A^T)] G``."""
    v, u, th, tw = saved
    mbar = _winograd_grad_output(g, th, tw)
    gx = None
    if nx:
        vbar = np.matmul(mbar, np.swapaxes(u, 1, 2), out=_work("m", (36, mbar.shape[1], u.shape[1]), u.dtype,
                                                                _like(mbar, u)))
        gx = _winograd_input_adjoint(vbar, g.shape[0], th, tw, pads, size)
    gw = _winograd_weight_adjoint(np.matmul(np.swapaxes(v, 1, 2), mbar)) if nw else None
    return gx, gw


def _winograd_t_fits(g: Any, w: Any, size: Pair, pads: Pads, stride: Pair, dilation: Pair, groups: int) -> bool:
    """Whether the transpose of a convolution can run as the transpose of its Winograd form."""
    return (_winograd_sized(w.shape, w.shape[1], size, stride, dilation, groups) and _float_arrays_or_traced(g, w)
            and min(pads[0] + pads[1]) >= 0
            and all(g.shape[2 + a] == size[a] + sum(pads[a]) - 2 for a in (0, 1)) and _in_range(g) and _in_range(w))


def _winograd_t(g: Any, w: Any, size: Pair, pads: Pads) -> Any:
    """The transposed convolution (input gradient) of a Winograd-sized convolution, by the transposed transforms."""
    th, tw = -(-g.shape[2] // 4), -(-g.shape[3] // 4)
    return _winograd_grads((None, _winograd_weight(w), th, tw), g, pads, size, True, False)[0]


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
    if b is not None and _float_arrays(y, _raw(b)):  # y is a fresh product: the bias goes in without another array
        y = np.add(y, _raw(b).reshape(-1, 1, 1), out=y)
    elif b is not None:
        y = y + _raw(b).reshape(-1, 1, 1)
    size = (int(np.shape(xr)[2]), int(np.shape(xr)[3]))
    wshape = tuple(np.shape(wr))
    nx, nw, nb = _none_need(need, 3)[:3]

    def vjp(g: Any) -> tuple[Any, ...]:
        values = not _is_tensor(x) and not _is_tensor(w)  # (else a replay, whose gradients must be recorded)
        rows = None
        if isinstance(cols, tuple) and values and _float_arrays_or_traced(g, cols[0]) and _in_range(g):  # Winograd's
            gx, gw = _winograd_grads(cols, g, pads, size, nx, nw)
        else:
            rows = _nhwc_rows(g) if _float_arrays(g) else None  # g as (N*Ho*Wo, O), once for the three gradients
            if not nx:
                gx = None
            elif rows is not None and values and _col2im_fits(g, wr, size, st, pads, dil, groups):
                gx = _col2im(g, wr, size, st, pads, dil, rows)
            else:
                gx = _call(conv_transpose_input, "conv_transpose_input", g, w, size, st, pads, dil, groups)
            if not nw:
                gw = None
            elif not _is_tensor(g) and not _is_tensor(x) and not isinstance(cols, tuple):  # the forward's columns
                gw = _wgrad_cols(cols, g, wshape, groups, rows)
            else:
                gw = _call(conv2d_weight, "conv2d_weight", x, g, wshape, st, pads, dil, groups)
        if b is None or not nb:
            gb = None
        else:
            gb = np.einsum("mo->o", rows) if rows is not None else g.sum(axis=(0, 2, 3))
        return gx, gw, gb, None, None, None, None

    return y, vjp


def _conv2d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, w: Any, b: Any = None, *params: Any) -> Any:
    """Forward-mode rule of ``conv2d``, bilinear in ``x`` and ``w``: ``conv2d(tx, w) + conv2d(x, tw)``, and
    the bias's tangent per channel. (Each rule below is the same sum for its op.)"""
    return _bilinear_jvp(conv2d, "conv2d", ts, x, w, params, (-1, 1, 1))


op("conv2d", conv2d, jvp=_conv2d_jvp, need=True, keeps=("x", "w", "b", "work"))


def _bilinear_jvp(op: Any, name: str, ts: tuple[Any, ...], x: Any, w: Any, params: tuple[Any, ...],
                  bias_shape: Any = None) -> Any:
    """``op(tx, w) + op(x, tw)`` (+ the bias tangent reshaped to ``bias_shape``), with ``params`` after the two
    inputs (and the bias, for an op that has one): each product recorded where a Tensor is in it."""
    tx, tw, tb = (*ts, None, None)[:3]
    rest = params if bias_shape is None else (None, *params)
    out = None if tx is None else _call(op, name, tx, w, *rest)
    if tw is not None:
        term = _call(op, name, x, tw, *rest)
        out = term if out is None else out + term
    if tb is not None and bias_shape is not None:
        term = np.reshape(tb, bias_shape)
        out = term if out is None else out + term
    return out


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


def _conv_transpose_input_jvp(ts: tuple[Any, ...], ans: Any, g: Any, w: Any, *params: Any) -> Any:
    return _bilinear_jvp(conv_transpose_input, "conv_transpose_input", ts, g, w, params)


op("conv_transpose_input", conv_transpose_input, jvp=_conv_transpose_input_jvp, need=True, keeps=("g", "w"))


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


def _conv2d_weight_jvp(ts: tuple[Any, ...], ans: Any, x: Any, g: Any, *params: Any) -> Any:
    return _bilinear_jvp(conv2d_weight, "conv2d_weight", ts, x, g, params)


op("conv2d_weight", conv2d_weight, jvp=_conv2d_weight_jvp, need=True, keeps=("x", "g"))


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
    high, wide = ((np.shape(xr)[2 + a] - 1) * st[a] - sum(pads[a]) + dil[a] * (kernel[a] - 1) + op[a] + 1
                  for a in (0, 1))
    size = (high, wide)
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


def _conv_transpose2d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, w: Any, b: Any = None, *params: Any) -> Any:
    return _bilinear_jvp(conv_transpose2d, "conv_transpose2d", ts, x, w, params, (-1, 1, 1))


op("conv_transpose2d", conv_transpose2d, jvp=_conv_transpose2d_jvp, need=True, keeps=("x", "w", "b"))


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
    if np.shape(wr)[2] < 1:
        raise ValueError(f"{where}: the kernel must have at least 1 tap, got a weight of shape {np.shape(wr)}")
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


def _conv1d_jvp(ts: tuple[Any, ...], ans: Any, x: Any, w: Any, b: Any = None, *params: Any) -> Any:
    return _bilinear_jvp(conv1d, "conv1d", ts, x, w, params, (-1, 1))


op("conv1d", conv1d, jvp=_conv1d_jvp, need=True, keeps=("x", "w", "b", "work"))
