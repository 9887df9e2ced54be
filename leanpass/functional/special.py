"""Special functions (what ``scipy.special`` offers), written in NumPy. Each op returns ``(ans, vjp)``.

The elementwise ones are declared in one table, ``SPECIAL``: a name, the values (plain NumPy on
arrays), and the derivative ``d(x, ans, *params)`` written with these same ops, so that each
derivative is differentiable again: ``gammaln' = digamma``, ``digamma' = polygamma(1, .)``,
``polygamma(n, .)' = polygamma(n + 1, .)``, ``erfinv' = sqrt(pi) / 2 exp(erfinv**2)`` and so on, to any
order. ``vjp(g) = (g * d,)``, and the forward-mode rule is ``t * d`` (in its record, as
are those of ``xlogy``, ``xlog1py`` and ``betaln``, beside their VJPs). (``erf`` and ``erfc`` themselves
are ops of ``elementwise.py``; the private ones here serve ``ndtr``, ``log_ndtr`` and ``erfinv``.)

How the values are computed (float64 precision over the whole real line, checked against SciPy):

- ``gammaln``, ``digamma``, ``polygamma``: the asymptotic (Stirling) series at ``x >= 10 + n``,
  reached by the recurrence ``x -> x + 1`` a fixed number of times, and the reflection formula
  for ``x < 0``; ``gammaln`` near its zeros 1 and 2 by its Taylor series (``zeta`` values).
- ``erf`` / ``erfc`` (``ndtr``, ``log_ndtr``): the fitted approximations of ``_erf.py``, with
  ``exp(-x**2)`` split so that the tail keeps its relative precision down to the subnormals.
- ``erfinv``: Halley's iteration on ``erf`` (on ``erfc`` in the tails) from a rough start.

No value decides how many NumPy calls run (fixed series lengths, branches by ``np.where``), so
the ops work under ``jit`` and ``vmap`` too.

>>> ans, vjp = gammaln(np.array([0.5, 4.0]))
>>> ans, vjp(np.ones(2))[0]  # log(sqrt(pi)), log(6); digamma at 0.5 and 4
(array([0.57236494, 1.79175947]), array([-1.96351003,  1.25611767]))
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from ._broadcast import unbroadcast
from ._erf import erf_values, erfc_values, log_erfc_tail
from ._lift import in_dtype_of, weak
from ._registry import op

_SQRT_PI = math.sqrt(math.pi)
_HALF_LOG_2PI = 0.5 * math.log(2 * math.pi)
_EULER = 0.5772156649015329
# zeta(k) for k = 2, ..., 31: the Taylor coefficients of gammaln(1 + z) (tests check them against SciPy)
_ZETA = (1.6449340668482264, 1.2020569031595942, 1.0823232337111381, 1.03692775514337,
         1.0173430619844492, 1.008349277381923, 1.0040773561979444, 1.0020083928260821,
         1.000994575127818, 1.0004941886041194, 1.000246086553308, 1.0001227133475785,
         1.0000612481350588, 1.000030588236307, 1.0000152822594086, 1.0000076371976379,
         1.000003817293265, 1.0000019082127165, 1.0000009539620338, 1.0000004769329869,
         1.0000002384505027, 1.000000119219926, 1.000000059608189, 1.0000000298035034,
         1.0000000149015549, 1.0000000074507118, 1.000000003725334, 1.0000000018626598,
         1.0000000009313275, 1.0000000004656628)


# The Bernoulli numbers B_2, B_4, ..., B_22 (the tests check them against SciPy)
_B2K = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510, 43867 / 798, -174611 / 330,
        854513 / 138]


def _float(x: Any) -> Any:
    """Integer or boolean input as float64 (the special functions are real-valued)."""
    kind = getattr(x, "dtype", np.dtype(type(x))).kind if not isinstance(x, (int, float)) else "i"
    return x * 1.0 if kind in "biu" or isinstance(x, int) else x


def _horner(coefs: list[float], w: Any) -> Any:
    """``coefs[0] + coefs[1] w + coefs[2] w**2 + ...``."""
    acc = coefs[-1] + 0 * w
    for c in reversed(coefs[:-1]):
        acc = acc * w + c
    return acc


# ----- gammaln --------------------------------------------------------------------------------------
_SHIFT = 10  # the digamma recurrence takes x below this up to at least this
_STIRLING_FROM = 13.0  # gammaln: the asymptotic series from here (below: the Taylor series and the recurrence)
_STIRLING = [b / (2 * k * (2 * k - 1)) for k, b in enumerate(_B2K[:9], start=1)]
# gammaln(1 + z) / z = -gamma + sum (-1)**k zeta(k) z**(k-1) / k, to 56 terms (enough at |z| = 1/2);
# beyond zeta(31), zeta(k) = 1 + 2**-k + 3**-k + 4**-k to double precision
_ZETA_ALL = _ZETA + tuple(1 + 2.0 ** -k + 3.0 ** -k + 4.0 ** -k for k in range(32, 57))
_LGAMMA1 = [-_EULER] + [(-1) ** k * z / k for k, z in enumerate(_ZETA_ALL, start=2)]


def _gammaln_values(x: Any) -> Any:
    x = _float(x)
    neg = x < 0
    y = np.where(neg, 1 - x, x)  # >= 0
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        # below 13: gammaln(1 + t) by its Taylor series at |t| <= 1/2, taken there by the recurrence
        # gammaln(y) = gammaln(y + 1) - log(y) (y < 1/2), or down by gammaln(y) = gammaln(y - 1) + log(y - 1)
        # (y >= 5/2, to [3/2, 5/2)): sums of terms of one sign, so no cancellation near the zeros at 1 and 2
        low, one = y < 0.5, (y >= 0.5) & (y < 1.5)
        steps = np.where(y < _STIRLING_FROM, np.maximum(np.floor(y - 1.5), 0.0), 0.0)
        t = np.where(low, y, np.where(one, y - 1, np.where(y < _STIRLING_FROM, y - 2 - steps, 0.0)))
        series = t * _horner(_LGAMMA1, t)  # gammaln(1 + t)
        prod: Any = 1.0
        for k in range(1, int(_STIRLING_FROM - 1)):  # (y - 1) (y - 2) ... (y - steps)
            prod = prod * np.where(k <= steps, y - k, 1.0)
        taylor = np.where(low, series - np.log(y), np.where(one, series, series + np.log1p(t) + np.log(prod)))
        zs = np.where(y >= _STIRLING_FROM, y, _STIRLING_FROM)
        stirling = (y - 0.5) * np.log(y) - y + _HALF_LOG_2PI + _horner(_STIRLING, 1 / (zs * zs)) / zs
        pos = np.where(y < _STIRLING_FROM, taylor, stirling)
        pos = np.where(y == np.inf, np.inf, pos) + 0.0  # (+ 0.0: no -0.0 at 1 and 2)
        # reflection: gammaln(x) = log(pi / |sin(pi x)|) - gammaln(1 - x), with sin reduced exactly
        r = np.abs(_offset(np.where(neg, x, 0.5)))
        log_sin = np.where(r < 1e-100, math.log(math.pi) + np.log(r), np.log(np.sin(math.pi * r)))
        reflected = np.where(r == 0, np.inf, math.log(math.pi) - log_sin - pos)  # (the poles: every float < -2**52)
        return np.where(neg, np.where(x == -np.inf, -np.inf, reflected), pos)  # (-inf at -inf, as SciPy)


def _offset(x: Any) -> Any:
    """``x - round(x)``, exactly (no rounding: it is representable): where ``x`` is in a period of
    ``sin(pi x)`` and ``cot(pi x)``, without the loss of ``1 - (x - floor(x))`` near the poles."""
    return x - np.round(x)


# ----- digamma and polygamma ------------------------------------------------------------------------
def _cot_derivative_poly(n: int) -> list[int]:
    """Coefficients (low to high) of P_n with d^n/dy^n cot(y) = P_n(cot(y))."""
    p = [0, 1]  # cot
    for _ in range(n):
        dp = [k * p[k] for k in range(1, len(p))] or [0]
        # times -(1 + c**2)
        out = [0] * (len(dp) + 2)
        for k, c in enumerate(dp):
            out[k] -= c
            out[k + 2] -= c
        p = out
    return p


# digamma near its positive zero x0: the Taylor series sum psi_k(x0) / k! (x - x0)**k (|x - x0| <= 0.15,
# where the recurrence would cancel to nothing), with x0 in two parts so that x - x0 is exact
_PSI_ROOT = (1.4616321449683622, 9.549995429965697e-17)
_PSI_AT_ROOT = [0.0, 0.9676722454476212, -0.4427631689835921, 0.258499760955651, -0.16394270544240652,
                0.10782405069126237, -0.07219956125645471, 0.04880428816414311, -0.03316112647484736,
                0.022597648232218104, -0.01542476590494896, 0.010538791616612175, -0.007204534386356869,
                0.004926781395729853, -0.003369801655439328, 0.002305126326734928, -0.0015769367714301972]


def _polygamma_values(x: Any, n: int) -> Any:
    x = _float(x)
    shift = _SHIFT + n
    neg = x < 0
    y = np.where(neg, 1 - x, x)
    small = y < shift
    z = np.where(small, y + shift, y)
    sign = -1.0 if n % 2 == 0 else 1.0  # (-1) ** (n + 1)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        acc: Any = 0.0
        for k in range(shift):
            acc = acc + np.where(small, 1.0 / (y + k) ** (n + 1), 0.0)
        zs = np.where(np.isfinite(z), z, 1e300)
        w = 1 / (zs * zs)
        if n == 0:
            series = _horner([b / (2 * k) for k, b in enumerate(_B2K, start=1)], w) * w
            big = np.log(z) - 0.5 / zs - series
        else:
            coefs = [b * math.factorial(2 * k + n - 1) / math.factorial(2 * k)
                     for k, b in enumerate(_B2K, start=1)]
            inv = (1 / zs) ** n  # (not 1 / zs ** n: zs ** n overflows where the result is still a number)
            series = _horner(coefs, w) * w * inv
            big = sign * (math.factorial(n - 1) * inv + math.factorial(n) / 2 * inv / zs + series)
            big = np.where(z == np.inf, 0.0, big)
        pos = big + sign * math.factorial(n) * acc
        if n == 0:
            d = (y - _PSI_ROOT[0]) - _PSI_ROOT[1]
            root = np.abs(d) <= 0.15
            pos = np.where(root, _horner(_PSI_AT_ROOT, np.where(root, d, 0.0)), pos)
        # reflection: psi_n(x) = (-1)**n psi_n(1 - x) - pi d^n/dx^n cot(pi x), at r = x - round(x)
        # (the period); within 1e-100 of a pole, d^n/dx^n pi cot(pi x) is (-1)**n n! / r**(n + 1)
        r = _offset(np.where(neg, x, 0.5))
        half = np.abs(r) > 0.25  # (there cot(pi r) = tan(pi (1/2 - |r|)), exactly 0 at r = 1/2)
        c = np.where(half, np.sign(r) * np.tan(math.pi * (0.5 - np.abs(r))), 1 / np.tan(math.pi * r))  # cot(pi x)
        dcot = math.pi ** (n + 1) * _horner([float(v) for v in _cot_derivative_poly(n)], c)
        near = np.abs(r) < 1e-100
        dcot = np.where(near, (-1.0) ** n * math.factorial(n) * (1 / np.where(near, r, 1.0)) ** (n + 1), dcot)
        reflected = (-1.0) ** n * pos - dcot
        pole = (r == 0) | (x == -np.inf)
        if n == 0:  # digamma: nan at the negative integers and -inf; -inf at 0.0, inf at -0.0 (as SciPy)
            out = np.where(neg, np.where(pole, np.nan, reflected), pos)
            out = np.where(x == 0, np.where(np.signbit(x), np.inf, -np.inf), out)
        else:  # at 0, the negative integers and -inf: inf for odd n, -inf for even n (as SciPy)
            out = np.where(neg & ~pole, reflected, pos)
            out = np.where(pole | (x == 0), np.inf if n % 2 else -np.inf, out)
        return np.where(np.isnan(x), np.nan, out)


# ----- erf, erfc, erfinv (the kernels of _erf.py) -------------------------------------------------------
def _erf_pair(x: Any) -> tuple[Any, Any]:
    """``(erf(x), erfc(x))``, each to its own relative precision."""
    x = _float(x)
    return erf_values(x), erfc_values(x)


def log_erfc_values(x: Any) -> Any:
    """``log(erfc(x))``, finite far into the right tail (where ``erfc`` underflows)."""
    x = _float(x)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        far = log_erfc_tail(np.maximum(x, 5.0))
        return np.where(x > 5, far, np.log(erfc_values(np.minimum(x, 5.0))))


def _erfinv_values(y: Any) -> Any:
    y = _float(y)
    ay = np.abs(y)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inside = ay < 1
        a = np.where(inside, ay, 0.5)
        q = 1 - a  # exact for a >= 0.5 (the tail, where the residual is taken on erfc)
        # a rough start: the series near 0, the tail's asymptotics near 1
        x0 = _SQRT_PI / 2 * (a + math.pi / 12 * a ** 3 + 7 * math.pi ** 2 / 480 * a ** 5)
        lq = -np.log(q)
        xt = np.sqrt(np.maximum(lq - 0.5 * np.log(lq) - 0.5 * math.log(math.pi), 0.5))
        x = np.where(a < 0.7, x0, xt)
        tailside = a >= 0.5
        for _ in range(2):  # Halley (cubic: the start's 2% error becomes 1e-5, then below rounding):
            erf, erfc = _erf_pair(x)  # f = erf(x) - a (q - erfc(x) in the tail), f' = 2 exp(-x**2) / sqrt(pi)
            f = np.where(tailside, q - erfc, erf - a)
            d = 2 / _SQRT_PI * np.exp(-x * x)
            x = x - f / (d + x * f)
        x = np.where(a == 0, 0.0, x)
        x = np.where(inside, x, np.where(ay == 1, np.inf, np.nan))
        return np.where(y < 0, -x, x)


# ----- log of the normal cdf --------------------------------------------------------------------
_SQRT_HALF = math.sqrt(0.5)


def _erfc_scaled(x: Any) -> Any:
    """``erfc(x / sqrt(2))``, its tail's ``exp(-x**2 / 2)`` taken from ``x`` itself (see ``_erf.erfc_values``)."""
    return erfc_values(x, _SQRT_HALF)


