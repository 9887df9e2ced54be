"""``jit``: trace a function once per argument signature, then replay it as straight-line NumPy.

Every computation in LeanPass (the forward pass, the reverse pass of ``grad``, losses, ``optim``)
ends in NumPy calls on raw arrays. On the first call for a signature, ``jit`` runs the function
for real with each array argument (and each Tensor's array) replaced by a stand-in, a
``TracedArray``, that holds the real value and implements NumPy's protocols. Every NumPy call
made on a stand-in is carried out and appended to a program. The program is then pruned (calls
whose results are never used are dropped), given a few rewrites that cannot change a bit (an
elementwise result written into an intermediate that dies at that call, Python floats turned
into 0-d arrays of the operand's dtype once) and written out as one Python function of NumPy
calls. Later calls with the same signature run only that function.

Values that leave the trace (``bool()``, ``float()``, ``int()``, ``.item()``, ``.tolist()``,
``np.asarray``) become guards, re-checked at every replay: when one fails, the function is traced
again, so a result is never stale (``strict=True`` raises instead). Shapes that depend on values
(boolean masks, ``nonzero``) are checked too. A ``np.random.Generator`` argument draws its
numbers at every replay, the same numbers the function draws when it is not jitted.

See docs/jit.md for what is traced, what retraces and the sharp edges.
"""

from __future__ import annotations

import functools
import inspect
import math
import operator
import pickle
import re
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core import tensor as _tensor_module
from ...core import tree as _tree
from ...core.engine import _depth
from ...core.tensor import Tensor, _const, _next_seq
from ...functional import _lift

__all__ = ["jit", "TracedArray", "Jitted"]

_NUMBERS = (bool, int, float)
_SCALARS = (int, float, bool, np.generic)
_MAX_TRACES = 8  # per signature: beyond this, value-dependent control flow changes too often
_MAX_PROGRAMS = 4  # programs kept per signature (one per outcome of its guards), newest first
_CACHE_SIZE = 64  # signatures a jitted function keeps programs for, by default (the least recently used goes)
_RETRACE_WARNING = 8  # traces for new signatures after which jit warns, once per function


class _GuardFailedError(Exception):
    """A guard of a replayed program did not hold: the function must be traced again."""


class _UnderVmapError(Exception):
    """The arguments (or the results) are batched by an enclosing vmap: the function runs without jit."""


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


def _rename(names: dict[int, str], m: re.Match[str]) -> str:
    return names[int(m.group(1))]


def _geterr() -> tuple[tuple[str, Any], ...]:
    return tuple(np.geterr().items())


def _writable(a: np.ndarray) -> np.ndarray:
    """A donated array made writable in place when it owns its memory, else a copy of it."""
    try:
        a.flags.writeable = True
        return a
    except ValueError:
        return a.copy()


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


def _same(a: Any, b: Any) -> bool:
    return a == b or (a != a and b != b)  # (nan matches nan)


def _same_array(a: Any, b: np.ndarray) -> bool:
    if np.shape(a) != b.shape or np.result_type(a) != b.dtype:
        return False
    return bool(np.array_equal(a, b, equal_nan=b.dtype.kind == "f"))


def _owner(a: np.ndarray) -> Any:
    """The object whose memory ``a`` lives in: the array at the end of its chain of bases, or a buffer."""
    b = a.base
    while isinstance(b, np.ndarray):
        a, b = b, b.base
    return a if b is None else b


def _aliases(*arrays: np.ndarray) -> Any:
    """None when no two of ``arrays`` share memory, else the pairs ``(i, j)`` of those that do."""
    owners: dict[int, int] = {}
    for i, a in enumerate(arrays):  # (at most one check per array when nothing is shared)
        if owners.setdefault(id(a if a.base is None else _owner(a)), i) != i:
            break
    else:
        return None
    groups: dict[int, list[int]] = {}
    pairs = []
    for i, a in enumerate(arrays):
        members = groups.setdefault(id(_owner(a)), [])
        pairs += [(j, i) for j in members if np.shares_memory(arrays[j], a)]
        members.append(i)
    return tuple(pairs) or None


# ----- arguments: flattening and signatures ----------------------------------------------------
def _flatten(x: Any, leaves: list[Any]) -> Any:
    """The structure of ``x`` (a hashable spec) with its leaves appended to ``leaves``.

    Frozen modules use ``tree_flatten`` (remembered on the instance); a ``TreeDef`` (as in an
    optimizer's state) is a leaf, compared by value.
    """
    t = type(x)
    if t in _tree._FROZEN_CLASSES:
        sub, td = _tree.tree_flatten(x)
        leaves.extend(sub)
        return ("m", td, len(sub))
    if t is _tree.TreeDef:
        leaves.append(x)
        return None
    entry = _tree._REGISTRY.get(t)
    if entry is None:
        entry = _tree._entry(x)
        if entry is None:
            leaves.append(x)
            return None
    children, meta = entry[0](x)
    return (t, meta, tuple([_flatten(c, leaves) for c in children]))


def _builder(spec: Any) -> tuple[int, Callable[[list[Any]], Any]]:
    """``(leaf count, leaves -> tree)`` for a spec of ``_flatten``, written out as one expression."""
    names: dict[str, Any] = {"T": _tree.tree_unflatten}
    count = [0]

    def write(s: Any) -> str:
        if s is None:
            count[0] += 1
            return f"L[{count[0] - 1}]"
        if s[0] == "m":
            k = len(names)
            names[f"d{k}"] = s[1]
            start = count[0]
            count[0] += s[2]
            return f"T(d{k}, L[{start}:{count[0]}])"
        kind, meta, kids = s
        parts = ", ".join([write(c) for c in kids])
        if kind is tuple:
            return f"({parts},)" if len(kids) == 1 else f"({parts})"
        k = len(names)
        entry = _tree._REGISTRY.get(kind)
        if entry is None:  # a NamedTuple, made in C (its own __new__ is Python)
            names[f"u{k}"] = kind
            names["_tn"] = tuple.__new__
            return f"_tn(u{k}, ({parts}{',' if len(kids) == 1 else ''}))"
        names[f"u{k}"], names[f"m{k}"] = entry[1], meta
        return f"u{k}(m{k}, [{parts}])"

    body = write(spec)
    return count[0], eval(compile(f"lambda L: {body}", "<leanpass jit unflatten>", "eval"), names)  # noqa: S307


