"""Sample inputs for the ops of NumPy's math (``functional.ELEMENTWISE``), ``prod``, ``cumsum``,
``cumprod`` and ``einsum``, for tests that walk ``functional.OPS``.

``SAMPLES[name](rng)`` returns the positional arguments of ``functional.OPS[name]``: float64 arrays
(the differentiable inputs) inside each function's domain and away from its kinks and jumps, then
any constant parameters. ``DOMAINS[name](rng, shape)`` gives one such input of any shape.

>>> import numpy as np
>>> from leanpass import functional as F
>>> args = SAMPLES["arcsin"](np.random.default_rng(0))
>>> bool(np.all(np.isfinite(F.OPS["arcsin"](*args)[0])))
True
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Sampler = Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]


def _uniform(lo: float, hi: float) -> Sampler:
    return lambda rng, shape: rng.uniform(lo, hi, shape)


def _away_from_zero(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.uniform(0.3, 2.0, shape) * rng.choice([-1.0, 1.0], shape)


def _between_steps(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Away from the integers and the half-integers, where the rounding functions jump."""
    return rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.4, shape)


def _normal(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    return rng.standard_normal(shape)


# Inputs for the one-input functions (the second input of the two-input ones is in _SECOND).
DOMAINS: dict[str, Sampler] = {
    **{name: _normal for name in (
        "expm1", "exp2", "tan", "arctan", "sinh", "cosh", "arcsinh", "sinc", "deg2rad", "rad2deg", "erf", "erfc",
        "nan_to_num", "arctan2", "hypot", "logaddexp2")},
    "tan": _uniform(-1.2, 1.2),
    "log1p": _uniform(-0.7, 3.0),
    "log2": _uniform(0.2, 3.0),
    "log10": _uniform(0.2, 3.0),
    "arcsin": _uniform(-0.9, 0.9),
    "arccos": _uniform(-0.9, 0.9),
    "arctanh": _uniform(-0.9, 0.9),
    "arccosh": _uniform(1.2, 3.0),
    "cbrt": _away_from_zero,
    "fabs": _away_from_zero,
    "reciprocal": _away_from_zero,
    "sign": _away_from_zero,
    **{name: _between_steps for name in ("floor", "ceil", "trunc", "rint", "round")},
    "fmax": _normal,
    "fmin": _normal,
    "remainder": _normal,
    "fmod": _normal,
}


def _second(name: str, x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """A second input for the two-input function ``name`` that keeps it smooth at ``x``."""
    if name in ("fmax", "fmin"):  # no ties
        return x + rng.choice([-1.0, 1.0], x.shape) * rng.uniform(0.2, 1.0, x.shape)
    return rng.standard_normal(x.shape)


def pair(name: str, rng: np.random.Generator, shape: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray]:
    """Inputs ``(x, y)`` of the two-input function ``name``, of ``shape``, away from its kinks and jumps."""
    if name in ("remainder", "fmod"):
        y = _away_from_zero(rng, shape)
        x = y * (rng.integers(-3, 3, shape) + rng.uniform(0.1, 0.9, shape))
        return x, y
    x = DOMAINS[name](rng, shape)
    return x, _second(name, x, rng)


_SHAPE = (2, 3)
SAMPLES: dict[str, Callable[[np.random.Generator], tuple[Any, ...]]] = {
    **{name: (lambda n: lambda rng: (DOMAINS[n](rng, _SHAPE),))(name) for name in DOMAINS if name not in (
        "arctan2", "hypot", "logaddexp2", "fmax", "fmin", "remainder", "fmod", "round", "nan_to_num")},
    "round": lambda rng: (_between_steps(rng, _SHAPE), 0),
    "nan_to_num": lambda rng: (rng.standard_normal(_SHAPE), True, 0.0, None, None),
    **{name: (lambda n: lambda rng: pair(n, rng, _SHAPE))(name)
       for name in ("arctan2", "hypot", "logaddexp2", "fmax", "fmin", "remainder", "fmod")},
    "prod": lambda rng: (rng.uniform(0.5, 1.5, (2, 3)), 1, False),
    "cumsum": lambda rng: (rng.standard_normal((2, 3)), 1),
    "cumprod": lambda rng: (rng.uniform(0.5, 1.5, (2, 3)), 1),
    "einsum": lambda rng: ("iij,jk->ik", rng.standard_normal((3, 3, 2)), rng.standard_normal((2, 4))),
}
