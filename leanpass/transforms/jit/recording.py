"""The trace of ``jit``: the stand-in array a traced function computes with, and the recording of
every NumPy call made on it.

A ``TracedArray`` holds the real value and implements NumPy's protocols and Python's operators:
each call on it is carried out and appended to the ``_Trace``, a program of ``_Instr`` (one call
each, as source text). Values that leave the trace (``bool()``, ``float()``, ``np.asarray``)
become guards. A ``np.random.Generator`` argument is replaced by a ``_TracedGenerator`` whose draws
are recorded, to be drawn again at every replay.
"""

from __future__ import annotations

import math
import operator
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.tensor import Tensor
from ...functional import _lift

__all__ = ["TracedArray", "ConcretizationError"]

_NUMBERS = (bool, int, float)
_SCALARS = (int, float, bool, np.generic)


class ConcretizationError(TypeError):
    """A traced value was needed as a Python value (or a plain array) under ``jit(strict=True)``."""



# ----- the stand-in ---------------------------------------------------------------------------
class TracedArray:
    """The stand-in for an array (or a number) inside a function being traced by ``jit``.

    It holds the real value (``shape``, ``dtype`` and ``ndim`` are the value's) and records every
    NumPy call made on it. Using it as a Python value (``bool``, ``float``, ``np.asarray``)
    records a guard, or raises under ``strict=True``.
    """

    __slots__ = ("_v", "_id", "_tr")
    __array_priority__ = 100.0
    __hash__ = None  # type: ignore[assignment]  # (as an ndarray: unhashable)
    _lp_traced = True

    def __init__(self, tr: _Trace, value: Any, vid: int) -> None:
        self._v = value
        self._id = vid
        self._tr = tr

    # static facts: part of the signature, so they hold at every replay
    @property
    def shape(self) -> tuple[int, ...]:
        return np.shape(self._v)

    @property
    def dtype(self) -> np.dtype[Any]:
        v = self._v
        return v.dtype if hasattr(v, "dtype") else np.result_type(v)

    @property
    def ndim(self) -> int:
        return np.ndim(self._v)

    @property
    def size(self) -> int:
        return int(np.size(self._v))

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def T(self) -> Any:  # noqa: N802 - NumPy's name
        return self._tr.method(self, "transpose", (), {})

    def __len__(self) -> int:
        return len(self._v)

    def __iter__(self) -> Any:
        if np.ndim(self._v) == 0:
            raise TypeError("iteration over a 0-d array")
        return (self[i] for i in range(len(self._v)))

    def __repr__(self) -> str:
        return f"<traced {self.dtype} array of shape {self.shape}>"

    def __str__(self) -> str:  # (the tracing call's value, as in an error message the function raises)
        return str(self._v)

    def __format__(self, spec: str) -> str:
        return format(self._v, spec)

    # NumPy's protocols
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        for x in inputs:
            if not isinstance(x, _KNOWN):
                return NotImplemented  # (a Tensor: its own dispatch records the op, then calls back)
        out = kwargs.get("out")
        if out is not None:
            for o in out:
                if not isinstance(o, _KNOWN):
                    return NotImplemented
        fn = ufunc if method == "__call__" else getattr(ufunc, method)
        return self._tr.call(fn, inputs, kwargs, ufunc=ufunc if method == "__call__" else None)

    def __array_function__(self, func: Any, types_: Any, args: Any, kwargs: Any) -> Any:
        for t in types_:
            if t is not TracedArray and not issubclass(t, np.ndarray):
                return NotImplemented
        if func in _STATIC_FUNCTIONS:  # answered from shapes and dtypes alone
            return func(*_values(args), **_values(kwargs))
        return self._tr.call(func, args, kwargs)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        value = self._tr.guard(self, "array", "np.asarray (or np.array) of a traced value")
        arr = np.array(value, dtype=dtype) if dtype is not None else np.asarray(value).view()
        arr.flags.writeable = False  # (a write into it would not be recorded)
        return arr

    # values leaving the trace: guards
    def __bool__(self) -> bool:
        return bool(self._tr.guard(self, "bool", "bool() of a traced value (an if or while on it)"))

    def __float__(self) -> float:
        return float(self._tr.guard(self, "float", "float() of a traced value"))

    def __int__(self) -> int:
        return int(self._tr.guard(self, "int", "int() of a traced value"))

    def __index__(self) -> int:
        return int(self._tr.guard(self, "index", "a traced value used as an index or a size"))

    def __complex__(self) -> complex:
        raise TypeError("complex numbers are not supported by LeanPass")

    def item(self, *args: Any) -> Any:
        if args:
            return self[args if len(args) > 1 else args[0]].item()
        return self._tr.guard(self, "item", ".item() of a traced value")

    def tolist(self) -> Any:
        return self._tr.guard(self, "tolist", ".tolist() of a traced value")

    @property
    def _lp_array(self) -> bool:
        """Whether this stands for an ndarray (not a number or a NumPy scalar)."""
        return type(self._v) is np.ndarray

    def _lp_asarray(self) -> Any:
        """``np.asarray(self)`` kept on the trace (``x.view()`` for an array, as ``grad`` takes it)."""
        if type(self._v) is np.ndarray:
            return self._tr.method(self, "view", (), {})
        return self._tr.call(np.asarray, (self,), {})

    def _lp_float(self) -> Any:
        """``float(self)`` kept on the trace (used by ``optim`` for learning rates)."""
        return self._tr.call(float, (self,), {})

    def __copy__(self) -> Any:
        return self._tr.method(self, "copy", (), {})

    def __deepcopy__(self, memo: Any) -> Any:
        return self._tr.method(self, "copy", (), {})

    def __reduce__(self) -> Any:
        raise TypeError("a traced value cannot be pickled inside a jitted function")

    # indexing
    def __getitem__(self, index: Any) -> Any:
        return self._tr.call(operator.getitem, (self, index), {}, form="getitem")

    def __setitem__(self, index: Any, value: Any) -> None:
        self._tr.call(operator.setitem, (self, index, value), {}, form="setitem")

    # every other array method and attribute
    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        value = object.__getattribute__(self, "_v")
        attr = getattr(value, name)  # (AttributeError as the value would give)
        if name in _STATIC_ATTRS:
            return attr
        if not callable(attr):
            raise TypeError(
                f"jit: the array attribute .{name} of a traced value is not supported; use a NumPy function instead"
            )
        tr = object.__getattribute__(self, "_tr")

        def call(*args: Any, **kwargs: Any) -> Any:
            return tr.method(self, name, args, kwargs)

        return call


