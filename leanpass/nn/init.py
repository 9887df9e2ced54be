"""Initialisers of ``leanpass.nn``: ``init(rng, shape, dtype) -> Tensor``, each drawing from an
explicit ``np.random.Generator`` (or a seed), so the same seed gives the same weights. ``rng=None``
draws from NumPy's global generator (``np.random.seed(n)`` repeats a run).

``shape`` is ``(fan_in, fan_out)`` for a weight used as ``x @ w`` (``nn.Linear``'s layout; with
more axes, the last two times the product of the leading ones). PyTorch's names are aliases: ``kaiming_normal``
is ``he_normal``, ``xavier_uniform`` is ``glorot_uniform``, and so on.

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
from .module import DTypeLike, _float_dtype, _global_rng

__all__ = ["he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "xavier_normal", "xavier_uniform", "zeros",
           "kaiming_normal", "kaiming_uniform", "normal", "orthogonal", "fan_in_uniform"]


def _gen(rng: np.random.Generator | int | None, where: str) -> np.random.Generator:
    """The generator to draw from: ``rng``, a new one seeded by an int, or NumPy's global one for None."""
    return _global_rng() if rng is None else _check_rng(rng, where)


# ----- initialisers ------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """``(fan_in, fan_out)``, each at least 1 (a shape with a 0 holds no numbers to scale)."""
    if len(shape) < 2:
        n = max(shape[0] if shape else 1, 1)
        return n, n
    receptive = math.prod(shape[:-2])
    return max(shape[-2] * receptive, 1), max(shape[-1] * receptive, 1)


def he_normal(rng: np.random.Generator | int | None, shape: tuple[int, ...],
        dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) normal: ``N(0, 2 / fan_in)``, for layers followed by ``relu``.

    ``shape`` is ``(fan_in, fan_out)`` for a weight matrix used as ``x @ w``.

    >>> w = he_normal(np.random.default_rng(0), (64, 32))
    >>> w.shape, w.dtype
    ((64, 32), dtype('float32'))
    """
    gen = _gen(rng, "he_normal")
    fan_in, _ = _fans(shape)
    dt = _float_dtype(dtype, "he_normal")
    return Tensor(gen.standard_normal(shape) * math.sqrt(2.0 / fan_in), dtype=dt)


def he_uniform(rng: np.random.Generator | int | None, shape: tuple[int, ...],
        dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) uniform: ``U(-a, a)`` with ``a = sqrt(6 / fan_in)``.

    >>> float(abs(he_uniform(0, (6, 3))).max().item()) <= 1.0
    True
    """
    gen = _gen(rng, "he_uniform")
    fan_in, _ = _fans(shape)
    a = math.sqrt(6.0 / fan_in)
    return Tensor(gen.uniform(-a, a, shape), dtype=_float_dtype(dtype, "he_uniform"))


def glorot_normal(rng: np.random.Generator | int | None, shape: tuple[int, ...],
        dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) normal: ``N(0, 2 / (fan_in + fan_out))``, for tanh / sigmoid layers.

    >>> glorot_normal(0, (3, 5), np.float64).dtype
    dtype('float64')
    """
    gen = _gen(rng, "glorot_normal")
    fan_in, fan_out = _fans(shape)
    std = math.sqrt(2.0 / (fan_in + fan_out))
    return Tensor(gen.standard_normal(shape) * std, dtype=_float_dtype(dtype, "glorot_normal"))


def glorot_uniform(rng: np.random.Generator | int | None, shape: tuple[int, ...],
        dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) uniform: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``.

    >>> float(abs(glorot_uniform(0, (3, 3))).max().item()) <= 1.0
    True
    """
    gen = _gen(rng, "glorot_uniform")
    fan_in, fan_out = _fans(shape)
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return Tensor(gen.uniform(-a, a, shape), dtype=_float_dtype(dtype, "glorot_uniform"))


xavier_normal = glorot_normal
xavier_uniform = glorot_uniform
kaiming_normal = he_normal
kaiming_uniform = he_uniform


