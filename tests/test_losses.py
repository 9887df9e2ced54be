"""Losses against their formulas, stability at extreme logits, reductions, gradients, errors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses
from leanpass.testing import check_grads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((6, 4))
LABELS = np.array([0, 3, 1, 2, 3, 0])
PROBS = RNG.dirichlet(np.ones(4), size=6)


def ref_log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_cross_entropy_matches_the_formula(reduction):
    per = -ref_log_softmax(X)[np.arange(6), LABELS]
    soft = -(PROBS * ref_log_softmax(X)).sum(-1)
    want = {"mean": per.mean(), "sum": per.sum(), "none": per}[reduction]
    want_soft = {"mean": soft.mean(), "sum": soft.sum(), "none": soft}[reduction]
    np.testing.assert_allclose(losses.cross_entropy(X, LABELS, reduction).numpy(), want, rtol=1e-12)
    np.testing.assert_allclose(losses.cross_entropy(X, PROBS, reduction).numpy(), want_soft, rtol=1e-12)
    # one-hot probabilities give the same loss as the integer labels
    np.testing.assert_allclose(losses.cross_entropy(X, np.eye(4)[LABELS], reduction).numpy(), want, rtol=1e-12)


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_losses_check_grads_to_second_order(reduction):
    check_grads(lambda x: losses.cross_entropy(x, LABELS, reduction), [X], order=2)
    check_grads(lambda x: losses.cross_entropy(x, PROBS, reduction), [X], order=2)
    check_grads(lambda x, p: losses.cross_entropy(x, p, reduction), [X, PROBS], order=2)
    check_grads(lambda x: losses.binary_cross_entropy_with_logits(x, (X > 0) * 0.9, reduction), [X], order=2)
    check_grads(lambda a, b: losses.mse(a, b, reduction), [X, X[::-1] * 2], order=2)


def test_cross_entropy_on_nd_logits():
    x = RNG.standard_normal((2, 3, 4))
    lab = RNG.integers(0, 4, (2, 3))
    out = losses.cross_entropy(x, lab, "none")
    assert out.shape == (2, 3)
    np.testing.assert_allclose(out.numpy(), -np.take_along_axis(ref_log_softmax(x), lab[..., None], -1)[..., 0])
    check_grads(lambda z: losses.cross_entropy(z, lab), [x], order=2)


def test_stable_for_extreme_logits():
    x = np.array([[1000.0, -1000.0, 0.0], [-1000.0, -1000.0, 1000.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value, g = lp.value_and_grad(lambda z: losses.cross_entropy(z, np.array([1, 2])))(x)
        assert np.isfinite(value.item()) and np.isfinite(g).all()
        np.testing.assert_allclose(value.item(), 1000.0)  # (2000 + 0) / 2
        np.testing.assert_allclose(g, [[0.5, -0.5, 0.0], [0.0, 0.0, 0.0]], atol=1e-12)
        bce, gb = lp.value_and_grad(
            lambda z: losses.binary_cross_entropy_with_logits(z, np.array([1.0, 0.0, 0.0, 1.0]), "sum"))(
            np.array([1000.0, -1000.0, 1000.0, -1000.0]))
        np.testing.assert_allclose(bce.item(), 2000.0)
        np.testing.assert_allclose(gb, [0.0, 0.0, 1.0, -1.0])
        soft = lp.grad(lambda z: losses.cross_entropy(z, np.array([[0.5, 0.5, 0.0]])))(np.array([[1e4, -1e4, 0.0]]))
        assert np.isfinite(soft).all()


def test_bce_matches_the_formula():
    y = (X > 0) * 1.0
    p = 1 / (1 + np.exp(-X))
    want = -(y * np.log(p) + (1 - y) * np.log(1 - p))
    np.testing.assert_allclose(losses.binary_cross_entropy_with_logits(X, y, "none").numpy(), want, rtol=1e-10)


def test_mse_matches_the_formula_and_refuses_silent_broadcasting():
    a, b = X, X * 0.5
    np.testing.assert_allclose(losses.mse(a, b).item(), ((a - b) ** 2).mean())
    np.testing.assert_allclose(losses.mse(a, b, "sum").item(), ((a - b) ** 2).sum())
    with pytest.raises(ValueError, match="must match"):
        losses.mse(np.zeros((4, 1)), np.zeros(4))


def test_float32_is_preserved():
    x32 = lp.Tensor(X.astype(np.float32), requires_grad=True)
    for loss in (losses.cross_entropy(x32, LABELS), losses.cross_entropy(x32, PROBS),
                 losses.binary_cross_entropy_with_logits(x32, (X > 0)), losses.mse(x32, X)):
        assert loss.dtype == np.float32
        x32.grad = None
        loss.backward()
        assert x32.grad.dtype == np.float32


def test_clear_errors():
    with pytest.raises(ValueError, match="reduction must be"):
        losses.cross_entropy(X, LABELS, "avg")
    with pytest.raises(ValueError, match=r"class indices in \[0, 4\)"):
        losses.cross_entropy(X, LABELS + 1)
    with pytest.raises(ValueError, match="integer labels must have shape"):
        losses.cross_entropy(X, LABELS[:3])
    with pytest.raises(ValueError, match="probability labels must have"):
        losses.cross_entropy(X, PROBS[:, :3])
    with pytest.raises(TypeError, match="integer class indices or float probabilities"):
        losses.cross_entropy(X, np.array(["a"] * 6))
    with pytest.raises(ValueError, match="must match"):
        losses.binary_cross_entropy_with_logits(X, np.zeros(6))
