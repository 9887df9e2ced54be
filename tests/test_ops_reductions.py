"""Reductions: sum, mean, max, min, var, std, logsumexp with every kind of ``axis`` and ``keepdims``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, SMALL, assert_cotangents_match, distinct, normal, seeds, shape_and_axis, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

REDUCTIONS = {
    "sum": (lp.sum, np.sum),
    "mean": (lp.mean, np.mean),
    "max": (lp.max, np.max),
    "min": (lp.min, np.min),
    "var": (lp.var, np.var),
    "std": (lp.std, np.std),
}
finite = hnp.arrays(np.float64, hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
                    elements=st.floats(-100, 100))


def ref_logsumexp(x: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    m = np.max(x, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(x - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis) if axis is not None else out.reshape(())


# ----- values and shapes agree with NumPy ------------------------------------------------------------
@FAST
@given(st.data(), st.booleans(), st.sampled_from(sorted(REDUCTIONS)))
def test_values_and_shapes_match_numpy(data: Any, keepdims: bool, name: str) -> None:
    shape, axis = data.draw(shape_and_axis())
    x = data.draw(hnp.arrays(np.float64, shape, elements=st.floats(-100, 100)))
    ours, theirs = REDUCTIONS[name]
    got = ours(Tensor(x), axis=axis, keepdims=keepdims)
    want = theirs(x, axis=axis, keepdims=keepdims)
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(value(got), want, rtol=1e-12, atol=1e-12)


@FAST
@given(finite, st.booleans())
def test_logsumexp_matches_the_direct_formula(x: np.ndarray, keepdims: bool) -> None:
    for axis in [None, *range(-x.ndim, x.ndim)]:
        got = lp.logsumexp(Tensor(x), axis=axis, keepdims=keepdims)
        want = ref_logsumexp(x, axis, keepdims)
        assert got.shape == np.shape(want)
        np.testing.assert_allclose(value(got), want, rtol=1e-12)


# ----- gradients, to second order --------------------------------------------------------------------
@FAST
@given(shape_and_axis(), st.booleans(), seeds)
def test_sum_and_mean_gradients(sa: tuple[tuple[int, ...], Any], keepdims: bool, seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    check_grads(lambda t: lp.sum(t, axis=axis, keepdims=keepdims), [x], order=2)
    check_grads(lambda t: lp.mean(t, axis=axis, keepdims=keepdims), [x], order=2)
    check_grads(lambda t: (t * t).sum(axis=axis, keepdims=keepdims), [x], order=2)  # the method


@FAST
@given(shape_and_axis(), st.booleans(), seeds)
def test_max_and_min_gradients_away_from_ties(sa: tuple[tuple[int, ...], Any], keepdims: bool, seed: int) -> None:
    shape, axis = sa
    x = distinct(seed, shape)
    check_grads(lambda t: lp.max(t, axis=axis, keepdims=keepdims) ** 2, [x], order=2)
    check_grads(lambda t: t.min(axis=axis, keepdims=keepdims) ** 2, [x], order=2)


@FAST
@given(shape_and_axis(), st.booleans(), st.integers(0, 1), seeds)
def test_var_and_std_gradients(sa: tuple[tuple[int, ...], Any], keepdims: bool, ddof: int, seed: int) -> None:
    shape, axis = sa
    x = distinct(seed, shape)
    n = x.size // max(np.sum(np.zeros(shape), axis=axis).size, 1)
    if n - ddof <= 0:
        with pytest.raises(ValueError, match="degrees of freedom"):
            lp.var(Tensor(x), axis=axis, ddof=ddof)
        return
    check_grads(lambda t: lp.var(t, axis=axis, ddof=ddof, keepdims=keepdims), [x], order=2)
    check_grads(lambda t: t.std(axis=axis, ddof=ddof, keepdims=keepdims), [x], order=2)
    np.testing.assert_allclose(value(lp.std(Tensor(x), axis=axis, ddof=ddof)), np.std(x, axis=axis, ddof=ddof))


@FAST
@given(shape_and_axis(), st.booleans(), seeds)
def test_logsumexp_gradients(sa: tuple[tuple[int, ...], Any], keepdims: bool, seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    check_grads(lambda t: lp.logsumexp(t, axis=axis, keepdims=keepdims), [x], order=2)


@SMALL
@given(shape_and_axis(), st.booleans(), seeds, st.sampled_from(["sum", "mean", "max", "min", "var", "std"]))
def test_cotangents_have_the_input_shape(sa: tuple[tuple[int, ...], Any], keepdims: bool, seed: int,
                                         name: str) -> None:
    shape, axis = sa
    x = distinct(seed, shape)
    fn = getattr(F, name)
    assert_cotangents_match(lambda t: fn(t, axis, keepdims=keepdims), [x], [0])
    assert_cotangents_match(lambda t: F.logsumexp(t, axis, keepdims), [x], [0])


def test_axis_forms_agree() -> None:
    x = normal(1, (2, 3, 4))
    grads = [lp.grad(lambda t, a=a: (lp.sum(t, axis=a) ** 2).sum())(x) for a in [(0, 2), (-3, -1), (2, 0)]]
    for g in grads[1:]:
        np.testing.assert_array_equal(g, grads[0])
    np.testing.assert_allclose(grads[0], 2 * np.broadcast_to(x.sum(axis=(0, 2), keepdims=True), x.shape))


def test_scalar_input_reduces_to_itself() -> None:
    x = Tensor(3.0, requires_grad=True)
    for name in ["sum", "mean", "max", "min"]:
        y = getattr(lp, name)(x)
        assert y.shape == () and y.item() == 3.0 and y._op == name
    lp.sum(x).backward()
    assert x.grad.item() == 1.0


# ----- the documented conventions ----------------------------------------------------------------------
def test_max_ties_split_the_gradient_evenly() -> None:
    x = Tensor([1.0, 3.0, 3.0], requires_grad=True)
    lp.max(x).backward()
    np.testing.assert_array_equal(value(x.grad), [0.0, 0.5, 0.5])
    g = lp.grad(lambda t: lp.min(t))(np.array([2.0, 2.0, 2.0, 5.0]))
    np.testing.assert_allclose(g, [1 / 3, 1 / 3, 1 / 3, 0.0])


def test_max_ties_along_an_axis_with_keepdims() -> None:
    x = np.array([[1.0, 4.0, 4.0], [2.0, 2.0, 0.0]])
    g = lp.grad(lambda t: (lp.max(t, axis=1, keepdims=True) * np.array([[1.0], [10.0]])).sum())(x)
    np.testing.assert_array_equal(g, [[0.0, 0.5, 0.5], [5.0, 5.0, 0.0]])
    g = lp.grad(lambda t: lp.min(t, axis=-1).sum())(x)
    np.testing.assert_array_equal(g, [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])


def test_max_tie_gradient_sums_to_the_cotangent_second_order() -> None:
    # d/dx of sum(grad max) is 0 (the tie weights are constants), and it must be finite
    h = lp.hessian(lambda t: lp.max(t))(np.array([2.0, 2.0]))
    np.testing.assert_array_equal(h, np.zeros((2, 2)))


def test_std_at_zero_spread_has_zero_gradient_without_warnings() -> None:
    g = lp.grad(lambda t: lp.std(t))(np.array([2.0, 2.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.0])
    g = lp.grad(lambda t: lp.std(t, axis=0).sum())(np.array([[1.0, 5.0], [1.0, 3.0]]))
    np.testing.assert_allclose(g, [[0.0, 0.5], [0.0, -0.5]])


def test_var_and_std_with_ddof_by_hand() -> None:
    x = np.array([1.0, 2.0, 6.0])  # mean 3, deviations -2, -1, 3
    assert lp.var(Tensor(x), ddof=1).item() == pytest.approx(7.0)
    np.testing.assert_allclose(lp.grad(lambda t: lp.var(t, ddof=1))(x), [-2.0, -1.0, 3.0])
    np.testing.assert_allclose(lp.grad(lambda t: lp.std(t, ddof=1))(x), np.array([-2.0, -1.0, 3.0]) / (2 * np.sqrt(7)))


def test_ddof_leaving_no_degrees_of_freedom_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"ddof=1 leaves no degrees of freedom.*Use ddof < 1"):
        lp.var(Tensor([1.0, 2.0]), axis=(), ddof=1)
    with pytest.raises(ValueError, match="std: ddof=2"):
        lp.std(Tensor([1.0, 2.0]), ddof=2)


def test_mean_gradient_is_divided_by_the_count() -> None:
    g = lp.grad(lambda t: lp.mean(t, axis=(0, 1)).sum())(np.ones((2, 3, 4)))
    np.testing.assert_allclose(g, np.full((2, 3, 4), 1 / 6))


def test_op_names_are_recorded() -> None:
    x = Tensor(np.ones((2, 2)), requires_grad=True)
    for name in ["sum", "mean", "max", "min", "var", "std", "logsumexp"]:
        assert getattr(lp, name)(x, axis=0)._op == name
    assert x.var(ddof=1)._op == "var" and x.std()._op == "std"


def test_invalid_axis_raises_numpy_axis_error() -> None:
    with pytest.raises(np.exceptions.AxisError):
        lp.sum(Tensor(np.ones((2, 3))), axis=2)
    for name in ["mean", "var", "std"]:  # as in NumPy, a 0-d input has no axis 0 ...
        with pytest.raises(np.exceptions.AxisError):
            getattr(lp, name)(Tensor(2.0), axis=0)
    for name in ["sum", "max", "min", "logsumexp"]:  # ... except for these, which accept it
        assert lp.grad(lambda t, name=name: getattr(lp, name)(t, axis=-1))(2.0) == 1.0


# ----- float32 stays float32 ----------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["sum", "mean", "max", "min", "var", "std", "logsumexp"])
def test_float32_values_and_gradients(name: str) -> None:
    x32 = distinct(0, (3, 4), np.float32)
    fn = getattr(F, name)
    assert_cotangents_match(lambda t: fn(t, 1), [x32], [0])
    # replayed on Tensors (the differentiable backward pass)
    ans, vjp = fn(Tensor(x32), 0)
    (ct,) = vjp(Tensor(np.ones(4, np.float32)))[:1]
    assert ans.dtype == np.float32 and type(ct) is Tensor and ct.dtype == np.float32
    x = Tensor(x32, requires_grad=True)
    y = getattr(lp, name)(x, axis=-1)
    assert y.dtype == np.float32
    (y * y).sum().backward(create_graph=True)
    assert x.grad.dtype == np.float32
    g2 = lp.grad(lambda t: lp.grad(lambda u: (getattr(lp, name)(u, axis=0) ** 2).sum())(t).sum())(x32)
    assert g2.dtype == np.float32
