"""Operations with two differentiable inputs: arithmetic, ``@`` and elementwise binary functions
(and ``linear``, ``@`` with a bias: a dense layer as one op).

Every op takes raw arrays (or Python numbers) and returns ``(ans, vjp)``; ``vjp(g)`` returns one
cotangent per input, ``None`` where ``need`` says that input's gradient is not wanted. The Tensor
layer passes ``need`` so that, for example, a batch of data never costs a gradient.

Below each VJP is the op's forward-mode rule ``_<op>_jvp(tangents, ans, x, y)`` (see
``_tangent.py``), declared in its record (``op(...)``).

Each rule sits right under its op as ``_<op>_vjp(saved..., g)``, and the op returns it bound to
what it saved: ``MethodType(rule, saved)`` when that is one value (the rule becomes a method of
it: one 64-byte object per graph node), else ``functools.partial(rule, saved...)`` (a partial
also carries an argument tuple and a keyword dict). Either is cheaper for the garbage collector
than a closure and its cells. The rules use only NumPy functions and operators, so the same
code runs on Tensors when a differentiable (higher-order) backward pass replays it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from functools import partial
from types import MethodType
from typing import Any

import numpy as np

from ._broadcast import unbroadcast
from ._lift import NUMPY1, weak
from ._registry import op
from ._tangent import total

Tangents = tuple[Any, ...]  # a forward-mode rule's tangents, one per input (see _tangent.py)

BOTH = (True, True)
_add_reduce = np.add.reduce
Need = tuple[bool, bool]
# A Python number operand is a constant of the input's shape (it broadcasts without stretching
# the other input), so when its own cotangent is not wanted the rule is shorter: no unbroadcast.
NUMBER = (float, int)


def add(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x + y``. The cotangent passes unchanged to both inputs (summed where broadcast).

    >>> ans, vjp = add(np.array([1.0, 2.0]), 10.0)
    >>> ans, vjp(np.ones(2))[0]
    (array([11., 12.]), array([1., 1.]))
    """
    if not need[1] and type(y) in NUMBER:  # x + constant: nothing to sum back, no rule to bind
        return x + y, _to_first
    if not need[0] and type(x) in NUMBER:
        return x + y, _to_second
    return x + y, partial(_add_vjp, x, y, need)


def _to_first(g: Any) -> tuple[Any, None]:
    return g, None


def _to_second(g: Any) -> tuple[None, Any]:
    return None, g


def _add_vjp(x: Any, y: Any, need: Need, g: Any) -> tuple[Any, Any]:
    return (unbroadcast(g, x) if need[0] else None, unbroadcast(g, y) if need[1] else None)


def _add_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    return total(ts[0], ts[1])


