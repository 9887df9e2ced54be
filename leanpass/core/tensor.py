"""The immutable ``Tensor`` and the few functions that record operations on it.

A Tensor holds a read-only array and, when it was computed from Tensors that require grad,
the node of the graph that made it: ``_op`` (the op's name in ``functional.OPS``), ``_parents``
(the op's inputs in order: Tensors are the graph's edges, anything else is a constant the op
was called with; kept in the slots ``_a``, ``_b`` and ``_rest`` rather than a tuple per node)
and ``_vjp`` (the op's rule, bound to the raw arrays it saved).

``_marks`` is a bit mask saying which differentiations a Tensor takes part in (its marks): bit 0
for ``requires_grad`` leaves (``.backward()``), one higher bit per nesting level of the transforms
that differentiate (``grad``, ``vjp``, ``jvp``, ...).
It is 0 for a constant, so recording costs nothing when no gradient is wanted.
"""

from __future__ import annotations

import functools
import itertools
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, TypeVar

import numpy as np

from .. import functional as F
from ..functional import _lift
from ..functional._registry import BATCHED as _BATCHED
from ..functional._registry import LAZY_MODULE as _LAZY_MODULE
from ..functional._registry import REGISTRY as _REGISTRY
from ..functional._registry import load_all, refuse_batched
from .tree import tree_flatten, tree_unflatten

# Which marks may record right now: -1 (all) normally, 0 inside ``no_grad()``.
_grad_mask: ContextVar[int] = ContextVar("leanpass_grad_mask", default=-1)
_mask_get = _grad_mask.get
_next_seq = itertools.count(1).__next__  # creation order: the reverse pass runs in its reverse
_NUMBER = (float, int)
_NEITHER, _FIRST, _SECOND, _BOTH = (False, False), (True, False), (False, True), (True, True)