_KNOWN = (TracedArray, np.ndarray, np.generic, int, float, bool, type(None), list, tuple)
_STATIC_ATTRS = frozenset({"strides", "flags", "base", "itemsize", "nbytes"})
_STATIC_FUNCTIONS = {np.shape, np.ndim, np.size, np.result_type, np.iscomplexobj, np.isrealobj}
try:  # (NumPy >= 2 has both)
    _STATIC_FUNCTIONS.add(np.can_cast)
except AttributeError:  # pragma: no cover
    pass

# Python operators: the ufunc they are on arrays, and the operator function on Python numbers.
_BINARY = {
    "add": ("+", np.add), "sub": ("-", np.subtract), "mul": ("*", np.multiply), "truediv": ("/", np.true_divide),
    "floordiv": ("//", np.floor_divide), "mod": ("%", np.remainder), "pow": ("**", np.power),
    "matmul": ("@", np.matmul), "and": ("&", np.bitwise_and), "or": ("|", np.bitwise_or),
    "xor": ("^", np.bitwise_xor), "lt": ("<", np.less), "le": ("<=", np.less_equal), "gt": (">", np.greater),
    "ge": (">=", np.greater_equal), "eq": ("==", np.equal), "ne": ("!=", np.not_equal),
}
_REFLECTED = {"lt": "gt", "le": "ge", "gt": "lt", "ge": "le", "eq": "eq", "ne": "ne"}


def _make_binary(name: str, symbol: str, ufunc: Any, reflected: bool) -> Callable[..., Any]:
    pyop = getattr(operator, name if name not in ("and", "or") else name + "_")

    def op(self: TracedArray, other: Any) -> Any:
        if not isinstance(other, _KNOWN):
            return NotImplemented
        a, b = (other, self) if reflected else (self, other)
        return self._tr.binary(pyop, symbol, ufunc, a, b)

    return op


