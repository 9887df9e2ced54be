"""NumPy's dispatch protocols: ``np.exp(t)``, ``np.sum(t, axis=0)``, ``arr + t`` record LeanPass basics.

A NumPy function or argument LeanPass does not differentiate raises a TypeError naming it,
rather than silently dropping the graph (or an argument such as ``where=``).

>>> import leanpass as lp
>>> x = lp.Tensor([1.0, -2.0], requires_grad=True)
>>> np.maximum(x, 0)._op, np.sum(x, axis=0)._op, np.concatenate([x, np.ones(1)])._op
('maximum', 'sum', 'concatenate')
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from .. import functional as F
from ..core import tensor as _tensor
from ..core.tensor import Tensor, _value
from . import arrays, basics, products
from . import math as math_

_IN_PLACE = (
    "out= cannot be used with Tensors (nor can in-place operators such as arr += t): LeanPass "
    "never writes into an existing array, since Tensors are immutable and a plain array would "
    "drop the graph. Use the result instead: y = np.add(x, 1)."
)
_HINT = "Use a LeanPass op (see docs/operations.md), or call it on t.numpy() for a constant."

# Comparisons and predicates: not differentiable, so they return plain arrays.
_PLAIN_UFUNCS = {
    np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
    np.isfinite, np.isnan, np.isinf, np.signbit, np.logical_and, np.logical_or, np.logical_not,
    np.logical_xor,
}

_UFUNCS: dict[Any, Callable[..., Any]] = {
    np.add: basics.add,
    np.subtract: basics.subtract,
    np.multiply: basics.multiply,
    np.true_divide: basics.divide,
    np.power: basics.power,
    np.float_power: basics.power,
    np.matmul: basics.matmul,
    np.negative: basics.negative,
    np.positive: lambda x: x,
    np.maximum: basics.maximum,
    np.minimum: basics.minimum,
    np.logaddexp: basics.logaddexp,
    np.exp: basics.exp,
    np.log: basics.log,
    np.tanh: basics.tanh,
    np.absolute: basics.abs,
    np.sqrt: basics.sqrt,
    np.square: basics.square,
    np.sin: basics.sin,
    np.cos: basics.cos,
    np.reciprocal: lambda x: basics.divide(1.0, x),
}

# NumPy's elementwise math (functional.ELEMENTWISE): each ufunc of an op's record (``numpy=``), the
# LeanPass function of the op's name; and two aliases.
_UFUNCS.update({f: getattr(math_, rec.name) for rec in F.REGISTRY.values()
                if rec.module == "leanpass.functional.elementwise" for f in rec.numpy if isinstance(f, np.ufunc)})
_UFUNCS.update({np.radians: math_.radians, np.degrees: math_.degrees})

# ``ufunc.reduce`` on a Tensor: the reduction of the same meaning.
_REDUCES: dict[Any, Callable[..., Any]] = {np.add: basics.sum, np.maximum: basics.max, np.minimum: basics.min}
_REDUCES[np.multiply] = math_.prod
# ``ufunc.accumulate``: the running op of the same meaning.
_ACCUMULATES: dict[Any, Callable[..., Any]] = {np.add: math_.cumsum, np.multiply: math_.cumprod}


def _name(func: Any) -> str:
    """``np.linalg.norm`` for NumPy's ``norm``: the name a user wrote."""
    module = getattr(func, "__module__", None) or "numpy"
    prefix = "np" + module[len("numpy"):] if module.startswith("numpy") else module
    return f"{prefix}.{func.__name__}"


def _check_kwargs(where: str, kwargs: dict[str, Any], allowed: tuple[str, ...] = ()) -> None:
    """Reject keyword arguments LeanPass would otherwise ignore (``None`` means "not given")."""
    extra = sorted(k for k, v in kwargs.items() if k not in allowed and v is not None)
    if "out" in extra:
        raise TypeError(f"{where}: {_IN_PLACE}")
    if "dtype" in extra:
        raise TypeError(
            f"{where} on a Tensor does not support dtype=: the result keeps the Tensor's dtype. "
            "Cast first with t.astype(np.float32) (a recorded op)."
        )
    if extra:
        supported = ", ".join(f"{k}=" for k in allowed if k not in ("out", "dtype")) or "no keyword arguments"
        raise TypeError(
            f"{where} on a Tensor does not support {', '.join(k + '=' for k in extra)}; LeanPass "
            f"supports {supported} here. {_HINT}"
        )


