"""Calls from a VJP rule to an op NumPy has no function for, so Tensor dispatch cannot reach it.

On raw arrays the op runs directly; on Tensors (a differentiable backward pass) it is recorded
through the Tensor layer, which sets ``apply`` when it is imported.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

apply: Callable[..., Any] | None = None  # leanpass.tensor's generic recorder, set on import
# The raw array types: ndarray, and the stand-ins that jit (and vmap) put inside Tensors, which add
# themselves here when they load. Code that takes "an array, else convert" tests against this.
RAW: Any = (np.ndarray,)  # (Any: a narrowing tuple of types would hide the stand-ins from mypy)


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
    return x if isinstance(x, RAW) else np.asarray(x)

# leanpass.batching's hook, set once vmap is imported: ``spread_target(index, x, copy)`` is ``x``
# made batched over the vmap levels of a batched ``index`` (a plain array can neither be indexed
# by nor receive per-example values); a writable copy with ``copy``.
spread_target: Callable[[Any, Any, bool], Any] | None = None


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


def unindex(g: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """Scatter-add ``g`` into zeros of ``shape`` at ``index`` (see ``shapes.unindex``).

    On arrays this is the scatter itself; on Tensors it is recorded as the op ``"unindex"``.

    >>> unindex(np.array([1.0, 2.0]), [1, 1], (3,))
    array([0., 3., 0.])
    """
    from .shapes import unindex as op

    if isinstance(g, RAW) or isinstance(g, np.generic) or apply is None:
        return op(g, index, shape)[0]
    return apply(op, "unindex", g, index, shape)


tensor_type: type | None = None  # leanpass.tensor.Tensor, set on import


def is_tensor(x: Any) -> bool:
    """True for a LeanPass Tensor (a value of a replayed backward pass), False for arrays and numbers.

    >>> is_tensor(np.ones(2))
    False
    """
    return type(x) is tensor_type
