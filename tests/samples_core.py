"""Sample inputs for the core ops of ``functional.OPS`` (arithmetic, reductions, shapes, indexing,
losses), for the tests that walk the table (the NumPy math functions' are in ``op_samples.py``).

``SAMPLES[key](rng)`` returns the op's arguments as ``functional.OPS[op]`` takes them, where
``op`` is ``key`` up to a ``/`` (an op may have several samples: ``"getitem/mask"``). Each call
with another generator gives new values of the same shapes (and the same non-array arguments),
so a walk can stack several calls into a batch. Float arrays are the differentiable inputs;
integer and boolean arrays (indices, labels, masks) are data.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Builder = Callable[[np.random.Generator], tuple[Any, ...]]


def _x(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _pos(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.5, 2.0, shape)


SAMPLES: dict[str, Builder] = {
    "+": lambda r: (_x(r, 2, 3), _x(r, 3)),
    "-": lambda r: (_x(r, 3), _x(r, 2, 3)),
    "*": lambda r: (_x(r, 2, 3), _x(r, 2, 1)),
    "/": lambda r: (_x(r, 2, 3), _pos(r, 3)),
    "**": lambda r: (_pos(r, 2, 3), _x(r, 3)),
    "**/number": lambda r: (_pos(r, 3), 3),
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
    "getitem": lambda r: (_x(r, 4, 3), (slice(1, 3), 0)),
    "getitem/indices": lambda r: (_x(r, 4, 3), r.integers(0, 4, 5)),
    "getitem/pairs": lambda r: (_x(r, 4, 3), (r.integers(0, 4, 2), r.integers(0, 3, 2))),
    "getitem/mask": lambda r: (_x(r, 4, 3), (slice(None), np.array([True, False, True]))),
    "identity": lambda r: (_x(r, 3),),
    "leaky_relu": lambda r: (_x(r, 4), 0.1),
    "linear": lambda r: (_x(r, 2, 3), _x(r, 3, 4), _x(r, 4)),
    "linear/vector": lambda r: (_x(r, 3), _x(r, 3, 4), _x(r, 4)),
    "log": lambda r: (_pos(r, 3),),
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
    "sqrt": lambda r: (_pos(r, 3),),
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
