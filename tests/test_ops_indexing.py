"""Indexing: ``t[...]`` with ints, slices (negative steps too), None, ..., integer arrays and boolean
masks; the gradient scatters back and adds up over repeated indices. ``take`` for embeddings."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, SMALL, assert_cotangents_match, normal, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

nonempty = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)


def scatter_reference(shape: tuple[int, ...], index: Any, g: np.ndarray) -> np.ndarray:
    """The gradient of ``x[index]`` for cotangent ``g``, one element at a time."""
    out = np.zeros(shape)
    flat_ids = np.arange(int(np.prod(shape))).reshape(shape)[index]
    for i, gi in zip(np.ravel(flat_ids), np.ravel(np.broadcast_to(g, np.shape(flat_ids)))):
        out.reshape(-1)[i] += gi
    return out


@FAST
@given(nonempty.flatmap(lambda s: st.tuples(st.just(s), hnp.basic_indices(s, allow_newaxis=True))), seeds)
def test_basic_indices(si: tuple[tuple[int, ...], Any], seed: int) -> None:
    shape, index = si
    x = normal(seed, shape)
    y = Tensor(x, requires_grad=True)[index]
    np.testing.assert_array_equal(value(y), x[index])
    assert y._op == "getitem"
    check_grads(lambda t: t[index] * t[index], [x], order=2)
    g = normal(seed + 1, np.shape(x[index]))
    _, vjp = F.getitem(x, index)
    np.testing.assert_allclose(vjp(g)[0], scatter_reference(shape, index, g))


@FAST
@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)
       .flatmap(lambda s: st.tuples(st.just(s), hnp.integer_array_indices(s))), seeds)
def test_integer_array_indices_accumulate(si: tuple[tuple[int, ...], Any], seed: int) -> None:
    shape, index = si
    x = normal(seed, shape)
    np.testing.assert_array_equal(value(Tensor(x)[index]), x[index])
    check_grads(lambda t: t[index] ** 2, [x], order=2)
    g = normal(seed + 1, np.shape(x[index]))
    np.testing.assert_allclose(F.getitem(x, index)[1](g)[0], scatter_reference(shape, index, g))
    assert_cotangents_match(F.getitem, [x, index], [0])


@FAST
@given(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4), seeds, st.data())
def test_boolean_masks(shape: tuple[int, ...], seed: int, data: Any) -> None:
    x = normal(seed, shape)
    k = data.draw(st.integers(1, len(shape)))
    mask = data.draw(hnp.arrays(bool, shape[:k]))
    np.testing.assert_array_equal(value(Tensor(x)[mask]), x[mask])
    check_grads(lambda t: t[mask] * 3.0, [x], order=2)
    g = lp.grad(lambda t: t[mask].sum())(x)
    np.testing.assert_array_equal(g, np.broadcast_to(mask.reshape(mask.shape + (1,) * (len(shape) - k)), shape))
    check_grads(lambda t: t[x > 0], [x], order=2)  # a mask computed by a comparison


def test_repeated_indices_accumulate() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x[[0, 0, 1]]
    np.testing.assert_array_equal(value(y), [1.0, 1.0, 2.0])
    y.sum().backward()
    np.testing.assert_array_equal(value(x.grad), [2.0, 1.0, 0.0])
    g = lp.grad(lambda t: (t[np.array([2, 2, 2, 0])] * np.array([1.0, 2.0, 3.0, 4.0])).sum())(np.zeros(3))
    np.testing.assert_array_equal(g, [4.0, 0.0, 6.0])
    # second order: d/dx sum(x[[0, 0]] ** 3) = 6 x0^2 -> Hessian 12 x0
    h = lp.hessian(lambda t: (t[[0, 0]] ** 3).sum())(np.array([2.0, 1.0]))
    np.testing.assert_allclose(h, [[24.0, 0.0], [0.0, 0.0]])


def test_negative_steps_none_and_ellipsis() -> None:
    x = np.arange(24.0).reshape(2, 3, 4)
    for index in [(Ellipsis, slice(None, None, -1)), (None, 1, Ellipsis, None), (slice(None, None, -2), -1),
                  (Ellipsis, 2), (1, slice(2, 0, -1), [3, 0, 3])]:
        np.testing.assert_array_equal(value(Tensor(x)[index]), x[index])
        check_grads(lambda t, index=index: t[index] ** 2, [x / 10], order=2)
    g = lp.grad(lambda t: (t[::-1] * np.array([1.0, 2.0, 3.0])).sum())(np.zeros(3))
    np.testing.assert_array_equal(g, [3.0, 2.0, 1.0])


def test_mixed_and_tensor_indices() -> None:
    x = normal(0, (3, 4))
    idx = Tensor([2, 0, 2])
    np.testing.assert_array_equal(value(Tensor(x)[idx]), x[[2, 0, 2]])
    check_grads(lambda t: t[idx, 1:], [x], order=2)
    check_grads(lambda t: t[[0, 1], [3, 3]], [x], order=2)
    check_grads(lambda t: t[:, np.array([[0, 1], [1, 1]])], [x], order=2)


def test_float32_indexing() -> None:
    x32 = normal(0, (4, 3), np.float32)
    for index in [[0, 0, 1], slice(None, None, -1), x32[:, 0] > 0, (None, 1)]:
        assert_cotangents_match(F.getitem, [x32, index], [0])
        t = Tensor(x32, requires_grad=True)
        y = t[index]
        assert y.dtype == np.float32
        (y * y).sum().backward(create_graph=True)
        assert t.grad.dtype == np.float32
    _, vjp = F.getitem(Tensor(x32), [0, 0])
    ct = vjp(Tensor(np.ones((2, 3), np.float32)))[0]
    assert type(ct) is Tensor and ct.dtype == np.float32 and ct._op == "leaf"  # a constant cotangent


def test_index_cotangent_on_the_graph_records_unindex() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x[[1, 1]] ** 2).sum().backward(create_graph=True)
    assert x.grad._op == "unindex"  # the scatter is itself a recorded, differentiable op
    np.testing.assert_array_equal(value(x.grad), [0.0, 8.0])
    g1, x.grad = x.grad, None
    g1.sum().backward()  # d/dx of 4 * x[1]
    np.testing.assert_array_equal(value(x.grad), [0.0, 4.0])


def test_item_assignment_is_refused_with_a_hint() -> None:
    t = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="immutable"):
        t[0] = 5.0


# ----- take ---------------------------------------------------------------------------------------------------
@SMALL
@given(st.integers(1, 5), st.integers(1, 4), hnp.array_shapes(min_dims=0, max_dims=2, max_side=4), seeds)
def test_take_is_an_embedding_lookup(vocab: int, dim: int, ids_shape: tuple[int, ...], seed: int) -> None:
    table = normal(seed, (vocab, dim))
    ids = np.random.default_rng(seed).integers(0, vocab, ids_shape)
    out = lp.take(Tensor(table), ids, axis=0)
    assert out.shape == ids_shape + (dim,)
    np.testing.assert_array_equal(value(out), np.take(table, ids, axis=0))
    check_grads(lambda e: lp.take(e, ids, axis=0) ** 2, [table], order=2)
    w = normal(seed + 1, out.shape)
    g = lp.grad(lambda e: (lp.take(e, ids, axis=0) * w).sum())(table)
    want = np.zeros_like(table)
    np.add.at(want, ids, w)
    np.testing.assert_allclose(g, want)


def test_take_with_axis_none_and_negative_axis() -> None:
    x = normal(2, (3, 4))
    np.testing.assert_array_equal(value(lp.take(Tensor(x), [0, 5, 5])), np.take(x, [0, 5, 5]))
    np.testing.assert_array_equal(value(lp.take(Tensor(x), [3, 3], axis=-1)), np.take(x, [3, 3], axis=-1))
    check_grads(lambda t: lp.take(t, [0, 5, 5]), [x], order=2)
    check_grads(lambda t: lp.take(t, [3, 0, 3], axis=-1), [x], order=2)
    g = lp.grad(lambda t: lp.take(t, [1, 1, 1]).sum())(np.zeros(3))
    np.testing.assert_array_equal(g, [0.0, 3.0, 0.0])


def test_take_float32_and_errors() -> None:
    table = Tensor(np.ones((3, 2), np.float32), requires_grad=True)
    out = lp.take(table, Tensor([0, 2, 2]), axis=0)
    assert out.dtype == np.float32
    out.sum().backward()
    assert table.grad.dtype == np.float32
    np.testing.assert_array_equal(value(table.grad), [[1.0, 1.0], [0.0, 0.0], [2.0, 2.0]])
    with pytest.raises(TypeError, match="indices must be integers"):
        lp.take(table, [0.5])
    with pytest.raises(np.exceptions.AxisError, match="take: axis 2"):
        lp.take(table, [0], axis=2)


def test_take_and_ravel_are_tensor_methods() -> None:
    t = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    np.testing.assert_array_equal(value(t.take([1, 1], axis=0)), [[3.0, 4.0], [3.0, 4.0]])
    np.testing.assert_array_equal(value(t.ravel()), [1.0, 2.0, 3.0, 4.0])
    (t.take([1, 1], axis=0).sum() + t.ravel()[0]).backward()
    np.testing.assert_array_equal(value(t.grad), [[1.0, 0.0], [2.0, 2.0]])
