"""Attention on Tensors: ``leanpass.scaled_dot_product_attention`` (also ``leanpass.nn.scaled_dot_product_attention``).

One recorded op (``functional.scaled_dot_product_attention``) with PyTorch's semantics
(``torch.nn.functional.scaled_dot_product_attention``); dropout draws its mask from an explicit
generator, as ``nn.dropout`` does.

>>> import numpy as np
>>> import leanpass as lp
>>> q = lp.Tensor(np.ones((2, 4, 3)), requires_grad=True)
>>> y = lp.scaled_dot_product_attention(q, q, q, is_causal=True)
>>> y.shape, y.op
((2, 4, 3), 'scaled_dot_product_attention')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, _value, apply
from ..functional import _lift


def _arr(x: Any) -> Any:
    """Lists become arrays; Tensors, arrays and numbers pass through."""
    return np.asarray(x) if isinstance(x, (list, tuple)) else x


def scaled_dot_product_attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, mask: ArrayLike | None = None, *,
                                 is_causal: bool = False, dropout_p: float = 0.0, scale: float | None = None,
                                 rng: np.random.Generator | None = None,
                                 attn_mask: ArrayLike | None = None) -> Tensor:
    """``softmax(q @ kᵀ * scale + mask) @ v``, as one op: PyTorch's ``scaled_dot_product_attention``.

    ``q`` is ``(..., L, E)``, ``k`` ``(..., S, E)`` and ``v`` ``(..., S, Ev)``; the result is
    ``(..., L, Ev)``. The leading axes broadcast, as in ``@``.

    - ``mask`` (or ``attn_mask=``, PyTorch's name) broadcasts to the weights' ``(..., L, S)``: a
      boolean mask says which keys each query attends to (True: takes part); a float mask is added
      to the scores (``-inf`` masks out) and gets a gradient.
    - ``is_causal=True`` lets query ``i`` attend to keys ``j <= i`` only (PyTorch's lower
      triangle, aligned top left when ``L != S``); it cannot be combined with a mask.
    - ``scale`` defaults to ``1 / sqrt(E)``.
    - ``dropout_p > 0`` zeroes each weight with that probability and scales the others by
      ``1 / (1 - dropout_p)``; the mask is drawn from ``rng``, a ``np.random.Generator``, which it
      needs (LeanPass keeps no global random state). For evaluation, pass ``dropout_p=0.0``.

    A query whose every key is masked out gets an output of 0 and gradients of 0 (as PyTorch's).
    The op keeps ``q``, ``k``, ``v`` and the attention weights for its backward pass, nothing more,
    and differentiates to any order.

    >>> q = np.array([[1.0, 0.0], [0.0, 1.0]])
    >>> v = np.array([[1.0], [3.0]])
    >>> scaled_dot_product_attention(q, q, v, is_causal=True, scale=1.0)
    Tensor([[1.        ],
            [2.46211716]])
    >>> scaled_dot_product_attention(q, q, v, np.array([[True, False], [False, False]]))
    Tensor([[1.],
            [0.]])
    """
    if attn_mask is not None:
        if mask is not None:
            raise TypeError("scaled_dot_product_attention: give the mask once, as mask or as attn_mask")
        mask = attn_mask
    q, k, v, mask = _arr(q), _arr(k), _arr(v), _arr(mask)
    if mask is not None and type(mask) is not Tensor:
        m = _lift.asarray(mask)
        dt = np.result_type(_value(q), _value(k))
        if m.dtype.kind == "f" and dt.kind == "f" and m.dtype != dt:
            m = m.astype(dt)  # (a mask given as an array takes the queries' dtype: float32 stays float32)
        mask = m
    if not isinstance(dropout_p, (int, float, np.floating)) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"scaled_dot_product_attention: dropout_p must be in [0, 1), got {dropout_p!r}")
    keep = None
    if dropout_p > 0.0:
        if not isinstance(rng, np.random.Generator):
            raise TypeError(
                f"scaled_dot_product_attention: dropout_p={dropout_p} draws a dropout mask and needs rng=, a "
                f"np.random.Generator (got {type(rng).__name__}). Make one generator, rng = "
                "np.random.default_rng(0), and pass it to each call; for evaluation pass dropout_p=0.0.")
        shapes = [np.shape(_value(a)) for a in (q, k, v)]
        batch = np.broadcast_shapes(*(s[:-2] for s in shapes))
        weights = (*batch, shapes[0][-2], shapes[1][-2])
        if mask is not None:
            weights = np.broadcast_shapes(weights, np.shape(_value(mask)))
        dtype = np.result_type(_value(q), _value(k), _value(v))
        dtype = dtype if dtype.kind == "f" else np.dtype(np.float64)
        keep = (rng.random(weights) >= dropout_p).astype(dtype) * dtype.type(1.0 / (1.0 - dropout_p))
    return apply(F.scaled_dot_product_attention, "scaled_dot_product_attention", q, k, v, mask, is_causal,
                 scale, keep)
