"""Sample inputs for the ops of ``functional/linalg.py`` and ``functional/special.py``, for the
tests that walk ``functional.OPS`` (jit, vmap, jvp).

The same form as ``tests/op_samples.py``: ``SAMPLES[key](rng)`` returns the op's arguments as
``functional.OPS[op]`` takes them (``op`` is ``key`` up to a ``/``). Another generator gives new
values of the same shapes (and the same non-array arguments). Float arrays are the
differentiable inputs; everything else (``UPLO``, ``ord``, ``axis``, ``n``) is a parameter.
``test_linalg.py`` checks that every op of the two modules has a sample and runs each.
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


def _unit(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.uniform(0.1, 0.9, shape)


def _square(rng: np.random.Generator, *batch: int, n: int = 3) -> np.ndarray:
    """Well-conditioned: random plus 3 times the identity."""
    return rng.standard_normal((*batch, n, n)) + 3 * np.eye(n)


def _spd(rng: np.random.Generator, *batch: int, n: int = 3) -> np.ndarray:
    a = rng.standard_normal((*batch, n, n))
    return a @ np.swapaxes(a, -1, -2) + n * np.eye(n)


def _corank(rng: np.random.Generator, k: int, n: int = 3) -> np.ndarray:
    """A singular matrix of rank ``n - k`` with distinct nonzero singular values."""
    q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return q1 @ np.diag([3.0, 2.0, 1.0][: n - k] + [0.0] * k) @ q2


SAMPLES: dict[str, Builder] = {
    # linalg.py
    "inv": lambda r: (_square(r),),
    "inv/stack": lambda r: (_square(r, 2),),
    "det": lambda r: (_square(r),),
    "det/singular": lambda r: (_corank(r, 1),),
    "cofactor": lambda r: (_square(r, 2),),
    "cofactor/singular": lambda r: (_corank(r, 1),),
    "cofactor/2x2": lambda r: (_square(r, 2, n=2),),
    "cofactor/4x4": lambda r: (_square(r, 2, n=4),),  # from 4 x 4: from an SVD
    "cofactor/4x4-singular": lambda r: (_corank(r, 1, n=4),),
    "det/4x4": lambda r: (_square(r, n=4),),
    "slogdet": lambda r: (_square(r, 2),),
    "solve": lambda r: (_square(r), _x(r, 3, 2)),
    "solve/vector": lambda r: (_square(r, 2), _x(r, 3)),
    "cholesky": lambda r: (_spd(r),),
    "cholesky/upper-unread": lambda r: (_spd(r) + np.triu(_x(r, 3, 3), 1),),
    "eigh": lambda r: (_spd(r), "L"),
    "eigh/lower-read": lambda r: (_spd(r) + np.triu(_x(r, 3, 3), 1), "L"),
    "eigh/upper-read": lambda r: (_spd(r, 2) + np.tril(_x(r, 3, 3), -1), "U"),
    "svd": lambda r: (_x(r, 4, 3),),
    "svd/wide": lambda r: (_x(r, 2, 3, 4),),
    "qr": lambda r: (_x(r, 4, 3),),
    "qr/wide": lambda r: (_x(r, 2, 4),),
    "pinv": lambda r: (_x(r, 3, 4), None),
    "pinv/hermitian": lambda r: (_spd(r) + np.triu(_x(r, 3, 3), 1), None, True),
    "lstsq": lambda r: (_x(r, 5, 3), _x(r, 5), None),
    "norm": lambda r: (_x(r, 2, 3), 2, 1, False),
    "norm/p": lambda r: (_x(r, 4), 3.0, None, True),
    # special.py
    "gammaln": lambda r: (np.concatenate([_pos(r, 3), -0.3 - 0.4 * r.uniform(size=1)]),),  # one in (-0.7, -0.3)
    "digamma": lambda r: (_pos(r, 4),),
    "polygamma": lambda r: (_pos(r, 4), 2),
    "erfinv": lambda r: (_unit(r, 4) * 2 - 1,),
    "ndtr": lambda r: (_x(r, 4),),
    "log_ndtr": lambda r: (_x(r, 4) * 3,),
    "logit": lambda r: (_unit(r, 3),),
    "xlogy": lambda r: (_x(r, 2, 3), _pos(r, 3)),
    "xlog1py": lambda r: (_x(r, 3), _unit(r, 2, 3)),
    "betaln": lambda r: (_pos(r, 4), _pos(r, 4)),
    "i0e": lambda r: (np.concatenate([_pos(r, 2), -_pos(r, 2), 21 + _pos(r, 1), -21 - _pos(r, 1)]),),  # both series
    "i1e": lambda r: (np.concatenate([_pos(r, 2), -_pos(r, 2), 21 + _pos(r, 1), -21 - _pos(r, 1)]),),
}
