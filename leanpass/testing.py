"""Checking gradients: VJPs against central finite differences, to any order.

``check_grads(f, args, order=2)`` picks random directions ``v`` for the inputs and ``u`` for
the output and compares ``u . (f(x + eps v) - f(x - eps v)) / (2 eps)`` with ``vjp(u) . v``,
in float64. For ``order=2`` it then checks the function ``x -> vjp(f, x)(u)`` the same way,
which exercises the differentiable (replayed) backward pass.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .tensor import Tensor
from .transforms import vjp
from .tree import tree_flatten


def _to_f64(x: Any) -> np.ndarray:
    return np.array(x._data if type(x) is Tensor else x, dtype=np.float64)


def _flat(out: Any) -> np.ndarray:
    leaves, _ = tree_flatten(out)
    return np.concatenate([np.ravel(_to_f64(leaf)) for leaf in leaves]) if leaves else np.zeros(0)


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    order: int = 2,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Raise ``AssertionError`` unless ``f``'s VJPs up to ``order`` match finite differences.

    ``args`` are arrays (or floats); every one is differentiated. ``f`` may return a Tensor or a
    pytree of Tensors.

    >>> import leanpass as lp
    >>> check_grads(lambda x, y: lp.sigmoid(x * y).sum(), [np.array([0.5, -1.0]), np.array(2.0)])
    """
    xs = [_to_f64(a) for a in args]
    rng = np.random.default_rng(seed)
    out, pull = vjp(f, *xs)
    out_leaves, out_def = tree_flatten(out)
    us = [rng.standard_normal(np.shape(_to_f64(o))) for o in out_leaves]
    u_tree = _unflatten_like(out_def, us)
    vs = [rng.standard_normal(x.shape) for x in xs]
    grads = pull(u_tree)
    for i, (g, x) in enumerate(zip(grads, xs)):
        if np.shape(_to_f64(g)) != x.shape:  # a wrong shape could hide in the broadcast product below
            raise AssertionError(
                f"check_grads: the gradient of argument {i} has shape {np.shape(_to_f64(g))}, but the "
                f"argument has shape {x.shape} (order {order} remaining)"
            )
    analytic = sum(float(np.sum(_to_f64(g) * v)) for g, v in zip(grads, vs))
    u_flat = np.concatenate([u.ravel() for u in us]) if us else np.zeros(0)
    plus = _flat(f(*[Tensor(x + eps * v) for x, v in zip(xs, vs)]))
    minus = _flat(f(*[Tensor(x - eps * v) for x, v in zip(xs, vs)]))
    numeric = float(np.dot(u_flat, (plus - minus) / (2 * eps)))
    if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f"check_grads: VJP disagrees with finite differences (order {order} remaining): "
            f"analytic {analytic!r} vs numeric {numeric!r}"
        )
    if order > 1:

        def pulled(*ys: Any) -> Any:
            return vjp(f, *ys)[1](u_tree)

        check_grads(pulled, xs, order - 1, eps, rtol, atol, seed + 1)


def _unflatten_like(treedef: Any, leaves: list[np.ndarray]) -> Any:
    from .tree import tree_unflatten

    return tree_unflatten(treedef, leaves)
