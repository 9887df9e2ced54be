"""NumPy's dispatch protocols: ``np.exp(t)``, ``np.sum(t, axis=0)``, ``arr + t`` record LeanPass ops.

A NumPy function LeanPass does not differentiate raises a TypeError naming it, rather than
silently dropping the graph.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from . import ops
from .tensor import Tensor, _value

_IN_PLACE = (
    "Tensors are immutable: NumPy's out= (and in-place operators on arrays holding a Tensor) "
    "cannot write into one. Use the result instead: y = np.add(x, 1)."
)

# Comparisons and predicates: not differentiable, so they return plain arrays.
_PLAIN_UFUNCS = {
    np.greater, np.greater_equal, np.less, np.less_equal, np.equal, np.not_equal,
    np.isfinite, np.isnan, np.isinf, np.signbit, np.logical_and, np.logical_or, np.logical_not,
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
}


def array_ufunc(ufunc: np.ufunc, method: str, inputs: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_ufunc__``: route a ufunc call to the LeanPass op of the same meaning."""
    out = kwargs.pop("out", None)
    if out is not None and any(type(o) is Tensor for o in out):
        raise TypeError(_IN_PLACE)
    if out is not None or method == "at":
        raise TypeError(f"np.{ufunc.__name__}.{method}: {_IN_PLACE}")
    if ufunc in _PLAIN_UFUNCS and method == "__call__":
        return ufunc(*(_value(x) for x in inputs), **kwargs)
    fn = _UFUNCS.get(ufunc)
    if method == "reduce" and ufunc is np.add:
        return ops.sum(inputs[0], axis=kwargs.get("axis", 0), keepdims=kwargs.get("keepdims", False))
    if fn is None or method != "__call__" or kwargs:
        raise TypeError(
            f"np.{ufunc.__name__}{'' if method == '__call__' else '.' + method} is not "
            f"differentiable in LeanPass{' with arguments ' + str(sorted(kwargs)) if kwargs else ''}. "
            "Use a LeanPass op (see docs/operations.md), or call it on t.numpy() for a constant."
        )
    return fn(*inputs)


def _reduction(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, keepdims: Any = False, **kw: Any) -> Any:
        if out is not None:
            raise TypeError(_IN_PLACE)
        if dtype is not None or kw:
            raise TypeError(f"np.{fn.__name__} on a Tensor takes only axis= and keepdims=")
        return fn(a, axis=axis, keepdims=bool(keepdims))

    return call


def _moments(fn: Callable[..., Any]) -> Callable[..., Any]:
    def call(a: Any, axis: Any = None, dtype: Any = None, out: Any = None, ddof: int = 0,
             keepdims: Any = False, **kw: Any) -> Any:
        if out is not None or dtype is not None or kw:
            raise TypeError(f"np.{fn.__name__} on a Tensor takes only axis=, ddof= and keepdims=")
        return fn(a, axis=axis, ddof=ddof, keepdims=bool(keepdims))

    return call


_FUNCTIONS: dict[Any, Callable[..., Any]] = {
    np.sum: _reduction(ops.sum),
    np.mean: _reduction(ops.mean),
    np.max: _reduction(ops.max),
    np.min: _reduction(ops.min),
    np.amax: _reduction(ops.max),
    np.amin: _reduction(ops.min),
    np.var: _moments(ops.var),
    np.std: _moments(ops.std),
    np.reshape: lambda a, shape=None, order="C", **kw: ops.reshape(a, kw.get("newshape", shape)),
    np.transpose: lambda a, axes=None: ops.transpose(a, axes),
    np.swapaxes: ops.swapaxes,
    np.expand_dims: ops.expand_dims,
    np.squeeze: lambda a, axis=None: ops.squeeze(a, axis),
    np.broadcast_to: lambda a, shape, subok=False: ops.broadcast_to(a, shape),
    np.concatenate: lambda arrays, axis=0, **kw: ops.concatenate(arrays, axis),
    np.stack: lambda arrays, axis=0, **kw: ops.stack(arrays, axis),
    np.split: lambda a, indices_or_sections, axis=0: ops.split(a, indices_or_sections, axis),
    np.where: lambda cond, x=None, y=None: (
        np.where(_value(cond)) if x is None else ops.where(cond, x, y)
    ),
    np.clip: lambda a, a_min=None, a_max=None, **kw: ops.clip(a, kw.get("min", a_min), kw.get("max", a_max)),
    np.take: lambda a, indices, axis=None, **kw: ops.take(a, indices, axis),
    np.einsum: lambda subscripts, *operands, **kw: ops.einsum(subscripts, *operands),
    np.dot: lambda a, b, out=None: ops.matmul(a, b) if np.ndim(_value(a)) <= 2 and np.ndim(_value(b)) <= 2
    else _unsupported(np.dot),
    np.abs: ops.abs,
    # Questions about an array, not computations on it: answered from the values.
    np.shape: lambda a: np.shape(_value(a)),
    np.ndim: lambda a: np.ndim(_value(a)),
    np.size: lambda a, axis=None: np.size(_value(a), axis),
    np.result_type: lambda *a: np.result_type(*(_value(x) for x in a)),
    np.isfinite: lambda a: np.isfinite(_value(a)),
    np.allclose: lambda a, b, **kw: np.allclose(_value(a), _value(b), **kw),
    np.isclose: lambda a, b, **kw: np.isclose(_value(a), _value(b), **kw),
    np.array_equal: lambda a, b, **kw: np.array_equal(_value(a), _value(b), **kw),
    np.zeros_like: lambda a, dtype=None, **kw: np.zeros_like(_value(a), dtype=dtype),
    np.ones_like: lambda a, dtype=None, **kw: np.ones_like(_value(a), dtype=dtype),
    np.argmax: lambda a, axis=None, **kw: np.argmax(_value(a), axis=axis, **kw),
    np.argmin: lambda a, axis=None, **kw: np.argmin(_value(a), axis=axis, **kw),
    np.argsort: lambda a, axis=-1, **kw: np.argsort(_value(a), axis=axis, **kw),
}


def _unsupported(func: Any) -> Any:
    raise TypeError(
        f"np.{func.__name__} is not differentiable in LeanPass for these arguments. Use a "
        "LeanPass op (see docs/operations.md), or call it on t.numpy() for a constant."
    )


def array_function(func: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    """``Tensor.__array_function__``: route a NumPy function to the LeanPass op."""
    impl = _FUNCTIONS.get(func)
    if impl is None:
        return _unsupported(func)
    return impl(*args, **kwargs)
