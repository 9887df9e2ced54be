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
    check_grads(S.dirichlet.logpdf, [x[:2], alpha], order=2)  # (K - 1 components: the differences stay on the simplex)
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


# ----- parameter domains and supports: SciPy's rules -------------------------------------------------------
# A parameter outside its domain (a scale or shape <= 0, a probability outside [0, 1], a Poisson mean < 0)
# or a nan argument gives nan; an argument outside the support gives -inf; infinite values follow SciPy.
EDGE = np.array([np.nan, np.inf, -np.inf, -1.0, 0.0, 0.5, 1.0, 1.5, 2.0, 3.0, -0.5])


def same(got: Any, want: Any) -> None:
    got = np.asarray(got._data if isinstance(got, Tensor) else got)
    want = np.asarray(want, dtype=float)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "nan in different places"
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), "different infinities"
    assert np.allclose(got[fin], want[fin], rtol=1e-12, atol=1e-14)


def grid(n: int) -> list[np.ndarray]:
    """``n`` arrays of EDGE values that broadcast to every combination."""
    return [EDGE.reshape((-1,) + (1,) * (n - 1 - i)) for i in range(n)]


def _exp_of(f: Any) -> Any:
    return lambda *args: np.exp(f(*args))


# name: (LeanPass, SciPy, number of arguments). A density is exp(log-density) (SciPy's own pdf and logpdf
# disagree at a few degenerate points: beta.pdf(0, 0.5, inf) is inf, its logpdf nan).
CASES = {
    **{f"norm.{m}": (getattr(S.norm, m), getattr(ss.norm, m), 3) for m in ("logpdf", "cdf", "logcdf", "sf", "logsf")},
    "norm.pdf": (S.norm.pdf, _exp_of(ss.norm.logpdf), 3),
    "t.logpdf": (S.t.logpdf, ss.t.logpdf, 4), "t.pdf": (S.t.pdf, _exp_of(ss.t.logpdf), 4),
    "beta.logpdf": (S.beta.logpdf, ss.beta.logpdf, 5), "beta.pdf": (S.beta.pdf, _exp_of(ss.beta.logpdf), 5),
    "gamma.logpdf": (S.gamma.logpdf, ss.gamma.logpdf, 4), "gamma.pdf": (S.gamma.pdf, _exp_of(ss.gamma.logpdf), 4),
    "poisson.logpmf": (S.poisson.logpmf, ss.poisson.logpmf, 3),
    "poisson.pmf": (S.poisson.pmf, _exp_of(ss.poisson.logpmf), 3),
    "bernoulli.logpmf": (S.bernoulli.logpmf, ss.bernoulli.logpmf, 3),
    "bernoulli.pmf": (S.bernoulli.pmf, _exp_of(ss.bernoulli.logpmf), 3),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_every_combination_of_edge_values_as_scipy(name: str) -> None:
    ours, theirs, n = CASES[name]
    args = grid(n)
    with np.errstate(all="ignore"):
        same(ours(*args), theirs(*args))


def test_the_named_invalid_parameters() -> None:
    assert np.isnan(S.poisson.logpmf(0.0, -1.0).item())  # (it gave 1.0)
    assert np.isnan(S.bernoulli.logpmf(1, 1.5).item())  # (it gave 0.405)
    with pytest.raises(ValueError, match="simplex"):  # (it gave 1.078)
        S.dirichlet.logpdf([0.7, 0.7], [2.0, 2.0])
    assert np.isnan(S.norm.logpdf(0.0, 0.0, -1.0).item()) and np.isnan(S.gamma.logpdf(1.0, 0.0).item())
    assert S.t.logpdf(1.0, np.inf).item() == S.norm.logpdf(1.0).item()  # (df = inf: the normal; it gave nan)


GRAD_CASES = [  # (function of its parameters, valid point, invalid points)
    (lambda x, m, s: S.norm.logpdf(x, m, s), [0.3, 0.1, 1.2], [[0.3, 0.1, -1.0], [0.3, 0.1, 0.0], [np.nan, 0.1, 1.0]]),
    (lambda x, m, s: S.norm.logcdf(x, m, s), [0.3, 0.1, 1.2], [[0.3, 0.1, -1.0]]),
    (lambda x, d, s: S.t.logpdf(x, d, 0.0, s), [0.3, 3.0, 1.2], [[0.3, -3.0, 1.2], [0.3, 3.0, -1.0]]),
    (lambda x, a, b: S.beta.logpdf(x, a, b), [0.3, 2.0, 3.0], [[0.3, -2.0, 3.0], [0.3, 2.0, 0.0], [1.5, -1.0, 2.0]]),
    (lambda x, a, s: S.gamma.logpdf(x, a, scale=s), [1.3, 2.0, 1.5], [[1.3, -2.0, 1.5], [-1.0, 2.0, -1.5]]),
    (lambda m: S.poisson.logpmf(3.0, m), [2.0], [[-1.0], [np.nan]]),
    (lambda m: S.poisson.logpmf(-1.0, m), [2.0], [[-1.0]]),  # (outside the support, and invalid: nan)
    (lambda p: S.bernoulli.logpmf(1.0, p), [0.3], [[1.5], [-0.5]]),
]


@pytest.mark.parametrize("case", range(len(GRAD_CASES)))
def test_gradients_at_invalid_parameters_are_nan(case: int) -> None:
    f, good, bads = GRAD_CASES[case]
    n = len(good)
    for order in (1, 2):
        def derivative(*args: Any, order: int = order) -> Any:
            g = lp.grad(lambda *a: f(*a), argnums=tuple(range(n)))
            if order == 2:
                g = lp.grad(lambda *a: sum(lp.grad(lambda *b: f(*b), argnums=tuple(range(n)))(*a)),
                            argnums=tuple(range(n)))
            return [float(v) for v in g(*args)]

        assert all(np.isfinite(derivative(*good)))
        for bad in bads:
            assert np.isnan(float(f(*bad))), bad
            assert all(np.isnan(derivative(*bad))), (bad, order, derivative(*bad))
    # elementwise: an invalid scale in one place leaves the gradients of the others as they were
    scales = np.array([1.2, -1.0, 2.0])
    g = lp.grad(lambda m: S.norm.logpdf(0.3, m, scales).sum())(np.zeros(3))
    assert np.isnan(g[1]) and np.allclose(g[[0, 2]], 0.3 / scales[[0, 2]] ** 2)


def test_dirichlet_refuses_what_scipy_refuses() -> None:
    alpha = np.array([2.0, 3.0, 0.5])
    bad = {"simplex": ([0.3, 0.3, 0.3], alpha), r"in \[0, 1\]": ([1.2, -0.1, -0.1], alpha),
           "0 where its alpha is < 1": ([0.5, 0.5, 0.0], alpha), "alpha must be > 0": ([0.2, 0.3, 0.5], [1, 0, 1]),
           "one-dimensional": ([0.2, 0.8], [[1.0, 1.0]])}
    for message, (x, a) in bad.items():
        with pytest.raises(ValueError, match=message):
            S.dirichlet.logpdf(np.array(x), np.array(a, dtype=float))
        with pytest.raises(ValueError):
            ss.dirichlet.logpdf(np.array(x), np.array(a, dtype=float))
    with pytest.raises(ValueError, match="in \\[0, 1\\]"):  # K - 1 components summing past 1
        S.dirichlet.logpdf(np.array([0.7, 0.6]), alpha)
    close(S.dirichlet.logpdf(np.array([0.5, 0.5, 0.0]), np.array([2.0, 3.0, 1.0])),
          ss.dirichlet.logpdf(np.array([0.5, 0.5, 0.0]), np.array([2.0, 3.0, 1.0])))
    # float32 points of the simplex (their sum is 1 within float32's rounding, not within 1e-9)
    x32 = rng.dirichlet(alpha, size=50).T.astype(np.float32)
    assert np.abs(x32.sum(axis=0) - 1).max() > 1e-9
    assert np.isfinite(S.dirichlet.logpdf(x32, alpha.astype(np.float32))._data).all()
    # inside vmap an example cannot raise alone: its value is nan
    got = lp.vmap(lambda a: S.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), a))(np.array([[1.0, 2.0, 3.0],
                                                                                       [1.0, -2.0, 3.0]]))
    assert np.isfinite(got[0]) and np.isnan(got[1])
    assert np.isclose(got[0], ss.dirichlet.logpdf(np.array([0.2, 0.3, 0.5]), np.array([1.0, 2.0, 3.0])))


