"""Shared strategies and checks for the operation tests (tests/test_ops_*.py).

Other test files import from here (``from test_ops_helpers import ...``); the few tests below
check the helpers themselves.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import leanpass as lp
from leanpass import Tensor

FAST = settings(max_examples=30, deadline=None)
SMALL = settings(max_examples=20, deadline=None)

# Shapes with scalars (``()``) and size-1 axes.
shapes = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
seeds = st.integers(0, 2**31 - 1)


@st.composite
def shape_and_axis(draw: Any, min_dims: int = 0, max_dims: int = 3) -> tuple[tuple[int, ...], Any]:
    """A shape and an axis argument for it: None, an int (maybe negative) or a tuple of them."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4))
    nd = len(shape)
    options = [st.none(), st.just(())]
    if nd:
        options.append(st.integers(-nd, nd - 1))
        options.append(st.lists(st.integers(-nd, nd - 1), min_size=1, max_size=nd,
                                unique_by=lambda a: a % nd).map(tuple))
    return shape, draw(st.one_of(options))


@st.composite
def one_axis(draw: Any, min_dims: int = 1, max_dims: int = 3) -> tuple[tuple[int, ...], int]:
    """A shape with at least one axis and one (maybe negative) axis of it."""
    shape = draw(hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=1, max_side=4))
    return shape, draw(st.integers(-len(shape), len(shape) - 1))


def normal(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """Standard-normal values of ``shape`` (a 0-d array for ``()``)."""
    return np.asarray(np.random.default_rng(seed).standard_normal(shape), dtype=dtype)


def distinct(seed: int, shape: tuple[int, ...], dtype: Any = np.float64) -> np.ndarray:
    """Values at least 0.1 apart (no ties, so max/min are smooth there), shuffled."""
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    return np.asarray((rng.permutation(n) - n / 2) * 0.1 + 0.03, dtype=dtype).reshape(shape)


def away_from(seed: int, shape: tuple[int, ...], kinks: tuple[float, ...] = (0.0,),
              gap: float = 0.1, dtype: Any = np.float64) -> np.ndarray:
    """Normal values moved at least ``gap`` away from each of ``kinks``."""
    x = normal(seed, shape)
    for k in kinks:
        near = np.abs(x - k) < gap
        x = np.where(near, k + np.where(x >= k, gap, -gap) * 1.5, x)
    return np.asarray(x, dtype=dtype)


def bshapes(num: int = 2) -> Any:
    """Shapes that broadcast together (with scalars and size-1 axes): a list of ``num`` shapes."""
    return hnp.mutually_broadcastable_shapes(num_shapes=num, min_dims=0, max_dims=3, max_side=3).map(
        lambda bs: list(bs.input_shapes)
    )


def assert_cotangents_match(fn: Callable[..., Any], args: list[Any], diff: list[int]) -> None:
    """``fn(*args) -> (ans, vjp)``: each cotangent of a differentiable input has its shape and dtype.

    ``diff`` lists the positions (in ``args`` and in the vjp's result) of the differentiable inputs.
    """
    ans, vjp = fn(*args)
    g = np.ones_like(np.asarray(ans))
    cts = vjp(g)
    # one cotangent per input; trailing parameters (axis, shape, ...) may be left out
    assert len(cts) <= len(args)
    assert all(c is None for i, c in enumerate(cts) if i not in diff)
    for i in diff:
        assert cts[i] is not None, f"no cotangent for input {i}"
        assert np.shape(cts[i]) == np.shape(args[i]), (i, np.shape(cts[i]), np.shape(args[i]))
        assert np.asarray(cts[i]).dtype == np.asarray(args[i]).dtype, (i, np.asarray(cts[i]).dtype)


def numeric_grad(f: Callable[[np.ndarray], float], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central finite differences of a scalar function, one coordinate at a time."""
    x = np.array(x, dtype=np.float64)
    g = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        g[i] = (f(x + e) - f(x - e)) / (2 * eps)
    return g


def value(t: Any) -> np.ndarray:
    """The values of a Tensor (or anything array-like) as a plain array."""
    return np.asarray(t.data if isinstance(t, Tensor) else t)


# ----- the helpers themselves ----------------------------------------------------------------------
@FAST
@given(shape_and_axis())
def test_axis_strategy_gives_valid_numpy_axes(sa: tuple[tuple[int, ...], Any]) -> None:
    shape, axis = sa
    np.sum(np.zeros(shape), axis=axis)  # raises if the axis is invalid


@FAST
@given(shapes, seeds)
def test_distinct_values_have_no_ties(shape: tuple[int, ...], seed: int) -> None:
    x = distinct(seed, shape)
    assert x.shape == shape
    assert len(np.unique(x)) == x.size


@FAST
@given(shapes, seeds)
def test_away_from_keeps_a_gap(shape: tuple[int, ...], seed: int) -> None:
    x = away_from(seed, shape, kinks=(0.0, 1.0))
    assert np.all(np.abs(x) >= 0.1) and np.all(np.abs(x - 1.0) >= 0.1)


def test_numeric_grad_of_a_quadratic() -> None:
    x = np.array([1.0, -2.0])
    np.testing.assert_allclose(numeric_grad(lambda z: float((z**2).sum()), x), 2 * x, rtol=1e-6)
    assert lp.Tensor is Tensor
