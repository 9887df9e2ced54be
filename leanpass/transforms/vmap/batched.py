"""vmap's batched values: a :class:`Batched` stand-in (one vmap ``Level``'s arrays, the mapped axis in
front) and how each NumPy call on stand-ins becomes one call on the whole batch (the ufuncs, the
operators and indexing here; the rules of NumPy's other functions in :data:`RULES`, written in
``rules.py``). The transform itself, ``vmap``, is in ``batching.py``.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from numpy.lib.mixins import NDArrayOperatorsMixin

from ...core.tensor import Tensor

_next_id = itertools.count(1).__next__


class Level:
    """One ``vmap`` call: the batch size, and the level it was made at (the marks the
    enclosing ``grad``-like transforms hold), which says where its per-example gradients are summed."""

    __slots__ = ("id", "size", "depth")

    def __init__(self, size: int, depth: int) -> None:
        self.id = _next_id()
        self.size = size
        self.depth = depth

    def __repr__(self) -> str:
        return f"<vmap level {self.id}, size {self.size}>"


def _np_method(name: str) -> Any:
    """``x.name(...)`` as ``np.name(x, ...)``."""
    fn = getattr(np, name)

    def method(self: Any, *args: Any, **kwargs: Any) -> Any:
        return fn(self, *args, **kwargs)

    method.__name__ = name
    return method


class Batched(NDArrayOperatorsMixin):
    """The values of every example at one ``vmap`` level: ``value`` has the batch axis in front.

    ``shape``, ``ndim``, ``size`` and ``dtype`` are those of one example; NumPy functions,
    operators, indexing and methods act per example. ``value`` is a NumPy array, or a
    ``Batched`` of an outer level (nested ``vmap``).
    """

    __slots__ = ("value", "level")
    _lp_batched = True
    _lp_array = True  # (an array to LeanPass's code: functional._lift.is_array)
    _lp_traced = True  # (a Tensor holding one shows no values: repr(Tensor) says what it holds)

    def __init__(self, value: Any, level: Level) -> None:
        self.value = value
        self.level = level

    # ----- what one example looks like -------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return self.value.shape[1:]

    @property
    def ndim(self) -> int:
        return self.value.ndim - 1

    @property
    def size(self) -> int:
        return math.prod(self.value.shape[1:])

    @property
    def dtype(self) -> np.dtype[Any]:
        return self.value.dtype

    @property
    def T(self) -> Any:  # noqa: N802 - NumPy's name
        return np.transpose(self)

    def __len__(self) -> int:
        if self.value.ndim < 2:
            raise TypeError("len() of an unsized object (each example is 0-d)")
        return int(self.value.shape[1])

    def __iter__(self) -> Any:
        for i in range(len(self)):
            yield self[i]

    def __repr__(self) -> str:
        return f"Batched(level={self.level.id}, per-example shape={self.shape}, dtype={self.dtype})"

    # ----- refusals: nothing leaves the batch as a plain value -------------------------------
    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        raise TypeError(
            "vmap: a batched value cannot become a plain NumPy array (np.asarray, np.array or a "
            "function without a batching rule was called on it inside vmap, or a NumPy function that "
            "does not dispatch on it, such as np.take(plain_array, batched_indices): use lp.take). "
            "Compute with NumPy functions and operators, or LeanPass ops, which are batched; return "
            "the value from the mapped function to get the array of all examples."
        )

    def _scalar(self, kind: str) -> Any:
        raise TypeError(
            f"vmap: {kind}() of a batched value: each example has its own value, so there is no "
            "single Python number. Keep it an array (np.where instead of if/else on values)."
        )

    def __float__(self) -> float:
        return self._scalar("float")  # type: ignore[no-any-return, unused-ignore]

    def __int__(self) -> int:
        return self._scalar("int")  # type: ignore[no-any-return, unused-ignore]

    def __index__(self) -> int:
        return self._scalar("index")  # type: ignore[no-any-return, unused-ignore]

    def __complex__(self) -> complex:
        return self._scalar("complex")  # type: ignore[no-any-return, unused-ignore]

    def item(self, *args: Any) -> Any:
        return self._scalar("item")

    def tolist(self) -> Any:
        return self._scalar("tolist")

    def __bool__(self) -> bool:
        if self.size != 1:
            raise ValueError(
                "The truth value of an array with more than one element is ambiguous. Use a.any() or a.all()"
            )
        flat = self.value.reshape(-1)
        if bool(np.all(flat)):
            return True
        if not bool(np.any(flat)):
            return False
        raise TypeError(
            "vmap: a condition on a batched value is true for some examples and false for others, "
            "so one branch cannot be chosen for the batch. Compute both and select per example "
            "with np.where (or leanpass.where)."
        )

    # ----- NumPy's protocols -----------------------------------------------------------------
    def __array_ufunc__(self, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
        if method == "__call__" and not kwargs:  # the common cases, short (each saves a few microseconds)
            if len(inputs) == 1:  # np.exp(x)
                return Batched(ufunc(self.value), self.level)
            if len(inputs) == 2 and ufunc.signature is None:
                fast = _two(ufunc, self.level, inputs[0], inputs[1])
                if fast is not None:
                    return fast
        lvl = _top(self.level, inputs, kwargs.get("out", ()))
        if lvl is None:
            return NotImplemented
        return _ufunc(lvl, ufunc, method, inputs, kwargs)

    def __array_function__(self, func: Any, types: Any, args: Any, kwargs: Any) -> Any:
        lvl = None if Tensor in types else _top(self.level, args, tuple(kwargs.values()))
        if lvl is None:
            return NotImplemented
        rule = RULES.get(func)
        if rule is None:
            raise TypeError(
                f"vmap: {_name(func)} has no batching rule. Inside vmap, use the NumPy functions "
                "that have one (leanpass.batching.RULES) or LeanPass ops, or call it outside vmap."
            )
        return rule(lvl, *args, **kwargs)

    # ----- indexing ----------------------------------------------------------------------------
    def __getitem__(self, index: Any) -> Any:
        lvl = _top(self.level, index if type(index) is tuple else (index,), ())
        if lvl is None:
            raise TypeError("vmap: index with the Tensor's values (t._data), or index the Tensor")
        if lvl is not self.level:  # an inner level's index: this value is the same for its examples
            return _getitem(lvl, _spread(lvl, self), index)
        return _getitem(lvl, self.value, index)

    def __setitem__(self, index: Any, v: Any) -> None:
        lvl = self.level
        if _top(lvl, index if type(index) is tuple else (index,), (v,)) is not lvl:
            raise TypeError("vmap: writing values of an inner vmap into a value of an outer one; build a new array")
        target, new, pos = _index(lvl, self.value, index)
        target[new] = _spread_like(lvl, v, target[new], pos)

    # ----- methods (each is the NumPy function of the same name) --------------------------
    def reshape(self, *shape: Any, order: str = "C") -> Any:
        s = shape[0] if len(shape) == 1 else shape
        v = self.value
        s = (s,) if type(s) is int else tuple(s)
        return Batched(v.reshape(_batch_shape(v, s), order=order), self.level)

    def transpose(self, *axes: Any) -> Any:
        return np.transpose(self, (axes[0] if len(axes) == 1 else axes) if axes else None)

    def astype(self, dtype: Any, *args: Any, **kwargs: Any) -> Batched:
        return Batched(self.value.astype(dtype, *args, **kwargs), self.level)

    def copy(self, order: str = "C") -> Batched:
        return Batched(self.value.copy(), self.level)

    def view(self, *args: Any) -> Batched:
        return Batched(self.value.view(*args), self.level)

    def ravel(self, order: str = "C") -> Any:
        return np.reshape(self, (-1,))

    flatten = ravel

    def fill(self, v: Any) -> None:
        self[...] = v

    def nonzero(self) -> Any:
        return np.nonzero(self)

    # (each method is the NumPy function of its name, so it is batched by the same rule)
    sum = _np_method("sum")
    mean = _np_method("mean")
    max = _np_method("max")
    min = _np_method("min")
    prod = _np_method("prod")
    any = _np_method("any")
    all = _np_method("all")
    std = _np_method("std")
    var = _np_method("var")
    argmax = _np_method("argmax")
    argmin = _np_method("argmin")
    cumsum = _np_method("cumsum")
    cumprod = _np_method("cumprod")
    clip = _np_method("clip")
    round = _np_method("round")
    repeat = _np_method("repeat")
    take = _np_method("take")
    squeeze = _np_method("squeeze")
    swapaxes = _np_method("swapaxes")
    diagonal = _np_method("diagonal")
    marks = _np_method("trace")
    argsort = _np_method("argsort")
    dot = _np_method("dot")
    ptp = _np_method("ptp")
    searchsorted = _np_method("searchsorted")
    conj = _np_method("conj")


def _operator(ufunc: Any, reflected: bool = False) -> Any:
    """``a + b`` and the like: straight to the batched values in the common cases (a Python
    number, a stand-in of the same level and rank; each saves the protocol's few microseconds),
    else through ``ufunc``'s protocol."""

    def op(self: Batched, other: Any) -> Any:
        t = type(other)
        v = self.value
        if t is float or t is int:
            w = other
        elif t is Batched and other.level is self.level and other.value.ndim == v.ndim:
            w = other.value
        elif t is np.ndarray and other.ndim < v.ndim:  # (it broadcasts against the example's axes)
            w = other
        else:
            return ufunc(other, self) if reflected else ufunc(self, other)
        return Batched(ufunc(w, v) if reflected else ufunc(v, w), self.level)

    return op


_uf: Any
for _name_, _uf in (("add", np.add), ("sub", np.subtract), ("mul", np.multiply), ("truediv", np.true_divide),
                    ("pow", np.power)):
    setattr(Batched, f"__{_name_}__", _operator(_uf))
    setattr(Batched, f"__r{_name_}__", _operator(_uf, reflected=True))
for _name_, _uf in (("eq", np.equal), ("ne", np.not_equal), ("lt", np.less), ("le", np.less_equal),
                    ("gt", np.greater), ("ge", np.greater_equal)):
    setattr(Batched, f"__{_name_}__", _operator(_uf))
Batched.__neg__ = lambda self: Batched(-self.value, self.level)  # type: ignore[method-assign, attr-defined]
Batched.__hash__ = None  # type: ignore[assignment]  # (== is elementwise)


def _name(func: Any) -> str:
    module = getattr(func, "__module__", None) or "numpy"
    prefix = "np" + module[len("numpy"):] if module.startswith("numpy") else module
    return f"{prefix}.{getattr(func, '__name__', func)}"


def _two(ufunc: Any, lvl: Level, a: Any, b: Any) -> Batched | None:
    """``ufunc(a, b)`` when no rank needs aligning: both batched alike, or one batched and the
    other a Python number or an array of fewer axes; None otherwise (the general rule decides)."""
    if type(a) is Batched and a.level is lvl:
        av = a.value
        tb = type(b)
        if tb is Batched:
            if b.level is lvl and b.value.ndim == av.ndim:
                return Batched(ufunc(av, b.value), lvl)
        elif tb is float or tb is int or (tb is np.ndarray and b.ndim < av.ndim):
            return Batched(ufunc(av, b), lvl)
    elif type(b) is Batched and b.level is lvl:
        bv = b.value
        ta = type(a)
        if ta is float or ta is int or (ta is np.ndarray and a.ndim < bv.ndim):
            return Batched(ufunc(a, bv), lvl)
    return None


def _top(lvl: Level, args: Any, more: Any) -> Level | None:
    """The level a NumPy call is batched at: the innermost (newest) among its stand-ins (an outer
    level's stand-in is a value shared by the inner level's examples). None when a Tensor is among
    the arguments: it answers first (it records the op, then calls NumPy on its values)."""
    for group in (args, more if type(more) is tuple else (more,)):
        for a in group:
            t = type(a)
            if t is Batched:
                if a.level.id > lvl.id:
                    lvl = a.level
            elif t is Tensor:
                return None
            elif t is list or t is tuple:
                for b in a:
                    if type(b) is Batched:
                        if b.level.id > lvl.id:
                            lvl = b.level
                    elif type(b) is Tensor:
                        return None
    return lvl


def _is(x: Any, lvl: Level) -> bool:
    return type(x) is Batched and x.level is lvl


def _ndim(x: Any) -> int:
    """The per-example number of axes of an operand (its own, for one not batched here)."""
    nd = getattr(x, "ndim", None)
    return np.ndim(x) if nd is None else nd


def _batch_shape(v: Any, shape: tuple[Any, ...]) -> tuple[Any, ...]:
    """The shape of the batch ``v`` reshaped to ``shape`` per example. A ``-1`` is resolved from an
    example's size here: NumPy cannot resolve it over a batch of no examples."""
    if -1 in shape:
        known = math.prod(n for n in shape if n != -1)
        if known:
            shape = tuple(math.prod(v.shape[1:]) // known if n == -1 else n for n in shape)
    return v.shape[:1] + shape


def _flat(v: Any) -> Any:
    """The batch ``v`` with each example flattened."""
    return v.reshape(v.shape[0], math.prod(v.shape[1:]))


def _front(v: Any, pe: int, r: int) -> Any:
    """A batched value of ``pe`` per-example axes with size-1 axes inserted after the batch axis,
    so that it has ``r``: NumPy's broadcasting then lines up the per-example axes."""
    if pe >= r:
        return v
    s = v.shape
    return v.reshape(s[:1] + (1,) * (r - pe) + s[1:])


def _spread(lvl: Level, x: Any) -> Any:
    """The batched value of ``x``: its own when batched here, else ``x`` repeated for every example."""
    if _is(x, lvl):
        return x.value
    return np.broadcast_to(x, (lvl.size,) + np.shape(x))


def _spread_like(lvl: Level, v: Any, target: Any, pos: int) -> Any:
    """``v`` shaped to be written into ``target`` (a batched value's region, its batch axis at ``pos``)."""
    if _is(v, lvl):
        w = _front(v.value, v.ndim, target.ndim - 1)
    elif pos == 0:
        return v  # broadcasts against the per-example axes from the right
    else:
        w = np.broadcast_to(v, (lvl.size,) + target.shape[:pos] + target.shape[pos + 1:])
    return np.moveaxis(w, 0, pos) if pos else w


def _align(lvl: Level, xs: Any) -> tuple[list[Any], bool]:
    """The values of ``xs`` for one elementwise NumPy call, batched ones with matching ranks."""
    vals = []
    nds = []
    batched = []
    for x in xs:
        if type(x) is Batched and x.level is lvl:
            v = x.value
            vals.append(v)
            nds.append(v.ndim - 1)
            batched.append(True)
        else:
            vals.append(x)
            nds.append(_ndim(x) if x is not None else 0)
            batched.append(False)
    r = max(nds)
    for i, b in enumerate(batched):
        if b and nds[i] < r:
            vals[i] = _front(vals[i], nds[i], r)
    return vals, any(batched)


def _wrap(lvl: Level, out: Any) -> Any:
    if type(out) is tuple:
        return tuple(Batched(o, lvl) for o in out)
    return Batched(out, lvl)


def _axis(ax: int, nd: int) -> int:
    """A per-example axis as an axis of the batched value."""
    if not -nd <= ax < nd:
        raise np.exceptions.AxisError(ax, nd)
    return ax % nd + 1


def _axes(axis: Any, nd: int) -> Any:
    """``axis`` (None, an int or a tuple) of a reduction, as axes of the batched value."""
    if axis is None:
        return tuple(range(1, nd + 1))
    if type(axis) is tuple or type(axis) is list:
        return tuple(_axis(a, nd) for a in axis)
    return _axis(axis, nd)


# ----- ufuncs --------------------------------------------------------------------------------------
def _ufunc(lvl: Level, ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    out = kwargs.pop("out", None)
    if method == "__call__":
        if ufunc.signature is not None:
            result = _gufunc(lvl, ufunc, inputs, kwargs)
        else:
            where = kwargs.get("where")
            if type(where) is Batched:
                vals, _ = _align(lvl, (*inputs, where))
                kwargs["where"] = vals.pop()
            else:
                vals, _ = _align(lvl, inputs)
            outs = out if type(out) is tuple else (out,)
            if out is not None and all(_is(o, lvl) for o in outs):  # a *= b on a batched a: in place
                ufunc(*vals, out=tuple(o.value for o in outs), **kwargs)
                return outs[0] if len(outs) == 1 else outs
            result = ufunc(*vals, **kwargs)
        return _into(lvl, out, result, ufunc)
    if method == "at":
        return _ufunc_at(lvl, ufunc, inputs)
    a = inputs[0]
    if not _is(a, lvl):
        raise TypeError(f"vmap: np.{ufunc.__name__}.{method} with a batched argument other than the array")
    nd = a.ndim
    if method == "reduce":
        axis = kwargs.pop("axis", 0)
        where = kwargs.get("where")
        if type(where) is Batched:
            kwargs["where"] = _align(lvl, (a, where))[0][1]
        if nd == 0 and axis in (0, -1):  # a 0-d example has only NumPy's legacy axis 0: nothing to reduce
            axis = ()
        result = ufunc.reduce(a.value, axis=_axes(axis, nd), **kwargs)
    elif method == "accumulate":
        result = ufunc.accumulate(a.value, axis=_axis(kwargs.pop("axis", 0), nd), **kwargs)
    elif method == "reduceat":
        if len(inputs) > 1 and type(inputs[1]) is Batched:
            raise TypeError(f"vmap: np.{ufunc.__name__}.reduceat with batched indices has no batching rule")
        result = ufunc.reduceat(a.value, inputs[1], axis=_axis(kwargs.pop("axis", 0), nd), **kwargs)
    elif method == "outer":
        b = inputs[1]
        if _is(b, lvl):
            av = _front(a.value.reshape(a.value.shape + (1,) * b.ndim), nd + b.ndim, nd + b.ndim)
            bv = b.value.reshape(b.value.shape[:1] + (1,) * nd + b.value.shape[1:])
            result = ufunc(av, bv, **kwargs)
        else:
            result = ufunc.outer(a.value, b, **kwargs)
    else:
        raise TypeError(f"vmap: np.{ufunc.__name__}.{method} has no batching rule")
    return _into(lvl, out, result, ufunc)


def _into(lvl: Level, out: Any, result: Any, ufunc: Any) -> Any:
    """Wrap ``result``; with ``out=`` (``a *= b``), write it into batched outputs."""
    if out is None:
        return _wrap(lvl, result)
    outs = out if type(out) is tuple else (out,)
    results = result if type(result) is tuple else (result,)
    for o, r in zip(outs, results):
        if not _is(o, lvl):
            raise TypeError(
                f"vmap: np.{ufunc.__name__} would write batched values into a plain array (out= or "
                "an in-place operator such as a += b); use the result instead (a = a + b)."
            )
        o.value[...] = r
    return out[0] if type(out) is tuple and len(out) == 1 else out


def _gufunc(lvl: Level, ufunc: Any, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if ufunc is np.matmul:
        if kwargs:
            raise TypeError(f"vmap: np.matmul with {', '.join(kwargs)}= has no batching rule")
        return _matmul(lvl, *inputs)
    if "?" in ufunc.signature or kwargs.get("axes") is not None or kwargs.get("axis") is not None:
        raise TypeError(f"vmap: np.{ufunc.__name__} (signature {ufunc.signature}) has no batching rule here")
    core = [len([d for d in part.split(",") if d]) for part in
            ufunc.signature.split("->")[0].replace("(", "").split(")")[:-1]]
    loops = [_ndim(x) - c for x, c in zip(inputs, core)]
    r = max(loops)
    vals = [_front(x.value, loops[i] + core[i], r + core[i]) if _is(x, lvl) else x for i, x in enumerate(inputs)]
    return ufunc(*vals, **kwargs)


def _matmul(lvl: Level, x: Any, y: Any) -> Any:
    """Per-example ``x @ y``, as one ``matmul`` on the batch (a product of inner size 1 as a multiply)."""
    bx, by = _is(x, lvl), _is(y, lvl)
    nx, ny = _ndim(x), _ndim(y)
    if nx == 0 or ny == 0:
        raise ValueError("matmul: Input operand does not have enough dimensions")
    xv = x.value if bx else x
    yv = y.value if by else y
    if bx and not by and ny <= 2 and (nx >= ny or nx == 1):  # rows of examples times one matrix: one matmul
        return xv @ yv
    # Spell out 1-D operands as matrices, give the batched ones equal ranks, multiply, drop the 1s.
    if nx == 1:
        xv = xv.reshape(xv.shape[:-1] + (1,) + xv.shape[-1:])
    if ny == 1:
        yv = yv.reshape(yv.shape + (1,))
    mx, my = max(nx, 2), max(ny, 2)
    r = max(mx, my)
    if bx:
        xv = _front(xv, mx, r)
    if by:
        yv = _front(yv, my, r)
    if xv.shape[-1] == 1 and yv.shape[-2] == 1:  # an outer product: a broadcast multiply is faster
        out = xv * yv
    else:
        out = xv @ yv
    if nx == 1:
        out = out.reshape(out.shape[:-2] + out.shape[-1:])
    if ny == 1:
        out = out.reshape(out.shape[:-1])
    return out


def _ufunc_at(lvl: Level, ufunc: Any, inputs: tuple[Any, ...]) -> None:
    a, index = inputs[0], inputs[1]
    if not _is(a, lvl):
        raise TypeError(
            f"vmap: np.{ufunc.__name__}.at would write batched values into a plain array; make the "
            "target batched first (e.g. np.zeros_like of a batched value)."
        )
    target, new, pos = _index(lvl, a.value, index)
    if len(inputs) > 2:
        ufunc.at(target, new, _spread_like(lvl, inputs[2], target[new], pos))
    else:
        ufunc.at(target, new)


# ----- indexing --------------------------------------------------------------------------------------
def _getitem(lvl: Level, value: Any, index: Any) -> Batched:
    t = type(index)
    if t is int or t is slice or index is None or index is Ellipsis:
        return Batched(value[(slice(None), index)], lvl)
    target, new, pos = _index(lvl, value, index)
    out = target[new]
    return Batched(np.moveaxis(out, pos, 0) if pos else out, lvl)


def _is_array(p: Any) -> bool:
    if type(p) is np.ndarray and p.ndim == 0 and p.dtype.kind in "iu":
        return False  # a 0-d integer array indexes like an int
    return isinstance(p, (np.ndarray, list, Batched))


def _index(lvl: Level, value: Any, index: Any) -> tuple[Any, tuple[Any, ...], int]:
    """Per-example ``index`` as ``(target, new_index, pos)``: ``target[new_index]`` holds the
    per-example results with the batch axis at ``pos`` (``target`` is ``value`` or a view of it)."""
    idx = index if type(index) is tuple else (index,)
    arrays = [_is_array(p) for p in idx]
    batched = [_is(p, lvl) for p in idx]
    if not any(batched):
        new = (slice(None),) + idx
        if not any(arrays):
            return value, new, 0
        adv = [i for i, p in enumerate(idx) if arrays[i] or isinstance(p, (int, np.integer))]
        if adv[-1] - adv[0] + 1 == len(adv):
            return value, new, 0  # adjacent advanced indices stay where they are, after the batch
        shapes = [np.shape(np.nonzero(p)[0]) if np.asarray(p).dtype == bool else np.shape(p)
                  for p in idx if _is_array(p)]
        return value, new, len(np.broadcast_shapes(*shapes))  # (advanced axes go first)
    # A batched index: the batch itself becomes an advanced index, beside the others.
    nd = value.ndim - 1
    parts: list[Any] = []
    for p in idx:
        if _is(p, lvl):
            if p.dtype == bool:
                raise TypeError(
                    "vmap: indexing with a batched boolean mask gives each example its own number of "
                    "elements; use np.where(mask, x, fill) instead."
                )
            parts.append(p)
        elif type(p) is list or (type(p) is np.ndarray and p.dtype == bool):
            arr = np.asarray(p)
            parts.extend(np.nonzero(arr) if arr.dtype == bool else (arr,))
        elif p is Ellipsis:
            used = sum(q.ndim if type(q) is np.ndarray and q.dtype == bool else 0 if q is None else 1
                       for q in idx if q is not Ellipsis)
            parts.extend((slice(None),) * (nd - used))
        else:
            parts.append(p)
    is_adv = [_is_array(p) or isinstance(p, (int, np.integer)) for p in parts]
    adv = [i for i, a in enumerate(is_adv) if a]
    r = max(_ndim(parts[i]) for i in adv)
    n = lvl.size
    for i in adv:
        p = parts[i]
        if _is(p, lvl):
            parts[i] = _front(p.value, p.ndim, r)
    rows = np.arange(n).reshape((n,) + (1,) * r)
    if adv[-1] - adv[0] + 1 != len(adv):  # scattered advanced indices: theirs go first, so the batch's can
        return value, (rows, *parts), 0
    before = parts[:adv[0]]
    axis = sum(1 for p in before if p is not None)  # axes of the value the indices before use
    target = np.moveaxis(value, 0, axis) if axis else value
    return target, (*before, rows, *parts[adv[0]:]), len(before)


# ----- NumPy functions --------------------------------------------------------------------------------
RULES: dict[Any, Callable[..., Any]] = {}
"""NumPy function -> its batching rule ``rule(level, *args, **kwargs)``, called with the arguments
of one per-example call. (Every ufunc, and its ``reduce``, ``accumulate``, ``reduceat``,
``outer`` and ``at``, is batched by one rule of its own, not listed here.)"""


def register(func: Any, rule: Callable[..., Any]) -> None:
    """Batch the NumPy function ``func`` inside vmap by ``rule(level, *args, **kwargs)`` (see ``RULES``).

    >>> from leanpass.transforms.vmap import rules  # (which registers the rules of NumPy's functions)
    >>> register(np.einsum, RULES[np.einsum])
    """
    RULES[func] = rule