def fan_in_uniform(rng: np.random.Generator | int | None, shape: tuple[int, ...],
                   dtype: DTypeLike = np.float32) -> Tensor:
    """``U(-a, a)`` with ``a = 1 / sqrt(fan_in)``: LeanPass 0.1.14's ``Linear`` initialisation (and
    PyTorch's default for ``nn.Linear`` weights).

    >>> w = fan_in_uniform(0, (4, 3), np.float64)
    >>> bool((abs(w) <= 0.5).all())
    True
    """
    gen = _gen(rng, "fan_in_uniform")
    fan_in, _ = _fans(shape)
    a = 1.0 / math.sqrt(fan_in)
    return Tensor(gen.uniform(-a, a, shape), dtype=_float_dtype(dtype, "fan_in_uniform"))


def normal(rng: np.random.Generator | int | None, shape: tuple[int, ...], dtype: DTypeLike = np.float32, *,
           mean: float = 0.0, std: float = 1.0) -> Tensor:
    """``N(mean, std ** 2)`` (PyTorch's ``nn.init.normal_``). For a layer, fix ``std`` with ``functools.partial``.

    >>> normal(0, (2,), np.float64, std=0.0)
    Tensor([0., 0.])
    >>> import functools
    >>> Linear(3, 2, rng=0, init=functools.partial(normal, std=0.02)).weight.shape
    (3, 2)
    """
    gen = _gen(rng, "normal")
    return Tensor(gen.standard_normal(shape) * std + mean, dtype=_float_dtype(dtype, "normal"))


def orthogonal(rng: np.random.Generator | int | None, shape: tuple[int, ...], dtype: DTypeLike = np.float32, *,
               gain: float = 1.0) -> Tensor:
    """A (semi-)orthogonal matrix times ``gain`` (Saxe et al., 2014; PyTorch's ``nn.init.orthogonal_``).

    The first axis is one side, the product of the others the other side (PyTorch's rule): for
    ``(n, m)`` with ``n >= m`` the columns are orthonormal, otherwise the rows. Made from the QR decomposition of a
    standard normal matrix, with the signs fixed so that the result is uniformly distributed.

    >>> q = orthogonal(0, (4, 3), np.float64)
    >>> np.allclose(q.numpy().T @ q.numpy(), np.eye(3))
    True
    """
    gen = _gen(rng, "orthogonal")
    if len(shape) < 2:
        raise ValueError(f"orthogonal: the shape needs at least 2 axes, got {shape}")
    rows, cols = shape[0], math.prod(shape[1:])
    a = gen.standard_normal((max(rows, cols), min(rows, cols)))
    q, r = np.linalg.qr(a)
    q = q * np.where(np.diag(r) < 0, -1.0, 1.0)  # (signs of R's diagonal: a uniform (Haar) draw)
    if rows < cols:
        q = q.T
    return Tensor((gain * q).reshape(shape), dtype=_float_dtype(dtype, "orthogonal"))


def zeros(rng: np.random.Generator | int | None, shape: tuple[int, ...],
        dtype: DTypeLike = np.float32) -> Tensor:
    """All zeros (``rng`` is accepted for a uniform signature and ignored).

    >>> zeros(None, (2,))
    Tensor([0., 0.], dtype=float32)
    """
    return Tensor(np.zeros(shape, dtype=_float_dtype(dtype, "zeros")))


_INITS: dict[str, Callable[..., Tensor]] = {
    "he": he_normal, "he_normal": he_normal, "he_uniform": he_uniform,
    "glorot": glorot_uniform, "glorot_uniform": glorot_uniform, "glorot_normal": glorot_normal,
    "xavier": glorot_uniform, "xavier_uniform": glorot_uniform, "xavier_normal": glorot_normal,
    "zeros": zeros, "kaiming": he_normal, "kaiming_normal": he_normal, "kaiming_uniform": he_uniform,
    "normal": normal, "orthogonal": orthogonal, "fan_in_uniform": fan_in_uniform,
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
