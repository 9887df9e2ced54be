"""Scaled dot-product attention as one op: ``softmax(q kᵀ · scale + mask) v``, returning ``(ans, vjp)``.

``q`` is ``(..., L, E)``, ``k`` ``(..., S, E)``, ``v`` ``(..., S, Ev)``; the leading axes broadcast
(as ``@`` does), and so does the mask against the weights' ``(..., L, S)``. The weights are computed
keys-major, ``P̃ = softmax(k qᵀ · scale)`` of shape ``(..., S, L)`` (the softmax runs down axis -2,
which NumPy reduces fast; ``@`` takes the transposes for free), and only they are kept besides the
inputs: no scaled or masked copy. With ``y = P v`` and the output's cotangent ``g``, the backward is
``dv = Pᵀ g``, ``dS = P ∘ (g vᵀ - rowsum(g ∘ y))`` (the rowsum is over ``Ev``, so it needs the output,
not a pass over the weights), ``dq = scale · dS k``, ``dk = scale · dSᵀ q``, and a float mask gets
``dS`` summed back to its shape; a dropout mask ``M`` (``y = (P ∘ M) v``) changes ``dP`` to ``(g vᵀ) ∘ M``
and gets ``(g vᵀ) ∘ P``, and the rowsum stays ``rowsum(g ∘ y)``.

A row of the weights whose every key is masked out (a ``-inf`` maximum) gives weights of 0, so
its output and its gradients are 0, as PyTorch's attention gives: no NaN.

>>> q = k = np.eye(2)
>>> ans, vjp = scaled_dot_product_attention(q, k, np.array([[1.0], [3.0]]), None, True)
>>> ans
array([[1.       ],
       [2.3395231]])
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ._broadcast import unbroadcast
from ._lift import constant, weak
from ._registry import op

_CAUSAL: dict[tuple[int, int, Any], np.ndarray] = {}  # (S, L, dtype) -> the keys-major 0 / -inf mask


def _causal(s: int, n: int, dtype: Any) -> np.ndarray:
    """The additive causal mask, keys-major ``(S, L)``: ``-inf`` where key ``j`` comes after query ``i``
    (PyTorch's ``is_causal``: the lower triangle of ``(L, S)``, aligned top left), else 0. Read-only, cached."""
    key = (s, n, np.dtype(dtype))
    out = _CAUSAL.get(key)
    if out is None:
        out = np.where(np.arange(s)[:, None] > np.arange(n), -np.inf, 0.0).astype(dtype)
        out.flags.writeable = False
        if len(_CAUSAL) > 64:
            _CAUSAL.clear()
        _CAUSAL[key] = out
    return out


def _additive(mask: Any, dtype: Any) -> Any:
    """A mask as the amounts added to the scores: a boolean one as 0 (take part) and ``-inf`` (masked out)."""
    m = constant(mask) if getattr(constant(mask), "dtype", None) == np.bool_ else mask
    if getattr(m, "dtype", None) == np.bool_:
        return np.where(m, np.zeros((), dtype), np.array(-np.inf, dtype))
    return mask


def _check(q: Any, k: Any, v: Any, mask: Any, is_causal: Any) -> None:
    qs, ks, vs = np.shape(q), np.shape(k), np.shape(v)
    if min(len(qs), len(ks), len(vs)) < 2:
        raise ValueError(f"scaled_dot_product_attention: q, k and v need at least two axes (..., L, E), (..., S, E) "
                         f"and (..., S, Ev); got shapes {qs}, {ks} and {vs}")
    if qs[-1] != ks[-1]:
        raise ValueError(f"scaled_dot_product_attention: q and k must have the same last axis (E), got shapes {qs} "
                         f"and {ks}")
    if ks[-2] != vs[-2]:
        raise ValueError(f"scaled_dot_product_attention: k and v must have the same number of keys (axis -2), got "
                         f"shapes {ks} and {vs}")
    if not isinstance(is_causal, (bool, np.bool_)):
        raise TypeError(f"scaled_dot_product_attention: is_causal must be True or False, got {is_causal!r}")
    if is_causal and mask is not None:
        raise ValueError("scaled_dot_product_attention: give either a mask or is_causal=True, not both (as in "
                         "PyTorch); for a causal mask combined with another, pass the combined mask")
    if mask is not None:
        dt = getattr(constant(mask), "dtype", None)
        if dt is None or dt.kind not in "bf":
            raise TypeError(f"scaled_dot_product_attention: the mask must be a boolean array (True: takes part) or "
                            f"a float array added to the scores, got {type(mask).__name__} of dtype {dt}")
        try:
            np.broadcast_shapes(np.shape(mask), (*np.broadcast_shapes(qs[:-2], ks[:-2]), qs[-2], ks[-2]))
        except ValueError:
            raise ValueError(f"scaled_dot_product_attention: a mask of shape {np.shape(mask)} does not broadcast to "
                             f"the attention weights' shape (..., L, S) = (..., {qs[-2]}, {ks[-2]})") from None


def _into(ufunc: Any, a: Any, b: Any) -> Any:
    """``ufunc(a, b)``, written into ``a`` where ``a`` is a plain array of the result's shape and dtype (one the
    rule made itself); out of place for the stand-ins of jit and vmap and the Tensors of a replayed rule."""
    if type(a) is np.ndarray and type(b) in (np.ndarray, np.float32, np.float64, float) \
            and np.result_type(a, b) == a.dtype and np.broadcast_shapes(a.shape, np.shape(b)) == a.shape:
        return ufunc(a, b, out=a)
    return ufunc(a, b)


def _weights(q: Any, k: Any, mask: Any, is_causal: bool, scale: Any) -> Any:
    """The attention weights keys-major, ``softmax(k qᵀ · scale + maskᵀ)`` over axis -2: shape ``(..., S, L)``."""
    st = np.matmul(k, np.swapaxes(q * weak(scale, q), -1, -2))
    if is_causal:
        st = _into(np.add, st, _causal(np.shape(k)[-2], np.shape(q)[-2], st.dtype))
    elif mask is not None:
        st = _into(np.add, st, np.swapaxes(_additive(mask, st.dtype), -1, -2))
    raw = constant(st)
    if np.shape(raw)[-2]:
        top = np.max(raw, axis=-2, keepdims=True)
    else:  # (no keys: the weights are empty)
        top = np.max(raw, axis=-2, keepdims=True, initial=-np.inf)
    top = np.where(top == -np.inf, weak(0, top), top)  # (a row with every key masked out: weights 0, below)
    e = _into(np.subtract, st, top)
    e = np.exp(e, out=e) if type(e) is np.ndarray else np.exp(e)
    total = np.sum(e, axis=-2, keepdims=True)
    return _into(np.multiply, e, np.divide(weak(1, total), np.where(total == 0, weak(1, total), total)))


def _scale_of(q: Any, scale: Any) -> Any:
    if scale is not None:
        return scale
    return 1.0 / math.sqrt(np.shape(q)[-1]) if np.shape(q)[-1] else 1.0  # (E = 0: every score is 0 anyway)


def scaled_dot_product_attention(q: Any, k: Any, v: Any, mask: Any = None, is_causal: bool = False,
                                 scale: float | None = None, dropout_mask: Any = None,
                                 need: tuple[bool, ...] = ()) -> tuple[Any, Any]:
    """``softmax(q kᵀ · scale + mask) v`` (see the module's text); ``scale`` defaults to ``1 / sqrt(E)``.

    ``mask`` is boolean (True: the key takes part) or float (added to the scores), broadcasting to
    ``(..., L, S)``; ``is_causal`` masks out the keys after each query (``j > i``; not with a mask).
    ``dropout_mask`` (None, or broadcasting to ``(..., L, S)``) multiplies the weights: dropout's
    scaled keep-mask, drawn by the caller (a factor like any other: it has a cotangent too).
    ``need`` says which inputs' cotangents to compute.

    >>> ans, vjp = scaled_dot_product_attention(np.zeros((2, 3)), np.zeros((4, 3)), np.ones((4, 1)))
    >>> ans.ravel(), [np.shape(c) for c in vjp(np.ones((2, 1)))[:3]]
    (array([1., 1.]), [(2, 3), (4, 3), (4, 1)])
    """
    _check(q, k, v, mask, is_causal)
    scale = _scale_of(q, scale)
    p = _weights(q, k, mask, bool(is_causal), scale)  # (..., S, L)
    pd = p if dropout_mask is None else p * np.swapaxes(dropout_mask, -1, -2)
    ans = np.matmul(np.swapaxes(pd, -1, -2), v)
    wants = tuple(need) + (True,) * (7 - len(need))

    def vjp(g: Any) -> tuple[Any, ...]:
        gv = unbroadcast(np.matmul(pd, g), v) if wants[2] else None
        dp = np.matmul(v, np.swapaxes(g, -1, -2))  # dPᵀ, (..., S, L)
        gd = None
        if dropout_mask is not None:
            if wants[6]:  # (the keep-mask is a factor of the weights: its cotangent is dP ∘ P)
                gd = unbroadcast(np.swapaxes(dp * p, -1, -2), dropout_mask)
            dp = _into(np.multiply, dp, np.swapaxes(dropout_mask, -1, -2))
        rows = np.expand_dims(np.sum(g * ans, axis=-1), -2)  # rowsum(g ∘ y) = rowsum(dP ∘ P), (..., 1, L)
        ds = _into(np.multiply, _into(np.subtract, dp, rows), p)  # dSᵀ
        s = weak(scale, ds)
        gq = unbroadcast(np.matmul(np.swapaxes(ds, -1, -2), k) * s, q) if wants[0] else None
        gk = unbroadcast(np.matmul(ds, q) * s, k) if wants[1] else None
        gm = None
        if mask is not None and wants[3] and getattr(constant(mask), "dtype", None) != np.bool_:
            gm = unbroadcast(np.swapaxes(ds, -1, -2), mask)
        return gq, gk, gv, gm, None, None, gd

    return ans, vjp


def _sdpa_jvp(ts: tuple[Any, ...], ans: Any, q: Any, k: Any, v: Any, mask: Any = None, is_causal: bool = False,
              scale: float | None = None, dropout_mask: Any = None) -> Any:
    """``dy = dP v + P dv`` with ``dP = P ∘ (dS - rowsum(P ∘ dS))`` and ``dS = scale (dq kᵀ + q dkᵀ) + dmask``
    (keys-major, as the forward), the weights computed again."""
    tq, tk, tv, tm, _, _, td = (*ts, None, None, None, None, None, None, None)[:7]
    scale = _scale_of(q, scale)
    p = _weights(q, k, mask, bool(is_causal), scale)
    drop = None if dropout_mask is None else np.swapaxes(dropout_mask, -1, -2)
    out = None
    if tv is not None:
        out = np.matmul(np.swapaxes(p if drop is None else p * drop, -1, -2), tv)
    if td is not None:
        term = np.matmul(np.swapaxes(p * np.swapaxes(td, -1, -2), -1, -2), v)
        out = term if out is None else out + term
    ds = None
    for a, b in ((k, tq), (tk, q)):
        if b is not None:
            term = np.matmul(a, np.swapaxes(b, -1, -2)) * weak(scale, p)
            ds = term if ds is None else ds + term
    if tm is not None and getattr(constant(mask), "dtype", None) != np.bool_:
        term = np.swapaxes(tm, -1, -2)
        ds = term if ds is None else ds + term
    if ds is not None:
        dp = p * (ds - np.sum(p * ds, axis=-2, keepdims=True))
        term = np.matmul(np.swapaxes(dp if drop is None else dp * drop, -1, -2), v)
        out = term if out is None else out + term
    return out


op("scaled_dot_product_attention", scaled_dot_product_attention, jvp=_sdpa_jvp, need=True,
   keeps=("q", "k", "v", "mask", "dropout_mask", "ans", "work"))
