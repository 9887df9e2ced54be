"""The operations as functions on Tensors (``leanpass.exp(x)``, ``leanpass.sum(x, axis=0)``, ...).

Each records one ``functional`` op; arguments may be Tensors, NumPy arrays or Python numbers.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import (
    ArrayLike,
    Tensor,
    _astype,
    _axis,
    _axis_not_dim,
    _binary,
    _const,
    _linear,
    _shape_arg,
    _take,
    _unary,
    _value,
    apply,
)
from ..functional import _lift


def _tensor(x: ArrayLike) -> Any:
    """Lists become arrays; Tensors, arrays and numbers pass through."""
    return np.asarray(x) if isinstance(x, (list, tuple)) else x


def _as_tensor(x: ArrayLike) -> Tensor:
    """``x`` as a Tensor: itself, a constant holding a stand-in of vmap or jit as it is, else a new Tensor."""
    if type(x) is Tensor:
        return x
    if type(x) is not np.ndarray and _lift.is_array(x):
        return _const(x)
    return Tensor(_tensor(x))


# ----- arithmetic --------------------------------------------------------------------------------
def add(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x + y`` with broadcasting.

    >>> add(Tensor([1.0, 2.0]), 10.0)
    Tensor([11., 12.])
    """
    return _binary(F.add, "+", _tensor(x), _tensor(y))


