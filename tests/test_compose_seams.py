"""Transforms composed at their seams: LeanPass's ops and NumPy's batching rules under ``vmap``
with any axis (negative, None, out of range), per-example Jacobians and Hessians (``vmap`` of
``jacrev``, ``jacfwd``, ``hessian``, ``hvp``), ``jvp`` of a function that calls ``vmap`` (every
op), ``stop_gradient`` of a pytree, and transforms called inside the forward of an op of the
user's (``lp.apply``) while other transforms run around it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import test_vmap_ops as walk
from hypothesis import given, settings
from hypothesis import strategies as st
from op_samples import differentiable
from test_vmap import END, STEPS, close, params, stack_of

import leanpass as lp
from leanpass import nn
from leanpass.testing import check_grads

SETTINGS = settings(max_examples=20, deadline=None)
sliding = np.lib.stride_tricks.sliding_window_view


def _raw(x: Any) -> Any:
    return np.asarray(x._data if isinstance(x, lp.Tensor) else x)


# ----- vmap: every axis, negative and None, in LeanPass's ops and NumPy's rules ------------------------------
# name: (f(x, axis) on one example, whether axis may be None, whether it is differentiable)
LP_OPS: dict[str, tuple[Callable[[Any, Any], Any], bool, bool]] = {
    "take": (lambda x, ax: lp.take(x, np.array([0, -1, 0]), axis=ax), True, True),
    "split": (lambda x, ax: lp.split(x, [1], axis=ax)[1], False, True),
    "split sections": (lambda x, ax: lp.split(x, 1, axis=ax)[0], False, True),
    "sort": (lambda x, ax: lp.sort(x, axis=ax), True, True),
    "take_along_axis": (lambda x, ax: lp.take_along_axis(
        x, np.zeros((1,) * (np.ndim(x) if ax is not None else 1), int), axis=ax), True, True),
    "median": (lambda x, ax: lp.median(x, axis=ax), True, True),
    "quantile": (lambda x, ax: lp.quantile(x, [0.25, 0.5], axis=ax), True, True),
    "cumsum": (lambda x, ax: lp.cumsum(x, axis=ax), True, True),
    "repeat": (lambda x, ax: lp.repeat(x, 2, axis=ax), True, True),
    "roll": (lambda x, ax: lp.roll(x, 1, axis=ax), True, True),
    "flip": (lambda x, ax: lp.flip(x, axis=ax), True, True),
    "softmax": (lambda x, ax: lp.softmax(x, axis=ax), False, True),
    "concatenate": (lambda x, ax: lp.concatenate([x, x * 2.0], axis=ax), True, True),
    "stack": (lambda x, ax: lp.stack([x, x * 2.0], axis=ax), False, True),
    "expand_dims": (lambda x, ax: lp.expand_dims(x, ax), False, True),
    "swapaxes": (lambda x, ax: lp.swapaxes(x, ax, -1), False, True),
    "Flatten from": (lambda x, ax: nn.Flatten(ax, -1)(x), False, True),
    "Flatten to": (lambda x, ax: nn.Flatten(0, ax)(x), False, True),
    "flatten": (lambda x, ax: lp.flatten(x), False, True),
    "select": (lambda x, ax: lp.select([x < 0], [x * 2.0], x), False, True),
    "where": (lambda x, ax: lp.where(x > 0, x, 0.5 * x), False, True),
    "astype int": (lambda x, ax: lp.astype(x * 3.0, np.int64), False, False),
    "stop_gradient": (lambda x, ax: lp.stop_gradient(x) * x, False, True),
}
examples = st.tuples(st.integers(1, 3), st.lists(st.integers(1, 3), min_size=1, max_size=3), st.integers(0, 10**4))


def _axes(nd: int, none: bool) -> list[Any]:
    return [*range(-nd, nd), *([None] if none else [])]


@SETTINGS
@given(examples)
def test_lp_ops_under_vmap_take_any_axis_on_arrays_tensors_and_under_grad(example: Any) -> None:
    n, shape, seed = example
    xs = np.random.default_rng(seed).standard_normal((n, *shape))
    for name, (f, none, smooth) in LP_OPS.items():
        for ax in _axes(len(shape), none):
            def g(x: Any, f: Any = f, ax: Any = ax) -> Any:
                return f(x, ax)

            want = np.stack([_raw(g(x)) for x in xs])
            for got in (lp.vmap(g)(xs), lp.vmap(g)(lp.Tensor(xs))):  # on arrays, on a Tensor
                assert _raw(got).shape == want.shape and _raw(got).dtype == want.dtype, (name, ax)
                np.testing.assert_allclose(_raw(got), want, rtol=1e-12, atol=1e-12, err_msg=f"{name} axis={ax}")
            if smooth:  # per-example gradients
                dg = lp.grad(lambda x, g=g: lp.sum(g(x) ** 2))
                np.testing.assert_allclose(lp.vmap(dg)(xs), np.stack([dg(x) for x in xs]), rtol=1e-12,
                                           atol=1e-12, err_msg=f"grad {name} axis={ax}")


def test_flatten_refuses_dims_out_of_range_instead_of_wrapping_them() -> None:
    x = np.zeros((2, 3, 4))
    assert nn.Flatten(-2)(x).shape == (2, 12)
    for start, end in ((3, -1), (0, 3), (-4, -1)):  # (these wrapped around: (3, -1) gave shape (2, 12))
        with pytest.raises(np.exceptions.AxisError, match="Flatten"):
            nn.Flatten(start, end)(x)
    with pytest.raises(ValueError, match="start_dim 2 comes after end_dim 0"):
        nn.Flatten(2, 0)(x)
    with pytest.raises(np.exceptions.AxisError, match="Flatten"):  # one example of a vmap is 1-d
        lp.vmap(nn.Flatten())(np.zeros((5, 3)))


def test_lp_take_with_per_example_indices_and_a_shared_array() -> None:
    rng = np.random.default_rng(0)
    table, idx = rng.standard_normal((4, 5)), rng.integers(0, 5, (3, 2))
    for ax in (-1, 1):
        got = lp.vmap(lambda i, ax=ax: lp.take(table, i, axis=ax))(idx)
        np.testing.assert_array_equal(_raw(got), np.stack([np.take(table, i, axis=ax) for i in idx]))
        gt = lp.vmap(lp.grad(lambda t, i, ax=ax: lp.sum(lp.take(t, i, axis=ax) ** 2)), in_axes=(None, 0))(table, idx)
        want = [lp.grad(lambda t, i=i, ax=ax: lp.sum(lp.take(t, i, axis=ax) ** 2))(table) for i in idx]
        np.testing.assert_allclose(gt, np.stack(want), rtol=1e-12)


# name: (f(a, axis) on one example, whether axis may be None)
NUMPY_CALLS: dict[str, tuple[Callable[[Any, Any], Any], bool]] = {
    "sum keepdims": (lambda a, ax: np.sum(a, axis=ax, keepdims=True), True),
    "mean": (lambda a, ax: np.mean(a, axis=ax), True),
    "std": (lambda a, ax: np.std(a, axis=ax), True),
    "median keepdims": (lambda a, ax: np.median(a, axis=ax, keepdims=True), True),
    "count_nonzero": (lambda a, ax: np.count_nonzero(a > 0, axis=ax), True),
    "argmax": (lambda a, ax: np.argmax(a, axis=ax), True),
    "argmax keepdims": (lambda a, ax: np.argmax(a, axis=ax, keepdims=True), True),
    "argmin keepdims": (lambda a, ax: np.argmin(a, axis=ax, keepdims=True), True),
    "cumsum": (lambda a, ax: np.cumsum(a, axis=ax), True),
    "sort": (lambda a, ax: np.sort(a, axis=ax), True),
    "argsort": (lambda a, ax: np.argsort(a, axis=ax), True),
    "partition": (lambda a, ax: np.partition(a, 0, axis=ax), True),
    "flip": (lambda a, ax: np.flip(a, axis=ax), True),
    "roll": (lambda a, ax: np.roll(a, 1, axis=ax), True),
    "take": (lambda a, ax: np.take(a, np.array([0, -1]), axis=ax), True),
    "take_along_axis": (lambda a, ax: np.take_along_axis(
        a, np.zeros((1,) * a.ndim if ax is not None else (1,), int), axis=ax), True),
    "split": (lambda a, ax: np.split(a, [1], axis=ax)[1], False),
    "array_split": (lambda a, ax: np.array_split(a, 2, axis=ax)[0], False),
    "concatenate": (lambda a, ax: np.concatenate([a, a], axis=ax), True),
    "stack": (lambda a, ax: np.stack([a, a], axis=ax), False),
    "expand_dims": (lambda a, ax: np.expand_dims(a, ax), False),
    "squeeze": (lambda a, ax: np.squeeze(np.expand_dims(a, ax), ax), False),
    "moveaxis": (lambda a, ax: np.moveaxis(a, ax, 0), False),
    "swapaxes": (lambda a, ax: np.swapaxes(a, ax, -1), False),
    "diff prepend": (lambda a, ax: np.diff(a, axis=ax, prepend=0.0), False),
    "repeat": (lambda a, ax: np.repeat(a, 2, axis=ax), True),
    "add.reduce": (lambda a, ax: np.add.reduce(a, axis=ax), True),
    "maximum.reduce keepdims": (lambda a, ax: np.maximum.reduce(a, axis=ax, keepdims=True), True),
    "multiply.accumulate": (lambda a, ax: np.multiply.accumulate(a, axis=ax), False),
    "add.reduceat": (lambda a, ax: np.add.reduceat(a, [0], axis=ax), False),
    "linalg.norm keepdims": (lambda a, ax: np.linalg.norm(a, axis=ax, keepdims=True), True),
    "linalg.norm ord 1": (lambda a, ax: np.linalg.norm(a, ord=1, axis=ax), False),
    "sliding_window_view": (lambda a, ax: sliding(a, 1, axis=ax), False),
    "diagonal": (lambda a, ax: np.diagonal(a, 0, ax, (ax + 1) % a.ndim) if a.ndim > 1 else a, False),
    "trace": (lambda a, ax: np.trace(a, 0, ax, (ax + 1) % a.ndim) if a.ndim > 1 else a, False),
    "transpose": (lambda a, ax: np.transpose(a, None if ax is None else (ax, *[
        i for i in range(a.ndim) if i != ax % a.ndim])), True),
    "tensordot": (lambda a, ax: np.tensordot(a, a, axes=([ax], [ax])), False),
    **({"vector_norm keepdims": (lambda a, ax: np.linalg.vector_norm(a, axis=ax, keepdims=True), True)}
       if hasattr(np.linalg, "vector_norm") else {}),
}


@SETTINGS
@given(examples)
def test_every_batching_rule_takes_every_axis_and_refuses_those_out_of_range(example: Any) -> None:
    n, shape, seed = example
    xs = np.random.default_rng(seed).standard_normal((n, *shape))
    nd = len(shape)
    for name, (f, none) in NUMPY_CALLS.items():
        for ax in [*_axes(nd, none), nd, -nd - 1]:
            def g(a: Any, f: Any = f, ax: Any = ax) -> Any:
                return f(a, ax)

            try:
                want = np.stack([g(x) for x in xs])
            except (ValueError, IndexError) as e:  # NumPy refuses the axis: so must vmap
                with pytest.raises(type(e) if isinstance(e, np.exceptions.AxisError) else (ValueError, IndexError)):
                    lp.vmap(g)(xs)
                continue
            got = lp.vmap(g)(xs)
            assert got.shape == want.shape and got.dtype == want.dtype, (name, ax, got.shape, want.shape)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12, err_msg=f"{name} axis={ax}")


def test_a_reduction_of_a_0d_example_over_numpys_axis_0_reduces_nothing() -> None:
    # np.add.reduce(a, axis=0) of a 0-d a is a itself; the batch axis was summed instead
    xs = np.array([1.0, 2.0, 3.0])
    np.testing.assert_array_equal(lp.vmap(lambda a: np.add.reduce(a, axis=0))(xs), xs)
    np.testing.assert_array_equal(lp.vmap(lambda a: np.maximum.reduce(a, axis=-1, keepdims=True))(xs), xs)


# ----- per-example Jacobians and Hessians ------------------------------------------------------------------
def _vector_program(steps: list[str]) -> Any:
    def f(p: Any, x: Any) -> Any:
        for s in steps:
            x = STEPS[s](x, p)
        return x

    return f


def _scalar_program(steps: list[str], end: str) -> Any:
    vec = _vector_program(steps)
    return lambda p, x: END[end](vec(p, x), p)


programs = st.tuples(st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=3), st.sampled_from(sorted(END)))
shapes = st.tuples(st.integers(1, 3), st.integers(2, 3), st.integers(1, 3))  # batch, rows, cols


@SETTINGS
@given(programs, shapes, st.integers(0, 1), st.integers(0, 10**4))
def test_vmap_of_jacrev_and_jacfwd_is_the_stack_of_per_example_jacobians(prog: Any, shape: Any, axis: int,
                                                                         seed: int) -> None:
    n, rows, cols = shape
    f = _vector_program(prog[0])
    p = params(cols, seed)  # a dict: the Jacobian in it is a dict of blocks
    xs = np.moveaxis(np.random.default_rng(seed + 1).standard_normal((n, rows, cols)), 0, axis)
    for jac in (lp.jacrev, lp.jacfwd):
        for argnums in (0, 1, (0, 1)):
            per = jac(f, argnums=argnums)
            close(lp.vmap(per, in_axes=(None, axis))(p, xs), stack_of(per, p, xs, in_axes=(None, axis)), 1e-10)


@SETTINGS
@given(programs, shapes, st.integers(0, 10**4))
def test_vmap_of_hessian_and_hvp_is_the_stack_of_per_example_ones(prog: Any, shape: Any, seed: int) -> None:
    n, rows, cols = shape
    f = _scalar_program(*prog)
    p = params(cols, seed)
    rng = np.random.default_rng(seed + 1)
    xs, vs = rng.standard_normal((n, rows, cols)), rng.standard_normal((n, rows, cols))
    for argnums in (0, 1, (0, 1)):
        h = lp.hessian(f, argnums=argnums)
        close(lp.vmap(h, in_axes=(None, 0))(p, xs), stack_of(h, p, xs, in_axes=(None, 0)), 1e-9)
    # H_x v per example, both batched; H_p v with the parameters' direction batched as a pytree
    hx = lp.vmap(lambda x, v: lp.hvp(lambda x: f(p, x))(x, v))(xs, vs)
    close(hx, np.stack([lp.hvp(lambda x, x0=x0: f(p, x))(x0, v) for x0, v in zip(xs, vs)]), 1e-9)
    dps = {"w": rng.standard_normal((n, cols, cols)), "v": rng.standard_normal((n, cols))}
    hp = lp.vmap(lambda x, dp: lp.hvp(lambda q: f(q, x))(p, dp))(xs, dps)
    want = [lp.hvp(lambda q, x=x: f(q, x))(p, {"w": dps["w"][i], "v": dps["v"][i]}) for i, x in enumerate(xs)]
    close(hp, {k: np.stack([w[k] for w in want]) for k in ("w", "v")}, 1e-9)


def test_per_example_jacobians_with_pytree_in_axes_and_a_mapped_parameter() -> None:
    rng = np.random.default_rng(1)
    p = {"w": rng.standard_normal((3, 2)), "b": rng.standard_normal((4, 2))}  # b: one row per example
    xs = rng.standard_normal((4, 3))

    def f(p: Any, x: Any) -> Any:
        return lp.tanh(x @ p["w"] + p["b"])

    axes = ({"w": None, "b": 0}, 0)
    for jac in (lp.jacrev, lp.jacfwd):
        got = lp.vmap(jac(f, argnums=(0, 1)), in_axes=axes)(p, xs)
        for i in range(4):
            want = jac(f, argnums=(0, 1))({"w": p["w"], "b": p["b"][i]}, xs[i])
            close(lp.tree_map(lambda a, i=i: a[i], got), want, 1e-12)
    # the Hessian of a scalar by hand: f = sum(x * x * c) has H = diag(2 c) for every example
    cs = rng.standard_normal((4, 3))
    h = lp.vmap(lp.hessian(lambda x, c: lp.sum(x * x * c)))(xs, cs)
    close(h, np.stack([np.diag(2 * c) for c in cs]))


def test_float32_per_example_jacobians_stay_float32() -> None:
    xs = np.random.default_rng(2).standard_normal((3, 4)).astype(np.float32)
    for t, f in ((lp.jacrev, lp.tanh), (lp.jacfwd, lp.tanh), (lp.hessian, lambda x: lp.sum(lp.tanh(x) ** 2))):
        out = lp.vmap(t(f))(xs)
        assert out.dtype == np.float32 and out.shape == (3, 4, 4)


# ----- jvp of a function that calls vmap: every op -----------------------------------------------------------
@pytest.mark.parametrize("key", sorted(walk.SAMPLES))
def test_jvp_of_vmap_of_every_op_equals_the_stack_of_jvps(key: str) -> None:
    examples = walk._examples(key)
    call, stacked, axes = walk._call(key), walk._stacked(examples), walk._in_axes(examples[0])
    moving = differentiable(examples[0])
    rng = np.random.default_rng(11)
    tangents = [rng.standard_normal(np.shape(stacked[i])) for i in moving]

    def with_moved(args: tuple[Any, ...], xs: tuple[Any, ...]) -> list[Any]:
        full = list(args)
        for i, x in zip(moving, xs):
            full[i] = x
        return full

    def mapped(*xs: Any) -> Any:
        return lp.vmap(call, in_axes=axes)(*with_moved(stacked, xs))

    with np.errstate(all="ignore"):
        _, t = lp.jvp(mapped, [stacked[i] for i in moving], tangents)
        looped = np.stack([_raw(lp.jvp(lambda *xs, e=e: call(*with_moved(e, xs)), [e[i] for i in moving],
                                       [tt[k] for tt in tangents])[1]) for k, e in enumerate(examples)])
        np.testing.assert_allclose(_raw(t), looped, rtol=1e-10, atol=1e-12)
        # the same with vmap outside: primals and tangents both batched
        batched = lp.vmap(
            lambda ps, ts, rest: lp.jvp(lambda *xs: call(*with_moved(rest, xs)), list(ps), list(ts))[1],
            in_axes=(0, 0, axes))([stacked[i] for i in moving], tangents, stacked)
        np.testing.assert_allclose(_raw(batched), looped, rtol=1e-10, atol=1e-12)


def test_jvp_of_vmap_over_max_and_sort_is_the_stack_of_jvps() -> None:
    rng = np.random.default_rng(4)
    xs, ts = rng.standard_normal((4, 3, 3)), rng.standard_normal((4, 3, 3))
    for f in (lambda x: x.max(axis=-1), lambda x: lp.sort(x, axis=0) * x, lambda x: lp.median(x, axis=-1)):
        _, t = lp.jvp(lambda x, f=f: lp.vmap(f)(x), (xs,), (ts,))
        np.testing.assert_allclose(_raw(t), np.stack([_raw(lp.jvp(f, (x,), (v,))[1]) for x, v in zip(xs, ts)]),
                                   rtol=1e-12)


# ----- stop_gradient of a pytree -----------------------------------------------------------------------------
def test_stop_gradient_of_a_pytree_stops_every_leaf_and_keeps_the_structure() -> None:
    w, b = np.array([1.0, 2.0]), np.array([3.0])
    p = {"w": w, "layers": [lp.Tensor(b), (w * 2.0, None)]}
    stopped = lp.stop_gradient(p)
    assert lp.tree_flatten(stopped)[1] == lp.tree_flatten(p)[1]
    for got, want in zip(lp.tree_flatten(stopped)[0], lp.tree_flatten(p)[0]):
        assert isinstance(got, lp.Tensor) and got._marks == 0
        np.testing.assert_array_equal(got.numpy(), _raw(want))

    def f(p: Any) -> Any:  # each leaf times its stopped self: the gradient is the leaf's value
        s = lp.stop_gradient(p)
        return lp.sum(p["w"] * s["w"]) + lp.sum(p["layers"][0] * s["layers"][0] * 3.0)

    g = lp.grad(f)({"w": w, "layers": [b]})
    close(g["w"], w)
    close(g["layers"][0], 3.0 * b)
    h = lp.hessian(lambda x: lp.sum(x * lp.stop_gradient([x, x])[1]))(w)  # d/dx of stop(x) is 0
    close(h, np.zeros((2, 2)))
    # a list of numbers stays one array, as in NumPy; a module's leaves are stopped
    assert lp.stop_gradient([1.0, 2.0]).shape == (2,)
    model = nn.Linear(2, 3, rng=0)
    frozen = lp.stop_gradient(model)
    assert type(frozen) is nn.Linear and all(leaf._marks == 0 for leaf in lp.tree_flatten(frozen)[0])
    # and under vmap, on arrays and Tensors alike
    xs = np.arange(6.0).reshape(3, 2)
    out = lp.vmap(lambda x: lp.stop_gradient({"a": x, "b": (x * 2.0,)})["b"][0])(xs)
    close(out, xs * 2.0)


# ----- a transform inside the forward of an op of the user's -------------------------------------------------
def _op_with(inner: Callable[[Any], Any]) -> Callable[[Any], Any]:
    """An op of the user's whose forward ``2 a * a`` is computed by ``inner`` (a transform), with VJP ``4 a g``."""
    return lambda a: lp.apply(lambda a: (inner(a), lambda g: (4.0 * a * g,)), "twice_square", a)


