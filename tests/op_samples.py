"""Sample inputs for every op in ``functional.OPS``: the one place the walks over the table read.

``SAMPLES[name](rng)`` returns the positional arguments of ``functional.OPS[name]`` for NumPy's math
(``functional.ELEMENTWISE``, ``prod``, ``cumsum``, ``cumprod``, ``einsum``): float64 arrays (the
differentiable inputs) inside each function's domain and away from its kinks and jumps, then any
constant parameters. ``DOMAINS[name](rng, shape)`` gives one such input of any shape.
``CORE_SAMPLES`` does the same for the core ops (keys ``name`` or ``name/variant``), and
``every_sample()`` gathers every op's samples (these two tables, linalg's and special's from
``op_samples_linalg_special.py``, the convolutions' from ``op_samples_conv.py``) for the walks
over ``OPS`` (jit, vmap, jvp), which fail for an op without one.

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
Sample = Callable[[np.random.Generator], tuple[Any, ...]]


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


def _with_zeros(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    """Entries in [0.5, 1.5] with zeros in the same places for every ``rng``: one in the first row, two in the
    second (a product and its derivatives vanish in different ways)."""
    x = rng.uniform(0.5, 1.5, shape)
    x[0, 1] = x[1, 0] = x[1, 2] = 0.0
    return x


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

# ----- the core ops, for the walks over functional.OPS (vmap, ...) ------------------------------------------
# ``CORE_SAMPLES[key](rng)`` returns the arguments of ``functional.OPS[op]``, where ``op`` is ``key``
# up to a ``/`` (an op may have several samples: ``"getitem/mask"``). Each call with another
# generator gives new values of the same shapes (and the same non-array arguments), so a walk can
# stack several calls into a batch. Float arrays are the differentiable inputs; integer and
# boolean arrays (indices, labels, masks) are data. A walk takes ``CORE_SAMPLES`` and ``SAMPLES``.


def _x(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _positive(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


# (q, k, v, mask, is_causal, scale, dropout_mask): plain, causal with L != S, a float mask (differentiable)
# that broadcasts, a boolean mask with a query whose every key is masked out, batch axes that broadcast,
# a dropout keep-mask, and a given scale.
ATTENTION: dict[str, Callable[[np.random.Generator], tuple[Any, ...]]] = {
    "scaled_dot_product_attention": lambda r: (_x(r, 2, 3, 2), _x(r, 2, 4, 2), _x(r, 2, 4, 3), None, False, None,
                                               None),
    "scaled_dot_product_attention/causal": lambda r: (_x(r, 2, 3, 2), _x(r, 2, 4, 2), _x(r, 2, 4, 1), None, True,
                                                      None, None),
    "scaled_dot_product_attention/mask": lambda r: (_x(r, 2, 3, 2), _x(r, 2, 4, 2), _x(r, 2, 4, 2), _x(r, 3, 4),
                                                    False, 0.7, None),
    "scaled_dot_product_attention/bool": lambda r: (_x(r, 2, 3, 2), _x(r, 2, 4, 2), _x(r, 2, 4, 2),
                                                    np.array([[True, False, True, True], [False] * 4,
                                                              [False, False, True, False]]), False, None, None),
    "scaled_dot_product_attention/broadcast": lambda r: (_x(r, 2, 1, 3, 2), _x(r, 1, 2, 4, 2), _x(r, 4, 2), None,
                                                         False, None, None),
    "scaled_dot_product_attention/dropout": lambda r: (_x(r, 2, 3, 2), _x(r, 2, 4, 2), _x(r, 2, 4, 2), None, True,
                                                       None, (r.random((2, 3, 4)) > 0.3) / 0.7),
}


CORE_SAMPLES: dict[str, Callable[[np.random.Generator], tuple[Any, ...]]] = {
    "+": lambda r: (_x(r, 2, 3), _x(r, 3)),
    "-": lambda r: (_x(r, 3), _x(r, 2, 3)),
    "*": lambda r: (_x(r, 2, 3), _x(r, 2, 1)),
    "/": lambda r: (_x(r, 2, 3), _positive(r, 3)),
    "**": lambda r: (_positive(r, 2, 3), _x(r, 3)),
    "**/number": lambda r: (_positive(r, 3), 3),
    "**/negative": lambda r: (np.concatenate([[0.0], -_positive(r, 2), _x(r, 2)]), 3),  # integer power of any base
    "**/zero": lambda r: (np.concatenate([[0.0], _x(r, 2)]), 0),  # x ** 0 = 1, also at 0
    "**/square-root": lambda r: (_positive(r, 3), 0.5),
    "prod/zeros": lambda r: (_with_zeros(r, (2, 4)), 1, True),
    "prod/all": lambda r: (_with_zeros(r, (2, 4)), None, False),
    "cumprod/zeros": lambda r: (_with_zeros(r, (2, 4)), 1),  # (exact at zeros: no division there)
    "cumprod/flat": lambda r: (r.uniform(0.5, 1.5, (2, 3)), None),
    "@": lambda r: (_x(r, 2, 3), _x(r, 3, 4)),
    "@/vector": lambda r: (_x(r, 3), _x(r, 3, 2)),
    "@/dot": lambda r: (_x(r, 3), _x(r, 3)),
    "@/stack": lambda r: (_x(r, 2, 2, 3), _x(r, 3, 2)),
    "neg": lambda r: (_x(r, 3),),
    "cross_entropy": lambda r: (_x(r, 4, 3), r.integers(0, 3, 4), "mean"),
    "cross_entropy/none": lambda r: (_x(r, 2, 3), r.integers(0, 3, 2), "none"),
    "abs": lambda r: (_x(r, 4),),
    "astype": lambda r: (_x(r, 3), np.dtype(np.float32)),
    "broadcast_to": lambda r: (_x(r, 3), (2, 3)),
    "clip": lambda r: (_x(r, 5), -0.5, 0.5),
    "concatenate": lambda r: (1, _x(r, 2, 3), _x(r, 2, 1)),
    "cos": lambda r: (_x(r, 3),),
    "einsum": lambda r: ("ij,jk->ik", _x(r, 2, 3), _x(r, 3, 2)),
    "einsum/ellipsis": lambda r: ("...i,i", _x(r, 2, 3), _x(r, 3)),
    "exp": lambda r: (_x(r, 3),),
    "expand_dims": lambda r: (_x(r, 3), 0),
    "gelu": lambda r: (_x(r, 3),),
    "gelu/exact": lambda r: (_x(r, 3), "none"),
    "getitem": lambda r: (_x(r, 4, 3), (slice(1, 3), 0)),
    "getitem/indices": lambda r: (_x(r, 4, 3), r.integers(0, 4, 5)),
    "getitem/pairs": lambda r: (_x(r, 4, 3), (r.integers(0, 4, 2), r.integers(0, 3, 2))),
    "getitem/mask": lambda r: (_x(r, 4, 3), (slice(None), np.array([True, False, True]))),
    "identity": lambda r: (_x(r, 3),),
    "leaky_relu": lambda r: (_x(r, 4), 0.1),
    "linear": lambda r: (_x(r, 2, 3), _x(r, 3, 4), _x(r, 4)),
    "linear/vector": lambda r: (_x(r, 3), _x(r, 3, 4), _x(r, 4)),
    "log": lambda r: (_positive(r, 3),),
    "log_softmax": lambda r: (_x(r, 2, 3), -1),
    "logaddexp": lambda r: (_x(r, 3), _x(r, 2, 3)),
    "logsumexp": lambda r: (_x(r, 2, 3), 1),
    "logsumexp/all": lambda r: (_x(r, 2, 3),),
    "max": lambda r: (_x(r, 2, 3), 0),
    "max/all": lambda r: (_x(r, 2, 3),),
    "maximum": lambda r: (_x(r, 3), _x(r, 3)),
    "mean": lambda r: (_x(r, 2, 3), (0, 1), True),
    "min": lambda r: (_x(r, 2, 3), -1, True),
    "minimum": lambda r: (_x(r, 2, 3), _x(r, 3)),
    "relu": lambda r: (_x(r, 4),),
    "reshape": lambda r: (_x(r, 2, 3), (3, -1)),
    "sigmoid": lambda r: (_x(r, 3),),
    "sin": lambda r: (_x(r, 3),),
    "softmax": lambda r: (_x(r, 2, 3), 0),
    "softplus": lambda r: (_x(r, 3),),
    "sqrt": lambda r: (_positive(r, 3),),
    "square": lambda r: (_x(r, 3),),
    "squeeze": lambda r: (_x(r, 1, 3, 1), None),
    "stack": lambda r: (1, _x(r, 2, 3), _x(r, 2, 3)),
    "std": lambda r: (_x(r, 2, 3), 1, 1),
    "sum": lambda r: (_x(r, 2, 3), 1),
    "sum/all": lambda r: (_x(r, 2, 3),),
    "swapaxes": lambda r: (_x(r, 2, 3, 4), 0, 2),
    "tanh": lambda r: (_x(r, 3),),
    "transpose": lambda r: (_x(r, 2, 3, 4), (2, 0, 1)),
    "transpose/reverse": lambda r: (_x(r, 2, 3),),
    "unindex": lambda r: (_x(r, 5), r.integers(0, 4, 5), (4,)),
    "unindex/basic": lambda r: (_x(r, 2), (slice(1, 3),), (4,)),
    "var": lambda r: (_x(r, 2, 3), None),
    "where": lambda r: (r.random((2, 3)) > 0.5, _x(r, 2, 3), _x(r, 3)),
}


def op_of(key: str) -> str:
    """The op a sample key belongs to (``"getitem/mask"`` -> ``"getitem"``; ``"/"`` is division)."""
    return key if key == "/" else key.rsplit("/", 1)[0]


def differentiable(args: tuple[Any, ...]) -> list[int]:
    """The positions of the float arrays among an op's arguments: its differentiable inputs."""
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def every_sample() -> dict[str, Sample]:
    """The samples of every op, keyed by the op's name or ``name/variant``: this file's (the core ops
    and NumPy's math) and ``tests/op_samples_linalg_special.py``'s."""
    from op_samples_conv import SAMPLES as CONV
    from op_samples_linalg_special import SAMPLES as LINALG_SPECIAL

    return {**CORE_SAMPLES, **SAMPLES, **ATTENTION, **LINALG_SPECIAL, **CONV}