def _make_inplace(name: str, symbol: str, ufunc: Any) -> Callable[..., Any]:
    pyop = getattr(operator, "i" + name)

    def op(self: TracedArray, other: Any) -> Any:
        if not isinstance(other, _KNOWN):
            return NotImplemented
        if isinstance(self._v, np.ndarray):  # in place, as NumPy does it: the same array comes back
            if name == "pow":  # (NumPy's own operator, as for x ** p)
                self._tr.call(pyop, (self, other), {})
            else:
                self._tr.call(ufunc, (self, other), {"out": (self,)}, ufunc=ufunc)
            return self
        return self._tr.binary(getattr(operator, name if name not in ("and", "or") else name + "_"),
                               symbol, ufunc, self, other)

    op.__name__ = pyop.__name__
    return op


for _name, (_symbol, _ufunc) in _BINARY.items():
    setattr(TracedArray, f"__{_name}__", _make_binary(_name, _symbol, _ufunc, False))
    if _name in _REFLECTED:
        continue
    setattr(TracedArray, f"__r{_name}__", _make_binary(_name, _symbol, _ufunc, True))
    setattr(TracedArray, f"__i{_name}__", _make_inplace(_name, _symbol, _ufunc))


def _make_unary(pyop: Any, ufunc: Any) -> Callable[..., Any]:
    def op(self: TracedArray) -> Any:
        return self._tr.unary(pyop, ufunc, self)

    return op


for _name, _pyop, _ufunc in (("neg", operator.neg, np.negative), ("pos", operator.pos, np.positive),
                             ("abs", operator.abs, np.absolute), ("invert", operator.invert, np.invert)):
    setattr(TracedArray, f"__{_name}__", _make_unary(_pyop, _ufunc))


def _values(x: Any) -> Any:
    """``x`` with every stand-in replaced by its value (in tuples, lists, dicts and slices)."""
    t = type(x)
    if t is TracedArray:
        return x._v
    if t is tuple or t is list:
        return t(_values(i) for i in x)
    if t is dict:
        return {k: _values(v) for k, v in x.items()}
    if t is slice:
        return slice(_values(x.start), _values(x.stop), _values(x.step))
    return x


# ----- random generators -----------------------------------------------------------------------
_RNG_METHODS = [n for n in dir(np.random.Generator) if not n.startswith("_") and n not in ("bit_generator",)]


class _TracedGenerator(np.random.Generator):
    """A generator argument while tracing: it shares the caller's bit generator (so it draws the
    very numbers the caller's would) and records each draw, to be drawn again at every replay."""

    def __init__(self, gen: np.random.Generator, tr: _Trace, vid: int) -> None:
        super().__init__(gen.bit_generator)
        self._lp_tr = tr
        self._lp_id = vid


def _make_draw(name: str) -> Callable[..., Any]:
    def draw(self: _TracedGenerator, *args: Any, **kwargs: Any) -> Any:
        if name == "spawn":
            raise TypeError("jit: Generator.spawn inside a jitted function is not supported; spawn outside it")
        return self._lp_tr.draw(self, name, args, kwargs)

    draw.__name__ = name
    return draw


for _name in _RNG_METHODS:
    if callable(getattr(np.random.Generator, _name, None)):
        setattr(_TracedGenerator, _name, _make_draw(_name))



# ----- the trace: a program of calls -----------------------------------------------------------
class _Instr:
    """One recorded call: ``outs = callee(args)``, as source text, with what it reads and writes."""

    __slots__ = ("kind", "callee", "args", "kwargs", "outs", "reads", "writes", "effect", "ufunc", "check", "err",
                 "nin")

    def __init__(self, kind: str, callee: str, args: list[str], kwargs: dict[str, str], outs: Any,
                 reads: list[int], writes: set[int], effect: bool = False, ufunc: Any = None) -> None:
        self.kind = kind  # "call", "getitem", "setitem", "binop", "unary", "method", "guard", "draw"
        self.callee = callee
        self.args = args
        self.kwargs = kwargs
        self.outs = outs  # None, a var id, or a tuple of var ids (unpacked)
        self.reads = reads
        self.writes = writes  # storage ids written in place
        self.effect = effect  # kept even when nothing reads its result (draws, writes to inputs)
        self.ufunc = ufunc  # the ufunc of an elementwise call (for writing into a dying input)
        self.check = ""  # a guard's test, or a shape check after the call
        self.err = _geterr()  # NumPy's floating-point error handling it ran under (np.errstate)
        self.nin = 0  # for a ufunc's own call: its number of inputs


# Functions whose result's shape depends on the values (checked after each replayed call).
_VALUE_SHAPED = {np.nonzero, np.flatnonzero, np.argwhere, np.unique, np.extract, np.compress,
                 np.trim_zeros, np.repeat, np.setdiff1d, np.intersect1d, np.union1d}