def sub(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x - y``. The cotangent passes unchanged to ``x`` and negated to ``y``.

    >>> ans, vjp = sub(np.array([1.0, 2.0]), np.array([3.0, 5.0]))
    >>> ans, vjp(np.ones(2))[1]
    (array([-2., -3.]), array([-1., -1.]))
    """
    if not need[1] and type(y) in NUMBER:
        return x - y, _to_first
    return x - y, partial(_sub_vjp, x, y, need)


def _sub_vjp(x: Any, y: Any, need: Need, g: Any) -> tuple[Any, Any]:
    return (unbroadcast(g, x) if need[0] else None, unbroadcast(-g, y) if need[1] else None)


def _sub_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    tx, ty = ts
    return tx if ty is None else -ty if tx is None else tx - ty


# A Python float times a float array: NumPy applies it as a 0-d value of the array's dtype,
# converting it again on every call (2,000 of the 5,000 instructions of a small op). The rule
# for ``x * c`` (``x / c``) is bound to that 0-d value, made once per constant and dtype and
# kept for the next op with it; the forward multiplies by the same value (bit for bit what
# NumPy computes with the float). A chain like ``y = y * 0.999`` then converts nothing and
# makes no rule object per node (one object fewer for the garbage collector to walk). At most
# 256 constants per rule; never 0, since -0.0 == 0.0 would share an entry.
_SCALE_FIRST: dict[Any, Any] = {}
_SCALE_SECOND: dict[Any, Any] = {}
_DIVIDE_FIRST: dict[Any, Any] = {}


def _bound(cache: dict[Any, Any], rule: Any, c: float, like: np.ndarray) -> Any:
    """``rule`` bound to ``c`` as a 0-d array of ``like``'s dtype (``c`` itself for a non-float
    array), and kept in ``cache`` under ``(c, dtype number)`` (see above)."""
    vjp = MethodType(rule, np.array(c, like.dtype) if like.dtype.kind == "f" else c)
    if c and len(cache) < 256:
        cache[c, like.dtype.num] = vjp
    return vjp


def mul(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x * y``. Each input's cotangent is ``g`` times the other input.

    >>> ans, vjp = mul(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    >>> vjp(np.ones(2))
    (array([3., 4.]), array([1., 2.]))
    """
    if not need[1] and type(y) in NUMBER:  # x * constant
        if type(y) is float and type(x) is np.ndarray:
            vjp = _SCALE_FIRST.get((y, x.dtype.num)) or _bound(_SCALE_FIRST, _scale_first, y, x)
            return x * vjp.__self__, vjp
        return x * y, MethodType(_scale_first, y)
    if not need[0] and type(x) in NUMBER:  # constant * y
        if type(x) is float and type(y) is np.ndarray:
            vjp = _SCALE_SECOND.get((x, y.dtype.num)) or _bound(_SCALE_SECOND, _scale_second, x, y)
            return vjp.__self__ * y, vjp
        return x * y, MethodType(_scale_second, x)
    return x * y, partial(_mul_vjp, x, y, need)


def _mul_vjp(x: Any, y: Any, need: Need, g: Any) -> tuple[Any, Any]:
    return (unbroadcast(g * y, x) if need[0] else None, unbroadcast(g * x, y) if need[1] else None)


def _scale_first(c: Any, g: Any) -> tuple[Any, None]:
    return g * c, None


def _scale_second(c: Any, g: Any) -> tuple[None, Any]:
    return None, g * c


def _mul_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    tx, ty = ts
    if ty is None:
        return tx * y
    if tx is None:
        return x * ty
    t = tx * y
    if x is y and tx is ty:  # x * x: 2 x t, the same bits in one product fewer
        t += t  # (into the fresh product; a Tensor's += makes a new one)
        return t
    u = x * ty
    if type(t) is np.ndarray and type(u) is np.ndarray:  # both of the output's shape: add into the fresh one
        t += u
        return t
    return t + u