def subtract(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x - y`` with broadcasting.

    >>> subtract(3.0, Tensor([1.0, 2.0]))
    Tensor([2., 1.])
    """
    return _binary(F.sub, "-", _tensor(x), _tensor(y))


def multiply(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x * y`` elementwise, with broadcasting.

    >>> multiply(Tensor([1.0, 2.0]), Tensor([3.0, 4.0]))
    Tensor([3., 8.])
    """
    return _binary(F.mul, "*", _tensor(x), _tensor(y))


def divide(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x / y`` elementwise, with broadcasting.

    >>> divide(2.0, Tensor([1.0, 4.0]))
    Tensor([2. , 0.5])
    """
    return _binary(F.div, "/", _tensor(x), _tensor(y))


def power(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x ** y`` for any real exponent.

    >>> power(Tensor([2.0, 3.0]), 2)
    Tensor([4., 9.])
    """
    return _binary(F.power, "**", _tensor(x), _tensor(y))


def matmul(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x @ y`` with NumPy's rules for 1-D, 2-D and batched N-D operands.

    >>> matmul(Tensor([[1.0, 2.0]]), Tensor([[3.0], [4.0]]))
    Tensor([[11.]])
    """
    return _binary(F.matmul, "@", _tensor(x), _tensor(y))


def linear(x: ArrayLike, w: ArrayLike, b: ArrayLike) -> Tensor:
    """``x @ w + b`` as one op (``_op == "linear"``): what ``nn.Linear`` computes.

    ``w`` has shape ``(in, out)``; ``b`` must broadcast to the shape of ``x @ w`` (usually ``(out,)``).

    >>> linear(Tensor([[1.0, 2.0]]), Tensor([[3.0], [4.0]]), Tensor([0.5]))
    Tensor([[11.5]])
    """
    return _linear(_tensor(x), _tensor(w), _tensor(b))


def negative(x: ArrayLike) -> Tensor:
    """``-x``.

    >>> negative(Tensor([1.0, -2.0]))
    Tensor([-1.,  2.])
    """
    return _unary(F.neg, "neg", _tensor(x))


def maximum(x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise maximum; on a tie the gradient is split evenly.

    >>> maximum(Tensor([1.0, 5.0]), 3.0)
    Tensor([3., 5.])
    """
    return _binary(F.maximum, "maximum", _tensor(x), _tensor(y))


def minimum(x: ArrayLike, y: ArrayLike) -> Tensor:
    """Elementwise minimum; on a tie the gradient is split evenly.

    >>> minimum(Tensor([1.0, 5.0]), 3.0)
    Tensor([1., 3.])
    """
    return _binary(F.minimum, "minimum", _tensor(x), _tensor(y))


def logaddexp(x: ArrayLike, y: ArrayLike) -> Tensor:
    """``log(exp(x) + exp(y))`` without overflow.

    >>> logaddexp(Tensor([1000.0]), Tensor([1000.0]))
    Tensor([1000.69314718])
    """
    return _binary(F.logaddexp, "logaddexp", _tensor(x), _tensor(y))


# ----- elementwise functions -----------------------------------------------------------------------
def relu(x: ArrayLike) -> Tensor:
    """``max(x, 0)``; its gradient at 0 is 0.

    >>> relu(Tensor([-1.0, 2.0]))
    Tensor([0., 2.])
    """
    return _unary(F.relu, "relu", _tensor(x))


def exp(x: ArrayLike) -> Tensor:
    """``e ** x``.

    >>> exp(Tensor([0.0]))
    Tensor([1.])
    """
    return _unary(F.exp, "exp", _tensor(x))


def log(x: ArrayLike) -> Tensor:
    """Natural log: nan below 0, -inf at 0 (no warning, no exception).

    >>> log(Tensor([1.0, 0.0, -1.0]))
    Tensor([  0., -inf,  nan])
    """
    return _unary(F.log, "log", _tensor(x))


def sigmoid(x: ArrayLike) -> Tensor:
    """The logistic function ``1 / (1 + exp(-x))``, stable for any input.

    >>> sigmoid(Tensor([0.0, 1000.0, -1000.0]))
    Tensor([0.5, 1. , 0. ])
    """
    return _unary(F.sigmoid, "sigmoid", _tensor(x))


def tanh(x: ArrayLike) -> Tensor:
    """Hyperbolic tangent.

    >>> tanh(Tensor([0.0]))
    Tensor([0.])
    """
    return _unary(F.tanh, "tanh", _tensor(x))


def abs(x: ArrayLike) -> Tensor:  # noqa: A001
    """``|x|``; its gradient at 0 is 0.

    >>> abs(Tensor([-2.0, 3.0]))
    Tensor([2., 3.])
    """
    return _unary(F.abs, "abs", _tensor(x))


def sqrt(x: ArrayLike) -> Tensor:
    """Square root (nan below 0).

    >>> sqrt(Tensor([4.0, 9.0]))
    Tensor([2., 3.])
    """
    return _unary(F.sqrt, "sqrt", _tensor(x))


def square(x: ArrayLike) -> Tensor:
    """``x * x``.

    >>> square(Tensor([3.0]))
    Tensor([9.])
    """
    return _unary(F.square, "square", _tensor(x))


def sin(x: ArrayLike) -> Tensor:
    """Sine.

    >>> sin(Tensor([0.0]))
    Tensor([0.])
    """
    return _unary(F.sin, "sin", _tensor(x))


def cos(x: ArrayLike) -> Tensor:
    """Cosine.

    >>> cos(Tensor([0.0]))
    Tensor([1.])
    """
    return _unary(F.cos, "cos", _tensor(x))


def softplus(x: ArrayLike) -> Tensor:
    """``log(1 + exp(x))``, stable for any input.

    >>> softplus(Tensor([0.0, 1000.0]))
    Tensor([6.93147181e-01, 1.00000000e+03])
    """
    return _unary(F.softplus, "softplus", _tensor(x))


def gelu(x: ArrayLike, approximate: str = "tanh") -> Tensor:
    """GELU, ``x * Φ(x)`` (``Φ`` the standard normal cdf), as ``torch.nn.functional.gelu``.

    ``approximate="none"`` computes it exactly (PyTorch's default, and BERT's and nanoGPT's);
    ``"tanh"``, LeanPass's default, is the approximation ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x³)))``
    of GPT-2 (within 5e-4 of the exact one). Either is one op whose backward pass is one multiply
    (the exact one keeps only its slope).

    >>> gelu(Tensor([-1.0, 0.0, 1.0]), approximate="none")
    Tensor([-0.15865525,  0.        ,  0.84134475])
    >>> gelu(Tensor([-1.0, 0.0, 1.0]))
    Tensor([-0.15880801,  0.        ,  0.84119199])
    """
    if approximate == "tanh":
        return _unary(F.gelu, "gelu", _tensor(x))
    if approximate != "none":
        raise ValueError(f"gelu: approximate must be 'none' (exact) or 'tanh', got {approximate!r}")
    return _unary(F.gelu, "gelu", _tensor(x), approximate)


def leaky_relu(x: ArrayLike, negative_slope: float = 0.01) -> Tensor:
    """``x`` for ``x > 0``, else ``negative_slope * x``.

    >>> leaky_relu(Tensor([-1.0, 2.0]), 0.1)
    Tensor([-0.1,  2. ])
    """
    return _unary(F.leaky_relu, "leaky_relu", _tensor(x), negative_slope)


def clip(x: ArrayLike, lo: Any = None, hi: Any = None) -> Tensor:
    """Clamp into ``[lo, hi]`` (either may be None); the gradient is 0 where the value was clamped.

    Bounds that are Tensors get gradients too: the clamp is then ``minimum(maximum(x, lo), hi)``.

    >>> clip(Tensor([-1.0, 0.5, 2.0]), 0.0, 1.0)
    Tensor([0. , 0.5, 1. ])
    """
    if type(lo) is Tensor or type(hi) is Tensor:
        out = _tensor(x)
        out = out if lo is None else maximum(out, lo)
        return out if hi is None else minimum(out, hi)
    return _unary(F.clip, "clip", _tensor(x), _tensor(lo), _tensor(hi))


def where(cond: ArrayLike, x: ArrayLike, y: ArrayLike) -> Tensor:
    """``x`` where ``cond`` is true, else ``y``; the gradient flows only to the chosen input.

    >>> x = Tensor([-1.0, 4.0])
    >>> where(x > 0, sqrt(x), 0.0)
    Tensor([0., 2.])
    """
    c = _value(cond)
    c = c if isinstance(c, _lift.ARRAYS) else np.asarray(c)
    return apply(F.where, "where", c if c.dtype == bool else c.astype(bool), _tensor(x), _tensor(y))


# ----- reductions and the softmax family ------------------------------------------------------------
def sum(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Sum over ``axis`` (an int, a tuple, or None for all axes).

    >>> sum(Tensor([[1.0, 2.0], [3.0, 4.0]]), axis=0)
    Tensor([4., 6.])
    """
    return _unary(F.sum, "sum", _tensor(x), axis, keepdims)


def mean(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """Mean over ``axis``.

    >>> mean(Tensor([[1.0, 2.0], [3.0, 4.0]]))
    Tensor(2.5)
    """
    return _unary(F.mean, "mean", _tensor(x), axis, keepdims)


def max(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Maximum over ``axis``; the gradient is split evenly between ties.

    >>> max(Tensor([1.0, 3.0, 2.0]))
    Tensor(3.)
    """
    return _unary(F.max, "max", _tensor(x), axis, keepdims)


def min(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A001
    """Minimum over ``axis``; the gradient is split evenly between ties.

    >>> min(Tensor([1.0, 3.0, 2.0]))
    Tensor(1.)
    """
    return _unary(F.min, "min", _tensor(x), axis, keepdims)


def var(x: ArrayLike, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Variance over ``axis`` (``ddof=1`` for the sample variance).

    >>> var(Tensor([1.0, 3.0]))
    Tensor(1.)
    """
    return _unary(F.var, "var", _tensor(x), axis, ddof, keepdims)


def std(x: ArrayLike, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
    """Standard deviation over ``axis``.

    >>> std(Tensor([1.0, 3.0]))
    Tensor(1.)
    """
    return _unary(F.std, "std", _tensor(x), axis, ddof, keepdims)


def logsumexp(x: ArrayLike, axis: Any = None, keepdims: bool = False) -> Tensor:
    """``log(sum(exp(x)))`` over ``axis``, stable for large inputs.

    >>> logsumexp(Tensor([1000.0, 1000.0]))
    Tensor(1000.69314718)
    """
    return _unary(F.logsumexp, "logsumexp", _tensor(x), axis, keepdims)


def softmax(x: ArrayLike, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, stable for large inputs.

    >>> softmax(Tensor([1000.0, 1000.0]))
    Tensor([0.5, 0.5])
    """
    return _unary(F.softmax, "softmax", _tensor(x), axis)


def log_softmax(x: ArrayLike, axis: int = -1) -> Tensor:
    """``x - logsumexp(x)`` along ``axis``, stable for large inputs.

    >>> log_softmax(Tensor([0.0, 0.0]))
    Tensor([-0.69314718, -0.69314718])
    """
    return _unary(F.log_softmax, "log_softmax", _tensor(x), axis)


# ----- shapes ---------------------------------------------------------------------------------
def reshape(x: ArrayLike, shape: Any) -> Tensor:
    """A new shape with the same elements (one entry may be -1).

    >>> reshape(Tensor([1.0, 2.0, 3.0, 4.0]), (2, -1)).shape
    (2, 2)
    """
    return _unary(F.reshape, "reshape", _tensor(x), tuple(shape) if isinstance(shape, (list, tuple)) else (shape,))


def flatten(x: ArrayLike) -> Tensor:
    """All elements along one axis.

    >>> flatten(Tensor([[1.0], [2.0]]))
    Tensor([1., 2.])
    """
    return _unary(F.reshape, "reshape", _tensor(x), (-1,))


def transpose(x: ArrayLike, axes: Any = None) -> Tensor:
    """Permute the axes (reverse them when ``axes`` is None).

    >>> transpose(Tensor(np.zeros((2, 3, 4))), (2, 0, 1)).shape
    (4, 2, 3)
    """
    perm = None if axes is None else tuple(int(a) for a in np.atleast_1d(_value(axes)))
    return _unary(F.transpose, "transpose", _tensor(x), perm)


permute = transpose


def swapaxes(x: ArrayLike, axis1: int, axis2: int) -> Tensor:
    """Swap two axes.

    >>> swapaxes(Tensor(np.zeros((2, 3))), 0, 1).shape
    (3, 2)
    """
    return _unary(F.swapaxes, "swapaxes", _tensor(x), axis1, axis2)


def expand_dims(x: ArrayLike, axis: Any) -> Tensor:
    """Insert a size-1 axis at ``axis``.

    >>> expand_dims(Tensor([1.0, 2.0]), 0).shape
    (1, 2)
    """
    return _unary(F.expand_dims, "expand_dims", _tensor(x), axis)


def squeeze(x: ArrayLike, axis: Any = None) -> Tensor:
    """Remove size-1 axes (all, or those in ``axis``).

    >>> squeeze(Tensor([[1.0, 2.0]])).shape
    (2,)
    """
    return _unary(F.squeeze, "squeeze", _tensor(x), axis)


def broadcast_to(x: ArrayLike, shape: Any) -> Tensor:
    """Broadcast to ``shape``; the gradient sums back over the broadcast axes.

    >>> broadcast_to(Tensor([1.0, 2.0]), (3, 2)).shape
    (3, 2)
    """
    return _unary(F.broadcast_to, "broadcast_to", _tensor(x), _shape_arg((shape,)))


def astype(x: ArrayLike, dtype: Any) -> Tensor:
    """Cast to ``dtype``; the gradient is cast back. A cast to an integer or bool dtype is a
    constant: rounding has no gradient.

    >>> astype(Tensor([1.0]), np.float32).dtype
    dtype('float32')
    >>> astype(Tensor([1.7], requires_grad=True), int).requires_grad
    False
    """
    return _astype(_tensor(x), dtype)


def concatenate(xs: Sequence[ArrayLike], axis: int | None = 0) -> Tensor:
    """Join along an existing axis (``axis=None``: flatten each input first, as NumPy does).

    >>> concatenate([Tensor([1.0]), Tensor([2.0, 3.0])])
    Tensor([1., 2., 3.])
    >>> concatenate([Tensor([[1.0]]), Tensor([2.0, 3.0])], axis=None).shape
    (3,)
    """
    if axis is None:
        return apply(F.concatenate, "concatenate", 0, *(flatten(_tensor(x)) for x in xs))
    return apply(F.concatenate, "concatenate", axis, *(_tensor(x) for x in xs))


def stack(xs: Sequence[ArrayLike], axis: int = 0) -> Tensor:
    """Join along a new axis.

    >>> stack([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])]).shape
    (2, 2)
    """
    return apply(F.stack, "stack", axis, *(_tensor(x) for x in xs))


def split(x: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Split into pieces along ``axis``: ``n`` equal sections, or at the given indices (as ``np.split``).

    Each piece is a slice of ``x`` (``_op`` ``"getitem"``), so the gradient flows back into place.

    >>> [p.shape for p in split(Tensor(np.arange(6.0)), [2, 5])]
    [(2,), (3,), (1,)]
    >>> [p.tolist() for p in split(Tensor([1.0, 2.0, 3.0, 4.0]), 2)]
    [[1.0, 2.0], [3.0, 4.0]]
    """
    t = _as_tensor(x)
    if t.ndim == 0:
        raise ValueError("split: a 0-d Tensor has no axis to split; reshape it first (t.reshape(1))")
    axis = _axis(axis, t.ndim, "split")
    n = t.shape[axis]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0 or n % k:
            raise ValueError(
                f"split: an axis of length {n} does not divide into {k} equal sections. Pass a "
                "number of sections that divides it, or a list of split points (e.g. [2, 5])."
            )
        bounds = [i * (n // k) for i in range(k + 1)]
    else:
        bounds = [0, *(int(i) for i in indices_or_sections), n]
    lead = (slice(None),) * axis
    return [t[lead + (slice(a, b),)] for a, b in zip(bounds[:-1], bounds[1:])]


def take(x: ArrayLike, indices: ArrayLike, axis: int | None = None) -> Tensor:
    """Pick elements (``axis=None``: of the flattened ``x``) or slices along ``axis``: an embedding lookup.

    Gradients of repeated indices add up.

    >>> take(Tensor([[1.0, 2.0], [3.0, 4.0]]), [1, 1], axis=0)
    Tensor([[3., 4.],
            [3., 4.]])
    """
    return _take(_as_tensor(x), indices, axis)


def einsum(*args: Any) -> Tensor:
    """Einstein summation, as ``np.einsum``: subscripts (``"bqd,bkd->bqk"``, ``...``, an implicit output,
    a repeated letter for a diagonal or trace) or NumPy's sublist form (``einsum(x, [0, 1], [1, 0])``).

    >>> einsum("ij,j->i", Tensor([[1.0, 2.0]]), Tensor([3.0, 4.0]))
    Tensor([11.])
    >>> einsum(Tensor([[1.0, 2.0], [3.0, 4.0]]), [0, 0])
    Tensor(5.)
    """
    subscripts, operands = F.einsum_subscripts(args)
    return apply(F.einsum, "einsum", subscripts, *(_tensor(x) for x in operands))


# PyTorch's dim= gets a message naming NumPy's axis=.
for _name in ("sum", "mean", "max", "min", "var", "std", "logsumexp", "softmax", "log_softmax", "concatenate",
              "stack", "split", "expand_dims", "squeeze", "take"):
    globals()[_name] = _axis_not_dim(globals()[_name])
