"""``l1``, ``huber``, ``smooth_l1``, ``kl_div``, ``nll``: PyTorch's formulas (transcribed below from its
documentation), reductions, hand-computed values and gradients, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ops_helpers import FAST, seeds, shapes

import leanpass as lp
from leanpass import losses
from leanpass.testing import check_grads

RNG = np.random.default_rng(1)
P = RNG.standard_normal((4, 3)) * 2
T = RNG.standard_normal((4, 3))
LOGQ = np.log(RNG.dirichlet(np.ones(3), size=4))
TARGET = RNG.dirichlet(np.ones(3), size=4)
TARGET[0] = [1.0, 0.0, 0.0]  # zeros in the target: 0 * log 0 counts as 0


def reduce(x, reduction):
    return {"mean": x.mean(), "sum": x.sum(), "none": x}[reduction]


def torch_huber(d, delta):  # torch.nn.HuberLoss
    return np.where(np.abs(d) < delta, 0.5 * d**2, delta * (np.abs(d) - 0.5 * delta))


def torch_smooth_l1(d, beta):  # torch.nn.SmoothL1Loss
    return np.where(np.abs(d) < beta, 0.5 * d**2 / beta, np.abs(d) - 0.5 * beta)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_against_pytorchs_formulas(reduction):
    d = P - T
    cases = [
        (losses.l1(P, T, reduction), np.abs(d)),
        (losses.huber(P, T, reduction), torch_huber(d, 1.0)),
        (losses.huber(P, T, reduction, delta=0.5), torch_huber(d, 0.5)),
        (losses.smooth_l1(P, T, reduction), torch_smooth_l1(d, 1.0)),
        (losses.smooth_l1(P, T, reduction, beta=2.0), torch_smooth_l1(d, 2.0)),
        (losses.smooth_l1(P, T, reduction, beta=0.0), np.abs(d)),
        (losses.kl_div(LOGQ, TARGET, reduction), np.where(TARGET > 0, TARGET * (np.log(np.where(TARGET > 0, TARGET,
                                                                                                1.0)) - LOGQ), 0)),
        (losses.kl_div(LOGQ, np.log(TARGET + 0.1), reduction, log_target=True),
         (TARGET + 0.1) * (np.log(TARGET + 0.1) - LOGQ)),
        (losses.nll(LOGQ, np.array([0, 2, 1, 1]), reduction), -LOGQ[np.arange(4), [0, 2, 1, 1]]),
    ]
    for got, per in cases:
        np.testing.assert_allclose(got.numpy(), reduce(per, reduction), rtol=1e-13, atol=1e-15)


def test_by_hand():
    d = lp.Tensor([0.5, -3.0, 0.0])
    zero = np.zeros(3)
    assert losses.l1(d, zero, "sum").item() == 3.5
    np.testing.assert_allclose(losses.huber(d, zero, "none").numpy(), [0.125, 2.5, 0.0])  # 0.5*.25, 1*(3-.5)
    np.testing.assert_allclose(losses.huber(d, zero, "none", delta=2.0).numpy(), [0.125, 4.0, 0.0])  # 2*(3-1)
    np.testing.assert_allclose(losses.smooth_l1(d, zero, "none", beta=2.0).numpy(), [0.0625, 2.0, 0.0])
    # KL([1, 0] || [0.5, 0.5]) = log 2; "mean" divides by the 2 elements, "batchmean" by the 1 example
    logq = np.log([[0.5, 0.5]])
    assert losses.kl_div(logq, [[1.0, 0.0]], "batchmean").item() == pytest.approx(np.log(2), rel=1e-15)
    assert losses.kl_div(logq, [[1.0, 0.0]]).item() == pytest.approx(np.log(2) / 2, rel=1e-15)
    assert losses.nll(np.log([0.25, 0.75]), np.array(1)).item() == pytest.approx(-np.log(0.75), rel=1e-15)


def test_gradients_by_hand():
    p = np.array([0.5, -3.0, 2.0])
    t = np.array([0.0, 0.0, 2.0])
    g = lp.grad(lambda x: losses.l1(x, t, "sum"))(p)
    np.testing.assert_array_equal(np.asarray(g), [1.0, -1.0, 0.0])  # sign, 0 at 0 (PyTorch's too)
    g = lp.grad(lambda x: losses.huber(x, t, "sum"))(p)
    np.testing.assert_array_equal(np.asarray(g), [0.5, -1.0, 0.0])  # d inside, delta * sign outside
    g = lp.grad(lambda x: losses.smooth_l1(x, t, "sum", beta=2.0))(p)
    np.testing.assert_array_equal(np.asarray(g), [0.25, -1.0, 0.0])  # d / beta inside, sign outside
    g = lp.grad(lambda lq: losses.kl_div(lq, TARGET, "sum"))(LOGQ)
    np.testing.assert_allclose(np.asarray(g), -TARGET, rtol=1e-15)
    g = lp.grad(lambda lq: losses.nll(lq, np.array([0, 2, 1, 1])))(LOGQ)
    want = np.zeros((4, 3))
    want[np.arange(4), [0, 2, 1, 1]] = -0.25
    np.testing.assert_array_equal(np.asarray(g), want)


def test_finite_differences_to_second_order():
    away = P + np.sign(P - T) * 0.01  # (no element at a kink)
    for f in (lambda x: losses.l1(x, T), lambda x: losses.huber(x, T, delta=0.7),
              lambda x: losses.smooth_l1(x, T, beta=0.7)):
        check_grads(f, [away])
    check_grads(lambda x: losses.kl_div(x, TARGET, "batchmean"), [LOGQ])
    check_grads(lambda x: losses.nll(x, np.array([0, 2, 1, 1])), [LOGQ])
    check_grads(lambda t: losses.kl_div(LOGQ, t, log_target=True), [np.log(TARGET + 0.1)])


def test_nll_of_log_softmax_is_cross_entropy_and_keeps_leading_axes():
    x = RNG.standard_normal((2, 5, 3))
    labels = RNG.integers(0, 3, (2, 5))
    np.testing.assert_allclose(losses.nll(lp.log_softmax(x, axis=-1), labels).item(),
                               losses.cross_entropy(x, labels).item(), rtol=1e-14)
    assert losses.nll(lp.log_softmax(x, axis=-1), labels, "none").shape == (2, 5)


def test_zero_targets_give_a_finite_kl_gradient():
    g = lp.grad(lambda t: losses.kl_div(LOGQ, t, "sum"))(TARGET)
    assert np.isfinite(np.asarray(g)[1:]).all() and np.array_equal(np.asarray(g)[0, 1:], [0.0, 0.0])


def test_errors_name_the_problem():
    with pytest.raises(ValueError, match="pred has shape"):
        losses.l1(np.zeros(3), np.zeros((3, 1)))
    with pytest.raises(ValueError, match="delta must be > 0"):
        losses.huber(np.zeros(3), np.zeros(3), delta=0.0)
    with pytest.raises(ValueError, match="beta must be >= 0"):
        losses.smooth_l1(np.zeros(3), np.zeros(3), beta=-1.0)
    with pytest.raises(ValueError, match="'batchmean'"):
        losses.kl_div(np.zeros(3), np.zeros(3), reduction="avg")
    with pytest.raises(ValueError, match="integer class indices of shape"):
        losses.nll(np.zeros((2, 3)), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match=r"in \[0, 3\)"):
        losses.nll(np.zeros((2, 3)), np.array([0, 3]))


# ----- any shape (scalars included): values and gradients against the formulas -------------------------
@FAST
@given(shapes, seeds, st.sampled_from([0.3, 1.0, 2.5]))
def test_elementwise_losses_on_any_shape(shape, seed, delta):
    rng = np.random.default_rng(seed)
    p, t = rng.standard_normal(shape) * 2, rng.standard_normal(shape)
    d = p - t
    d_away = np.where(np.abs(np.abs(d) - delta) < 1e-3, d + 0.01, d)  # (no element at the kink)
    p = t + d_away
    d = p - t
    for fn, per, grad in (
        (lambda x: losses.l1(x, t, "sum"), np.abs(d), np.sign(d)),
        (lambda x: losses.huber(x, t, "sum", delta=delta), torch_huber(d, delta), np.clip(d, -delta, delta)),
        (lambda x: losses.smooth_l1(x, t, "sum", beta=delta), torch_smooth_l1(d, delta),
         np.clip(d / delta, -1.0, 1.0)),
    ):
        value, g = lp.value_and_grad(fn)(p)
        np.testing.assert_allclose(value.item(), per.sum(), rtol=1e-12, atol=1e-14)
        np.testing.assert_allclose(np.asarray(g), grad, rtol=1e-12, atol=1e-14)


@FAST
@given(shapes, seeds)
def test_kl_div_and_nll_on_any_shape(shape, seed):
    rng = np.random.default_rng(seed)
    shape = (*shape, 3)  # (a class axis)
    log_q = np.log(rng.dirichlet(np.ones(3), size=shape[:-1]))
    target = rng.dirichlet(np.ones(3), size=shape[:-1])
    value, g = lp.value_and_grad(lambda lq: losses.kl_div(lq, target, "sum"))(log_q)
    np.testing.assert_allclose(value.item(), (target * (np.log(target) - log_q)).sum(), rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(np.asarray(g), -target, rtol=1e-15)
    labels = rng.integers(0, 3, shape[:-1])
    value, g = lp.value_and_grad(lambda lq: losses.nll(lq, labels, "sum"))(log_q)
    np.testing.assert_allclose(value.item(), -np.take_along_axis(log_q, labels[..., None], -1).sum(), rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(g), -np.eye(3)[labels])