def _leaf_key(x: Any, where: str) -> Any:
    t = type(x)
    if t is Tensor:
        d = x._data
        if type(d) is np.ndarray:
            return (t, d.shape, d.dtype, _layout(d), x._trace != 0)
        if getattr(d, "_lp_batched", False):
            raise _UnderVmapError
        return (t, type(d), x._trace != 0)
    if t is np.ndarray:
        return (t, x.shape, x.dtype, _layout(x))
    if t in _NUMBERS:
        return t
    if isinstance(x, np.generic):
        return (t,)
    if isinstance(x, np.random.Generator):
        return np.random.Generator
    if isinstance(x, np.ndarray):
        raise TypeError(f"{where}: ndarray subclasses ({t.__name__}) are not supported as jit arguments")
    if getattr(x, "_lp_batched", False):
        raise _UnderVmapError
    if not isinstance(x, _STATIC_LEAVES) and not callable(x):
        raise TypeError(
            f"{where}: an argument holds a {t.__name__}, which is neither an array, a Tensor, a number nor a "
            "pytree of them; jit could not see a change to what it holds. Pass arrays, register the class "
            "with lp.register_pytree, or pass it as a static argument (static_argnums; then it must be "
            "hashable, and a new value traces again)"
        )
    return ("static", t, x)


# Leaves that are part of a structure rather than data (an optimizer state's treedef, a dtype, ...).
_STATIC_LEAVES = (str, bytes, type(None), type, np.dtype, _tree.TreeDef, slice, type(Ellipsis))


def _tie(leaves: list[Any], leaf_keys: list[Any]) -> bool:
    """A Tensor at several leaves (tied weights) is one input, as in ``grad``: each later place's key
    becomes ``("tied", first place)``, so the tie pattern is part of the signature. True if any is."""
    first: dict[int, int] = {}
    for k, x in enumerate(leaves):
        if type(x) is Tensor:
            j = first.setdefault(id(x), k)
            if j != k:
                leaf_keys[k] = ("tied", j)
    return len(first) < sum(type(x) is Tensor for x in leaves)


def _layout(a: np.ndarray) -> Any:
    """None for a C-contiguous array, else its strides: views and copies depend on the layout."""
    return None if a.flags.c_contiguous else a.strides


# ----- the compiled program --------------------------------------------------------------------
class _Program:
    """A replayable program for one signature, and how to rebuild the function's output."""

    __slots__ = ("run", "build", "source", "n_calls", "rng_inputs", "guards", "save_rng")

    def __init__(self, run: Callable[..., Any], build: Callable[[Any], Any], source: str, n_calls: int,
                 rng_inputs: list[int], guards: bool) -> None:
        self.run = run
        self.build = build
        self.source = source
        self.n_calls = n_calls
        self.rng_inputs = rng_inputs
        self.guards = guards
        self.save_rng = bool(rng_inputs) and guards  # draws made before a failing guard are undone