def _log_ndtr_values(x: Any) -> Any:
    x = _float(x)
    with np.errstate(divide="ignore"):
        left = math.log(0.5) + log_erfc_values(-x * _SQRT_HALF)
        right = np.log1p(-0.5 * _erfc_scaled(np.maximum(x, -1.0)))
        return np.where(x < -1, left, right)


def _ndtr_values(x: Any) -> Any:
    return 0.5 * erfc_values(_float(x), -_SQRT_HALF)


def _logit_values(p: Any) -> Any:
    p = _float(p)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = 2 * p - 1  # (exact from 1/4 on): p / (1 - p) = (1 + s) / (1 - s), without cancellation near 1/2
        middle = np.log1p(s) - np.log1p(-s)
        return np.where(np.abs(s) <= 0.5, middle, np.log(p) - np.log1p(-p))


# ----- the table -------------------------------------------------------------------------------------
def _value(op: Callable[..., Any], x: Any, *params: Any) -> Any:
    return op(x, *params)[0]


SPECIAL: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    # name: (values(x, *params), derivative(x, ans, *params) written with these ops)
    "gammaln": (_gammaln_values, lambda x, ans: _value(digamma, x)),
    "digamma": (lambda x: _polygamma_values(x, 0), lambda x, ans: _value(polygamma, x, 1)),
    "polygamma": (_polygamma_values, lambda x, ans, n: _value(polygamma, x, n + 1)),
    "erfinv": (_erfinv_values, lambda x, ans: (_SQRT_PI / 2) * np.exp(ans * ans)),
    "ndtr": (_ndtr_values, lambda x, ans: np.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)),
    "log_ndtr": (_log_ndtr_values, lambda x, ans: np.exp(-0.5 * x * x - _HALF_LOG_2PI - ans)),
    "logit": (_logit_values, lambda x, ans: 1 / (x * (1 - x))),
}
# (on NumPy 1.x a 0-d input meets the derivatives' Python constants in float64: cast back, see _lift.weak)
SPECIAL = {name: (values, in_dtype_of(d)) for name, (values, d) in SPECIAL.items()}


