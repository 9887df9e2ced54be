"""``vmap``: the identity ``vmap(f)(xs) == stack([f(x) for x in xs])`` over hypothesis-chosen
programs, shapes and axes, composed with ``grad`` both ways and with itself, to second order;
pytree ``in_axes`` / ``out_axes``; the ``lp.nn`` modules and losses on one example; bad input."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp

SETTINGS = settings(max_examples=25, deadline=None)


def stack_of(f: Any, *args: Any, in_axes: Any = 0) -> Any:
    """The loop that vmap must equal: f on each example, the results stacked (pytrees too)."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = next(np.shape(a)[ax] for a, ax in zip(args, axes) if ax is not None)
    outs = [f(*(a if ax is None else np.take(a, i, axis=ax) for a, ax in zip(args, axes))) for i in range(n)]
    return lp.tree_map(lambda *xs: np.stack([np.asarray(x._data if isinstance(x, lp.Tensor) else x) for x in xs]),
                       outs[0], *outs[1:])


def close(a: Any, b: Any, tol: float = 1e-11) -> None:
    la, _ = lp.tree_flatten(a)
    lb, _ = lp.tree_flatten(b)
    assert len(la) == len(lb)
    for x, y in zip(la, lb):
        x = np.asarray(x._data if isinstance(x, lp.Tensor) else x)
        y = np.asarray(y._data if isinstance(y, lp.Tensor) else y)
        assert x.shape == y.shape, (x.shape, y.shape)
        np.testing.assert_allclose(x, y, rtol=tol, atol=tol)


# ----- hypothesis-chosen programs ---------------------------------------------------------------------
# Each step maps an example's (rows, cols) array x, with the shared parameters p, to a new one.
STEPS = {
    "tanh": lambda x, p: lp.tanh(x),
    "sin*": lambda x, p: np.sin(x) * p["v"],
    "matmul": lambda x, p: x @ p["w"],
    "linear": lambda x, p: lp.linear(x, p["w"], p["v"]),
    "softmax": lambda x, p: lp.softmax(x, axis=-1),
    "log_softmax0": lambda x, p: lp.log_softmax(x, axis=0),
    "centre": lambda x, p: x - lp.mean(x, axis=-1, keepdims=True),
    "normalise": lambda x, p: x / lp.sqrt(lp.var(x, axis=0, keepdims=True) + 1.0),
    "max-shift": lambda x, p: x - lp.max(x, axis=1, keepdims=True) * 0.5,
    "where": lambda x, p: lp.where(x > 0, x, 0.1 * x),
    "square": lambda x, p: x * x * 0.5 + p["v"],
    "logaddexp": lambda x, p: np.logaddexp(x, p["v"]),
    "transpose2": lambda x, p: (x.T * 2.0).T,
    "flip-rows": lambda x, p: x[::-1],
    "einsum": lambda x, p: lp.einsum("ij,jk->ik", x, p["w"]),
    "sigmoid": lambda x, p: lp.sigmoid(x),
    "concat-split": lambda x, p: lp.concatenate([x[:, :1], x[:, 1:]], axis=1),
    "gather": lambda x, p: x[np.array([1, 0]) % x.shape[0]][:, ::-1] if x.shape[0] > 1 else x,
}
END = {
    "sum": lambda x, p: lp.sum(x),
    "logsumexp": lambda x, p: lp.logsumexp(x),
    "std": lambda x, p: lp.std(x) + lp.mean(x * x),
    "norm2": lambda x, p: lp.sum(x * x),
}


def program(steps: list[str], end: str) -> Any:
    def f(p: Any, x: Any) -> Any:
        for s in steps:
            x = STEPS[s](x, p)
        return END[end](x, p)

    return f


def params(cols: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"w": rng.standard_normal((cols, cols)) * 0.5, "v": rng.standard_normal(cols)}


