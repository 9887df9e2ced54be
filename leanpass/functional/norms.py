"""Normalisation: ``batch_norm`` and ``group_norm`` with the batch's statistics, ``layer_norm`` with each
row's. Each returns ``(ans, vjp)``.

Both normalise ``x`` over some axes to mean 0 and (biased) variance 1, then scale and shift per
channel. With ``x̂ = (x - mean) / σ`` and ``ĝ = g * weight`` the input's cotangent is
``(ĝ - mean(ĝ) - x̂ * mean(ĝ * x̂)) / σ``, the means over the normalised axes; ``weight`` gets
``sum(g * x̂)`` and ``bias`` ``sum(g)`` over the other axes. The input's tangent is the same
projection of ``t``, ``(t - mean(t) - x̂ * mean(t * x̂)) / σ`` (the map is symmetric), times ``weight``;
the parameters' tangents add ``x̂ * t_weight + t_bias`` (each op's ``_<op>_jvp``, in its record).
The rules use NumPy's functions only, so they differentiate again.

>>> x = np.array([[1.0, 2.0], [3.0, 6.0]])
>>> ans, vjp = batch_norm(x, np.ones(2), np.zeros(2), axis=1, eps=0.0)
>>> ans
array([[-1., -1.],
       [ 1.,  1.]])
"""

from __future__ import annotations

import math
import threading
from functools import partial
from typing import Any

import numpy as np

from . import _lift
from ._registry import op
from ._scratch import buffer, float_arrays, float_arrays_or_traced, like
from ._scratch import work as scratch


def _mean(x: Any, axes: tuple[int, ...]) -> Any:
    """``np.mean`` over ``axes`` (kept), with the mean of no values 0 rather than NaN and a warning."""
    return np.sum(x, axis=axes, keepdims=True) / max(math.prod(np.shape(x)[a] for a in axes), 1)


def _normalise(x: Any, axes: tuple[int, ...], eps: float) -> tuple[Any, Any]:
    """``(x̂, 1/σ)`` over ``axes``, with the statistics kept as broadcastable axes."""
    mean = _mean(x, axes)
    centred = x - mean
    inv = 1.0 / np.sqrt(_mean(centred * centred, axes) + eps)
    return centred * inv, inv


def _channel_sum(axis: int, a: Any, b: Any = None) -> Any:
    """The sum of ``a`` (or of ``a * b``) over every axis but ``axis``: one ``einsum``, which is several
    times faster than ``np.sum`` over three axes of a channels-last view and needs no product array."""
    letters = "abcdefghijklmnopqrstuvwxyz"[:np.ndim(a)]
    if b is None:
        return np.einsum(f"{letters}->{letters[axis]}", a)
    return np.einsum(f"{letters},{letters}->{letters[axis]}", a, b)


_last = threading.local()  # the statistics of the last batch_norm of this thread, with its input