def _in_float64(values: Callable[..., Any], x: Any, *params: Any) -> Any:
    """``values(x, *params)``, computed in float64 for a narrower float input and cast back (the
    series and recurrences above lose too much in float32)."""
    dtype = getattr(x, "dtype", None)
    if dtype is not None and dtype.kind == "f" and dtype.itemsize < 8:
        return values(x.astype(np.float64), *params).astype(dtype)
    return values(x, *params)


def _special_op(name: str) -> Callable[..., Any]:
    """The op of ``SPECIAL[name]``, registered (its forward-mode rule ``t * d``, from the same derivative)."""
    values, derivative = SPECIAL[name]

    def fn(x: Any, *params: Any) -> tuple[Any, Any]:
        from ._lift import apply  # (the Tensor layer's, once it is loaded)
        from ._lift import tensor_type as Tensor

        if type(x) is Tensor:  # a differentiable backward pass replays the op: record it
            ans = apply(fn, name, x, *params)  # type: ignore[misc]
        else:
            ans = _in_float64(values, x, *params)
        return ans, partial(_special_vjp, derivative, x, ans, params)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"``{name}`` elementwise (see the module docstring). ``vjp(g) = (g * d{name}/dx,)``."
    op(name, fn, jvp=partial(_special_jvp, derivative), keeps=("x", "ans"))
    return fn


