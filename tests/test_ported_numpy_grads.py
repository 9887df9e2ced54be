"""Gradient checks of NumPy functions in the spirit of HIPS autograd's and JAX's published suites.

Both projects check each NumPy function on Tensors against finite differences over a grid of
argument combinations: scalars and arrays, broadcasting pairs, every ``axis`` / ``keepdims``
spelling, float32 and float64. These are written afresh for LeanPass, through NumPy's own API
(``np.exp(t)``, ``np.sum(t, axis=0)``) as a user of autograd would call them, to second order.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import leanpass as lp
from leanpass.testing import check_grads

RNG = np.random.default_rng(7)


def _arr(*shape: int, lo: float = -1.0, hi: float = 1.0) -> np.ndarray:
    return RNG.uniform(lo, hi, shape) if shape else np.float64(RNG.uniform(lo, hi))


# autograd's "combo_check": every pairing of a scalar, a vector, a matrix and broadcasting shapes
SHAPE_PAIRS = [((), ()), ((), (3,)), ((3,), ()), ((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)),
               ((4, 1, 3), (2, 1)), ((2, 3), (2, 3))]

UNARY: dict[str, tuple[Callable[[Any], Any], float, float]] = {
    "np.exp": (np.exp, -1, 1),
    "np.log": (np.log, 0.2, 2),
    "np.sin": (np.sin, -2, 2),
    "np.cos": (np.cos, -2, 2),
    "np.tanh": (np.tanh, -2, 2),
    "np.sqrt": (np.sqrt, 0.2, 2),
    "np.square": (np.square, -2, 2),
    "np.negative": (np.negative, -2, 2),
    "np.abs": (np.abs, 0.1, 2),  # away from the kink
    "np.reciprocal": (np.reciprocal, 0.3, 2),
    "t.T": (lambda t: t.T, -1, 1),
    "np.transpose": (np.transpose, -1, 1),
    "np.ravel": (np.ravel, -1, 1),
    "t ** 2.5": (lambda t: t ** 2.5, 0.2, 2),
    "2.0 ** t": (lambda t: 2.0 ** t, -1, 1),
    "lp.sigmoid": (lp.sigmoid, -3, 3),
    "lp.softplus": (lp.softplus, -3, 3),
    "lp.gelu": (lp.gelu, -3, 3),
}


@pytest.mark.parametrize("name", sorted(UNARY))
@pytest.mark.parametrize("shape", [(), (4,), (2, 3)])
def test_unary(name: str, shape: tuple[int, ...]) -> None:
    fn, lo, hi = UNARY[name]
    check_grads(fn, (_arr(*shape, lo=lo, hi=hi),), order=2)


BINARY: dict[str, tuple[Callable[[Any, Any], Any], float, float]] = {
    "np.add": (np.add, -1, 1),
    "np.subtract": (np.subtract, -1, 1),
    "np.multiply": (np.multiply, -1, 1),
    "np.divide": (np.divide, 0.5, 2),
    "np.true_divide": (np.true_divide, 0.5, 2),
    "np.power": (np.power, 0.5, 2),
    "np.maximum": (np.maximum, -1, 1),
    "np.minimum": (np.minimum, -1, 1),
    "np.logaddexp": (np.logaddexp, -2, 2),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@pytest.mark.parametrize(("sx", "sy"), SHAPE_PAIRS)
def test_binary_broadcasting(name: str, sx: tuple[int, ...], sy: tuple[int, ...]) -> None:
    fn, lo, hi = BINARY[name]
    x, y = _arr(*sx, lo=lo, hi=hi), _arr(*sy, lo=lo, hi=hi)
    if name in ("np.maximum", "np.minimum"):  # keep the inputs apart: the kink is where they meet
        y = y + 3.0
    check_grads(fn, (x, y), order=2)


AXES = [None, 0, 1, -1, (0, 1)]
REDUCTIONS: dict[str, Callable[..., Any]] = {
    "np.sum": np.sum,
    "np.mean": np.mean,
    "np.max": np.max,
    "np.min": np.min,
    "np.amax": np.amax,
    "np.var": np.var,
    "np.std": np.std,
    "np.add.reduce": lambda t, axis, keepdims: np.add.reduce(t, axis=axis, keepdims=keepdims),
    "lp.logsumexp": lp.logsumexp,
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@pytest.mark.parametrize(("axis", "keepdims"), list(itertools.product(AXES, [False, True])))
def test_reductions_over_every_axis_spelling(name: str, axis: Any, keepdims: bool) -> None:
    x = RNG.permutation(12).reshape(3, 4) / 6.0 - 1.0  # distinct values: no ties at the max
    fn = REDUCTIONS[name]
    check_grads(lambda t: fn(t, axis=axis, keepdims=keepdims), (x,), order=2)


def test_ddof() -> None:
    x = _arr(3, 4)
    check_grads(lambda t: np.var(t, axis=0, ddof=1), (x,), order=2)
    check_grads(lambda t: np.std(t, axis=1, ddof=1, keepdims=True), (x,), order=2)


@pytest.mark.parametrize(("sa", "sb"), [((3,), (3,)), ((2, 3), (3,)), ((3,), (3, 4)), ((2, 3), (3, 4)),
                                        ((5, 2, 3), (3, 4)), ((5, 2, 3), (5, 3, 4)), ((1, 2, 3), (5, 3, 2))])
def test_matmul_and_dot(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = _arr(*sa), _arr(*sb)
    check_grads(np.matmul, (a, b), order=2)
    check_grads(lambda x, y: x @ y, (a, b), order=2)
    if len(sa) <= 2 and len(sb) <= 2:
        check_grads(np.dot, (a, b), order=2)


@pytest.mark.parametrize("spec", ["ij,jk->ik", "ij,ij->", "i,j->ij", "bij,bjk->bik", "...ij,jk", "ijk->kji",
                                  "ij,j", "bhqd,bhkd->bhqk"])
def test_einsum(spec: str) -> None:
    shapes = {"ij,jk->ik": [(2, 3), (3, 4)], "ij,ij->": [(2, 3), (2, 3)], "i,j->ij": [(2,), (3,)],
              "bij,bjk->bik": [(2, 2, 3), (2, 3, 2)], "...ij,jk": [(2, 2, 3), (3, 2)], "ijk->kji": [(2, 3, 4)],
              "ij,j": [(2, 3), (3,)], "bhqd,bhkd->bhqk": [(1, 2, 3, 2), (1, 2, 4, 2)]}[spec]
    check_grads(lambda *xs: np.einsum(spec, *xs), [_arr(*s) for s in shapes], order=2)


INDEXES = [0, -1, slice(1, None), (slice(None), 1), (Ellipsis, 0), [0, 0, 2], (np.array([0, 1]), np.array([2, 2])),
           np.array([[True, False, True, False], [False, True, True, True], [True, True, False, False]]), None,
           (1, slice(None, None, -1))]


@pytest.mark.parametrize("index", INDEXES, ids=[repr(i)[:30] for i in INDEXES])
def test_indexing(index: Any) -> None:
    check_grads(lambda t: t[index], (_arr(3, 4),), order=2)


def test_shapes_and_joins() -> None:
    x, y = _arr(2, 3), _arr(2, 3)
    check_grads(lambda t: np.reshape(t, (3, 2)), (x,), order=2)
    check_grads(lambda t: np.swapaxes(t, 0, 1), (x,), order=2)
    check_grads(lambda t: np.expand_dims(t, 1), (x,), order=2)
    check_grads(lambda t: np.squeeze(t[None]), (x,), order=2)
    check_grads(lambda t: np.broadcast_to(t, (4, 2, 3)), (x,), order=2)
    check_grads(lambda a, b: np.concatenate([a, b], axis=1), (x, y), order=2)
    check_grads(lambda a, b: np.stack([a, b], axis=-1), (x, y), order=2)
    check_grads(lambda a: np.split(a, 3, axis=1)[1], (x,), order=2)
    check_grads(lambda a, b: np.where(a > 0, a, b), (x, y), order=2)
    check_grads(lambda a: np.clip(a, -0.5, 0.5), (np.array([-0.9, -0.2, 0.3, 0.8]),), order=2)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_float32_stays_float32_through_numpy_calls(dtype: Any) -> None:
    x = _arr(2, 3).astype(dtype)
    fns = [np.exp, np.tanh, lambda t: np.sum(t, axis=0), lambda t: np.einsum("ij->j", t), lambda t: t @ t.T,
           lambda t: np.maximum(t, 0.0), lambda t: t ** 2, lambda t: 1.0 / (1.0 + t * t)]
    for fn in fns:
        g = lp.grad(lambda t, fn=fn: (fn(t) * 1.5).sum())(x)
        assert g.dtype == dtype
