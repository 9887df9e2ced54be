"""Shape ops: reshape, transpose / .T / permute, swapaxes, expand_dims, squeeze, broadcast_to,
flatten, concatenate, stack, split."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, SMALL, assert_cotangents_match, normal, one_axis, seeds, shapes, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads


@FAST
@given(shapes, seeds, st.data())
def test_reshape_with_minus_one(shape: tuple[int, ...], seed: int, data: Any) -> None:
    x = normal(seed, shape)
    new = list(data.draw(st.permutations(shape))) + data.draw(st.lists(st.just(1), max_size=2))
    if new:
        new[data.draw(st.integers(0, len(new) - 1))] = -1
    y = lp.reshape(Tensor(x, requires_grad=True), tuple(new))
    assert y.shape == x.reshape(new).shape and y._op == "reshape"
    check_grads(lambda t: lp.reshape(t, tuple(new)) * 2.0, [x], order=2)
    check_grads(lambda t: t.reshape(*new) if new else t.reshape(()), [x], order=2)  # the method, both spellings
    assert_cotangents_match(F.reshape, [x, tuple(new)], [0])


@FAST
@given(shapes, seeds, st.data())
def test_transpose_permute_and_dot_t(shape: tuple[int, ...], seed: int, data: Any) -> None:
    x = normal(seed, shape)
    nd = len(shape)
    perm = data.draw(st.permutations(range(nd)))
    neg = tuple(a - nd if data.draw(st.booleans()) else a for a in perm)  # negative axes too
    np.testing.assert_array_equal(value(lp.transpose(Tensor(x), neg)), np.transpose(x, perm))
    np.testing.assert_array_equal(value(Tensor(x).T), x.T)
    check_grads(lambda t: lp.transpose(t, neg), [x], order=2)
    check_grads(lambda t: t.permute(*perm) if perm else t.permute(), [x], order=2)
    check_grads(lambda t: lp.permute(t.T.T * t, perm), [x], order=2)
    assert_cotangents_match(F.transpose, [x, neg], [0])


def test_transpose_op_names() -> None:
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    assert x.T._op == "transpose" and x.permute(1, 0)._op == "transpose"
    assert lp.transpose(x)._op == "transpose" and x.transpose()._op == "transpose"
    assert lp.transpose(x, np.array([1, 0])).shape == (3, 2) and lp.transpose(x, [-1, 0]).shape == (3, 2)
    g = lp.grad(lambda t: (t.T * np.arange(6.0).reshape(3, 2)).sum())(np.ones((2, 3)))
    np.testing.assert_array_equal(g, np.arange(6.0).reshape(3, 2).T)


@FAST
@given(one_axis(), seeds, st.data())
def test_swapaxes(sa: tuple[tuple[int, ...], int], seed: int, data: Any) -> None:
    shape, a1 = sa
    a2 = data.draw(st.integers(-len(shape), len(shape) - 1))
    x = normal(seed, shape)
    np.testing.assert_array_equal(value(lp.swapaxes(Tensor(x), a1, a2)), np.swapaxes(x, a1, a2))
    check_grads(lambda t: t.swapaxes(a1, a2), [x], order=2)
    assert lp.swapaxes(Tensor(x, requires_grad=True), a1, a2)._op == "swapaxes"


@FAST
@given(shapes, seeds, st.data())
def test_expand_dims_and_squeeze(shape: tuple[int, ...], seed: int, data: Any) -> None:
    x = normal(seed, shape)
    nd = len(shape) + 1
    axis = data.draw(st.integers(-nd, nd - 1))
    y = lp.expand_dims(Tensor(x, requires_grad=True), axis)
    assert y.shape == np.expand_dims(x, axis).shape and y._op == "expand_dims"
    check_grads(lambda t: lp.expand_dims(t, axis), [x], order=2)
    check_grads(lambda t: lp.squeeze(lp.expand_dims(t, axis), axis), [x], order=2)
    check_grads(lambda t: lp.squeeze(t), [x], order=2)
    ones = tuple(i for i, n in enumerate(shape) if n == 1)
    assert lp.squeeze(Tensor(x), ones).shape == np.squeeze(x, ones).shape
    assert_cotangents_match(F.squeeze, [x, None], [0])
    assert_cotangents_match(F.expand_dims, [x, axis], [0])


def test_expand_dims_with_a_tuple_and_squeeze_method() -> None:
    x = normal(0, (2, 3))
    assert lp.expand_dims(Tensor(x), (0, -1)).shape == (1, 2, 3, 1)
    check_grads(lambda t: lp.expand_dims(t, (0, -1)), [x], order=2)
    t = Tensor(np.ones((1, 3, 1)), requires_grad=True)
    assert t.squeeze().shape == (3,) and t.squeeze(-1).shape == (1, 3) and t.squeeze()._op == "squeeze"


@FAST
@given(hnp.mutually_broadcastable_shapes(num_shapes=1, min_dims=0, max_dims=3, max_side=3), seeds)
def test_broadcast_to(bs: Any, seed: int) -> None:
    (shape,), target = bs.input_shapes, bs.result_shape
    x = normal(seed, shape)
    y = lp.broadcast_to(Tensor(x, requires_grad=True), target)
    assert y.shape == target and y._op == "broadcast_to"
    check_grads(lambda t: lp.broadcast_to(t, target), [x], order=2)
    assert_cotangents_match(F.broadcast_to, [x, target], [0])


def test_broadcast_to_sums_the_gradient_back() -> None:
    g = lp.grad(lambda t: (lp.broadcast_to(t, (4, 3)) * np.arange(12.0).reshape(4, 3)).sum())(np.ones((1, 3)))
    np.testing.assert_array_equal(g, [[18.0, 22.0, 26.0]])
    assert lp.broadcast_to(Tensor(2.0), 3).shape == (3,)  # an int shape, as in NumPy


@FAST
@given(shapes, seeds)
def test_flatten(shape: tuple[int, ...], seed: int) -> None:
    x = normal(seed, shape)
    np.testing.assert_array_equal(value(lp.flatten(Tensor(x))), x.ravel())
    np.testing.assert_array_equal(value(Tensor(x).flatten()), x.ravel())
    check_grads(lambda t: t.flatten(), [x], order=2)
    assert lp.flatten(Tensor(x, requires_grad=True))._op == "reshape"  # flatten is a reshape


# ----- joining and splitting ---------------------------------------------------------------------------------
@FAST
@given(one_axis(), st.lists(st.integers(1, 3), min_size=1, max_size=3), seeds)
def test_concatenate(sa: tuple[tuple[int, ...], int], sizes: list[int], seed: int) -> None:
    shape, axis = sa
    parts = [normal(seed + i, shape[: axis % len(shape)] + (n,) + shape[axis % len(shape) + 1:])
             for i, n in enumerate(sizes)]
    y = lp.concatenate([Tensor(p) for p in parts], axis=axis)
    np.testing.assert_array_equal(value(y), np.concatenate(parts, axis=axis))
    check_grads(lambda *ts: lp.concatenate(list(ts), axis=axis), parts, order=2)
    assert_cotangents_match(F.concatenate, [axis, *parts], list(range(1, len(parts) + 1)))


@FAST
@given(shapes, st.integers(1, 3), seeds, st.data())
def test_stack(shape: tuple[int, ...], k: int, seed: int, data: Any) -> None:
    parts = [normal(seed + i, shape) for i in range(k)]
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    y = lp.stack([Tensor(p) for p in parts], axis=axis)
    np.testing.assert_array_equal(value(y), np.stack(parts, axis=axis))
    check_grads(lambda *ts: lp.stack(list(ts), axis=axis), parts, order=2)
    assert_cotangents_match(F.stack, [axis, *parts], list(range(1, k + 1)))


def test_concatenate_and_stack_mix_tensors_arrays_and_lists() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    y = lp.concatenate([a, np.array([3.0]), [4.0]])
    assert y._op == "concatenate"
    np.testing.assert_array_equal(value(y), [1.0, 2.0, 3.0, 4.0])
    (y * y).sum().backward()
    np.testing.assert_array_equal(value(a.grad), [2.0, 4.0])
    s = lp.stack([a, [5.0, 6.0]], axis=1)
    assert s.shape == (2, 2) and s._op == "stack"
    m = normal(0, (2, 2))
    flat = lp.concatenate([m, a], axis=None)  # NumPy's convention: flatten each, then join
    np.testing.assert_array_equal(value(flat), np.concatenate([m, value(a)], axis=None))
    check_grads(lambda p, q: lp.concatenate([p, q], axis=None), [m, np.ones(2)], order=2)


@SMALL
@given(one_axis(), st.integers(1, 3), seeds)
def test_split_into_equal_sections(sa: tuple[tuple[int, ...], int], k: int, seed: int) -> None:
    shape, axis = sa
    shape = shape[: axis % len(shape)] + (shape[axis] * k,) + shape[axis % len(shape) + 1:]
    x = normal(seed, shape)
    pieces = lp.split(Tensor(x), k, axis=axis)
    for got, want in zip(pieces, np.split(x, k, axis=axis)):
        np.testing.assert_array_equal(value(got), want)
    check_grads(lambda t: lp.split(t, k, axis=axis), [x], order=2)


def test_split_at_indices_and_gradient_back_into_place() -> None:
    x = np.arange(6.0)
    a, b, c = lp.split(Tensor(x), [2, 5])
    assert [p.tolist() for p in (a, b, c)] == [[0.0, 1.0], [2.0, 3.0, 4.0], [5.0]]
    g = lp.grad(lambda t: (lp.split(t, [2, 5])[1] * 10.0).sum())(x)
    np.testing.assert_array_equal(g, [0.0, 0.0, 10.0, 10.0, 10.0, 0.0])
    check_grads(lambda t: lp.split(t, [1, 1, 4], axis=-1), [normal(0, (2, 6))], order=2)


def test_split_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="does not divide into 4 equal sections"):
        lp.split(Tensor(np.ones(6)), 4)
    with pytest.raises(ValueError, match="does not divide into 0 equal sections"):
        lp.split(Tensor(np.ones(6)), 0)
    with pytest.raises(ValueError, match="0-d Tensor has no axis"):
        lp.split(Tensor(1.0), 1)
    with pytest.raises(np.exceptions.AxisError, match="split: axis 2"):
        lp.split(Tensor(np.ones((2, 2))), 2, axis=2)


# ----- float32 ---------------------------------------------------------------------------------------------------
SHAPE_OPS: dict[str, Any] = {
    "reshape": lambda t: lp.reshape(t, (3, -1)),
    "transpose": lambda t: t.T,
    "permute": lambda t: t.permute(1, 0),
    "swapaxes": lambda t: lp.swapaxes(t, 0, 1),
    "expand_dims": lambda t: lp.expand_dims(t, 1),
    "squeeze": lambda t: lp.squeeze(lp.expand_dims(t, 0)),
    "broadcast_to": lambda t: lp.broadcast_to(t, (2, 2, 6)),
    "flatten": lambda t: lp.flatten(t),
    "concatenate": lambda t: lp.concatenate([t, t * 2.0], axis=-1),
    "stack": lambda t: lp.stack([t, t], axis=1),
    "split": lambda t: lp.split(t, 3, axis=1)[1],
}


@pytest.mark.parametrize("name", sorted(SHAPE_OPS))
def test_float32_values_and_gradients(name: str) -> None:
    fn = SHAPE_OPS[name]
    x32 = normal(0, (2, 6), np.float32)
    t = Tensor(x32, requires_grad=True)
    y = fn(t)
    assert y.dtype == np.float32
    (y * y).sum().backward(create_graph=True)
    assert t.grad.dtype == np.float32
    g2 = lp.grad(lambda u: lp.grad(lambda v: (fn(v) ** 3).sum())(u).sum())(x32)
    assert g2.dtype == np.float32
    # the rules, replayed on Tensors, keep float32 too
    ans, vjp = F.concatenate(0, Tensor(x32), Tensor(x32))
    assert all(c.dtype == np.float32 for c in vjp(Tensor(np.ones((4, 6), np.float32)))[1:])
