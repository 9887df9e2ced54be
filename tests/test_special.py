"""``lp.special``: values against ``scipy.special`` over wide ranges (SciPy is the reference here
only), gradients to second order (``gammaln`` to third) against finite differences, hand-computed
derivatives, float32, the errors, and the message a SciPy function gives on a Tensor."""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any

import numpy as np
import pytest
import scipy.special as sp
import scipy.stats as ss
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import Tensor
from leanpass.functional import special as FS
from leanpass.testing import check_grads

S = lp.special


def agree(got: Any, want: Any, rtol: float, atol: float = 0.0) -> None:
    """Equal to the reference within ``rtol`` (and ``atol`` near zeros); the same infinities and nans."""
    got, want = np.asarray(got._data if isinstance(got, Tensor) else got), np.asarray(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)), "nan in different places"
    fin = np.isfinite(want)
    assert np.array_equal(got[~fin & ~np.isnan(want)], want[~fin & ~np.isnan(want)]), "different infinities"
    err = np.abs(got[fin] - want[fin])
    bad = err > rtol * np.abs(want[fin]) + atol
    assert not bad.any(), f"worst: got {got[fin][bad][:3]} want {want[fin][bad][:3]}"


WIDE = np.concatenate([
    np.linspace(-30.3, 30.3, 4001),  # negative non-integers included
    np.geomspace(1e-300, 1e300, 1000),  # tiny and huge
    -np.geomspace(1e-8, 1e4, 500) + 0.37,
    [0.0, -1.0, -2.0, np.inf, -np.inf, np.nan],
])


def test_gammaln_values() -> None:
    with np.errstate(all="ignore"):
        agree(S.gammaln(WIDE), sp.gammaln(WIDE), rtol=1e-12, atol=1e-13)
    # near the zeros at 1 and 2, relative precision: there SciPy's own values lose digits (1e-10 at
    # 1 - 1e-9), so the reference is the Taylor series gammaln(1 + t) = -gamma t + sum (-1)**k zeta(k) t**k / k
    t = np.concatenate([np.geomspace(1e-12, 1e-3, 40), -np.geomspace(1e-12, 1e-3, 40)])
    t = (2 + t) - 2  # exactly representable beside both 1 and 2
    taylor = -np.euler_gamma * t + sum((-1) ** k * sp.zeta(k) / k * t ** k for k in range(2, 8))
    agree(S.gammaln(1 + t), taylor, rtol=1e-14)
    agree(S.gammaln(2 + t), taylor + np.log1p(t), rtol=1e-13)


@pytest.mark.parametrize("n", [0, 1, 2, 3, 6])
def test_polygamma_values(n: int) -> None:
    x = WIDE[np.abs(WIDE) < 1e15]  # (SciPy's polygamma loses precision beyond)
    with np.errstate(all="ignore"):
        want = sp.digamma(x) if n == 0 else sp.polygamma(n, x)
        got = S.digamma(x) if n == 0 else S.polygamma(n, x)
    agree(got, want, rtol=2e-12, atol=1e-12)


def test_erf_family_values() -> None:
    y = np.concatenate([np.linspace(-30, 30, 6001), np.geomspace(1e-300, 6, 300), [np.inf, -np.inf, np.nan]])
    # the reference for erf and erfc is the C library's (math.erf): SciPy's erfc errs by 2e-14 in the tail
    agree(S.erf(y), np.vectorize(math.erf)(y), rtol=2e-15, atol=1e-300)
    agree(S.erfc(y[y < 26.5]), np.vectorize(math.erfc)(y[y < 26.5]), rtol=1e-14)  # (beyond: subnormal numbers)
    agree(S.ndtr(y), sp.ndtr(y), rtol=1e-13)
    with np.errstate(divide="ignore"):
        far = np.concatenate([y, [-40.0, -1e3, -1e5]])
        agree(S.log_ndtr(far), sp.log_ndtr(far), rtol=1e-13, atol=1e-15)
    p = np.concatenate([np.linspace(-1, 1, 4001), 1 - np.geomspace(1e-16, 0.5, 200), -1 + np.geomspace(1e-16, 0.5, 200),
                        np.geomspace(1e-300, 1e-2, 50), [2.0, np.nan]])
    agree(S.erfinv(p), sp.erfinv(p), rtol=5e-15, atol=1e-300)
    q = np.linspace(0.001, 0.999, 999)
    agree(S.logit(q), sp.logit(q), rtol=1e-14, atol=1e-15)
    agree(S.expit(np.linspace(-700, 700, 101)), sp.expit(np.linspace(-700, 700, 101)), rtol=1e-13, atol=1e-300)