programs = st.tuples(st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4), st.sampled_from(sorted(END)))
shapes = st.tuples(st.integers(1, 4), st.integers(2, 3), st.integers(1, 3))  # batch, rows, cols


@SETTINGS
@given(programs, shapes, st.integers(0, 2), st.integers(0, 10_000))
def test_vmap_equals_stacking_over_programs_and_axes(prog: Any, shape: Any, axis: int, seed: int) -> None:
    n, rows, cols = shape
    f = program(*prog)
    p = params(cols, seed)
    xs = np.moveaxis(np.random.default_rng(seed + 1).standard_normal((n, rows, cols)), 0, axis)
    close(lp.vmap(f, in_axes=(None, axis))(p, xs), stack_of(f, p, xs, in_axes=(None, axis)))
    # per-example gradients: of the parameters (shared) and of the example itself
    g = lp.grad(f, argnums=(0, 1))
    close(lp.vmap(g, in_axes=(None, axis))(p, xs), stack_of(g, p, xs, in_axes=(None, axis)))


@SETTINGS
@given(programs, shapes, st.integers(0, 10_000))
def test_grad_of_vmap_is_the_sum_of_per_example_gradients(prog: Any, shape: Any, seed: int) -> None:
    n, rows, cols = shape
    f = program(*prog)
    p = params(cols, seed)
    xs = np.random.default_rng(seed + 1).standard_normal((n, rows, cols))
    total = lp.grad(lambda p, xs: lp.sum(lp.vmap(f, in_axes=(None, 0))(p, xs)), argnums=(0, 1))(p, xs)
    per = stack_of(lp.grad(f, argnums=(0, 1)), p, xs, in_axes=(None, 0))
    close(total[0], lp.tree_map(lambda a: a.sum(axis=0), per[0]))
    close(total[1], per[1])


@SETTINGS
@given(programs, shapes, st.integers(0, 10_000))
def test_second_order_through_vmap_both_ways(prog: Any, shape: Any, seed: int) -> None:
    n, rows, cols = shape
    f = program(*prog)
    p = params(cols, seed)
    xs = np.random.default_rng(seed + 1).standard_normal((n, rows, cols))
    v = np.random.default_rng(seed + 2).standard_normal((rows, cols))

    def hvp(p: Any, x: Any) -> Any:  # d/dx (grad_x f . v), per example
        return lp.grad(lambda x: lp.sum(lp.grad(f, argnums=1)(p, x) * v), argnums=0)(x)

    close(lp.vmap(hvp, in_axes=(None, 0))(p, xs), stack_of(hvp, p, xs, in_axes=(None, 0)), 1e-9)
    # grad of grad of a function using vmap: d/dw of (d/dw sum_i f(p, x_i)) . u
    u = np.random.default_rng(seed + 3).standard_normal((cols, cols))

    def outer(w: Any) -> Any:
        inner = lp.grad(lambda w: lp.sum(lp.vmap(f, in_axes=(None, 0))({"w": w, "v": p["v"]}, xs)))(w)
        return lp.sum(inner * u)

    def looped(w: Any) -> Any:
        inner = lp.grad(lambda w: sum(f({"w": w, "v": p["v"]}, x) for x in xs))(w)
        return lp.sum(inner * u)

    close(lp.grad(outer)(p["w"]), lp.grad(looped)(p["w"]), 1e-9)


# ----- nesting and composition ------------------------------------------------------------------------------
def test_vmap_of_vmap_maps_two_axes() -> None:
    rng = np.random.default_rng(0)
    xs, w = rng.standard_normal((3, 4, 5)), rng.standard_normal((5, 2))

    def f(x: Any, w: Any) -> Any:
        return lp.softmax(x @ w) * lp.sum(x)

    inner = lp.vmap(f, in_axes=(0, None))
    got = lp.vmap(inner, in_axes=(1, None), out_axes=1)(xs, w)
    want = np.stack([np.stack([np.asarray(f(xs[i, j], w)._data) for j in range(4)]) for i in range(3)])
    close(got, want)


