"""``lp.topk``: torch.topk's values and indices, deterministic ties, gradients scattered to the chosen entries."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, distinct, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads


def reference(x: np.ndarray, k: int, axis: int, largest: bool) -> tuple[np.ndarray, np.ndarray]:
    """By hand: each slice's entries ordered by (value, index), or (-value, index) for the largest."""
    moved = np.moveaxis(x, axis, -1)
    idx = np.empty(moved.shape[:-1] + (k,), dtype=np.int64)
    for pos in np.ndindex(moved.shape[:-1]):
        row = moved[pos]
        keys = sorted(range(len(row)), key=lambda i: (-row[i] if largest else row[i], i))
        idx[pos] = keys[:k]
    vals = np.take_along_axis(moved, idx, -1)
    return np.moveaxis(vals, -1, axis), np.moveaxis(idx, -1, axis)


@st.composite
def problems(draw: Any) -> tuple[tuple[int, ...], int, int, bool]:
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=5))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    k = draw(st.integers(0, shape[axis]))
    return shape, axis, k, draw(st.booleans())


@FAST
@given(problems(), seeds, st.booleans())
def test_values_and_indices_match_the_definition(problem: Any, seed: int, ties: bool) -> None:
    shape, axis, k, largest = problem
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, shape).astype(np.float64) if ties else rng.standard_normal(shape)
    values, indices = lp.topk(x, k, axis=axis, largest=largest)
    want_v, want_i = reference(x, k, axis, largest)
    np.testing.assert_array_equal(value(values), want_v)
    np.testing.assert_array_equal(indices, want_i)
    assert isinstance(indices, np.ndarray) and indices.dtype == np.int64


@FAST
@given(problems(), seeds)
def test_gradients_reach_the_chosen_entries(problem: Any, seed: int) -> None:
    shape, axis, k, largest = problem
    x = distinct(seed, shape)  # (no ties: the choice does not change under the finite differences)
    check_grads(lambda t: lp.topk(t, k, axis, largest)[0], [x], order=2)
    g = lp.grad(lambda t: lp.topk(t, k, axis, largest)[0].sum())(x)
    chosen = np.zeros(shape)
    np.put_along_axis(chosen, lp.topk(x, k, axis, largest)[1], 1.0, axis)
    np.testing.assert_array_equal(g, chosen)


def test_ties_go_to_the_lower_index_and_nan_is_largest() -> None:
    x = np.array([2.0, 5.0, 5.0, 1.0, 5.0])
    assert lp.topk(x, 2)[1].tolist() == [1, 2]
    assert lp.topk(x, 4, largest=False)[1].tolist() == [3, 0, 1, 2]
    y = np.array([1.0, np.nan, 3.0])
    assert lp.topk(y, 1)[1].tolist() == [1]
    assert lp.topk(y, 2, largest=False)[1].tolist() == [0, 2]
    v, i = lp.topk(np.array([[3, 1, 2], [0, 9, 9]]), 2, axis=1)
    assert value(v).tolist() == [[3, 2], [9, 9]] and i.tolist() == [[0, 2], [1, 2]]


def test_on_tensors_eager_and_under_transforms() -> None:
    x = Tensor([[0.5, 2.0, -1.0], [3.0, 0.0, 1.0]], requires_grad=True)
    values, indices = lp.topk(x, 2, axis=-1)
    (values * np.array([1.0, 10.0])).sum().backward()
    np.testing.assert_array_equal(value(x.grad), [[10.0, 1.0, 0.0], [1.0, 0.0, 10.0]])
    f = lp.grad(lambda t: (lp.topk(t, 2)[0] ** 2).sum())
    xs = distinct(3, (4, 5))
    jitted = lp.jit(f)
    np.testing.assert_array_equal(jitted(xs), f(xs))
    np.testing.assert_array_equal(jitted(-xs), f(-xs))  # (the choice is made again on new values)
    np.testing.assert_array_equal(value(lp.vmap(lambda t: lp.topk(t, 3)[0])(xs)),
                                  np.stack([value(lp.topk(r, 3)[0]) for r in xs]))
    assert lp.topk(x, 2, sorted=False)[1].tolist() == indices.tolist()  # (always in order)


def test_k_of_zero_and_of_the_whole_axis() -> None:
    x = np.array([[1.0, 3.0], [2.0, 0.0]])
    v, i = lp.topk(x, 0)
    assert value(v).shape == (2, 0) and i.shape == (2, 0)
    v, i = lp.topk(x, 2, axis=0, largest=False)
    np.testing.assert_array_equal(value(v), np.sort(x, axis=0))


def test_errors_name_the_problem() -> None:
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"k=4 is out of range: axis 1 .* between 0 and 3"):
        lp.topk(x, 4)
    with pytest.raises(ValueError, match="k=-1 is out of range"):
        lp.topk(x, -1)
    with pytest.raises(TypeError, match="k must be an int"):
        lp.topk(x, 1.5)  # type: ignore[arg-type]
    with pytest.raises(np.exceptions.AxisError, match="axis 2 is out of range"):
        lp.topk(x, 1, axis=2)
    with pytest.raises(ValueError, match="0-d"):
        lp.topk(np.float64(1.0), 1)