def test_two_input_values() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.uniform(0.01, 50, 500), rng.uniform(0.01, 50, 500)
    big = np.array([1e10, 1e5, 1e-5, 1e300, 3.5])
    small = np.array([1.0, 2.5, 1e5, 2.0, 4.5])
    a, b = np.concatenate([a, big]), np.concatenate([b, small])
    agree(S.betaln(a, b), sp.betaln(a, b), rtol=1e-11)
    x = np.array([0.0, 0.0, 0.0, 2.0, -1.5, 3.0])
    y = np.array([0.0, 2.0, np.nan, np.e, 4.0, 0.0])
    with np.errstate(all="ignore"):
        agree(S.xlogy(x, y), sp.xlogy(x, y), rtol=1e-15)
        agree(S.xlog1py(x, y - 1), sp.xlog1py(x, y - 1), rtol=1e-15)


def test_constants_are_what_they_say() -> None:
    assert np.allclose(FS._ZETA, sp.zeta(np.arange(2, 32)), rtol=1e-15, atol=0)
    b = [Fraction(1)]  # the Bernoulli numbers, exactly, by their recurrence (SciPy's err by 1e-12)
    for m in range(1, 23):
        b.append(Fraction(-sum(math.comb(m + 1, k) * b[k] for k in range(m)), m + 1))
    assert FS._B2K == [float(v) for v in b[2::2]]


def test_logsumexp_and_softmax_match_scipy() -> None:
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((3, 4)) * 300, rng.standard_normal((3, 4))
    for axis in (None, 0, 1, (0, 1)):
        for keepdims in (False, True):
            want = sp.logsumexp(a, axis=axis, keepdims=keepdims)
            agree(S.logsumexp(a, axis=axis, keepdims=keepdims), want, rtol=1e-14)
            out, sign = S.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
            want, wsign = sp.logsumexp(a, axis=axis, b=b, keepdims=keepdims, return_sign=True)
            agree(out, want, rtol=1e-13)
            assert np.array_equal(sign, wsign) and out.shape == np.shape(want)
    with np.errstate(invalid="ignore"):
        agree(S.logsumexp(np.zeros(2), b=np.array([1.0, -2.0])), np.nan, rtol=0)  # a negative sum, as SciPy
    agree(S.softmax(a[:, :2] / 300), sp.softmax(a[:, :2] / 300), rtol=1e-14)
    agree(S.softmax(a, axis=1), sp.softmax(a, axis=1), rtol=1e-13, atol=1e-300)
    agree(S.log_softmax(a, axis=0), sp.log_softmax(a, axis=0), rtol=1e-13)


# ----- gradients ------------------------------------------------------------------------------------------
POINTS = np.array([0.3, 1.7, 4.2, -0.6, 12.5, -3.3])


def test_gammaln_three_times_over() -> None:
    check_grads(S.gammaln, [POINTS], order=3)
    check_grads(S.digamma, [POINTS], order=2)
    check_grads(lambda x: S.polygamma(2, x), [POINTS], order=2)
    # the chain, by name: gammaln' = digamma, digamma' = polygamma(1), polygamma(1)' = polygamma(2)
    def d1f(x: Any) -> Any:  # elementwise, so the gradient of the sum is the derivative at each point
        return lp.grad(lambda y: S.gammaln(y).sum())(x)

    def d2f(x: Any) -> Any:
        return lp.grad(lambda y: d1f(y).sum())(x)

    d1, d2 = d1f(POINTS), d2f(POINTS)
    d3 = lp.grad(lambda y: d2f(y).sum())(POINTS)
    assert np.allclose(d1, sp.digamma(POINTS), rtol=1e-12)
    assert np.allclose(d2, sp.polygamma(1, POINTS), rtol=1e-12)
    assert np.allclose(d3, sp.polygamma(2, POINTS), rtol=1e-11)


@pytest.mark.parametrize("name", ["erf", "erfc", "erfinv", "ndtr", "log_ndtr", "logit", "expit"])
def test_unary_gradients_to_second_order(name: str) -> None:
    x = {"erfinv": np.array([-0.9, -0.3, 0.4, 0.95]), "logit": np.array([0.1, 0.5, 0.8]),
         "log_ndtr": np.array([-25.0, -3.0, -0.5, 0.4, 5.0])}.get(name, np.array([-2.5, -0.3, 0.4, 1.6, 3.0]))
    check_grads(getattr(S, name), [x], order=2)


