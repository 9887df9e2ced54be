"""Attention layers of ``leanpass.nn``: ``CausalSelfAttention``, the attention of a GPT block.

>>> import numpy as np
>>> from leanpass import nn
>>> attn = nn.CausalSelfAttention(8, 2, rng=0)
>>> attn(np.ones((3, 5, 8))).shape
(3, 5, 8)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from ..core.tensor import ArrayLike, Tensor
from ..data import _generator as _check_rng
from ..numpy import basics
from ..numpy.attention import scaled_dot_product_attention
from .layers import Linear, dropout
from .module import DTypeLike, Module, _as_input, _leaf_dtype, _leaf_shape, _set, _size

__all__ = ["CausalSelfAttention"]


@dataclass(frozen=True, repr=False, init=False, eq=False)
class CausalSelfAttention(Module):
    """Multi-head causal self-attention, as nanoGPT's ``CausalSelfAttention``.

    ``c_attn`` is one ``Linear(n_embd, 3 * n_embd)`` whose output is split into the queries, keys
    and values (in that order, each ``n_embd`` wide), and each into ``n_head`` heads of
    ``n_embd // n_head``; ``scaled_dot_product_attention(..., is_causal=True)`` runs per head; the
    heads are put side by side again and projected by ``c_proj``, a ``Linear(n_embd, n_embd)``.
    The input and the output are ``(..., T, n_embd)``.

    ``dropout`` is the rate of the attention weights' dropout and of the output's (nanoGPT's
    ``attn_dropout`` and ``resid_dropout``): on when the call gets a generator (``rng=``), off
    without one (evaluation), as ``nn.Dropout``. ``rng`` at construction initialises the
    weights (``init``: an initialiser's name, as for ``Linear``).

    PyTorch's weights load by transposing the matrices (``Linear`` keeps ``(in, out)``, PyTorch
    ``(out, in)``): ``attn.replace(c_attn=attn.c_attn.replace(weight=Tensor(w.T), bias=...))``
    with ``w = sd["c_attn.weight"].numpy()``, and the same for ``c_proj`` (docs/training.md).

    >>> attn = CausalSelfAttention(8, 2, rng=np.random.default_rng(0))
    >>> attn
    CausalSelfAttention(n_embd=8, n_head=2, dtype=float32)
    >>> attn.num_params
    288
    >>> y = attn(np.ones((2, 4, 8)), rng=np.random.default_rng(1))   # training: dropout on (rate 0 here)
    """

    c_attn: Linear
    c_proj: Linear
    n_head: int = 1
    dropout: float = 0.0
    _static: ClassVar[tuple[str, ...]] = ("n_head", "dropout")

    def __init__(self, n_embd: int, n_head: int, *, bias: bool = True, dropout: float = 0.0,
                 rng: np.random.Generator | int, init: str | Callable[..., Tensor] = "glorot",
                 dtype: DTypeLike = np.float32) -> None:
        where = "CausalSelfAttention"
        n = _size(n_embd, "n_embd", where, 1)
        heads = _size(n_head, "n_head", where, 1)
        if n % heads:
            raise ValueError(f"{where}: n_embd ({n}) must be a multiple of n_head ({heads}): each head gets "
                             "n_embd // n_head features")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"{where}: dropout must be in [0, 1), got {dropout}")
        rng = _check_rng(rng, where)
        _set(self, c_attn=Linear(n, 3 * n, rng=rng, bias=bias, init=init, dtype=dtype),
             c_proj=Linear(n, n, rng=rng, bias=bias, init=init, dtype=dtype), n_head=heads, dropout=float(dropout))

    @property
    def n_embd(self) -> int:
        """The width of the input and of the output.

        >>> CausalSelfAttention(8, 2, rng=0).n_embd
        8
        """
        return _leaf_shape(self.c_proj.weight)[1]

    def __call__(self, x: ArrayLike, *, rng: np.random.Generator | None = None) -> Tensor:
        """Attend over the ``T`` positions of ``x`` ``(..., T, n_embd)``, each to itself and those before it."""
        w = self.c_attn.weight
        x = _as_input(x, w._data.dtype if type(w) is Tensor else w.dtype)
        shape = tuple(np.shape(x._data if type(x) is Tensor else x))
        n, heads = self.n_embd, self.n_head
        if len(shape) < 2 or shape[-1] != n:
            raise ValueError(f"{self._summary()}: the input must be (..., T, {n}) (a sequence of T positions), "
                             f"got shape {shape}")
        lead, t = shape[:-2], shape[-2]
        k = len(lead)
        qkv = basics.reshape(self.c_attn(x), (*lead, t, 3, heads, n // heads))
        # (..., T, 3, h, d) -> (3, ..., h, T, d): q, k and v are views of one array, each (..., h, T, d)
        qkv = basics.transpose(qkv, (k + 1, *range(k), k + 2, k, k + 3))
        rate = self.dropout if rng is not None else 0.0
        y = scaled_dot_product_attention(qkv[0], qkv[1], qkv[2], is_causal=True, dropout_p=rate, rng=rng)
        y = basics.reshape(basics.swapaxes(y, -2, -3), (*lead, t, n))  # the heads side by side again
        return dropout(self.c_proj(y), rate, rng)

    def _summary(self) -> str:
        extra = "" if self.c_attn.bias is not None else ", bias=False"
        return (f"CausalSelfAttention(n_embd={self.n_embd}, n_head={self.n_head}{extra}"
                f"{f', dropout={self.dropout:g}' if self.dropout else ''}, dtype={_leaf_dtype(self.c_attn.weight)})")


CausalSelfAttention.__module__ = "leanpass.nn"
# doctest finds the class only in its __module__ (leanpass.nn, which loads it on first use): its examples here.
__test__ = {"CausalSelfAttention": CausalSelfAttention}
