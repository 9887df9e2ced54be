"""Initialisers of ``leanpass.nn``: ``init(rng, shape, dtype) -> Tensor``, each drawing from an
explicit ``np.random.Generator`` (or a seed), so the same seed gives the same weights.

>>> import numpy as np
>>> from leanpass import nn
>>> nn.glorot_uniform(np.random.default_rng(0), (3, 2), np.float64).shape
(3, 2)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ..core.tensor import Tensor
from ..data import _generator as _check_rng
from .module import DTypeLike, _float_dtype

__all__ = ["he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "xavier_normal", "xavier_uniform", "zeros"]


# ----- initialisers ------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """``(fan_in, fan_out)``, each at least 1 (a shape with a 0 holds no numbers to scale)."""
    if len(shape) < 2:
        n = max(shape[0] if shape else 1, 1)
        return n, n
    receptive = math.prod(shape[:-2])
    return max(shape[-2] * receptive, 1), max(shape[-1] * receptive, 1)


def he_normal(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) normal: ``N(0, 2 / fan_in)``, for layers followed by ``relu``.

    ``shape`` is ``(fan_in, fan_out)`` for a weight matrix used as ``x @ w``.

    >>> w = he_normal(np.random.default_rng(0), (64, 32))
    >>> w.shape, w.dtype
    ((64, 32), dtype('float32'))
    """
    rng = _check_rng(rng, "he_normal")
    fan_in, _ = _fans(shape)
    dt = _float_dtype(dtype, "he_normal")
    return Tensor(rng.standard_normal(shape) * math.sqrt(2.0 / fan_in), dtype=dt)


def he_uniform(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) uniform: ``U(-a, a)`` with ``a = sqrt(6 / fan_in)``.

    >>> float(abs(he_uniform(0, (6, 3))).max().item()) <= 1.0
    True
    """
    rng = _check_rng(rng, "he_uniform")
    fan_in, _ = _fans(shape)
    a = math.sqrt(6.0 / fan_in)
    return Tensor(rng.uniform(-a, a, shape), dtype=_float_dtype(dtype, "he_uniform"))


def glorot_normal(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) normal: ``N(0, 2 / (fan_in + fan_out))``, for tanh / sigmoid layers.

    >>> glorot_normal(0, (3, 5), np.float64).dtype
    dtype('float64')
    """
    rng = _check_rng(rng, "glorot_normal")
    fan_in, fan_out = _fans(shape)
    std = math.sqrt(2.0 / (fan_in + fan_out))
    return Tensor(rng.standard_normal(shape) * std, dtype=_float_dtype(dtype, "glorot_normal"))


def glorot_uniform(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) uniform: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``.

    >>> float(abs(glorot_uniform(0, (3, 3))).max().item()) <= 1.0
    True
    """
    rng = _check_rng(rng, "glorot_uniform")
    fan_in, fan_out = _fans(shape)
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return Tensor(rng.uniform(-a, a, shape), dtype=_float_dtype(dtype, "glorot_uniform"))


xavier_normal = glorot_normal
xavier_uniform = glorot_uniform


def zeros(rng: np.random.Generator | int | None, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """All zeros (``rng`` is accepted for a uniform signature and ignored).

    >>> zeros(None, (2,))
    Tensor([0., 0.], dtype=float32)
    """
    return Tensor(np.zeros(shape, dtype=_float_dtype(dtype, "zeros")))


_INITS: dict[str, Callable[..., Tensor]] = {
    "he": he_normal, "he_normal": he_normal, "he_uniform": he_uniform,
    "glorot": glorot_uniform, "glorot_uniform": glorot_uniform, "glorot_normal": glorot_normal,
    "xavier": glorot_uniform, "xavier_uniform": glorot_uniform, "xavier_normal": glorot_normal,
    "zeros": zeros,
}


def _initialiser(init: str | Callable[..., Tensor]) -> Callable[..., Tensor]:
    if callable(init):
        return init
    if init not in _INITS:
        raise ValueError(f"unknown initialiser {init!r}; choose one of {sorted(_INITS)} or pass a function")
    return _INITS[init]


# Their public home is ``leanpass.nn`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", None) == __name__:
        _obj.__module__ = "leanpass.nn"
del _name, _obj