def _finish(tr: _Trace, out_leaves: list[Any], donate: set[int], input_vars: list[int | None],
            aliasing: Any = None) -> tuple[str, list[Any]]:
    """Optimise the recorded program and write its source; ``out_leaves`` become return expressions.

    A program that writes into its arguments (donated ones, or ``f``'s own in-place writes) first
    checks that they share memory as they did while tracing (``aliasing``, from ``_aliases``)."""
    out_srcs: list[str | None] = []
    out_vars: list[int] = []
    for leaf in out_leaves:
        if type(leaf) is TracedArray:
            if leaf._tr is not tr:
                tr._foreign(leaf)
            out_vars.append(leaf._id)
            out_srcs.append(f"v{leaf._id}")
        else:
            out_srcs.append(None)
    instrs = tr.instrs
    n = len(tr.values)
    storage = tr.storage
    input_set = {v for v in input_vars if v is not None}
    input_storage = {storage[v] for v in input_set}
    out_storage = {storage[v] for v in out_vars}
    # 1. dead code: walk backwards, keeping what an output, a guard or a kept write needs.
    live_vars = set(out_vars)
    live_storage = set(out_storage) | input_storage
    kept: list[_Instr] = []
    for ins in reversed(instrs):
        outs = ins.outs
        ids = () if outs is None else (outs if type(outs) is tuple else (outs,))
        needed = (ins.effect or ins.kind == "guard" or any(i in live_vars for i in ids)
                  or bool(ins.writes & live_storage))
        if not needed:
            continue
        kept.append(ins)
        for r in ins.reads:
            live_vars.add(r)
            live_storage.add(storage[r])
    kept.reverse()
    # 2. an elementwise result written into an input that dies at this call: an intermediate (or a
    #    donated argument, once every guard has held) that is a whole buffer of the result's shape
    #    and dtype, and that nothing (no view of it either) reads afterwards.
    last_read: dict[int, int] = {}  # storage -> index of the last instruction reading it
    for i, ins in enumerate(kept):
        for r in ins.reads:
            last_read[storage[r]] = i
    for v in out_vars:
        last_read[storage[v]] = len(kept)
    members: dict[int, list[int]] = {}
    for v in range(n):
        members.setdefault(storage[v], []).append(v)
    owner = {v: v for v in range(n) if storage[v] == v}  # storage -> the var that is all of it
    donated = {storage[v] for k, v in enumerate(input_vars) if v is not None and k in donate}
    last_guard = max((i for i, ins in enumerate(kept) if ins.kind == "guard" or ins.check), default=-1)
    writable_inputs = []
    for i, ins in enumerate(kept):
        u = ins.ufunc
        if u is None or ins.kwargs or type(ins.outs) is not int or u.nout != 1:
            continue
        w = ins.outs
        res = tr.values[w]
        if type(res) is not np.ndarray or not res.flags.c_contiguous or storage[w] != w:
            continue
        if res.size > _IN_PLACE_UP_TO.get(u, res.size):
            continue
        for r in ins.reads:
            sr = storage[r]
            v = tr.values[r]
            if owner.get(sr) != r or last_read.get(sr) != i or type(v) is not np.ndarray:
                continue
            if v.shape != res.shape or v.dtype != res.dtype or not v.flags.c_contiguous:
                continue
            if sr in input_storage:
                if sr not in donated or i <= last_guard:
                    continue
                writable_inputs.append(sr)
            elif not v.flags.writeable:
                continue
            ins.kwargs = {"out": f"v{r}"}
            for x in members.pop(w, [w]):  # the result (and any view of it) now lives in r's memory
                storage[x] = sr
                members[sr].append(x)
            last_read[sr] = last_read.get(w, i)
            owner[sr] = w
            break
    # 4. Python floats beside a float array: a 0-d array of its dtype, made once.
    zero_d: dict[tuple[str, Any], str] = {}
    for ins in kept:
        if ins.ufunc is None or len(ins.args) != 2:
            continue
        for pos in (0, 1):
            src = ins.args[pos]
            other = ins.args[1 - pos]
            if not other.startswith("v"):
                continue
            try:
                c = float(src)
            except ValueError:
                continue
            if "." not in src and "e" not in src:
                continue
            ov = tr.values[int(other[1:])]
            if type(ov) is np.ndarray and ov.dtype.kind == "f" and ov.ndim:
                name = zero_d.get((src, ov.dtype))
                if name is None:
                    arr = np.array(c, ov.dtype)
                    arr.flags.writeable = False
                    name = zero_d[src, ov.dtype] = f"k{len(tr.names)}"
                    tr.names[name] = arr
                ins.args = list(ins.args)
                ins.args[pos] = name
    # 5. the source. A variable's name is given to a new one as soon as it is dead, so that each
    #    array is freed when its last reader is done (NumPy's allocator hands it back warm), and
    #    the function has a few dozen locals rather than one per call.
    last_use: dict[int, int] = {}
    for i, ins in enumerate(kept):
        for r in ins.reads:
            last_use[r] = i
    for v in out_vars:
        last_use[v] = len(kept)
    free: list[str] = []
    names: dict[int, str] = {}
    count = 0

    def fresh() -> str:
        nonlocal count
        if free:
            return free.pop()
        count += 1
        return f"r{count}"

    param_names = []
    for k, iv in enumerate(input_vars):
        if iv is None:
            param_names.append(f"_{k}")
        else:
            names[iv] = fresh()
            param_names.append(names[iv])
    lines = []
    arrays = [v for v in input_vars if v is not None and type(tr.values[v]) is np.ndarray]
    written = {s for ins in kept for s in ins.writes} & input_storage
    changing = [v for k, v in enumerate(input_vars) if v in arrays and (k in donate or storage[v] in written)]
    if changing and len(arrays) > 1:  # arrays it writes into (or may, donated) must alias as when traced
        test = f"_aliases({', '.join(names[v] for v in arrays)}) != {aliasing!r}"
        if aliasing is None:  # first a quick test, true whenever they could share memory
            quick = [f"{names[v]}.base is not None" for v in changing]  # each owns its memory, so then ...
            for v in changing:  # ... only the same array, or a view of it, shares it
                key = (tr.values[v].shape, tr.values[v].dtype, tr.values[v].strides)
                quick += [f"{names[v]} is {names[u]}" for u in arrays[arrays.index(v) + 1:]
                          if (tr.values[u].shape, tr.values[u].dtype, tr.values[u].strides) == key]
            for u in arrays:
                if u not in changing:
                    bases = " or ".join(f"{names[u]}.base is {names[v]}" for v in changing)
                    quick.append(f"({names[u]}.base is not None and ({bases}))")
            test = f"({' or '.join(quick)}) and {test}"
        lines.append(f"    if {test}: raise _GF")
    lines += [f"    if not {names[r]}.flags.writeable: {names[r]} = _writable({names[r]})"
              for r in dict.fromkeys(writable_inputs)]  # a donated array written into: unlock it, or copy it
    for i, ins in enumerate(kept):
        text = _line(ins) + (f"\n    if {ins.check}: raise _GF" if ins.kind != "guard" and ins.check else "")
        local = {r: names[r] for r in ins.reads}
        for r in set(ins.reads):
            if last_use.get(r) == i and r not in out_vars:
                free.append(names.pop(r))
        outs = ins.outs
        for o in () if outs is None else (outs if type(outs) is tuple else (outs,)):
            local[o] = names[o] = fresh()
        text = _VAR.sub(functools.partial(_rename, local), text)
        if ins.err != tr.err:  # it ran inside an np.errstate block: so does its replay
            body = text.replace("\n", "\n    ").replace("    ", "        ", 1)
            text = f"    with _errstate(**{tr.name(dict(ins.err))}):\n" + body
        lines.append(text)
        for o in () if outs is None else (outs if type(outs) is tuple else (outs,)):
            if o not in last_use and o not in out_vars:  # never read: its name is free again
                free.append(names.pop(o))
    ret = ", ".join(names[int(s[1:])] if s is not None else "None" for s in out_srcs)
    comma = "," if len(out_srcs) == 1 else ""
    source = f"def _replay({', '.join(param_names)}):\n" + "\n".join(lines) + f"\n    return ({ret}{comma})\n"
    return source, kept


# np.sign is far slower writing into its own input above a few thousand elements (4x at 32,768,
# measured), faster on tiny arrays (no allocation)
_IN_PLACE_UP_TO = {np.sign: 1024}
_VAR = re.compile(r"\bv(\d+)\b")


def _line(ins: _Instr) -> str:
    if ins.kind == "guard":
        return f"    if {ins.check}: raise _GF"
    outs = ins.outs
    target = "" if outs is None else (f"v{outs} = " if type(outs) is int else
                                      (", ".join(f"v{o}" for o in outs) + ("," if len(outs) == 1 else "") + " = "
                                       if outs else "_ = "))
    if ins.kind == "getitem":
        return f"    {target}{ins.callee}[{ins.args[0]}]"
    if ins.kind == "setitem":
        return f"    {ins.callee}[{ins.args[0]}] = {ins.args[1]}"
    kwargs = ins.kwargs
    out = kwargs.get("out")
    if out is not None and len(kwargs) == 1 and ins.nin and len(ins.args) == ins.nin:
        # a ufunc's out= given positionally: no keyword parsing at each call
        return f"    {target}{ins.callee}({', '.join(ins.args)}, {out[1:-2] if out.endswith(',)') else out})"
    args = list(ins.args) + [f"{k}={v}" for k, v in kwargs.items()]
    return f"    {target}{ins.callee}({', '.join(args)})"


# ----- the jitted function ---------------------------------------------------------------------
_local = threading.local()


