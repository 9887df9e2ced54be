"""NumPy's products: dot for every number of axes, vdot, inner, outer, tensordot, kron, cross, and
einsum in every form NumPy accepts (sublists, ..., repeated letters) with its cached contraction
path; values equal to NumPy's, gradients to second order against finite differences."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ops_helpers import SMALL, normal, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass.functional import shapes as F_shapes
from leanpass.testing import check_grads

SHAPES = {0: (), 1: (3,), 2: (2, 3), 3: (4, 2, 3)}


def dot_shapes(na: int, nb: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Shapes with ``na`` and ``nb`` axes that np.dot accepts."""
    a = SHAPES[na]
    if na == 0 or nb == 0:
        return a, SHAPES[nb]
    b = {1: (3,), 2: (3, 2), 3: (2, 3, 4)}[nb]
    return a, b


@pytest.mark.parametrize("na", range(4))
@pytest.mark.parametrize("nb", range(4))
def test_dot_every_dimensionality(na: int, nb: int) -> None:
    sa, sb = dot_shapes(na, nb)
    a, b = normal(na, sa), normal(nb + 5, sb)
    np.testing.assert_allclose(value(np.dot(Tensor(a), Tensor(b))), np.dot(a, b), rtol=1e-13)
    np.testing.assert_allclose(value(lp.dot(a, Tensor(b))), np.dot(a, b), rtol=1e-13)
    check_grads(lp.dot, [a, b], order=2)


@pytest.mark.parametrize("na", range(4))
@pytest.mark.parametrize("nb", range(4))
def test_inner_and_outer(na: int, nb: int) -> None:
    a = normal(na, SHAPES[na])
    b = normal(nb + 9, SHAPES[nb] if na == 0 or nb == 0 else {1: (3,), 2: (4, 3), 3: (2, 1, 3)}[nb])
    np.testing.assert_allclose(value(np.inner(Tensor(a), b)), np.inner(a, b), rtol=1e-13)
    np.testing.assert_allclose(value(np.outer(Tensor(a), b)), np.outer(a, b), rtol=1e-13)
    check_grads(lp.inner, [a, b], order=2)
    check_grads(lp.outer, [a, b], order=2)


def test_vdot_tensordot_kron() -> None:
    a, b = normal(0, (2, 3)), normal(1, (3, 2))
    np.testing.assert_allclose(value(np.vdot(Tensor(a), Tensor(b))), np.vdot(a, b))
    check_grads(lp.vdot, [a, b], order=2)
    x = normal(2, (2, 3, 4))
    for shape, axes in (((3, 4, 5), 2), ((4, 5), 1), ((2,), 0), ((3, 4, 5), ([1, 2], [0, 1])), ((5, 4), ([2], [1])),
                        ((3,), (1, 0)), ((4, 3), ([-1, 1], [0, 1]))):
        y = normal(4, shape)
        np.testing.assert_allclose(value(np.tensordot(Tensor(x), y, axes)), np.tensordot(x, y, axes), rtol=1e-13)
        check_grads(lambda s, t, axes=axes: lp.tensordot(s, t, axes), [x, y], order=2)
    for sa, sb in (((2,), (3,)), ((2, 2), (3, 1)), ((2, 3), (2,)), ((2,), (2, 2, 2)), ((), (2,))):
        p, q = normal(5, sa), normal(6, sb)
        np.testing.assert_allclose(value(np.kron(Tensor(p), q)), np.kron(p, q), rtol=1e-13)
        check_grads(lp.kron, [p, q], order=2)
    with pytest.raises(ValueError, match="shape mismatch"):
        lp.tensordot(Tensor(x), Tensor(normal(5, (3, 4))), ([0], [0]))


