"""Scaled dot-product attention (``lp.scaled_dot_product_attention``): values against a plain NumPy
``softmax(q kᵀ · scale + mask) v``, gradients by finite differences to second order, PyTorch's
semantics at the edges (fully masked rows, causal with L != S, errors), and what the op keeps."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, SMALL, normal, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

sdpa = lp.scaled_dot_product_attention


def reference(q: Any, k: Any, v: Any, mask: Any = None, is_causal: bool = False, scale: Any = None,
              keep: Any = None) -> np.ndarray:
    """The textbook formula, query-major, in float64; a row with every key masked out gives 0 (as PyTorch)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    scale = 1 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ np.swapaxes(k, -1, -2) * scale
    if is_causal:
        mask = np.tril(np.ones((q.shape[-2], k.shape[-2]), bool))
    if mask is not None:
        mask = np.asarray(mask)
        s = s + (np.where(mask, 0.0, -np.inf) if mask.dtype == bool else mask)
    top = s.max(axis=-1, keepdims=True)
    e = np.exp(s - np.where(np.isneginf(top), 0.0, top))
    total = e.sum(axis=-1, keepdims=True)
    p = e / np.where(total == 0, 1.0, total)
    return (p if keep is None else p * keep) @ v


def test_hand_values() -> None:
    # one query, two keys: weights softmax([0, 1] * 0.5) = [1, e^0.5] / (1 + e^0.5)
    q, k, v = np.array([[1.0, 1.0]]), np.array([[0.0, 0.0], [1.0, 0.0]]), np.array([[2.0], [4.0]])
    w = math.exp(0.5) / (1 + math.exp(0.5))
    np.testing.assert_allclose(value(sdpa(q, k, v, scale=0.5)), [[2 * (1 - w) + 4 * w]], rtol=1e-15)
    # causal: the first query sees the first key only, the second both (default scale 1/sqrt(2))
    q = k = np.eye(2)
    v = np.array([[1.0], [3.0]])
    w = math.exp(1 / math.sqrt(2)) / (1 + math.exp(1 / math.sqrt(2)))
    np.testing.assert_allclose(value(sdpa(q, k, v, is_causal=True)), [[1.0], [1 - w + 3 * w]], rtol=1e-15)


@st.composite
def problems(draw: Any) -> tuple[Any, ...]:
    """Shapes (..., L, E), (..., S, E), (..., S, Ev) whose batch axes broadcast, and a mask kind."""
    batch = draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=2, max_side=3)).input_shapes
    n, s, e, ev = (draw(st.integers(1, 4)) for _ in range(4))
    mask = draw(st.sampled_from(["none", "causal", "bool", "float"]))
    mask_batch = draw(st.sampled_from([(), (1,), batch[0][-1:]]))
    return (*batch[0], n, e), (*batch[1], s, e), (*batch[2], s, ev), mask, (*mask_batch, n, s)


def _mask(kind: str, shape: tuple[int, ...], seed: int) -> Any:
    rng = np.random.default_rng(seed + 1)
    if kind == "bool":
        return rng.random(shape) > 0.4
    return rng.standard_normal(shape) if kind == "float" else None


@FAST
@given(problems(), seeds, st.sampled_from([None, 0.3]))
def test_values_match_the_formula(problem: tuple[Any, ...], seed: int, scale: Any) -> None:
    qs, ks, vs, kind, ms = problem
    q, k, v = normal(seed, qs), normal(seed + 2, ks), normal(seed + 3, vs)
    mask = _mask(kind, ms, seed)
    y = sdpa(q, k, v, mask, is_causal=kind == "causal", scale=scale)
    np.testing.assert_allclose(value(y), reference(q, k, v, mask, kind == "causal", scale), rtol=1e-12, atol=1e-13)


