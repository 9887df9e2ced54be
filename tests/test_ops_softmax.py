"""The softmax family in stable form: softmax, log_softmax, logsumexp.

pytest turns warnings into errors (pyproject.toml), so every test here also proves that no
overflow / invalid-value RuntimeWarning is emitted.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from test_ops_helpers import FAST, SMALL, assert_cotangents_match, normal, one_axis, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

BIG = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0]])


def ref_softmax(x: np.ndarray, axis: int) -> np.ndarray:
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@FAST
@given(one_axis(), seeds)
def test_values_match_the_definition(sa: tuple[tuple[int, ...], int], seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape) * 3
    p = value(lp.softmax(Tensor(x), axis=axis))
    np.testing.assert_allclose(p, ref_softmax(x, axis), rtol=1e-12)
    np.testing.assert_allclose(p.sum(axis=axis), 1.0)
    np.testing.assert_allclose(value(lp.log_softmax(Tensor(x), axis=axis)), np.log(ref_softmax(x, axis)), atol=1e-12)


@FAST
@given(one_axis(), seeds)
def test_gradients_to_second_order(sa: tuple[tuple[int, ...], int], seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    check_grads(lambda t: lp.softmax(t, axis=axis), [x], order=2)
    check_grads(lambda t: lp.log_softmax(t, axis=axis), [x], order=2)


@SMALL
@given(one_axis(), seeds)
def test_cotangents_have_the_input_shape(sa: tuple[tuple[int, ...], int], seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    assert_cotangents_match(lambda t: F.softmax(t, axis), [x], [0])
    assert_cotangents_match(lambda t: F.log_softmax(t, axis), [x], [0])


def test_softmax_of_a_scalar_and_of_axis_none() -> None:
    check_grads(lambda t: lp.softmax(t), [np.array(0.7)], order=2)
    x = normal(3, (2, 3))
    np.testing.assert_allclose(value(lp.softmax(Tensor(x), axis=None)).sum(), 1.0)
    check_grads(lambda t: lp.log_softmax(t, axis=None), [x], order=2)


def test_softmax_gradient_by_hand() -> None:
    # d softmax_i / d x_j = p_i (delta_ij - p_j); for equal logits p = 1/2 each
    jac = lp.jacobian(lambda t: lp.softmax(t))(np.array([0.0, 0.0]))
    np.testing.assert_allclose(jac, [[0.25, -0.25], [-0.25, 0.25]])
    jac = lp.jacobian(lambda t: lp.log_softmax(t))(np.array([0.0, 0.0]))
    np.testing.assert_allclose(jac, [[0.5, -0.5], [-0.5, 0.5]])


# ----- large logits: no overflow, no nan -------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax", "logsumexp"])
def test_plus_minus_1000_no_overflow_no_nan_gradient(name: str) -> None:
    fn = getattr(lp, name)
    out = value(fn(Tensor(BIG), axis=-1))
    assert not np.isnan(out).any()
    w = normal(0, out.shape)
    g = lp.grad(lambda t: (fn(t, axis=-1) * w).sum())(BIG)
    assert np.all(np.isfinite(g))
    h = lp.hessian(lambda t: (fn(t, axis=-1) * w[..., :1]).sum() if name != "logsumexp" else fn(t, axis=-1).sum())(
        BIG[0])
    assert np.all(np.isfinite(h))


def test_large_logit_values_are_exact() -> None:
    np.testing.assert_allclose(value(lp.softmax(Tensor(BIG))), [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_allclose(value(lp.log_softmax(Tensor(BIG)))[0], [0.0, -2000.0, -1000.0])
    np.testing.assert_allclose(value(lp.logsumexp(Tensor([1000.0, 1000.0]))), 1000.0 + np.log(2.0))
    np.testing.assert_allclose(lp.grad(lambda t: lp.logsumexp(t))(np.array([1000.0, 1000.0])), [0.5, 0.5])
    np.testing.assert_allclose(lp.grad(lambda t: lp.log_softmax(t)[0])(np.array([-1000.0, 1000.0])), [1.0, -1.0])


def test_logsumexp_of_all_minus_inf_is_minus_inf_with_zero_gradient() -> None:
    x = np.array([-np.inf, -np.inf])
    assert lp.logsumexp(Tensor(x)).item() == -np.inf
    np.testing.assert_array_equal(lp.grad(lambda t: lp.logsumexp(t))(x), [0.0, 0.0])
    np.testing.assert_array_equal(lp.hessian(lambda t: lp.logsumexp(t))(x), np.zeros((2, 2)))
    # one row all -inf, the other ordinary
    rows = np.array([[-np.inf, -np.inf], [0.0, 0.0]])
    out = value(lp.logsumexp(Tensor(rows), axis=1))
    np.testing.assert_allclose(out, [-np.inf, np.log(2.0)])
    np.testing.assert_allclose(lp.grad(lambda t: lp.logsumexp(t, axis=1).sum())(rows), [[0.0, 0.0], [0.5, 0.5]])
    t = Tensor(x, requires_grad=True)
    lp.logsumexp(t).backward()
    np.testing.assert_array_equal(value(t.grad), [0.0, 0.0])


def test_logsumexp_of_an_empty_axis_is_minus_inf() -> None:
    assert lp.logsumexp(Tensor(np.zeros(0))).item() == -np.inf
    assert value(lp.logsumexp(Tensor(np.zeros((2, 0))), axis=1)).tolist() == [-np.inf, -np.inf]


def test_masked_entries_get_zero_probability_and_finite_gradients() -> None:
    x = np.array([[0.0, -np.inf, 1.0], [2.0, 2.0, -np.inf]])
    p = value(lp.softmax(Tensor(x)))
    assert p[0, 1] == 0.0 and p[1, 2] == 0.0
    np.testing.assert_allclose(p.sum(axis=-1), [1.0, 1.0])
    w = normal(1, x.shape)
    for fn in (lp.softmax, lp.logsumexp):
        g = lp.grad(lambda t, fn=fn: (fn(t, axis=-1) * (w if fn is lp.softmax else 1.0)).sum())(x)
        assert np.all(np.isfinite(g))
        assert g[0, 1] == 0.0 and g[1, 2] == 0.0


def test_a_slice_of_all_minus_inf_gives_nan_quietly() -> None:
    # There is no distribution over nothing: 0 / 0, documented, and without a RuntimeWarning.
    out = value(lp.softmax(Tensor([[-np.inf, -np.inf], [0.0, 0.0]])))
    assert np.isnan(out[0]).all()
    np.testing.assert_allclose(out[1], [0.5, 0.5])
    assert np.isnan(value(lp.log_softmax(Tensor([-np.inf, -np.inf])))).all()


def test_op_names() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    assert lp.softmax(x)._op == "softmax"
    assert lp.log_softmax(x)._op == "log_softmax"
    assert lp.logsumexp(x)._op == "logsumexp"


def test_log_softmax_equals_x_minus_logsumexp() -> None:
    x = normal(5, (3, 4))
    np.testing.assert_allclose(
        value(lp.log_softmax(Tensor(x), axis=0)), x - value(lp.logsumexp(Tensor(x), axis=0, keepdims=True))
    )


# ----- float32 ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["softmax", "log_softmax"])
def test_float32_values_and_gradients(name: str) -> None:
    x32 = (BIG / 10).astype(np.float32)
    fn = getattr(F, name)
    assert_cotangents_match(lambda t: fn(t, -1), [x32], [0])
    ans, vjp = fn(Tensor(x32), 0)
    (ct,) = vjp(Tensor(np.ones_like(x32)))
    assert ans.dtype == np.float32 and type(ct) is Tensor and ct.dtype == np.float32
    t = Tensor(x32, requires_grad=True)
    (getattr(lp, name)(t) ** 2).sum().backward(create_graph=True)
    assert t.grad.dtype == np.float32
    assert lp.hessian(lambda u: (getattr(lp, name)(u) ** 2).sum())(x32[0]).dtype == np.float32
    assert lp.logsumexp(Tensor(np.full(3, -np.inf, np.float32))).dtype == np.float32