def _special_vjp(derivative: Callable[..., Any], x: Any, ans: Any, params: tuple[Any, ...],
                     g: Any) -> tuple[Any, ...]:
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return (g * derivative(x, ans, *params), *(None for _ in params))


def _special_jvp(derivative: Callable[..., Any], ts: tuple[Any, ...], ans: Any, x: Any, *params: Any) -> Any:
    """The forward-mode rule of an op of ``SPECIAL``: ``t * d``, from the derivative its VJP uses."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return ts[0] * derivative(x, ans, *params)


gammaln: Callable[..., tuple[Any, Any]] = _special_op("gammaln")
digamma: Callable[..., tuple[Any, Any]] = _special_op("digamma")
polygamma: Callable[..., tuple[Any, Any]] = _special_op("polygamma")
erfinv: Callable[..., tuple[Any, Any]] = _special_op("erfinv")
ndtr: Callable[..., tuple[Any, Any]] = _special_op("ndtr")
log_ndtr: Callable[..., tuple[Any, Any]] = _special_op("log_ndtr")
logit: Callable[..., tuple[Any, Any]] = _special_op("logit")


# ----- i0e, i1e: the modified Bessel functions of orders 0 and 1, scaled by exp(-|x|) ----------------
_BESSEL_SWITCH = 20.0  # the power series below, the asymptotic series from here (both to ~2e-15)
_BESSEL_SERIES = 40  # terms of the power series (all positive: no cancellation)
_BESSEL_ASYMPTOTIC = 25  # terms of the asymptotic series (its smallest term at 20 is ~1e-17)


def _bessel_scaled(x: Any, order: int) -> Any:
    """``exp(-|x|) I_order(|x|)`` for ``order`` 0 or 1: ``sum (x**2/4)**k / (k! (k+order)!)`` times
    ``(|x|/2)**order`` below the switch, and ``sum_k (-1)**k a_k / |x|**k / sqrt(2 pi |x|)`` with
    ``a_k = prod_{j <= k} (4 order**2 - (2j-1)**2) / (8 j)`` from it."""
    ax = np.abs(_float(x))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        small = np.minimum(ax, _BESSEL_SWITCH)
        q = small * small / 4
        term = small / 2 if order else np.ones_like(small)
        series = term
        for k in range(1, _BESSEL_SERIES):
            term = term * q / (k * (k + order))
            series = series + term
        series = series * np.exp(-small)
        big = np.maximum(ax, _BESSEL_SWITCH)
        term = 1 / np.sqrt(2 * math.pi * big)
        asymptotic = term
        for k in range(1, _BESSEL_ASYMPTOTIC):
            term = term * ((2 * k - 1) ** 2 - 4 * order * order) / (8 * k * big)
            asymptotic = asymptotic + term
        return np.where(ax < _BESSEL_SWITCH, series, np.where(np.isnan(ax), np.nan, asymptotic))


def _i1e_slope(x: Any, ans: Any) -> Any:
    """``i0e(x) - i1e(x) (sign(x) + 1/x)``; 1/2 at 0 (its limit)."""
    zero = x == 0
    return np.where(zero, 0.5, _value(i0e, x) - ans * (np.sign(x) + 1 / np.where(zero, 1.0, x)))


SPECIAL["i0e"] = (lambda x: _bessel_scaled(x, 0), in_dtype_of(lambda x, ans: _value(i1e, x) - np.sign(x) * ans))
SPECIAL["i1e"] = (lambda x: np.sign(x) * _bessel_scaled(x, 1), in_dtype_of(_i1e_slope))
i0e: Callable[..., tuple[Any, Any]] = _special_op("i0e")
i1e: Callable[..., tuple[Any, Any]] = _special_op("i1e")


# ----- two inputs: x log(y), x log1p(y) ---------------------------------------------------------------
def xlogy(x: Any, y: Any) -> tuple[Any, Any]:
    """``x * log(y)``, 0 where ``x == 0`` (unless ``y`` is nan). Cotangents ``g log(y)`` to ``x``
    (as ``xlogy(1, y)``) and ``g x / y`` to ``y`` (0 where ``x == 0``).

    >>> xlogy(np.array([0.0, 2.0]), np.array([0.0, np.e]))[0]
    array([0., 2.])
    """
    return _x_log(x, y, "xlogy")


def xlog1py(x: Any, y: Any) -> tuple[Any, Any]:
    """``x * log1p(y)``, 0 where ``x == 0`` (unless ``y`` is nan). Cotangents ``g log1p(y)`` to
    ``x`` and ``g x / (1 + y)`` to ``y`` (0 where ``x == 0``).

    >>> xlog1py(np.array([0.0, 2.0]), np.array([-1.0, 0.0]))[0]
    array([0., 0.])
    """
    return _x_log(x, y, "xlog1py")


def _x_log(x: Any, y: Any, name: str) -> tuple[Any, Any]:
    from ._lift import apply  # (the Tensor layer's, once it is loaded)
    from ._lift import tensor_type as Tensor

    op = xlogy if name == "xlogy" else xlog1py
    if type(x) is Tensor or type(y) is Tensor:
        ans: Any = apply(op, name, x, y)  # type: ignore[misc]
    else:
        with np.errstate(divide="ignore", invalid="ignore"):
            logged = np.log(y) if name == "xlogy" else np.log1p(y)
            ans = np.where((x == 0) & ~np.isnan(y), weak(0.0, logged), x * logged)
    return ans, partial(_x_log_vjp, op, x, y, name == "xlogy")


def _x_log_vjp(op: Callable[..., Any], x: Any, y: Any, is_xlogy: bool, g: Any) -> tuple[Any, Any]:
    zero = x == 0
    with np.errstate(divide="ignore", invalid="ignore"):
        gx = g * (np.log(y) if is_xlogy else op(weak(1.0, x) + weak(0, x) * x, y)[0])  # log y; log1p y (xlog1py(1, y))
        gy = g * np.where(zero, weak(0.0, x), x / np.where(zero, weak(1.0, y), y if is_xlogy else weak(1, y) + y))
    return unbroadcast(gx, x), unbroadcast(gy, y)


def _x_log_jvp(is_xlogy: bool, ts: tuple[Any, Any], ans: Any, x: Any, y: Any) -> Any:
    """``tx log(y) + ty x / y`` (``log1p(y)`` and ``1 + y`` for xlog1py): the VJP's slopes times the tangents."""
    tx, ty = ts
    out = None
    with np.errstate(divide="ignore", invalid="ignore"):
        if tx is not None:
            out = tx * (np.log(y) if is_xlogy else xlog1py(1.0 + 0 * x, y)[0])
        if ty is not None:
            zero = x == 0
            dy = ty * np.where(zero, 0.0, x / np.where(zero, 1.0, y if is_xlogy else 1 + y))
            out = dy if out is None else out + dy
    return out


