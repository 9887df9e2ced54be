"""Differentiable special functions, as ``scipy.special`` names them (SciPy is not needed).

``lp.special.gammaln(t)`` where SciPy code has ``scipy.special.gammaln(x)``: the same values
(to float64 precision) and gradients of every order. A SciPy function called on a Tensor that
is being differentiated raises a TypeError that names the function to call here instead.

>>> import leanpass as lp
>>> round(float(lp.grad(lp.special.gammaln)(4.0)), 12)  # digamma(4)
1.256117668432
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..core.errors import _scipy_hint as _scipy_hint  # (the messages naming lp's function when SciPy meets a Tensor)
from ..core.errors import scipy_ufunc_hint as scipy_ufunc_hint
from ..core.tensor import ArrayLike, Tensor, _value, apply
from ..numpy.basics import _tensor
from ..numpy.basics import exp as _exp
from ..numpy.basics import log as _log
from ..numpy.basics import log_softmax as _log_softmax
from ..numpy.basics import logsumexp as _logsumexp
from ..numpy.basics import sigmoid as _sigmoid
from ..numpy.basics import softmax as _softmax
from ..numpy.basics import sum as _sum
from ..numpy.basics import where as _where

__all__ = ["gammaln", "digamma", "psi", "polygamma", "betaln", "expit", "logit", "logsumexp", "erf",
           "erfc", "erfinv", "ndtr", "log_ndtr", "xlogy", "xlog1py", "softmax", "log_softmax", "i0e", "i1e"]


def _real(x: ArrayLike, name: str) -> Any:
    x = _tensor(x)
    if np.iscomplexobj(_value(x)):
        raise TypeError(f"special.{name}: complex numbers are not supported by LeanPass")
    return x


def gammaln(x: ArrayLike) -> Tensor:
    """``log |Gamma(x)|`` (``inf`` at 0 and the negative integers). Its gradient is ``digamma``.

    >>> gammaln(Tensor([1.0, 0.5, -0.5]))
    Tensor([0.        , 0.57236494, 1.26551212])
    """
    return apply(F.gammaln, "gammaln", _real(x, "gammaln"))


def digamma(x: ArrayLike) -> Tensor:
    """``d/dx gammaln(x)``. Its gradient is ``polygamma(1, x)``.

    >>> digamma(Tensor([1.0]))
    Tensor([-0.57721566])
    """
    return apply(F.digamma, "digamma", _real(x, "digamma"))


psi = digamma


def polygamma(n: int, x: ArrayLike) -> Tensor:
    """The ``n``-th derivative of ``digamma`` (``n = 0`` is ``digamma`` itself).

    >>> polygamma(1, Tensor([1.0]))  # pi ** 2 / 6
    Tensor([1.64493407])
    """
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise TypeError(f"special.polygamma: n must be a non-negative int, got {n!r}")
    if n == 0:
        return digamma(x)
    return apply(F.polygamma, "polygamma", _real(x, "polygamma"), int(n))


def betaln(a: ArrayLike, b: ArrayLike) -> Tensor:
    """``log |B(a, b)|``, stable when one argument is large.

    >>> betaln(Tensor(2.0), Tensor(3.0))  # log(1 / 12)
    Tensor(-2.48490665)
    """
    return apply(F.betaln, "betaln", _real(a, "betaln"), _real(b, "betaln"))


def expit(x: ArrayLike) -> Tensor:
    """The logistic sigmoid ``1 / (1 + exp(-x))`` (``lp.sigmoid``).

    >>> expit(Tensor([0.0]))
    Tensor([0.5])
    """
    return _sigmoid(_real(x, "expit"))


def logit(p: ArrayLike) -> Tensor:
    """``log(p / (1 - p))``, the inverse of ``expit``.

    >>> logit(Tensor([0.5]))
    Tensor([0.])
    """
    return apply(F.logit, "logit", _real(p, "logit"))


def erf(x: ArrayLike) -> Tensor:
    """The error function.

    >>> erf(Tensor([0.0, 1.0]))
    Tensor([0.        , 0.84270079])
    """
    return apply(F.erf, "erf", _real(x, "erf"))


def erfc(x: ArrayLike) -> Tensor:
    """``1 - erf(x)``, accurate in the tail.

    >>> erfc(Tensor([10.0]))
    Tensor([2.08848758e-45])
    """
    return apply(F.erfc, "erfc", _real(x, "erfc"))


def erfinv(y: ArrayLike) -> Tensor:
    """The inverse of ``erf`` on ``[-1, 1]`` (``inf`` at 1, ``nan`` outside).

    >>> erfinv(Tensor([0.0, 0.5]))
    Tensor([0.        , 0.47693628])
    """
    return apply(F.erfinv, "erfinv", _real(y, "erfinv"))


def ndtr(x: ArrayLike) -> Tensor:
    """The standard normal cdf.

    >>> ndtr(Tensor([0.0]))
    Tensor([0.5])
    """
    return apply(F.ndtr, "ndtr", _real(x, "ndtr"))


def log_ndtr(x: ArrayLike) -> Tensor:
    """``log(ndtr(x))``, finite far into the left tail.

    >>> log_ndtr(Tensor([-40.0]))
    Tensor([-804.60844201])
    """
    return apply(F.log_ndtr, "log_ndtr", _real(x, "log_ndtr"))


def xlogy(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x * log(y)``, and 0 where ``x == 0``.

    >>> xlogy(Tensor([0.0, 2.0]), Tensor([0.0, 1.0]))
    Tensor([0., 0.])
    """
    return apply(F.xlogy, "xlogy", _real(x, "xlogy"), _real(y, "xlogy"))