def test_multivariate_normal_edges() -> None:
    for cov in (np.nan, np.inf, np.array([[1.0, np.nan], [np.nan, 1.0]])):
        with pytest.raises(ValueError, match="finite"):
            S.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), cov)
        with pytest.raises(ValueError), np.errstate(all="ignore"):
            ss.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), cov)
    for cov in (-1.0, 0.0, np.array([[1.0, 2.0], [2.0, 1.0]])):
        with pytest.raises(ValueError):  # (LinAlgError is a ValueError; SciPy raises one too)
            S.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), cov)
        with pytest.raises(ValueError):
            ss.multivariate_normal.logpdf(np.zeros(2), np.zeros(2), cov)
    # a point with an infinite coordinate has density 0, as norm.logpdf(inf) = -inf (SciPy's multivariate
    # normal gives nan there: its whitening multiplies inf by 0); a nan coordinate gives nan
    x = np.array([[np.nan, 0.0], [np.inf, 0.0], [np.inf, -np.inf], [np.inf, np.nan], [1.0, 2.0]])
    got = S.multivariate_normal.logpdf(x, np.zeros(2), 1.0)
    same(got, [np.nan, -np.inf, -np.inf, np.nan, ss.multivariate_normal.logpdf(x[4], np.zeros(2), 1.0)])
    assert lp.grad(lambda m: S.multivariate_normal.logpdf(x[1:3], m, 1.0).sum())(np.zeros(2)).tolist() == [0.0, 0.0]
    assert np.isnan(S.multivariate_normal.logpdf(np.zeros(2), np.array([np.nan, 0.0]), 1.0).item())


