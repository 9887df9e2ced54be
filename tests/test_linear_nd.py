"""A layer on N-D input (``x @ w``, ``linear``, ``nn.Linear`` with ``x`` of shape (..., in)): one 2-D product
forward and one for each gradient, with NumPy's values."""

from __future__ import annotations

import tracemalloc
from typing import Any

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import functional as F
from leanpass import nn
from leanpass.testing import check_grads


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=2, max_size=4), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_values_and_cotangents_against_einsum(lead: list[int], out: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((*lead, 3))
    w, b, g = rng.standard_normal((3, out)), rng.standard_normal(out), rng.standard_normal((*lead, out))
    for name, args in (("@", (x, w)), ("linear", (x, w, b))):
        ans, vjp = F.OPS[name](*args)
        want = np.einsum("...i,io->...o", x, w) + (b if name == "linear" else 0)
        np.testing.assert_allclose(ans, want, rtol=1e-12, atol=1e-12)
        cts = vjp(g)
        np.testing.assert_allclose(cts[0], np.einsum("...o,io->...i", g, w), rtol=1e-12, atol=1e-12)
        lead_axes = list(range(x.ndim - 1))
        np.testing.assert_allclose(cts[1], np.tensordot(x, g, (lead_axes, lead_axes)), rtol=1e-12, atol=1e-12)
        if name == "linear":
            np.testing.assert_allclose(cts[2], g.reshape(-1, out).sum(0), rtol=1e-12, atol=1e-12)


def test_gradients_first_and_second_order() -> None:
    rng = np.random.default_rng(1)
    x, w, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 5)), rng.standard_normal(5)
    check_grads(lambda x, w, b: lp.linear(x, w, b) ** 2, [x, w, b], order=2)
    check_grads(lambda x, w: lp.matmul(x, w) ** 2, [x, w], order=2)
    check_grads(lambda x, w: lp.tanh(x @ w), [x[:, None], w], order=2)  # (4-D)


def test_the_weight_gradient_makes_no_stack_of_products() -> None:
    rng = np.random.default_rng(2)
    x, w, g = rng.standard_normal((256, 4, 32)), rng.standard_normal((32, 64)), rng.standard_normal((256, 4, 64))
    for name, args in (("@", (x, w)), ("linear", (x, w, np.zeros(64)))):
        _, vjp = F.OPS[name](*args)
        tracemalloc.start()
        vjp(g)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        # the input's cotangent (256 KiB) and the weight's (16 KiB); a stack of 256 (32, 64) products is 4 MiB
        assert peak < 1_000_000, (name, peak)


def test_transforms_agree_and_nn_linear_takes_any_rank() -> None:
    rng = np.random.default_rng(3)
    layer = nn.Linear(4, 3, rng=0, dtype=np.float64)
    x = rng.standard_normal((2, 5, 4))

    def loss(m: Any, x: Any) -> Any:
        return (m(x) ** 2).sum()

    grads = lp.grad(loss)(layer, x)
    jitted = lp.jit(lp.grad(loss))(layer, x)
    np.testing.assert_array_equal(grads.weight, jitted.weight)
    np.testing.assert_array_equal(grads.bias, jitted.bias)
    w = layer.weight._data
    np.testing.assert_allclose(grads.weight, 2 * np.einsum("bti,bto->io", x, layer(x)._data), rtol=1e-12)
    np.testing.assert_allclose(lp.vmap(layer)(x)._data, layer(x)._data, rtol=1e-14)
    _, tangent = lp.jvp(lambda x: lp.matmul(x, w), (x,), (np.ones_like(x),))
    np.testing.assert_allclose(tangent._data, np.ones_like(x) @ w, rtol=1e-14)
    assert layer(np.ones((2, 3, 4, 4))).shape == (2, 3, 4, 3)


# ----- an embedding's gradient: the rows picked by an integer array, scattered back by one product ------------
def test_embedding_gradient_by_one_hot_product_equals_the_scatter() -> None:
    rng = np.random.default_rng(4)
    for v, dtype in ((65, np.float32), (7, np.float64), (300, np.float64)):  # (300 rows: np.add.at, exactly)
        table = rng.standard_normal((v, 5)).astype(dtype)
        idx = rng.integers(-v, v, (4, 9))  # (negative indices count from the end, as in the forward)
        g = rng.standard_normal((4, 9, 5)).astype(dtype)
        _, vjp = F.getitem(table, (idx,))
        got = vjp(g)[0]
        want = np.zeros_like(table)
        np.add.at(want, idx, g)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-13, atol=1e-6)
        emb = nn.Embedding(v, 5, rng=0, dtype=dtype)
        ids = np.remainder(idx, v)

        def loss(m: Any, ids: Any = ids) -> Any:
            return (m(ids) ** 2).sum()

        np.testing.assert_array_equal(lp.grad(loss)(emb).weight, lp.jit(lp.grad(loss))(emb).weight)
    check_grads(lambda t: lp.take(t, np.array([[0, 2], [2, 2]]), axis=0) ** 2, [rng.standard_normal((3, 4))],
                order=2)