class _Absent:
    """What an unused parent slot of a Tensor holds (a leaf has no parents, a one-input op one)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<no parent>"


_ABSENT: Any = _Absent()
# Set once any no_grad() block has been entered, in any thread (or debug_nans() or jvp): until then
# the recorders skip their slow path and the context variable (the common case). The variable stays
# the source of truth.
_no_grad_entered = 0

ArrayLike = Any  # a Tensor, NumPy array, nested list or Python number
_F = TypeVar("_F", bound=Callable[..., Any])


def _binary_op(fn: Callable[..., Any], name: str, reflected: bool = False) -> Callable[[Any, Any], Tensor]:
    """The recorder of a two-input op, used as an operator method (``__mul__ = _binary_op(F.mul, "*")``).

    ``self`` is a Tensor; ``other`` a Tensor, a Python number or an array. It runs ``fn`` on the
    raw values (``other`` first when ``reflected``) and records the node. This is the hot path:
    everything is inline, and nothing is recorded when no input requires grad.
    """

    def record(self: Any, other: Any) -> Tensor:
        ts = self._marks
        if type(other) is Tensor:
            od = other._data
            to = other._marks
            need = (_BOTH if to else _FIRST) if ts else (_SECOND if to else _NEITHER)
        else:  # a constant: a Python number (the common case, first) or an array
            od = other if type(other) in _NUMBER else _operand(other, name)
            to = 0
            need = _FIRST if ts else _NEITHER
        try:
            out, vjp = fn(self._data, od, need)
        except ValueError as e:
            raise _shape_error(name, self._data, od, False, e) from None
        marks = ts | to
        if not marks:
            return _const(out)
        if _no_grad_entered:  # (the slow path: no_grad(), debug_nans() or jvp was entered)
            return _recorded(name, out, vjp, marks, (self, other))
        node: Any = _Building()
        node._data = out
        node._grad = None
        node._marks = marks
        node._op = name
        node._a = self
        node._b = other
        node._rest = ()
        node._vjp = vjp
        node._seq = _next_seq()
        node.__class__ = Tensor
        return node

    def record_reflected(self: Any, other: Any) -> Tensor:  # other <op> self
        if type(other) is Tensor:
            return record(other, self)
        ts = self._marks
        od = other if type(other) in _NUMBER else _operand(other, name)
        try:
            out, vjp = fn(od, self._data, _SECOND if ts else _NEITHER)
        except ValueError as e:
            raise _shape_error(name, self._data, od, True, e) from None
        if not ts:
            return _const(out)
        if _no_grad_entered:
            return _recorded(name, out, vjp, ts, (other, self))
        return _node(out, ts, name, (other, self), vjp)  # (the rarer side: the generic builder)

    recorder = record_reflected if reflected else record
    recorder.__name__ = f"{'reflected ' if reflected else ''}{name}"
    recorder.__doc__ = f"``{'other ' + name + ' self' if reflected else 'self ' + name + ' other'}`` (op {name!r})."
    return recorder


def _linear(x: Any, w: Any, b: Any) -> Tensor:
    """Record ``x @ w + b`` (op ``"linear"``), each input a Tensor or a plain array: a dense
    layer's one node. Its own recorder, like the binary ops' (``apply`` costs a third more)."""
    xd, tx = (x._data, x._marks) if type(x) is Tensor else (_operand(x, "linear"), 0)
    wd, tw = (w._data, w._marks) if type(w) is Tensor else (_operand(w, "linear"), 0)
    bd, tb = (b._data, b._marks) if type(b) is Tensor else (_operand(b, "linear"), 0)
    marks = tx | tw | tb
    out, vjp = F.linear(xd, wd, bd, (tx != 0, tw != 0, tb != 0))
    if marks and _no_grad_entered:
        return _recorded("linear", out, vjp, marks, (x, w, b))
    return _node(out, marks, "linear", (x, w, b), vjp) if marks else _const(out)


def _unary_op(fn: Callable[..., Any], name: str) -> Callable[[Any], Tensor]:
    """The recorder of a one-input op without parameters, used as a method (``relu = _unary_op(F.relu, "relu")``)."""

    def record(x: Any) -> Tensor:
        if type(x) is Tensor:
            xd = x._data
            marks = x._marks
        else:
            xd = _operand(x, name)
            marks = 0
        out, vjp = fn(xd)
        if not marks:
            return _const(out)
        if _no_grad_entered:
            return _recorded(name, out, vjp, marks, (x,))
        node: Any = _Building()
        node._data = out
        node._grad = None
        node._marks = marks
        node._op = name
        node._a = x
        node._b = _ABSENT
        node._rest = ()
        node._vjp = vjp
        node._seq = _next_seq()
        node.__class__ = Tensor
        return node

    record.__name__ = name
    record.__doc__ = f"{fn.__doc__.splitlines()[0] if fn.__doc__ else name} (op {name!r}; see leanpass.{name})."
    return record


class Tensor:
    """An immutable n-dimensional array that records the operations made from it.

    ``Tensor(data, requires_grad=False, dtype=None, name=None)`` copies ``data`` (lists, Python
    numbers, arrays). Only floating-point Tensors can require grad (integer data asking for it
    becomes float64). A Tensor's array is never written in place. A leaf that requires grad is a
    parameter: ``p.data = new`` and the optimizers' ``step()`` give it a new array (see ``data``);
    every other Tensor is frozen.

    >>> x = Tensor([2.0, 3.0], requires_grad=True)
    >>> y = (x ** 2).sum()
    >>> y.backward()
    >>> x.grad
    Tensor([4., 6.])
    """

    # Slots, not a __dict__: a graph node is then one small object for the garbage collector.
    __slots__ = ("_data", "_marks", "_op", "_a", "_b", "_rest", "_vjp", "_seq", "_grad", "_tangent", "_info",
                 "__weakref__")
    _data: Any
    _marks: int
    _op: str
    # The parents, without a tuple per node (one object fewer for the garbage collector to track):
    # the first two inputs, then any others. ``_parents`` puts them back together.
    _a: Any
    _b: Any
    _rest: tuple[Any, ...]
    _vjp: Callable[[Any], tuple[Any, ...]] | None
    _seq: int
    _grad: Tensor | None
    _tangent: Any  # set only on a node made inside a jvp: its tangent there (see leanpass.forward)
    _info: _SlotInfo  # set only on a Tensor given a name or new values (``.data = ...``); unset otherwise

    def __init__(self, data: ArrayLike, requires_grad: bool = False, dtype: Any = None,
                 name: str | None = None) -> None:
        if type(data) is Tensor and data._marks:
            raise TypeError(
                "Tensor(t): t is being differentiated, and a new Tensor made from it would be a "
                "constant that silently drops its gradient. Use t itself (or t.astype(dtype)); for "
                "a constant copy on purpose, Tensor(t.detach()) or leanpass.stop_gradient(t)."
            )
        try:
            if getattr(type(data), "_lp_asarray", None) is not None:  # a stand-in of jit: a copy it records
                arr = np.copy(data) if dtype is None else np.copy(data).astype(dtype)
            else:
                arr = np.array(data, dtype=dtype)
        except ConversionError:
            raise
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
        if requires_grad and arr.dtype.kind in "biu" and dtype is None:  # ([1, 2, 3]: float64, as in LeanPass 0.1)
            arr = arr.astype(np.float64)
        if requires_grad and arr.dtype.kind != "f":
            raise TypeError(
                f"requires_grad=True needs floating-point data, but got dtype {arr.dtype}. "
                "Pass float data (e.g. Tensor([1.0, 2.0])) or dtype=np.float64 / np.float32."
            )
        arr.flags.writeable = False
        _fill(self, arr, 1 if requires_grad else 0, _next_seq())
        if name is not None:
            object.__setattr__(self, "_info", _SlotInfo(str(name)))

    @property
    def _parents(self) -> tuple[Any, ...]:
        """The op's inputs in order: Tensors are the graph's edges, anything else a constant it took."""
        if self._b is _ABSENT:
            return () if self._a is _ABSENT else (self._a,)
        return (self._a, self._b) + self._rest

    # ----- what a user reads -------------------------------------------------------------
    @property
    def data(self) -> np.ndarray:
        """The values as a read-only NumPy array, cut from the graph (copy it to edit: ``t.data.copy()``).

        As PyTorch's ``.data``, an explicit read of the values; inside ``grad`` / ``vjp`` /
        ``jacobian`` it raises for a Tensor being differentiated (use ``leanpass.stop_gradient``).

        >>> Tensor([1.0, 2.0], requires_grad=True).data
        array([1., 2.])
        """
        if self._marks > 1:
            raise _escape(self, "t.data")
        d = self._data
        if not isinstance(d, np.ndarray):
            d = np.asarray(d)
        d.flags.writeable = False
        return d

    @data.setter
    def data(self, value: ArrayLike) -> None:
        """``p.data = new`` gives a parameter (a leaf with ``requires_grad=True``) a new array: a copy of
        ``new`` in ``p``'s dtype and of ``p``'s shape. The old array is not written: a graph recorded
        before keeps the values it saw (see ``version``). Any other Tensor is frozen.

        >>> w = Tensor([1.0, 2.0], requires_grad=True)
        >>> w.data = w.data - 0.5
        >>> w
        Tensor([0.5, 1.5], requires_grad=True)
        """
        _set_data(self, value)

    @property
    def name(self) -> str | None:
        """The name given with ``Tensor(..., name=...)`` (shown by ``visualize``), or None.

        >>> Tensor([1.0], name="w").name
        'w'
        """
        info = getattr(self, "_info", None)
        return None if info is None else info.name

    @name.setter
    def name(self, value: str | None) -> None:
        _info(self).name = None if value is None else str(value)

    @property
    def version(self) -> int:
        """How many times this parameter was given new values (``p.data = ...``, an optimizer step,
        ``p -= ...`` under ``no_grad()``); 0 for any other Tensor. As PyTorch's version counter: a
        ``backward()`` through a graph recorded before a change gives the gradient at the values that
        graph saw, and a ``create_graph=True`` one, which would need the old values again, raises.

        >>> w = Tensor([1.0], requires_grad=True)
        >>> w.data = [2.0]
        >>> w.version
        1
        """
        info = getattr(self, "_info", None)
        return 0 if info is None else info.version

    def numpy(self) -> np.ndarray:
        """The values as a read-only NumPy array.

        A Tensor that requires grad raises instead, as in PyTorch: its gradient would be lost
        silently. Read ``t.detach().numpy()`` (or ``t.data``) when a constant is meant.

        >>> Tensor([1.0, 2.0]).numpy()
        array([1., 2.])
        """
        if self._marks:
            raise _escape(self, "t.numpy()")
        return self.data

    def item(self) -> Any:
        """The value of a one-element Tensor as a Python number.

        Reading a loss for logging works (``loss.item()``); inside ``grad`` / ``vjp`` /
        ``jacobian`` it raises for a Tensor being differentiated, since a Python number
        carries no gradient.

        >>> Tensor([[2.5]]).item()
        2.5
        """
        if self._marks > 1:
            raise _escape(self, "t.item()")
        return self._data.item()

    def tolist(self) -> Any:
        """The values as nested Python lists (raises, as ``.item()``, inside a transform).

        >>> Tensor([1.0, 2.0]).tolist()
        [1.0, 2.0]
        """
        if self._marks > 1:
            raise _escape(self, "t.tolist()")
        return np.asarray(self._data).tolist()

    @property
    def grad(self) -> Tensor | None:
        """The gradient ``backward()`` accumulated here (None until then), a constant Tensor that works
        as an array (NumPy arithmetic, ``np.allclose``, ``.copy()``). Clear it with ``t.grad = None``;
        it can also be set to an array (or a Tensor) of this Tensor's shape.

        >>> w = Tensor([1.0, 2.0], requires_grad=True)
        >>> w.grad = np.zeros(2)
        >>> w.grad
        Tensor([0., 0.])
        """
        return self._grad

    @grad.setter
    def grad(self, value: ArrayLike | None) -> None:
        if value is not None and type(value) is not Tensor:  # an array (LeanPass 0.1's .grad), a list
            value = _grad_value(self, value)
        if _slot_hook is not None and self._marks & 1 and self._op == "leaf":
            _slot_hook(self, "grad", value)
        object.__setattr__(self, "_grad", value)

    @property
    def requires_grad(self) -> bool:
        """True when this Tensor is part of a graph that gradients flow through."""
        return self._marks != 0

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
        """The number of elements (an int, as in NumPy: ``t.size``, not PyTorch's ``t.size()``)."""
        return _Size(np.size(self._data))

    @property
    def T(self) -> Tensor:  # noqa: N802 - NumPy's name
        """The transpose (axes reversed)."""
        return _unary(F.transpose, "transpose", self, None)

    def __len__(self) -> int:
        return len(self._data)

    def __reduce__(self) -> tuple[Any, ...]:
        # copy, deepcopy and pickle give a new leaf with the same values (the graph is not copied),
        # as PyTorch does for a leaf; a computed Tensor on a graph would lose its history
        if self._marks > 1 or (self._marks and self._op != "leaf"):
            raise _escape(self, "copy / deepcopy / pickle")
        return (Tensor, (np.asarray(self._data), self.requires_grad))

    def __iter__(self) -> Iterator[Tensor]:
        if self.ndim == 0:
            raise TypeError("iteration over a 0-d Tensor; use .item() for its value")
        for i in range(len(self._data)):
            yield self[i]

    def __repr__(self) -> str:
        if getattr(self._data, "_lp_traced", False):  # inside lp.jit: no values to show (nor to read)
            return f"Tensor({self._data!r})"
        body = np.array2string(np.asarray(self._data), separator=", ", prefix="Tensor(")
        extra = "" if self.dtype == np.float64 else f", dtype={self.dtype}"
        if self._marks:
            extra += ", requires_grad=True"
        if self._op != "leaf":
            extra += f", op={self._op!r}"
        return f"Tensor({body}{extra})"

    def __format__(self, spec: str) -> str:
        """``f"{t:.3f}"``: a 0-d Tensor formats its value, as a NumPy scalar or 0-d array does;
        any other raises for a non-empty spec, as a NumPy array does (``f"{t}"`` is ``str(t)``).

        >>> f"{Tensor(2.0) / 3:.3f}"
        '0.667'
        """
        if not spec:
            return str(self)
        data = self._data
        if getattr(data, "_lp_traced", False):
            raise TypeError(
                f"format(t, {spec!r}): the Tensor holds a value traced by lp.jit or lp.vmap, which has no "
                "single value to format while it is traced. Return it from the function and format the result."
            )
        if np.ndim(data) == 0:
            return format(np.asarray(data)[()], spec)
        raise TypeError(
            f"unsupported format string passed to Tensor.__format__: a Tensor of shape {np.shape(data)} has no "
            f"single value to format with {spec!r} (NumPy arrays neither). Format t.item() of a one-element "
            "Tensor, or the values with np.array2string(t.numpy(), formatter=...)."
        )

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        if self._marks:
            raise _escape(self, "np.asarray(t)")
        arr = self.data
        return arr if dtype is None or dtype == arr.dtype else arr.astype(dtype)

    def __bool__(self) -> bool:
        return bool(self._data)

    def __float__(self) -> float:
        if self._marks > 1:
            raise _escape(self, "float(t)")
        return float(self._data)

    def __int__(self) -> int:
        if self._marks > 1:
            raise _escape(self, "int(t)")
        return int(self._data)

    def __index__(self) -> int:
        if self._marks > 1:
            raise _escape(self, "an index")
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
        _backward(self, cotangent, create_graph)

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
    __add__ = _binary_op(F.add, "+")
    __radd__ = _binary_op(F.add, "+", reflected=True)
    __sub__ = _binary_op(F.sub, "-")
    __rsub__ = _binary_op(F.sub, "-", reflected=True)
    __mul__ = _binary_op(F.mul, "*")
    __rmul__ = _binary_op(F.mul, "*", reflected=True)
    __truediv__ = _binary_op(F.div, "/")
    __rtruediv__ = _binary_op(F.div, "/", reflected=True)
    __pow__ = _binary_op(F.power, "**")
    __rpow__ = _binary_op(F.power, "**", reflected=True)
    __matmul__ = _binary_op(F.matmul, "@")
    __rmatmul__ = _binary_op(F.matmul, "@", reflected=True)
    matmul = _binary_op(F.matmul, "@")
    __mod__ = _binary_op(F.remainder, "remainder")
    __rmod__ = _binary_op(F.remainder, "remainder", reflected=True)
    __neg__ = _unary_op(F.neg, "neg")
    relu = _unary_op(F.relu, "relu")
    exp = _unary_op(F.exp, "exp")
    log = _unary_op(F.log, "log")
    sigmoid = _unary_op(F.sigmoid, "sigmoid")
    tanh = _unary_op(F.tanh, "tanh")
    sqrt = _unary_op(F.sqrt, "sqrt")
    abs = _unary_op(F.abs, "abs")

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

    def clip(self, a_min: Any = None, a_max: Any = None) -> Tensor:
        """Clamp to ``[a_min, a_max]`` (either may be None); see ``leanpass.clip``.

        >>> Tensor([-1.0, 0.5, 2.0]).clip(0.0, 1.0)
        Tensor([0. , 0.5, 1. ])
        """
        return _unary(F.clip, "clip", self, a_min, a_max)

    def clamp(self, min: Any = None, max: Any = None) -> Tensor:  # noqa: A002 - PyTorch's names
        """PyTorch's name for ``clip(min, max)`` (op ``"clip"``).

        >>> Tensor([-1.0, 0.5, 2.0]).clamp(min=0.0)
        Tensor([0. , 0.5, 2. ])
        """
        return _unary(F.clip, "clip", self, min, max)

    def leaky_relu(self, negative_slope: float = 0.01) -> Tensor:
        """``x`` where ``x > 0``, else ``negative_slope * x``; see ``leanpass.leaky_relu``.

        >>> Tensor([-2.0, 3.0]).leaky_relu(0.1)
        Tensor([-0.2,  3. ])
        """
        return _unary(F.leaky_relu, "leaky_relu", self, negative_slope)

    def gelu(self) -> Tensor:
        """GELU in its tanh approximation, ``0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3)))``; see
        ``leanpass.gelu``.

        >>> Tensor([1.0]).gelu().round(4)
        Tensor([0.8412])
        """
        return _unary(F.gelu, "gelu", self)

    def copy(self) -> Tensor:
        """A Tensor of the same values, as NumPy's ``a.copy()`` (recorded: gradients flow through it, as
        through PyTorch's ``clone()``). Tensors are immutable, so a copy is only needed as a value of its
        own; for a NumPy array to edit, use ``np.array(t.data)``.

        >>> Tensor([1.0, 2.0]).copy()
        Tensor([1., 2.])
        """
        return self if not self._marks else _unary(F.reshape, "reshape", self, np.shape(self._data))

    # ----- the graph, as LeanPass 0.1 showed it (leanpass.core.graph) ---------------------------------
    def visualize(self) -> str:
        """The graph that made this Tensor, as text: a line per node (``Node <id>: <op> shape=<shape>``,
        ``leaf`` for an input, with its name), then a line per edge (``Edge <input id> -> <node id>``).

        >>> print(Tensor([1.0], requires_grad=True, name="w").visualize())  # doctest: +ELLIPSIS
        Node ...: leaf (w) shape=(1,)
        """
        return _graph_tools().visualize(self)

    def visualize_dot(self) -> str:
        """The graph that made this Tensor in Graphviz's DOT language (``dot -Tsvg``): a box per op, an
        ellipse per input.

        >>> print(Tensor([1.0], requires_grad=True).visualize_dot().splitlines()[0])
        digraph computation_graph {
        """
        return _graph_tools().visualize_dot(self)

    def grad_check(self, eps: float = 1e-6, tol: float = 1e-4) -> list[tuple[Tensor, float, Any, Any]]:
        """Compare the gradient of ``self.sum()`` with central finite differences, for each leaf of the graph
        that requires grad: a list of ``(leaf, max abs difference, analytic, numeric)`` for the leaves whose
        difference exceeds ``tol`` (empty when all agree). Nothing is changed (no ``.grad`` written).

        >>> w = Tensor([1.0, 2.0], requires_grad=True)
        >>> (w * w).sum().grad_check()
        []
        """
        return _graph_tools().grad_check(self, eps, tol)

    def zero_grad_all(self) -> None:
        """Set ``.grad`` to zeros on every Tensor of the graph that made this one and requires grad.

        >>> w = Tensor([1.0], requires_grad=True)
        >>> y = w * 2
        >>> y.backward(); y.zero_grad_all(); w.grad
        Tensor([0.])
        """
        _graph_tools().zero_grad_all(self)

    def reshape(self, *shape: Any) -> Tensor:
        """Reshape (``t.reshape(2, -1)`` or ``t.reshape((2, -1))``); see ``leanpass.reshape``."""
        return _unary(F.reshape, "reshape", self, _shape_arg(shape))

    def take(self, indices: Any, axis: int | None = None) -> Tensor:
        """Elements (or slices along ``axis``) at ``indices``; see ``leanpass.take``."""
        return _take(self, indices, axis)

    # NumPy's array methods for the functions of leanpass.ops_math / ops_arrays / ops_contract
    def prod(self, axis: Any = None, keepdims: bool = False) -> Tensor:
        """Product over ``axis``; see ``leanpass.prod``."""
        return _unary(F.prod, "prod", self, axis, bool(keepdims))

    def cumsum(self, axis: int | None = None) -> Tensor:
        """Running sum along ``axis``; see ``leanpass.cumsum``."""
        return _unary(F.cumsum, "cumsum", self, axis)

    def cumprod(self, axis: int | None = None) -> Tensor:
        """Running product along ``axis``; see ``leanpass.cumprod``."""
        return _unary(F.cumprod, "cumprod", self, axis)

    def round(self, decimals: int = 0) -> Tensor:
        """Rounded to ``decimals`` places (gradient 0); see ``leanpass.round``."""
        return _unary(F.round, "round", self, decimals)

    def dot(self, other: ArrayLike) -> Tensor:
        """``np.dot(self, other)``; see ``leanpass.dot``."""
        return _dot(self, other)

    def trace(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        """The sum along a diagonal; see ``leanpass.trace``."""
        return _diagonal(self, offset, axis1, axis2).sum(axis=-1)

    def diagonal(self, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
        """A diagonal, as the last axis; see ``leanpass.diagonal``."""
        return _diagonal(self, offset, axis1, axis2)

    def repeat(self, repeats: Any, axis: int | None = None) -> Tensor:
        """Entries repeated along ``axis``; see ``leanpass.repeat``."""
        return _repeat(self, repeats, axis)

    def ravel(self) -> Tensor:
        """All elements as one axis (same as ``flatten``)."""
        return _unary(F.reshape, "reshape", self, (-1,))

    def flatten(self) -> Tensor:
        """All elements as one axis; see ``leanpass.flatten``."""
        return _unary(F.reshape, "reshape", self, (-1,))

    def transpose(self, *axes: Any) -> Tensor:
        """Permute axes (reverse them with no argument); see ``leanpass.transpose``."""
        perm = _shape_arg(axes) if axes else None
        if perm is not None and len(perm) != np.ndim(self._data):
            raise _transpose_error(perm, np.shape(self._data))
        return _unary(F.transpose, "transpose", self, perm)

    permute = transpose

    def swapaxes(self, axis1: int, axis2: int) -> Tensor:
        """Swap two axes; see ``leanpass.swapaxes``."""
        return _unary(F.swapaxes, "swapaxes", self, axis1, axis2)

    def squeeze(self, axis: Any = None) -> Tensor:
        """Remove size-1 axes; see ``leanpass.squeeze``."""
        return _unary(F.squeeze, "squeeze", self, axis)

    def astype(self, dtype: Any) -> Tensor:
        """Cast to ``dtype`` (the gradient is cast back); see ``leanpass.astype``."""
        return _astype(self, dtype)

    # ----- more of what NumPy and PyTorch users reach for -------------------------------------
    @property
    def op(self) -> str:
        """The name of the op that made this Tensor (``"leaf"`` for one made directly), read-only.

        >>> (Tensor([1.0], requires_grad=True) * 2).op
        '*'
        """
        return self._op

    @property
    def mT(self) -> Tensor:  # noqa: N802 - NumPy's and PyTorch's name
        """The last two axes swapped (a batch of matrices, each transposed).

        >>> Tensor(np.zeros((5, 2, 3))).mT.shape
        (5, 3, 2)
        """
        if np.ndim(self._data) < 2:
            raise ValueError(f".mT needs at least 2 axes (a matrix or a batch of them), got shape {self.shape}")
        return _unary(F.swapaxes, "swapaxes", self, -2, -1)

    def argmax(self, axis: int | None = None, keepdims: bool = False) -> Any:
        """Indices of the maxima along ``axis`` (of the flattened values when None), as NumPy integers.

        Not differentiable, like the comparisons: the result is a plain NumPy array (or integer).

        >>> Tensor([[1.0, 3.0], [4.0, 2.0]]).argmax(axis=1)
        array([1, 0])
        """
        return np.argmax(self._data, axis=axis, keepdims=keepdims)

    def argmin(self, axis: int | None = None, keepdims: bool = False) -> Any:
        """Indices of the minima along ``axis``, as NumPy integers (see ``argmax``).

        >>> Tensor([[1.0, 3.0], [4.0, 2.0]]).argmin(axis=1)
        array([0, 1])
        """
        return np.argmin(self._data, axis=axis, keepdims=keepdims)

    def softmax(self, axis: int = -1) -> Tensor:
        """Softmax along ``axis``; see ``leanpass.softmax``.

        >>> Tensor([0.0, 0.0]).softmax()
        Tensor([0.5, 0.5])
        """
        return _unary(F.softmax, "softmax", self, axis)

    def log_softmax(self, axis: int = -1) -> Tensor:
        """Log-softmax along ``axis``; see ``leanpass.log_softmax``.

        >>> Tensor([0.0, 0.0]).log_softmax().exp()
        Tensor([0.5, 0.5])
        """
        return _unary(F.log_softmax, "log_softmax", self, axis)

    # PyTorch spellings with a NumPy name, as methods that say so. (Not a ``__getattr__``: a class
    # with one loses CPython's fast attribute access on every ``t._data``, about 12% of the engine.)
    def view(self, *shape: Any) -> Tensor:
        """PyTorch's ``t.view(...)``: raises ``TypeError`` naming NumPy's (and LeanPass's) ``t.reshape(...)``.

        >>> Tensor([1.0, 2.0]).view(2, 1)
        Traceback (most recent call last):
          ...
        TypeError: t.view(...) is PyTorch's spelling; LeanPass uses NumPy's: t.reshape(...)
        """
        raise TypeError("t.view(...) is PyTorch's spelling; LeanPass uses NumPy's: t.reshape(...)")

    def dim(self) -> int:
        """PyTorch's ``t.dim()``: raises ``TypeError`` naming NumPy's ``t.ndim`` (a property).

        >>> Tensor([1.0, 2.0]).dim()
        Traceback (most recent call last):
          ...
        TypeError: t.dim() is PyTorch's spelling; LeanPass uses NumPy's: t.ndim (a property)
        """
        raise TypeError("t.dim() is PyTorch's spelling; LeanPass uses NumPy's: t.ndim (a property)")

    def _in_place(self, result: Tensor) -> Tensor:
        """``p -= ...`` (and ``+=``, ``*=``, ``/=``) on a parameter inside ``no_grad()`` gives ``p`` the new
        values, as in PyTorch (see ``__isub__``); anywhere else it rebinds the name to the result."""
        if self._marks == 1 and self._op == "leaf" and _no_grad_entered and not _mask_get() & 1:
            _set_data(self, result)
            return self
        return result

    def __iadd__(self, other: Any) -> Tensor:
        return self._in_place(self + other)

    def __isub__(self, other: Any) -> Tensor:
        """``w -= x`` inside ``no_grad()`` on a parameter (a leaf with ``requires_grad=True``) gives it new
        values (``w.data = w.data - x``, a new array: graphs recorded before keep theirs), as PyTorch's
        in-place update; elsewhere ``t -= x`` rebinds ``t`` to ``t - x``.

        >>> w = Tensor([1.0], requires_grad=True)
        >>> (w * 3).sum().backward()
        >>> with no_grad():
        ...     w -= 0.1 * w.grad
        >>> w
        Tensor([0.7], requires_grad=True)
        """
        return self._in_place(self - other)

    def __imul__(self, other: Any) -> Tensor:
        return self._in_place(self * other)

    def __itruediv__(self, other: Any) -> Tensor:
        return self._in_place(self / other)

    # ----- NumPy's dispatch protocols ---------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        return _array_ufunc(ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        return _array_function(func, args, kwargs)


# ----- PyTorch spellings: messages that name the NumPy (LeanPass) one ---------------------------
def _axis_not_dim(fn: _F) -> _F:
    """``fn``, answering PyTorch's ``dim=`` keyword with NumPy's ``axis=`` (an ops function or a method)."""

    name = fn.__qualname__
    where = "t." + name[7:] if name.startswith("Tensor.") else "leanpass." + name

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if "dim" in kwargs:
            raise TypeError(
                f"{where}(dim={kwargs['dim']!r}): LeanPass uses NumPy's "
                f"name for it, axis= (write axis={kwargs['dim']!r})."
            )
        return fn(*args, **kwargs)

    return call  # type: ignore[return-value]


def _transpose_error(perm: tuple[Any, ...], shape: tuple[int, ...]) -> ValueError:
    hint = ""
    if len(perm) == 2 and len(shape) > 2:
        hint = (f" PyTorch's t.transpose({perm[0]}, {perm[1]}) swaps two axes: NumPy's (and LeanPass's) "
                f"spelling is t.swapaxes({perm[0]}, {perm[1]}) (t.mT for the last two).")
    return ValueError(
        f"transpose{tuple(perm)}: a Tensor of shape {shape} needs a permutation of all its {len(shape)} axes, "
        f"as in NumPy.{hint}"
    )


class _Size(int):
    """``t.size``: the number of elements, an int (as in NumPy). Calling it, as in PyTorch, says so."""

    __slots__ = ()

    def __call__(self, *args: Any) -> Any:
        raise TypeError(
            f"t.size is NumPy's number of elements ({int(self)}), not a method: t.size() is PyTorch's "
            "spelling of the shape. Use t.shape (and t.shape[i] for t.size(i))."
        )


def _setattr(self: Tensor, name: str, value: Any) -> None:
    """Tensors are frozen; the writable slots are ``.grad`` (where ``backward`` leaves gradients),
    ``.name``, and a parameter's ``.data`` (a new array, see ``Tensor.data``)."""
    if name not in ("grad", "data", "name"):
        raise _frozen(f"cannot assign to '{name}'")
    object.__setattr__(self, name, value)


class _SlotInfo:
    """What a Tensor holds beyond its array, when it has any: its name; for a parameter given new
    values, their count (``version``) and when the last came (``changed``: a ``_seq``, so that a node
    with a smaller ``_seq`` was recorded from the values before)."""

    __slots__ = ("name", "version", "changed")

    def __init__(self, name: str | None = None) -> None:
        self.name = name
        self.version = 0
        self.changed = 0


def _info(t: Tensor) -> _SlotInfo:
    info = getattr(t, "_info", None)
    if info is None:
        info = _SlotInfo()
        object.__setattr__(t, "_info", info)
    return info


def is_parameter(t: Any) -> bool:
    """True for a parameter slot: a leaf Tensor made with ``requires_grad=True``, whose array ``.data = ...``
    and the optimizers may replace.

    >>> is_parameter(Tensor([1.0], requires_grad=True)), is_parameter(Tensor([1.0]))
    (True, False)
    """
    return type(t) is Tensor and t._marks == 1 and t._op == "leaf"


def _set_data(t: Tensor, value: Any) -> None:
    """``t.data = value``: a new array for a parameter (checked, copied, read-only), its version counted."""
    if not is_parameter(t):
        what = f"a computed Tensor (op {t._op!r})" if t._op != "leaf" else (
            "a constant (requires_grad=False)" if not t._marks else "a transform's input")
        raise _frozen(
            f"cannot assign to 'data' of {what}: only a parameter (a leaf made with requires_grad=True) takes "
            "new values")
    if _slot_hook is not None:
        _slot_hook(t, "data", value)
    raw = value._data if type(value) is Tensor else value
    if getattr(type(raw), "_lp_asarray", None) is not None:  # a stand-in of jit: a copy it records
        _replace(t, np.copy(raw) if raw.dtype == t._data.dtype else np.copy(raw).astype(t._data.dtype))
        return
    try:
        arr = np.array(raw, dtype=t._data.dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f"p.data = ...: cannot make an array of {t._data.dtype} from {type(value).__name__} ({e})") \
            from None
    if arr.shape != t._data.shape:
        raise ValueError(
            f"p.data = ...: the new values have shape {arr.shape}, but the parameter has shape {t._data.shape}. "
            "A parameter keeps its shape (recorded graphs and an optimizer's state depend on it); for another "
            "shape make a new parameter: p = Tensor(values, requires_grad=True)")
    _replace(t, arr)


def _replace(t: Tensor, arr: Any) -> None:
    """Put the new array ``arr`` (made for it, of ``t``'s shape and dtype) into the parameter ``t``."""
    if isinstance(arr, np.ndarray):
        arr.flags.writeable = False
    info = _info(t)
    info.version += 1
    info.changed = _next_seq()
    object.__setattr__(t, "_data", arr)


def replace_data(t: Tensor, arr: Any) -> None:
    """An optimizer's step: put ``arr``, a new array of ``t``'s shape and dtype that nothing else holds,
    into the parameter ``t`` (no copy; see ``Tensor.data`` for assignments by users).

    >>> w = Tensor([1.0], requires_grad=True)
    >>> replace_data(w, np.array([0.5])); w
    Tensor([0.5], requires_grad=True)
    """
    if _slot_hook is not None:
        _slot_hook(t, "data", arr)
    _replace(t, arr)


def _grad_value(t: Tensor, value: Any) -> Tensor:
    """``t.grad = value`` for a value that is not a Tensor: a constant copy in ``t``'s dtype and shape."""
    try:
        arr = np.array(value, dtype=t.dtype)
    except (TypeError, ValueError) as e:
        raise TypeError(f".grad must be None, a Tensor or an array of numbers, not {type(value).__name__} ({e})") \
            from None
    if arr.shape != t.shape:
        raise ValueError(f".grad = ...: an array of shape {arr.shape} for a Tensor of shape {t.shape}")
    arr.flags.writeable = False
    return _const(arr)


def check_version(p: Tensor, node: Tensor) -> None:
    """Raise if the parameter ``p`` was given new values after ``node`` (one of its users) was recorded: for
    a backward pass that must read ``p``'s values again (``create_graph=True``), as PyTorch raises.

    >>> w = Tensor([1.0], requires_grad=True)
    >>> check_version(w, w * 2)  # (no change since: nothing to say)
    """
    info = getattr(p, "_info", None)
    if info is not None and info.changed > node._seq:
        label = f"'{info.name}'" if info.name else f"of shape {p.shape}"
        raise RuntimeError(
            f"one of the variables needed for gradient computation has been modified by an inplace operation: "
            f"the parameter {label} is at version {info.version}, newer than the graph being differentiated "
            f"(op {node._op!r} was recorded before the change, by p.data = ..., an optimizer's step() or p -= ... "
            "under no_grad()). A create_graph=True backward pass reads the parameter's values again, and they are "
            "not the ones the graph saw. Compute the loss again after the step (or call backward() before the step)."
        )


# While lp.jit traces (in any thread): its ``hook(t, what, value)``, called before a parameter's ``data`` or
# ``grad`` is replaced (None otherwise). See ``set_slot_hook``.
_slot_hook: Any = None


def set_slot_hook(hook: Callable[[Tensor, str, Any], None] | None) -> None:
    """Call ``hook(t, "data" | "grad", value)`` before a parameter ``t`` gets a new array or gradient (jit's,
    while it traces); None removes it.

    >>> set_slot_hook(None)
    """
    global _slot_hook
    _slot_hook = hook


def _delattr(self: Tensor, name: str) -> None:
    raise _frozen(f"cannot delete '{name}'")


def _frozen(what: str) -> Exception:
    # (dataclasses' error, as frozen dataclasses raise; imported here: `import leanpass` does not load dataclasses)
    from dataclasses import FrozenInstanceError

    return FrozenInstanceError(
        f"Tensors are immutable: {what}. Build a new Tensor instead (e.g. t = Tensor(values, requires_grad=True)), "
        "or update parameters functionally with leanpass.optim."
    )


Tensor.__setattr__ = _setattr  # type: ignore[method-assign, assignment]
Tensor.__delattr__ = _delattr  # type: ignore[method-assign, assignment]
for _name in ("sum", "mean", "max", "min", "var", "std", "squeeze", "softmax", "log_softmax", "argmax", "argmin",
              "take"):
    setattr(Tensor, _name, _axis_not_dim(getattr(Tensor, _name)))


class _Building(Tensor):
    """A Tensor under construction: its slots are written directly (no frozen ``__setattr__``),
    then its class becomes ``Tensor``. Same layout, so the switch is allowed and cheap."""

    __slots__ = ()
    # Both, so that CPython uses its C attribute setter directly (the slot serves set and delete).
    __setattr__ = object.__setattr__
    __delattr__ = object.__delattr__
    # ``_Building()`` then makes an empty one in C, without Tensor.__init__ (and more cheaply than
    # ``object.__new__(_Building)``, which goes through a Python-level method wrapper).
    __init__ = object.__init__


def _fill(t: Any, data: Any, marks: int, seq: int) -> None:
    """Write every slot of a new leaf Tensor (``Tensor.__init__`` is frozen; the recorders inline this)."""
    for name, value in (("_data", data), ("_marks", marks), ("_op", "leaf"), ("_a", _ABSENT), ("_b", _ABSENT),
                        ("_rest", ()), ("_vjp", None), ("_seq", seq), ("_grad", None)):
        object.__setattr__(t, name, value)


# ----- recording ------------------------------------------------------------------------------
def _const(out: Any, marks: int = 0, seq: int = 0) -> Tensor:
    """A leaf Tensor: one that records nothing (a constant, or any result computed under no_grad),
    or with ``marks`` and ``seq`` given, a new input of a transform."""
    t: Any = _Building()
    t._data = out
    t._marks = marks
    t._op = "leaf"
    t._a = t._b = _ABSENT
    t._rest = ()
    t._vjp = None
    t._seq = seq
    t._grad = None
    t.__class__ = Tensor
    return t


def _node(out: Any, marks: int, name: str, parents: tuple[Any, ...], vjp: Any) -> Tensor:
    """A recorded Tensor: ``out`` made by op ``name`` from ``parents``, pulled back by ``vjp``."""
    t: Any = _Building()
    t._data = out
    t._marks = marks
    t._op = name
    n = len(parents)
    t._a = parents[0] if n else _ABSENT
    t._b = parents[1] if n > 1 else _ABSENT
    t._rest = parents[2:]
    t._vjp = vjp
    t._seq = _next_seq()
    t._grad = None
    t.__class__ = Tensor
    return t


def _astype(x: Any, dtype: Any) -> Tensor:
    """``x.astype(dtype)``: recorded for a float dtype; to an integer or bool dtype the result is a
    constant (rounding has no gradient: a recorded cast would pass ``g`` back as if it had one)."""
    dt = np.dtype(dtype)
    if dt.kind in "biu":
        data = x._data if type(x) is Tensor else _operand(x, "astype")
        return _const((data if isinstance(data, _lift.ARRAYS) else np.asarray(data)).astype(dt))
    return _unary(F.astype, "astype", x, dt)


def _operand(v: Any, name: str) -> Any:
    """A non-Tensor operand, checked: Python numbers and real NumPy arrays are constants."""
    if type(v) is np.ndarray and v.dtype.kind != "c":  # the usual case (a batch), first
        return v
    if isinstance(v, _lift.OPERANDS) and not isinstance(v, complex):
        dtype: Any = getattr(v, "dtype", _REAL)
        if dtype.kind == "c":
            raise TypeError(
                f"{name!r}: a complex operand ({dtype}); LeanPass differentiates real numbers "
                "only. Split it into real and imaginary parts (two real Tensors) instead."
            )
        return v
    raise TypeError(
        f"unsupported operand for {name!r}: {type(v).__name__}. LeanPass operations take "
        "Tensors, NumPy arrays and Python numbers; wrap other data with Tensor(...)."
    )


_REAL = np.dtype(np.float64)


# ----- methods that are NumPy functions too: leanpass.numpy's take, dot, diagonal and repeat call these ---
def _axis(axis: int, ndim: int, name: str) -> int:
    """``axis`` as a non-negative index, with an error naming the op when it is out of range."""
    if not -ndim <= axis < ndim:
        raise np.exceptions.AxisError(f"{name}: axis {axis} is out of range for a Tensor with {ndim} axes")
    return axis % ndim


def _take(t: Tensor, indices: Any, axis: int | None) -> Tensor:
    idx = _value(indices)
    idx = idx if isinstance(idx, _lift.ARRAYS) else np.asarray(idx)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"take: indices must be integers, got dtype {idx.dtype}; use x[mask] for a boolean mask")
    if axis is None:
        return t.reshape(-1)[idx]
    return t[(slice(None),) * _axis(axis, t.ndim, "take") + (idx,)]


def _dot(a: Any, b: Any) -> Tensor:
    a, b = (np.asarray(v) if isinstance(v, (list, tuple)) else v for v in (a, b))
    na, nb = np.ndim(_value(a)), np.ndim(_value(b))
    if na == 0 or nb == 0:
        return _binary(F.mul, "*", a, b)
    if na <= 2 and nb <= 2 or nb == 1:
        return _binary(F.matmul, "@", a, b)
    # the sum over a's last axis and b's second-to-last, as one einsum
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    sub_a, sub_b = letters[:na], list(letters[na:na + nb])
    sub_b[nb - 2] = sub_a[-1]
    out = sub_a[:-1] + "".join(c for j, c in enumerate(sub_b) if j != nb - 2)
    return apply(F.einsum, "einsum", f"{sub_a},{''.join(sub_b)}->{out}", a, b)


def _diagonal_index(n1: int, n2: int, offset: int) -> tuple[np.ndarray, np.ndarray]:
    size = max(0, min(n1 - max(-offset, 0), n2 - max(offset, 0)))
    steps = np.arange(size)
    return steps + max(-offset, 0), steps + max(offset, 0)


def _diagonal(a: Any, offset: int, axis1: int, axis2: int) -> Tensor:
    nd = np.ndim(_value(a))
    if nd < 2:
        raise ValueError("diagonal: the input must have at least two axes")
    a1, a2 = _axis(int(axis1), nd, "diagonal"), _axis(int(axis2), nd, "diagonal")
    if a1 == a2:
        raise ValueError(f"diagonal: repeated axis in {(axis1, axis2)!r}")
    order = [i for i in range(nd) if i not in (a1, a2)] + [a1, a2]
    x = _unary(F.transpose, "transpose", a, tuple(order)) if order != list(range(nd)) else a
    n1, n2 = np.shape(_value(x))[-2:]
    rows, cols = _diagonal_index(n1, n2, offset)
    return x[..., rows, cols]


def _repeat(x: Any, repeats: Any, axis: int | None) -> Tensor:
    if axis is None:
        x, axis = _unary(F.reshape, "reshape", x, (-1,)), 0
    ax = _axis(axis, np.ndim(_value(x)), "repeat")
    index = np.repeat(np.arange(np.shape(_value(x))[ax]), np.asarray(_value(repeats)))
    return x[(slice(None),) * ax + (index,)]


class ConversionError(TypeError):
    """A Tensor being differentiated was turned into a constant (a NumPy array or a Python number).

    It is a ``TypeError``, as JAX's tracer-conversion errors and PyTorch's ``.numpy()`` on a
    Tensor that requires grad are.
    """


def _escape(t: Tensor, what: str) -> ConversionError:
    """The error for ``what`` (``float(t)``, ``np.asarray(t)``, ...) on a Tensor being differentiated."""
    where = f"is being differentiated ({_transforms_running(t)})" if t._marks > 1 else "requires grad"
    caller = _foreign_caller()
    if caller is not None and caller.startswith("scipy"):
        from .errors import _scipy_hint  # (the error path only: it walks the stack)

        named = _scipy_hint()
        if named is not None:
            return ConversionError(
                f"{what}: {named.rstrip('.')}. If a constant is meant, pass t.detach() or lp.stop_gradient(t)."
            )
    via = f", called by {caller} (which LeanPass cannot see through)" if caller else ""
    hint = (
        " LeanPass has lp.special and lp.stats for the common SciPy functions, and NumPy's own "
        "functions on the Tensor (np.exp(t), np.sum(t)) are differentiated."
        if caller else
        " For a list of Tensors, lp.stack([...]) makes one differentiable array (np.array([...]) cannot)."
    )
    instead = _LP_INSTEAD.get(_numpy_caller() or "")
    if instead:  # a NumPy function that converts its argument before any dispatch (np.full's fill value)
        hint = f" Use {instead} instead: np.{instead[3:instead.index('(')]} converts the Tensor, lp's does not."
    return ConversionError(
        f"{what}{via}: this Tensor {where}, and as a NumPy array or Python number it would be a "
        f"constant that silently loses its gradient.{hint} If a constant is meant, use "
        "t.detach() or lp.stop_gradient(t) first; to log a value, read it after the gradient is taken."
    )


# Frames of LeanPass functions that run a user's function under a transform, by (module, function):
# a transform's inputs (``_Call.__init__``, whose ``where`` names it), and vmap's and hvp's wrappers.
_WRAPPERS = {("leanpass.transforms.vmap.batching", "mapped"): "vmap",
             ("leanpass.transforms.jacobians", "product"): "hvp"}


def _transforms_running(t: Tensor) -> str:
    """The transforms that differentiate ``t`` (and the vmaps around them), innermost first, for
    ``_escape``'s message: ``inside jvp``, ``inside grad, inside vmap``. Found on the call stack."""
    import sys

    names: list[str] = []
    start = 0  # names[start:] were found since the last frame of the user's code
    frame: Any = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        code = frame.f_code.co_name
        if module == "leanpass.transforms.reverse_mode" and code == "__init__" and "where" in frame.f_code.co_varnames:
            bit = frame.f_locals.get("bit")
            if isinstance(bit, int) and t._marks & bit:
                names.append(str(frame.f_locals.get("where")))
        elif (module, code) in _WRAPPERS:
            if code == "product":  # hvp: the jvp and grad it runs are part of it
                del names[start:]
            names.append(_WRAPPERS[module, code])
        elif not module.startswith(("leanpass", "numpy")):
            start = len(names)
        frame = frame.f_back
    shown = [n for i, n in enumerate(names) if i == 0 or names[i - 1] != n]  # hessian: jacfwd of jacrev, one name
    if not shown:
        return "by a transform such as grad, jvp or jacobian"
    return "inside " + ", inside ".join(shown)


def _foreign_caller() -> str | None:
    """The library outside NumPy and LeanPass (SciPy, say) whose code converted a Tensor, if any."""
    import sys

    frame: Any = sys._getframe(2)
    while frame is not None:
        module = frame.f_globals.get("__name__", "")
        top = module.partition(".")[0]
        if top not in ("numpy", "leanpass"):
            return module if top in ("scipy", "sklearn", "pandas", "numba", "jax", "torch") else None
        frame = frame.f_back
    return None


# NumPy functions that turn an argument into an array before NumPy's dispatch could reach
# LeanPass, and the LeanPass function to call instead (named in the error).
_LP_INSTEAD = {"full": "lp.full(shape, t)", "full_like": "lp.full_like(a, t)"}


def _numpy_caller() -> str | None:
    """The name of the NumPy function that converted a Tensor, if NumPy's code did."""
    import sys

    frame: Any = sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith("leanpass"):
        frame = frame.f_back
    if frame is not None and frame.f_globals.get("__name__", "").startswith("numpy"):
        return str(frame.f_code.co_name)
    return None


def stop_gradient(x: Any) -> Any:
    """The same values as a constant: no gradient flows through the result (JAX's name for ``detach``).

    A pytree (a dict, list or tuple of Tensors and arrays, or a module) comes back in the same
    structure with every leaf a constant Tensor; a (nested) list of numbers is one array, as in NumPy.

    >>> import leanpass as lp
    >>> lp.grad(lambda x: x * lp.stop_gradient(x))(3.0)
    np.float64(3.0)
    >>> lp.stop_gradient({"w": Tensor([1.0], requires_grad=True), "b": [np.zeros(2)]})
    {'w': Tensor([1.]), 'b': [Tensor([0., 0.])]}
    """
    if type(x) is Tensor:
        return _const(x._data)
    leaves, treedef = tree_flatten(x)
    numbers = type(x) in (list, tuple) and all(isinstance(v, (int, float, np.generic)) for v in leaves)
    if treedef.kind is None or numbers:
        return _stopped(x)
    return tree_unflatten(treedef, [_const(v._data) if type(v) is Tensor else _stopped(v) for v in leaves])


def _stopped(x: Any) -> Tensor:
    """A constant Tensor of a value that is not a Tensor (a stand-in of vmap or jit kept as it is)."""
    if isinstance(x, (list, tuple)):
        return _const(np.asarray(x))
    v = _operand(x, "stop_gradient")
    return _const(v if isinstance(v, _lift.ARRAYS) else np.asarray(v))


def _binary(fn: Callable[..., Any], name: str, a: Any, b: Any) -> Tensor:
    """Record the two-input op ``fn`` (called ``name``) on ``a`` and ``b``, either may be a Tensor."""
    if type(a) is not Tensor and type(b) is not Tensor:  # constants in, a constant out
        a, b = _operand(a, name), _operand(b, name)
        try:
            return _const(fn(a, b, _NEITHER)[0])
        except ValueError as e:
            raise _shape_error(name, a, b, False, e) from None
    reflected = type(a) is not Tensor
    record = _BINARY_RECORDERS.get((name, reflected))
    if record is None:
        record = _BINARY_RECORDERS[name, reflected] = _binary_op(fn, name, reflected)
    return record(b, a) if reflected else record(a, b)


_BINARY_RECORDERS: dict[tuple[str, bool], Callable[[Any, Any], Tensor]] = {}


def _unary(fn: Callable[..., Any], name: str, x: Any, *params: Any) -> Tensor:
    """Record a one-input op; ``params`` (axis, exponent, ...) are constants passed after it."""
    if type(x) is Tensor:
        xd = x._data
        marks = x._marks
    else:
        xd = _operand(x, name)
        marks = 0
    out, vjp = fn(xd, *params)
    if marks and _no_grad_entered:
        return _recorded(name, out, vjp, marks, (x, *params), (x,))
    return _node(out, marks, name, (x, *params), vjp) if marks else _const(out)


def apply(fn: Callable[..., Any], name: str, *args: Any) -> Tensor:
    """Record any op: ``fn(*raw_args) -> (out, vjp)``, with Tensors anywhere among ``args``.

    This is how to record an op of your own (see docs/operations.md): ``name`` becomes the
    node's ``_op``. Higher-order passes replay ``fn`` itself on Tensors, so write it with NumPy
    functions and operators only.

    >>> from leanpass import functional as F
    >>> x = Tensor([1.0, 2.0], requires_grad=True)
    >>> apply(F.exp, "exp", x)._op
    'exp'
    """
    marks = 0
    raw = []
    need = []  # which inputs are differentiated (for the ops that take need=)
    for a in args:  # (a loop, not comprehensions: no call of their own in Python 3.11)
        if type(a) is Tensor:
            marks |= a._marks
            raw.append(a._data)
            need.append(a._marks != 0)
        else:
            raw.append(a)
            need.append(False)
    rec = _REGISTRY.get(name)
    if rec is None and name in _LAZY_MODULE:  # (the name of a built-in op whose family has not loaded yet)
        load_all()
        rec = _REGISTRY.get(name)
    if rec is None:
        out, vjp = fn(*raw) if _custom_forward is None else _custom_forward(fn, name, raw)
        vjp = CustomVJP(fn, vjp)
    elif rec.fn is not fn:
        owner = "a built-in op" if rec.module.startswith("leanpass.") else f"an op registered by {rec.module}"
        raise ValueError(f"apply: {name!r} is the name of {owner}, whose function is another; give your op a "
                         "name of its own.")
    else:
        if rec.vmap is not _BATCHED:
            refuse_batched(rec, raw)
        out, vjp = fn(*raw, need=tuple(need)) if rec.need else fn(*raw)
    if marks and _no_grad_entered:
        return _recorded(name, out, vjp, marks, args)
    if not marks:
        return _const(out)
    return _node(out, marks, name, args, vjp)


class CustomVJP:
    """The VJP of an op recorded with ``apply`` that has no record (``functional.REGISTRY``): it remembers
    the op's function, so that a differentiable backward pass can replay this very function."""

    __slots__ = ("fn", "vjp")

    def __init__(self, fn: Callable[..., Any], vjp: Callable[[Any], Any]) -> None:
        self.fn = fn
        self.vjp = vjp

    def __call__(self, g: Any) -> Any:
        return self.vjp(g)


_lift.set_recorder(apply, Tensor)


# ----- the extension points: the layers above hook into Tensor through these functions only ----------
# (each sets a global of this module that a method or the recorders read; see the slow path below)
# NumPy's dispatch on Tensors (leanpass.numpy.dispatch): ``array_ufunc(ufunc, method, inputs, kwargs)``
# and ``array_function(func, args, kwargs)``.
_array_ufunc: Any = None
_array_function: Any = None
_backward: Any = None  # the reverse pass: ``backward(t, cotangent, create_graph)`` (leanpass.core.engine)


def set_numpy_dispatch(array_ufunc: Callable[..., Any], array_function: Callable[..., Any]) -> None:
    """Route NumPy's ``__array_ufunc__`` and ``__array_function__`` on Tensors to these functions.

    >>> from leanpass.numpy import dispatch
    >>> set_numpy_dispatch(dispatch.array_ufunc, dispatch.array_function)  # (what it does as it loads)
    """
    global _array_ufunc, _array_function
    _array_ufunc, _array_function = array_ufunc, array_function


def _no_graph_tools() -> Any:
    raise RuntimeError("leanpass.core.graph is not set up: import leanpass (which calls set_graph_tools)")


_graph_tools: Callable[[], Any] = _no_graph_tools  # returns leanpass.core.graph, loading it on first use


def set_graph_tools(load: Callable[[], Any]) -> None:
    """How the Tensor methods ``visualize``, ``visualize_dot``, ``grad_check`` and ``zero_grad_all`` find
    the module that implements them: ``load()`` returns it. The facade passes a function that imports
    ``leanpass.core.graph`` on first use, so that ``import leanpass`` does not load it.

    >>> from leanpass.core import graph
    >>> set_graph_tools(lambda: graph)  # (what ``import leanpass`` does, with an import on first use)
    """
    global _graph_tools
    _graph_tools = load


def set_backward(fn: Callable[[Tensor, Any, bool], None]) -> None:
    """The reverse pass that ``Tensor.backward`` runs: ``fn(t, cotangent, create_graph)``.

    >>> from leanpass.core import engine
    >>> set_backward(engine.backward)  # (what leanpass.core.engine does as it loads)
    """
    global _backward
    _backward = fn


def _shape_error(name: str, a: Any, b: Any, swap: bool, err: ValueError) -> ValueError:
    if name == "@":
        return err
    if swap:
        a, b = b, a
    sa, sb = np.shape(a), np.shape(b)
    try:
        np.broadcast_shapes(sa, sb)
    except ValueError:
        pass
    else:  # the shapes are fine: the op refused the values (e.g. integers to a negative power)
        hint = " Use floats, e.g. Tensor([2.0]) ** -1 or t.astype(np.float64) ** -1." if name == "**" else ""
        return ValueError(f"{name!r}: {err}{hint}")
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


# ----- the recorders' slow path: no_grad(), debug_nans() and jvp ----------------------------------
# How many debug_nans() blocks are active (in any thread); the environment variable LEANPASS_DEBUG_NANS=1
# switches it on for the whole run.
_debug_nans = 1 if os.environ.get("LEANPASS_DEBUG_NANS", "0") not in ("", "0") else 0
if _debug_nans:
    _no_grad_entered = 1
_in_replay = 0  # > 0 while a create_graph=True backward pass replays rules (ops recorded there are backward)
# True while forward mode replays a VJP on a stand-in cotangent to transpose it (``forward.transposed_vjp``):
# the values there are not the program's, so debug_nans checks the tangent that comes out instead.
_unchecked: ContextVar[bool] = ContextVar("leanpass_unchecked", default=False)
# While a jvp runs (in any thread): forward mode's hook, ``hook(name, out, vjp, marks, parents)``,
# which makes each recorded node with its tangent (None otherwise). jvp sets _no_grad_entered, so
# that the recorders come here.
_forward_hook: Any = None
# leanpass.engine's ``run_forward(fn, name, raw)``: the forward of an op of the user's (``apply``) on its
# inputs' arrays, where a transform it calls is a computation of its own (set when engine loads).
_custom_forward: Any = None


def take_slow_path() -> None:
    """Make the recorders take their slow path (``_recorded``) from now on, in every thread: for a
    layer above that hooks into recording (forward mode's ``set_forward_hook``). It stays taken.

    >>> take_slow_path()  # (harmless: the slow path records the same nodes)
    """
    global _no_grad_entered
    _no_grad_entered = 1


def set_forward_hook(hook: Callable[..., Tensor] | None) -> None:
    """Forward mode's hook while a ``jvp`` runs: ``hook(name, out, vjp, marks, parents)`` makes each node
    the recorders' slow path records (with its tangent); None when no jvp runs. Call ``take_slow_path``
    first.

    >>> set_forward_hook(None)  # (no jvp runs)
    """
    global _forward_hook
    _forward_hook = hook


def set_custom_forward(fn: Callable[..., Any]) -> None:
    """How ``apply`` runs the forward of an op of the user's (a ``CustomVJP``): ``fn(fn, name, raw)``.

    >>> from leanpass.core import engine
    >>> set_custom_forward(engine.run_forward)  # (what leanpass.core.engine does as it loads)
    """
    global _custom_forward
    _custom_forward = fn


def debug_nans_enter() -> None:
    """Start checking every recorded op for NaNs (``leanpass.debug_nans``; blocks may nest).

    >>> debug_nans_enter(); debug_nans_exit()
    """
    global _no_grad_entered, _debug_nans
    _no_grad_entered = 1  # the recorders take their slow path from now on
    _debug_nans += 1


def debug_nans_exit() -> None:
    """End one ``debug_nans_enter``.

    >>> debug_nans_enter(); debug_nans_exit()
    """
    global _debug_nans
    _debug_nans -= 1


def replay_enter() -> None:
    """A create_graph backward pass starts replaying a rule (debug_nans then says "backward pass").

    >>> replay_enter(); replay_exit()
    """
    global _in_replay
    _in_replay += 1


def replay_exit() -> None:
    """The replay of a rule has ended.

    >>> replay_enter(); replay_exit()
    """
    global _in_replay
    _in_replay -= 1


def _recorded(name: str, out: Any, vjp: Any, marks: int, parents: tuple[Any, ...],
              inputs: tuple[Any, ...] | None = None) -> Tensor:
    """The recorders' slow path, taken once ``no_grad()``, ``debug_nans()`` or ``jvp`` has been
    entered (in any thread): the node of op ``name``, or a constant inside ``no_grad()``.
    (``inputs``: the parents that debug_nans names, when not all of them.)"""
    marks &= _mask_get()
    if not marks:
        return _const(out)
    if _debug_nans and not _unchecked.get():
        vjp = _nan_checked(name, out, vjp, parents if inputs is None else inputs)
    if _forward_hook is not None:
        return _forward_hook(name, out, vjp, marks, parents)
    return _node(out, marks, name, parents, vjp)


def _nan_checked(name: str, out: Any, vjp: Any, inputs: tuple[Any, ...]) -> Any:
    """With ``debug_nans`` on, a recorded op's output is checked here and its VJP comes back wrapped.

    The recorders reach it only on their slow path, taken once ``no_grad()`` or ``debug_nans()``
    has been entered (in any thread), so it costs nothing until then and one test after."""
    _check_nans(name, out, inputs, "backward pass (a create_graph replay)" if _in_replay else "forward pass")
    if type(vjp) is CustomVJP:
        return CustomVJP(vjp.fn, _NanCheckedVJP(name, vjp.vjp, inputs))
    return _NanCheckedVJP(name, vjp, inputs)


def _shapes(values: tuple[Any, ...]) -> str:
    return ", ".join(str(np.shape(v._data if type(v) is Tensor else v)) for v in values
                     if type(v) is Tensor or isinstance(v, (np.ndarray, np.generic, float, int)))


def _has_nan(x: Any) -> bool:
    x = x._data if type(x) is Tensor else x
    return getattr(x, "dtype", np.dtype(float)).kind == "f" and bool(np.isnan(x).any())


def _has_inf(x: Any) -> bool:
    x = x._data if type(x) is Tensor else x
    return getattr(x, "dtype", np.dtype(float)).kind == "f" and bool(np.isinf(x).any())


def _check_nans(name: str, out: Any, inputs: tuple[Any, ...], phase: str) -> None:
    if _has_nan(out):
        had = any(_has_nan(v) for v in inputs if type(v) is Tensor or isinstance(v, np.ndarray))
        raise FloatingPointError(
            f"debug_nans: op {name!r} made a NaN in the {phase}, from inputs of shapes ({_shapes(inputs)})"
            + (" (an input already held a NaN: it came from outside the recorded graph)" if had else
               ". Typical causes: log or sqrt of a negative number, 0 / 0, inf - inf, inf * 0.")
        )


class _NanCheckedVJP:
    """An op's VJP that raises ``FloatingPointError`` when a cotangent it returns holds a NaN (``debug_nans``)."""

    __slots__ = ("name", "vjp", "shapes")

    def __init__(self, name: str, vjp: Any, inputs: tuple[Any, ...]) -> None:
        self.name, self.vjp, self.shapes = name, vjp, _shapes(inputs)

    def __call__(self, g: Any) -> Any:
        cts = self.vjp(g)
        for i, c in enumerate(cts):
            if c is not None and _has_nan(c):
                raise FloatingPointError(
                    f"debug_nans: the VJP of op {self.name!r} made a NaN in the backward pass (the cotangent of "
                    f"its input {i}), from inputs of shapes ({self.shapes}) and an output cotangent of shape "
                    f"{np.shape(g)}" + (" that already held a NaN." if _has_nan(g) else
                                        " that held an inf (from the op after it)." if _has_inf(g) else ".")
                )
        return cts


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
    global _no_grad_entered
    _no_grad_entered = 1  # from now on the recorders consult the context variable
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