@SMALL
@given(problems(), seeds)
def test_gradients_to_second_order(problem: tuple[Any, ...], seed: int) -> None:
    qs, ks, vs, kind, ms = problem
    args = [normal(seed, qs), normal(seed + 2, ks), normal(seed + 3, vs)]
    mask = _mask(kind, ms, seed)
    causal = kind == "causal"
    if kind == "float":  # a float mask is differentiated too
        check_grads(lambda a, b, c, m: sdpa(a, b, c, m), [*args, mask], order=2)
    else:
        check_grads(lambda a, b, c: sdpa(a, b, c, mask, is_causal=causal), args, order=2)


def test_gradients_float32_follow_float64() -> None:
    rng = np.random.default_rng(0)
    q, k, v = (rng.standard_normal((2, 3, 5, 4)) for _ in range(3))
    f = lp.grad(lambda a, b, c: (sdpa(a, b, c, is_causal=True) ** 2).sum(), argnums=(0, 1, 2))
    g64 = f(q, k, v)
    g32 = f(*(a.astype(np.float32) for a in (q, k, v)))
    for a, b in zip(g32, g64):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_causal_is_the_lower_triangle_aligned_top_left() -> None:
    rng = np.random.default_rng(1)
    for n, s in ((3, 5), (5, 3), (4, 4)):
        q, k, v = rng.standard_normal((n, 2)), rng.standard_normal((s, 2)), rng.standard_normal((s, 3))
        tril = np.tril(np.ones((n, s), bool))
        np.testing.assert_allclose(value(sdpa(q, k, v, is_causal=True)), value(sdpa(q, k, v, tril)), rtol=1e-15)
        np.testing.assert_allclose(value(sdpa(q, k, v, is_causal=True)), reference(q, k, v, tril), rtol=1e-13)


def test_boolean_and_additive_masks_agree() -> None:
    rng = np.random.default_rng(2)
    q, k, v = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 6, 3)), rng.standard_normal((2, 6, 2))
    keep = rng.random((4, 6)) > 0.5
    keep[:, 0] = True
    additive = np.where(keep, 0.0, -np.inf)
    np.testing.assert_array_equal(value(sdpa(q, k, v, keep)), value(sdpa(q, k, v, additive)))
    np.testing.assert_array_equal(value(sdpa(q, k, v, attn_mask=keep)), value(sdpa(q, k, v, keep)))


def test_a_query_with_every_key_masked_out_gives_zeros_not_nan() -> None:
    rng = np.random.default_rng(3)
    q, k, v = rng.standard_normal((3, 2)), rng.standard_normal((4, 2)), rng.standard_normal((4, 2))
    mask = np.ones((3, 4), bool)
    mask[1] = False
    grads = lp.grad(lambda a, b, c: (sdpa(a, b, c, mask) ** 2).sum(), argnums=(0, 1, 2))(q, k, v)
    y = value(sdpa(q, k, v, mask))
    np.testing.assert_array_equal(y[1], 0.0)
    np.testing.assert_allclose(y, reference(q, k, v, mask), rtol=1e-13)
    assert all(np.isfinite(g).all() for g in grads)
    np.testing.assert_array_equal(grads[0][1], 0.0)  # the masked-out query has no gradient
    additive = np.where(mask, 0.0, -np.inf)  # the same with -inf in a float mask, gradient included
    gm = lp.grad(lambda m: sdpa(q, k, v, m).sum())(additive)
    assert np.isfinite(gm).all() and (gm[1] == 0).all()
    check_grads(lambda a, b, c: sdpa(a, b, c, mask), [q, k, v], order=2)


def test_jvp_is_the_vjp_transposed() -> None:
    rng = np.random.default_rng(4)
    args = [rng.standard_normal(s) for s in ((2, 3, 4), (2, 5, 4), (2, 5, 2), (3, 5))]
    ts = [rng.standard_normal(np.shape(a)) for a in args]
    u = rng.standard_normal((2, 3, 2))
    f = lambda a, b, c, m: sdpa(a, b, c, m)  # noqa: E731
    _, tangent = lp.jvp(f, tuple(args), tuple(ts))
    _, pull = lp.vjp(f, *args)
    lhs = float(np.sum(u * value(tangent)))
    rhs = sum(float(np.sum(g * t)) for g, t in zip(pull(u), ts))
    assert math.isclose(lhs, rhs, rel_tol=1e-12)