# ----- float32 stays float32 -----------------------------------------------------------------------------
# Every method of lp.stats: points (one outside the support where there is an outside), the parameters
# without defaults, values for those with defaults, and parameters out of their domain (the nan path).
_P = {"loc": 0.25, "scale": 2.0}
DTYPE_CASES: dict[str, tuple[Any, list[float], dict[str, Any], dict[str, Any], dict[str, Any]]] = {
    **{f"norm.{m}": (getattr(S.norm, m), [0.5, -1.5], {}, _P, {"scale": -1.0})
       for m in ["logpdf", "pdf", "cdf", "logcdf", "sf", "logsf"]},
    **{f"t.{m}": (getattr(S.t, m), [0.5, -1.5], {"df": 3.0}, _P, {"df": -1.0}) for m in ["logpdf", "pdf"]},
    **{f"beta.{m}": (getattr(S.beta, m), [0.3, 0.6, 1.5], {"a": 2.0, "b": 3.0}, {"loc": 0.1, "scale": 0.8},
                     {"a": -1.0}) for m in ["logpdf", "pdf"]},
    **{f"gamma.{m}": (getattr(S.gamma, m), [0.5, 2.0, -1.0], {"a": 2.5}, {"loc": 0.1, "scale": 1.5}, {"a": -1.0})
       for m in ["logpdf", "pdf"]},
    **{f"multivariate_normal.{m}": (getattr(S.multivariate_normal, m), [0.5, -1.5], {},
                                    {"mean": 0.25, "cov": 2.0}, {}) for m in ["logpdf", "pdf"]},
    **{f"dirichlet.{m}": (getattr(S.dirichlet, m), [0.2, 0.8], {"alpha": [1.5, 2.0]}, {}, {})
       for m in ["logpdf", "pdf"]},
    **{f"poisson.{m}": (getattr(S.poisson, m), [1.0, 3.0, 0.5], {"mu": 2.0}, {"loc": 1.0}, {"mu": -1.0})
       for m in ["logpmf", "pmf"]},
    **{f"bernoulli.{m}": (getattr(S.bernoulli, m), [1.0, 2.0, 0.5], {"p": 0.3}, {"loc": 1.0}, {"p": 2.0})
       for m in ["logpmf", "pmf"]},
}
FLOATS = [np.float32, np.float64]