INNER = {  # each computes 2 a * a with a transform
    "grad": lambda a: lp.grad(lambda x: lp.sum(x * x))(a) * a,
    "value_and_grad": lambda a: lp.value_and_grad(lambda x: lp.sum(x * x))(a)[1] * a,
    "vjp": lambda a: lp.vjp(lambda x: x * x, a)[1](a)[0],
    "jvp": lambda a: lp.jvp(lambda x: x * x, (a,), (a,))[1],
    "jacrev": lambda a: lp.jacrev(lambda x: x * x)(a) @ a,
    "jacfwd": lambda a: lp.jacfwd(lambda x: x * x)(a) @ a,
    "hvp": lambda a: lp.hvp(lambda x: lp.sum(x * x * x) / 3.0)(a, a),
    "vmap": lambda a: lp.vmap(lambda x: 2.0 * x * x)(a),
    "jit": lambda a: lp.jit(lambda x: 2.0 * x * x)(a),
}
A = np.array([1.0, 2.0, -0.5])


def _outer(name: str, f: Callable[[Any], Any]) -> Any:
    """``name`` (a transform, or a composition) applied to ``f`` at ``A``, and what it must give."""
    s = lambda a: lp.sum(f(a))  # noqa: E731
    rows = np.tile(A, (2, 1)).T  # three examples of two entries
    if name == "eager":
        return f(A), 2 * A * A
    if name == "grad":
        return lp.grad(s)(A), 4 * A
    if name == "grad of grad":
        return lp.grad(lambda a: lp.sum(lp.grad(s)(a) * a))(A), 8 * A
    if name == "jacrev":
        return lp.jacrev(f)(A), np.diag(4 * A)
    if name == "jacfwd":
        return lp.jacfwd(f)(A), np.diag(4 * A)
    if name == "hessian":
        return lp.hessian(s)(A), 4 * np.eye(3)
    if name == "jvp":
        return lp.jvp(f, (A,), (np.ones(3),))[1], 4 * A
    if name == "vmap":
        return lp.vmap(f)(rows), 2 * rows * rows
    if name == "vmap of grad":
        return lp.vmap(lp.grad(s))(rows), 4 * rows
    if name == "grad of vmap":
        return lp.grad(lambda a: lp.sum(lp.vmap(f)(a)))(rows), 4 * rows
    if name == "jit":
        return lp.jit(f)(A), 2 * A * A
    if name == "jit of grad":
        return lp.jit(lp.grad(s))(A), 4 * A
    assert name == "backward"
    t = lp.Tensor(A, requires_grad=True)
    s(t).backward()
    return t.grad, 4 * A


