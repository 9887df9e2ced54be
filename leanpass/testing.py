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

from .core.tensor import Tensor
from .core.tree import tree_flatten
from .transforms.reverse_mode import vjp


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
    from .core.tree import tree_unflatten

    return tree_unflatten(treedef, leaves)


# ----- sample inputs for the convolution ops (for tests that walk functional.OPS) ------------------------
def _conv_samples() -> dict[str, Callable[[], tuple[Any, ...]]]:
    """``{op name: () -> args}``: small float64 inputs for each op of ``functional.conv``, ``pooling``,
    ``padding`` and ``norms``, so a test can call ``functional.OPS[name](*args)`` under any transform.

    >>> from leanpass import functional as F
    >>> sorted(CONV_SAMPLES) == sorted(n for n in CONV_SAMPLES if n in F.OPS)
    True
    >>> F.OPS["conv2d"](*CONV_SAMPLES["conv2d"]())[0].shape
    (2, 4, 2, 1)
    """
    def r(*shape: int) -> np.ndarray:
        return np.random.default_rng(sum(shape)).standard_normal(shape)

    pads = ((1, 0), (0, 1))
    return {
        "conv2d": lambda: (r(2, 4, 5, 4), r(4, 2, 3, 3), r(4), (2, 1), pads, (1, 2), 2),
        "conv_transpose_input": lambda: (r(2, 4, 2, 1), r(4, 2, 3, 3), (5, 4), (2, 1), pads, (1, 2), 2),
        "conv2d_weight": lambda: (r(2, 4, 5, 4), r(2, 4, 2, 1), (4, 2, 3, 3), (2, 1), pads, (1, 2), 2),
        "conv_transpose2d": lambda: (r(2, 4, 3, 3), r(4, 1, 3, 2), r(2), 2, 1, 1, 1, 2),
        "conv1d": lambda: (r(2, 2, 7), r(3, 2, 3), r(3), 2, 1, 1, 1),
        "max_pool2d": lambda: (r(2, 3, 5, 4), 2, 1, 1, 1),
        "max_pool1d": lambda: (r(2, 3, 6), 2, None, 0, 1),
        "avg_pool2d": lambda: (r(2, 3, 5, 4), 3, 2, 1),
        "avg_pool1d": lambda: (r(2, 3, 6), 2, None, 0),
        "pad": lambda: (r(3, 4), ((1, 2), (2, 0)), "reflect", 0),
        "batch_norm": lambda: (r(4, 3, 2), r(3), r(3), 1, 1e-5),
        "group_norm": lambda: (r(2, 4, 3), 2, r(4), r(4), 1e-5),
        "layer_norm": lambda: (r(2, 3, 4), r(4), r(4), (4,), 1e-5),
    }


CONV_SAMPLES = _conv_samples()