def test_binary_and_reduction_gradients_to_second_order() -> None:
    rng = np.random.default_rng(2)
    check_grads(S.xlogy, [np.array([0.5, 2.0]), np.array([0.7, 3.0])], order=2)
    check_grads(S.xlog1py, [np.array([0.5, 2.0]), np.array([0.7, -0.3])], order=2)
    check_grads(S.betaln, [np.array([0.5, 2.0, 15.0]), np.array([0.7, 3.0, 2.5])], order=2)
    check_grads(lambda a, b: S.xlogy(a, b), [np.array([[0.5], [2.0]]), np.array([0.7, 3.0])], order=2)  # broadcast
    check_grads(lambda a, b: S.logsumexp(a, b=b), [rng.standard_normal(3), rng.uniform(0.5, 2, 3)], order=2)
    check_grads(lambda a, b: S.logsumexp(a, axis=1, b=b, return_sign=True)[0],
                [rng.standard_normal((2, 3)), rng.standard_normal((2, 3))], order=2)
    check_grads(S.softmax, [rng.standard_normal((2, 3))], order=2)
    check_grads(lambda a: S.log_softmax(a, axis=0), [rng.standard_normal((2, 3))], order=2)


@settings(max_examples=25, deadline=None)
@given(st.floats(-60, 60).filter(lambda v: abs(v - round(v)) > 1e-3), st.integers(0, 3))
def test_polygamma_derivatives_match_scipy_anywhere(x: float, n: int) -> None:
    got = lp.grad(lambda t: S.polygamma(n, t))(x)
    assert np.isclose(got, sp.polygamma(n + 1, x), rtol=1e-10, atol=1e-12)


def test_hand_computed_derivatives() -> None:
    assert np.isclose(lp.grad(S.gammaln)(1.0), -0.5772156649015329)  # -Euler's gamma
    assert np.isclose(lp.grad(S.digamma)(1.0), np.pi ** 2 / 6)
    assert np.isclose(lp.grad(S.erf)(0.0), 2 / np.sqrt(np.pi))
    assert np.isclose(lp.grad(S.erfinv)(0.0), np.sqrt(np.pi) / 2)
    assert np.isclose(lp.grad(S.logit)(0.5), 4.0)
    assert np.isclose(lp.grad(S.log_ndtr)(0.0), 2 * np.exp(-0.0) / np.sqrt(2 * np.pi))
    assert np.isclose(lp.grad(lambda x: S.xlogy(x, 2.0))(0.0), np.log(2.0))  # d/dx at x = 0 is log(y)
    assert lp.grad(lambda y: S.xlogy(0.0, y))(0.0) == 0.0  # and d/dy is 0 there, not nan
    assert np.isclose(lp.grad(lambda a: S.betaln(a, 1.0))(2.0), -0.5)  # betaln(a, 1) = -log(a)


def test_tails_have_finite_gradients() -> None:
    assert np.isclose(lp.grad(S.log_ndtr)(-40.0), -sp.log_ndtr(-40.0) * 0 + 40.0249, rtol=1e-4)  # ~ -x
    for f, x in ((S.erfc, 30.0), (S.erf, -30.0), (S.ndtr, -40.0), (S.gammaln, 1e200)):
        assert np.isfinite(lp.grad(f)(x))


def test_float32_stays_float32() -> None:
    x = np.array([0.3, 1.7, 4.2], dtype=np.float32)
    for name in ("gammaln", "digamma", "erf", "erfc", "erfinv", "ndtr", "log_ndtr", "logit", "expit"):
        arg = x / 5 if name in ("erfinv", "logit") else x
        out = getattr(S, name)(arg)
        assert out.dtype == np.float32, name
        assert np.allclose(out._data, getattr(sp, name)(arg.astype(np.float64)), rtol=1e-5), name
        assert lp.grad(lambda t, n=name: getattr(S, n)(t).sum())(arg).dtype == np.float32, name
    assert S.betaln(x, x).dtype == np.float32 and S.xlogy(x, x).dtype == np.float32
    assert np.allclose(S.betaln(x, x)._data, sp.betaln(x, x), rtol=1e-6)


def test_errors() -> None:
    with pytest.raises(TypeError, match="non-negative int"):
        S.polygamma(1.5, 2.0)
    with pytest.raises(TypeError, match="complex"):
        S.gammaln(np.array([1j]))


# ----- SciPy called on a Tensor ------------------------------------------------------------------------
def test_a_scipy_ufunc_on_a_tensor_names_the_leanpass_function() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"scipy\.special\.gammaln is not.*cannot see through.*lp\.special\.gammaln"):
        sp.gammaln(x)
    with pytest.raises(TypeError, match=r"scipy\.special\.erfinv .* use lp\.special\.erfinv"):
        sp.erfinv(x)
    with pytest.raises(TypeError, match=r"scipy\.special\.gamma is.*has no version of it"):
        sp.gamma(x)
    with pytest.raises(TypeError, match=r"^np\.spacing is not differentiable"):  # NumPy's own: unchanged
        np.spacing(x)


class _Probe:
    """An array-like whose conversion records what ``_scipy_hint`` says (as Tensor.__array__'s error path would)."""

    def __init__(self, values: np.ndarray) -> None:
        self.values = values
        self.hints: list[str | None] = []

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        from leanpass.special import _scipy_hint

        self.hints.append(_scipy_hint())
        return self.values