def cross_reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The cross product written out (NumPy warns about 2-vectors, so no np.cross for those)."""
    a3 = np.concatenate([a, np.zeros(a.shape[:-1] + (1,))], -1) if a.shape[-1] == 2 else a
    b3 = np.concatenate([b, np.zeros(b.shape[:-1] + (1,))], -1) if b.shape[-1] == 2 else b
    c = np.stack([a3[..., 1] * b3[..., 2] - a3[..., 2] * b3[..., 1], a3[..., 2] * b3[..., 0] - a3[..., 0] * b3[..., 2],
                  a3[..., 0] * b3[..., 1] - a3[..., 1] * b3[..., 0]], -1)
    return c[..., 2] if a.shape[-1] == 2 and b.shape[-1] == 2 else c


@pytest.mark.parametrize(("sa", "sb"), [((3,), (3,)), ((4, 3), (3,)), ((2, 1, 3), (4, 3)), ((2,), (3,)),
                                        ((3,), (5, 2)), ((4, 2), (4, 2))])
def test_cross(sa: tuple[int, ...], sb: tuple[int, ...]) -> None:
    a, b = normal(7, sa), normal(8, sb)
    np.testing.assert_allclose(value(lp.cross(Tensor(a), Tensor(b))), cross_reference(a, b), rtol=1e-13)
    if sa[-1] == 3 and sb[-1] == 3:
        np.testing.assert_allclose(value(np.cross(Tensor(a), b)), np.cross(a, b), rtol=1e-13)
    check_grads(lp.cross, [a, b], order=2)


def test_cross_axes() -> None:
    a, b = normal(1, (3, 4)), normal(2, (4, 3))
    want = np.cross(a, b, axisa=0, axisb=1, axisc=0)
    np.testing.assert_allclose(value(np.cross(Tensor(a), Tensor(b), axisa=0, axisb=1, axisc=0)), want)
    c, d = normal(3, (3, 2)), normal(4, (3, 2))
    np.testing.assert_allclose(value(lp.cross(Tensor(c), Tensor(d), axis=0)), np.cross(c, d, axis=0))
    check_grads(lambda s, t: lp.cross(s, t, axisa=0, axisb=1, axisc=0), [a, b], order=2)
    with pytest.raises(ValueError, match="dimension must be 2 or 3"):
        lp.cross(Tensor(np.ones(4)), Tensor(np.ones(4)))


# ----- einsum: the sublist form, diagonals, and the contraction path ------------------------------------
SUBLISTS: list[tuple[str, Any, list[tuple[int, ...]]]] = [
    ("transpose", lambda x: (x[0], [0, 1], [1, 0]), [(2, 3)]),
    ("matmul", lambda x: (x[0], [0, 1], x[1], [1, 2], [0, 2]), [(2, 3), (3, 4)]),
    ("implicit output", lambda x: (x[0], [0, 1], x[1], [2, 1]), [(2, 3), (4, 3)]),
    ("trace", lambda x: (x[0], [0, 0]), [(3, 3)]),
    ("ellipsis", lambda x: (x[0], [Ellipsis, 0, 1], x[1], [1, 2], [Ellipsis, 0, 2]), [(5, 2, 3), (3, 4)]),
]


@pytest.mark.parametrize(("name", "build", "shapes"), SUBLISTS, ids=[n for n, _, _ in SUBLISTS])
def test_einsum_sublist_form(name: str, build: Any, shapes: list[tuple[int, ...]]) -> None:
    xs = [normal(i, s) for i, s in enumerate(shapes)]
    got = np.einsum(*build([Tensor(x, requires_grad=True) for x in xs]))
    assert got._op == "einsum"
    np.testing.assert_allclose(value(got), np.einsum(*build(xs)), rtol=1e-13)
    check_grads(lambda *ts: lp.einsum(*build(ts)), xs, order=2)


DIAGONALS = [("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("iij->ij", [(2, 2, 3)]), ("iji->j", [(2, 3, 2)]),
             ("ii,i->i", [(3, 3), (3,)]), ("iij,jk->ik", [(3, 3, 2), (2, 4)]), ("...ii->...i", [(2, 3, 3)]),
             ("iii->", [(2, 2, 2)]), ("ij,ii->j", [(3, 2), (3, 3)])]


@pytest.mark.parametrize(("subscripts", "shapes"), DIAGONALS, ids=[s for s, _ in DIAGONALS])
def test_einsum_repeated_letters_take_diagonals(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [normal(i, s) for i, s in enumerate(shapes)]
    np.testing.assert_allclose(value(lp.einsum(subscripts, *map(Tensor, xs))), np.einsum(subscripts, *xs), rtol=1e-13)
    check_grads(lambda *ts: lp.einsum(subscripts, *ts), xs, order=2)


@SMALL
@given(st.integers(1, 4), st.integers(1, 3), seeds)
def test_einsum_trace_gradient_is_the_identity(n: int, batch: int, seed: int) -> None:
    x = normal(seed, (batch, n, n))
    g = lp.grad(lambda t: lp.einsum("bii->", t))(x)
    np.testing.assert_array_equal(g, np.broadcast_to(np.eye(n), (batch, n, n)))


def test_einsum_large_contractions_use_a_cached_path() -> None:
    q, k = normal(0, (2, 2, 32, 16)), normal(1, (2, 2, 32, 16))
    F_shapes._PATHS.clear()
    out = lp.einsum("bhqd,bhkd->bhqk", Tensor(q, requires_grad=True), Tensor(k))
    np.testing.assert_allclose(value(out), np.einsum("bhqd,bhkd->bhqk", q, k, optimize=True), rtol=1e-13)
    key = ("bhqd,bhkd->bhqk", ((2, 2, 32, 16), (2, 2, 32, 16)))
    assert F_shapes._PATHS[key][0] == "einsum_path"  # a path from np.einsum_path, kept for the next call
    small = ("ij,jk->ik", ((2, 3), (3, 4)))
    lp.einsum("ij,jk->ik", Tensor(np.ones((2, 3))), Tensor(np.ones((3, 4))))
    assert F_shapes._PATHS[small] is False  # small ones take NumPy's plain einsum (a path costs more)
    check_grads(lambda a, b: lp.einsum("bhqd,bhkd->bhqk", a, b), [q[:1, :1, :4], k[:1, :1, :5]], order=2)
    x, y, z = normal(2, (8, 30)), normal(3, (30, 40)), normal(4, (40, 6))
    np.testing.assert_allclose(value(lp.einsum("ij,jk,kl->il", x, y, Tensor(z))), x @ y @ z, rtol=1e-12)


def test_float32_stays_float32() -> None:
    a, b = normal(0, (2, 3, 4)).astype(np.float32), normal(1, (4, 3)).astype(np.float32)
    v = normal(2, (3,)).astype(np.float32)
    for f, args in ((lp.dot, (a, b)), (lp.tensordot, (a, b.T)), (lp.inner, (a, b.T)), (lp.outer, (v, v)),
                    (lp.kron, (b, v)), (lp.cross, (v, v[::-1] + 1)), (lp.vdot, (v, v)),
                    (lambda x: lp.einsum("iij->j", x), (normal(3, (3, 3, 2)).astype(np.float32),))):
        assert f(*map(Tensor, args)).dtype == np.float32
        grads = lp.grad(lambda *ts, f=f: lp.sum(f(*ts)), argnums=tuple(range(len(args))))(*args)
        assert all(g.dtype == np.float32 for g in grads)
