"""NumPy's elementwise functions, one line each (``elementwise(name, forward, derivatives)``) from
which each op, its VJP, its forward-mode rule and its record are made.

``ELEMENTWISE`` (a view of those lines) maps an op name to ``(forward, derivatives)``:

- ``forward`` is the NumPy function (``forward(x, *params)``, or ``forward(x, y)`` for two inputs);
- ``derivatives`` holds one function per differentiable input, giving ``d ans / d input``
  elementwise: ``d(x, ans)`` for one input, ``(dx(x, y, ans), dy(x, y, ans))`` for two.

The op made from an entry returns ``(ans, vjp)`` like every op in ``functional``; its VJP is
``g * d(x, ans)`` (summed back where broadcast, for two inputs), and a forward-mode rule is
``t * d(x, ans)`` from the same table. Each op keeps its entry as ``op.forward`` and
``op.derivatives``. The derivatives are written with NumPy functions and operators, so they run
on Tensors too (a differentiable backward pass replays them).

Conventions where a derivative does not exist: the rounding functions and ``sign`` have derivative
0 everywhere; ``fabs`` has 0 at 0 (as ``abs``); ``hypot`` and ``arctan2`` have 0 at ``(0, 0)``;
``fmax``/``fmin`` split a tie evenly (as ``maximum``), and ``logaddexp2`` two ``-inf`` inputs;
``nan_to_num`` passes the gradient where ``x`` is finite.

>>> ans, vjp = log1p(np.array([0.0, 1.0]))
>>> ans, vjp(np.ones(2))
(array([0.        , 0.69314718]), (array([1. , 0.5]),))
>>> [d(2.0, np.exp2(2.0)) for d in ELEMENTWISE["exp2"][1]]
[np.float64(2.772588722239781)]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from typing import Any

import numpy as np

from . import _lift
from ._broadcast import unbroadcast
from ._lift import as_dtype_of, in_dtype_of
from ._registry import REGISTRY, op
from ._tangent import from_derivatives

_LN2, _LN10, _PI = math.log(2.0), math.log(10.0), math.pi  # Python floats: float32 stays float32
_TWO_OVER_SQRT_PI = 2.0 / math.sqrt(math.pi)


def _zero(x: Any, ans: Any) -> Any:
    return np.zeros_like(ans)


def _chosen(a: Any, b: Any, ans: Any) -> Any:
    """The part of fmax's (fmin's) cotangent for input ``a``: 1 if it is the result, 1/2 on a tie with ``b``."""
    mine, theirs = (a == ans).astype(ans.dtype), (b == ans).astype(ans.dtype)
    return mine / np.maximum(mine + theirs, 1.0)


def _split(x: Any, y: Any) -> Any:
    """logaddexp2's derivative in ``x``, ``2**x / (2**x + 2**y)``, as the stable sigmoid of
    ``(x - y) ln 2``: 1 and 0 where one input is +inf (``2 ** (x - ans)`` would be ``inf - inf``),
    1/2 each where both are the same infinity (as logaddexp)."""
    tie = (x == y) & np.isinf(x)
    return np.exp(-np.logaddexp(0, (np.where(tie, 0, y) - np.where(tie, 0, x)) * _LN2))


def _hypot_slope(x: Any, y: Any, ans: Any) -> Any:
    """hypot's derivative in ``x``, ``x / ans``; at infinity its limits: ``sign(x)`` where only
    ``x`` is infinite, 0 where ``x`` is finite, ``sign(x) / sqrt(2)`` where both are."""
    inf = np.isinf(ans)
    limit = np.where(np.isinf(x), np.sign(x) * np.where(np.isinf(y), math.sqrt(0.5), 1.0), 0.0).astype(ans.dtype)
    return np.where(inf, limit, x / _safe(np.where(inf, 1.0, ans)))


def _arctan2_slope(num: Any, x: Any, y: Any) -> Any:
    """``num / (x**2 + y**2)``, arctan2's derivative (``num`` is y for x, -x for y): 0 where an
    input is infinite (its limit; the quotient would be ``inf / inf``)."""
    big = np.isinf(x) | np.isinf(y)
    return np.where(big, 0.0, _tame(num) / _safe(_tame(x) ** 2 + _tame(y) ** 2))


def _tame(v: Any) -> Any:
    """``v`` clipped to +-1e150 (+-1e18 in float32), so that ``v * v`` stays finite.

    For derivatives that square their input: at +-inf the derivative is then its limit up to
    rounding (``1 / (1 + v * v)`` is 1e-300 or 0), and the next order sees ``0 * 1e150``
    instead of ``0 * inf`` (nan). Finite inputs up to the bound are untouched.
    """
    dtype = getattr(v, "dtype", None)
    bound = 1e18 if dtype is not None and dtype == np.float32 else 1e150
    return np.clip(v, -bound, bound)


def _safe(x: Any) -> Any:
    """``x`` with its zeros replaced by 1 (a divisor that is then masked)."""
    return np.where(x == 0, 1.0, x)


# sinc'(x) = (cos(pi x) - sinc(x)) / x; near 0 its Taylor series, so that every order is right there.
_SINC_TAYLOR = (-(_PI**2) / 3, _PI**4 / 30, -(_PI**6) / 840, _PI**8 / 45360)


def _sinc_derivative(x: Any, ans: Any) -> Any:
    near = np.abs(x) < 0.01
    x2 = x * x
    c0, c1, c2, c3 = _SINC_TAYLOR
    series = x * (c0 + x2 * (c1 + x2 * (c2 + x2 * c3)))
    far = np.where(near, 1.0, x)
    return np.where(near, series, (np.cos(_PI * far) - np.sinc(far)) / far)


def _erf(x: Any) -> Any:
    """The error function in NumPy (see ``_erf.py``): ``erf(x) = 2/sqrt(pi) int_0^x exp(-t^2) dt``."""
    if _lift.is_tensor(x):  # a replayed backward pass: record one op, not the kernel
        return _lift.apply(erf, "erf", x)  # type: ignore[misc]
    from ._erf import erf_values  # (its tables load on first use: not at import leanpass)

    return erf_values(x)


def _erfc(x: Any) -> Any:
    """``1 - erf(x)``, accurate also where it is tiny (large ``x``)."""
    if _lift.is_tensor(x):
        return _lift.apply(erfc, "erfc", x)  # type: ignore[misc]
    from ._erf import erfc_values

    return erfc_values(x)


_BOTH = (True, True)


def _unary_vjp(d: Callable[..., Any], x: Any, ans: Any, g: Any) -> tuple[Any]:
    return (g * d(x, ans),)


def _quiet_unary_vjp(d: Callable[..., Any], x: Any, ans: Any, g: Any) -> tuple[Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (g * d(x, ans),)


def _binary_vjp(dx: Any, dy: Any, x: Any, y: Any, ans: Any, need: tuple[bool, bool], g: Any) -> tuple[Any, Any]:
    return (
        unbroadcast(g * dx(x, y, ans), x) if need[0] else None,
        unbroadcast(g * dy(x, y, ans), y) if need[1] else None,
    )


def _quiet_binary_vjp(dx: Any, dy: Any, x: Any, y: Any, ans: Any, need: tuple[bool, bool], g: Any) -> tuple[Any, Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return _binary_vjp(dx, dy, x, y, ans, need, g)


def elementwise(name: str, table_forward: Callable[..., Any], derivatives: tuple[Callable[..., Any], ...],
                quiet: bool = False) -> Callable[..., Any]:
    """Op ``name`` made from its NumPy function and its derivatives, and registered: ``op(x, *params)
    -> (ans, vjp)``, or ``op(x, y, need) -> ...`` for two derivatives; its VJP is ``g * d`` and its
    forward-mode rule ``t * d`` (``_tangent.from_derivatives``). ``quiet``: its inputs may leave the
    domain (nan or inf results) quietly, as ``log`` does, under np.errstate (about 2 us a call).

    >>> neg2 = elementwise("doc_negative", np.negative, (lambda x, ans: -1.0,))
    >>> neg2(np.array([2.0]))[1](np.ones(1)), neg2.derivatives[0](2.0, None)
    ((array([-1.]),), -1.0)
    >>> from ._registry import JVPS, OPS
    >>> del REGISTRY["doc_negative"], OPS["doc_negative"], JVPS["doc_negative"]
    """
    # On NumPy 1.x a 0-d input meets the derivatives' Python constants in float64: they (and the
    # values of erf, erfc and sinc) are cast back to the input's dtype there (see _lift.weak).
    derivatives = tuple(in_dtype_of(d) for d in derivatives)
    forward = in_dtype_of(table_forward)
    two = len(derivatives) == 2
    # (two inputs: a Python number one is taken in the other's dtype first, as NumPy 2 applies it, so
    # that the derivatives never widen float32 with a float64 NumPy scalar made from it)
    if two and quiet:
        dx, dy = derivatives

        def fn(x: Any, y: Any, need: tuple[bool, bool] = _BOTH) -> tuple[Any, Any]:
            x, y = as_dtype_of(x, y), as_dtype_of(y, x)
            with np.errstate(divide="ignore", invalid="ignore"):
                ans = forward(x, y)
            return ans, partial(_quiet_binary_vjp, dx, dy, x, y, ans, need)

    elif two:
        dx, dy = derivatives

        def fn(x: Any, y: Any, need: tuple[bool, bool] = _BOTH) -> tuple[Any, Any]:
            x, y = as_dtype_of(x, y), as_dtype_of(y, x)
            ans = forward(x, y)
            return ans, partial(_binary_vjp, dx, dy, x, y, ans, need)

    elif quiet:
        d = derivatives[0]

        def fn(x: Any, *params: Any) -> tuple[Any, Any]:  # type: ignore[misc]
            with np.errstate(divide="ignore", invalid="ignore"):
                ans = forward(x, *params)
            return ans, partial(_quiet_unary_vjp, d, x, ans)

    else:
        d = derivatives[0]

        def fn(x: Any, *params: Any) -> tuple[Any, Any]:  # type: ignore[misc]
            ans = forward(x, *params)
            return ans, partial(_unary_vjp, d, x, ans)

    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = (
        f"``{name}`` elementwise, from ``ELEMENTWISE[{name!r}]``: returns ``(ans, vjp)``, the VJP "
        f"multiplying ``g`` by the derivative{'s' if two else ''} of the entry.\n\n"
        f">>> x = np.array({[1.25, 1.5] if name == 'arccosh' else [0.3, 0.6]})\n"
        f">>> np.allclose({name}(x{', x' if two else ''})[0], "
        f"ELEMENTWISE[{name!r}][0](x{', x' if two else ''}))\nTrue\n"
    )
    fn.forward = table_forward  # type: ignore[attr-defined]
    fn.derivatives = derivatives  # type: ignore[attr-defined]
    fn.quiet = quiet  # type: ignore[attr-defined]
    op(name, fn, jvp=from_derivatives(derivatives, quiet), need=two, keeps=("x", "y", "ans") if two else ("x", "ans"),
       numpy=(table_forward,) if getattr(np, name, None) is table_forward else ())
    return fn


# one input: d(x, ans)
log1p = elementwise("log1p", np.log1p, (lambda x, ans: 1 / (1 + x),), quiet=True)
expm1 = elementwise("expm1", np.expm1, (lambda x, ans: ans + 1,))
exp2 = elementwise("exp2", np.exp2, (lambda x, ans: ans * _LN2,))
log2 = elementwise("log2", np.log2, (lambda x, ans: 1 / (x * _LN2),), quiet=True)
log10 = elementwise("log10", np.log10, (lambda x, ans: 1 / (x * _LN10),), quiet=True)
tan = elementwise("tan", np.tan, (lambda x, ans: 1 + ans * ans,))
arcsin = elementwise("arcsin", np.arcsin, (lambda x, ans: 1 / np.sqrt(1 - x * x),), quiet=True)
arccos = elementwise("arccos", np.arccos, (lambda x, ans: -1 / np.sqrt(1 - x * x),), quiet=True)
arctan = elementwise("arctan", np.arctan, (lambda x, ans: 1 / (1 + _tame(x) ** 2),))
sinh = elementwise("sinh", np.sinh, (lambda x, ans: np.cosh(x),))
cosh = elementwise("cosh", np.cosh, (lambda x, ans: np.sinh(x),))
arcsinh = elementwise("arcsinh", np.arcsinh, (lambda x, ans: 1 / np.sqrt(_tame(x) ** 2 + 1),))
arccosh = elementwise("arccosh", np.arccosh, (lambda x, ans: 1 / np.sqrt(_tame(x) ** 2 - 1),), quiet=True)
arctanh = elementwise("arctanh", np.arctanh, (lambda x, ans: 1 / (1 - x * x),), quiet=True)
cbrt = elementwise("cbrt", np.cbrt, (lambda x, ans: 1 / (3 * _tame(ans) ** 2),), quiet=True)
fabs = elementwise("fabs", np.fabs, (lambda x, ans: np.sign(x),))
reciprocal = elementwise("reciprocal", np.reciprocal, (lambda x, ans: -ans * ans,), quiet=True)
sinc = elementwise("sinc", np.sinc, (_sinc_derivative,), quiet=True)
deg2rad = elementwise("deg2rad", np.deg2rad, (lambda x, ans: _PI / 180,))
rad2deg = elementwise("rad2deg", np.rad2deg, (lambda x, ans: 180 / _PI,))
erf = elementwise("erf", _erf, (lambda x, ans: _TWO_OVER_SQRT_PI * np.exp(-(_tame(x) ** 2)),))
erfc = elementwise("erfc", _erfc, (lambda x, ans: -_TWO_OVER_SQRT_PI * np.exp(-(_tame(x) ** 2)),))
nan_to_num = elementwise("nan_to_num", np.nan_to_num, (lambda x, ans: np.isfinite(x).astype(ans.dtype),))
floor = elementwise("floor", np.floor, (_zero,))
ceil = elementwise("ceil", np.ceil, (_zero,))
trunc = elementwise("trunc", np.trunc, (_zero,))
rint = elementwise("rint", np.rint, (_zero,))
round = elementwise("round", np.round, (_zero,))
sign = elementwise("sign", np.sign, (_zero,))
# two inputs: (dx(x, y, ans), dy(x, y, ans))
arctan2 = elementwise("arctan2", np.arctan2, (lambda x, y, ans: _arctan2_slope(y, x, y),
                                              lambda x, y, ans: _arctan2_slope(-x, x, y)), quiet=True)
hypot = elementwise("hypot", np.hypot, (lambda x, y, ans: _hypot_slope(x, y, ans),
                                        lambda x, y, ans: _hypot_slope(y, x, ans)), quiet=True)
logaddexp2 = elementwise("logaddexp2", np.logaddexp2, (lambda x, y, ans: _split(x, y),
                                                       lambda x, y, ans: _split(y, x)), quiet=True)
fmax = elementwise("fmax", np.fmax, (lambda x, y, ans: _chosen(x, y, ans), lambda x, y, ans: _chosen(y, x, ans)))
fmin = elementwise("fmin", np.fmin, (lambda x, y, ans: _chosen(x, y, ans), lambda x, y, ans: _chosen(y, x, ans)))
remainder = elementwise("remainder", np.remainder, (lambda x, y, ans: 1.0,
                                                    lambda x, y, ans: -np.floor(x / _safe(y))), quiet=True)
fmod = elementwise("fmod", np.fmod, (lambda x, y, ans: 1.0, lambda x, y, ans: -np.trunc(x / _safe(y))), quiet=True)

# Views of the records above (the docs, the tests and leanpass.numpy read them): name -> (forward,
# derivatives); the ops that run quietly; the ops of two inputs.
_MINE = [rec for rec in REGISTRY.values() if rec.module == __name__]
ELEMENTWISE: dict[str, tuple[Callable[..., Any], tuple[Callable[..., Any], ...]]] = {
    rec.name: (rec.fn.forward, rec.fn.derivatives) for rec in _MINE  # type: ignore[attr-defined]
}
_QUIET = frozenset(rec.name for rec in _MINE if rec.fn.quiet)  # type: ignore[attr-defined]
BINARY = frozenset(rec.name for rec in _MINE if rec.need)
del _MINE
__all__ = ["ELEMENTWISE", "log1p", "expm1", "exp2", "log2", "log10", "tan", "arcsin", "arccos", "arctan", "sinh",
           "cosh", "arcsinh", "arccosh", "arctanh", "cbrt", "fabs", "reciprocal", "sinc", "deg2rad", "rad2deg", "erf",
           "erfc", "nan_to_num", "floor", "ceil", "trunc", "rint", "round", "sign", "arctan2", "hypot", "logaddexp2",
           "fmax", "fmin", "remainder", "fmod"]

