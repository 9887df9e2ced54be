"""NumPy's array-arranging functions on Tensors: stacking, block, repeat, tile, roll, flips, rot90,
moving axes, atleast_Nd, splits, triangles, diagonals, take/put along an axis, select, broadcast_arrays,
meshgrid, ravel, full / full_like; values equal to NumPy's (through np.<name> and lp.<name>) and
gradients against finite differences."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import SMALL, normal, one_axis, seeds, shapes, value

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads


def same(got: Any, want: Any) -> None:
    """Equal values (and structure: one array, or a tuple/list of them)."""
    if isinstance(want, (list, tuple)):
        assert isinstance(got, (list, tuple)) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w)
        return
    assert isinstance(got, Tensor), type(got)
    np.testing.assert_array_equal(value(got), want)


def joined(out: Any) -> Any:
    """A function's result as one Tensor (pieces of a split concatenated), for check_grads."""
    return lp.concatenate([lp.reshape(o, (-1,)) for o in out]) if isinstance(out, (list, tuple)) else out


A, B, C = normal(0, (2, 3)), normal(1, (2, 3)), normal(2, (3,))
SQ, CUBE, V = normal(3, (3, 3)), normal(4, (2, 3, 4)), normal(5, (4,))
# name -> (a call of NumPy's function on the differentiated arrays, those arrays)
CASES: dict[str, tuple[Callable[..., Any], list[np.ndarray]]] = {
    "vstack": (lambda a, c: np.vstack([a, c]), [A, C]),
    "hstack": (lambda a, b: np.hstack((a, b)), [A, B]),
    "hstack 1-d": (lambda c, v: np.hstack([c, v]), [C, V]),
    "dstack": (lambda a, b: np.dstack([a, b]), [A, B]),
    "column_stack": (lambda c, m: np.column_stack([c, m]), [C, normal(6, (3, 2))]),
    "block": (lambda p, q, r, s: np.block([[p, q], [r, s]]),
              [SQ, normal(7, (3, 1)), normal(8, (1, 3)), normal(9, (1, 1))]),
    "block 1-d": (lambda c, v: np.block([c, v]), [C, V]),
    "block 3 levels": (lambda a, b: np.block([[[a]], [[b]]]), [A, B]),
    "repeat": (lambda a: np.repeat(a, 2), [A]),
    "repeat axis": (lambda a: np.repeat(a, [1, 0, 3], axis=1), [A]),
    "tile": (lambda a: np.tile(a, (2, 1, 2)), [A]),
    "tile 1-d": (lambda c: np.tile(c, 3), [C]),
    "roll": (lambda a: np.roll(a, 2), [A]),
    "roll axes": (lambda x: np.roll(x, (1, -1), axis=(0, 2)), [CUBE]),
    "flip": (lambda x: np.flip(x, (0, 2)), [CUBE]),
    "flip all": (np.flip, [CUBE]),
    "fliplr": (np.fliplr, [A]),
    "flipud": (np.flipud, [A]),
    "rot90": (np.rot90, [A]),
    "rot90 k=2": (lambda x: np.rot90(x, 2, (1, 2)), [CUBE]),
    "rot90 k=-1": (lambda x: np.rot90(x, -1, axes=(2, 0)), [CUBE]),
    "moveaxis": (lambda x: np.moveaxis(x, 0, -1), [CUBE]),
    "moveaxis many": (lambda x: np.moveaxis(x, (0, 1), (2, 0)), [CUBE]),
    "rollaxis": (lambda x: np.rollaxis(x, 2, 1), [CUBE]),
    "atleast_1d": (np.atleast_1d, [np.array(1.5)]),
    "atleast_2d": (np.atleast_2d, [C, A]),
    "atleast_3d": (np.atleast_3d, [np.array(2.0), C, A]),
    "array_split": (lambda x: np.array_split(x, 3), [normal(10, (7, 2))]),
    "array_split at": (lambda a: np.array_split(a, [1, 2], axis=1), [A]),
    "vsplit": (lambda x: np.vsplit(x, 2), [normal(11, (4, 2))]),
    "hsplit": (lambda a: np.hsplit(a, 3), [A]),
    "dsplit": (lambda x: np.dsplit(x, [1, 3]), [CUBE]),
    "tril": (np.tril, [CUBE]),
    "triu": (lambda a: np.triu(a, 1), [A]),
    "tril k": (lambda m: np.tril(m, k=-1), [SQ]),
    "diag matrix": (lambda a: np.diag(a, 1), [A]),
    "diag vector": (lambda c: np.diag(c, k=-1), [C]),
    "diagonal": (lambda x: np.diagonal(x, 1, 2, 1), [CUBE]),
    "diagflat": (lambda a: np.diagflat(a, 2), [A]),
    "take_along_axis": (lambda a: np.take_along_axis(a, np.array([[2, 0, 0], [1, 1, 2]]), 1), [A]),
    "take_along_axis sorted": (lambda x: np.take_along_axis(x, np.argsort(CUBE, axis=0), axis=0), [CUBE]),
    "take_along_axis flat": (lambda a: np.take_along_axis(a, np.array([5, 0]), None), [A]),
    "broadcast_arrays": (np.broadcast_arrays, [C, A[:, :1]]),
    "meshgrid": (np.meshgrid, [C, V]),
    "meshgrid ij": (lambda *x: np.meshgrid(*x, indexing="ij"), [C, V, A[0]]),
    "meshgrid sparse": (lambda *x: np.meshgrid(*x, sparse=True), [C, V]),
    "ravel": (np.ravel, [CUBE]),
    "select": (lambda a, b, d: np.select([A > 0, A < -0.5], [a, b * 2.0], d), [A, B, B[0]]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients(name: str) -> None:
    fn, arrays = CASES[name]
    same(fn(*(Tensor(x, requires_grad=True) for x in arrays)), fn(*arrays))  # np.<name> on Tensors
    check_grads(lambda *ts: joined(fn(*ts)), arrays, order=2)


@pytest.mark.parametrize("name", ["vstack", "hstack", "dstack", "column_stack", "row_stack", "block", "repeat",
                                  "tile", "roll", "flip", "fliplr", "flipud", "rot90", "moveaxis", "rollaxis",
                                  "atleast_1d", "atleast_2d", "atleast_3d", "array_split", "vsplit", "hsplit",
                                  "dsplit", "tril", "triu", "diag", "diagonal", "diagflat", "take_along_axis",
                                  "put_along_axis", "select", "broadcast_arrays", "meshgrid", "ravel", "full",
                                  "full_like"])
def test_each_is_a_leanpass_function_with_numpy_name(name: str) -> None:
    fn = getattr(lp, name)
    assert fn.__doc__ and ">>>" in fn.__doc__ and name in lp.__all__


@SMALL
@given(shapes, st.lists(st.integers(1, 3), min_size=0, max_size=3), seeds)
def test_tile_over_shapes(shape: tuple[int, ...], reps: list[int], seed: int) -> None:
    x = normal(seed, shape)
    same(np.tile(Tensor(x), reps), np.tile(x, reps))
    check_grads(lambda t: lp.tile(t, reps), [x], order=1)


@SMALL
@given(one_axis(), st.integers(-5, 5), seeds)
def test_roll_flip_repeat_over_axes(sa: tuple[tuple[int, ...], int], shift: int, seed: int) -> None:
    shape, axis = sa
    x = normal(seed, shape)
    same(np.roll(Tensor(x), shift, axis), np.roll(x, shift, axis))
    same(np.flip(Tensor(x), axis), np.flip(x, axis))
    same(np.repeat(Tensor(x), 2, axis), np.repeat(x, 2, axis))
    same(np.moveaxis(Tensor(x), axis, 0), np.moveaxis(x, axis, 0))
    check_grads(lambda t: lp.roll(t, shift, axis) * np.arange(x.size).reshape(shape), [x], order=1)
    check_grads(lambda t: lp.repeat(t, 2, axis), [x], order=1)


@SMALL
@given(hnp.array_shapes(min_dims=2, max_dims=4, min_side=1, max_side=4), st.integers(-3, 3), seeds, st.data())
def test_diagonal_over_shapes(shape: tuple[int, ...], offset: int, seed: int, data: Any) -> None:
    nd = len(shape)
    a1 = data.draw(st.integers(-nd, nd - 1))
    a2 = data.draw(st.integers(-nd, nd - 1).filter(lambda a: a % nd != a1 % nd))
    x = normal(seed, shape)
    same(np.diagonal(Tensor(x), offset, a1, a2), np.diagonal(x, offset, a1, a2))
    same(np.trace(Tensor(x), offset, a1, a2), np.trace(x, offset, a1, a2))
    check_grads(lambda t: lp.diagonal(t, offset, a1, a2), [x], order=1)


def test_put_along_axis_is_a_pure_scatter() -> None:
    a = normal(0, (2, 4))
    idx = np.array([[0, 3], [2, 1]])
    vals = normal(1, (2, 2))
    want = a.copy()
    np.put_along_axis(want, idx, vals, axis=1)
    t = Tensor(a, requires_grad=True)
    same(lp.put_along_axis(t, idx, Tensor(vals), 1), want)
    assert value(t).tolist() == a.tolist()  # nothing the user holds is changed
    check_grads(lambda s, v: lp.put_along_axis(s, idx, v, 1), [a, vals], order=2)
    ga, gv = lp.grad(lambda s, v: (lp.put_along_axis(s, idx, v, 1) * 2.0).sum(), argnums=(0, 1))(a, vals)
    np.testing.assert_array_equal(ga, [[0, 2, 2, 0], [2, 0, 0, 2]])
    np.testing.assert_array_equal(gv, np.full((2, 2), 2.0))
    flat = a.copy()
    np.put_along_axis(flat, np.array([1, 6]), 0.0, axis=None)
    same(lp.put_along_axis(Tensor(a), np.array([1, 6]), 0.0, None), flat)
    with pytest.raises(ValueError, match="more than once"):
        lp.put_along_axis(Tensor(a), np.array([[0, 0], [1, 2]]), 1.0, 1)
    with pytest.raises(TypeError, match="lp.put_along_axis"):
        np.put_along_axis(t, idx, 0.0, axis=1)


def test_full_and_full_like_take_tensor_fill_values() -> None:
    c = np.array(2.5)
    assert lp.grad(lambda t: (lp.full((2, 3), t) * np.arange(6.0).reshape(2, 3)).sum())(c) == 15.0
    assert lp.grad(lambda t: lp.full_like(np.zeros((2, 2), np.float32), t).sum())(np.float32(1.0)).dtype == np.float32
    assert lp.grad(lambda t: np.full_like(Tensor(np.zeros(4)), t).sum())(c) == 4.0  # NumPy's own, on a Tensor
    assert lp.full_like(Tensor(np.zeros(3, np.float32)), Tensor(2.0)).dtype == np.float32
    same(lp.full(3, 7.0), np.full(3, 7.0))
    assert type(np.zeros_like(Tensor(np.ones(2), requires_grad=True))) is np.ndarray  # a constant, from the shape
    assert type(np.full_like(Tensor(np.ones(2), requires_grad=True), 3.0)) is np.ndarray
    with pytest.raises(TypeError, match=r"lp\.full\(shape, t\)"):
        lp.grad(lambda t: np.full(3, t).sum())(c)
    with pytest.raises(TypeError, match=r"lp\.full"):
        lp.grad(lambda t: np.full(3, t, dtype=float).sum())(c)
    with pytest.raises(TypeError, match=r"lp\.full"):
        lp.grad(lambda t: np.full_like(np.zeros(3), t).sum())(c)


def test_float32_and_errors() -> None:
    x = normal(0, (2, 3, 4)).astype(np.float32)
    for f in (lambda t: lp.vstack([t, t]), lambda t: lp.tile(t, 2), lambda t: lp.roll(t, 1, 2),
              lambda t: lp.rot90(t), lambda t: lp.tril(t), lambda t: lp.diagonal(t), lambda t: lp.flip(t),
              lambda t: lp.take_along_axis(t, np.argsort(x, -1), -1), lambda t: lp.diag(t[0, 0])):
        assert f(Tensor(x)).dtype == np.float32
        assert lp.grad(lambda t, f=f: f(t).sum())(x).dtype == np.float32
    with pytest.raises(ValueError, match="1-D or 2-D"):
        lp.diag(Tensor(x))
    with pytest.raises(ValueError, match="at least two axes"):
        lp.tril(Tensor([1.0]))
    with pytest.raises(TypeError, match="tuples"):
        lp.block(([Tensor([1.0])],))
    with pytest.raises(TypeError, match="integers"):
        lp.take_along_axis(Tensor([1.0]), np.array([0.5]), 0)


def test_array_methods() -> None:
    x = normal(0, (3, 3))
    t = Tensor(x, requires_grad=True)
    for got, want in ((t.prod(axis=0), x.prod(axis=0)), (t.cumsum(1), x.cumsum(1)), (t.cumprod(), x.cumprod()),
                      (t.round(1), x.round(1)), (t.dot(x), x.dot(x)), (t.trace(1), x.trace(1)),
                      (t.diagonal(-1), x.diagonal(-1)), (t.repeat(2, axis=0), x.repeat(2, axis=0))):
        assert got.requires_grad
        np.testing.assert_allclose(got.detach().numpy(), want, rtol=1e-13)
    check_grads(lambda s: s.prod(axis=1) + s.dot(x).trace() + s.cumprod(0)[-1], [x], order=2)


# NumPy's join functions given one array rather than a list take its rows (x[0], x[1], ...)
JOINS = ["vstack", "hstack", "column_stack", "dstack", "stack", "concatenate"]
JOINS += ["row_stack"] if hasattr(np, "row_stack") else []  # (gone from the newest NumPy)


@pytest.mark.filterwarnings("ignore:`row_stack` alias is deprecated:DeprecationWarning")
@pytest.mark.parametrize("name", JOINS)
@pytest.mark.parametrize("ndim", [1, 2, 3])
def test_joins_given_one_array_take_its_rows(name: str, ndim: int) -> None:
    x = normal(7, (3, 4, 2)[:ndim])
    fn = getattr(np, name)
    if name == "concatenate" and ndim == 1:  # rows of 0 axes: NumPy refuses, and so does LeanPass
        with pytest.raises(ValueError):
            fn(x)
        with pytest.raises(ValueError):
            fn(Tensor(x))
        return
    want = fn(x)
    same(fn(Tensor(x, requires_grad=True)), want)
    same(getattr(lp, name)(x), want)
    same(getattr(lp, name)(Tensor(x)), want)
    check_grads(fn, [x], order=2)
    same(lp.jit(fn)(Tensor(x)), want)


@pytest.mark.parametrize("name", [n for n in JOINS if n != "row_stack"])
def test_joins_refuse_what_numpy_refuses(name: str) -> None:
    with pytest.raises(TypeError, match="0-d"):
        getattr(np, name)(Tensor(1.0))
    if name in ("vstack", "hstack", "column_stack", "dstack"):
        with pytest.raises(TypeError, match="sequence"):
            getattr(lp, name)(iter([Tensor([1.0])]))
