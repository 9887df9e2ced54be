"""Differentiable log-densities, as ``scipy.stats`` names and signs them (SciPy is not needed).

``lp.stats.norm.logpdf(x, loc, scale)`` where SciPy code has ``scipy.stats.norm.logpdf(x, loc,
scale)``: the same values, with gradients of every order in every argument. Outside a
distribution's support a log-density is ``-inf``, as in SciPy.

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

from . import linalg, special
from .ops import exp as _exp
from .ops import log as _log
from .ops import sum as _sum
from .ops import where as _where
from .tensor import ArrayLike, Tensor, _value

__all__ = ["norm", "multivariate_normal", "t", "beta", "gamma", "dirichlet", "poisson", "bernoulli"]

_LOG_2PI = math.log(2 * math.pi)


def _t(x: ArrayLike) -> Tensor:
    """A Tensor as it is, anything else (numbers, lists, arrays) as a constant float Tensor."""
    if type(x) is Tensor:
        if np.iscomplexobj(x._data):
            raise TypeError("lp.stats: complex numbers are not supported by LeanPass")
        return x
    arr = np.asarray(x)
    return Tensor(arr if arr.dtype.kind == "f" else arr.astype(np.float64))


def _standard(x: ArrayLike, loc: ArrayLike, scale: ArrayLike) -> tuple[Tensor, Tensor]:
    scale = _t(scale)
    return (_t(x) - loc) / scale, scale


def _safe(x: Tensor, mask: Any, fill: float) -> Tensor:
    """``x`` inside the support (``mask``), ``fill`` outside: so that the density computed there
    and then discarded cannot put a nan into the gradient (``0 * log(-1)``)."""
    return _where(np.broadcast_to(mask, np.shape(x._data)), x, fill)


def _inside(mask: Any, value: Tensor) -> Tensor:
    """``value`` where ``mask`` (a plain boolean array) holds, else ``-inf`` (outside the support)."""
    return _where(np.broadcast_to(mask, np.shape(value._data)), value, -np.inf)


class _Norm:
    """The normal distribution (``scipy.stats.norm``)."""

    def logpdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``-z**2 / 2 - log(scale) - log(2 pi) / 2``, ``z = (x - loc) / scale``.

        >>> norm.logpdf(0.0)
        Tensor(-0.91893853)
        """
        z, scale = _standard(x, loc, scale)
        return -0.5 * z * z - _log(scale) - 0.5 * _LOG_2PI

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
        return special.ndtr(_standard(x, loc, scale)[0])

    def logcdf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``log(cdf)``, finite far into the left tail.

        >>> norm.logcdf(-40.0)
        Tensor(-804.60844201)
        """
        return special.log_ndtr(_standard(x, loc, scale)[0])

    def sf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``P(X > x) = 1 - cdf``, accurate in the right tail.

        >>> norm.sf(0.0)
        Tensor(0.5)
        """
        return special.ndtr(-_standard(x, loc, scale)[0])

    def logsf(self, x: ArrayLike, loc: ArrayLike = 0.0, scale: ArrayLike = 1.0) -> Tensor:
        """``log(sf)``.

        >>> norm.logsf(40.0)
        Tensor(-804.60844201)
        """
        return special.log_ndtr(-_standard(x, loc, scale)[0])


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
        x = _t(x)
        if x.ndim == 0:
            x = x.reshape(1)
        d = x.shape[-1]
        diff = x if mean is None else x - mean
        cov = _t(cov)
        if cov.ndim == 0:
            cov = cov * np.eye(d)
        elif cov.ndim == 1:
            cov = cov[:, None] * np.eye(d)
        low = linalg.cholesky(cov)
        z = linalg.solve(low, diff[..., None])[..., 0]
        logdet = 2 * _sum(_log(_sum(low * np.eye(d), axis=-1)), axis=-1)
        out = -0.5 * (d * _LOG_2PI + logdet + _sum(z * z, axis=-1))
        return out.squeeze()

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
        z, scale = _standard(x, loc, scale)
        df = _t(df)
        half = (df + 1) / 2
        return (special.gammaln(half) - special.gammaln(df / 2) - 0.5 * _log(df * math.pi) - _log(scale)
                - special.xlog1py(half, z * z / df))

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
        y, scale = _standard(x, loc, scale)
        raw = _value(y)
        inside = (raw >= 0) & (raw <= 1)
        y = _safe(y, inside, 0.5)
        out = special.xlogy(_t(a) - 1, y) + special.xlog1py(_t(b) - 1, -y) - special.betaln(a, b) - _log(scale)
        return _inside(inside, out)

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
        y, scale = _standard(x, loc, scale)
        inside = _value(y) >= 0
        y = _safe(y, inside, 1.0)
        out = special.xlogy(_t(a) - 1, y) - y - special.gammaln(a) - _log(scale)
        return _inside(inside, out)

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
        k = alpha.shape[0]
        if x.shape[0] == k - 1:
            x = np.concatenate([x, 1 - _sum(x, axis=0, keepdims=True)], axis=0)
        elif x.shape[0] != k:
            raise ValueError(f"stats.dirichlet.logpdf: x has {x.shape[0]} components along its first axis; "
                             f"alpha has {k}")
        a = alpha.reshape((k,) + (1,) * (x.ndim - 1))
        norm_const = _sum(special.gammaln(alpha)) - special.gammaln(_sum(alpha))
        return _sum(special.xlogy(a - 1, x), axis=0) - norm_const

    def pdf(self, x: ArrayLike, alpha: ArrayLike) -> Tensor:
        """The density, ``exp(logpdf)``.

        >>> dirichlet.pdf(Tensor([0.2, 0.8]), Tensor([1.0, 1.0]))
        Tensor(1.)
        """
        return _exp(self.logpdf(x, alpha))


class _Poisson:
    """The Poisson distribution (``scipy.stats.poisson``)."""

    def logpmf(self, k: ArrayLike, mu: ArrayLike, loc: ArrayLike = 0) -> Tensor:
        """``k log(mu) - gammaln(k + 1) - mu`` at the integers ``k >= 0``, else ``-inf``.

        >>> poisson.logpmf(0, 2.0)
        Tensor(-2.)
        """
        k = _t(k) - loc
        raw = _value(k)
        inside = (raw >= 0) & (raw == np.floor(raw))
        k = _safe(k, inside, 0.0)
        out = special.xlogy(k, mu) - special.gammaln(k + 1) - mu
        return _inside(inside, out)

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
        k = _t(k) - loc
        raw = _value(k)
        inside = (raw == 0) | (raw == 1)
        k = _safe(k, inside, 0.0)
        out = special.xlogy(k, p) + special.xlog1py(1 - k, -_t(p))
        return _inside(inside, out)

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
