"""Elementwise operations of one input. Each returns ``(ans, vjp)`` with ``vjp(g) -> (gx,)``.

Below each VJP is the op's forward-mode rule ``_<op>_jvp(tangents, ans, x, ...)`` (see
``_tangent.py``), declared in its record (``op(...)``) below it.

As in ``binary.py``, each rule is a module-level ``_<op>_vjp(saved..., g)`` right under its op,
returned as ``MethodType(rule, saved)`` (one saved value) or ``functools.partial(rule, saved...)``.

The rules use only NumPy functions and operators on ``x``, ``ans`` and ``g``, so a
differentiable backward pass can replay them on Tensors.
"""

from __future__ import annotations

from functools import partial
from types import MethodType
from typing import Any

import numpy as np

from . import _lift
from ._broadcast import unbroadcast
from ._lift import is_tensor, weak
from ._registry import op

Tangents = tuple[Any, ...]  # a forward-mode rule's tangents, one per input (see _tangent.py)


def identity(x: Any) -> tuple[Any, Any]:
    """``x`` itself; the cotangent passes through. Links a transform's input to an outer graph.

    >>> identity(np.array([1.0]))[1](np.array([2.0]))
    (array([2.]),)
    """
    return x, _pass_through


def _pass_through(g: Any) -> tuple[Any]:
    return (g,)


def _identity_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0]


op("identity", identity, jvp=_identity_jvp)


def neg(x: Any) -> tuple[Any, Any]:
    """``-x``. The cotangent is negated.

    >>> neg(np.array([1.0, -2.0]))[0]
    array([-1.,  2.])
    """
    return -x, _neg_vjp


def _neg_vjp(g: Any) -> tuple[Any]:
    return (-g,)


def _neg_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return -ts[0]


op("neg", neg, jvp=_neg_jvp, numpy=(np.negative,))


def exp(x: Any) -> tuple[Any, Any]:
    """``exp(x)``. Cotangent ``g * ans``.

    >>> exp(np.array([0.0]))[1](np.array([2.0]))
    (array([2.]),)
    """
    ans = np.exp(x)
    return ans, MethodType(_exp_vjp, ans)


def _exp_vjp(ans: Any, g: Any) -> tuple[Any]:
    return (g * ans,)


def _exp_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0] * ans


op("exp", exp, jvp=_exp_jvp, keeps=("ans",), numpy=(np.exp,))