def test_nested_vmap_with_an_outer_value_closed_over() -> None:
    xs, ys = np.arange(3.0), np.arange(4.0)
    got = lp.vmap(lambda x: lp.vmap(lambda y: x * y + np.sin(x))(ys))(xs)
    close(got, xs[:, None] * ys[None, :] + np.sin(xs)[:, None])


def test_vmap_of_vmap_of_grad_and_grad_of_vmap_of_vmap() -> None:
    rng = np.random.default_rng(1)
    w, xs = rng.standard_normal(3), rng.standard_normal((2, 4, 3))

    def loss(w: Any, x: Any) -> Any:
        return lp.logsumexp(x * w) + lp.sum(lp.tanh(x @ w))

    per = lp.vmap(lp.vmap(lp.grad(loss), in_axes=(None, 0)), in_axes=(None, 0))(w, xs)
    want = np.stack([np.stack([lp.grad(loss)(w, xs[i, j]) for j in range(4)]) for i in range(2)])
    close(per, want)
    total = lp.grad(lambda w: lp.sum(lp.vmap(lp.vmap(loss, in_axes=(None, 0)), in_axes=(None, 0))(w, xs)))(w)
    close(total, want.sum(axis=(0, 1)))


def test_grad_of_vmap_with_a_shared_value_used_outside_too() -> None:
    # the parameter's gradient has a part from outside the map and one per example: only the
    # per-example part is summed over the examples
    xs = np.array([1.0, 2.0, 3.0])

    def loss(w: Any) -> Any:
        return w * w + lp.sum(lp.vmap(lambda x: w * x, in_axes=0)(xs))

    assert float(lp.grad(loss)(2.0)) == 2 * 2.0 + xs.sum()


def test_grad_of_vmap_of_a_closed_over_parameter() -> None:
    xs = np.linspace(-1, 1, 5)
    w = np.array([0.3, -0.7])

    def loss(w: Any) -> Any:
        return lp.mean(lp.vmap(lambda x: lp.sum(lp.tanh(w * x)) ** 2)(xs))

    def looped(w: Any) -> Any:
        return sum(lp.sum(lp.tanh(w * x)) ** 2 for x in xs) / len(xs)

    close(lp.grad(loss)(w), lp.grad(looped)(w))


def test_value_and_grad_and_vjp_inside_vmap() -> None:
    xs = np.random.default_rng(2).standard_normal((4, 3))
    value, g = lp.vmap(lp.value_and_grad(lambda x: lp.sum(x ** 3)))(xs)
    close(value, (xs ** 3).sum(axis=1))
    close(g, 3 * xs ** 2)
    pulled = lp.vmap(lambda x: lp.vjp(lambda y: lp.exp(y), x)[1](np.ones(3))[0])(xs)
    close(pulled, np.exp(xs))


def test_per_example_gradients_of_an_mlp_module() -> None:
    model = lp.nn.MLP([4, 5, 3], rng=0, dtype=np.float64)
    rng = np.random.default_rng(3)
    xs, ys = rng.standard_normal((6, 4)), rng.integers(0, 3, 6)

    def loss(model: Any, x: Any, y: Any) -> Any:
        return lp.losses.cross_entropy(model(x), y)

    got = lp.vmap(lp.grad(loss), in_axes=(None, 0, 0))(model, xs, ys)
    want = stack_of(lp.grad(loss), model, xs, ys, in_axes=(None, 0, 0))
    close(got, want)
    mean_grad = lp.grad(lambda m: lp.losses.cross_entropy(m(xs), ys))(model)
    close(lp.tree_map(lambda g: g.mean(axis=0), got), mean_grad)