def _closure_generators(f: Any, depth: int = 0) -> list[str]:
    """Names of np.random.Generator objects that ``f`` reads from its closure, globals or defaults."""
    found: list[str] = []
    if depth > 2:
        return found
    if isinstance(f, functools.partial):
        for v in (*f.args, *(f.keywords or {}).values()):
            if isinstance(v, np.random.Generator):
                found.append("a functools.partial argument")
        return found + _closure_generators(f.func, depth + 1)
    if isinstance(f, types.MethodType):
        f = f.__func__
    code = getattr(f, "__code__", None)
    if code is None:
        return found
    candidates: list[tuple[str, Any]] = []
    for name, cell in zip(code.co_freevars, f.__closure__ or ()):
        try:
            candidates.append((name, cell.cell_contents))
        except ValueError:
            pass
    g = getattr(f, "__globals__", {})
    for name in code.co_names:
        if name in g:
            candidates.append((name, g[name]))
    for v in (f.__defaults__ or ()):
        candidates.append(("a default argument", v))
    for name, v in candidates:
        if isinstance(v, np.random.Generator):
            found.append(name)
        elif isinstance(v, types.FunctionType) and v is not f and v.__module__ == getattr(f, "__module__", None):
            found += _closure_generators(v, depth + 1)
    return found


def _leaf_names(args: tuple[Any, ...], kwargs: dict[str, Any], statics: list[tuple[int, Any]]) -> list[str]:
    """The name of each argument leaf in an error message: ``args[0]['w']``, ``kwargs['x']``."""
    static = dict(statics)

    def paths(td: Any, where: str) -> list[str]:
        if td.kind is None:
            return [where]
        keys = [f"[{k!r}]" for k in td.meta] if td.kind is dict else [f"[{i}]" for i in range(len(td.children))]
        return [p for k, c in zip(keys, td.children) for p in paths(c, where + k)]

    dynamic = tuple(None if i in static else a for i, a in enumerate(args))
    td_args, td_kwargs = _tree.tree_flatten((dynamic, kwargs))[1].children
    return paths(td_args, "args") + paths(td_kwargs, "kwargs")


def _difference(old: Any, new: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                statics: list[tuple[int, Any]]) -> str:
    """What changed from signature ``old`` to ``new``, for the warning about traces for new signatures."""
    if old is None or old[0] != new[0] or len(old[2]) != len(new[2]):
        return "the last change: the structure of the arguments"
    for (i, a), (_, b) in zip(old[1], new[1]):
        if a is not b and a != b:
            return f"the last change: static argument {i}, {a!r:.40} then {b!r:.40}"
    for k, (a, b) in enumerate(zip(old[2], new[2])):
        if a != b:
            names = _leaf_names(args, kwargs, statics)
            name = names[k]
            ties = [f"the same Tensor as {names[x[1]]}" if type(x) is tuple and x[0] == "tied" else "" for x in (a, b)]
            if ties[0] or ties[1]:  # a tied Tensor (one object at several places)
                return f"the last change: {name}, {ties[0] or 'a Tensor of its own'} then {ties[1] or 'one of its own'}"
            if type(a) is tuple and type(b) is tuple and a[0] == b[0] and a[0] in (np.ndarray, Tensor) and len(a) > 3:
                for i, what in ((1, "shape"), (2, "dtype"), (3, "layout")):
                    if a[i] != b[i]:
                        show = [repr(a[1]), str(a[2]), f"strides {a[3]}" if a[3] else "C order"][i - 1]
                        then = [repr(b[1]), str(b[2]), f"strides {b[3]}" if b[3] else "C order"][i - 1]
                        return f"the last change: {name}, {what} {show} then {then}"
            return f"the last change: {name}"
    return "the last change: the arguments"


_WALK = 2000  # objects visited at most, looking for generators the function can reach


def _held_generators(f: Any, statics: list[tuple[int, Any]], leaves: list[Any]) -> list[tuple[str, Any, bytes]]:
    """``(name, generator, state)`` of each NumPy generator ``f`` can reach that is not an argument.

    The walk follows a bound method's object, a callable object's attributes, closures, the globals
    a function names, defaults, ``functools.partial`` arguments, static arguments, containers and
    the attributes of the objects found there (a few levels deep). A generator whose state changes
    while ``f`` is traced drew numbers that the program would replay.
    """
    todo: list[tuple[str, Any, int]] = [(f"static argument {i}", a, 1) for i, a in statics]
    if isinstance(f, types.MethodType):
        todo += [("", f.__func__, 0), ("self", f.__self__, 1)]
    elif isinstance(f, (types.FunctionType, functools.partial, Jitted)):
        todo.append(("", f, 0))
    else:
        todo.append(("self", f, 1))  # a callable object (a module): its attributes
    arguments = {id(x.bit_generator) for x in leaves if isinstance(x, np.random.Generator)}
    found: list[tuple[str, Any, bytes]] = []
    seen: set[int] = set()
    while todo and len(seen) < _WALK:
        name, x, depth = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if isinstance(x, (np.random.Generator, np.random.RandomState)):
            if id(getattr(x, "bit_generator", getattr(x, "_bit_generator", None))) not in arguments:
                found.append((name, x, _rng_state(x)))
            continue
        if depth > 4 or isinstance(x, _OPAQUE):
            continue
        try:
            children = _children(x)
        except Exception:  # noqa: BLE001 - (an object whose attributes cannot be read: not followed)
            continue
        for sub, child in children:
            todo.append((sub if not name or sub[:1] not in ".[" else name + sub, child, depth + 1))
    return found


_OPAQUE = (str, bytes, int, float, bool, complex, type(None), np.ndarray, np.generic, np.dtype, Tensor, TracedArray,
           types.ModuleType, type, types.BuiltinFunctionType, types.CodeType, _tree.TreeDef)


def _children(x: Any) -> list[tuple[str, Any]]:
    """What ``x`` holds, named as seen from its holder (``.w``, ``[0]``) or as a variable of a function."""
    if isinstance(x, types.FunctionType):
        if (x.__module__ or "").split(".")[0] in ("numpy", "leanpass"):
            return []
        code = x.__code__
        out: list[tuple[str, Any]] = []
        for name, cell in zip(code.co_freevars, x.__closure__ or ()):
            try:
                out.append((name, cell.cell_contents))
            except ValueError:  # (an empty cell)
                pass
        codes = [code]
        for c in codes:
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]  # nested functions' names too
            out += [(n, x.__globals__[n]) for n in c.co_names if n in x.__globals__]
        return out + [("a default argument", v) for v in (x.__defaults__ or ())]
    if isinstance(x, types.MethodType):
        return [(".__self__", x.__self__), ("", x.__func__)]
    if isinstance(x, functools.partial):
        return [("", x.func)] + [("a functools.partial argument", v) for v in (*x.args, *x.keywords.values())]
    if isinstance(x, Jitted):
        return [("", x.f)]
    if type(x) is dict:
        return [(f"[{k!r}]", v) for k, v in list(x.items())[:_WALK]]
    if isinstance(x, (list, tuple, set, frozenset)):
        return [(f"[{i}]", v) for i, v in enumerate(list(x)[:_WALK])]
    attrs = getattr(x, "__dict__", None)
    out = [(f".{k}", v) for k, v in attrs.items()] if type(attrs) is dict else []
    for cls in type(x).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(x, slot):
                out.append((f".{slot}", getattr(x, slot)))
    return out


