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
    agree(S.ndtr(y), ndtr_ref(y), rtol=3e-14, atol=1e-300)
    with np.errstate(divide="ignore"):
        far = np.concatenate([y, [-40.0, -1e3, -1e5]])
        agree(S.log_ndtr(far), log_ndtr_ref(far), rtol=3e-14, atol=1e-300)
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
    assert np.allclose(FS._ZETA_ALL[30:], sp.zeta(np.arange(32.0, 57.0)), rtol=4e-16, atol=0)
    # digamma's Taylor series at its zero x0: psi_k(x0) / k!
    hi, lo = FS._PSI_ROOT
    assert abs(lo + sp.digamma(hi) / sp.polygamma(1, hi)) < 1e-31  # (one Newton step from hi)
    want = [sp.polygamma(k, hi) / math.factorial(k) for k in range(1, len(FS._PSI_AT_ROOT))]
    assert np.allclose(FS._PSI_AT_ROOT[1:], want, rtol=1e-13, atol=0) and FS._PSI_AT_ROOT[0] == 0


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
        from leanpass.scipy.special import _scipy_hint

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
    # message can name lp.stats.norm.logpdf through leanpass.scipy.special._scipy_hint, tested above)
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


# ----- the whole domain: poles, negative integers, +-0, +-inf, nan, subnormal and huge values ---------------
# SciPy is the reference wherever its own values are right. Where they are not, the reference is
# built from SciPy's values elsewhere by an identity, and the test says why:
# - gammaln(x) for |x| below 1e-300 is -log|x| to double precision; SciPy gives inf (its Gamma overflows).
# - digamma(x) within 1e-3 of a negative integer loses digits in SciPy (38% at -1 + 1e-16, 4e-12 at
#   -5 + 1e-5), and polygamma(n, x) of even n near its zeros on the negative axis (1e-9 at -999.5),
#   and SciPy's polygamma takes seconds beyond x = -1e4: for x < 0 the reference is the reflection
#   formula psi_n(x) = (-1)**n psi_n(1 - x) - pi**(n+1) cot^(n)(pi x) with SciPy's psi_n(1 - x),
#   checked to the precision its two terms allow.
# - betaln where SciPy's Gamma over- or underflows (a negative argument beyond -171, or a subnormal one): the reference
#   is gammaln(a) + gammaln(b) - gammaln(a + b), checked to the precision its terms allow.
EDGES = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, -3.0, 0.5, -0.5, 1.5, -1.5, 1e-300, -1e-300, 5e-324, -5e-324,
                  2.2e-308, -2.2e-308, 1e-30, -1e-30, 1e-8, -1e-8, 1e10, -1e10, 2.0**52, -(2.0**52), 2.0**52 + 1,
                  -(2.0**52) - 1, -(2.0**52) + 0.5, 1e17, -1e17, 1e300, -1e300, 1e308, -1e308, 1.7976931348623157e308,
                  -1.7976931348623157e308, np.inf, -np.inf, np.nan, 171.6, 172.0, -171.5, -170.5, 26.5, 27.5, 40.0,
                  -40.0, 1 - 2.0**-53, 1 + 2.0**-52, 2 - 2.0**-52, -1 + 2.0**-53, -1 - 2.0**-52, 0.9999999,
                  -0.9999999, 9.999, 10.0, 10.001, -9.5, -100.5, -1000.5, -2.5e15 - 0.5, 1e-16, -1e-16])


def _pole(x: Any) -> Any:
    return (x <= 0) & (np.floor(x) == x)


def ndtr_ref(x: Any) -> Any:
    """SciPy's ndtr, and in the left tail (where it errs by 1e-13: x / sqrt(2) is rounded before its square
    is exponentiated) 0.5 erfcx(-x / sqrt(2)) exp(-x**2 / 2), the exponential split exactly."""
    with np.errstate(all="ignore"):
        ax = np.minimum(np.abs(x), 40.0)
        hi = np.round(ax * 16) / 16
        tail = 0.5 * sp.erfcx(ax / np.sqrt(2)) * np.exp(-hi * hi / 2) * np.exp(-(ax - hi) * (ax + hi) / 2)
        return np.where(x < -3, tail, sp.ndtr(x))


