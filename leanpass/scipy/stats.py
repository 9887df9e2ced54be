"""Differentiable log-densities, as ``scipy.stats`` names and signs them (SciPy is not needed).

``lp.stats.norm.logpdf(x, loc, scale)`` where SciPy code has ``scipy.stats.norm.logpdf(x, loc,
scale)``: the same values, with gradients of every order in every argument. As in SciPy, a
log-density is ``-inf`` outside the distribution's support, and ``nan`` where a parameter is
outside its domain (a ``scale`` or shape that is not positive, a probability outside ``[0, 1]``)
or the argument is ``nan``; the gradient there is ``nan`` too, never a number an optimizer would
follow. ``dirichlet`` raises ``ValueError`` as SciPy does, for parameters that are not positive
and for points off the simplex.

>>> import leanpass as lp
>>> lp.stats.norm.logpdf(Tensor([0.0, 1.0]), 0.0, 2.0)
Tensor([-1.61208571, -1.73708571])
>>> float(lp.grad(lambda mu: lp.stats.norm.logpdf(1.0, mu, 2.0))(0.0))  # (x - mu) / scale**2
0.25
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..core.tensor import ArrayLike, Tensor, _value
from ..functional._lift import as_dtype_of
from ..numpy import linalg
from ..numpy.basics import exp as _exp
from ..numpy.basics import log as _log
from ..numpy.basics import sum as _sum
from ..numpy.basics import where as _where
from . import special

__all__ = ["norm", "multivariate_normal", "t", "beta", "gamma", "dirichlet", "poisson", "bernoulli"]

_LOG_2PI = math.log(2 * math.pi)


def _t(x: ArrayLike, like: Any = None) -> Tensor:
    """A Tensor as it is, anything else (numbers, lists, arrays) as a constant float Tensor: a Python
    number in the dtype of ``like`` (see ``_like``), else float64."""
    if type(x) is Tensor:
        if np.iscomplexobj(x._data):
            raise TypeError("lp.stats: complex numbers are not supported by LeanPass")
        return x
    if getattr(x, "_lp_array", False):  # (a value vmap or jit traces: the ops take it as it is)
        return x
    arr = np.asarray(as_dtype_of(x, like))
    return Tensor(arr if arr.dtype.kind == "f" else arr.astype(np.float64))


def _like(*args: ArrayLike) -> Any:
    """What the Python numbers among ``args`` take their dtype from, as NumPy 2 applies them (NEP 50):
    an empty array of the float dtype the other arguments combine to (an array that is not float
    counts as float64, as ``_t`` makes it), or None where all are Python numbers (float64 then)."""
    dtypes = [a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype
              for a in args if a is not None and type(a) not in (float, int)]
    if not dtypes:
        return None
    dtype = np.result_type(*[d if d.kind == "f" else np.float64 for d in dtypes])
    return np.empty(0, dtype)


def _standard(x: ArrayLike, loc: ArrayLike, scale: ArrayLike, *shapes: ArrayLike) -> tuple[Tensor, Tensor, Any]:
    """``(x - loc) / scale``, the scale (1 standing in where it is not positive) and where it is positive;
    Python numbers in the dtype of the other arguments and the distribution's ``shapes`` (see ``_like``)."""
    like = _like(x, loc, scale, *shapes)
    scale = _t(scale, like)
    valid = _positive(scale)
    scale = _stand_in(scale, valid, 1.0)
    return (_t(x, like) - loc) / scale, scale, valid


def _safe(x: Tensor, mask: Any, fill: float) -> Tensor:
    """``x`` inside the support (``mask``), ``fill`` outside: so that the density computed there
    and then discarded cannot put a nan into the gradient (``0 * log(-1)``)."""
    return _where(np.broadcast_to(mask, np.shape(x._data)), x, fill)


def _inside(mask: Any, value: Tensor) -> Tensor:
    """``value`` where ``mask`` (a plain boolean array) holds, else ``-inf`` (outside the support)."""
    return _where(np.broadcast_to(mask, np.shape(value._data)), value, -np.inf)