def batch_statistics(x: Any, axis: int) -> tuple[Any, Any]:
    """The mean and the biased variance of ``x`` over every axis but ``axis``, per channel (two passes, or
    none when ``x`` is the array the last ``batch_norm`` of this thread normalised, right before).

    >>> batch_statistics(np.array([[1.0, 10.0], [3.0, 30.0]]), 1)
    (array([ 2., 20.]), array([  1., 100.]))
    """
    last = getattr(_last, "stats", None)
    _last.stats = None  # (taken once, by the caller that ran batch_norm on x just before)
    if last is not None and last[0] is x and last[1] == axis:  # batch_norm's own, just computed for this x
        return last[2], last[3]
    count = max(int(np.size(x)) // max(int(np.shape(x)[axis]), 1), 1)  # (an empty batch: zeros, not 0 / 0)
    bshape = tuple(n if a == axis else 1 for a, n in enumerate(np.shape(x)))
    mean = _channel_sum(axis, x) / count
    centred = _centred(x, np.reshape(mean, bshape))
    return mean, _channel_sum(axis, centred, centred) / count


def _centred(x: Any, mean: Any) -> Any:
    """``x - mean`` for a rule that drops it soon (a reused buffer for plain arrays)."""
    if float_arrays(x, mean):
        return np.subtract(x, mean, out=buffer("centred", np.shape(x), x.dtype))
    return x - mean


def _input_cotangent(gh: Any, xhat: Any, inv: Any, axes: tuple[int, ...]) -> Any:
    return (gh - _mean(gh, axes) - xhat * _mean(gh * xhat, axes)) * inv


def batch_norm(x: Any, weight: Any = None, bias: Any = None, axis: int = 1, eps: float = 1e-5) -> tuple[Any, Any]:
    """Normalise ``x`` with the mean and biased variance over every axis but ``axis`` (the channels).

    ``weight`` and ``bias`` (shape ``(C,)`` or None) scale and shift each channel, as
    ``torch.nn.functional.batch_norm(..., training=True)`` does.

    >>> ans, _ = batch_norm(np.array([[0.0], [2.0]]), None, None, axis=1, eps=0.0)
    >>> ans
    array([[-1.],
           [ 1.]])
    """
    ndim = np.ndim(x)
    if ndim < 2:
        raise ValueError(f"batch_norm: the input needs a batch axis and a channel axis, got shape {np.shape(x)}")
    if not -ndim <= axis < ndim:
        raise ValueError(f"batch_norm: axis {axis} is out of range for an input of shape {np.shape(x)}")
    axis %= ndim
    c = np.shape(x)[axis]
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and np.shape(p) != (c,):
            raise ValueError(f"batch_norm: {name} must have shape ({c},) for input {np.shape(x)} (axis {axis}), "
                             f"got {np.shape(p)}")
    bshape = tuple(c if a == axis else 1 for a in range(ndim))
    count = int(np.size(x)) // max(c, 1)  # the entries each channel's statistics are taken over
    if count == 1:
        raise ValueError(f"batch_norm: expected more than 1 value per channel when training, got input shape "
                         f"{np.shape(x)} (channels on axis {axis}): each would normalise to 0. Train on a larger "
                         "batch, or normalise each example (group_norm, LayerNorm)")
    count = max(count, 1)  # (an empty batch: statistics of zero and an empty output, not 0 / 0)
    mean_c = _channel_sum(axis, x) / count
    mean = np.reshape(mean_c, bshape)
    centred = x - mean
    var_c = _channel_sum(axis, centred, centred) / count
    _last.stats = (x, axis, mean_c, var_c)  # for nn.BatchNorm's running statistics (batch_statistics)
    inv = np.reshape(1.0 / np.sqrt(var_c + eps), bshape)
    k = inv if weight is None else np.reshape(weight, bshape) * inv  # ans = (x - mean) k + bias
    ans = np.multiply(centred, k, out=centred if float_arrays(centred, k) else None)  # (our own array)
    if bias is not None:
        shift = np.reshape(bias, bshape)
        ans = np.add(ans, shift, out=ans if float_arrays(ans, shift) and ans is centred else None)

    def vjp(g: Any) -> tuple[Any, ...]:
        # (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) / σ with ĝ = g w and x̂ = (x - mean) / σ: the means are per-channel
        # sums, so it is g k - (k sum(g) + (x - mean) k sum(g x̂) / σ) / count with k = w / σ. x̂ is not
        # kept from the forward (x is kept anyway): an array of the batch's size fewer alive until here.
        centred = _centred(x, mean)
        sum_g, sum_gx = _channel_sum(axis, g), _channel_sum(axis, g, centred) * np.reshape(inv, (c,))
        slope = k * inv * np.reshape(sum_gx / count, bshape)
        gx = (g * k - k * np.reshape(sum_g / count, bshape)) - np.multiply(
            centred, slope, out=centred if float_arrays(centred, slope) else None)
        gw = None if weight is None else sum_gx
        gb = None if bias is None else sum_g
        return gx, gw, gb, None, None

    return ans, vjp


def _batch_norm_jvp(ts: tuple[Any, ...], ans: Any, x: Any, weight: Any = None, bias: Any = None, axis: int = 1,
                    eps: float = 1e-5) -> Any:
    """The VJP's formula applied to the input's tangent (the normalisation's Jacobian is symmetric), plus
    ``x̂ * t_weight + t_bias``: ``t k + (x - mean) (t_weight - k mean(t x̂)) / σ + t_bias - k mean(t)``
    with ``k = weight / σ``, in a few passes over ``x`` and one fresh array."""
    tx, tw, tb = (*ts, None, None)[:3]
    ndim = np.ndim(x)
    axis %= ndim
    c = np.shape(x)[axis]
    bshape = tuple(c if a == axis else 1 for a in range(ndim))
    count = max(int(np.size(x)) // max(c, 1), 1)  # (an empty batch: 0 / 1, no 0 / 0)
    centred = _centred(x, np.reshape(_channel_sum(axis, x) / count, bshape))
    inv = 1.0 / np.sqrt(_channel_sum(axis, centred, centred) / count + eps)
    k = inv if weight is None else weight * inv
    slope = None if tw is None else tw * inv  # per channel: the multiple of x - mean
    shift = tb  # per channel: the constant
    if tx is not None:
        drift = k * inv * inv * (_channel_sum(axis, tx, centred) / count)
        slope = -drift if slope is None else slope - drift
        mean_t = k * (_channel_sum(axis, tx) / count)
        shift = -mean_t if shift is None else shift - mean_t
    return _tangent_sum(tx, centred, *(None if v is None else np.reshape(v, bshape) for v in (k, slope, shift)))


op("batch_norm", batch_norm, jvp=_batch_norm_jvp, keeps=("x", "weight", "bias", "work"))


def _tangent_sum(t: Any, centred: Any, k: Any, slope: Any, shift: Any) -> Any:
    """``t * k + centred * slope + shift`` as one fresh array (``t``, ``slope`` or ``shift`` None: no such term).
    ``centred`` may be a scratch buffer (``_centred``): it is written into, and never returned."""
    out = None if t is None else t * k
    if slope is not None:
        if out is not None and float_arrays(out, centred) and type(slope) is np.ndarray:  # (the scratch, then ours)
            out += np.multiply(centred, slope, out=centred)
        else:
            term = centred * slope
            out = term if out is None else out + term
    if shift is not None:
        if out is not None and float_arrays(out) and type(shift) is np.ndarray:
            out += shift
        else:
            out = shift if out is None else out + shift
    return out


def group_norm(x: Any, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> tuple[Any, Any]:
    """Normalise each example's channels in ``num_groups`` groups (``x`` is ``(N, C, ...)``), then scale and shift.

    >>> ans, _ = group_norm(np.array([[[0.0], [2.0], [5.0], [7.0]]]), 2, None, None, eps=0.0)
    >>> ans[0, :, 0]
    array([-1.,  1., -1.,  1.])
    """
    shape = tuple(np.shape(x))
    if len(shape) < 2:
        raise ValueError(f"group_norm: the input must be (N, C, ...), got shape {shape}")
    c = shape[1]
    if not isinstance(num_groups, (int, np.integer)) or num_groups < 1 or c % num_groups:
        raise ValueError(f"group_norm: num_groups={num_groups!r} must be an int >= 1 dividing the channels ({c}); "
                         f"input {shape}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and np.shape(p) != (c,):
            raise ValueError(f"group_norm: {name} must have shape ({c},) for input {shape}, got {np.shape(p)}")
    grouped = (shape[0], int(num_groups), math.prod(shape[1:]) // int(num_groups))  # (-1 fails on no values)
    xg = np.reshape(x, grouped)
    xhat_g, inv = _normalise(xg, (2,), eps)
    xhat = np.reshape(xhat_g, shape)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    w = None if weight is None else np.reshape(weight, bshape)
    ans = xhat if w is None else xhat * w
    if bias is not None:
        ans = ans + np.reshape(bias, bshape)
    others = (0, *range(2, len(shape)))

    def vjp(g: Any) -> tuple[Any, ...]:
        gh = g if w is None else g * w
        gx = np.reshape(_input_cotangent(np.reshape(gh, grouped), xhat_g, inv, (2,)), shape)
        gw = None if weight is None else np.sum(g * xhat, axis=others)
        gb = None if bias is None else np.sum(g, axis=others)
        return gx, None, gw, gb, None

    return ans, vjp


def _group_norm_jvp(ts: tuple[Any, ...], ans: Any, x: Any, num_groups: int, weight: Any = None, bias: Any = None,
                    eps: float = 1e-5) -> Any:
    """As ``_batch_norm_jvp``, with the statistics per example and group: ``x`` is seen as ``(N, G, C/G, rest)``."""
    tx, _, tw, tb = (*ts, None, None, None)[:4]
    shape = tuple(np.shape(x))
    n, c, g = shape[0], shape[1], int(num_groups)
    grouped = (n, g, c // g, math.prod(shape[2:]))  # (explicit: -1 cannot be worked out for no values)
    xg = np.reshape(x, grouped)
    count = max(int(np.size(x)) // max(n * g, 1), 1)
    centred = _centred(xg, np.reshape(np.einsum("ngcs->ng", xg) / count, (n, g, 1, 1)))
    inv = np.reshape(1.0 / np.sqrt(np.einsum("ngcs,ngcs->ng", centred, centred) / count + eps), (n, g, 1, 1))
    per_channel = (1, g, c // g, 1)
    k = inv if weight is None else inv * np.reshape(weight, per_channel)
    slope = None if tw is None else inv * np.reshape(tw, per_channel)
    shift = None if tb is None else np.reshape(tb, per_channel)
    tg = None
    if tx is not None:
        tg = np.reshape(tx, grouped)
        drift = k * inv * inv * np.reshape(np.einsum("ngcs,ngcs->ng", tg, centred) / count, (n, g, 1, 1))
        slope = -drift if slope is None else slope - drift
        mean_t = k * np.reshape(np.einsum("ngcs->ng", tg) / count, (n, g, 1, 1))
        shift = -mean_t if shift is None else shift - mean_t
    out = _tangent_sum(tg, centred, k, slope, shift)
    return np.reshape(np.broadcast_to(out, np.shape(xg)) if tg is None and slope is None else out, shape)


op("group_norm", group_norm, jvp=_group_norm_jvp, keeps=("weight", "bias", "work"))


def layer_norm(x: Any, weight: Any = None, bias: Any = None, shape: tuple[int, ...] = (), eps: float = 1e-5
               ) -> tuple[Any, Any]:
    """Normalise ``x`` over its last ``len(shape)`` axes (which must be ``shape``), then scale by ``weight`` and
    shift by ``bias`` (each of ``shape``, or None): ``torch.nn.functional.layer_norm(x, shape, weight, bias, eps)``.

    One op: the forward keeps ``x`` (the caller holds it anyway), each row's mean and ``1/σ``, and the
    backward recomputes ``x̂`` from them. Row sums are products with a vector of ones (BLAS reads a row
    faster than NumPy reduces a short last axis). On Tensors (a backward pass differentiated again) the
    statistics and the VJP are recorded ops, so every order works.

    >>> ans, vjp = layer_norm(np.array([[1.0, 2.0, 3.0]]), None, None, (3,), eps=0.0)
    >>> ans.round(4)
    array([[-1.2247,  0.    ,  1.2247]])
    >>> vjp(np.array([[1.0, 0.0, 0.0]]))[0].round(4)
    array([[ 0.2041, -0.4082,  0.2041]])
    """
    shape = tuple(shape)
    n = math.prod(shape)
    if tuple(np.shape(x)[np.ndim(x) - len(shape):]) != shape or np.ndim(x) < len(shape):
        raise ValueError(f"layer_norm: normalized_shape {shape} must be the last axes of the input, whose shape "
                         f"is {np.shape(x)}")
    for name, p in (("weight", weight), ("bias", bias)):
        if p is not None and tuple(np.shape(p)) != shape:
            raise ValueError(f"layer_norm: {name} must have the normalized shape {shape}, got {np.shape(p)}")
    if _lift.is_tensor(x) or _lift.is_tensor(weight) or _lift.is_tensor(bias):
        ans = _lift.apply(layer_norm, "layer_norm", x, weight, bias, shape, eps)  # type: ignore[misc]
        mean, rstd = _row_statistics(x, n, eps)
        return ans, partial(_layer_norm_vjp, x, weight, bias, mean, rstd, n)
    rows = np.reshape(x, _rows_shape(x, n))
    ones = np.ones(n, rows.dtype)
    mean = np.reshape(rows @ ones, (-1, 1))
    mean *= 1.0 / max(n, 1)
    centred = rows - mean  # (becomes the output)
    square = np.multiply(centred, centred, out=buffer("layer_norm.square", centred.shape, centred.dtype)
                         if float_arrays(centred) else None)
    var = np.reshape(square @ ones, (-1, 1))
    var *= 1.0 / max(n, 1)
    var += eps
    rstd = np.sqrt(var, out=var)
    np.divide(1.0, rstd, out=rstd)
    centred *= rstd
    if weight is not None:
        centred *= np.reshape(weight, (1, n))
    if bias is not None:
        centred += np.reshape(bias, (1, n))
    return np.reshape(centred, np.shape(x)), partial(_layer_norm_vjp, x, weight, bias, mean, rstd, n)


def _rows_shape(x: Any, n: int) -> tuple[int, int]:
    """``x`` as rows of its last ``n`` values (explicit sizes: -1 cannot be worked out for no values)."""
    return int(np.size(x)) // n if n else math.prod(np.shape(x)[:-1]), n


def _row_statistics(x: Any, n: int, eps: float) -> tuple[Any, Any]:
    """Each row's mean and ``1 / sqrt(var + eps)`` (rows of the last ``n`` values), as ``(rows, 1)`` columns,
    written with NumPy functions (on Tensors: recorded)."""
    rows = np.reshape(x, _rows_shape(x, n))
    mean = np.sum(rows, axis=1, keepdims=True) / max(n, 1)
    centred = rows - mean
    var = np.sum(centred * centred, axis=1, keepdims=True) / max(n, 1)
    return mean, 1.0 / np.sqrt(var + eps)


def _layer_norm_vjp(x: Any, weight: Any, bias: Any, mean: Any, rstd: Any, n: int, g: Any) -> tuple[Any, ...]:
    """``gx = (ĝ - mean(ĝ) - x̂ mean(ĝ x̂)) / σ`` with ``ĝ = g weight``; ``weight`` gets ``sum(g x̂)`` and
    ``bias`` ``sum(g)`` over the rows. Sums are products with vectors of ones; NumPy functions only."""
    rows = np.reshape(x, _rows_shape(x, n))
    g2 = np.reshape(g, np.shape(rows))
    if float_arrays_or_traced(rows, g2, mean) and (weight is None or float_arrays_or_traced(rows, weight)):
        return _layer_norm_vjp_arrays(x, rows, g2, weight, bias, mean, rstd, n)  # (under jit too: its bits)
    xhat = (rows - mean) * rstd
    m = np.shape(rows)[0]
    ones_m = np.ones(m, getattr(rows, "dtype", np.float64))
    ones_n = np.ones(n, getattr(rows, "dtype", np.float64))
    gw = None if weight is None else np.reshape(ones_m @ (g2 * xhat), np.shape(weight))
    gb = None if bias is None else np.reshape(ones_m @ g2, np.shape(bias))
    gh = g2 if weight is None else g2 * np.reshape(weight, (1, n))
    inv_n = 1.0 / max(n, 1)
    mean_gh = np.reshape(gh @ ones_n, (-1, 1)) * inv_n
    mean_ghx = np.reshape((gh * xhat) @ ones_n, (-1, 1)) * inv_n
    gx = (gh - mean_gh - xhat * mean_ghx) * rstd
    return np.reshape(gx, np.shape(x)), gw, gb, None, None


def _layer_norm_vjp_arrays(x: Any, rows: Any, g2: Any, weight: Any, bias: Any, mean: Any, rstd: Any,
                           n: int) -> tuple[Any, ...]:
    """``_layer_norm_vjp`` on plain arrays, with ``x̂ = (x - mean) / σ`` expanded so that no ``x̂`` is formed:
    ``gx = ĝ / σ - x c1 + c0`` with per-row ``c1 = mean(ĝ x̂) / σ²`` and ``c0 = mean c1 - mean(ĝ) / σ``, from
    row sums of ``ĝ`` and ``ĝ x``; ``weight``'s cotangent is ``(1/σ)ᵀ (g x) - (mean / σ)ᵀ g``. Row and column
    sums are products with vectors; the one temporary is a reused buffer."""
    m = rows.shape[0]
    work = scratch("layer_norm.work", rows.shape, rows.dtype, like(rows, g2))
    r = np.reshape(rstd, (m,))
    gw = gb = None
    if weight is not None:
        gx_ = np.multiply(g2, rows, out=work)
        gw = np.reshape(r @ gx_ - (np.reshape(mean, (m,)) * r) @ g2, np.shape(weight))
    if bias is not None:
        gb = np.reshape(np.ones(m, rows.dtype) @ g2, np.shape(bias))
    gh = g2 * np.reshape(weight, (1, n)) if weight is not None else g2 * rstd  # (becomes the input's cotangent)
    ones_n = np.ones(n, rows.dtype)
    inv_n = 1.0 / max(n, 1)
    sum_gh = np.reshape(gh @ ones_n, (m, 1))  # (of g w, or of g / σ without a weight)
    sum_ghx = np.reshape(np.multiply(gh, rows, out=work) @ ones_n, (m, 1))
    if weight is not None:
        gh *= rstd
        sum_gh *= rstd
        sum_ghx *= rstd
    # the sums are of ĝ / σ and ĝ x / σ (ĝ = g w): c1 = mean(ĝ x̂) / σ² = (mean(ĝ x) - mean mean(ĝ)) / σ³
    c1 = (sum_ghx - mean * sum_gh) * inv_n
    c1 *= rstd * rstd
    c0 = mean * c1 - sum_gh * inv_n
    gh -= np.multiply(rows, c1, out=work)
    gh += c0
    return np.reshape(gh, np.shape(x)), gw, gb, None, None


def _layer_norm_jvp(ts: tuple[Any, ...], ans: Any, x: Any, weight: Any = None, bias: Any = None,
                    shape: tuple[int, ...] = (), eps: float = 1e-5) -> Any:
    """``(t - mean(t) - x̂ mean(t x̂)) / σ * weight + x̂ t_weight + t_bias`` (the normalisation's Jacobian
    is symmetric: the VJP's formula on the tangent)."""
    tx, tw, tb = (*ts, None, None)[:3]
    n = math.prod(tuple(shape))
    mean, rstd = _row_statistics(x, n, eps)
    xhat = (np.reshape(x, _rows_shape(x, n)) - mean) * rstd
    out = None
    if tx is not None:
        t2 = np.reshape(tx, np.shape(xhat))
        out = (t2 - np.mean(t2, axis=1, keepdims=True) - xhat * np.mean(t2 * xhat, axis=1, keepdims=True)) * rstd
        if weight is not None:
            out = out * np.reshape(weight, (1, n))
    if tw is not None:
        term = xhat * np.reshape(tw, (1, n))
        out = term if out is None else out + term
    if tb is not None:
        term = np.broadcast_to(np.reshape(tb, (1, n)), np.shape(xhat))
        out = term if out is None else out + term
    return None if out is None else np.reshape(out, np.shape(x))


op("layer_norm", layer_norm, jvp=_layer_norm_jvp, keeps=("x", "weight", "bias", "work"))