def _complex(args: Any) -> bool:
    """True if any argument (or an entry of a list or tuple argument) is a complex number or array."""
    for a in args:
        if type(a) is Tensor or type(a) is float:  # (never complex: the common operands, checked first)
            continue
        if isinstance(a, complex) or getattr(getattr(a, "dtype", None), "kind", None) == "c":
            return True
        if isinstance(a, (list, tuple)) and _complex(a):
            return True
    return False


def _no_complex(name: str) -> TypeError:
    return TypeError(
        f"{name}: complex numbers are not supported; LeanPass differentiates real-valued functions. "
        "Split a complex value into its real and imaginary parts as two real Tensors."
    )


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to the LeanPass op of the same meaning.

    >>> np.exp(Tensor([0.0], requires_grad=True))._op
    'exp'
    """
    out = kwargs.get("out")
    if out is not None and any(type(o) is Tensor for o in (out if isinstance(out, tuple) else (out,))):
        raise TypeError(_IN_PLACE)
    name = _ufunc_name(ufunc) + ("" if method == "__call__" else f".{method}")
    if _complex(inputs):
        raise _no_complex(name)
    if method == "__call__":
        if ufunc in _PLAIN_UFUNCS:
            return ufunc(*(_value(x) for x in inputs), **kwargs)
        fn = _UFUNCS.get(ufunc)
        if fn is not None:
            _check_kwargs(name, kwargs)
            return fn(*inputs)
    elif method == "accumulate" and ufunc in _ACCUMULATES:
        _check_kwargs(name, kwargs, ("axis",))
        return _ACCUMULATES[ufunc](inputs[0], axis=kwargs.get("axis", 0))
    elif method == "reduce" and ufunc in _REDUCES:
        _check_kwargs(name, kwargs, ("axis", "keepdims"))
        return _REDUCES[ufunc](inputs[0], axis=kwargs.get("axis", 0), keepdims=bool(kwargs.get("keepdims", False)))
    if not name.startswith("np."):  # a SciPy ufunc, say: name the LeanPass function where there is one
        from ..scipy.special import scipy_ufunc_hint

        raise TypeError(scipy_ufunc_hint(ufunc) or (
            f"{name} is not differentiable in LeanPass: it cannot see through a Tensor. LeanPass has "
            "lp.special and lp.stats for the common SciPy functions; or call it on t.detach() for a constant."
        ))
    raise TypeError(f"{name} is not differentiable in LeanPass. {_HINT}")


def _ufunc_name(ufunc: np.ufunc) -> str:
    """``np.exp`` for NumPy's ufuncs, ``scipy.special.gammaln`` for SciPy's (ufuncs too)."""
    if getattr(np, ufunc.__name__, None) is ufunc:
        return f"np.{ufunc.__name__}"
    import sys

    for module in ("scipy.special",):
        mod = sys.modules.get(module)
        if mod is not None and getattr(mod, ufunc.__name__, None) is ufunc:
            return f"{module}.{ufunc.__name__}"
    return ufunc.__name__


def _unsupported(func: Any) -> Any:
    raise TypeError(f"{_name(func)} is not differentiable in LeanPass. {_HINT}")


# Each entry: the implementation (called with NumPy's positional arguments and the keyword
# arguments LeanPass supports) and the names of those keyword arguments.
def _sum(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    _check_kwargs("np.sum", {"dtype": dtype, "out": out})
    return basics.sum(a, axis, bool(keepdims))


def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    _check_kwargs("np.mean", {"dtype": dtype, "out": out})
    return basics.mean(a, axis, bool(keepdims))


def _extreme(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        _check_kwargs(name, {"out": out})
        return fn(a, axis, bool(keepdims))

    return call


def _moment(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
             keepdims: bool = False) -> Any:
        _check_kwargs(name, {"dtype": dtype, "out": out})
        return fn(a, axis, ddof, bool(keepdims))

    return call


def _reshape(a: Any, shape: Any = None, order: str = "C", newshape: Any = None) -> Any:
    if order != "C":
        raise TypeError(f"np.reshape on a Tensor supports only order='C', not {order!r}")
    return basics.reshape(a, shape if shape is not None else newshape)


def _join(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(arrays: Any, axis: Any = 0, out: Any = None, dtype: Any = None) -> Any:
        _check_kwargs(name, {"out": out, "dtype": dtype})
        return fn(list(arrays), axis)

    return call


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    _check_kwargs("np.take", {"out": out})
    if mode != "raise":
        raise TypeError(f"np.take on a Tensor supports only mode='raise', not {mode!r}")
    return basics.take(a, indices, axis)


def _einsum(*operands: Any, out: Any = None, dtype: Any = None, optimize: Any = None) -> Any:
    _check_kwargs("np.einsum", {"out": out, "dtype": dtype})
    return basics.einsum(*operands)


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:  # the indices of the true entries: not a computation on values
        return np.where(_value(condition))
    if x is None or y is None:
        raise ValueError("np.where: either both or neither of x and y should be given")
    return basics.where(condition, x, y)


def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, min: Any = None, max: Any = None) -> Any:
    _check_kwargs("np.clip", {"out": out})
    return basics.clip(a, a_min if min is None else min, a_max if max is None else max)


def _pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Any:
    from .convolution import pad

    extra = sorted(k for k in kwargs if k != "constant_values")
    if extra:
        raise TypeError(f"np.pad on a Tensor does not support {', '.join(k + '=' for k in extra)}; LeanPass "
                        "supports mode= (constant, edge, reflect, symmetric, wrap) and constant_values=.")
    return pad(array, pad_width, mode, kwargs.get("constant_values", 0))


_AXIS_KEEP = ("axis", "keepdims")
_FUNCTIONS: dict[Any, tuple[Callable[..., Any], tuple[str, ...]]] = {
    np.sum: (_sum, ("axis", "dtype", "out", "keepdims")),
    np.mean: (_mean, ("axis", "dtype", "out", "keepdims")),
    np.max: (_extreme(basics.max, "np.max"), ("axis", "out", "keepdims")),
    np.min: (_extreme(basics.min, "np.min"), ("axis", "out", "keepdims")),
    np.amax: (_extreme(basics.max, "np.amax"), ("axis", "out", "keepdims")),
    np.amin: (_extreme(basics.min, "np.amin"), ("axis", "out", "keepdims")),
    np.var: (_moment(basics.var, "np.var"), ("axis", "dtype", "out", "ddof", "keepdims")),
    np.std: (_moment(basics.std, "np.std"), ("axis", "dtype", "out", "ddof", "keepdims")),
    np.reshape: (_reshape, ("shape", "order", "newshape")),
    np.ravel: (lambda a, order="C": _reshape(a, (-1,), order), ("order",)),
    np.transpose: (lambda a, axes=None: basics.transpose(a, axes), ("axes",)),
    np.swapaxes: (basics.swapaxes, ("axis1", "axis2")),
    np.expand_dims: (basics.expand_dims, ("axis",)),
    np.squeeze: (lambda a, axis=None: basics.squeeze(a, axis), ("axis",)),
    np.broadcast_to: (lambda array, shape, subok=False: basics.broadcast_to(array, shape), ("shape", "subok")),
    np.concatenate: (_join(basics.concatenate, "np.concatenate"), ("axis", "out", "dtype")),
    np.stack: (_join(basics.stack, "np.stack"), ("axis", "out", "dtype")),
    np.split: (lambda ary, indices_or_sections, axis=0: basics.split(ary, indices_or_sections, axis), ("axis",)),
    np.where: (_where, ()),
    np.clip: (_clip, ("a_min", "a_max", "out", "min", "max")),
    np.take: (_take, ("axis", "out", "mode")),
    np.einsum: (_einsum, ("out", "dtype", "optimize")),
    np.pad: (_pad, ("mode", "constant_values", "stat_length", "reflect_type", "end_values")),
    # Questions about an array, not computations on it: answered from the values.
    np.shape: (lambda a: np.shape(_value(a)), ()),
    np.ndim: (lambda a: np.ndim(_value(a)), ()),
    np.size: (lambda a, axis=None: np.size(_value(a), axis), ("axis",)),
    np.result_type: (lambda *a: np.result_type(*(_value(x) for x in a)), ()),
    np.allclose: (lambda a, b, **kw: np.allclose(_value(a), _value(b), **kw), ("rtol", "atol", "equal_nan")),
    np.isclose: (lambda a, b, **kw: np.isclose(_value(a), _value(b), **kw), ("rtol", "atol", "equal_nan")),
    np.array_equal: (lambda a, b, **kw: np.array_equal(_value(a), _value(b), **kw), ("equal_nan",)),
    np.zeros_like: (lambda a, dtype=None: np.zeros_like(_value(a), dtype=dtype), ("dtype",)),
    np.ones_like: (lambda a, dtype=None: np.ones_like(_value(a), dtype=dtype), ("dtype",)),
    np.argmax: (lambda a, axis=None, **kw: np.argmax(_value(a), axis=axis, **kw), ("axis", "keepdims")),
    np.argmin: (lambda a, axis=None, **kw: np.argmin(_value(a), axis=axis, **kw), ("axis", "keepdims")),
    np.argsort: (lambda a, axis=-1, **kw: np.argsort(_value(a), axis=axis, **kw), ("axis", "kind", "stable")),
}


def _linalg(name: str) -> Callable[..., Any]:
    """The function of ``leanpass.linalg`` called ``name`` (the module loads on first use)."""

    def call(*args: Any, **kwargs: Any) -> Any:
        from . import linalg

        return getattr(linalg, name)(*args, **kwargs)

    call.__name__ = name
    return call


# np.linalg on Tensors (leanpass/numpy/linalg.py): each entry lists the keyword arguments NumPy's takes.
_FUNCTIONS.update({
    np.linalg.inv: (_linalg("inv"), ()),
    np.linalg.det: (_linalg("det"), ()),
    np.linalg.slogdet: (_linalg("slogdet"), ()),
    np.linalg.solve: (_linalg("solve"), ()),
    np.linalg.cholesky: (_linalg("cholesky"), ("upper",)),
    np.linalg.eigh: (_linalg("eigh"), ("UPLO",)),
    np.linalg.eigvalsh: (_linalg("eigvalsh"), ("UPLO",)),
    np.linalg.svd: (_linalg("svd"), ("full_matrices", "compute_uv", "hermitian")),
    np.linalg.qr: (_linalg("qr"), ("mode",)),
    np.linalg.pinv: (_linalg("pinv"), ("rcond", "hermitian")),
    np.linalg.matrix_power: (_linalg("matrix_power"), ("n",)),
    np.linalg.lstsq: (_linalg("lstsq"), ("rcond",)),
    np.linalg.norm: (_linalg("norm"), ("ord", "axis", "keepdims")),
})


# ----- NumPy's math, reductions, products and array arranging (math.py, products.py, arrays.py) ------
def _no_out(name: str, **given: Any) -> None:
    """Reject ``out=`` / ``dtype=`` (None means "not given")."""
    _check_kwargs(name, given)


def _reduction(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
        _no_out(name, dtype=dtype, out=out)
        return fn(a, axis, bool(keepdims))

    return call


def _scan(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None) -> Any:
        _no_out(name, dtype=dtype, out=out)
        return fn(a, axis)

    return call


def _sort(a: Any, axis: Any = -1, kind: Any = None, order: Any = None, stable: Any = None) -> Any:
    if order is not None:
        raise TypeError("np.sort on a Tensor does not support order= (it sorts numbers, not records)")
    return math_.sort(a, axis)  # always stable: the values are the same for every kind


def _partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect", order: Any = None) -> Any:
    if order is not None:
        raise TypeError("np.partition on a Tensor does not support order=")
    return math_.partition(a, kth, axis)


def _quantile(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, q: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False,
             method: str = "linear", keepdims: bool = False, weights: Any = None,
             interpolation: Any = None) -> Any:
        _no_out(name, out=out, weights=weights, interpolation=interpolation)
        return fn(a, q, axis, None, False, method, bool(keepdims))

    return call


def _median(a: Any, axis: Any = None, out: Any = None, overwrite_input: bool = False, keepdims: bool = False) -> Any:
    _no_out("np.median", out=out)
    return math_.median(a, axis, None, False, bool(keepdims))


def _trace(a: Any, offset: int = 0, axis1: int = 0, axis2: int = 1, dtype: Any = None, out: Any = None) -> Any:
    _no_out("np.trace", dtype=dtype, out=out)
    return math_.trace(a, offset, axis1, axis2)


def _fix(x: Any, out: Any = None) -> Any:
    _no_out("np.fix", out=out)
    return math_.trunc(x)  # rounding towards zero is trunc


def _ptp(a: Any, axis: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    _no_out("np.ptp", out=out)
    return math_.ptp(a, axis, bool(keepdims))


def _product(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(a: Any, b: Any, out: Any = None) -> Any:
        _no_out(name, out=out)
        return fn(a, b)

    return call


def _round(a: Any, decimals: int = 0, out: Any = None) -> Any:
    _no_out("np.round", out=out)
    return math_.round(a, decimals)


def _full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, device: Any = None) -> Any:
    if type(fill_value) is Tensor:
        return arrays.full_like(a, fill_value, dtype, shape)
    return np.full_like(_value(a), fill_value, dtype=dtype, shape=shape)


def _join_tuple(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(tup: Any, *, dtype: Any = None, casting: str = "same_kind") -> Any:
        _no_out(name, dtype=dtype)
        return fn(tup)

    return call


def _in_place(name: str, instead: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        raise TypeError(
            f"{name} writes into an existing array, which cannot hold a Tensor being differentiated "
            f"(Tensors are immutable). Use {instead}, which returns a new Tensor."
        )

    return call


def _copyto(dst: Any, src: Any, casting: Any = "same_kind", where: Any = True) -> None:
    if type(dst) is Tensor or type(src) is Tensor and src._marks:
        _in_place("np.copyto (which np.full and np.full_like call with a Tensor fill value)",
                  "lp.full(shape, t) or lp.full_like(a, t)")()
    np.copyto(dst, _value(src), casting=casting, where=_value(where))  # a constant's values: a plain copy


_FUNCTIONS.update({
    np.prod: (_reduction(math_.prod, "np.prod"), ("axis", "dtype", "out", "keepdims")),
    np.nansum: (_reduction(math_.nansum, "np.nansum"), ("axis", "dtype", "out", "keepdims")),
    np.nanmean: (_reduction(math_.nanmean, "np.nanmean"), ("axis", "dtype", "out", "keepdims")),
    np.ptp: (_ptp, ("axis", "out", "keepdims")),
    np.cumsum: (_scan(math_.cumsum, "np.cumsum"), ("axis", "dtype", "out")),
    np.cumprod: (_scan(math_.cumprod, "np.cumprod"), ("axis", "dtype", "out")),
    np.average: (math_.average, ("axis", "weights", "returned", "keepdims")),
    np.sort: (_sort, ("axis", "kind", "order", "stable")),
    np.partition: (_partition, ("axis", "kind", "order")),
    np.quantile: (_quantile(math_.quantile, "np.quantile"),
                  ("axis", "out", "overwrite_input", "method", "keepdims", "weights", "interpolation")),
    np.percentile: (_quantile(math_.percentile, "np.percentile"),
                    ("axis", "out", "overwrite_input", "method", "keepdims", "weights", "interpolation")),
    np.median: (_median, ("axis", "out", "overwrite_input", "keepdims")),
    np.diff: (math_.diff, ("n", "axis", "prepend", "append")),
    np.trace: (_trace, ("offset", "axis1", "axis2", "dtype", "out")),
    np.sinc: (math_.sinc, ()),
    np.round: (_round, ("decimals", "out")),
    np.around: (_round, ("decimals", "out")),
    np.nan_to_num: (math_.nan_to_num, ("copy", "nan", "posinf", "neginf")),
    np.fix: (_fix, ("out",)),
    np.dot: (_product(products.dot, "np.dot"), ("out",)),
    np.vdot: (products.vdot, ()),
    np.inner: (products.inner, ()),
    np.outer: (_product(products.outer, "np.outer"), ("out",)),
    np.tensordot: (products.tensordot, ("axes",)),
    np.kron: (products.kron, ()),
    np.cross: (products.cross, ("axisa", "axisb", "axisc", "axis")),
    np.vstack: (_join_tuple(arrays.vstack, "np.vstack"), ("dtype", "casting")),
    np.hstack: (_join_tuple(arrays.hstack, "np.hstack"), ("dtype", "casting")),
    np.dstack: (arrays.dstack, ()),
    np.column_stack: (arrays.column_stack, ()),
    np.block: (arrays.block, ()),
    np.repeat: (arrays.repeat, ("axis",)),
    np.tile: (arrays.tile, ()),
    np.roll: (arrays.roll, ("axis",)),
    np.flip: (arrays.flip, ("axis",)),
    np.fliplr: (arrays.fliplr, ()),
    np.flipud: (arrays.flipud, ()),
    np.rot90: (arrays.rot90, ("k", "axes")),
    np.moveaxis: (arrays.moveaxis, ()),
    np.rollaxis: (arrays.rollaxis, ("start",)),
    np.atleast_1d: (arrays.atleast_1d, ()),
    np.atleast_2d: (arrays.atleast_2d, ()),
    np.atleast_3d: (arrays.atleast_3d, ()),
    np.array_split: (arrays.array_split, ("axis",)),
    np.vsplit: (arrays.vsplit, ()),
    np.hsplit: (arrays.hsplit, ()),
    np.dsplit: (arrays.dsplit, ()),
    np.tril: (arrays.tril, ("k",)),
    np.triu: (arrays.triu, ("k",)),
    np.diag: (arrays.diag, ("k",)),
    np.diagonal: (arrays.diagonal, ("offset", "axis1", "axis2")),
    np.diagflat: (arrays.diagflat, ("k",)),
    np.take_along_axis: (arrays.take_along_axis, ("axis",)),
    np.select: (arrays.select, ("default",)),
    np.broadcast_arrays: (arrays.broadcast_arrays, ("subok",)),
    np.meshgrid: (arrays.meshgrid, ("copy", "sparse", "indexing")),
    np.full_like: (_full_like, ("dtype", "order", "subok", "shape", "device")),
    np.empty_like: (lambda a, dtype=None, **kw: np.empty_like(_value(a), dtype=dtype, **kw), ("dtype", "shape")),
    np.put_along_axis: (_in_place("np.put_along_axis", "lp.put_along_axis(arr, indices, values, axis)"), ("axis",)),
    np.copyto: (_copyto, ("casting", "where")),
})
if hasattr(np, "row_stack"):  # (deprecated in NumPy 2)
    _FUNCTIONS[np.row_stack] = (_join_tuple(arrays.vstack, "np.row_stack"), ("dtype", "casting"))


_HARMLESS = {"order": "C", "casting": "same_kind", "subok": False, "copy": None}


def _harmless(key: str, v: Any) -> bool:
    """True for a keyword argument passed with the default value that changes nothing here."""
    return key in _HARMLESS and isinstance(v, (str, bool, type(None))) and _HARMLESS[key] == v


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``: route a NumPy function to the LeanPass op.

    >>> np.concatenate([Tensor([1.0], requires_grad=True), np.zeros(1)])._op
    'concatenate'
    >>> np.unique(Tensor([1.0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: np.unique is not differentiable in LeanPass. ...
    """
    entry = _FUNCTIONS.get(func)
    if _complex(args) or _complex(kwargs.values()):
        raise _no_complex(_name(func))
    if entry is None:
        return _unsupported(func)
    impl, allowed = entry
    kwargs = {k: v for k, v in kwargs.items() if k in allowed or not _harmless(k, v)}
    _check_kwargs(_name(func), kwargs, allowed)
    return impl(*args, **kwargs)


_tensor.set_numpy_dispatch(array_ufunc, array_function)  # Tensor's __array_ufunc__ / __array_function__