def div(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x / y``. Cotangents ``g / y`` and ``-g * x / y**2``.

    >>> ans, vjp = div(np.array([1.0]), np.array([2.0]))
    >>> vjp(np.ones(1))
    (array([0.5]), array([-0.25]))
    """
    if not need[1] and type(y) in NUMBER:  # x / constant
        if type(y) is float and type(x) is np.ndarray:
            vjp = _DIVIDE_FIRST.get((y, x.dtype.num)) or _bound(_DIVIDE_FIRST, _divide_first, y, x)
            return x / vjp.__self__, vjp
        return x / y, MethodType(_divide_first, y)
    ans = x / y
    return ans, partial(_div_vjp, x, y, ans, need)


def _divide_first(c: Any, g: Any) -> tuple[Any, None]:
    return g / c, None


def _div_vjp(x: Any, y: Any, ans: Any, need: Need, g: Any) -> tuple[Any, Any]:
    # The divisor's cotangent as -(g / y) * ans, not -g * x / y**2: replayed for higher orders,
    # each order then divides by y once more (as x ** -1.0's rule does) instead of squaring it,
    # which lost accuracy and overflowed float32 from about the 6th derivative of 1 / x.
    gx = g / y
    return (
        unbroadcast(gx, x) if need[0] else None,
        unbroadcast(-gx * ans, y) if need[1] else None,
    )


def _div_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    tx, ty = ts
    return total(None if tx is None else tx / y, None if ty is None else -(ty / y) * ans)  # (as the VJP)


def power(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x ** y`` for any real exponent. Cotangents ``g * y * x**(y-1)`` and ``g * ans * log(x)``.

    The base's cotangent is 0 where ``y == 0`` (``x**0`` is the constant 1, even at ``x = 0``),
    computed as ``y * x**(y-1)`` so that its own derivative in ``y`` (the mixed second
    derivative ``x**(y-1) * (1 + y log x)``) stays right there; the exponent's is 0 where
    ``x <= 0`` (where ``log(x)`` has no real value).

    >>> ans, vjp = power(np.array([2.0, 3.0]), 2)
    >>> ans, vjp(np.ones(2))[0]
    (array([4., 9.]), array([4., 6.]))
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        ans = x**y
    return ans, partial(_power_vjp, x, y, ans, need)


def _power_vjp(x: Any, y: Any, ans: Any, need: Need, g: Any) -> tuple[Any, Any]:
    # Points where the value is flat at 0 although a factor of a slope is infinite (x**+-inf,
    # inf**y for y < 0): the slopes are 0 there, their limit. They are computed from safe
    # stand-in values (1) at those points and then set to 0, so that no order sees 0 * inf.
    # A positive finite Python exponent (x ** 2) has none.
    flat: Any = False
    x0, y0 = x, y  # (the shapes the cotangents are summed back to)
    if not (type(y) in NUMBER and 0 < y < math.inf):
        flat = (ans == 0) & (np.isinf(x) | np.isinf(y))
        if not np.any(flat):
            flat = False
    if flat is not False:
        x = np.where(flat, weak(1, x), x)
        y = np.where(flat, weak(1, y), y)
    gx = gy = None
    if need[0]:
        if type(y) in NUMBER and y == 0:  # x**0 of a constant 0: no x**-1 (inf at 0) anywhere
            gx = unbroadcast(g * weak(0, g), x0)
        else:
            # Where y == 0 and x == 0, 0**-1 is inf and y * inf is nan: take the base as 1 there
            # (the slope y * 1 is then 0, as it should be). Elsewhere y * x**(y-1) is exact,
            # also at y == 0, where it is 0 with the right derivative in y.
            zero = (y == 0) & (x == 0)
            base = np.where(zero, weak(1, x), x) if np.any(zero) else x
            with np.errstate(divide="ignore", invalid="ignore"):
                slope = y * base ** (y - weak(1, y))
            gx = unbroadcast(g * (slope if flat is False else np.where(flat, weak(0, slope), slope)), x0)
    if need[1]:
        # 0 where x <= 0 (no real log), computed from log(1) there
        if isinstance(x, (int, float)):  # a Python number stays weakly typed (float32 stays float32)
            slope_y: Any = ans * weak(math.log(x), ans) if x > 0 else np.zeros_like(ans)
        else:
            positive = x > 0
            zero_ans, one = weak(0, ans), weak(1, x)
            logx = np.log(np.where(positive, x, one))
            slope_y = np.where(positive, np.where(positive, ans, zero_ans) * logx, zero_ans)
        gy = unbroadcast(g * (slope_y if flat is False else np.where(flat, weak(0, slope_y), slope_y)), y0)
    return gx, gy


def _power_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    """``**`` is elementwise (its Jacobian diagonal), so its tangent is its VJP applied to the tangents,
    with each input followed taken at the output's shape: the same slopes, limits at 0 and inf included."""
    tx, ty = ts
    shape = np.shape(ans)
    xs = x if tx is None or np.shape(x) == shape else np.broadcast_to(x, shape)
    ys = y if ty is None or np.shape(y) == shape else np.broadcast_to(y, shape)
    gx = _power_vjp(xs, ys, ans, (True, False), tx)[0] if tx is not None else None
    gy = _power_vjp(xs, ys, ans, (False, True), ty)[1] if ty is not None else None
    return total(gx, gy)


def matmul(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``x @ y`` with NumPy's semantics: 1-D vectors, 2-D matrices and batched N-D stacks.

    The cotangents are ``g @ y.T`` and ``x.T @ g`` (last two axes swapped), with a 1-D operand
    treated as a row (left) or column (right) and batch axes summed back where broadcast.

    >>> ans, vjp = matmul(np.ones((2, 3)), np.ones((3, 4)))
    >>> ans.shape, vjp(np.ones((2, 4)))[0]
    ((2, 4), array([[4., 4., 4.],
           [4., 4., 4.]]))
    """
    try:
        ans = x @ y if getattr(x, "ndim", 0) < 3 else _product(x, y)
    except ValueError:
        raise ValueError(_matmul_message(np.shape(x), np.shape(y))) from None
    return ans, partial(_matmul_vjp, x, y, need)


def _rows(a: Any) -> Any:
    """``a`` as a matrix of its last axis: ``(prod(leading axes), last)`` (explicit: no -1 to work out)."""
    return a.reshape((math.prod(a.shape[:-1]), a.shape[-1]))


def _product(x: Any, y: Any) -> Any:
    """``x @ y``; an N-D ``x`` times a matrix ``y`` as one 2-D product of ``x``'s rows (NumPy runs one
    product per leading index instead)."""
    if y.ndim == 2 and x.ndim > 2 and x.shape[-1] == y.shape[0]:
        return (_rows(x) @ y).reshape(x.shape[:-1] + y.shape[1:])
    return x @ y


def _matmul_vjp(x: Any, y: Any, need: Need, g: Any) -> tuple[Any, Any]:
    xnd, ynd = x.ndim, y.ndim
    if xnd == 2 and ynd == 2:  # the common case, kept short
        return (g @ y.T if need[0] else None, x.T @ g if need[1] else None)
    if ynd == 2 and xnd > 2:  # a layer on N-D input: one 2-D product each (no stack of (in, out) products)
        g2 = _rows(g)
        return ((g2 @ y.T).reshape(x.shape) if need[0] else None, _rows(x).T @ g2 if need[1] else None)
    if xnd == 1 and ynd == 1:
        return (g * y if need[0] else None, g * x if need[1] else None)
    x2 = x.reshape((1,) + x.shape) if xnd == 1 else x
    y2 = y.reshape(y.shape + (1,)) if ynd == 1 else y
    g2 = g.reshape(g.shape[:-1] + (1,) + g.shape[-1:]) if xnd == 1 else g
    g2 = g2.reshape(g2.shape + (1,)) if ynd == 1 else g2
    gx = gy = None
    if need[0]:
        gx = unbroadcast(g2 @ np.swapaxes(y2, -1, -2), x2).reshape(x.shape)
    if need[1]:
        gy = unbroadcast(np.swapaxes(x2, -1, -2) @ g2, y2).reshape(y.shape)
    return gx, gy


def _matmul_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    tx, ty = ts
    return total(None if tx is None else _product(tx, y), None if ty is None else _product(x, ty))


op("@", matmul, jvp=_matmul_jvp, need=True, keeps=("x", "y"), numpy=(np.matmul,))


def linear(x: Any, w: Any, b: Any, need: tuple[bool, bool, bool] = (True, True, True)) -> tuple[Any, Any]:
    """``x @ w + b`` as one op: a dense layer (``w`` is ``(in, out)``, ``b`` broadcasts to the result).

    The cotangents are matmul's (``g @ w.T`` to ``x``, ``x.T @ g`` to ``w``) and ``g`` summed
    back to ``b``'s shape. One node instead of two, and the bias is added in place into the
    fresh product: no second array per layer.

    >>> ans, vjp = linear(np.ones((2, 3)), np.ones((3, 4)), np.arange(4.0))
    >>> ans[0], vjp(np.ones((2, 4)))[2]
    (array([3., 4., 5., 6.]), array([2., 2., 2., 2.]))
    """
    try:
        out = x @ w if getattr(x, "ndim", 0) < 3 else _product(x, w)
    except ValueError:
        raise ValueError(_matmul_message(np.shape(x), np.shape(w))) from None
    if type(out) is np.ndarray and type(b) is np.ndarray and b.dtype is out.dtype and b.shape == out.shape[-1:]:
        out += b  # (the usual bias: a row of the product's dtype) into the product, which is ours
    else:
        shape = out.shape  # (an array, a NumPy scalar or vmap's stand-in: each has .shape)
        out = out + b
        if np.shape(out) != shape:  # g must keep the product's shape for matmul's rule
            raise ValueError(
                f"linear: the bias of shape {np.shape(b)} would broadcast x @ w of shape {shape} "
                f"to {np.shape(out)}; give a bias that broadcasts to {shape}, such as shape {shape[-1:]}."
            )
    return out, partial(_linear_vjp, x, w, b, need)


def _linear_vjp(x: Any, w: Any, b: Any, need: tuple[bool, bool, bool], g: Any) -> tuple[Any, Any, Any]:
    gx, gw = _matmul_vjp(x, w, (need[0], need[1]), g)  # (g has the product's shape)
    if not need[2]:
        return gx, gw, None
    if type(g) is np.ndarray and g.ndim >= 2 and type(b) is np.ndarray and b.shape == g.shape[-1:]:
        return gx, gw, _add_reduce(_rows(g), 0)  # (g.sum over its rows without ndarray.sum's Python wrapper)
    return gx, gw, unbroadcast(g, b)


def _linear_jvp(ts: Tangents, ans: Any, x: Any, w: Any, b: Any) -> Any:
    tx, tw, tb = ts
    return total(None if tx is None else _product(tx, w), None if tw is None else _product(x, tw), tb)


op("linear", linear, jvp=_linear_jvp, need=True, keeps=("x", "w", "b"))


def _matmul_message(xs: tuple[int, ...], ys: tuple[int, ...]) -> str:
    if not xs or not ys:
        return f"matmul: operands must have at least one axis; got shapes {xs} @ {ys}"
    inner_y = ys[-2] if len(ys) > 1 else ys[0]
    if xs[-1] != inner_y:
        return (
            f"matmul: inner dimensions do not match: {xs} @ {ys}. The last axis of the left "
            f"operand ({xs[-1]}) must equal the {'second-to-last' if len(ys) > 1 else 'only'} "
            f"axis of the right operand ({inner_y}); transpose or reshape one of them."
        )
    return f"matmul: batch axes of {xs} @ {ys} do not broadcast together"


def maximum(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """Elementwise maximum. The cotangent goes to the larger input; ties split it evenly.

    >>> ans, vjp = maximum(np.array([1.0, 5.0, 2.0]), np.array([3.0, 4.0, 2.0]))
    >>> vjp(np.ones(3))
    (array([0. , 1. , 0.5]), array([1. , 0. , 0.5]))
    """
    ans = np.maximum(x, y)
    return ans, partial(_select_vjp, x, y, ans, need)


def minimum(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """Elementwise minimum. The cotangent goes to the smaller input; ties split it evenly.

    >>> ans, vjp = minimum(np.array([1.0, 5.0]), np.array([3.0, 4.0]))
    >>> vjp(np.ones(2))
    (array([1., 0.]), array([0., 1.]))
    """
    ans = np.minimum(x, y)
    return ans, partial(_select_vjp, x, y, ans, need)


def _select_vjp(x: Any, y: Any, ans: Any, need: Need, g: Any) -> tuple[Any, Any]:
    """Rule of maximum and minimum: weight 1 for the chosen input, 1/2 each on a tie."""
    wx, wy = _select_weights(x, y, ans, g.dtype)
    return (
        unbroadcast(g * wx, x) if need[0] else None,
        unbroadcast(g * wy, y) if need[1] else None,
    )


def _select_weights(x: Any, y: Any, ans: Any, dtype: Any) -> tuple[Any, Any]:
    """maximum's and minimum's derivatives: 1 for the chosen input, 1/2 each on a tie."""
    wx = (x == ans).astype(dtype)  # (a comparison of Tensors is a NumPy value)
    wy = (y == ans).astype(dtype)
    both = wx + wy
    return wx / both, wy / both


def _select_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    """Forward-mode rule of maximum and minimum."""
    tx, ty = ts
    wx, wy = _select_weights(x, y, ans, (ty if tx is None else tx).dtype)
    return total(None if tx is None else tx * wx, None if ty is None else ty * wy)


def logaddexp(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
    """``log(exp(x) + exp(y))`` without overflow. Cotangents ``g * exp(x - ans)``, ``g * exp(y - ans)``.

    >>> ans, vjp = logaddexp(np.array([0.0]), np.array([0.0]))
    >>> vjp(np.ones(1))
    (array([0.5]), array([0.5]))
    """
    ans = np.logaddexp(x, y)
    return ans, partial(_logaddexp_vjp, x, y, ans, need)


def _logaddexp_vjp(x: Any, y: Any, ans: Any, need: Need, g: Any) -> tuple[Any, Any]:
    wx, wy = _logaddexp_weights(x, y, ans)
    return (
        unbroadcast(g * wx, x) if need[0] else None,
        unbroadcast(g * wy, y) if need[1] else None,
    )


def _logaddexp_weights(x: Any, y: Any, ans: Any) -> tuple[Any, Any]:
    """d ans / dx and d ans / dy: sigmoid(x - y) and sigmoid(y - x), in the stable form
    exp(-logaddexp(0, .)): exp(x - ans) would be exp(inf - inf) = nan where an input is +inf.
    Where both inputs are the same infinity, x - y is nan: the weight is split evenly there."""
    with np.errstate(invalid="ignore"):
        d = x - y
        tie = np.isnan(d) & ~(np.isnan(x) | np.isnan(y))
        zero = weak(0, d)
        if np.any(tie):
            d = np.where(tie, zero, d)
        return np.exp(-np.logaddexp(zero, -d)), np.exp(-np.logaddexp(zero, d))


def _logaddexp_jvp(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
    tx, ty = ts
    wx, wy = _logaddexp_weights(x, y, ans)
    return total(None if tx is None else tx * wx, None if ty is None else ty * wy)


def _weak_operands(op: Callable[..., Any]) -> Callable[..., Any]:
    """``op`` with a Python number operand taken in the other operand's dtype (see ``_lift.weak``)."""

    def weak_op(x: Any, y: Any, need: Need = BOTH) -> tuple[Any, Any]:
        return op(weak(x, y), weak(y, x), need)

    weak_op.__name__, weak_op.__doc__ = op.__name__, op.__doc__
    return weak_op


def _weak_inputs(rule: Callable[..., Any]) -> Callable[..., Any]:
    """A forward-mode rule with a Python number input taken as ``_weak_operands`` takes it."""

    def weak_rule(ts: Tangents, ans: Any, x: Any, y: Any) -> Any:
        return rule(ts, ans, weak(x, y), weak(y, x))

    return weak_rule


if NUMPY1:  # a 0-d array meets a Python number in float64 there; on NumPy 2 in its own dtype
    add, sub, mul, div, power, maximum, minimum, logaddexp = (
        _weak_operands(f) for f in (add, sub, mul, div, power, maximum, minimum, logaddexp))
_rule = _weak_inputs if NUMPY1 else lambda rule: rule

# (these ops' records come after the NumPy 1.x versions above: a record holds the function Tensors call)
op("+", add, jvp=_rule(_add_jvp), need=True, keeps=("x", "y"), numpy=(np.add,))
op("-", sub, jvp=_rule(_sub_jvp), need=True, keeps=("x", "y"), numpy=(np.subtract,))
op("*", mul, jvp=_rule(_mul_jvp), need=True, keeps=("x", "y"), numpy=(np.multiply,))
op("/", div, jvp=_rule(_div_jvp), need=True, keeps=("x", "y", "ans"), numpy=(np.divide,))
op("**", power, jvp=_rule(_power_jvp), need=True, keeps=("x", "y", "ans"), numpy=(np.power,))
op("maximum", maximum, jvp=_rule(_select_jvp), need=True, keeps=("x", "y", "ans"), numpy=(np.maximum,))
op("minimum", minimum, jvp=_rule(_select_jvp), need=True, keeps=("x", "y", "ans"), numpy=(np.minimum,))
op("logaddexp", logaddexp, jvp=_rule(_logaddexp_jvp), need=True, keeps=("x", "y", "ans"), numpy=(np.logaddexp,))
