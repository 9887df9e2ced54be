"""``lp.stats``: log-densities equal to ``scipy.stats``' (SciPy is the reference here only), with
SciPy's signatures, and gradients in every argument to second order against finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import scipy.stats as ss

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads

S = lp.stats
rng = np.random.default_rng(0)


def close(got: Any, want: Any) -> None:
    got = got._data if isinstance(got, Tensor) else got
    assert np.shape(got) == np.shape(want), (np.shape(got), np.shape(want))
    assert np.allclose(got, want, rtol=1e-12, atol=1e-14, equal_nan=True), (got, want)


X = rng.standard_normal(6) * 3


@pytest.mark.parametrize("method", ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"])
def test_norm(method: str) -> None:
    close(getattr(S.norm, method)(X, 0.5, 1.7), getattr(ss.norm, method)(X, 0.5, 1.7))
    close(getattr(S.norm, method)(X), getattr(ss.norm, method)(X))
    close(getattr(S.norm, method)(X[:, None], loc=np.array([0.0, 1.0]), scale=2.0),
          getattr(ss.norm, method)(X[:, None], loc=np.array([0.0, 1.0]), scale=2.0))
    check_grads(lambda x, m, s: getattr(S.norm, method)(x, m, s), [X, np.array(0.5), np.array(1.7)], order=2)


def test_norm_tails() -> None:
    close(S.norm.logcdf(np.array([-40.0, -1e3])), ss.norm.logcdf(np.array([-40.0, -1e3])))
    assert np.isclose(lp.grad(lambda x: S.norm.logcdf(x))(-40.0), 40.0249, rtol=1e-4)  # finite, ~ -x


COV = np.array([[2.0, 0.3, 0.1], [0.3, 1.0, 0.2], [0.1, 0.2, 1.5]])


def test_multivariate_normal() -> None:
    x, mu = rng.standard_normal((4, 3)), rng.standard_normal(3)
    for cov in (COV, 2.0, np.diag(COV)):
        close(S.multivariate_normal.logpdf(x, mu, cov), ss.multivariate_normal.logpdf(x, mu, cov))
    close(S.multivariate_normal.logpdf(x[0], mu, COV), ss.multivariate_normal.logpdf(x[0], mu, COV))
    close(S.multivariate_normal.pdf(x, cov=COV), ss.multivariate_normal.pdf(x, cov=COV))
    a = rng.standard_normal((3, 3))
    check_grads(lambda x, m, a: S.multivariate_normal.logpdf(x, m, a @ a.T + np.eye(3)), [x, mu, a], order=2)


def test_multivariate_normal_batches_covariances() -> None:
    covs = np.stack([COV, 2 * COV])
    x, mu = rng.standard_normal((2, 4, 3)), rng.standard_normal(3)
    want = np.stack([ss.multivariate_normal.logpdf(x[i], mu, covs[i]) for i in range(2)])
    close(S.multivariate_normal.logpdf(x, mu, covs[:, None]), want)


def test_t() -> None:
    close(S.t.logpdf(X, 3.5, 0.2, 1.3), ss.t.logpdf(X, 3.5, 0.2, 1.3))
    close(S.t.pdf(X, np.array([[1.0], [30.0]])), ss.t.pdf(X, np.array([[1.0], [30.0]])))
    check_grads(lambda x, d, m, s: S.t.logpdf(x, d, m, s), [X, np.array(3.5), np.array(0.2), np.array(1.3)], order=2)


def test_beta_and_gamma() -> None:
    u = np.array([0.1, 0.5, 0.9, 0.0, 1.0, 1.2, -0.1])
    with np.errstate(divide="ignore"):
        for a, b in ((2.5, 1.5), (1.0, 1.0), (0.5, 3.0)):
            close(S.beta.logpdf(u, a, b), ss.beta.logpdf(u, a, b))
        close(S.beta.logpdf(u, 2.5, 1.5, 0.1, 2.0), ss.beta.logpdf(u, 2.5, 1.5, 0.1, 2.0))
        close(S.beta.pdf(u, 2.5, 1.5), ss.beta.pdf(u, 2.5, 1.5))
        g = np.array([0.1, 2.0, 7.0, 0.0, -1.0])
        for a in (2.5, 1.0, 0.5):
            close(S.gamma.logpdf(g, a), ss.gamma.logpdf(g, a))
        close(S.gamma.logpdf(g, 2.5, 0.05, 3.0), ss.gamma.logpdf(g, 2.5, 0.05, 3.0))
        close(S.gamma.pdf(g, 2.5), ss.gamma.pdf(g, 2.5))
    check_grads(lambda x, a, b: S.beta.logpdf(x, a, b), [u[:3], np.array(2.5), np.array(1.5)], order=2)
    check_grads(lambda x, a, s: S.gamma.logpdf(x, a, scale=s), [g[:3], np.array(2.5), np.array(1.5)], order=2)


def test_dirichlet() -> None:
    alpha = np.array([1.5, 2.0, 0.7])
    x = rng.dirichlet(alpha, size=4).T  # components along the first axis, as SciPy
    close(S.dirichlet.logpdf(x, alpha), ss.dirichlet.logpdf(x, alpha))
    close(S.dirichlet.logpdf(x[:, 0], alpha), ss.dirichlet.logpdf(x[:, 0], alpha))
    close(S.dirichlet.logpdf(x[:2], alpha), ss.dirichlet.logpdf(x[:2], alpha))  # K - 1 components
    close(S.dirichlet.pdf(x, alpha), ss.dirichlet.pdf(x, alpha))
    check_grads(S.dirichlet.logpdf, [x, alpha], order=2)
    with pytest.raises(ValueError, match="components"):
        S.dirichlet.logpdf(np.ones(5) / 5, alpha)


def test_poisson_and_bernoulli() -> None:
    k = np.array([0, 1, 3, 7, -1, 2.5])
    close(S.poisson.logpmf(k, 2.3), ss.poisson.logpmf(k, 2.3))
    close(S.poisson.pmf(k, 2.3, 1), ss.poisson.pmf(k, 2.3, 1))
    check_grads(lambda m: S.poisson.logpmf(k[:4], m), [np.array(2.3)], order=2)
    kb = np.array([0, 1, 1, 2])
    close(S.bernoulli.logpmf(kb, 0.3), ss.bernoulli.logpmf(kb, 0.3))
    close(S.bernoulli.pmf(kb, np.array([[0.3], [0.9]])), ss.bernoulli.pmf(kb, np.array([[0.3], [0.9]])))
    check_grads(lambda p: S.bernoulli.logpmf(kb[:3], p), [np.array(0.3)], order=2)


def test_hand_computed_gradients() -> None:
    # d/dmu log N(x; mu, s) = (x - mu) / s**2, d/ds = ((x - mu)**2 / s**2 - 1) / s
    assert np.isclose(lp.grad(lambda m: S.norm.logpdf(1.0, m, 2.0))(0.0), 0.25)
    assert np.isclose(lp.grad(lambda s: S.norm.logpdf(1.0, 0.0, s))(2.0), (0.25 - 1) / 2)
    # d/dmu log Poisson(k; mu) = k / mu - 1
    assert np.isclose(lp.grad(lambda m: S.poisson.logpmf(3, m))(2.0), 0.5)
    # d/dp log Bernoulli(1; p) = 1 / p
    assert np.isclose(lp.grad(lambda p: S.bernoulli.logpmf(1, p))(0.25), 4.0)


def test_outside_the_support_is_minus_inf_with_a_zero_gradient() -> None:
    assert S.gamma.logpdf(-1.0, 2.0).item() == -np.inf
    assert lp.grad(lambda a: S.gamma.logpdf(-1.0, a))(2.0) == 0.0
    assert lp.grad(lambda m: S.poisson.logpmf(-1.0, m))(2.0) == 0.0
    both = lp.grad(lambda a: S.beta.logpdf(np.array([1.5, 0.5]), a, 2.0).sum())(2.0)
    assert both == lp.grad(lambda a: S.beta.logpdf(0.5, a, 2.0))(2.0)