OUTER = ["eager", "grad", "grad of grad", "jacrev", "jacfwd", "hessian", "jvp", "vmap", "vmap of grad",
         "grad of vmap", "jit", "jit of grad", "backward"]
# (jit inside vmap, which jit's batching would need, is left out: vmap of jit is not supported here)
PAIRS = [(i, o) for i in sorted(INNER) for o in OUTER if not (i == "jit" and "vmap" in o)]


@pytest.mark.parametrize(("inner", "outer"), PAIRS)
def test_a_transform_inside_an_ops_forward_is_a_computation_of_its_own(inner: str, outer: str) -> None:
    got, want = _outer(outer, _op_with(INNER[inner]))
    np.testing.assert_allclose(_raw(got), want, rtol=1e-12, atol=1e-12)


def test_the_issue_example_and_a_newton_solver_whose_steps_take_a_gradient() -> None:
    op = lambda a: (lp.grad(lambda x: x * x)(a) * a, lambda g: (4 * a * g,))  # noqa: E731
    assert lp.grad(lambda a: lp.apply(op, "op", a))(2.0) == 8.0

    def root(a: Any) -> Any:  # x with x - cos(x) / 2 = a, by Newton's method; dx/da = 1 / (1 + sin(x) / 2)
        def forward(a: Any) -> Any:
            x = a * 0.0
            for _ in range(12):
                slope = lp.grad(lambda x: lp.sum(x - 0.5 * np.cos(x)))(x)  # (elementwise: the diagonal)
                x = x - (x - 0.5 * np.cos(x) - a) / slope
            return x, lambda g: (g / (1.0 + 0.5 * np.sin(x)),)

        return lp.apply(forward, "newton_root", a)

    a = np.array([0.3, -1.0, 2.0])
    x = _raw(root(a))
    np.testing.assert_allclose(x - 0.5 * np.cos(x), a, rtol=1e-14)
    slope = 1.0 / (1.0 + 0.5 * np.sin(x))
    np.testing.assert_allclose(lp.grad(lambda a: lp.sum(root(a)))(a), slope, rtol=1e-14)
    np.testing.assert_allclose(_raw(lp.jvp(root, (a,), (np.ones(3),))[1]), slope, rtol=1e-12)
    np.testing.assert_allclose(lp.vmap(lp.grad(lambda a: lp.sum(root(a))))(a[:, None]), slope[:, None], rtol=1e-14)
    np.testing.assert_allclose(lp.jit(lp.grad(lambda a: lp.sum(root(a))))(a), slope, rtol=1e-14)
    # second order: the replayed VJP differentiates through the Newton steps
    curvature = -0.5 * np.cos(x) * slope ** 3
    np.testing.assert_allclose(np.diag(lp.hessian(lambda a: lp.sum(root(a)))(a)), curvature, rtol=1e-8)