def _checked(value: Tensor, valid: Any, arg: Any, *inputs: Any) -> Tensor:
    """SciPy's rule: ``nan`` where the parameters are not ``valid`` (a plain boolean array) or the
    standardised argument ``arg`` is nan, ``value`` elsewhere, with a nan gradient there too (to
    first and second order) for every Tensor among ``inputs``: ``value`` is computed from stand-ins
    that would give a number, or 0 from the support's mask. (Each input enters squared, taken as 0
    where all is well: no inf - inf, no 0 * inf.)"""
    bad = np.logical_not(valid) | np.isnan(_value(arg))
    if _nowhere(bad):
        return value
    poison: Any = None
    for x in inputs:
        if type(x) is Tensor:
            part = _where(bad, x, 0.0)
            poison = part * part if poison is None else poison + part * part
    if poison is None:
        return _where(bad, np.nan, value)
    nan, zero = as_dtype_of(math.nan, poison), as_dtype_of(0.0, poison)  # (a float64 mask would widen float32)
    return _where(bad, poison * np.where(bad, nan, zero), value)


def _nowhere(mask: Any) -> bool:
    """Whether a plain boolean mask is False everywhere (a value jit or vmap traces is not plain: it
    takes the general path, which gives the same numbers)."""
    return (type(mask) is np.ndarray or type(mask) is np.bool_) and not mask.any()


def _positive(*params: Tensor) -> Any:
    """Where every parameter is > 0 (False at nan), as a plain boolean array."""
    ok: Any = True
    for p in params:
        ok = ok & (_value(p) > 0)
    return ok


def _stand_in(x: Tensor, valid: Any, fill: float) -> Tensor:
    """``x`` where ``valid``, ``fill`` elsewhere (so that the discarded values are numbers)."""
    return x if _nowhere(np.logical_not(valid)) else _where(valid, x, fill)


class _Norm:
    """The normal distribution (``scipy.stats.norm``)."""

    def logpdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``-z**2 / 2 - log(scale) - log(2 pi) / 2``, ``z = (x - loc) / scale``.

        >>> norm.logpdf(0.0)
        Tensor(-0.91893853)
        """
        z, scale_, valid = _standard(x, loc, scale)
        return _checked(-0.5 * z * z - _log(scale_) - 0.5 * _LOG_2PI, valid, z, x, loc, scale)

    @staticmethod
    def _of_z(f: Any, x: ArrayLike, loc: ArrayLike, scale: ArrayLike, sign: float = 1.0) -> Tensor:
        z, _, valid = _standard(x, loc, scale)
        return _checked(f(z * sign), valid, z, x, loc, scale)

    def pdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> norm.pdf(0.0)
        Tensor(0.39894228)
        """
        return _exp(self.logpdf(x, loc, scale))

    def cdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``P(X <= x)``, accurate in the left tail.

        >>> norm.cdf(0.0)
        Tensor(0.5)
        """
        return self._of_z(special.ndtr, x, loc, scale)

    def logcdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``log(cdf)``, finite far into the left tail.

        >>> norm.logcdf(-40.0)
        Tensor(-804.60844201)
        """
        return self._of_z(special.log_ndtr, x, loc, scale)

    def sf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``P(X > x) = 1 - cdf``, accurate in the right tail.

        >>> norm.sf(0.0)
        Tensor(0.5)
        """
        return self._of_z(special.ndtr, x, loc, scale, -1.0)

    def logsf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``log(sf)``.

        >>> norm.logsf(40.0)
        Tensor(-804.60844201)
        """
        return self._of_z(special.log_ndtr, x, loc, scale, -1.0)