def test_nn_layers_on_one_example() -> None:
    rng = np.random.default_rng(4)
    emb, norm = lp.nn.Embedding(7, 3, rng=0, dtype=np.float64), lp.nn.LayerNorm(3, dtype=np.float64)
    tokens = rng.integers(0, 7, (5, 4))  # 5 examples of 4 tokens

    def f(emb: Any, norm: Any, t: Any) -> Any:
        return lp.sum(norm(emb(t)) * np.arange(3.0))

    axes = (None, None, 0)
    close(lp.vmap(f, in_axes=axes)(emb, norm, tokens), stack_of(f, emb, norm, tokens, in_axes=axes))
    g = lp.grad(f)
    close(lp.vmap(g, in_axes=axes)(emb, norm, tokens), stack_of(g, emb, norm, tokens, in_axes=axes))
    mse = lp.vmap(lambda p, t: lp.losses.mse(p, t), in_axes=(0, 0))(rng.standard_normal((5, 2)), np.zeros((5, 2)))
    assert mse.shape == (5,)


# ----- pytrees, axes, outputs ------------------------------------------------------------------------------
def test_in_axes_and_out_axes_as_pytree_prefixes() -> None:
    rng = np.random.default_rng(5)
    tree = {"a": rng.standard_normal((3, 2)), "b": rng.standard_normal((2, 3))}
    c = rng.standard_normal(2)

    def f(t: Any, c: Any) -> Any:
        return {"sum": t["a"] + t["b"] + c, "pair": (t["a"] * 2.0, np.float64(1.0))}

    got = lp.vmap(f, in_axes=({"a": 0, "b": 1}, None), out_axes={"sum": 1, "pair": 0})(tree, c)
    assert got["sum"].shape == (2, 3)
    close(got["sum"], (tree["a"] + tree["b"].T + c).T)
    close(got["pair"][0], tree["a"] * 2.0)
    close(got["pair"][1], np.ones(3))  # an output shared by all examples is repeated


def test_negative_axes_and_tensor_inputs() -> None:
    xs = np.arange(6.0).reshape(2, 3)
    close(lp.vmap(lambda x: x * 2.0, in_axes=-1, out_axes=-1)(xs), xs * 2.0)
    out = lp.vmap(lambda x: x + 1.0)(lp.Tensor(xs))
    assert isinstance(out, lp.Tensor)
    close(out, xs + 1.0)


def test_inputs_are_not_mutated_and_outputs_do_not_alias_them() -> None:
    xs = np.arange(6.0).reshape(3, 2)
    before = xs.copy()
    out = lp.vmap(lambda x: x)(xs)
    lp.vmap(lp.grad(lambda x: lp.sum(x[np.array([0, 0])] ** 2)))(xs)
    np.testing.assert_array_equal(xs, before)
    close(out, xs)


def test_bool_of_a_batched_value_answers_only_when_all_examples_agree() -> None:
    def f(x: Any) -> Any:
        return x * 2.0 if np.all(x > -10.0) else x

    close(lp.vmap(f)(np.arange(3.0)), np.arange(3.0) * 2.0)
    with pytest.raises(TypeError, match="some examples and false for others"):
        lp.vmap(lambda x: x if x > 1.0 else -x)(np.arange(3.0))


# ----- bad input --------------------------------------------------------------------------------------------
def test_mismatched_batch_sizes_name_the_arguments_sizes_and_axes() -> None:
    with pytest.raises(ValueError, match=r"args\[0\] has size 3 along axis 0; args\[1\] has size 4 along axis 1"):
        lp.vmap(lambda a, b: a, in_axes=(0, 1))(np.zeros(3), np.zeros((2, 4)))


def test_in_axes_out_of_range_names_the_argument_and_shape() -> None:
    with pytest.raises(ValueError, match=r"in_axes=2 for args\[0\]\['w'\] of shape \(3, 4\)"):
        lp.vmap(lambda t: t["w"], in_axes=2)({"w": np.zeros((3, 4))})
    with pytest.raises(ValueError, match="it is a scalar"):
        lp.vmap(lambda x: x)(1.0)


