"""NumPy's dispatch protocols: ``np.exp(t)``, ``np.sum(t, axis=0)``, ``arr + t`` record LeanPass ops.

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

from . import ops
from .tensor import Tensor, _value

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
    np.add: ops.add,
    np.subtract: ops.subtract,
    np.multiply: ops.multiply,
    np.true_divide: ops.divide,
    np.power: ops.power,
    np.float_power: ops.power,
    np.matmul: ops.matmul,
    np.negative: ops.negative,
    np.positive: lambda x: x,
    np.maximum: ops.maximum,
    np.minimum: ops.minimum,
    np.logaddexp: ops.logaddexp,
    np.exp: ops.exp,
    np.log: ops.log,
    np.tanh: ops.tanh,
    np.absolute: ops.abs,
    np.sqrt: ops.sqrt,
    np.square: ops.square,
    np.sin: ops.sin,
    np.cos: ops.cos,
    np.sign: ops.sign,
    np.reciprocal: lambda x: ops.divide(1.0, x),
}

# ``ufunc.reduce`` on a Tensor: the reduction of the same meaning.
_REDUCES: dict[Any, Callable[..., Any]] = {np.add: ops.sum, np.maximum: ops.max, np.minimum: ops.min}


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


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to the LeanPass op of the same meaning.

    >>> np.exp(Tensor([0.0], requires_grad=True))._op
    'exp'
    """
    out = kwargs.get("out")
    if out is not None and any(type(o) is Tensor for o in (out if isinstance(out, tuple) else (out,))):
        raise TypeError(_IN_PLACE)
    name = _ufunc_name(ufunc) + ("" if method == "__call__" else f".{method}")
    if method == "__call__":
        if ufunc in _PLAIN_UFUNCS:
            return ufunc(*(_value(x) for x in inputs), **kwargs)
        fn = _UFUNCS.get(ufunc)
        if fn is not None:
            _check_kwargs(name, kwargs)
            return fn(*inputs)
    elif method == "reduce" and ufunc in _REDUCES:
        _check_kwargs(name, kwargs, ("axis", "keepdims"))
        return _REDUCES[ufunc](inputs[0], axis=kwargs.get("axis", 0), keepdims=bool(kwargs.get("keepdims", False)))
    if not name.startswith("np."):
        raise TypeError(
            f"{name} is not differentiable in LeanPass: it cannot see through a Tensor. LeanPass has "
            "lp.special and lp.stats for the common SciPy functions; or call it on t.detach() for a constant."
        )
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
    return ops.sum(a, axis, bool(keepdims))


def _mean(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: bool = False) -> Any:
    _check_kwargs("np.mean", {"dtype": dtype, "out": out})
    return ops.mean(a, axis, bool(keepdims))


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
    return ops.reshape(a, shape if shape is not None else newshape)


def _join(fn: Callable[..., Any], name: str) -> Callable[..., Any]:
    def call(arrays: Any, axis: Any = 0, out: Any = None, dtype: Any = None) -> Any:
        _check_kwargs(name, {"out": out, "dtype": dtype})
        return fn(list(arrays), axis)

    return call


def _take(a: Any, indices: Any, axis: Any = None, out: Any = None, mode: str = "raise") -> Any:
    _check_kwargs("np.take", {"out": out})
    if mode != "raise":
        raise TypeError(f"np.take on a Tensor supports only mode='raise', not {mode!r}")
    return ops.take(a, indices, axis)


def _einsum(subscripts: str, *operands: Any, out: Any = None, dtype: Any = None, optimize: Any = None) -> Any:
    _check_kwargs("np.einsum", {"out": out, "dtype": dtype})
    return ops.einsum(subscripts, *operands)


def _dot(a: Any, b: Any, out: Any = None) -> Any:
    _check_kwargs("np.dot", {"out": out})
    na, nb = np.ndim(_value(a)), np.ndim(_value(b))
    if na == 0 or nb == 0:
        return ops.multiply(a, b)
    if na > 2 or nb > 2:
        raise TypeError(f"np.dot of {na}-d and {nb}-d Tensors is not differentiable in LeanPass; use a @ b or einsum")
    return ops.matmul(a, b)