def _dtype(v: Any) -> Any:
    return (v._data if type(v) is Tensor else np.asarray(v)).dtype


def _total(f: Any) -> Any:
    return lambda x, params: lp.sum(f(x, **params))


def test_the_dtype_cases_cover_every_method() -> None:
    methods = {f"{name}.{m}" for name in S.__all__ for m in dir(getattr(S, name)) if not m.startswith("_")}
    assert methods == set(DTYPE_CASES)


@pytest.mark.parametrize("zero_d", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_python_numbers_take_the_dtype_of_the_arrays(name: str, dtype: Any, zero_d: bool) -> None:
    # the defaults (loc=0.0, scale=1.0, cov=1.0) and Python-number parameters, as NumPy 2 applies them
    f, xs, required, optional, _ = DTYPE_CASES[name]
    if zero_d and name.startswith("dirichlet"):
        return  # (a point of the simplex has a component per parameter)
    x = np.asarray(xs[0] if zero_d else xs, dtype)
    numbers = {k: v if isinstance(v, float) else np.asarray(v, dtype) for k, v in required.items()}
    for params in [numbers, {**numbers, **optional}]:
        assert _dtype(f(x, **params)) == dtype
        assert _dtype(lp.grad(_total(f))(x, params)) == dtype
        # a Python number as x, with an array parameter, as NumPy 2 does
        arrays = {k: np.asarray(v, dtype) for k, v in params.items()}
        if arrays and not name.startswith("dirichlet"):
            assert _dtype(f(xs[0], **arrays)) == dtype


@pytest.mark.parametrize("invalid", [False, True])
@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_tensor_parameters_keep_their_dtype_in_values_and_gradients(name: str, dtype: Any, invalid: bool) -> None:
    f, xs, required, optional, bad = DTYPE_CASES[name]
    if invalid and not bad:
        return  # (multivariate_normal and dirichlet raise on invalid parameters)
    params = {k: Tensor(np.asarray(v, dtype)) for k, v in {**required, **optional, **(bad if invalid else {})}.items()}
    x = Tensor(np.asarray(xs, dtype))
    value = f(x, **params)
    assert _dtype(value) == dtype
    assert np.isnan(value._data).any() == invalid
    gx, gp = lp.grad(_total(f), argnums=(0, 1))(x, params)
    assert {_dtype(g) for g in [gx, *gp.values()]} == {np.dtype(dtype)}
    if invalid:
        assert all(np.isnan(g._data).all() for g in gp.values() if g.shape == ())


@pytest.mark.parametrize("name", sorted(DTYPE_CASES))
def test_float64_still_wins_and_numbers_alone_are_float64(name: str) -> None:
    f, xs, required, optional, _ = DTYPE_CASES[name]
    params = {**required, **optional}
    x32 = np.asarray(xs, np.float32)
    some = {k: np.asarray(v, np.float32) for k, v in params.items()}
    first = sorted(params)[0]
    wide = np.asarray(params[first], np.float64).reshape(-1)  # (with an axis: NumPy 1.x takes a 0-d array as a number)
    assert _dtype(f(x32, **{**some, first: wide})) == np.float64
    if not name.startswith("dirichlet"):
        assert _dtype(f(xs[0], **params)) == np.float64
        assert _dtype(f(np.asarray(xs, np.float64), **params)) == np.float64