def test_in_axes_that_do_not_match_the_arguments() -> None:
    with pytest.raises(ValueError, match="in_axes has 1 entries but the function got 2 arguments"):
        lp.vmap(lambda a, b: a, in_axes=(0,))(np.zeros(2), np.zeros(2))
    with pytest.raises(ValueError, match=r"in_axes\[0\] has keys \['x'\] but the argument has keys \['w'\]"):
        lp.vmap(lambda t: t, in_axes=({"x": 0},))({"w": np.zeros(2)})
    with pytest.raises(ValueError, match="in_axes maps no argument"):
        lp.vmap(lambda a: a, in_axes=None)(np.zeros(2))
    with pytest.raises(ValueError, match="out_axes is None for output, but it differs between examples"):
        lp.vmap(lambda a: a, out_axes=None)(np.zeros(2))


def test_a_numpy_function_without_a_rule_is_named() -> None:
    with pytest.raises(TypeError, match=r"vmap: np\.interp has no batching rule"):
        lp.vmap(lambda x: np.interp(x, [0.0, 1.0], [0.0, 2.0]))(np.zeros(3))
    with pytest.raises(TypeError, match="cannot become a plain NumPy array"):
        lp.vmap(lambda x: np.asarray(x))(np.zeros(3))
    with pytest.raises(TypeError, match="float\\(\\) of a batched value"):
        lp.vmap(lambda x: float(x))(np.zeros(3))
    with pytest.raises(TypeError, match="np.nonzero gives each example its own number"):
        lp.vmap(lambda x: np.nonzero(x))(np.zeros((3, 2)))


def test_keyword_arguments_are_mapped_over_their_first_axis() -> None:
    xs, ws = np.arange(6.0).reshape(3, 2), np.ones((3, 2))
    close(lp.vmap(lambda x, *, w: x * w)(xs, w=ws), xs * ws)
    with pytest.raises(ValueError, match=r"kwargs\['w'\] has size 2 along axis 0"):
        lp.vmap(lambda x, *, w: x * w)(xs, w=np.ones((2, 2)))


def test_backward_through_vmap_sums_over_the_examples() -> None:
    w = lp.Tensor([0.5, -1.0], requires_grad=True)
    xs = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    lp.sum(lp.vmap(lambda x: lp.sum(lp.tanh(w * x)))(xs)).backward()
    want = sum((1 - np.tanh(np.array([0.5, -1.0]) * x) ** 2) * x for x in xs)
    close(w.grad, want)


def test_a_batch_of_no_examples_keeps_each_examples_shape() -> None:
    # A -1 in a per-example shape, or a flattened example, cannot be resolved by NumPy over a batch of
    # size 0: vmap resolves it from the example's own size.
    none = np.zeros((0, 2, 3))
    for f, shape in ((lambda x: x.reshape(-1), (0, 6)), (lambda x: np.reshape(x, (3, -1)), (0, 3, 2)),
                     (np.ravel, (0, 6)), (lambda x: np.concatenate([x, x], axis=None), (0, 12)),
                     (lambda x: np.cumsum(x), (0, 6)), (lambda x: np.repeat(x, 2), (0, 12)),
                     (lambda x: np.roll(x, 1), (0, 2, 3)), (lambda x: np.linalg.norm(x, keepdims=True), (0, 1, 1)),
                     (lambda x: np.allclose(x, x), (0,))):
        assert lp.vmap(f)(none).shape == shape
    assert lp.vmap(lambda x: lp.conv1d(x, np.ones((4, 2, 2)), np.ones(4)))(none[:, None]).shape == (0, 1, 4, 2)
    g = lp.vmap(lp.grad(lambda x: lp.sum(lp.cumprod(x) * 2.0)))(none)
    assert g.shape == (0, 2, 3) and g.dtype == np.float64