op("xlogy", xlogy, jvp=partial(_x_log_jvp, True), keeps=("x", "y"))
op("xlog1py", xlog1py, jvp=partial(_x_log_jvp, False), keeps=("x", "y"))


# ----- betaln: log |B(a, b)|, stable when one argument is large -----------------------------------
def _betaln_values(a: Any, b: Any) -> Any:
    a, b = _float(a), _float(b)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        pole_a, pole_b = (a <= 0) & (a == np.floor(a)), (b <= 0) & (b == np.floor(b))  # (-inf too)
        # a pole (0, -1, -2, ...) of one: B is a ratio of poles where the other is an integer n with
        # a + n <= 0, whose limit is B(1 - a - n, n) (as SciPy); else infinite, and so at two poles
        p, n = np.where(pole_a, a, b), np.where(pole_a, b, a)
        limit = (pole_a != pole_b) & (n == np.floor(n)) & (1 - p - n > 0) & (p > -2.0**31)
        out = _betaln_regular(np.where(limit, 1 - p - n, a), np.where(limit, n, b))
        out = np.where((pole_a | pole_b) & ~limit, np.inf, out)
        # +inf and a finite b: B -> 0 for b > 0, -> inf for b < 0 (nan for both infinite, as SciPy)
        out = np.where(a == np.inf, np.where(b > 0, -np.inf, np.inf), out)
        out = np.where(b == np.inf, np.where(a > 0, -np.inf, np.inf), out)
        out = np.where((a == np.inf) & (b == np.inf), np.nan, out)
        out = np.where(pole_a | pole_b, np.where(limit, out, np.inf), out)  # (-inf with +inf: inf, as SciPy)
        return np.where(np.isnan(a) | np.isnan(b), np.nan, out)