def xlog1py(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x * log1p(y)``, and 0 where ``x == 0``.

    >>> xlog1py(Tensor([0.0, 1.0]), Tensor([-1.0, 0.0]))
    Tensor([0., 0.])
    """
    return apply(F.xlog1py, "xlog1py", _real(x, "xlog1py"), _real(y, "xlog1py"))


def logsumexp(a: ArrayLike, axis: Any = None, b: ArrayLike | None = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    """``log(sum(b * exp(a)))`` over ``axis``, stable, as ``scipy.special.logsumexp``.

    With ``return_sign=True`` it returns ``(log |sum|, sign)``, the sign a constant array;
    without it a negative sum gives nan. As in SciPy, a term of weight 0 adds nothing, even
    where ``a`` is inf or nan; a sum of nothing (or of exactly 0) is ``-inf`` with sign 0.

    >>> logsumexp(Tensor([1000.0, 1000.0]))
    Tensor(1000.69314718)
    >>> logsumexp(Tensor([0.0, 0.0]), b=Tensor([1.0, -2.0]), return_sign=True)
    (Tensor(0.), array(-1.))
    """
    a = _real(a, "logsumexp")
    if b is None and not return_sign:
        return _logsumexp(a, axis, keepdims)
    raw = _value(a)
    zero = False if b is None else _value(_real(b, "logsumexp")) == 0
    with np.errstate(invalid="ignore"):
        m = np.max(np.where(zero, -np.inf, raw), axis=axis, keepdims=True)  # (the terms of weight 0 left out)
    pinf = m == np.inf  # (a slice with +inf terms: they alone decide, the others count as 0)
    m = np.where(np.isfinite(m), m, 0.0)  # a constant shift: it cancels, so it needs no gradient
    # A term of weight 0 adds nothing, even where a is inf or nan (as SciPy): such an a is left out
    # (and one whose exp would overflow after the shift; elsewhere 0 * exp(a) keeps the gradient in b).
    with np.errstate(invalid="ignore"):
        drop = zero & ~(raw <= m + 700) | pinf & (raw < np.inf)
    a = _where(drop, -np.inf, a)
    t = _exp(a - m)
    s = _sum(t if b is None else t * _real(b, "logsumexp"), axis=axis, keepdims=True)
    sign = np.sign(_value(s))
    out = (_log(s * sign) if return_sign else _log(s)) + m
    if not keepdims:
        out = out.squeeze(axis)
        sign = np.squeeze(sign, axis)
    return (out, sign) if return_sign else out


def softmax(x: ArrayLike, axis: Any = None) -> Tensor:
    """``exp(x) / sum(exp(x))`` over ``axis`` (None: all of ``x``, as SciPy's default).

    ``+inf`` entries share the weight (``lp.softmax``'s limit), where SciPy gives nan.

    >>> softmax(Tensor([[0.0, 0.0], [0.0, 0.0]]))
    Tensor([[0.25, 0.25],
            [0.25, 0.25]])
    """
    return _softmax(_real(x, "softmax"), axis)


def log_softmax(x: ArrayLike, axis: Any = None) -> Tensor:
    """``x - logsumexp(x)`` over ``axis`` (None: all of ``x``).

    >>> log_softmax(Tensor([0.0, 0.0]))
    Tensor([-0.69314718, -0.69314718])
    """
    return _log_softmax(_real(x, "log_softmax"), axis)


def i0e(x: ArrayLike) -> Tensor:
    """``exp(-|x|) I0(x)``, the modified Bessel function of order 0 scaled so that it stays finite.
    Its gradient is ``i1e(x) - sign(x) i0e(x)`` (0 at the kink at 0).

    >>> i0e(Tensor([0.0, 1.0]))
    Tensor([1.        , 0.46575961])
    """
    return apply(F.i0e, "i0e", _real(x, "i0e"))


def i1e(x: ArrayLike) -> Tensor:
    """``exp(-|x|) I1(x)``, the modified Bessel function of order 1 scaled so that it stays finite.
    Its gradient is ``i0e(x) - i1e(x) (sign(x) + 1/x)`` (1/2 at 0).

    >>> i1e(Tensor([0.0, 1.0]))
    Tensor([0.        , 0.20791042])
    """
    return apply(F.i1e, "i1e", _real(x, "i1e"))


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