@pytest.mark.parametrize(("call", "ours"), [
    (lambda p: ss.norm.logpdf(p), "lp.stats.norm.logpdf"),
    (lambda p: ss.norm.cdf(p, 1.0, 2.0), "lp.stats.norm.cdf"),
    (lambda p: ss.gamma.logpdf(p, 2.0), "lp.stats.gamma.logpdf"),
    (lambda p: ss.multivariate_normal.logpdf(p, np.zeros(2), np.eye(2)), "lp.stats.multivariate_normal.logpdf"),
    (lambda p: ss.poisson.logpmf(p, 2.0), "lp.stats.poisson.logpmf"),
])
def test_the_scipy_hook_names_the_function_called(call: Any, ours: str) -> None:
    probe = _Probe(np.array([0.2, 0.8]))
    call(probe)
    assert probe.hints and probe.hints[0] is not None and probe.hints[0].endswith(f"use {ours}"), probe.hints


def test_the_scipy_hook_is_quiet_outside_scipy() -> None:
    probe = _Probe(np.array([0.2, 0.8]))
    np.asarray(probe)
    assert probe.hints == [None]
    probe = _Probe(np.array([0.2, 0.8]))
    ss.norm.ppf(probe)  # a SciPy function LeanPass does not have
    assert probe.hints[0] is not None and "has no version of it" in probe.hints[0]


def test_a_scipy_stats_function_on_a_differentiated_tensor_raises() -> None:
    # (scipy.stats converts with np.asarray, which refuses a Tensor being differentiated; the
    # message can name lp.stats.norm.logpdf through leanpass.special._scipy_hint, tested above)
    with pytest.raises(TypeError, match="scipy"):
        lp.grad(lambda m: ss.norm.logpdf(1.0, m, 2.0))(0.0)


# ----- i0e, i1e: the scaled modified Bessel functions of orders 0 and 1 --------------------------------
BESSEL_X = np.concatenate([np.linspace(-60.0, 60.0, 24001), np.geomspace(1e-300, 1e300, 601),
                           -np.geomspace(1e-300, 1e300, 601), [0.0, -0.0, 5e-324, np.inf, -np.inf, np.nan]])


@pytest.mark.parametrize("name", ["i0e", "i1e"])
def test_scaled_bessel_values_over_the_real_line(name: str) -> None:
    ours, theirs = getattr(S, name), getattr(sp, name)
    agree(ours(BESSEL_X), theirs(BESSEL_X), rtol=5e-15, atol=1e-323)  # (a subnormal rounds either way)
    x32 = BESSEL_X[np.abs(BESSEL_X) < 3e38].astype(np.float32)
    got = ours(x32)
    assert got.dtype == np.float32
    agree(got, theirs(x32.astype(np.float64)).astype(np.float32), rtol=1.2e-7, atol=2e-45)  # rounded float32
    same = np.asarray(ours(Tensor(BESSEL_X))._data)
    assert np.array_equal(np.asarray(getattr(lp.functional, name)(BESSEL_X)[0]), same, equal_nan=True)


def test_scaled_bessel_gradients() -> None:
    x = np.array([-40.0, -21.0, -3.0, -0.4, 1e-9, 0.3, 2.0, 19.9, 20.1, 35.0])
    # by hand, from SciPy's values: i0e' = i1e - sign(x) i0e, i1e' = i0e - i1e (sign(x) + 1/x)
    agree(lp.grad(lambda t: S.i0e(t).sum())(x), sp.i1e(x) - np.sign(x) * sp.i0e(x), rtol=1e-13)
    agree(lp.grad(lambda t: S.i1e(t).sum())(x), sp.i0e(x) - sp.i1e(x) * (np.sign(x) + 1 / x), rtol=1e-7)
    away = x[x != 1e-9]  # (both have a kink at 0 in some derivative: i0e in the first, i1e in the second)
    check_grads(S.i0e, [away], order=2)
    check_grads(S.i1e, [away], order=2)
    check_grads(S.i1e, [np.array([1e-9, -1e-9])], order=1)
    # at 0: i0e has a kink (slopes +1 and -1), whose subgradient 0 is taken; i1e's slope is 1/2
    assert lp.grad(S.i0e)(0.0) == 0.0 and lp.grad(S.i1e)(0.0) == 0.5
    eps = 1e-7
    assert abs((sp.i1e(eps) - sp.i1e(-eps)) / (2 * eps) - 0.5) < 1e-6
    _, t = lp.jvp(S.i1e, (x,), (np.ones_like(x),))
    agree(t, lp.grad(lambda v: S.i1e(v).sum())(x), rtol=1e-15)
    g32 = lp.grad(lambda t: S.i1e(t).sum())(x.astype(np.float32))
    assert g32.dtype == np.float32 and np.all(np.isfinite(g32))
