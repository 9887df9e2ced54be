"""lp.layer_norm (one op keeping each row's mean and 1/σ) and nn.LayerNorm on it (with bias=False)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import functional as F
from leanpass import nn
from leanpass.testing import check_grads


def ref_layer_norm(x: np.ndarray, shape: tuple[int, ...], w: Any = None, b: Any = None,
                   eps: float = 1e-5) -> np.ndarray:
    axes = tuple(range(x.ndim - len(shape), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    y = (x - mean) / np.sqrt(((x - mean) ** 2).mean(axis=axes, keepdims=True) + eps)
    return y * (1 if w is None else w) + (0 if b is None else b)


def test_values_by_hand_and_against_the_reference() -> None:
    y = lp.layer_norm(lp.Tensor([[1.0, 2.0, 3.0], [2.0, 2.0, 5.0]]), 3, eps=0.0)
    want = [[-np.sqrt(1.5), 0.0, np.sqrt(1.5)], [-np.sqrt(0.5), -np.sqrt(0.5), np.sqrt(2)]]
    np.testing.assert_allclose(y._data, want, rtol=1e-15)
    np.testing.assert_array_equal(lp.layer_norm(np.full((1, 3), 2.0), 3)._data, np.zeros((1, 3)))
    rng = np.random.default_rng(0)
    x, w, b = rng.standard_normal((2, 3, 4, 5)), rng.standard_normal((4, 5)), rng.standard_normal((4, 5))
    np.testing.assert_allclose(lp.layer_norm(x, (4, 5), w, b, eps=1e-3)._data,
                               ref_layer_norm(x, (4, 5), w, b, 1e-3), rtol=1e-13, atol=1e-14)
    assert lp.layer_norm(lp.Tensor(x, requires_grad=True), (4, 5), w, b).op == "layer_norm"


@pytest.mark.parametrize("affine", [(True, True), (True, False), (False, False)])
def test_gradients_first_and_second_order(affine: tuple[bool, bool]) -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4))
    w, b = rng.standard_normal(4), rng.standard_normal(4)
    args = [x] + [p for p, on in zip((w, b), affine) if on]

    def f(x: Any, *params: Any) -> Any:
        return lp.layer_norm(x, 4, *params) * np.arange(1.0, 5.0)

    check_grads(f, args, order=2)
    check_grads(lambda x: lp.layer_norm(x, (2, 4)), [x], order=2)


def test_float32_gradients_against_finite_differences() -> None:
    rng = np.random.default_rng(2)
    x = rng.standard_normal((4, 6)).astype(np.float32)
    w, b = rng.standard_normal(6).astype(np.float32), rng.standard_normal(6).astype(np.float32)
    c = rng.standard_normal((4, 6)).astype(np.float32)

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (lp.layer_norm(x, 6, w, b) * c).sum()

    grads = lp.grad(loss, argnums=(0, 1, 2))(x, w, b)
    assert all(g.dtype == np.float32 for g in grads)
    x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
    want = lp.grad(loss, argnums=(0, 1, 2))(x64, w64, b64)
    for g, g64 in zip(grads, want):
        np.testing.assert_allclose(g, g64, rtol=1e-4, atol=1e-5)
    check_grads(loss, [x64, w64, b64], order=2)  # (the float64 reference against central differences)
    # grad of grad in float32 stays float32 and matches float64's
    hx = lp.grad(lambda x: lp.grad(loss)(x, w, b).sum())(x)
    assert hx.dtype == np.float32
    np.testing.assert_allclose(hx, lp.grad(lambda x: lp.grad(loss)(x, w64, b64).sum())(x64), rtol=1e-3, atol=1e-4)


def test_it_keeps_only_the_statistics() -> None:
    x = np.random.default_rng(3).standard_normal((5, 8))
    w = np.ones(8)
    _, vjp = F.layer_norm(x, w, None, (8,), 1e-5)
    kept = [a for a in vjp.args if isinstance(a, np.ndarray)]
    assert kept[0] is x and kept[1] is w
    assert [a.shape for a in kept[2:]] == [(5, 1), (5, 1)]  # each row's mean and 1/σ


def test_transforms_agree() -> None:
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((3, 4, 5)), rng.standard_normal(5), rng.standard_normal(5)

    def loss(x: Any, w: Any, b: Any) -> Any:
        return (lp.layer_norm(x, 5, w, b) ** 3).sum()

    g = lp.grad(loss, argnums=(0, 1, 2))(x, w, b)
    for a, c in zip(g, lp.jit(lp.grad(loss, argnums=(0, 1, 2)))(x, w, b)):
        np.testing.assert_array_equal(a, c)
    per_row = lp.vmap(lambda r: lp.layer_norm(r, 5, w, b))(x)
    np.testing.assert_allclose(per_row._data, lp.layer_norm(x, 5, w, b)._data, rtol=1e-15)
    tx, tw, tb = rng.standard_normal(x.shape), rng.standard_normal(5), rng.standard_normal(5)
    _, tangent = lp.jvp(lambda *a: lp.layer_norm(a[0], 5, a[1], a[2]), (x, w, b), (tx, tw, tb))
    jac_t = sum(float((gi * ti).sum()) for gi, ti in zip(
        lp.grad(lambda *a: (lp.layer_norm(a[0], 5, a[1], a[2]) * x).sum(), argnums=(0, 1, 2))(x, w, b),
        (tx, tw, tb)))
    assert float((tangent._data * x).sum()) == pytest.approx(jac_t, rel=1e-12)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=4), st.integers(1, 2), st.integers(0, 2**31 - 1))
def test_any_shape_and_number_of_normalised_axes(dims: list[int], k: int, seed: int) -> None:
    k = min(k, len(dims))
    shape, normalized = tuple(dims), tuple(dims[len(dims) - k:])
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal(shape) * 3, rng.standard_normal(normalized), rng.standard_normal(normalized)
    y = lp.layer_norm(x, normalized, w, b)
    np.testing.assert_allclose(y._data, ref_layer_norm(x, normalized, w, b), rtol=1e-12, atol=1e-12)
    c = rng.standard_normal(shape)
    gx = lp.grad(lambda t: (lp.layer_norm(t, normalized, w, b) * c).sum())(x)
    axes = tuple(range(len(shape) - k, len(shape)))

    def composed(t: Any) -> Any:  # the same normalisation from recorded ops
        centred = t - t.mean(axis=axes, keepdims=True)
        return ((centred / lp.sqrt(t.var(axis=axes, keepdims=True) + 1e-5) * w + b) * c).sum()

    np.testing.assert_allclose(gx, lp.grad(composed)(x), rtol=1e-9, atol=1e-10)


def test_clear_errors() -> None:
    x = np.ones((2, 3))
    with pytest.raises(ValueError, match=r"normalized_shape \(4,\) must be the last axes"):
        lp.layer_norm(x, 4)
    with pytest.raises(ValueError, match=r"weight must have the normalized shape \(3,\)"):
        lp.layer_norm(x, 3, np.ones(2))
    with pytest.raises(TypeError, match="normalized_shape must be an int or a tuple"):
        lp.layer_norm(x, "3")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"takes inputs of shape \(\.\.\., 3\)"):
        nn.LayerNorm(3)(np.ones((2, 4)))


def test_nn_layer_norm_uses_the_op_and_takes_bias_false() -> None:
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    ln = nn.LayerNorm(4, eps=1e-6)
    assert ln(lp.Tensor(x, requires_grad=True)).op == "layer_norm" and ln.bias is not None
    plain = nn.LayerNorm(4, bias=False, dtype=np.float64)
    assert plain.bias is None and plain.num_params == 4
    assert repr(plain) == "LayerNorm(4, eps=1e-05, bias=False, dtype=float64)"
    np.testing.assert_allclose(plain(x.astype(np.float64))._data, ref_layer_norm(x.astype(np.float64), (4,)),
                               rtol=1e-12)
    grads = lp.grad(lambda m: (m(x.astype(np.float64)) ** 2).sum())(plain)
    assert grads.bias is None and grads.weight.shape == (4,)
    loaded = lp.tree_unflatten(*reversed(lp.tree_flatten(plain)))
    assert loaded.bias is None