def test_vmap_is_the_op_stacked_and_jit_is_eager_bit_for_bit() -> None:
    rng = np.random.default_rng(5)
    q, k, v = rng.standard_normal((3, 4, 2)), rng.standard_normal((3, 5, 2)), rng.standard_normal((3, 5, 3))
    f = lambda a, b, c: sdpa(a, b, c, is_causal=True)  # noqa: E731
    stacked = np.stack([value(f(q[i], k[i], v[i])) for i in range(3)])
    np.testing.assert_allclose(value(lp.vmap(f)(q, k, v)), stacked, rtol=1e-14)
    loss = lp.grad(lambda a, b, c: (f(a, b, c) ** 2).sum(), argnums=(0, 1, 2))
    for a, b in zip(lp.jit(loss)(q, k, v), loss(q, k, v)):
        np.testing.assert_array_equal(a, b)


def test_dropout_needs_a_generator_and_draws_from_it() -> None:
    rng = np.random.default_rng(6)
    q, k, v = rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 3)), rng.standard_normal((2, 4, 2))
    with pytest.raises(TypeError, match="needs rng="):
        sdpa(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match=r"dropout_p must be in \[0, 1\)"):
        sdpa(q, k, v, dropout_p=1.0, rng=np.random.default_rng(0))
    a = value(sdpa(q, k, v, dropout_p=0.5, rng=np.random.default_rng(7)))
    b = value(sdpa(q, k, v, dropout_p=0.5, rng=np.random.default_rng(7)))
    np.testing.assert_array_equal(a, b)
    # the mask it drew: the same generator's numbers, weights kept with probability 1 - p and scaled up
    keep = (np.random.default_rng(7).random((2, 4, 4)) >= 0.5) / 0.5
    np.testing.assert_allclose(a, reference(q, k, v, keep=keep), rtol=1e-13)
    np.testing.assert_array_equal(value(sdpa(q, k, v, dropout_p=0.0)), value(sdpa(q, k, v)))
    check_grads(lambda x, y, z: sdpa(x, y, z, dropout_p=0.5, rng=np.random.default_rng(7)), [q, k, v], order=2)


