"""Sample inputs for the ops of ``functional/linalg.py`` and ``functional/special.py``.

``SAMPLES[name]()`` returns ``(args, diff)``: the op's arguments, in ``functional.OPS[name]``'s
order, and the positions of the differentiable ones (the others are parameters). Walks over
``functional.OPS`` (jit, vmap, jvp) call these; ``test_samples_cover_the_ops`` checks that every
op of the two modules has one. ``cholesky`` and ``eigh`` read a symmetric matrix (their
gradients are symmetric), so a finite-difference check perturbs them through ``(x + x.T) / 2``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np


def _rng(seed: int) -> np.random.Generator:
    return np.random.default_rng(seed)


def _matrix(seed: int, shape: tuple[int, ...] = (3, 3)) -> np.ndarray:
    """A well-conditioned matrix (or stack): random plus a multiple of the identity when square."""
    a = _rng(seed).standard_normal(shape)
    if shape[-1] == shape[-2]:
        a = a + 3 * np.eye(shape[-1])
    return a


def _spd(seed: int, n: int = 3) -> np.ndarray:
    a = _rng(seed).standard_normal((n, n))
    return a @ a.T + n * np.eye(n)


def _positive(seed: int, n: int = 4) -> np.ndarray:
    return _rng(seed).uniform(0.3, 5.0, n)


SAMPLES: dict[str, Callable[[], tuple[list[Any], list[int]]]] = {
    # linalg.py
    "inv": lambda: ([_matrix(0)], [0]),
    "det": lambda: ([_matrix(1)], [0]),
    "slogdet": lambda: ([_matrix(2)], [0]),
    "solve": lambda: ([_matrix(3), _rng(4).standard_normal((3, 2))], [0, 1]),
    "cholesky": lambda: ([_spd(5)], [0]),
    "eigh": lambda: ([_spd(6), "L"], [0]),
    "svd": lambda: ([_rng(7).standard_normal((4, 3))], [0]),
    "qr": lambda: ([_rng(8).standard_normal((4, 3))], [0]),
    "pinv": lambda: ([_rng(9).standard_normal((3, 4)), None], [0]),
    "lstsq": lambda: ([_rng(10).standard_normal((5, 3)), _rng(11).standard_normal(5), None], [0, 1]),
    "norm": lambda: ([_rng(12).standard_normal((2, 3)), 2, 1, False], [0]),
    # special.py
    "gammaln": lambda: ([np.array([0.3, 1.7, 4.2, -0.6])], [0]),
    "digamma": lambda: ([np.array([0.3, 1.7, 4.2, -0.6])], [0]),
    "polygamma": lambda: ([np.array([0.3, 1.7, 4.2, -0.6]), 2], [0]),
    "erf": lambda: ([np.array([-2.5, -0.3, 0.4, 1.6])], [0]),
    "erfc": lambda: ([np.array([-2.5, -0.3, 0.4, 1.6])], [0]),
    "erfinv": lambda: ([np.array([-0.9, -0.3, 0.4, 0.95])], [0]),
    "ndtr": lambda: ([np.array([-3.0, -0.5, 0.4, 2.0])], [0]),
    "log_ndtr": lambda: ([np.array([-20.0, -0.5, 0.4, 2.0])], [0]),
    "logit": lambda: ([np.array([0.1, 0.5, 0.8])], [0]),
    "xlogy": lambda: ([np.array([0.5, 2.0, 1.0]), _positive(13, 3)], [0, 1]),
    "xlog1py": lambda: ([np.array([0.5, 2.0, 1.0]), np.array([0.7, -0.3, 2.0])], [0, 1]),
    "betaln": lambda: ([_positive(14), _positive(15)], [0, 1]),
}