# ufuncs whose out= may be given positionally (np.maximum and np.minimum deprecate it)
_POSITIONAL_OUT = {np.add, np.subtract, np.multiply, np.true_divide, np.negative, np.exp, np.log, np.sqrt,
                   np.square, np.sign, np.absolute, np.tanh, np.sin, np.cos, np.power, np.logaddexp, np.reciprocal}
_REDUCE_METHODS = {"sum": np.add.reduce, "max": np.maximum.reduce, "min": np.minimum.reduce}
_MUTATING_METHODS = {"fill", "sort", "partition", "put", "itemset", "resize", "setfield", "setflags"}
_WRITES_FIRST = {np.copyto, np.put, np.place, np.putmask, np.fill_diagonal, np.put_along_axis, operator.ipow}


class _Trace:
    """The program being recorded for one call of a jitted function."""

    def __init__(self, strict: bool, where: str) -> None:
        self.strict = strict
        self.where = where
        self.thread = threading.get_ident()
        self.active = True
        self.instrs: list[_Instr] = []
        self.values: list[Any] = []  # var id -> value at trace time
        self.storage: list[int] = []  # var id -> the var owning its memory (views share their base's)
        self.inputs: list[int] = []  # var ids of the program's parameters, in order
        self.names: dict[str, Any] = {}  # constants and functions the program refers to
        self.const_ids: dict[int, str] = {}
        self.keep: list[Any] = []  # objects named by id in const_ids, kept alive
        self.guards = 0
        self.seen: dict[tuple[int, str], tuple[int, Any]] = {}  # (var, kind) -> (where, value) of a guard
        self.err = _geterr()  # the handling around the call being traced
        self.cells: Any = None  # the parameters and optimizer states reached outside the arguments (cells.py)
        self.stepped = False  # whether a parameter's data or grad was replaced while tracing
        self.origins: dict[int, Any] = {}  # id of an argument's stand-in Tensor -> the parameter passed
        self.start = 0  # the _seq when the trace began

    # -- variables and constants --
    def new_var(self, value: Any, storage: int | None = None) -> TracedArray:
        vid = len(self.values)
        self.values.append(value)
        self.storage.append(vid if storage is None else storage)
        return TracedArray(self, value, vid)

    def name(self, obj: Any, prefix: str = "c") -> str:
        key = id(obj)
        hit = self.const_ids.get(key)
        if hit is not None:
            return hit
        n = f"{prefix}{len(self.names)}"
        self.names[n] = obj
        self.const_ids[key] = n
        self.keep.append(obj)
        return n

    def src(self, x: Any, reads: list[int]) -> tuple[Any, str]:
        """``(value, source text)`` of an argument; ``reads`` collects the var ids it refers to."""
        t = type(x)
        if t is TracedArray:
            if x._tr is not self:
                self._foreign(x)
            reads.append(x._id)
            return x._v, f"v{x._id}"
        if t is int or t is bool or x is None or x is Ellipsis:
            return x, repr(x)
        if t is float:
            return x, (repr(x) if math.isfinite(x) else self.name(x))
        if t is tuple or t is list:
            pairs = [self.src(i, reads) for i in x]
            vals = t(p[0] for p in pairs)
            body = ", ".join(p[1] for p in pairs)
            if t is tuple:
                return vals, f"({body},)" if len(pairs) == 1 else f"({body})"
            return vals, f"[{body}]"
        if t is dict:
            items = {k: self.src(v, reads) for k, v in x.items()}
            return ({k: p[0] for k, p in items.items()},
                    "{" + ", ".join(f"{self.name(k) if type(k) is not str else repr(k)}: {p[1]}"
                                    for k, p in items.items()) + "}")
        if t is slice:
            (a, sa), (b, sb), (c, sc) = self.src(x.start, reads), self.src(x.stop, reads), self.src(x.step, reads)
            return slice(a, b, c), f"slice({sa}, {sb}, {sc})"
        if t is Tensor:
            raise TypeError(
                f"{self.where}: a Tensor reached a NumPy call inside the traced function; LeanPass ops record "
                "Tensors, so pass t through a LeanPass op (or use lp.stop_gradient(t)) instead"
            )
        if isinstance(x, np.ndarray):
            if x.flags.writeable:  # a snapshot: the array may change after this call reads it
                x = _copy(x)
                x.flags.writeable = False
                n = f"c{len(self.names)}"
                self.names[n] = x
                return x, n
            return x, self.name(x)
        if isinstance(x, np.random.Generator):
            raise TypeError(
                f"{self.where}: a np.random.Generator that is not an argument of the jitted function reached "
                "a NumPy call; pass the generator as an argument, so that each call draws new numbers"
            )
        return x, self.name(x)

    def _foreign(self, x: TracedArray) -> None:
        if not x._tr.active:
            raise RuntimeError(
                f"{self.where}: a traced value from an earlier trace was used (it was kept in a global, a "
                "closure or an object outside the function, then used again). Return values from the "
                "jitted function instead of storing them"
            )
        raise RuntimeError(f"{self.where}: a traced value of another jitted function's trace was used here")

    def check_live(self, x: TracedArray) -> None:
        if not self.active:
            raise RuntimeError(
                "a traced value escaped its jitted function (it was stored in a global, a closure or an "
                "object outside it during tracing) and was used afterwards; return it from the function "
                "instead"
            )
        if threading.get_ident() != self.thread:
            raise RuntimeError("a traced value was used from another thread than the one tracing it")

    # -- recording --
    def call(self, fn: Any, args: Any, kwargs: dict[str, Any], ufunc: Any = None, form: str = "call") -> Any:
        """Run ``fn(*args, **kwargs)`` on the values and record it."""
        reads: list[int] = []
        for x in args:
            if type(x) is TracedArray:
                x._tr.check_live(x) if x._tr is self else self._foreign(x)
        arg_pairs = [self.src(a, reads) for a in args]
        out_kw = kwargs.get("out") if kwargs else None
        kw_pairs = {k: self.src(v, reads) for k, v in kwargs.items()} if kwargs else {}
        vals = [p[0] for p in arg_pairs]
        kvals = {k: p[0] for k, p in kw_pairs.items()}
        result = fn(*vals, **kvals)
        writes: set[int] = set()
        effect = False
        if out_kw is not None:  # a ufunc writing into arrays given with out=
            for o in (out_kw if type(out_kw) is tuple else (out_kw,)):
                writes.add(self._written(o))
        if (form == "setitem" or fn in _WRITES_FIRST or fn is np.ufunc.at or getattr(fn, "__name__", "") == "at"
                or fn is operator.ipow):
            writes.add(self._written(args[0]))
        for w in writes:
            if w in self.inputs_storage:
                effect = True
        if form == "getitem":
            callee, a_src = arg_pairs[0][1], [arg_pairs[1][1]]
        elif form == "setitem":
            callee, a_src = arg_pairs[0][1], [arg_pairs[1][1], arg_pairs[2][1]]
        else:
            callee, a_src = self.name(fn, "f"), [p[1] for p in arg_pairs]
        outs, wrapped = self._outputs(result, reads, writes, out_kw)
        instr = _Instr(form, callee, a_src, {k: p[1] for k, p in kw_pairs.items()}, outs, reads, writes, effect,
                       ufunc if out_kw is None and not kwargs else None)
        if fn in _POSITIONAL_OUT:
            instr.nin = fn.nin
        if outs is not None and (fn in _VALUE_SHAPED or (form == "getitem" and _has_mask(args[1]))):
            instr.check = self._shape_check(outs)
        self.instrs.append(instr)
        return wrapped

    def method(self, obj: TracedArray, name: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        obj._tr.check_live(obj) if obj._tr is self else self._foreign(obj)
        reduce = _REDUCE_METHODS.get(name)
        if reduce is not None and type(obj._v) is np.ndarray and len(args) <= 1 and set(kwargs) <= {"axis", "keepdims"}:
            # ndarray.sum(...) is np.add.reduce(...) behind a Python wrapper: the same call, without it
            axis = args[0] if args else kwargs.get("axis")
            return self.call(reduce, (obj,), {"axis": axis, "keepdims": bool(kwargs.get("keepdims", False))})
        reads = [obj._id]
        arg_pairs = [self.src(a, reads) for a in args]
        kw_pairs = {k: self.src(v, reads) for k, v in kwargs.items()}
        result = getattr(obj._v, name)(*[p[0] for p in arg_pairs], **{k: p[0] for k, p in kw_pairs.items()})
        writes: set[int] = set()
        if name in _MUTATING_METHODS or "out" in kwargs:
            writes.add(self.storage[obj._id])
            if "out" in kwargs:
                writes.add(self._written(kwargs["out"]))
        effect = any(w in self.inputs_storage for w in writes)
        outs, wrapped = self._outputs(result, reads, writes, kwargs.get("out"))
        instr = _Instr("method", f"v{obj._id}.{name}", [p[1] for p in arg_pairs],
                       {k: p[1] for k, p in kw_pairs.items()}, outs, reads, writes, effect)
        if outs is not None and name in ("nonzero", "compress", "repeat"):
            instr.check = self._shape_check(outs)
        self.instrs.append(instr)
        return wrapped

    def binary(self, pyop: Any, symbol: str, ufunc: Any, a: Any, b: Any) -> Any:
        va = a._v if type(a) is TracedArray else a
        vb = b._v if type(b) is TracedArray else b
        if type(va) in _NUMBERS and type(vb) in _NUMBERS:  # Python numbers stay Python numbers
            return self.call(pyop, (a, b), {})
        if symbol == "@":
            return self.call(np.matmul, (a, b), {})
        if symbol == "**":  # NumPy's own operator: before NumPy 2 it is np.square for x ** 2 (sqrt, ...), not np.power
            return self.call(pyop, (a, b), {})
        return self.call(ufunc, (a, b), {}, ufunc=ufunc)

    def unary(self, pyop: Any, ufunc: Any, a: TracedArray) -> Any:
        if type(a._v) in _NUMBERS:
            return self.call(pyop, (a,), {})
        return self.call(ufunc, (a,), {}, ufunc=ufunc)

    def draw(self, gen: _TracedGenerator, name: str, args: Any, kwargs: dict[str, Any]) -> Any:
        reads: list[int] = []
        arg_pairs = [self.src(a, reads) for a in args]
        kw_pairs = {k: self.src(v, reads) for k, v in kwargs.items()}
        result = getattr(np.random.Generator, name)(gen, *[p[0] for p in arg_pairs],
                                                    **{k: p[0] for k, p in kw_pairs.items()})
        outs, wrapped = self._outputs(result, reads, set(), None, fresh=True)
        self.instrs.append(_Instr("method", f"v{gen._lp_id}.{name}", [p[1] for p in arg_pairs],
                                  {k: p[1] for k, p in kw_pairs.items()}, outs, reads + [gen._lp_id], set(), True))
        return wrapped

    def _written(self, o: Any) -> int:
        if type(o) is TracedArray:
            return self.storage[o._id]
        raise TypeError(
            f"{self.where}: a traced value was written into an array created outside the trace (with "
            "np.empty / np.zeros and then assignments or out=): the write could not be replayed. Build the "
            "array from traced values instead (np.zeros_like(x), np.where, np.concatenate, ...)"
        )

    def _outputs(self, result: Any, reads: list[int], writes: set[int], out_kw: Any,
                 fresh: bool = False) -> tuple[Any, Any]:
        t = type(result)
        if result is None:
            return None, None
        if t is np.ndarray or isinstance(result, _SCALARS):
            return self._one(result, reads, out_kw, fresh)
        if t is tuple or t is list or (isinstance(result, tuple) and hasattr(result, "_fields")):
            pairs = [self._one(r, reads, None, fresh) for r in result]
            wrapped = [p[1] for p in pairs]  # (a NamedTuple, such as eigh's EighResult, keeps its type)
            return tuple(p[0] for p in pairs), (t(wrapped) if t is tuple or t is list else t(*wrapped))
        if isinstance(result, np.ndarray):  # a subclass (e.g. np.matrix)
            raise TypeError(f"{self.where}: ndarray subclasses ({t.__name__}) are not supported inside jit")
        raise TypeError(f"{self.where}: a traced NumPy call returned {t.__name__}, which jit cannot replay")

    def _one(self, r: Any, reads: list[int], out_kw: Any, fresh: bool) -> tuple[int, TracedArray]:
        if not isinstance(r, (np.ndarray, *_SCALARS)):
            raise TypeError(f"{self.where}: a traced NumPy call returned {type(r).__name__}, which jit cannot replay")
        storage = None
        if type(r) is np.ndarray and not fresh:
            if out_kw is not None:
                o = out_kw[0] if type(out_kw) is tuple else out_kw
                if type(o) is TracedArray and o._v is r:
                    storage = self.storage[o._id]
            if storage is None and r.base is not None:
                for vid in reads:
                    v = self.values[vid]
                    if type(v) is np.ndarray and (v is r or np.may_share_memory(v, r)):
                        storage = self.storage[vid]
                        break
            if storage is None:
                for vid in reads:
                    if self.values[vid] is r:
                        storage = self.storage[vid]
                        break
        var = self.new_var(r, storage)
        return var._id, var

    def _shape_check(self, outs: Any) -> str:
        ids = outs if type(outs) is tuple else (outs,)
        return " or ".join(f"v{i}.shape != {np.shape(self.values[i])!r}" for i in ids)

    def guard(self, x: TracedArray, kind: str, what: str) -> Any:
        """The Python value of ``x`` for ``kind`` (bool, float, ...), recorded as a guard."""
        x._tr.check_live(x) if x._tr is self else self._foreign(x)
        v = x._v
        seen = self.seen.get((x._id, kind))
        if seen is not None:  # the same test of the same value (nothing wrote into it since): no new guard
            if not any(self.storage[x._id] in ins.writes for ins in self.instrs[seen[0]:]):
                return seen[1]
        if self.strict and kind != "choice":  # (a choice among algorithms that compute the same values is kept)
            raise ConcretizationError(
                f"{self.where}(strict=True): {what} (shape {np.shape(v)}, dtype {np.result_type(v)}). Its "
                "value changes from call to call, so it cannot be fixed in the traced program. Keep the "
                "computation in NumPy operations (np.where instead of if, for example), pass the value as a "
                "static argument (static_argnums), or drop strict=True to have jit re-check it at every call"
            )
        if kind in ("bool", "choice"):
            value: Any = bool(v)
            check = f"{'not ' if value else ''}v{x._id}"
        elif kind in ("int", "index"):
            value = int(v) if kind == "int" else operator.index(v)
            check = f"v{x._id} != {value!r}"
        elif kind == "float":
            value = float(v)
            check = f"not _same(float(v{x._id}), {self.name(value)})"
        elif kind == "item":
            value = v.item() if hasattr(v, "item") else v
            check = f"not _same(v{x._id}.item() if hasattr(v{x._id}, 'item') else v{x._id}, {self.name(value)})"
        elif kind == "tolist":
            value = v.tolist()
            check = f"v{x._id}.tolist() != {self.name(value)}"
        else:  # a whole array
            value = np.array(v)
            value.flags.writeable = False
            check = f"not _same_array(v{x._id}, {self.name(value)})"
        instr = _Instr("guard", "", [], {}, None, [x._id], set(), True)
        instr.check = check
        self.seen[x._id, kind] = (len(self.instrs), value)
        self.instrs.append(instr)
        self.guards += 1
        return value

    @property
    def inputs_storage(self) -> set[int]:
        return self._inputs_storage

    _inputs_storage: set[int] = set()


def _has_mask(index: Any) -> bool:
    parts = index if type(index) is tuple else (index,)
    for p in parts:
        if type(p) is TracedArray and np.result_type(p._v) == np.bool_:
            return True
    return False


def _geterr() -> tuple[tuple[str, Any], ...]:
    return tuple(np.geterr().items())


def _copy(x: np.ndarray) -> np.ndarray:
    """A copy of ``x`` with its strides (transposed, reversed, with gaps) and its address modulo 64:
    NumPy's loops and BLAS's kernels choose their order of summation by layout, so a constant keeps
    the layout it had in ``f``. A view spread over more than ``_SPREAD`` times its size (and over
    16 MB) is copied compactly instead, its axes in the same order."""
    low = sum(s * (n - 1) for s, n in zip(x.strides, x.shape) if s < 0)
    span = sum(s * (n - 1) for s, n in zip(x.strides, x.shape) if s > 0) + x.itemsize - low
    if x.size == 0 or x.dtype.hasobject or (span > _SPREAD * x.nbytes and span > 1 << 24):
        return x.copy(order="K")
    buffer = np.zeros(span + 64, np.uint8)
    shift = (x.ctypes.data + low - buffer.ctypes.data) % 64
    out: np.ndarray = np.ndarray(x.shape, x.dtype, buffer, shift - low, x.strides)
    out[...] = x
    return out


_SPREAD = 4


# Stand-ins are raw arrays to the layers above: Tensors take them as constants, and the rules'
# raw-array paths take them like ndarrays.
_lift.register_array_type(TracedArray)