def log_ndtr_ref(x: Any) -> Any:
    """SciPy's log_ndtr, and in the right tail (where it errs as its ndtr does) log1p(-ndtr(-x))."""
    with np.errstate(all="ignore"):
        return np.where(x > 3, np.log1p(-ndtr_ref(-x)), sp.log_ndtr(x))


def gammaln_ref(x: Any) -> Any:
    with np.errstate(all="ignore"):
        return np.where((np.abs(x) < 1e-300) & (x != 0), -np.log(np.abs(x)), sp.gammaln(x))


_COT = {0: lambda c: c, 1: lambda c: -(1 + c * c), 2: lambda c: 2 * c * (1 + c * c),
        3: lambda c: -2 * (1 + c * c) * (1 + 3 * c * c)}  # d^n/dy^n cot(y) in terms of c = cot(y)


def psi_ref(n: int, x: Any) -> tuple[Any, Any]:
    """(reference, its scale: what an error is relative to) for polygamma(n, x); x float64."""
    x = np.asarray(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        safe = np.where((x > 0) & (x < np.inf), x, 1.0)  # SciPy only on the positive side (fast, right)
        direct = sp.digamma(safe) if n == 0 else sp.polygamma(n, safe)
        other = sp.digamma(1 - x) if n == 0 else sp.polygamma(n, np.where(x < 0, 1 - x, 1.0))
        r = x - np.round(x)  # exact
        c = np.where(np.abs(r) > 0.25, np.sign(r) * np.tan(np.pi * (0.5 - np.abs(r))), 1 / np.tan(np.pi * r))  # cot
        cot = np.pi ** (n + 1) * _COT[n](c)
        cot = np.where(np.abs(r) < 1e-100, (-1.0) ** n * math.factorial(n) / r ** (n + 1), cot)
        reflected = (-1.0) ** n * other - cot
        ref = np.where(x > 0, direct, reflected)
        scale = np.where(x > 0, np.abs(direct), np.abs(other) + np.abs(cot))
        if n == 0:  # SciPy's conventions at the poles: -inf at 0.0, inf at -0.0, nan at the negative integers
            ref = np.where(x == 0, np.where(np.signbit(x), np.inf, -np.inf), np.where(_pole(x), np.nan, ref))
            ref = np.where(x == np.inf, np.inf, ref)
        else:  # inf (odd n) or -inf (even n) at 0 and the negative integers (and -inf); 0 at inf
            ref = np.where(_pole(x), np.inf if n % 2 else -np.inf, np.where(x == np.inf, 0.0, ref))
        return np.where(np.isnan(x), np.nan, ref), scale


def agree_scaled(got: Any, want: Any, scale: Any, rtol: float) -> None:
    """As ``agree``, with the error measured against ``scale`` (the size of what the value is computed from)."""
    got, want = np.asarray(got._data if isinstance(got, Tensor) else got), np.asarray(want)
    assert np.array_equal(np.isnan(got), np.isnan(want)), ("nan in different places", got, want)
    fin = np.isfinite(want)
    inf = ~fin & ~np.isnan(want)
    assert np.array_equal(got[inf], want[inf]), ("different infinities", got, want)
    bad = np.abs(got[fin] - want[fin]) > rtol * np.asarray(scale)[fin] + 1e-321  # (subnormal results: 20 ulps)
    assert not bad.any(), f"got {got[fin][bad][:3]} want {want[fin][bad][:3]}"


_FLOATS64 = st.one_of(st.floats(width=64), st.sampled_from(list(EDGES)), st.floats(-60, 60),
                      st.builds(lambda k, d: k + d, st.integers(-10**6, 3), st.floats(-1e-3, 1e-3)))


@settings(max_examples=300, deadline=None)
@given(x=st.lists(_FLOATS64, min_size=1, max_size=8))
def test_gamma_family_over_all_floats(x: list[float]) -> None:
    a = np.array(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        want = gammaln_ref(a)
        # near its zeros gammaln is a difference: at 1 and 2 (SciPy errs by 1e-16 there) and, for x < 0,
        # of log(pi / |sin(pi x)|) and gammaln(1 - x)
        near = (np.abs(a - 1) < 0.25) | (np.abs(a - 2) < 0.25)
        terms = np.abs(np.log(np.pi / np.abs(np.sin(np.pi * (a - np.round(a)))))) + np.abs(gammaln_ref(1 - a))
        scale = np.where(near, np.maximum(np.abs(want), 0.1), np.where(a < 0, terms, np.abs(want)))
        agree_scaled(S.gammaln(a), want, scale, rtol=4e-15)
        for n in (0, 1, 2, 3):
            got = S.digamma(a) if n == 0 else S.polygamma(n, a)
            agree_scaled(got, *psi_ref(n, a), rtol=4e-14)


@settings(max_examples=300, deadline=None)
@given(x=st.lists(_FLOATS64, min_size=1, max_size=8))
def test_erf_family_and_logit_over_all_floats(x: list[float]) -> None:
    a = np.array(x, dtype=np.float64)
    with np.errstate(all="ignore"):
        agree(S.erf(a), np.vectorize(math.erf, otypes=[float])(a), rtol=4e-15, atol=1e-300)
        agree(S.erfc(a), np.vectorize(math.erfc, otypes=[float])(a), rtol=2e-14, atol=1e-300)  # (SciPy errs 5e-14)
        agree(S.ndtr(a), ndtr_ref(a), rtol=3e-14, atol=1e-300)
        agree(S.log_ndtr(a), log_ndtr_ref(a), rtol=3e-14, atol=1e-300)
        agree(S.expit(a), sp.expit(a), rtol=5e-15, atol=1e-300)
        p = np.concatenate([a, np.tanh(a), 1 / (1 + np.exp(-np.clip(a, -700, 700)))])  # and inside [-1, 1], (0, 1)
        agree(S.erfinv(p), sp.erfinv(p), rtol=5e-15, atol=1e-300)
        agree(S.logit(p), sp.logit(p), rtol=5e-15, atol=1e-300)


def test_float32_gives_the_float64_values_rounded() -> None:
    rng = np.random.default_rng(5)
    with np.errstate(all="ignore"):
        x = np.concatenate([EDGES, rng.standard_normal(200) * 30, np.exp(rng.uniform(-80, 80, 200))]).astype(np.float32)
        x = np.concatenate([x, -x])
        for name in ("gammaln", "digamma", "erfinv", "ndtr", "log_ndtr", "logit"):
            arg = np.tanh(x) if name == "erfinv" else 1 / (1 + np.exp(-x)) if name == "logit" else x
            got = getattr(S, name)(arg)
            assert got.dtype == np.float32, name
            np.testing.assert_array_equal(got._data, getattr(S, name)(arg.astype(np.float64))._data.astype(np.float32))
        for n in (1, 2):
            wide = S.polygamma(n, x.astype(np.float64))._data.astype(np.float32)
            np.testing.assert_array_equal(S.polygamma(n, x)._data, wide)
        for name, ulps in (("erf", 3), ("erfc", 2)):  # (computed in float32: within a few float32 ulps)
            got = getattr(S, name)(x)
            assert got.dtype == np.float32, name
            wide = getattr(S, name)(x.astype(np.float64))._data.astype(np.float32)
            bound = ulps * np.spacing(np.abs(wide)).astype(np.float64)
            same = (got._data == wide) | (np.isnan(got._data) & np.isnan(wide))
            assert np.all(same | (np.abs(got._data.astype(np.float64) - wide) <= bound)), name
        # (lp.sigmoid, computed in float32 as exp(-logaddexp(0, -x)): within 10 float32 ulps)
        agree(S.expit(x), sp.expit(x.astype(np.float64)).astype(np.float32), rtol=1.2e-6, atol=1e-37)
        a, b = x[:, None], x[None, :60]
        assert S.betaln(a, b).dtype == np.float32
        np.testing.assert_array_equal(S.betaln(a, b)._data,
                                      S.betaln(a.astype(np.float64), b.astype(np.float64))._data.astype(np.float32))


def betaln_ref(a: Any, b: Any) -> tuple[Any, Any]:
    with np.errstate(all="ignore"):
        ga, gb, gab = gammaln_ref(a), gammaln_ref(b), gammaln_ref(a + b)
        big, small = np.maximum(a, b), np.minimum(np.abs(a), np.abs(b))
        asymptotic = (big > 1e6 * small) & (big > 1e6)  # (where SciPy uses its asymptotic series)
        moderate = (np.abs(a) < 171) & (np.abs(b) < 171) & (np.abs(a + b) < 171)
        plain = (moderate | (a > 0) & (b > 0) | asymptotic) & (small > 1e-300)
        special = _pole(a) | _pole(b) | np.isinf(a) | np.isinf(b)
        scipy = sp.betaln(a, b)
        plain = plain & ~np.isnan(scipy)  # (SciPy: nan at betaln(1e300, 1e77), whose value is -5.96e79)
        plain = plain & (np.isfinite(scipy) | special)  # (SciPy: -inf at betaln(-170.75, 1), whose value is -5.14)
        ref = np.where(plain | special, scipy, ga + gb - gab)
        # +inf with a finite b: B -> 0 for b > 0 (SciPy: nan for a subnormal b), inf for b < 0
        for u, v in ((a, b), (b, a)):
            ref = np.where((u == np.inf) & np.isfinite(v) & ~_pole(v), np.where(v > 0, -np.inf, np.inf), ref)
        # (the size of what the value is computed from; at a pole -n, lgamma(1 + n): SciPy's limit of a ratio of
        # poles, betaln(172, -35175), is off by 7.8e-11 from the exact -1088.37814374566870)
        terms = sum(np.abs(gammaln_ref(np.where(_pole(u), 1 - u, u))) for u in (a, b, a + b))
        scale = np.where(plain | special, np.maximum(np.abs(ref), np.where(np.isfinite(terms), terms, 0)), terms)
        scale = np.maximum(scale, 1e-2 * (a > 0) * (b > 0))  # (near betaln's zeros SciPy errs by 2e-16 absolute)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, ref), scale  # (SciPy: betaln(0, nan) = inf)


_ARGS = st.one_of(st.sampled_from([v for v in EDGES if not abs(v) > 1e15]), st.floats(-200, 200),
                  st.floats(-1e15, 1e15), st.sampled_from([np.inf, -np.inf, np.nan]), st.integers(-10, 10).map(float))


@settings(max_examples=300, deadline=None)
@given(pairs=st.lists(st.tuples(_ARGS, _ARGS), min_size=1, max_size=8))
def test_betaln_over_all_floats(pairs: list[tuple[float, float]]) -> None:
    a, b = np.array(pairs, dtype=np.float64).T
    with np.errstate(all="ignore"):
        agree_scaled(S.betaln(a, b), *betaln_ref(a, b), rtol=5e-14)
        agree_scaled(S.betaln(b, a), *betaln_ref(a, b), rtol=5e-14)  # symmetric


def test_named_edge_values() -> None:
    with np.errstate(all="ignore"):
        assert S.gammaln(-1e308).item() == np.inf  # (every float beyond 2**52 is a pole; it gave nan)
        assert S.gammaln(-1e-300).item() == -math.log(1e-300)  # (it gave inf)
        assert S.digamma(-0.0).item() == np.inf and S.digamma(0.0).item() == -np.inf
        assert np.isnan(S.polygamma(2, np.nan).item()) and np.isnan(S.digamma(-np.inf).item())
        assert S.polygamma(1, -np.inf).item() == np.inf and S.polygamma(2, -3.0).item() == -np.inf
        assert np.isclose(S.digamma(-1e-300).item(), 1e300, rtol=1e-15, atol=0)  # (it gave nan)
        assert np.isclose(S.polygamma(1, -1e-30).item(), 1e60, rtol=1e-15, atol=0)


def test_betaln_at_its_poles_and_infinities() -> None:
    # (a, b) -> SciPy's value, by hand: a ratio of poles has a limit, B(-3, 2) = 1 / ((-3)(-2)) = 1/6
    cases = {(-3.0, 2.0): math.log(1 / 6), (2.0, -3.0): math.log(1 / 6), (-3.0, 2.5): np.inf, (-1.0, 2.0): np.inf,
             (0.0, 0.0): np.inf, (-2.0, -3.0): np.inf, (np.inf, 1.0): -np.inf, (np.inf, -0.5): np.inf,
             (np.inf, np.inf): np.nan, (-np.inf, 1.0): np.inf, (-0.5, -0.5): -np.inf,  # Gamma(-1) in the denominator
             (1.0, -171.5): -math.log(171.5), (5e-324, 1.0): -math.log(5e-324),  # (SciPy: -inf, inf: overflow)
             (1e300, 1e-300): -math.log(1e-300), (1.0, 1e308): -math.log(1e308),
             (1e308, 2.0**256): math.lgamma(2.0**256) - 2.0**256 * math.log(1e308)}  # (SciPy: nan)
    for (a, b), want in cases.items():
        with np.errstate(all="ignore"):
            agree(S.betaln(a, b), want, rtol=4e-14)  # (from gammaln values of 700: 1e-14)


def test_xlogy_xlog1py_over_special_values() -> None:
    v = np.array([0.0, -0.0, 1.0, -1.0, 2.0, -2.0, 0.5, np.e, 1e-300, 5e-324, 1e300, np.inf, -np.inf, np.nan])
    x, y = v[:, None] * np.ones(len(v)), v[None, :] * np.ones((len(v), 1))
    with np.errstate(all="ignore"):
        agree(S.xlogy(x, y), sp.xlogy(x, y), rtol=1e-15)
        agree(S.xlog1py(x, y), sp.xlog1py(x, y), rtol=1e-15)


def lse_ref(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(log |sum b exp(a)|, its sign), from the definition: a term of weight 0 adds nothing, even with
    a = inf or nan (SciPy's rule); nan in a term that counts gives nan; +inf terms decide alone (inf of their
    weights' sign, nan for both signs); no term at all, or a sum of exactly 0, is log(0) = -inf with sign 0."""
    live = b != 0
    a, b = a[live], b[live]
    if np.isnan(a).any() or np.isnan(b).any():
        return np.nan, np.nan
    if (a == np.inf).any():
        signs = set(np.sign(b[a == np.inf]))
        return (np.inf, signs.pop()) if len(signs) == 1 else (np.nan, np.nan)
    if not (a > -np.inf).any():
        return -np.inf, 0.0
    m = a.max()
    total = float(np.sum(b * np.exp(a - m)))
    return (np.log(abs(total)) + m if total else -np.inf), float(np.sign(total))


def test_logsumexp_and_softmax_over_special_values() -> None:
    vals = [np.inf, -np.inf, np.nan, 1.0, -1e308, 1e308, 0.0, -3.5]
    weights = [1.0, 0.0, -1.0, 2.5]
    import itertools

    for n in (1, 2, 3):
        for combo in itertools.product(vals, repeat=n):
            a = np.array(combo)
            with np.errstate(all="ignore"):
                agree(S.logsumexp(a), sp.logsumexp(a), rtol=1e-14)
                if np.inf not in combo:  # (+inf: LeanPass gives the limit, lp.softmax's; SciPy nan from inf - inf)
                    agree(S.softmax(a), sp.softmax(a), rtol=1e-14)
                    agree(S.log_softmax(a), sp.log_softmax(a), rtol=1e-14)
                for wcombo in itertools.product(weights, repeat=n):
                    b = np.array(wcombo)
                    got, sign = S.logsumexp(a, b=b, return_sign=True)
                    want, wsign = lse_ref(a, b)
                    agree(got, want, rtol=1e-14)
                    assert np.array_equal(sign, wsign, equal_nan=True), (combo, wcombo, sign, wsign)
                    agree(S.logsumexp(a, b=b), want if wsign >= 0 else np.nan, rtol=1e-14)  # (a negative sum: nan)
                    if np.isfinite(a).all() and wsign != 0:  # (SciPy's own shift by inf, and its 0 / 0, give nan)
                        scipy, scipy_sign = sp.logsumexp(a, b=b, return_sign=True)
                        agree(got, scipy, rtol=1e-14, atol=1e-15)  # (near log(1) = 0: SciPy's rounding)
                        assert scipy_sign == wsign
    # a weight of 0 keeps its gradient: d/db_i log(sum b exp(a)) = exp(a_i) / sum
    g = lp.grad(lambda b: S.logsumexp(np.array([0.0, 5.0]), b=b))(np.array([1.0, 0.0]))
    assert np.allclose(g, [1.0, np.exp(5.0)], rtol=1e-15)