class _MultivariateNormal:
    """The multivariate normal distribution (``scipy.stats.multivariate_normal``)."""

    def logpdf(self, x: ArrayLike, mean: ArrayLike | None = None, cov: ArrayLike = 1.0,
               allow_singular: bool = False) -> Tensor:
        """The log-density of each point along ``x``'s last axis (the result squeezed, as SciPy's).

        ``cov`` is a number (times the identity), a vector (a diagonal) or a matrix; matrices
        and points may come in batches that broadcast. The density goes through the Cholesky
        factor of ``cov``, so ``cov`` must be positive definite.

        >>> multivariate_normal.logpdf(Tensor([[0.0, 0.0], [1.0, 0.0]]), cov=Tensor([[1.0, 0.0], [0.0, 1.0]]))
        Tensor([-1.83787707, -2.33787707])
        """
        if allow_singular:
            raise TypeError("stats.multivariate_normal.logpdf: allow_singular=True is not supported by LeanPass")
        like = _like(x, mean, cov)
        x = _t(x, like)
        if x.ndim == 0:
            x = x.reshape(1)
        d = x.shape[-1]
        diff = x if mean is None else x - mean
        with np.errstate(invalid="ignore"):  # a point with an infinite coordinate (and no nan): -inf, as SciPy
            rd = _value(diff)
            far = np.any(np.isinf(rd), axis=-1) & ~np.any(np.isnan(rd), axis=-1)
        diff = _where(np.isinf(rd), 0.0, diff)
        cov = _t(cov, like)
        raw = _value(cov)
        if not getattr(raw, "_lp_batched", False) and not np.all(np.isfinite(raw)):
            raise ValueError("stats.multivariate_normal.logpdf: cov holds nan or inf; a covariance must be finite "
                             "(as in SciPy)")
        eye = np.eye(d, dtype=cov.dtype if cov.dtype.kind == "f" else np.float64)
        if cov.ndim == 0:
            cov = cov * eye
        elif cov.ndim == 1:
            cov = cov[:, None] * eye
        low = linalg.cholesky(cov)
        z = linalg.solve(low, diff[..., None])[..., 0]
        logdet = 2 * _sum(_log(_sum(low * eye, axis=-1)), axis=-1)
        out = -0.5 * (d * _LOG_2PI + logdet + _sum(z * z, axis=-1))
        return _where(far, -np.inf, out).squeeze()

    def pdf(self, x: ArrayLike, mean: ArrayLike | None = None, cov: ArrayLike = 1.0) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> multivariate_normal.pdf(Tensor([0.0]), cov=1.0)
        Tensor(0.39894228)
        """
        return _exp(self.logpdf(x, mean, cov))


class _T:
    """Student's t distribution (``scipy.stats.t``)."""

    def logpdf(self, x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``gammaln((df+1)/2) - gammaln(df/2) - log(df pi)/2 - log(scale) - (df+1)/2 log1p(z**2/df)``.

        >>> t.logpdf(0.0, 1.0)  # the Cauchy density at 0: 1 / pi
        Tensor(-1.14472989)
        """
        z, scale_, valid = _standard(x, loc, scale, df)
        df_ = _t(df, _like(x, df, loc, scale))
        valid = valid & _positive(df_)
        finite = _value(df_) < np.inf  # (df = inf: the normal distribution, as SciPy)
        d = _stand_in(df_, valid & finite, 1.0)
        half = (d + 1) / 2
        student = (special.gammaln(half) - special.gammaln(d / 2) - 0.5 * _log(d * math.pi)
                   - special.xlog1py(half, z * z / d))
        out = _where(finite, student, -0.5 * z * z - 0.5 * _LOG_2PI)
        return _checked(out - _log(scale_), valid, z, x, df, loc, scale)

    def pdf(self, x: ArrayLike, df: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> t.pdf(0.0, 1.0)
        Tensor(0.31830989)
        """
        return _exp(self.logpdf(x, df, loc, scale))


class _Beta:
    """The beta distribution (``scipy.stats.beta``)."""

    def logpdf(self, x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``(a-1) log(y) + (b-1) log(1-y) - betaln(a, b) - log(scale)`` on ``0 <= y <= 1``.

        >>> beta.logpdf(0.5, 2.0, 2.0)  # 6 y (1 - y) at 1/2
        Tensor(0.40546511)
        """
        z, scale_, valid = _standard(x, loc, scale, a, b)
        like = _like(x, a, b, loc, scale)
        a_, b_ = _t(a, like), _t(b, like)
        valid = valid & _positive(a_, b_)
        a_, b_ = _stand_in(a_, valid, 1.0), _stand_in(b_, valid, 1.0)
        raw = _value(z)
        inside = (raw >= 0) & (raw <= 1)
        y = _safe(z, inside, 0.5)
        out = special.xlogy(a_ - 1, y) + special.xlog1py(b_ - 1, -y) - special.betaln(a_, b_) - _log(scale_)
        return _checked(_inside(inside, out), valid, z, x, a, b, loc, scale)

    def pdf(self, x: ArrayLike, a: ArrayLike, b: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> beta.pdf(0.5, 2.0, 2.0)
        Tensor(1.5)
        """
        return _exp(self.logpdf(x, a, b, loc, scale))


class _Gamma:
    """The gamma distribution (``scipy.stats.gamma``, shape ``a``)."""

    def logpdf(self, x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``(a-1) log(y) - y - gammaln(a) - log(scale)`` on ``y >= 0``.

        >>> gamma.logpdf(1.0, 1.0)
        Tensor(-1.)
        """
        z, scale_, valid = _standard(x, loc, scale, a)
        a_ = _t(a, _like(x, a, loc, scale))
        valid = valid & _positive(a_)
        a_ = _stand_in(a_, valid, 1.0)
        inside = _value(z) >= 0
        y = _safe(z, inside, 1.0)
        out = special.xlogy(a_ - 1, y) - y - special.gammaln(a_) - _log(scale_)
        return _checked(_inside(inside, out), valid, z, x, a, loc, scale)

    def pdf(self, x: ArrayLike, a: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> gamma.pdf(0.0, 1.0)
        Tensor(1.)
        """
        return _exp(self.logpdf(x, a, loc, scale))


class _Dirichlet:
    """The Dirichlet distribution (``scipy.stats.dirichlet``)."""

    def logpdf(self, x: ArrayLike, alpha: ArrayLike) -> Tensor:
        """``sum((alpha - 1) log(x)) - (sum(gammaln(alpha)) - gammaln(sum(alpha)))``.

        As in SciPy, the components run along ``x``'s first axis (``x`` of shape ``(K,)`` or
        ``(K, N)`` for N points), and ``K - 1`` of them may be given (the last is then
        ``1 - sum``).

        >>> dirichlet.logpdf(Tensor([0.2, 0.8]), Tensor([1.0, 1.0]))
        Tensor(0.)
        """
        x, alpha = _t(x), _t(alpha)
        if alpha.ndim != 1:
            raise ValueError(f"stats.dirichlet.logpdf: alpha must be one-dimensional, got shape {alpha.shape}")
        k = alpha.shape[0]
        if x.shape[0] == k - 1:
            x = np.concatenate([x, 1 - _sum(x, axis=0, keepdims=True)], axis=0)
        elif x.shape[0] != k:
            raise ValueError(f"stats.dirichlet.logpdf: x has {x.shape[0]} components along its first axis; "
                             f"alpha has {k}")
        a = alpha.reshape((k,) + (1,) * (x.ndim - 1))
        bad = _check_dirichlet(_value(x), _value(a))
        norm_const = _sum(special.gammaln(alpha)) - special.gammaln(_sum(alpha))
        out = _sum(special.xlogy(a - 1, x), axis=0) - norm_const
        return out if bad is None else _where(bad, np.nan, out)

    def pdf(self, x: ArrayLike, alpha: ArrayLike) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> dirichlet.pdf(Tensor([0.2, 0.8]), Tensor([1.0, 1.0]))
        Tensor(1.)
        """
        return _exp(self.logpdf(x, alpha))


def _check_dirichlet(x: Any, alpha: Any) -> Any:
    """SciPy's checks: every alpha > 0, and x a point of the simplex (components in [0, 1], 0 only where
    alpha >= 1, summing to 1 within 1e-9, or 2 K ulps of x's dtype if that is more). A failed check
    raises ValueError; inside ``vmap`` (where an example cannot raise alone) the result is the mask
    of the points to make nan, else None."""
    with np.errstate(invalid="ignore"):
        total = np.sum(x, axis=0)
        tol = max(1e-9, 2 * x.shape[0] * float(np.finfo(x.dtype).eps))
        faults = [
            (np.any(alpha <= 0, axis=0), lambda: f"every alpha must be > 0, got {np.ravel(alpha)}"),
            (np.any((x < 0) | (x > 1), axis=0), lambda: "each component of x must be in [0, 1] (x is a point of "
             f"the simplex), got values from {np.nanmin(x)} to {np.nanmax(x)}"),
            (np.any((x == 0) & (alpha < 1), axis=0), lambda: "a component of x is 0 where its alpha is < 1 (the "
             "density is infinite there)"),
            (np.abs(total - 1) > tol, lambda: "x must lie on the simplex (its components along the first axis "
             f"sum to 1), but they sum to {total}"),
        ]
        if getattr(x, "_lp_batched", False) or getattr(alpha, "_lp_batched", False):
            return faults[0][0] | faults[1][0] | faults[2][0] | faults[3][0]
        for where, message in faults:
            if np.any(where):
                raise ValueError(f"stats.dirichlet.logpdf: {message()}")
    return None


class _Poisson:
    """The Poisson distribution (``scipy.stats.poisson``)."""

    def logpmf(self, k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
        """``k log(mu) - gammaln(k + 1) - mu`` at the integers ``k >= 0``, else ``-inf``.

        >>> poisson.logpmf(0, 2.0)
        Tensor(-2.)
        """
        like = _like(k, mu, loc)
        kk = _t(k, like) - loc
        mu_ = _t(mu, like)
        valid = _value(mu_) >= 0
        raw = _value(kk)
        inside = (raw >= 0) & (raw == np.floor(raw))
        mu_ = _stand_in(mu_, valid, 1.0)
        safe = _safe(kk, inside, 0.0)
        out = special.xlogy(safe, mu_) - special.gammaln(safe + 1) - mu_
        return _checked(_inside(inside, out), valid, kk, k, mu, loc)

    def pmf(self, k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
        """The probability, ``exp(logpmf)``.

        >>> poisson.pmf(0, 2.0)
        Tensor(0.13533528)
        """
        return _exp(self.logpmf(k, mu, loc))


class _Bernoulli:
    """The Bernoulli distribution (``scipy.stats.bernoulli``)."""

    def logpmf(self, k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
        """``k log(p) + (1 - k) log(1 - p)`` at ``k`` in {0, 1}, else ``-inf``.

        >>> bernoulli.logpmf(1, 0.25)
        Tensor(-1.38629436)
        """
        like = _like(k, p, loc)
        kk = _t(k, like) - loc
        p_ = _t(p, like)
        valid = (_value(p_) >= 0) & (_value(p_) <= 1)
        raw = _value(kk)
        inside = (raw == 0) | (raw == 1)
        p_ = _stand_in(p_, valid, 0.5)
        safe = _safe(kk, inside, 0.0)
        out = special.xlogy(safe, p_) + special.xlog1py(1 - safe, -p_)
        return _checked(_inside(inside, out), valid, kk, k, p, loc)

    def pmf(self, k: ArrayLike, p: ArrayLike, loc: ArrayLike = 0) -> Tensor:
        """The probability, ``exp(logpmf)``.

        >>> bernoulli.pmf(1, 0.25)
        Tensor(0.25)
        """
        return _exp(self.logpmf(k, p, loc))


norm = _Norm()
multivariate_normal = _MultivariateNormal()
t = _T()
beta = _Beta()
gamma = _Gamma()
dirichlet = _Dirichlet()
poisson = _Poisson()
bernoulli = _Bernoulli()


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
