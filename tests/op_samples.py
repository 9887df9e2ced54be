"""Sample inputs for every op in ``functional.OPS``: the one place the walks over the table read.

``SAMPLES[name](rng)`` gives the arguments of ``functional.OPS[name]`` (arrays and parameters, in
the op's order), at a point where the op is smooth (no ties for max, no kinks for relu, inputs
inside the domain of log). The float arrays among them are the differentiable inputs. A walk
(``test_forward.py``, ...) fails for an op of the table that has no entry here, so an op added
to ``OPS`` needs a line here too.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Sample = Callable[[np.random.Generator], tuple[Any, ...]]


def _n(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _away(rng: np.random.Generator, *shape: int, gap: float = 0.2) -> np.ndarray:
    """Normal values at least ``gap`` from 0 (no kink of relu, abs, ... is near)."""
    x = rng.standard_normal(shape)
    return np.where(np.abs(x) < gap, np.sign(x + 1e-12) * (gap + np.abs(x)), x)


def _pos(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


def _distinct(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Values at least 0.1 apart, shuffled (no ties, so max and min are smooth there)."""
    n = int(np.prod(shape))
    return ((rng.permutation(n) - n / 2) * 0.1 + 0.03).reshape(shape)


SAMPLES: dict[str, Sample] = {
    "+": lambda r: (_n(r, 2, 3), _n(r, 3)),
    "-": lambda r: (_n(r, 3), _n(r, 2, 3)),
    "*": lambda r: (_n(r, 2, 1), _n(r, 3)),
    "/": lambda r: (_n(r, 2, 3), _pos(r, 3)),
    "**": lambda r: (_pos(r, 2, 3), _n(r, 3)),
    "@": lambda r: (_n(r, 2, 3), _n(r, 3, 4)),
    "neg": lambda r: (_n(r, 3),),
    "cross_entropy": lambda r: (_n(r, 4, 3), np.array([0, 2, 1, 2])),
    "abs": lambda r: (_away(r, 2, 3),),
    "astype": lambda r: (_n(r, 3), np.dtype(np.float64)),
    "broadcast_to": lambda r: (_n(r, 3), (2, 3)),
    "clip": lambda r: (np.array([-1.5, -0.3, 0.2, 0.6, 2.0]), -0.5, 1.0),
    "concatenate": lambda r: (1, _n(r, 2, 2), _n(r, 2, 3)),
    "cos": lambda r: (_n(r, 2, 3),),
    "einsum": lambda r: ("ij,jk->ik", _n(r, 2, 3), _n(r, 3, 2)),
    "exp": lambda r: (_n(r, 2, 3),),
    "expand_dims": lambda r: (_n(r, 2, 3), 1),
    "gelu": lambda r: (_n(r, 2, 3),),
    "getitem": lambda r: (_n(r, 3, 4), (np.array([0, 2, 0]), slice(1, 3))),
    "identity": lambda r: (_n(r, 3),),
    "leaky_relu": lambda r: (_away(r, 2, 3), 0.1),
    "linear": lambda r: (_n(r, 2, 3), _n(r, 3, 4), _n(r, 4)),
    "log": lambda r: (_pos(r, 2, 3),),
    "log_softmax": lambda r: (_n(r, 2, 3), -1),
    "logaddexp": lambda r: (_n(r, 2, 3), _n(r, 3)),
    "logsumexp": lambda r: (_n(r, 2, 3), 1, False),
    "max": lambda r: (_distinct(r, 2, 3), 0, False),
    "maximum": lambda r: (_distinct(r, 2, 3), _distinct(r, 2, 3) + 0.05),
    "mean": lambda r: (_n(r, 2, 3), (0, 1), True),
    "min": lambda r: (_distinct(r, 2, 3), None, False),
    "minimum": lambda r: (_distinct(r, 2, 3), _distinct(r, 3) + 0.05),
    "relu": lambda r: (_away(r, 2, 3),),
    "reshape": lambda r: (_n(r, 2, 3), (3, 2)),
    "sigmoid": lambda r: (_n(r, 2, 3),),
    "sin": lambda r: (_n(r, 2, 3),),
    "softmax": lambda r: (_n(r, 2, 3), 0),
    "softplus": lambda r: (_n(r, 2, 3),),
    "sqrt": lambda r: (_pos(r, 2, 3),),
    "square": lambda r: (_n(r, 2, 3),),
    "squeeze": lambda r: (_n(r, 2, 1, 3), 1),
    "stack": lambda r: (1, _n(r, 2, 3), _n(r, 2, 3)),
    "std": lambda r: (_n(r, 3, 4), 1, 1, False),
    "sum": lambda r: (_n(r, 2, 3), 1, False),
    "swapaxes": lambda r: (_n(r, 2, 3, 4), 0, 2),
    "tanh": lambda r: (_n(r, 2, 3),),
    "transpose": lambda r: (_n(r, 2, 3, 4), (2, 0, 1)),
    "unindex": lambda r: (_n(r, 3), np.array([0, 2, 0]), (4,)),
    "var": lambda r: (_n(r, 3, 4), None, 0, False),
    "where": lambda r: (np.array([True, False, True]), _n(r, 2, 3), _n(r, 3)),
}


def differentiable(args: tuple[Any, ...]) -> list[int]:
    """The positions of the float arrays among an op's arguments: its differentiable inputs."""
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