def _rng_state(g: Any) -> bytes:
    state = g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state(legacy=False)
    return pickle.dumps(state)


class Jitted:
    """A function compiled by ``jit``: call it like the function. ``trace_count`` counts its traces."""

    def __init__(self, f: Callable[..., Any], static_argnums: tuple[int, ...], donate_argnums: tuple[int, ...],
                 strict: bool, cache_size: int = _CACHE_SIZE) -> None:
        functools.update_wrapper(self, f, updated=())  # (name, doc; none of f's own attributes)
        self.f = f
        self.static_argnums = static_argnums
        self.donate_argnums = donate_argnums
        self.strict = strict
        self.cache_size = cache_size
        self.where = f"jit({getattr(f, '__name__', type(f).__name__)})"
        # signature -> [programs (newest first), trace count, checker, when it was last used,
        #               whether two Tensor arguments are alike (then they may be one: see __call__)]
        self._cache: dict[Any, list[Any]] = {}
        self._lock = threading.Lock()
        self.trace_count = 0
        self._signatures = 0  # traces for a signature not in the cache
        self._uses = 0  # calls that found their signature in the cache, or traced it
        # positional arguments a call must have for static_argnums and donate_argnums
        self._nargs = max([i + 1 if i >= 0 else -i for i in static_argnums + donate_argnums], default=0)
        self._eager: set[Any] = set()
        self._fast: Any = None  # (checker, program) of the last signature replayed
        names = _closure_generators(f)
        if names:
            raise TypeError(
                f"{self.where}: the function uses a np.random.Generator from outside "
                f"({', '.join(sorted(set(names)))}). "
                "Under jit its numbers would be drawn once, when the function is traced, and the same numbers "
                "replayed at every call. Pass the generator as an argument instead: each call then draws new "
                "numbers, the ones the function would draw without jit"
            )

    def __repr__(self) -> str:
        return f"<jitted {getattr(self.f, '__qualname__', self.f)!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not _depth.get() and not _tensor_module._debug_nans:  # the last signature's check
            raw = fast[0](args, kwargs)
            if raw is not None:
                prog = fast[1]
                states = [raw[i].bit_generator.state for i in prog.rng_inputs] if prog.save_rng else None
                try:
                    return prog.build(prog.run(*raw))
                except Exception:  # noqa: BLE001 - a failed guard or an error: the general path below
                    if states:
                        for i, st in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = st
        if _depth.get() or getattr(_local, "trace", None) is not None or _tensor_module._debug_nans:
            # inside grad/vjp (its ops join that graph), another jit's trace, or debug_nans (it checks each op)
            return self.f(*args, **kwargs)
        if len(args) < self._nargs:
            for name, nums in (("static_argnums", self.static_argnums), ("donate_argnums", self.donate_argnums)):
                for i in nums:
                    if not -len(args) <= i < len(args):
                        raise ValueError(
                            f"{self.where}: {name}={nums!r}, but the function was called with {len(args)} "
                            f"positional argument{'s' if len(args) != 1 else ''}: pass argument {i} by position"
                        )
        statics: list[tuple[int, Any]] = []
        dynamic: list[Any] = []
        for i, a in enumerate(args):
            if i in self.static_argnums or (i - len(args)) in self.static_argnums:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(
                        f"{self.where}: static argument {i} must be hashable, got {type(a).__name__}"
                    ) from None
                if getattr(a, "_lp_batched", False):
                    return self.f(*args, **kwargs)  # under vmap: f itself, batched by vmap
                statics.append((i, a))
                dynamic.append(None)
            else:
                dynamic.append(a)
        leaves: list[Any] = []
        spec = _flatten((tuple(dynamic), kwargs), leaves)
        try:
            leaf_keys = [_leaf_key(x, self.where) for x in leaves]
        except _UnderVmapError:
            return self.f(*args, **kwargs)  # batched arguments: f itself, batched by vmap
        key = (spec, tuple(statics), tuple(leaf_keys))
        entry = self._cache.get(key)
        # A Tensor at several places (tied weights) has a signature of its own. Only Tensors alike (the
        # same shape, dtype, ...) can be one object: a signature without them needs no look.
        if (entry is None or entry[4]) and _tree.repeats(leaves) and _tie(leaves, leaf_keys):
            key = (spec, key[1], tuple(leaf_keys))
            entry = self._cache.get(key)
        if key in self._eager:
            return self.f(*args, **kwargs)
        if entry is not None:
            self._uses += 1
            entry[3] = self._uses
            raw = [x._data if type(x) is Tensor else x for x in leaves]
            for prog in entry[0]:
                states = [raw[i].bit_generator.state for i in prog.rng_inputs] if prog.save_rng else None
                try:
                    outs = prog.run(*raw)
                except _GuardFailedError:
                    if states:
                        for i, s in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = s
                    continue
                except Exception:  # noqa: BLE001 - traced again below, which raises it as f does
                    if states:
                        for i, s in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = s
                    break
                self._fast = (entry[2], prog) if entry[2] is not None else None
                return prog.build(outs)
        return self._trace(args, kwargs, statics, leaves, key)

    def _trace(self, args: tuple[Any, ...], kwargs: dict[str, Any], statics: list[tuple[int, Any]], leaves: list[Any],
               key: Any) -> Any:
        entry = self._cache.get(key)
        if entry is not None and entry[1] >= _MAX_TRACES:
            warnings.warn(
                f"{self.where}: Python control flow on traced values changed at {_MAX_TRACES} calls with this "
                "argument signature; it now runs without jit for these arguments. Use NumPy operations "
                "(np.where) for value-dependent choices, or strict=True to find where they are",
                RuntimeWarning, stacklevel=3)
            self._eager.add(key)
            return self.f(*args, **kwargs)
        donate: set[int] = set()
        if self.donate_argnums:
            counts = []
            for i, a in enumerate(args):
                sub: list[Any] = []
                if i not in dict(statics):
                    _flatten(a, sub)
                counts.append(len(sub))
            start = 0
            for i, c in enumerate(counts):
                if i in self.donate_argnums or (i - len(args)) in self.donate_argnums:
                    donate.update(range(start, start + c))
                start += c
        # a Tensor at several leaves (tied weights): one input, at its first place
        tied = {k: lk[1] for k, lk in enumerate(key[2]) if type(lk) is tuple and lk[0] == "tied"}
        for k, j in tied.items():
            if (k in donate) != (j in donate):
                names = _leaf_names(args, kwargs, statics)
                raise ValueError(
                    f"{self.where}: {names[j]} and {names[k]} are one Tensor (tied weights), and donate_argnums "
                    "donates only one of them: a donated array is overwritten by the call, so no other argument "
                    "may use it. Donate every argument that holds the Tensor, or none of them"
                )
        # arguments that share memory (one array in two leaves, or views of one array)
        arrays = [k for k, x in enumerate(leaves)
                  if type(x._data if type(x) is Tensor else x) is np.ndarray and k not in tied]
        aliasing = _aliases(*[leaves[k]._data if type(leaves[k]) is Tensor else leaves[k] for k in arrays])
        for i, j in aliasing or ():
            if arrays[i] in donate or arrays[j] in donate:
                names = _leaf_names(args, kwargs, statics)
                raise ValueError(
                    f"{self.where}: {names[arrays[i]]} and {names[arrays[j]]} share memory (one array in two "
                    "places, or views of one array), and donate_argnums donates one of them: a donated array "
                    "is overwritten by the call, so no other argument may use it. Pass a copy (np.copy) to one "
                    "of them, or leave that argument out of donate_argnums"
                )
        tr = _Trace(self.strict, self.where)
        # stand-ins for every array, Tensor array, number and generator of the arguments
        new_leaves: list[Any] = []
        input_vars: list[int | None] = []
        rng_inputs = []
        input_storage: set[int] = set()
        tr._inputs_storage = input_storage
        for k, x in enumerate(leaves):
            t = type(x)
            if k in tied:  # the stand-in of its first place: f sees the tie, as without jit
                new_leaves.append(new_leaves[tied[k]])
                input_vars.append(None)
            elif t is Tensor:
                d = x._data
                var = tr.new_var(d)
                nt = _const(var, x._trace, _next_seq())
                new_leaves.append(nt)
                input_vars.append(var._id)
            elif t is np.ndarray or t in _NUMBERS or isinstance(x, np.generic):
                var = tr.new_var(x)
                new_leaves.append(var)
                input_vars.append(var._id)
            elif isinstance(x, np.random.Generator):
                vid = len(tr.values)
                tr.values.append(x)
                tr.storage.append(vid)
                new_leaves.append(_TracedGenerator(x, tr, vid))
                input_vars.append(vid)
                rng_inputs.append(k)
            else:
                new_leaves.append(x)
                input_vars.append(None)
        for i, j in aliasing or ():  # the program's analysis sees them as one buffer
            tr.storage[input_vars[arrays[j]]] = tr.storage[input_vars[arrays[i]]]
        for v in input_vars:
            if v is not None:
                input_storage.add(tr.storage[v])
        it = iter(new_leaves)
        dynamic_args, new_kwargs = _rebuild(key[0], it)
        new_args = list(dynamic_args)
        for i, a in statics:
            new_args[i] = a
        held = _held_generators(self.f, statics, leaves)
        previous = getattr(_local, "trace", None)
        _local.trace = tr
        try:
            out = self.f(*new_args, **new_kwargs)
            out_leaves: list[Any] = []
            out_spec = _flatten(out, out_leaves)
            kinds, returned = self._outputs(tr, out_leaves)
        except _UnderVmapError:  # it returned values batched by an enclosing vmap (from its closure)
            kinds = None
        finally:
            _local.trace = previous
            tr.active = False
        for name, gen, state in held:
            if _rng_state(gen) != state:
                raise TypeError(
                    f"{self.where}: the function drew random numbers from {name}, which is not an argument of the "
                    "jitted function. Under jit those numbers would be drawn once, when the function is traced, "
                    "and the same numbers replayed at every call. Pass a np.random.Generator as an argument "
                    "instead (for example step(model, x, rng) calling model(x, rng=rng)): each call then draws "
                    "new numbers, the ones the function draws without jit"
                )
        if kinds is None:
            self._eager.add(key)
            return self.f(*args, **kwargs)
        source, kept = _finish(tr, returned, donate, input_vars, aliasing)
        namespace = dict(tr.names)
        namespace["_GF"] = _GuardFailedError
        namespace["_same"] = _same
        namespace["_same_array"] = _same_array
        namespace["_writable"] = _writable
        namespace["_aliases"] = _aliases
        namespace["_errstate"] = np.errstate
        exec(compile(source, f"<{self.where}>", "exec"), namespace)  # noqa: S102 - our own program
        n_out, build_tree = _builder(out_spec)
        guards = any(ins.kind == "guard" or ins.check for ins in kept)
        prog = _Program(namespace["_replay"], _output_builder(kinds, build_tree), source, len(kept), rng_inputs, guards)
        cause = None
        with self._lock:
            self.trace_count += 1
            self._uses += 1
            entry = self._cache.get(key)
            if entry is None:  # a new signature
                self._signatures += 1
                if self._signatures == _RETRACE_WARNING:
                    last = max(self._cache.items(), key=lambda item: item[1][3], default=(None,))[0]
                    cause = _difference(last, key, args, kwargs, statics)
                while len(self._cache) >= self.cache_size:  # the least recently used signature goes
                    old = min(self._cache.items(), key=lambda item: item[1][3])[0]
                    del self._cache[old]
                    self._eager.discard(old)
                alike = [k for k in key[2] if type(k) is tuple and k[0] is Tensor]
                entry = self._cache[key] = [[], 0, _checker(key, len(args)), 0, len(set(alike)) < len(alike)]
            entry[3] = self._uses
            entry[0].insert(0, prog)
            del entry[0][_MAX_PROGRAMS:]
            entry[1] += 1
            self._fast = (entry[2], prog) if entry[2] is not None else None
        if cause is not None:
            warnings.warn(
                f"{self.where} has traced for {_RETRACE_WARNING} different argument signatures ({cause}). Each new "
                "shape, dtype, structure or static argument value traces the function again, which costs far more "
                "than a replay. Keep shapes fixed (pad or bucket the batches), and pass changing values as array "
                "or number arguments rather than static_argnums",
                RuntimeWarning, stacklevel=3)
        values = [tr.values[leaf._id] if type(leaf) is TracedArray else None for leaf in returned]
        return prog.build(values)

    def _outputs(self, tr: _Trace, out_leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        """How to rebuild each output leaf, and the value the program returns for it."""
        kinds: list[Any] = []
        returned: list[Any] = []
        first: dict[int, int] = {}  # a Tensor returned at several places (tied weights): id -> first place
        for leaf in out_leaves:
            t = type(leaf)
            if getattr(leaf._data if t is Tensor else leaf, "_lp_batched", False):
                raise _UnderVmapError
            if t is Tensor:
                j = first.setdefault(id(leaf), len(kinds))
                if j < len(kinds):  # one object again, as without jit
                    kinds.append(("same", j))
                    returned.append(None)
                    continue
                d = leaf._data
                if leaf._op != "leaf" and leaf._trace:
                    raise TypeError(
                        f"{self.where}: the function returned a Tensor that is part of a graph being "
                        "differentiated (requires_grad); jit cannot hand back a graph. Compute gradients "
                        "inside the function (lp.grad / lp.value_and_grad) and return them, or return "
                        "t.detach()"
                    )
                if type(d) is TracedArray:
                    ro = type(d._v) is np.ndarray and not d._v.flags.writeable
                    kinds.append(("tensor", leaf._trace, ro))
                    returned.append(d)
                else:
                    kinds.append(("const", leaf))
                    returned.append(None)
            elif t is TracedArray:
                v = leaf._v
                kinds.append(("array", type(v) is np.ndarray and not v.flags.writeable))
                returned.append(leaf)
            elif isinstance(leaf, _TracedGenerator):
                raise TypeError(f"{self.where}: returning a generator argument from a jitted function is not supported")
            else:
                if isinstance(leaf, np.ndarray) and leaf.flags.writeable:
                    kinds.append(("copy", _copy(leaf)))
                else:
                    kinds.append(("const", leaf))
                returned.append(None)
        return kinds, returned


def _checker(key: Any, nargs: int) -> Any:
    """``check(args, kwargs) -> raw leaves or None`` for one signature, written out as Python.

    It tests each argument's type, structure, shape and dtype in line (a frozen module by its
    remembered flatten) and returns the arrays the program takes, or None when anything
    differs (the general path then flattens and looks the signature up). None when the
    structure has containers it cannot write a test for.
    """
    spec, statics, leaf_keys = key
    names: dict[str, Any] = {"Tensor": Tensor, "nd": np.ndarray, "tree": _tree, "CACHE": _tree._CACHE,
                             "Gen": np.random.Generator}
    lines = ["def check(args, kwargs):", f"    if len(args) != {nargs}: return None"]
    leaves: list[str] = []
    counter = [0]
    tensors: dict[int, str] = {}  # leaf index -> the name of its Tensor
    separate: dict[Any, list[str]] = {}  # Tensors of one key that must be separate objects (not tied)

    def name(obj: Any) -> str:
        n = f"n{len(names)}"
        names[n] = obj
        return n

    def tmp() -> str:
        counter[0] += 1
        return f"t{counter[0]}"

    def leaf(expr: str) -> None:
        k = leaf_keys[len(leaves)]
        t = tmp()
        lines.append(f"    {t} = {expr}")
        if type(k) is tuple and k[0] == "tied":  # the Tensor of an earlier place (the program ignores it)
            lines.append(f"    if {t} is not {tensors[k[1]]}: return None")
            leaves.append("None")
            return
        if type(k) is tuple and k[0] is Tensor:
            tensors[len(leaves)] = t
            separate.setdefault(k, []).append(t)
            d = tmp()
            lines.append(f"    if type({t}) is not Tensor: return None")
            lines.append(f"    {d} = {t}._data")
            if len(k) == 5:
                lines.append(f"    if type({d}) is not nd or {d}.shape != {k[1]!r} or {d}.dtype is not {name(k[2])}:")
                lines.append("        return None")
                lines.append(_layout_check(d, k[3]))
            else:
                lines.append(f"    if type({d}) is not {name(k[1])}: return None")
            lines.append(f"    if ({t}._trace != 0) is not {k[-1]!r}: return None")
            leaves.append(d)
            return
        if type(k) is tuple and k[0] is np.ndarray:
            lines.append(f"    if type({t}) is not nd or {t}.shape != {k[1]!r} or {t}.dtype is not {name(k[2])}:")
            lines.append("        return None")
            lines.append(_layout_check(t, k[3]))
        elif k in _NUMBERS:
            lines.append(f"    if type({t}) is not {k.__name__}: return None")
        elif k is np.random.Generator:
            lines.append(f"    if not isinstance({t}, Gen): return None")
        elif type(k) is tuple and len(k) == 1:
            lines.append(f"    if type({t}) is not {name(k[0])}: return None")
        else:  # a static leaf
            c = name(k[2])
            lines.append(f"    if type({t}) is not {name(k[1])} or ({t} is not {c} and {t} != {c}): return None")
        leaves.append(t)

    def node(s: Any, expr: str) -> None:
        if s is None:
            leaf(expr)
            return
        t = tmp()
        lines.append(f"    {t} = {expr}")
        if s[0] == "m":
            td = s[1]
            h = tmp()
            lines.append(f"    if type({t}) is not {name(td.kind)}: return None")
            lines.append(f"    {h} = {t}.__dict__.get(CACHE)")
            lines.append(f"    if {h} is None or {h}[0] is not tree._epoch or {h}[2] is not {name(td)}: return None")
            lines.append(f"    {h} = {h}[1]")
            for i in range(s[2]):
                leaf(f"{h}[{i}]")
            return
        kind, meta, kids = s
        if kind is tuple or kind is list:
            lines.append(f"    if type({t}) is not {kind.__name__} or len({t}) != {len(kids)}: return None")
            for i, c in enumerate(kids):
                node(c, f"{t}[{i}]")
        elif kind is dict:
            lines.append(f"    if type({t}) is not dict or tuple({t}) != {name(meta)}: return None")
            for k_, c in zip(meta, kids):
                node(c, f"{t}[{name(k_)}]")
        elif kind is type(None):
            lines.append(f"    if {t} is not None: return None")
        elif _tree._REGISTRY.get(kind) is None and issubclass(kind, tuple):  # a NamedTuple
            lines.append(f"    if type({t}) is not {name(kind)}: return None")
            for i, c in enumerate(kids):
                node(c, f"{t}[{i}]")
        else:
            raise _NoCheckerError

    try:
        (arg_kind, _, arg_kids), kw_spec = spec[2]
        static = dict(statics)
        for i, c in enumerate(arg_kids):
            if i in static:
                v = name(static[i])
                lines.append(f"    if args[{i}] is not {v} and args[{i}] != {v}: return None")
            else:
                node(c, f"args[{i}]")
        node(kw_spec, "kwargs")
    except _NoCheckerError:
        return None
    for group in separate.values():  # (only Tensors alike can be one object; a set is quicker beyond five)
        if len(group) > 5:
            lines.append(f"    if len({{{', '.join(group)}}}) != {len(group)}: return None")
        elif len(group) > 1:
            pairs = [f"{a} is {b}" for i, a in enumerate(group) for b in group[i + 1:]]
            lines.append(f"    if {' or '.join(pairs)}: return None")
    lines.append(f"    return [{', '.join(leaves)}]")
    exec(compile("\n".join(lines) + "\n", "<leanpass jit check>", "exec"), names)  # noqa: S102
    return names["check"]


def _layout_check(x: str, layout: Any) -> str:
    if layout is None:
        return f"    if not {x}.flags.c_contiguous: return None"
    return f"    if {x}.flags.c_contiguous or {x}.strides != {layout!r}: return None"


class _NoCheckerError(Exception):
    """The signature has a container the written-out check does not know."""


def _rebuild(spec: Any, it: Any) -> Any:
    if spec is None:
        return next(it)
    if spec[0] == "m":
        return _tree.tree_unflatten(spec[1], [next(it) for _ in range(spec[2])])
    kind, meta, kids = spec
    children = [_rebuild(c, it) for c in kids]
    if kind is tuple:
        return tuple(children)
    entry = _tree._REGISTRY.get(kind)
    if entry is None:
        return kind(*children)
    return entry[1](meta, children)


def _output_builder(kinds: list[Any], build_tree: Callable[[list[Any]], Any]) -> Callable[[Any], Any]:
    """``program outputs -> the function's output``: Tensors rebuilt around the replayed arrays."""
    lines = []
    names: dict[str, Any] = {"B": build_tree, "C": _const, "S": _next_seq, "_copy": _copy}
    for i, k in enumerate(kinds):
        if k[0] == "tensor":
            _, trace, ro = k
            if ro:
                lines.append(f"    o[{i}].flags.writeable = False")
            lines.append(f"    L{i} = C(o[{i}], {trace}, S())" if trace else f"    L{i} = C(o[{i}])")
        elif k[0] == "array":
            if k[1]:
                lines.append(f"    if o[{i}].__class__ is _nd: o[{i}].flags.writeable = False")
            lines.append(f"    L{i} = o[{i}]")
        elif k[0] == "copy":
            names[f"K{i}"] = k[1]
            lines.append(f"    L{i} = _copy(K{i})")
        elif k[0] == "same":
            lines.append(f"    L{i} = L{k[1]}")
        else:
            names[f"K{i}"] = k[1]
            lines.append(f"    L{i} = K{i}")
    names["_nd"] = np.ndarray
    body = "\n".join(lines) if lines else "    pass"
    src = f"def build(o):\n{body}\n    return B([{', '.join(f'L{i}' for i in range(len(kinds)))}])\n"
    exec(compile(src, "<leanpass jit output>", "exec"), names)  # noqa: S102
    build: Callable[[Any], Any] = names["build"]
    return build


def jit(f: Callable[..., Any] | None = None, *, static_argnums: int | tuple[int, ...] = (),
        donate_argnums: int | tuple[int, ...] = (), strict: bool = False, cache_size: int = _CACHE_SIZE) -> Any:
    """Compile ``f``: trace it once per argument signature, then replay the recorded NumPy calls.

    The signature is the arguments' pytree structure, each array's (and Tensor's) shape and
    dtype, the type of each Python number, and the values of the ``static_argnums`` arguments;
    a new signature traces again. Results equal ``f``'s bit for bit. Python control flow on a
    traced value (``if loss > 1``, ``float(x)``) is re-checked at every call and traced again
    when it changes; ``strict=True`` raises instead. ``donate_argnums`` names arguments whose
    arrays the caller gives up: the new values are written into them. Python side effects
    (``print``, appending to a list) happen only while tracing. Programs are kept for the
    ``cache_size`` most recently used signatures.

    >>> import numpy as np
    >>> import leanpass as lp
    >>> @lp.jit
    ... def step(w, x):
    ...     return w - 0.1 * lp.grad(lambda w: ((x @ w) ** 2).sum())(w)
    >>> w = np.array([1.0, -1.0])
    >>> x = np.array([[1.0, 2.0]])
    >>> step(w, x)
    array([ 1.2, -0.6])
    >>> step(w, x).tolist() == (w - 0.1 * lp.grad(lambda w: ((x @ w) ** 2).sum())(w)).tolist()
    True
    """
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, donate_argnums=donate_argnums, strict=strict,
                                 cache_size=cache_size)
    if not callable(f):
        raise TypeError(f"jit: expected a function, got {type(f).__name__}")
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    donates = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    for name, nums in (("static_argnums", statics), ("donate_argnums", donates)):
        if not all(isinstance(n, int) for n in nums):
            raise TypeError(f"jit: {name} must be an int or a tuple of ints, got {nums!r}")
    if set(statics) & set(donates):
        raise ValueError("jit: an argument cannot be both static and donated")
    if type(cache_size) is not int or cache_size < 1:
        raise ValueError(f"jit: cache_size must be an int >= 1, got {cache_size!r}")
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):  # (no signature to check against: checked at each call)
        params = []
    if params and all(p.kind is not p.VAR_POSITIONAL for p in params):
        n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        for name, nums in (("static_argnums", statics), ("donate_argnums", donates)):
            for i in nums:
                if not -n <= i < n:
                    raise ValueError(
                        f"jit: {name}={nums!r} names argument {i}, but "
                        f"{getattr(f, '__name__', type(f).__name__)} takes {n} positional argument{'s' * (n != 1)}"
                    )
    return Jitted(f, statics, donates, strict, cache_size)


# Stand-ins are raw arrays to the layers above: Tensors take them as constants, and the rules'
# raw-array paths take them like ndarrays.
_lift.register_array_type(TracedArray)
