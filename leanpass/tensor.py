"""The immutable ``Tensor`` and the few functions that record operations on it.

A Tensor holds a read-only array and, when it was computed from Tensors that require grad,
the node of the graph that made it: ``_op`` (the op's name in ``functional.OPS``), ``_parents``
(the op's inputs in order: Tensors are the graph's edges, anything else is a constant the op
was called with) and ``_vjp`` (the rule's closure over the raw arrays).

``_trace`` is a bit mask saying which differentiations a Tensor takes part in: bit 0 for
``requires_grad`` leaves (``.backward()``), one higher bit per nested ``grad``/``vjp`` transform.
It is 0 for a constant, so recording costs nothing when no gradient is wanted.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import FrozenInstanceError, dataclass
from typing import Any

import numpy as np

from . import functional as F
from .functional import _lift

# Which trace bits may record right now: -1 (all) normally, 0 inside ``no_grad()``.
_grad_mask: ContextVar[int] = ContextVar("leanpass_grad_mask", default=-1)
_mask_get = _grad_mask.get
_next_seq = itertools.count(1).__next__  # creation order: the reverse pass runs in its reverse
_new = object.__new__
_PLAIN = (int, float, np.ndarray, np.generic)
_NEED = ((False, False), (True, False), (False, True), (True, True))

ArrayLike = Any  # a Tensor, NumPy array, nested list or Python number


@dataclass(frozen=True, eq=False, init=False, repr=False)
class Tensor:
    """An immutable n-dimensional array that records the operations made from it.

    ``Tensor(data, requires_grad=False, dtype=None)`` copies ``data`` (lists, Python numbers,
    arrays). Only floating-point Tensors can require grad.

    >>> x = Tensor([2.0, 3.0], requires_grad=True)
    >>> y = (x ** 2).sum()
    >>> y.backward()
    >>> x.grad
    Tensor([4., 6.])
    """

    _data: Any
    _trace: int = 0
    _op: str = "leaf"
    _parents: tuple[Any, ...] = ()
    _vjp: Callable[[Any], tuple[Any, ...]] | None = None
    _seq: int = 0

    def __init__(self, data: ArrayLike, requires_grad: bool = False, dtype: Any = None) -> None:
        try:
            arr = np.array(data, dtype=dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"Tensor(data): cannot make an array of {type(data).__name__} data ({e}). "
                "Pass a number, a (nested) list of numbers or a NumPy array."
            ) from None
        if arr.dtype.kind not in "biuf":
            raise TypeError(
                f"Tensor(data): unsupported dtype {arr.dtype}; LeanPass holds numbers "
                "(float, int or bool arrays)."
            )
        if requires_grad and arr.dtype.kind != "f":
            raise TypeError(
                f"requires_grad=True needs floating-point data, but got dtype {arr.dtype}. "
                "Pass float data (e.g. Tensor([1.0, 2.0])) or dtype=np.float64 / np.float32."
            )
        arr.flags.writeable = False
        d = self.__dict__
        d["_data"] = arr
        d["_trace"] = 1 if requires_grad else 0
        d["_seq"] = _next_seq()

    # ----- what a user reads -------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The values as a read-only NumPy array (copy it to edit: ``t.data.copy()``)."""
        d = self._data
        if not isinstance(d, np.ndarray):
            d = np.asarray(d)
        d.flags.writeable = False
        return d

    def numpy(self) -> np.ndarray:
        """The values as a read-only NumPy array (same as ``.data``).

        >>> Tensor([1.0, 2.0]).numpy()
        array([1., 2.])
        """
        return self.data

    def item(self) -> Any:
        """The value of a one-element Tensor as a Python number.

        >>> Tensor([[2.5]]).item()
        2.5
        """
        return self._data.item()

    def tolist(self) -> Any:
        """The values as nested Python lists.

        >>> Tensor([1.0, 2.0]).tolist()
        [1.0, 2.0]
        """
        return np.asarray(self._data).tolist()

    @property
    def grad(self) -> Tensor | None:
        """The gradient ``backward()`` accumulated here (None until then); clear it with ``t.grad = None``."""
        return self.__dict__.get("_grad")

    @grad.setter
    def grad(self, value: Tensor | None) -> None:
        if value is not None and type(value) is not Tensor:
            raise TypeError(f".grad must be a Tensor or None, not {type(value).__name__}")
        self.__dict__["_grad"] = value

    @property
    def requires_grad(self) -> bool:
        """True when this Tensor is part of a graph that gradients flow through."""
        return self._trace != 0

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape, as in NumPy."""
        return np.shape(self._data)

    @property
    def dtype(self) -> np.dtype[Any]:
        """The dtype, as in NumPy (float32 stays float32 through every op and gradient)."""
        return np.asarray(self._data).dtype if not hasattr(self._data, "dtype") else self._data.dtype

    @property
    def ndim(self) -> int:
        """The number of axes."""
        return np.ndim(self._data)

    @property
    def size(self) -> int:
        """The number of elements."""
        return int(np.size(self._data))

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's name
        """The transpose (axes reversed)."""
        return _unary(F.transpose, "transpose", self, None)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        body = np.array2string(np.asarray(self._data), separator=", ", prefix="Tensor(")
        extra = "" if self.dtype == np.float64 else f", dtype={self.dtype}"
        if self._trace:
            extra += ", requires_grad=True"
        if self._op != "leaf":
            extra += f", op={self._op!r}"
        return f"Tensor({body}{extra})"

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        arr = self.data
        return arr if dtype is None or dtype == arr.dtype else arr.astype(dtype)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __float__(self) -> float:
        return float(self._data)

    def __int__(self) -> int:
        return int(self._data)

    def __index__(self) -> int:
        return int(np.asarray(self._data).__index__())

    __hash__ = object.__hash__

    # ----- differentiation -----------------------------------------------------------------
    def backward(self, cotangent: ArrayLike | None = None, create_graph: bool = False) -> None:
        """Add d(self)/d(leaf) into ``.grad`` of every leaf with ``requires_grad=True``.

        A one-element Tensor needs no argument; any other needs ``cotangent`` of its shape
        (the vector in the vector-Jacobian product). Gradients accumulate across calls, as in
        PyTorch; clear one with ``t.grad = None``. ``create_graph=True`` records the backward
        pass too, so ``.grad`` can itself be differentiated.

        >>> x = Tensor(3.0, requires_grad=True)
        >>> (x * x).backward(create_graph=True)
        >>> x.grad
        Tensor(6., requires_grad=True, op='+')
        """
        from .engine import backward

        backward(self, cotangent, create_graph)

    def detach(self) -> Tensor:
        """The same values, cut from the graph (no gradient flows through the result).

        >>> Tensor([1.0], requires_grad=True).detach().requires_grad
        False
        """
        return _const(self._data)

    def __setitem__(self, index: Any, value: Any) -> None:
        raise TypeError(
            "Tensors are immutable: item assignment (t[i] = v) is not supported. Build a new "
            "Tensor instead, e.g. leanpass.where(mask, v, t), or edit a copy of the values: "
            "a = t.numpy().copy(); a[i] = v; t = Tensor(a)."
        )

    # ----- operators --------------------------------------------------------------------------
    def __add__(self, other: ArrayLike) -> Tensor:
        return _binary(F.add, "+", self, other)

    def __radd__(self, other: ArrayLike) -> Tensor:
        return _binary(F.add, "+", other, self)

    def __sub__(self, other: ArrayLike) -> Tensor:
        return _binary(F.sub, "-", self, other)

    def __rsub__(self, other: ArrayLike) -> Tensor:
        return _binary(F.sub, "-", other, self)

    def __mul__(self, other: ArrayLike) -> Tensor:
        return _binary(F.mul, "*", self, other)

    def __rmul__(self, other: ArrayLike) -> Tensor:
        return _binary(F.mul, "*", other, self)

    def __truediv__(self, other: ArrayLike) -> Tensor:
        return _binary(F.div, "/", self, other)

    def __rtruediv__(self, other: ArrayLike) -> Tensor:
        return _binary(F.div, "/", other, self)

    def __pow__(self, other: ArrayLike) -> Tensor:
        return _binary(F.power, "**", self, other)

    def __rpow__(self, other: ArrayLike) -> Tensor:
        return _binary(F.power, "**", other, self)

    def __matmul__(self, other: ArrayLike) -> Tensor:
        return _binary(F.matmul, "@", self, other)

    def __rmatmul__(self, other: ArrayLike) -> Tensor:
        return _binary(F.matmul, "@", other, self)

    def __neg__(self) -> Tensor:
        return _unary(F.neg, "neg", self)

    def __pos__(self) -> Tensor:
        return self

    def __abs__(self) -> Tensor:
        return _unary(F.abs, "abs", self)

    def __getitem__(self, index: Any) -> Tensor:
        return _unary(F.getitem, "getitem", self, _plain_index(index))

    # Comparisons are not differentiable: they return plain boolean arrays.
    def __eq__(self, other: object) -> Any:
        return self._data == _value(other)

    def __ne__(self, other: object) -> Any:
        return self._data != _value(other)

    def __lt__(self, other: ArrayLike) -> Any:
        return self._data < _value(other)

    def __le__(self, other: ArrayLike) -> Any:
        return self._data <= _value(other)

    def __gt__(self, other: ArrayLike) -> Any:
        return self._data > _value(other)

    def __ge__(self, other: ArrayLike) -> Any:
        return self._data >= _value(other)

    # ----- methods (each is the function of the same name in leanpass) -----------------------
    def matmul(self, other: ArrayLike) -> Tensor:
        """``self @ other`` (see ``leanpass.matmul``)."""
        return _binary(F.matmul, "@", self, other)

    def sum(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Sum over ``axis`` (all axes when None); see ``leanpass.sum``."""
        return _unary(F.sum, "sum", self, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Mean over ``axis`` (all axes when None); see ``leanpass.mean``."""
        return _unary(F.mean, "mean", self, axis, keepdims)

    def max(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Maximum over ``axis``; see ``leanpass.max``."""
        return _unary(F.max, "max", self, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Minimum over ``axis``; see ``leanpass.min``."""
        return _unary(F.min, "min", self, axis, keepdims)

    def var(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """Variance over ``axis``; see ``leanpass.var``."""
        return _unary(F.var, "var", self, axis, ddof, keepdims)

    def std(self, axis: Any = None, ddof: int = 0, keepdims: bool = False) -> Tensor:
        """Standard deviation over ``axis``; see ``leanpass.std``."""
        return _unary(F.std, "std", self, axis, ddof, keepdims)

    def relu(self) -> Tensor:
        """``max(self, 0)``; see ``leanpass.relu``."""
        return _unary(F.relu, "relu", self)

    def exp(self) -> Tensor:
        """``exp(self)``; see ``leanpass.exp``."""
        return _unary(F.exp, "exp", self)

    def log(self) -> Tensor:
        """Natural log (nan below 0, -inf at 0); see ``leanpass.log``."""
        return _unary(F.log, "log", self)

    def sigmoid(self) -> Tensor:
        """Stable logistic sigmoid; see ``leanpass.sigmoid``."""
        return _unary(F.sigmoid, "sigmoid", self)

    def tanh(self) -> Tensor:
        """Hyperbolic tangent; see ``leanpass.tanh``."""
        return _unary(F.tanh, "tanh", self)

    def sqrt(self) -> Tensor:
        """Square root; see ``leanpass.sqrt``."""
        return _unary(F.sqrt, "sqrt", self)

    def abs(self) -> Tensor:
        """Absolute value; see ``leanpass.abs``."""
        return _unary(F.abs, "abs", self)

    def clip(self, lo: Any = None, hi: Any = None) -> Tensor:
        """Clamp to ``[lo, hi]``; see ``leanpass.clip``."""
        return _unary(F.clip, "clip", self, lo, hi)

    def reshape(self, *shape: Any) -> Tensor:
        """Reshape (``t.reshape(2, -1)`` or ``t.reshape((2, -1))``); see ``leanpass.reshape``."""
        return _unary(F.reshape, "reshape", self, _shape_arg(shape))

    def flatten(self) -> Tensor:
        """All elements as one axis; see ``leanpass.flatten``."""
        return _unary(F.reshape, "reshape", self, (-1,))

    def transpose(self, *axes: Any) -> Tensor:
        """Permute axes (reverse them with no argument); see ``leanpass.transpose``."""
        return _unary(F.transpose, "transpose", self, _shape_arg(axes) if axes else None)

    permute = transpose

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """Swap two axes; see ``leanpass.swapaxes``."""
        return _unary(F.swapaxes, "swapaxes", self, axis1, axis2)

    def squeeze(self, axis: Any = None) -> Tensor:
        """Remove size-1 axes; see ``leanpass.squeeze``."""
        return _unary(F.squeeze, "squeeze", self, axis)

    def astype(self, dtype: Any) -> Tensor:
        """Cast to ``dtype`` (the gradient is cast back); see ``leanpass.astype``."""
        return _unary(F.astype, "astype", self, np.dtype(dtype))

    # ----- NumPy's dispatch protocols ---------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        from .numpy_dispatch import array_ufunc

        return array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        from .numpy_dispatch import array_function

        return array_function(func, args, kwargs)


def _setattr(self: Tensor, name: str, value: Any) -> None:
    """Tensors are frozen; the one writable slot is ``.grad`` (where ``backward`` leaves gradients)."""
    if name != "grad":
        raise FrozenInstanceError(
            f"Tensors are immutable: cannot assign to '{name}'. Build a new Tensor instead "
            "(e.g. t = Tensor(values, requires_grad=True)), or update parameters functionally "
            "with leanpass.optim."
        )
    object.__setattr__(self, name, value)


Tensor.__setattr__ = _setattr  # type: ignore[method-assign, assignment]


# ----- recording ------------------------------------------------------------------------------
def _const(out: Any) -> Tensor:
    """A Tensor that records nothing (a constant, or any result computed under no_grad)."""
    t = _new(Tensor)
    t.__dict__["_data"] = out
    return t


def _node(out: Any, trace: int, name: str, parents: tuple[Any, ...], vjp: Any) -> Tensor:
    t = _new(Tensor)
    d = t.__dict__
    d["_data"] = out
    d["_trace"] = trace
    d["_op"] = name
    d["_parents"] = parents
    d["_vjp"] = vjp
    d["_seq"] = _next_seq()
    return t


def _plain(v: Any, name: str) -> Any:
    """A non-Tensor operand, checked: Python numbers and NumPy arrays are constants."""
    if isinstance(v, _PLAIN) and not isinstance(v, complex):
        return v
    raise TypeError(
        f"unsupported operand for {name!r}: {type(v).__name__}. LeanPass operations take "
        "Tensors, NumPy arrays and Python numbers; wrap other data with Tensor(...)."
    )


def _binary(fn: Callable[..., Any], name: str, a: Any, b: Any) -> Tensor:
    """Record a two-input op. ``a`` or ``b`` may be a constant (array or Python number)."""
    if type(a) is Tensor:
        ad, ta = a._data, a._trace
    else:
        ad, ta = _plain(a, name), 0
    if type(b) is Tensor:
        bd, tb = b._data, b._trace
    else:
        bd, tb = _plain(b, name), 0
    trace = ta | tb
    if trace:
        trace &= _mask_get()
    try:
        out, vjp = fn(ad, bd, _NEED[(ta != 0) + 2 * (tb != 0)])
    except ValueError as e:
        raise _shape_error(name, ad, bd, e) from None
    node = _new(Tensor)
    d = node.__dict__
    d["_data"] = out
    if trace:  # _node, inlined: this is the hot path
        d["_trace"] = trace
        d["_op"] = name
        d["_parents"] = (a, b)
        d["_vjp"] = vjp
        d["_seq"] = _next_seq()
    return node


def _unary(fn: Callable[..., Any], name: str, x: Any, *params: Any) -> Tensor:
    """Record a one-input op; ``params`` (axis, exponent, ...) are constants passed after it."""
    if type(x) is Tensor:
        xd, trace = x._data, x._trace
    else:
        xd, trace = _plain(x, name), 0
    out, vjp = fn(xd, *params)
    if trace:
        trace &= _mask_get()
    node = _new(Tensor)
    d = node.__dict__
    d["_data"] = out
    if trace:  # _node, inlined: this is the hot path
        d["_trace"] = trace
        d["_op"] = name
        d["_parents"] = (x, *params)
        d["_vjp"] = vjp
        d["_seq"] = _next_seq()
    return node


def apply(fn: Callable[..., Any], name: str, *args: Any) -> Tensor:
    """Record any op: ``fn(*raw_args) -> (out, vjp)``, with Tensors anywhere among ``args``.

    This is how to record an op of your own (see docs/operations.md):

    >>> from leanpass import functional as F
    >>> x = Tensor([1.0, 2.0], requires_grad=True)
    >>> apply(F.exp, "exp", x)._op
    'exp'
    """
    trace = 0
    raw = []
    for a in args:
        if type(a) is Tensor:
            trace |= a._trace
            raw.append(a._data)
        else:
            raw.append(a)
    if trace:
        trace &= _mask_get()
    if name in F.TAKES_NEED:
        need = tuple(type(a) is Tensor and a._trace != 0 for a in args)
        out, vjp = fn(*raw, need=need)
    else:
        out, vjp = fn(*raw)
    if not trace:
        return _const(out)
    return _node(out, trace, name, args, vjp)


_lift.apply = apply


def _shape_error(name: str, a: Any, b: Any, err: ValueError) -> ValueError:
    if name == "@":
        return err
    sa, sb = np.shape(a), np.shape(b)
    return ValueError(
        f"{name!r}: shapes {sa} and {sb} do not broadcast. NumPy broadcasting lines up trailing "
        "axes, and each pair must be equal or 1; reshape an operand (e.g. x.reshape(-1, 1)) so "
        f"they match. ({err})"
    )


def _value(v: Any) -> Any:
    return v._data if type(v) is Tensor else v


def _plain_index(index: Any) -> Any:
    """An index with any Tensors in it replaced by their (integer or boolean) arrays."""
    if type(index) is tuple:
        return tuple(_value(i) for i in index)
    return _value(index)


def _shape_arg(args: tuple[Any, ...]) -> Any:
    """``f(2, 3)`` and ``f((2, 3))`` both mean the tuple ``(2, 3)``."""
    return tuple(args[0]) if len(args) == 1 and isinstance(args[0], (tuple, list)) else args


# ----- no_grad --------------------------------------------------------------------------------
@contextmanager
def no_grad() -> Iterator[None]:
    """Record nothing inside this block: results are constants (also a decorator).

    Safe across threads and asyncio tasks (it is a context variable).

    >>> x = Tensor([1.0], requires_grad=True)
    >>> with no_grad():
    ...     y = x * 2
    >>> y.requires_grad
    False
    """
    token = _grad_mask.set(0)
    try:
        yield
    finally:
        _grad_mask.reset(token)


@contextmanager
def _grad_enabled() -> Iterator[None]:
    token = _grad_mask.set(-1)
    try:
        yield
    finally:
        _grad_mask.reset(token)
