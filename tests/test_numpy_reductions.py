"""NumPy's reductions and scans: prod (exact at zeros, to second order), cumsum, cumprod, nansum,
nanmean, ptp, average, sort, partition, median / percentile / quantile, diff and trace; values equal
to NumPy's, gradients against finite differences over hypothesis-chosen shapes and axes."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ops_helpers import SMALL, distinct, normal, one_axis, seeds, shape_and_axis, value

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads


def with_zeros(seed: int, shape: tuple[int, ...], count: int) -> np.ndarray:
    x = normal(seed, shape)
    flat = x.reshape(-1)
    flat[np.random.default_rng(seed).permutation(flat.size)[:count]] = 0.0
    return flat.reshape(shape)


@SMALL
@given(shape_and_axis(), st.integers(0, 3), st.booleans(), seeds)
def test_prod_is_exact_at_zeros_to_second_order(sa: tuple[Any, Any], zeros: int, keepdims: bool, seed: int) -> None:
    shape, axis = sa
    x = with_zeros(seed, shape, zeros)
    out = lp.prod(Tensor(x), axis, keepdims)
    np.testing.assert_allclose(value(out), np.prod(x, axis=axis, keepdims=keepdims), rtol=1e-13)
    np.testing.assert_allclose(value(np.prod(Tensor(x), axis=axis, keepdims=keepdims)), value(out))
    check_grads(lambda t: lp.prod(t, axis, keepdims), [x], order=2)


def test_prod_gradient_by_hand() -> None:
    g = lambda x: lp.grad(lambda t: lp.prod(t))(np.array(x))  # noqa: E731
    np.testing.assert_array_equal(g([2.0, 3.0, 4.0]), [12.0, 8.0, 6.0])
    np.testing.assert_array_equal(g([2.0, 0.0, 4.0]), [0.0, 8.0, 0.0])
    np.testing.assert_array_equal(g([0.0, 0.0, 4.0]), [0.0, 0.0, 0.0])
    # second order with two zeros: d2/dx0 dx1 of x0 x1 x2 is x2 = 4, not 0
    h = lp.hessian(lambda t: lp.prod(t))(np.array([0.0, 0.0, 4.0]))
    np.testing.assert_array_equal(h, [[0.0, 4.0, 0.0], [4.0, 0.0, 0.0], [0.0, 0.0, 0.0]])
    assert np.multiply.reduce(Tensor([2.0, 3.0], requires_grad=True))._op == "prod"


@SMALL
@given(st.one_of(one_axis().map(lambda sa: (sa[0], sa[1])), st.tuples(st.just((2, 3)), st.none())),
       st.integers(0, 2), seeds)
def test_cumsum_and_cumprod(sa: tuple[Any, Any], zeros: int, seed: int) -> None:
    shape, axis = sa
    x = with_zeros(seed, shape, zeros)
    for lp_fn, np_fn in ((lp.cumsum, np.cumsum), (lp.cumprod, np.cumprod)):
        np.testing.assert_allclose(value(lp_fn(Tensor(x), axis)), np_fn(x, axis=axis), rtol=1e-13)
        assert np_fn(Tensor(x, requires_grad=True), axis=axis)._op == lp_fn.__name__
        check_grads(lambda t, f=lp_fn: f(t, axis), [x], order=2)


def test_cumprod_gradient_by_hand_and_accumulate() -> None:
    np.testing.assert_array_equal(lp.grad(lambda t: lp.cumprod(t).sum())(np.array([2.0, 0.0, 4.0])), [1.0, 10.0, 0.0])
    t = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    assert np.add.accumulate(t)._op == "cumsum" and np.multiply.accumulate(t, axis=1)._op == "cumprod"
    np.testing.assert_array_equal(value(np.multiply.accumulate(t, axis=1)), [[1.0, 2.0], [3.0, 12.0]])


@SMALL
@given(shape_and_axis(min_dims=1), st.booleans(), seeds)
def test_nan_reductions_and_ptp(sa: tuple[Any, Any], keepdims: bool, seed: int) -> None:
    shape, axis = sa
    x = distinct(seed, shape)
    x_nan = np.where(np.random.default_rng(seed).random(shape) < 0.3, np.nan, x)
    np.testing.assert_allclose(value(lp.nansum(Tensor(x_nan), axis, keepdims)),
                               np.nansum(x_nan, axis=axis, keepdims=keepdims), rtol=1e-13)
    check_grads(lambda t: lp.nansum(t, axis, keepdims), [x_nan], order=2)
    kept = ~np.isnan(x_nan).all(axis=axis)
    if np.all(kept):  # (an all-nan slice has no mean: NumPy warns, and so would the test)
        np.testing.assert_allclose(value(np.nanmean(Tensor(x_nan), axis=axis, keepdims=keepdims)),
                                   np.nanmean(x_nan, axis=axis, keepdims=keepdims), rtol=1e-13)
        check_grads(lambda t: lp.nanmean(t, axis, keepdims), [x_nan], order=2)
    np.testing.assert_allclose(value(np.ptp(Tensor(x), axis=axis, keepdims=keepdims)),
                               np.ptp(x, axis=axis, keepdims=keepdims))
    check_grads(lambda t: lp.ptp(t, axis, keepdims), [x], order=2)


def test_average_with_weights() -> None:
    a, w = normal(0, (3, 4)), np.abs(normal(1, (3, 4))) + 0.5
    w1 = np.abs(normal(2, 4)) + 0.5
    for kwargs in ({}, {"axis": 1}, {"axis": 0, "weights": w}, {"axis": 1, "weights": w1},
                   {"axis": None, "weights": w}, {"axis": 1, "weights": w1, "keepdims": True}):
        np.testing.assert_allclose(value(np.average(Tensor(a), **kwargs)), np.average(a, **kwargs), rtol=1e-13)
    check_grads(lambda t, v: lp.average(t, axis=1, weights=v), [a, w1], order=2)
    check_grads(lambda t, v: lp.average(t, weights=v), [a, w], order=2)
    avg, total = lp.average(Tensor(a), axis=1, weights=w1, returned=True)
    ref_avg, ref_total = np.average(a, axis=1, weights=w1, returned=True)
    np.testing.assert_allclose(value(avg), ref_avg) and np.testing.assert_allclose(value(total), ref_total)
    with pytest.raises(ZeroDivisionError, match="sum to zero"):
        lp.average(Tensor([1.0, 2.0]), weights=[1.0, -1.0])
    with pytest.raises(TypeError, match="axis must be given"):
        lp.average(Tensor(a), weights=w1)


@SMALL
@given(st.one_of(one_axis(), st.tuples(st.just((3, 2)), st.none())), seeds)
def test_sort_and_partition(sa: tuple[Any, Any], seed: int) -> None:
    shape, axis = sa
    x = distinct(seed, shape)
    np.testing.assert_array_equal(value(np.sort(Tensor(x), axis=axis)), np.sort(x, axis=axis))
    check_grads(lambda t: lp.sort(t, axis) * np.arange(1.0, np.size(x) + 1).reshape(np.shape(np.sort(x, axis))),
                [x], order=2)
    n = np.size(x) if axis is None else shape[axis]
    kth = int(np.random.default_rng(seed).integers(n))
    # (NumPy's partition and argpartition share one selection algorithm: the same arrangement)
    np.testing.assert_array_equal(value(np.partition(Tensor(x), kth, axis=axis)), np.partition(x, kth, axis=axis))
    check_grads(lambda t: lp.partition(t, kth, axis) ** 2, [x], order=2)


def test_sort_ties_keep_each_gradient_with_its_entry() -> None:
    # stable: the first 3.0 is sorted to place 1 (weight 2), the second to place 2 (weight 3)
    g = lp.grad(lambda t: (lp.sort(t) * np.array([1.0, 2.0, 3.0])).sum())(np.array([3.0, 1.0, 3.0]))
    np.testing.assert_array_equal(g, [2.0, 1.0, 3.0])
    with pytest.raises(TypeError, match="order="):
        np.sort(Tensor([1.0]), order="x")


@SMALL
@given(shape_and_axis(min_dims=1), st.booleans(), seeds,
       st.one_of(st.floats(0.0, 1.0), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=3)))
def test_quantiles_and_median(sa: tuple[Any, Any], keepdims: bool, seed: int, q: Any) -> None:
    shape, axis = sa
    if axis == ():
        axis = None
    x = distinct(seed, shape)
    q = np.asarray(q)
    np.testing.assert_array_equal(value(np.quantile(Tensor(x), q, axis=axis, keepdims=keepdims)),
                                  np.quantile(x, q, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(value(np.percentile(Tensor(x), q * 100, axis=axis, keepdims=keepdims)),
                                  np.percentile(x, q * 100, axis=axis, keepdims=keepdims))
    np.testing.assert_array_equal(value(np.median(Tensor(x), axis=axis, keepdims=keepdims)),
                                  np.median(x, axis=axis, keepdims=keepdims))
    check_grads(lambda t: lp.quantile(t, q, axis, keepdims=keepdims), [x], order=2)
    check_grads(lambda t: lp.median(t, axis, keepdims=keepdims), [x], order=2)


def test_median_gradient_goes_to_the_middle_entries() -> None:
    np.testing.assert_array_equal(lp.grad(lambda t: lp.median(t))(np.array([4.0, 1.0, 3.0, 2.0])),
                                  [0.0, 0.0, 0.5, 0.5])
    np.testing.assert_allclose(lp.grad(lambda t: lp.quantile(t, 0.25))(np.array([4.0, 1.0, 3.0, 2.0])),
                               [0.0, 0.25, 0.0, 0.75])
    assert np.isnan(value(lp.median(Tensor([1.0, np.nan, 2.0]))))  # as NumPy: a nan makes it nan
    with pytest.raises(TypeError, match="method='linear'"):
        np.quantile(Tensor([1.0]), 0.5, method="nearest")
    with pytest.raises(ValueError, match=r"\[0, 1\]"):
        lp.quantile(Tensor([1.0]), 1.5)


@SMALL
@given(one_axis(), st.integers(0, 3), st.booleans(), seeds)
def test_diff(sa: tuple[Any, Any], n: int, ends: bool, seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    kwargs: dict[str, Any] = {"prepend": 0.5, "append": normal(seed + 1, tuple(
        1 if i == axis % len(shape) else s for i, s in enumerate(shape)))} if ends else {}
    np.testing.assert_allclose(value(np.diff(Tensor(x), n=n, axis=axis, **kwargs)),
                               np.diff(x, n=n, axis=axis, **kwargs), rtol=1e-13)
    check_grads(lambda t: lp.diff(t, n, axis, **kwargs), [x], order=2)
    if ends:  # the appended values are differentiable too
        check_grads(lambda t, a: lp.diff(t, n, axis, prepend=0.5, append=a), [x, kwargs["append"]], order=2)


@pytest.mark.parametrize(("shape", "offset", "axes"), [((3, 3), 0, (0, 1)), ((3, 4), 1, (0, 1)), ((4, 3), -2, (0, 1)),
                                                        ((2, 3, 4), 0, (2, 0)), ((2, 3, 3), -1, (1, 2))])
def test_trace(shape: tuple[int, ...], offset: int, axes: tuple[int, int]) -> None:
    x = normal(3, shape)
    np.testing.assert_allclose(value(np.trace(Tensor(x), offset, *axes)), np.trace(x, offset, *axes))
    check_grads(lambda t: lp.trace(t, offset, *axes), [x], order=2)


def test_float32_reductions() -> None:
    x = distinct(0, (3, 4)).astype(np.float32)
    for f in (lambda t: lp.prod(t, 1), lambda t: lp.cumprod(t, 0), lambda t: lp.cumsum(t),
              lambda t: lp.sort(t), lambda t: lp.median(t, 0), lambda t: lp.quantile(t, [0.2, 0.7], 1),
              lambda t: lp.diff(t), lambda t: lp.trace(t), lambda t: lp.nanmean(t),
              lambda t: lp.average(t, 1, np.ones(4, np.float32))):
        assert f(Tensor(x)).dtype == np.float32
        assert lp.grad(lambda t, f=f: f(t).sum())(x).dtype == np.float32