def _where(condition: Any, x: Any = None, y: Any = None) -> Any:
    if x is None and y is None:  # the indices of the true entries: not a computation on values
        return np.where(_value(condition))
    if x is None or y is None:
        raise ValueError("np.where: either both or neither of x and y should be given")
    return ops.where(condition, x, y)


def _clip(a: Any, a_min: Any = None, a_max: Any = None, out: Any = None, min: Any = None, max: Any = None) -> Any:
    _check_kwargs("np.clip", {"out": out})
    return ops.clip(a, a_min if min is None else min, a_max if max is None else max)


_AXIS_KEEP = ("axis", "keepdims")
_FUNCTIONS: dict[Any, tuple[Callable[..., Any], tuple[str, ...]]] = {
    np.sum: (_sum, ("axis", "dtype", "out", "keepdims")),
    np.mean: (_mean, ("axis", "dtype", "out", "keepdims")),
    np.max: (_extreme(ops.max, "np.max"), ("axis", "out", "keepdims")),
    np.min: (_extreme(ops.min, "np.min"), ("axis", "out", "keepdims")),
    np.amax: (_extreme(ops.max, "np.amax"), ("axis", "out", "keepdims")),
    np.amin: (_extreme(ops.min, "np.amin"), ("axis", "out", "keepdims")),
    np.var: (_moment(ops.var, "np.var"), ("axis", "dtype", "out", "ddof", "keepdims")),
    np.std: (_moment(ops.std, "np.std"), ("axis", "dtype", "out", "ddof", "keepdims")),
    np.reshape: (_reshape, ("shape", "order", "newshape")),
    np.ravel: (lambda a, order="C": _reshape(a, (-1,), order), ("order",)),
    np.transpose: (lambda a, axes=None: ops.transpose(a, axes), ("axes",)),
    np.swapaxes: (ops.swapaxes, ("axis1", "axis2")),
    np.expand_dims: (ops.expand_dims, ("axis",)),
    np.squeeze: (lambda a, axis=None: ops.squeeze(a, axis), ("axis",)),
    np.broadcast_to: (lambda array, shape, subok=False: ops.broadcast_to(array, shape), ("shape", "subok")),
    np.concatenate: (_join(ops.concatenate, "np.concatenate"), ("axis", "out", "dtype")),
    np.stack: (_join(ops.stack, "np.stack"), ("axis", "out", "dtype")),
    np.split: (lambda ary, indices_or_sections, axis=0: ops.split(ary, indices_or_sections, axis), ("axis",)),
    np.where: (_where, ()),
    np.clip: (_clip, ("a_min", "a_max", "out", "min", "max")),
    np.take: (_take, ("axis", "out", "mode")),
    np.einsum: (_einsum, ("out", "dtype", "optimize")),
    np.dot: (_dot, ("out",)),
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

_HARMLESS = {"order": "C", "casting": "same_kind", "subok": False, "copy": None}


def _harmless(key: str, v: Any) -> bool:
    """True for a keyword argument passed with the default value that changes nothing here."""
    return key in _HARMLESS and isinstance(v, (str, bool, type(None))) and _HARMLESS[key] == v


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``: route a NumPy function to the LeanPass op.

    >>> np.concatenate([Tensor([1.0], requires_grad=True), np.zeros(1)])._op
    'concatenate'
    >>> np.cumsum(Tensor([1.0]))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    TypeError: np.cumsum is not differentiable in LeanPass. ...
    """
    entry = _FUNCTIONS.get(func)
    if entry is None:
        return _unsupported(func)
    impl, allowed = entry
    kwargs = {k: v for k, v in kwargs.items() if k in allowed or not _harmless(k, v)}
    _check_kwargs(_name(func), kwargs, allowed)
    return impl(*args, **kwargs)


def _install() -> None:
    """Make Tensor's ``__array_ufunc__`` / ``__array_function__`` route through this module."""
    import sys

    from . import tensor

    tensor._numpy_dispatch = sys.modules[__name__]


_install()