def log(x: Any) -> tuple[Any, Any]:
    """Natural log: ``nan`` for negative inputs and ``-inf`` at 0, without warnings. Cotangent ``g / x``.

    >>> log(np.array([-1.0, 0.0, 1.0]))[0]
    array([ nan, -inf,   0.])
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ans = np.log(x)
    return ans, MethodType(_log_vjp, x)


def _log_vjp(x: Any, g: Any) -> tuple[Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (g / x,)


def _log_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return ts[0] / x


op("log", log, jvp=_log_jvp, keeps=("x",), numpy=(np.log,))


_F64, _F32 = np.dtype(np.float64), np.dtype(np.float32)
_ZERO64, _ZERO32 = np.zeros((), _F64), np.zeros((), _F32)
_ZERO64.flags.writeable = _ZERO32.flags.writeable = False


def relu(x: Any) -> tuple[Any, Any]:
    """``max(x, 0)``. Cotangent ``g`` where ``x > 0``, else 0 (so relu'(0) = 0).

    >>> relu(np.array([-1.0, 0.0, 2.0]))[1](np.ones(3))
    (array([0., 0., 1.]),)
    """
    if type(x) is np.ndarray:  # a 0-d zero of x's dtype: NumPy converts a Python 0.0 on every call
        dtype = x.dtype
        ans = np.maximum(x, _ZERO64 if dtype is _F64 else _ZERO32 if dtype is _F32 else 0.0)
    else:
        ans = np.maximum(x, weak(0.0, x))
    return ans, MethodType(_relu_vjp, ans)


def _relu_vjp(ans: Any, g: Any) -> tuple[Any]:
    # sign, not a boolean mask (ans > 0): half the cost on small arrays, where a VJP's time is
    # all call overhead (the mask wins only from ~10,000 elements, by about a third)
    s = np.sign(ans)
    s *= g  # into the fresh sign (a Tensor, when replayed, makes a new one instead)
    return (s,)


def _relu_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0] * np.sign(ans)


op("relu", relu, jvp=_relu_jvp, keeps=("ans",))


def sigmoid(x: Any) -> tuple[Any, Any]:
    """``1 / (1 + exp(-x))`` in the stable form ``exp(-logaddexp(0, -x))``. Cotangent ``g * ans * (1 - ans)``.

    No overflow for inputs like +-1000, and the gradient there is 0, not nan.

    >>> sigmoid(np.array([-1000.0, 0.0, 1000.0]))[0]
    array([0. , 0.5, 1. ])
    """
    ans = np.exp(-np.logaddexp(weak(0, x), -x))
    return ans, MethodType(_sigmoid_vjp, ans)


def _sigmoid_vjp(ans: Any, g: Any) -> tuple[Any]:
    return (g * ans * (weak(1, ans) - ans),)


def _sigmoid_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    t = ts[0] * ans
    t -= t * ans  # t ans (1 - ans), into the fresh product (a Tensor's -= makes a new one): one array fewer
    return t


op("sigmoid", sigmoid, jvp=_sigmoid_jvp, keeps=("ans",))


def tanh(x: Any) -> tuple[Any, Any]:
    """Hyperbolic tangent. Cotangent ``g * (1 - ans**2)``.

    >>> tanh(np.array([0.0]))[1](np.ones(1))
    (array([1.]),)
    """
    ans = np.tanh(x)
    return ans, MethodType(_tanh_vjp, ans)


def _tanh_vjp(ans: Any, g: Any) -> tuple[Any]:
    return (g * (weak(1, ans) - ans * ans),)


def _tanh_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    t = ts[0] * ans
    t *= ans  # into the fresh product (a Tensor's *= makes a new one): one array fewer than t * (1 - ans**2)
    return ts[0] - t


op("tanh", tanh, jvp=_tanh_jvp, keeps=("ans",), numpy=(np.tanh,))


def abs(x: Any) -> tuple[Any, Any]:  # noqa: A001 - NumPy's name
    """``|x|``. Cotangent ``g * sign(x)`` (0 at 0).

    >>> abs(np.array([-2.0, 0.0, 3.0]))[1](np.ones(3))
    (array([-1.,  0.,  1.]),)
    """
    return np.abs(x), MethodType(_abs_vjp, x)


def _abs_vjp(x: Any, g: Any) -> tuple[Any]:
    return (g * np.sign(x),)


def _abs_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0] * np.sign(x)


op("abs", abs, jvp=_abs_jvp, keeps=("x",), numpy=(np.abs,))


def sqrt(x: Any) -> tuple[Any, Any]:
    """Square root (``nan`` below 0, without warnings). Cotangent ``g / (2 * ans)``.

    >>> sqrt(np.array([4.0]))[1](np.ones(1))
    (array([0.25]),)
    """
    with np.errstate(invalid="ignore"):
        ans = np.sqrt(x)
    return ans, MethodType(_sqrt_vjp, ans)


def _sqrt_vjp(ans: Any, g: Any) -> tuple[Any]:
    with np.errstate(divide="ignore", invalid="ignore"):
        return (g / (ans + ans),)  # (2 * ans, exactly, without a constant: see _lift.weak)


def _sqrt_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    with np.errstate(divide="ignore", invalid="ignore"):
        return ts[0] / (ans + ans)


op("sqrt", sqrt, jvp=_sqrt_jvp, keeps=("ans",), numpy=(np.sqrt,))


def square(x: Any) -> tuple[Any, Any]:
    """``x * x``. Cotangent ``2 * g * x``.

    >>> square(np.array([3.0]))[1](np.ones(1))
    (array([6.]),)
    """
    return x * x, MethodType(_square_vjp, x)


def _square_vjp(x: Any, g: Any) -> tuple[Any]:
    return ((g + g) * x,)  # (2 * g, exactly, without a constant: see _lift.weak)


def _square_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    t = ts[0]
    return (t + t) * x


op("square", square, jvp=_square_jvp, keeps=("x",), numpy=(np.square,))


def sin(x: Any) -> tuple[Any, Any]:
    """Sine. Cotangent ``g * cos(x)``.

    >>> sin(np.array([0.0]))[1](np.ones(1))
    (array([1.]),)
    """
    return np.sin(x), MethodType(_sin_vjp, x)


def _sin_vjp(x: Any, g: Any) -> tuple[Any]:
    return (g * np.cos(x),)


def _sin_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0] * np.cos(x)


op("sin", sin, jvp=_sin_jvp, keeps=("x",), numpy=(np.sin,))


def cos(x: Any) -> tuple[Any, Any]:
    """Cosine. Cotangent ``-g * sin(x)``.

    >>> cos(np.array([0.0]))[1](np.ones(1))
    (array([-0.]),)
    """
    return np.cos(x), MethodType(_cos_vjp, x)


def _cos_vjp(x: Any, g: Any) -> tuple[Any]:
    return (-g * np.sin(x),)


def _cos_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return -ts[0] * np.sin(x)


op("cos", cos, jvp=_cos_jvp, keeps=("x",), numpy=(np.cos,))


def softplus(x: Any) -> tuple[Any, Any]:
    """``log(1 + exp(x))`` computed as ``logaddexp(0, x)``. Cotangent ``g * sigmoid(x)``.

    The slope is 1 at ``+inf`` and 0 at ``-inf`` (sigmoid in its stable form, so no
    ``inf - inf``).

    >>> softplus(np.array([0.0]))[1](np.ones(1))
    (array([0.5]),)
    >>> softplus(np.array([np.inf, -np.inf]))[1](np.ones(2))
    (array([1., 0.]),)
    """
    return np.logaddexp(weak(0, x), x), MethodType(_softplus_vjp, x)


def _softplus_vjp(x: Any, g: Any) -> tuple[Any]:
    return (g * np.exp(-np.logaddexp(weak(0, x), -x)),)


def _softplus_jvp(ts: Tangents, ans: Any, x: Any) -> Any:
    return ts[0] * np.exp(-np.logaddexp(weak(0, x), -x))


op("softplus", softplus, jvp=_softplus_jvp, keeps=("x",))


def leaky_relu(x: Any, negative_slope: float = 0.01) -> tuple[Any, Any]:
    """``x`` where ``x > 0``, else ``negative_slope * x``. The slope at 0 is ``negative_slope``.

    >>> leaky_relu(np.array([-2.0, 3.0]), 0.1)[0]
    array([-0.2,  3. ])
    """
    slope = np.where(x > 0, 1.0, negative_slope).astype(getattr(x, "dtype", np.float64))
    return x * slope, MethodType(_leaky_relu_vjp, slope)


def _leaky_relu_vjp(slope: Any, g: Any) -> tuple[Any]:
    return (g * slope,)


def _leaky_relu_jvp(ts: Tangents, ans: Any, x: Any, negative_slope: float = 0.01) -> Any:
    return ts[0] * np.where(x > 0, 1.0, negative_slope).astype(getattr(x, "dtype", np.float64))


op("leaky_relu", leaky_relu, jvp=_leaky_relu_jvp, keeps=("work",))


_GELU_C = float(np.sqrt(2.0 / np.pi))
_INV_SQRT_2PI = 0.3989422804014327  # 1 / sqrt(2 pi)
_LOG_INV_SQRT_2PI = float(np.log(_INV_SQRT_2PI))
_GELU_FAR = 50.0  # beyond +-50, x φ(x) is 0 in float64 (the bound keeps inf * 0 out of a replayed slope)


def gelu_values(x: Any) -> tuple[Any, Any]:
    """The exact GELU and its slope from ``_erf.gelu_values``, whose tables load on first use (not at import)."""
    from ._erf import gelu_values as kernel

    return kernel(x)


def gelu(x: Any, approximate: str = "tanh") -> tuple[Any, Any]:
    """GELU, ``x Φ(x)``: exact with ``approximate="none"`` (PyTorch's default), or its tanh approximation
    ``0.5 * x * (1 + tanh(c * (x + 0.044715 x**3)))``, c = sqrt(2/pi) (``"tanh"``, GPT-2's).

    Exact: ``Φ`` from one fitted kernel (``_erf.gelu_values``). The VJP keeps ``x`` and the output
    (arrays the graph holds anyway: no array of its own) and computes the slope ``Φ(x) + x φ(x)`` with
    ``Φ(x) = gelu(x) / x``, as PyTorch's GELU saves its input and recomputes.

    Tanh: beyond +-10 the tanh has saturated to +-1 in float32 and float64, so it is computed from
    ``x`` clipped to [-10, 10] (the same values, with no ``x**3`` overflowing to ``inf``), the
    value below -10 is 0, and the slope's ``x**3 * (1 - t**2)`` term is 0 (at ``+-inf``,
    ``inf * 0``, whose limit is 0): finite at every order. Both give the limits 0 at ``-inf``
    and ``inf`` at ``inf``.

    >>> gelu(np.array([0.0, 1.0]))[0].round(4)
    array([0.    , 0.8412])
    >>> gelu(np.array([-1.0, 1.0]), approximate="none")[0].round(4)
    array([-0.1587,  0.8413])
    >>> gelu(np.array([-np.inf, np.inf]))[1](np.ones(2))
    (array([0., 1.]),)
    """
    if approximate == "none":
        if is_tensor(x):  # a differentiable backward pass replays the op: record it, and a slope of Tensor ops
            return _lift.apply(gelu, "gelu", x, approximate), partial(_gelu_replayed_vjp, x)  # type: ignore[misc]
        ans = gelu_values(x)[0]
        return ans, partial(_gelu_exact_vjp, x, ans)
    if approximate != "tanh":
        raise ValueError(f"gelu: approximate must be 'none' (exact, x * Phi(x)) or 'tanh', got {approximate!r}")
    xc = np.clip(x, weak(-10, x), weak(10, x))
    t = np.tanh(weak(_GELU_C, x) * (xc + weak(0.044715, x) * xc * xc * xc))
    return weak(0.5, x) * np.where(x < -10, weak(0, x), x) * (weak(1, t) + t), partial(_gelu_vjp, x, t)


def _gelu_exact_vjp(x: Any, ans: Any, g: Any) -> tuple[Any]:
    slope = _gelu_slope_from(x, ans)
    if type(g) is np.ndarray and type(slope) is np.ndarray and g.shape == slope.shape and g.dtype == slope.dtype:
        slope *= g  # (a fresh array: the cotangent in place of a second one)
        return (slope,)
    return (g * slope,)


def _gelu_slope_from(x: Any, ans: Any) -> Any:
    """``Φ(x) + x φ(x)`` from ``x`` and ``ans = x Φ(x)``: ``ans / x + x φ(x)`` (float32 and float64 arrays
    with axes; the kernel otherwise).

    The quotient is ``Φ`` to the rounding of ``ans`` wherever ``ans`` is a normal number, which holds when
    ``x * x`` is above 0 and below ``inf``; at the other elements (0, subnormals, +-inf, overflowing
    squares, NaN) the slope comes from the kernel. Checked by two reductions on plain arrays (under
    ``jit``, a guard choosing between two ways to the same slope), elementwise on other stand-ins."""
    dtype = getattr(x, "dtype", None)
    if dtype not in (np.float32, np.float64) or getattr(ans, "dtype", None) != dtype or not np.ndim(x):
        return gelu_values(x)[1]
    c = dtype.type
    with np.errstate(all="ignore"):
        e = np.multiply(x, x)
        in_range = _all_in_range(e)
        slope = np.divide(ans, x)
        e *= c(-0.5)
        e += c(_LOG_INV_SQRT_2PI)
        np.exp(e, out=e)
        e *= x
        slope += e
        if in_range is True:
            return slope
        e = np.multiply(x, x)
        bad = np.logical_not(np.logical_and(np.greater(e, 0), np.less(e, np.inf)))
    return np.where(bad, gelu_values(x)[1], slope)


def _all_in_range(e: Any) -> Any:
    """Whether every ``e`` is above 0 and below ``inf`` (NaN is not): a bool, or None where it is not one
    value per call (vmap's stand-in)."""
    if type(e) is np.ndarray:
        return e.size == 0 or bool(e.min() > 0 and e.max() < np.inf)
    if getattr(e, "_tr", None) is None:  # (jit's stand-in has its trace)
        return None
    if e.size == 0:
        return True
    ok = np.logical_and(e.min() > 0, e.max() < np.inf)
    return ok._tr.guard(ok, "choice", "the exact GELU's check for zeros and infinities")


def _gelu_exact_slope(x: Any) -> Any:
    """``Φ(x) + x φ(x)``: from the kernel on arrays, from recorded ops on Tensors (a derivative of the slope)."""
    if not is_tensor(x):
        return gelu_values(x)[1]
    from .special import ndtr  # (a family that loads on first use)

    xc = np.clip(x, weak(-_GELU_FAR, x), weak(_GELU_FAR, x))
    density = np.exp(weak(-0.5, x) * xc * xc) * weak(_INV_SQRT_2PI, x)
    return ndtr(x)[0] + xc * density


def _gelu_replayed_vjp(x: Any, g: Any) -> tuple[Any]:
    return (g * _gelu_exact_slope(x),)


def _gelu_vjp(x: Any, t: Any, g: Any) -> tuple[Any]:
    return (g * _gelu_slope(x, t),)


def _gelu_slope(x: Any, t: Any) -> Any:
    """gelu'(x) (tanh), given ``t``, the tanh of the forward."""
    one, half = weak(1, t), weak(0.5, t)
    xs = np.where(np.abs(x) > 10, weak(0, x), x)  # where 1 - t**2 is 0 (x**3 would be inf at +-inf)
    dt = (one - t * t) * weak(_GELU_C, t) * (one + weak(3 * 0.044715, x) * xs * xs)
    return half * (one + t) + half * xs * dt


def _gelu_jvp(ts: Tangents, ans: Any, x: Any, approximate: str = "tanh") -> Any:
    if approximate == "none":
        return ts[0] * _gelu_exact_slope(x)
    xc = np.clip(x, weak(-10, x), weak(10, x))
    return ts[0] * _gelu_slope(x, np.tanh(weak(_GELU_C, x) * (xc + weak(0.044715, x) * xc * xc * xc)))


op("gelu", gelu, jvp=_gelu_jvp, keeps=("x", "ans", "work"))


def clip(x: Any, lo: Any, hi: Any) -> tuple[Any, Any]:
    """Clamp to ``[lo, hi]`` (either may be None). Cotangent ``g`` inside the range, 0 outside.

    At the bounds themselves the gradient passes (like PyTorch's clamp).

    >>> clip(np.array([-2.0, 0.5, 2.0]), 0.0, 1.0)[1](np.ones(3))
    (array([0., 1., 0.]),)
    """
    ans = np.clip(x, weak(lo, x), weak(hi, x))
    return ans, partial(_clip_vjp, x, ans)


def _clip_vjp(x: Any, ans: Any, g: Any) -> tuple[Any]:
    return (unbroadcast(g * (ans == x).astype(g.dtype), x),)


def _clip_jvp(ts: Tangents, ans: Any, x: Any, lo: Any, hi: Any) -> Any:
    t = ts[0]  # (the bounds are constants, as in the VJP)
    return None if t is None else t * (ans == x).astype(t.dtype)


op("clip", clip, jvp=_clip_jvp, keeps=("x", "ans"), numpy=(np.clip,))
