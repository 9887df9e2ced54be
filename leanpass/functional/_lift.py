"""Calls from a VJP rule to an op NumPy has no function for, so Tensor dispatch cannot reach it;
and Python numbers in the rules, in an array's dtype on every NumPy (``weak``).

On raw arrays the op runs directly; on Tensors (a differentiable backward pass) it is recorded
through the Tensor layer, which sets ``apply`` when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

apply: Callable[..., Any] | None = None  # the Tensor layer's generic recorder (``set_recorder``)
tensor_type: type | None = None  # leanpass.core.tensor.Tensor (``set_recorder``)
# The raw array types: ndarray, and the stand-ins that jit (and vmap) put inside Tensors, which add
# themselves with ``register_array_type`` when they load. Code that takes "an array, else convert"
# tests against ARRAYS; OPERANDS is what a Tensor op takes as a constant operand (numbers too).
ARRAYS: Any = (np.ndarray,)  # (Any: a narrowing tuple of types would hide the stand-ins from mypy)
OPERANDS: Any = (int, float, np.ndarray, np.generic)


def set_recorder(recorder: Callable[..., Any], tensor: type) -> None:
    """The Tensor layer's extension point: its ``apply(fn, name, *inputs)`` and Tensor class, which
    the rules use to record the ops they call on Tensors (a differentiable backward pass).

    >>> import leanpass.core.tensor as T
    >>> set_recorder(T.apply, T.Tensor)  # (what leanpass.core.tensor does as it loads)
    """
    global apply, tensor_type
    apply, tensor_type = recorder, tensor


def register_array_type(cls: type) -> None:
    """Treat ``cls`` (a stand-in for an ndarray, such as jit's traced arrays) as a raw array: rules keep
    it as it is, and Tensor ops take it as a constant operand, as they take an ndarray.

    >>> register_array_type(np.ndarray)  # (already one: nothing changes)
    >>> ARRAYS[0]
    <class 'numpy.ndarray'>
    """
    global ARRAYS, OPERANDS
    if cls not in ARRAYS:
        ARRAYS = (*ARRAYS, cls)
        OPERANDS = (*OPERANDS, cls)


def is_array(x: Any) -> bool:
    """True for an ndarray, or a stand-in (of jit) for one; False for numbers and NumPy scalars.

    >>> is_array(np.zeros(1)), is_array(np.float64(1.0))
    (True, False)
    """
    return isinstance(x, np.ndarray) or getattr(x, "_lp_array", False)


def asarray(x: Any) -> Any:
    """``np.asarray(x)`` of a number or a NumPy scalar, kept traced for a stand-in of jit (or vmap).

    >>> asarray(2.0)
    array(2.)
    """
    convert = getattr(type(x), "_lp_asarray", None)
    if convert is not None:
        return convert(x)
    return x if isinstance(x, ARRAYS) else np.asarray(x)

# vmap's hook (``set_index_spread``): ``spread_target(index, x, copy)`` is ``x`` made batched over the
# vmap levels of a batched ``index`` (a plain array can neither be indexed by nor receive
# per-example values); a writable copy with ``copy``.
spread_target: Callable[[Any, Any, bool], Any] | None = None


def set_index_spread(fn: Callable[[Any, Any, bool], Any] | None) -> None:
    """vmap's extension point: ``fn(index, x, copy)`` makes ``x`` batched like a batched ``index`` before
    ``index`` and the scatter of ``getitem``'s VJP use it.

    >>> before = spread_target
    >>> set_index_spread(lambda index, x, copy: x)
    >>> set_index_spread(before)
    """
    global spread_target
    spread_target = fn


def index(x: Any, index: Any) -> Any:
    """``x[index]``, also when vmap batches the index of an array shared by the examples.

    >>> index(np.arange(3.0), [2, 0])
    array([2., 0.])
    """
    if spread_target is not None:
        x = spread_target(index, x, False)
    return x[index]


def constant(x: Any) -> Any:
    """The values of ``x`` as a constant: a Tensor's own array (no graph), anything else as it is.

    For the few places where a rule means a constant, such as the shift that keeps
    ``logsumexp`` stable; ``np.asarray`` of a Tensor being differentiated raises instead.

    >>> constant(np.array([1.0]))
    array([1.])
    """
    return getattr(x, "_data", x)


def is_tensor(x: Any) -> bool:
    """True for a LeanPass Tensor (a value of a replayed backward pass), False for arrays and numbers.

    >>> is_tensor(np.ones(2))
    False
    """
    return type(x) is tensor_type


# ----- Python numbers in the rules ------------------------------------------------------------------
# NumPy 2 computes ``x * 0.5`` in ``x``'s dtype (NEP 50: a Python number is "weak"). NumPy 1.x does
# too when ``x`` has axes, but a 0-d array or a NumPy scalar (a loss, a scalar parameter, the
# cotangent of a sum) combined with a Python number gives float64 there: ``np.float32(2) * 0.5``.
# Rules that may meet 0-d values write their constants as ``weak(c, x)`` (``c`` itself on NumPy 2),
# so that float32 stays float32 through every op and gradient on both.
NUMPY1 = int(np.__version__.split(".")[0]) < 2
_CONSTANTS: dict[tuple[Any, Any], np.ndarray] = {}


def as_dtype_of(c: Any, x: Any) -> Any:
    """The Python number ``c`` as a 0-d array of ``x``'s float dtype (``c`` itself where ``x`` has none):
    how NumPy 2 applies it to ``x``, on every NumPy, for a rule that then calls NumPy functions on it
    (``np.clip(2.0, ...)`` alone would make a float64 NumPy scalar, which widens float32).

    >>> as_dtype_of(2.0, np.ones(3, np.float32)).dtype, as_dtype_of(2.0, 1.0)
    (dtype('float32'), 2.0)
    """
    dtype = getattr(x, "dtype", None)
    if dtype is None or dtype.kind != "f" or type(c) not in (float, int):
        return c
    key = (c, dtype)
    out = _CONSTANTS.get(key) if c else None  # (never 0 from the cache: -0.0 == 0.0 would share it)
    if out is None:
        out = np.array(c, dtype)
        out.flags.writeable = False
        if c and len(_CONSTANTS) < 1024:
            _CONSTANTS[key] = out
    return out


def _weak_numpy1(c: Any, x: Any) -> Any:
    return as_dtype_of(c, x) if getattr(x, "ndim", 1) == 0 else c


def _weak_numpy2(c: Any, x: Any) -> Any:
    return c


weak = _weak_numpy1 if NUMPY1 else _weak_numpy2
weak.__doc__ = """The Python number ``c`` as NumPy 2 combines it with ``x``: ``c`` itself, or on NumPy 1.x a 0-d
array of ``x``'s float dtype where ``x`` is 0-d (see above).

>>> (np.float32(2.0) * weak(0.5, np.float32(2.0))).dtype
dtype('float32')
"""


def in_dtype_of(f: Callable[..., Any]) -> Callable[..., Any]:
    """``f(x, ...)`` in the float dtype of its array arguments, where they are all 0-d (NumPy 1.x only:
    there a function written with Python constants widens 0-d float32 values to float64; the tables of
    elementwise functions keep their one-line derivatives as they are, and cast their values back).

    >>> in_dtype_of(lambda x: x * 0.5)(np.float32(3.0)).dtype
    dtype('float32')
    """

    def cast(*args: Any) -> Any:
        v = f(*args)
        if getattr(v, "ndim", 0) != 0:  # (arrays with axes: NumPy 1.x keeps Python numbers weak there)
            return v
        dtypes = [a.dtype for a in args if getattr(a, "dtype", None) is not None and a.dtype.kind == "f"]
        if not dtypes:
            return v
        dtype = np.result_type(*dtypes)
        vd = getattr(v, "dtype", None)
        if vd is None:  # a Python number (a constant derivative)
            return as_dtype_of(v, args[0]) if type(v) in (float, int) else v
        return v if vd == dtype or vd.kind != "f" else v.astype(dtype)

    return cast if NUMPY1 else f
