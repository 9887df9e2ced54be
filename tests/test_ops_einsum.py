"""einsum: the subscripts users write for attention and bilinear layers, random contractions, and
the VJP being itself an einsum (so it differentiates again)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ops_helpers import FAST, SMALL, assert_cotangents_match, normal, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

NAMED = [
    ("bqd,bkd->bqk", [(2, 3, 4), (2, 5, 4)]),  # attention scores
    ("bqk,bkd->bqd", [(2, 3, 5), (2, 5, 4)]),  # attention-weighted values
    ("...ij,...jk->...ik", [(2, 3, 2, 4), (3, 4, 5)]),  # batched matmul, batch axes broadcast
    ("...ij,...jk->...ik", [(1, 2, 3), (4, 3, 2)]),  # a size-1 batch axis stretched
    ("...ij,...jk->...ik", [(2, 3), (3, 4)]),  # no batch axes at all
    ("bi,ij,bj->b", [(4, 3), (3, 2), (4, 2)]),  # bilinear form
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),  # multi-head scores
    ("ij->ji", [(2, 3)]),
    ("ij->", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]),  # outer product
    ("ij,j->i", [(2, 3), (3,)]),
    ("ij,ij->", [(2, 3), (2, 3)]),
    ("ij,jk", [(2, 3), (3, 4)]),  # implicit output, as NumPy
    ("ba,ca", [(2, 3), (4, 3)]),
    ("bi,->bi", [(2, 3), ()]),  # a scalar operand
    ("ijk->ki", [(2, 1, 3)]),  # a letter summed inside one input only
]


@pytest.mark.parametrize(("subscripts", "shapes"), NAMED, ids=[s for s, _ in NAMED])
def test_named_subscripts(subscripts: str, shapes: list[tuple[int, ...]]) -> None:
    xs = [normal(i, s) for i, s in enumerate(shapes)]
    y = lp.einsum(subscripts, *[Tensor(x, requires_grad=True) for x in xs])
    want = np.einsum(subscripts, *xs)
    assert y.shape == want.shape and y._op == "einsum"
    np.testing.assert_allclose(value(y), want, rtol=1e-12)
    check_grads(lambda *ts: lp.einsum(subscripts, *ts), xs, order=2)
    assert_cotangents_match(F.einsum, [subscripts, *xs], list(range(1, len(xs) + 1)))


@st.composite
def contractions(draw: Any) -> tuple[str, list[tuple[int, ...]]]:
    """Random two-operand contractions: letters with sizes, two inputs, an output."""
    letters = "abcde"[: draw(st.integers(1, 5))]
    size = {c: draw(st.integers(1, 3)) for c in letters}
    ins = []
    for _ in range(2):
        order = draw(st.permutations(letters))
        ins.append("".join(order[: draw(st.integers(0, len(order)))]))
    used = sorted(set("".join(ins)))
    out = "".join(draw(st.permutations(used))[: draw(st.integers(0, len(used)))])
    return f"{ins[0]},{ins[1]}->{out}", [tuple(size[c] for c in s) for s in ins]


@FAST
@given(contractions(), seeds)
def test_random_contractions_match_numpy_and_check_grads(spec: tuple[str, list[tuple[int, ...]]], seed: int) -> None:
    subscripts, shapes = spec
    xs = [normal(seed + i, s) for i, s in enumerate(shapes)]
    np.testing.assert_allclose(value(lp.einsum(subscripts, *map(Tensor, xs))), np.einsum(subscripts, *xs),
                               rtol=1e-12, atol=1e-12)
    check_grads(lambda *ts: lp.einsum(subscripts, *ts), xs, order=2)
    assert_cotangents_match(F.einsum, [subscripts, *xs], [1, 2])


@SMALL
@given(st.integers(1, 3), st.integers(1, 4), st.integers(1, 4), st.integers(1, 3), seeds)
def test_attention_block_gradients(b: int, q: int, k: int, d: int, seed: int) -> None:
    qs, ks, vs = normal(seed, (b, q, d)), normal(seed + 1, (b, k, d)), normal(seed + 2, (b, k, d))

    def attend(qq: Tensor, kk: Tensor, vv: Tensor) -> Tensor:
        weights = lp.softmax(lp.einsum("bqd,bkd->bqk", qq, kk) / np.sqrt(d), axis=-1)
        return lp.einsum("bqk,bkd->bqd", weights, vv)

    check_grads(attend, [qs, ks, vs], order=2)


def test_the_vjp_is_itself_an_einsum() -> None:
    x, y = Tensor(normal(0, (2, 3))), Tensor(normal(1, (3, 4)))
    _, vjp = F.einsum("ij,jk->ik", x, y)
    _, gx, gy = vjp(Tensor(np.ones((2, 4)), requires_grad=True))
    assert gx._op == "einsum" and gy._op == "einsum"
    np.testing.assert_allclose(value(gx), np.ones((2, 4)) @ value(y).T)


def test_bilinear_gradient_by_hand() -> None:
    x, w, z = normal(0, (4, 3)), normal(1, (3, 2)), normal(2, (4, 2))
    gx, gw, gz = lp.grad(lambda a, b, c: lp.einsum("bi,ij,bj->b", a, b, c).sum(), argnums=(0, 1, 2))(x, w, z)
    np.testing.assert_allclose(gx, z @ w.T)
    np.testing.assert_allclose(gw, x.T @ z)
    np.testing.assert_allclose(gz, x @ w)
    # the Hessian in w is 0 (linear), in (x, w) jointly it is not: check via hvp-like second order
    check_grads(lambda a, b: lp.einsum("bi,ij,bj->b", a, b, z) ** 2, [x, w], order=2)


def test_numpy_einsum_dispatches_and_float32() -> None:
    a32 = normal(0, (2, 3), np.float32)
    b32 = normal(1, (3, 4), np.float32)
    t = Tensor(a32, requires_grad=True)
    y = np.einsum("ij,jk->ik", t, b32)
    assert type(y) is Tensor and y._op == "einsum" and y.dtype == np.float32
    (y * y).sum().backward(create_graph=True)
    assert t.grad.dtype == np.float32
    assert_cotangents_match(F.einsum, ["ij,jk->ik", a32, b32], [1, 2])
    _, vjp = F.einsum("ij,jk->ik", Tensor(a32), Tensor(b32))
    assert all(c.dtype == np.float32 for c in vjp(Tensor(np.ones((2, 4), np.float32)))[1:])


def test_need_skips_unwanted_cotangents(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b = normal(0, (2, 3)), normal(1, (3, 4))
    _, vjp = F.einsum("ij,jk->ik", a, b, need=(False, False, True))
    cts = vjp(np.ones((2, 4)))
    assert cts[0] is None and cts[1] is None and cts[2].shape == (3, 4)
    # with einsum among the ops the Tensor layer passes need= to, gradients are unchanged
    monkeypatch.setattr(F, "TAKES_NEED", F.TAKES_NEED | {"einsum"})
    g = lp.grad(lambda t: (lp.einsum("ij,jk->ik", a, t) ** 2).sum())(b)
    np.testing.assert_allclose(g, 2 * a.T @ (a @ b))
    check_grads(lambda s, t: lp.einsum("ij,jk->ik", s, t) ** 2, [a, b], order=2)
    check_grads(lambda t: lp.einsum("bi,ij,bj->b", a, t, a @ b), [b], order=2)


def test_errors_are_clear() -> None:
    with pytest.raises(ValueError, match="must name each letter once"):
        lp.einsum("ij->ii", Tensor(np.ones((2, 2))))
    with pytest.raises(ValueError, match="only letters of the inputs"):
        lp.einsum("ij->k", Tensor(np.ones((2, 2))))
    with pytest.raises(ValueError, match="names 2 inputs but 1 were given"):
        lp.einsum("ij,jk->ik", Tensor(np.ones((2, 2))))
    with pytest.raises(ValueError, match="do not match an input with 3 axes"):
        lp.einsum("ij->i", Tensor(np.ones((2, 2, 2))))