def test_errors_name_the_problem() -> None:
    q = np.ones((2, 3, 4))
    with pytest.raises(ValueError, match="either a mask or is_causal"):
        sdpa(q, q, q, np.ones((3, 3), bool), is_causal=True)
    with pytest.raises(ValueError, match="same last axis"):
        sdpa(q, np.ones((2, 3, 5)), q)
    with pytest.raises(ValueError, match="same number of keys"):
        sdpa(q, q, np.ones((2, 4, 4)))
    with pytest.raises(ValueError, match="at least two axes"):
        sdpa(np.ones(4), np.ones(4), np.ones(4))
    with pytest.raises(ValueError, match="does not broadcast"):
        sdpa(q, q, q, np.ones((2, 3), bool))
    with pytest.raises(TypeError, match="boolean array"):
        sdpa(q, q, q, np.ones((3, 3), int))
    with pytest.raises(TypeError, match="True or False"):
        sdpa(q, q, q, is_causal="yes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="once"):
        sdpa(q, q, q, np.ones((3, 3), bool), attn_mask=np.ones((3, 3), bool))


def test_float32_stays_float32_with_a_float64_mask() -> None:
    q = np.ones((3, 2), np.float32)
    y = sdpa(q, q, q, np.zeros((3, 3)))
    assert y.dtype == np.float32


def test_the_backward_keeps_the_inputs_and_one_array_of_weights() -> None:
    rng = np.random.default_rng(8)
    q, k, v = rng.standard_normal((2, 5, 3)), rng.standard_normal((2, 7, 3)), rng.standard_normal((2, 7, 4))
    ans, vjp = F.scaled_dot_product_attention(q, k, v, None, True)
    kept = list({id(c.cell_contents): c.cell_contents for c in vjp.__closure__ or ()
                 if isinstance(c.cell_contents, np.ndarray)}.values())
    weights = [a for a in kept if a.shape == (2, 7, 5)]  # keys-major (..., S, L)
    assert len(weights) == 1
    assert sorted(a.shape for a in kept if a is not weights[0]) == sorted([q.shape, k.shape, v.shape, ans.shape])
    np.testing.assert_allclose(np.swapaxes(weights[0], -1, -2).sum(axis=-1), 1.0)


def test_nothing_the_user_holds_is_changed() -> None:
    rng = np.random.default_rng(9)
    q, k, v, m = rng.standard_normal((4, 3)), rng.standard_normal((5, 3)), rng.standard_normal((5, 2)), \
        rng.standard_normal((4, 5))
    copies = [a.copy() for a in (q, k, v, m)]
    lp.grad(lambda a, b, c, d: sdpa(a, b, c, d).sum(), argnums=(0, 1, 2, 3))(q, k, v, m)
    for a, b in zip((q, k, v, m), copies):
        np.testing.assert_array_equal(a, b)


def test_reachable_from_nn_and_on_tensors() -> None:
    assert lp.nn.scaled_dot_product_attention is sdpa
    q = Tensor(np.ones((2, 3)), requires_grad=True)
    sdpa(q, q, q).sum().backward()
    assert q.grad is not None and q.grad.shape == (2, 3)


# ----- nn.CausalSelfAttention ------------------------------------------------------------------------
def nanogpt_attention(x: np.ndarray, wa: np.ndarray, ba: Any, wp: np.ndarray, bp: Any, n_head: int) -> np.ndarray:
    """nanoGPT's CausalSelfAttention.forward in NumPy, with LeanPass's (in, out) weights."""
    b, t, c = x.shape
    qkv = x @ wa + (0 if ba is None else ba)
    q, k, v = (qkv[..., i * c:(i + 1) * c].reshape(b, t, n_head, c // n_head).transpose(0, 2, 1, 3)
               for i in range(3))
    y = reference(q, k, v, is_causal=True).transpose(0, 2, 1, 3).reshape(b, t, c)
    return y @ wp + (0 if bp is None else bp)


def _weights(attn: Any) -> list[Any]:
    return [None if a is None else value(a) for a in (attn.c_attn.weight, attn.c_attn.bias, attn.c_proj.weight,
                                                      attn.c_proj.bias)]


@pytest.mark.parametrize("bias", [True, False])
def test_module_is_nanogpts_attention(bias: bool) -> None:
    attn = lp.nn.CausalSelfAttention(12, 3, bias=bias, rng=0, dtype=np.float64)
    if bias:  # (non-zero biases, so that the test sees where they go)
        rng = np.random.default_rng(1)
        attn = attn.replace(c_attn=attn.c_attn.replace(bias=Tensor(rng.standard_normal(36))),
                            c_proj=attn.c_proj.replace(bias=Tensor(rng.standard_normal(12))))
    x = np.random.default_rng(2).standard_normal((2, 5, 12))
    np.testing.assert_allclose(value(attn(x)), nanogpt_attention(x, *_weights(attn), 3), rtol=1e-12, atol=1e-13)
    assert attn.num_params == 4 * 12 * 12 + (4 * 12 if bias else 0)
    assert len(lp.tree_flatten(attn)[0]) == (4 if bias else 2)
    assert repr(attn) == f"CausalSelfAttention(n_embd=12, n_head=3{'' if bias else ', bias=False'}, dtype=float64)"


def test_module_gradients_to_second_order_and_causality() -> None:
    attn = lp.nn.CausalSelfAttention(4, 2, rng=3, dtype=np.float64)
    x = np.random.default_rng(4).standard_normal((2, 3, 4))

    def f(xs: Any, wa: Any, ba: Any, wp: Any, bp: Any) -> Any:
        m = attn.replace(c_attn=attn.c_attn.replace(weight=wa, bias=ba), c_proj=attn.c_proj.replace(weight=wp,
                                                                                                   bias=bp))
        return m(xs)

    check_grads(f, [x, *_weights(attn)], order=2)
    # position 1's output does not depend on position 2's input
    gx = lp.grad(lambda xs: attn(xs)[:, 1].sum())(x)
    np.testing.assert_array_equal(gx[:, 2], 0.0)
    assert np.abs(gx[:, :2]).min() > 0


def test_module_under_jit_and_on_one_sequence() -> None:
    attn = lp.nn.CausalSelfAttention(8, 4, rng=5)
    x = np.random.default_rng(6).standard_normal((3, 6, 8)).astype(np.float32)
    loss = lp.grad(lambda m, xs: (m(xs) ** 2).mean())
    for a, b in zip(lp.tree_flatten(lp.jit(loss)(attn, x))[0], lp.tree_flatten(loss(attn, x))[0]):
        np.testing.assert_array_equal(value(a), value(b))
    y = attn(x)
    assert y.dtype == np.float32
    # (T, C): no batch axis. float32 rounding only: the linears run all rows as one 2-D product, whose
    # sums BLAS may split differently for 6 rows than for 18
    np.testing.assert_allclose(value(attn(x[1])), value(y)[1], rtol=1e-5, atol=1e-6)


def test_module_dropout_is_on_with_a_generator_only() -> None:
    attn = lp.nn.CausalSelfAttention(8, 2, dropout=0.5, rng=7)
    x = np.random.default_rng(8).standard_normal((2, 5, 8))
    np.testing.assert_array_equal(value(attn(x)), value(attn(x)))  # evaluation: deterministic, no dropout
    a = value(attn(x, rng=np.random.default_rng(9)))
    np.testing.assert_array_equal(a, value(attn(x, rng=np.random.default_rng(9))))
    assert not np.allclose(a, value(attn(x)))
    assert (a == 0).mean() > 0.2  # the output's dropout zeroes about half the entries


def test_module_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="multiple of n_head"):
        lp.nn.CausalSelfAttention(10, 3, rng=0)
    with pytest.raises(ValueError, match="dropout must be in"):
        lp.nn.CausalSelfAttention(8, 2, dropout=1.0, rng=0)
    with pytest.raises(ValueError, match=r"\(\.\.\., T, 8\)"):
        lp.nn.CausalSelfAttention(8, 2, rng=0)(np.ones((2, 3, 6)))


def test_module_saves_and_loads(tmp_path: Any) -> None:
    attn = lp.nn.CausalSelfAttention(8, 2, dropout=0.1, rng=0)
    lp.save(tmp_path / "attn.lp", attn)
    back = lp.load(tmp_path / "attn.lp")
    assert repr(back) == repr(attn) and back.dropout == 0.1
    x = np.ones((1, 3, 8))
    np.testing.assert_array_equal(value(back(x)), value(attn(x)))


def test_no_keys_no_queries_and_no_features() -> None:
    # no keys: no weights, an output of 0 (as a query with every key masked out); no features: every score
    # is 0, so the weights are uniform; no queries: an empty output
    np.testing.assert_array_equal(value(sdpa(np.ones((2, 4)), np.ones((0, 4)), np.ones((0, 3)))), np.zeros((2, 3)))
    v = np.array([[1.0], [2.0], [6.0]])
    np.testing.assert_allclose(value(sdpa(np.ones((2, 0)), np.ones((3, 0)), v)), [[3.0], [3.0]])
    assert value(sdpa(np.ones((0, 4)), np.ones((3, 4)), v)).shape == (0, 1)
    g = lp.grad(lambda q: sdpa(q, np.ones((0, 4)), np.ones((0, 2))).sum())(np.ones((2, 4)))
    np.testing.assert_array_equal(g, 0.0)