def test_a_forward_that_closes_over_a_tensor_being_differentiated_is_refused() -> None:
    # The op's VJP gives no gradient for w, so that part of the gradient would be lost.
    def direct(w: Any) -> Any:
        return lp.apply(lambda a: (a * w, lambda g: (g * w,)), "scaled", np.array(2.0))

    def through_grad(w: Any) -> Any:
        return lp.apply(lambda a: (lp.grad(lambda x: x * x * w)(a), lambda g: (g,)), "scaled", np.array(2.0))

    def through_jvp(w: Any) -> Any:
        return lp.apply(lambda a: (lp.jvp(lambda x: x * w, (a,), (a,))[1], lambda g: (g,)), "scaled", np.array(2.0))

    for f in (direct, through_grad, through_jvp):
        with pytest.raises(TypeError, match="Tensor being differentiated outside the op"):
            lp.grad(f)(3.0)
    with pytest.raises(TypeError, match="Tensor being differentiated outside the op"):
        direct(lp.Tensor(3.0, requires_grad=True))


def test_transforms_of_one_nesting_level_called_one_after_another_do_not_confuse_their_inputs() -> None:
    # MAML: the meta-gradient through several inner gradient steps. Each inner grad takes the same
    # trace bit, and each step's result carries it; the next inner grad must stop at its own inputs.
    rng = np.random.default_rng(5)
    xs, ys = rng.standard_normal((5, 3)), rng.standard_normal(5)

    def loss(w: Any, x: Any, y: Any) -> Any:
        return lp.mean((lp.tanh(x @ w) - y) ** 2)

    def meta(w: Any) -> Any:
        for _ in range(3):
            w = w - 0.5 * lp.grad(loss)(w, xs, ys)
        return loss(w, xs[:2], ys[:2])

    def plain(w: np.ndarray) -> float:  # the same steps, with the inner gradient written out by hand
        for _ in range(3):
            r = np.tanh(xs @ w)
            w = w - 0.5 * (2 * (r - ys) * (1 - r * r)) @ xs / len(ys)
        return float(np.mean((np.tanh(xs[:2] @ w) - ys[:2]) ** 2))

    w = rng.standard_normal(3)
    eps = 1e-6
    fd = np.array([(plain(w + eps * e) - plain(w - eps * e)) / (2 * eps) for e in np.eye(3)])
    np.testing.assert_allclose(lp.grad(meta)(w), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(lp.jacfwd(meta)(w), fd, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(_raw(lp.jvp(meta, (w,), (np.eye(3)[1],))[1]), fd[1], rtol=1e-6, atol=1e-9)
    check_grads(meta, [w], order=2)
    # a value_and_grad's value, carried into the next one, too
    def steps(w: Any) -> Any:
        total = 0.0
        for _ in range(2):
            value, g = lp.value_and_grad(loss)(w, xs, ys)
            total, w = total + value, w - 0.5 * g
        return total

    check_grads(steps, [w], order=2)
