"""Fused loss operations. Each returns ``(ans, vjp)``.

``cross_entropy`` is one op rather than ``log_softmax`` followed by indexing: its VJP is the
familiar ``softmax(x) - onehot(labels)`` in one step, with no scatter-add, which keeps the
training step of a small network close to hand-written NumPy. Like every rule, it uses NumPy's
functions and operators only, so a differentiable backward pass can replay it on Tensors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _lift
from ._lift import weak
from ._registry import op
from .reductions import _shifted, softmax

_REDUCTIONS = ("mean", "sum", "none")


def cross_entropy(x: Any, labels: Any, reduction: str = "mean") -> tuple[Any, Any]:
    """Softmax cross-entropy of logits ``x`` (shape ``(n, classes)``) against integer ``labels`` (``(n,)``).

    ``-log_softmax(x)[i, labels[i]]`` for each row ``i``, then averaged (``"mean"``), added up
    (``"sum"``) or returned per row (``"none"``). Stable for any logits: the row maximum is
    subtracted first. The cotangent of ``x`` is ``g * (softmax(x) - onehot(labels))``
    (divided by ``n`` for the mean); ``labels`` and ``reduction`` get ``None``.

    >>> ans, vjp = cross_entropy(np.array([[0.0, 0.0], [1000.0, -1000.0]]), np.array([0, 0]))
    >>> round(float(ans), 6)
    0.346574
    >>> vjp(np.array(1.0))[0]
    array([[-0.25,  0.25],
           [ 0.  ,  0.  ]])
    """
    n = x.shape[0]
    rows = np.arange(n)
    fast = isinstance(x, _lift.ARRAYS)  # raw arrays (first order); a Tensor means a replayed, recorded pass
    if fast:
        # Subtract each row's maximum (a constant) before exp; with the ufuncs themselves
        # (ndarray.max and .sum are Python wrappers). s >= 1 (the maximum's own exp(0)), so
        # never log(0). A row with an infinite maximum makes the loss nan (inf - inf: a
        # RuntimeWarning, an error where warnings are errors) and is then computed again
        # below, with the limits the general path takes (no np.errstate here: it costs a
        # few microseconds per call).
        try:
            shifted = x - np.maximum.reduce(x, axis=-1, keepdims=True)
            e = np.exp(shifted)
            s: Any = np.add.reduce(e, axis=-1, keepdims=True)
            lse = np.log(s)
            ans = _reduce(lse.reshape(n) - shifted[rows, labels], reduction, n, fast)
            check = ans if reduction != "none" else np.add.reduce(ans)
            fast = check == check or bool(np.isnan(x).any())
        except RuntimeWarning:
            fast = False
    if not fast:
        shifted = _shifted(x, -1)[0]
        e = np.exp(shifted)
        s = e.sum(axis=-1, keepdims=True)
        with np.errstate(divide="ignore", invalid="ignore"):  # a row of all -inf: nan, as log_softmax
            lse = np.log(s)
            ans = _reduce(lse.reshape(n) - shifted[rows, labels], reduction, n, fast)
        if isinstance(x, _lift.ARRAYS):
            with np.errstate(invalid="ignore"):  # 0 / 0 in a row of all -inf: nan, without a warning
                e = e / s
            s = np.ones((), e.dtype)
            fast = True

    def vjp(g: Any) -> tuple[Any, None, None]:
        p = e / s  # softmax(x), from the forward's pieces
        if fast and isinstance(g, _lift.ARRAYS):  # the same formula, in place on the fresh p
            p[rows, labels] -= 1
            if reduction == "mean":
                p *= g / weak(n, g)
            elif reduction == "sum":
                p *= g
            else:
                p *= g.reshape(n, 1)
            return p, None, None
        onehot = np.equal(np.expand_dims(labels, -1), np.arange(x.shape[-1])).astype(x.dtype)
        diff = p - onehot
        if reduction == "mean":
            return diff * (g / weak(n, g)), None, None
        if reduction == "sum":
            return diff * g, None, None
        return diff * g.reshape(n, 1), None, None

    return ans, vjp


def _reduce(per_row: Any, reduction: str, n: int, fast: bool) -> Any:
    if reduction == "mean":
        total = np.add.reduce(per_row) if fast else per_row.sum()
        return total / weak(n, total)
    if reduction == "sum":
        return np.add.reduce(per_row) if fast else per_row.sum()
    return per_row


def _cross_entropy_jvp(ts: tuple[Any, ...], ans: Any, x: Any, labels: Any, reduction: str = "mean") -> Any:
    """Forward-mode rule: per row, ``(softmax(x) - onehot(labels)) . t``, reduced like the loss."""
    t = ts[0]
    n = x.shape[0]
    per_row = np.sum(softmax(x, -1)[0] * t, axis=-1) - t[np.arange(n), labels]
    if reduction == "mean":
        total = per_row.sum()
        return total / weak(n, total)
    return per_row.sum() if reduction == "sum" else per_row


op("cross_entropy", cross_entropy, jvp=_cross_entropy_jvp, keeps=("x", "labels", "work"))