def _betaln_regular(a: Any, b: Any) -> Any:
    """``log |B(a, b)|`` away from the poles: from ``gammaln``, by Stirling where ``a`` or ``b`` is large."""
    big, small = np.maximum(a, b), np.minimum(a, b)
    ga, gb = _gammaln_values(a), _gammaln_values(b)
    direct = ga + gb - _gammaln_values(a + b)
    # big >= 10 and big + small >= 10: gammaln(big) - gammaln(big + small) by Stirling, without the cancellation
    region = (big >= _SHIFT) & (big + small >= _SHIFT) & np.isfinite(big)
    bg = np.where(region, big, _SHIFT)
    sm = np.where(region, small, 1.0)
    total = bg + sm

    def correction(z: Any) -> Any:
        return _horner(_STIRLING, 1 / (z * z)) / z

    stable = (np.where(a < b, ga, gb) - (bg - 0.5) * np.log1p(sm / bg) - sm * np.log(total) + sm
              + correction(bg) - correction(total))
    return np.where(region, stable, direct)


def betaln(a: Any, b: Any) -> tuple[Any, Any]:
    """``log |B(a, b)| = gammaln(a) + gammaln(b) - gammaln(a + b)``, stable for large arguments.
    Cotangents ``g (digamma(a) - digamma(a + b))`` and ``g (digamma(b) - digamma(a + b))``.

    >>> betaln(np.array(1e10), np.array(1.0))[0].round(10)
    np.float64(-23.0258509299)
    """
    from ._lift import apply  # (the Tensor layer's, once it is loaded)
    from ._lift import tensor_type as Tensor

    if type(a) is Tensor or type(b) is Tensor:
        ans: Any = apply(betaln, "betaln", a, b)  # type: ignore[misc]
    else:
        dtype = np.result_type(getattr(a, "dtype", np.float64), getattr(b, "dtype", np.float64))
        if dtype.kind == "f" and dtype.itemsize < 8:  # computed in float64, given back narrow
            wide = [v.astype(np.float64) if hasattr(v, "astype") else v for v in (a, b)]
            ans = _betaln_values(*wide).astype(dtype)
        else:
            ans = _betaln_values(a, b)
    return ans, partial(_betaln_vjp, a, b)


def _betaln_vjp(a: Any, b: Any, g: Any) -> tuple[Any, Any]:
    both = _value(digamma, a + b)
    return unbroadcast(g * (_value(digamma, a) - both), a), unbroadcast(g * (_value(digamma, b) - both), b)


def _betaln_jvp(ts: tuple[Any, Any], ans: Any, a: Any, b: Any) -> Any:
    ta, tb = ts
    both = _value(digamma, a + b)
    da = None if ta is None else ta * (_value(digamma, a) - both)
    db = None if tb is None else tb * (_value(digamma, b) - both)
    return db if da is None else da if db is None else da + db


op("betaln", betaln, jvp=_betaln_jvp, keeps=("a", "b"))
