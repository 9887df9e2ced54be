"""``linear`` (``x @ w + b`` as one op, what ``nn.Linear`` records): values, gradients to second
order, property tests over shapes, float32, the errors, and that no input is written to."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from test_ops_helpers import FAST, normal, seeds

import leanpass as lp
from leanpass import Tensor, nn
from leanpass import functional as F
from leanpass.testing import check_grads

# (x, w, b) shapes: a batch, one example, batched stacks, and biases that broadcast
SHAPES = [
    ((4, 3), (3, 2), (2,)),
    ((3,), (3, 2), (2,)),
    ((2, 4, 3), (3, 5), (5,)),
    ((4, 3), (3, 2), (1, 2)),
    ((4, 3), (3, 2), (4, 2)),
    ((4, 3), (3, 2), ()),
    ((4, 3), (3, 2), (1,)),  # a 1-D bias that broadcasts along the last axis too
    ((2, 4, 3), (2, 3, 5), (4, 1)),
]


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_linear_is_matmul_plus_bias_bit_for_bit(shapes: tuple[tuple[int, ...], ...]) -> None:
    x, w, b = (normal(i, s) for i, s in enumerate(shapes))
    ans, vjp = F.linear(x, w, b)
    assert np.array_equal(ans, x @ w + b)
    g = normal(9, ans.shape)
    _, mm_vjp = F.matmul(x, w)
    gx, gw, gb = vjp(g)
    assert np.array_equal(gx, mm_vjp(g)[0]) and np.array_equal(gw, mm_vjp(g)[1])
    assert np.allclose(gb, F.unbroadcast(g, b), rtol=1e-15, atol=0) and np.shape(gb) == np.shape(b)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_linear_gradients_to_second_order(shapes: tuple[tuple[int, ...], ...]) -> None:
    args = [normal(10 + i, s) for i, s in enumerate(shapes)]
    check_grads(lambda x, w, b: lp.linear(x, w, b), args, order=2)
    # and inside a function that is not linear in the weights (its second derivative is not 0)
    check_grads(lambda x, w, b: (lp.linear(x, w, b) ** 2).sum(), args, order=2)


@st.composite
def linear_shapes(draw: Any) -> tuple[tuple[int, ...], ...]:
    """x with 1 to 3 axes, a 2-D w, and a bias that broadcasts to the shape of x @ w."""
    n_in, n_out = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    lead = draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    out = (*lead, n_out)
    # a bias: some trailing axes of the output, each kept or squeezed to 1
    k = draw(st.integers(0, len(out)))
    bias = tuple(n if draw(st.booleans()) else 1 for n in out[len(out) - k:])
    return (*lead, n_in), (n_in, n_out), bias


@FAST
@given(shapes=linear_shapes(), seed=seeds, need=st.tuples(st.booleans(), st.booleans(), st.booleans()))
def test_linear_vjp_matches_finite_differences_over_shapes(
    shapes: tuple[tuple[int, ...], ...], seed: int, need: tuple[bool, bool, bool]
) -> None:
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal(s) for s in shapes]
    ans, vjp = F.linear(*xs, need=need)
    assert ans.shape == np.broadcast_shapes(shapes[0][:-1] + shapes[1][1:], shapes[2])
    u = rng.standard_normal(ans.shape)
    cts = vjp(u)
    vs = [rng.standard_normal(s) for s in shapes]
    eps = 1e-6
    plus = F.linear(*[x + eps * v for x, v in zip(xs, vs)])[0]
    minus = F.linear(*[x - eps * v for x, v in zip(xs, vs)])[0]
    jv_total = 0.0
    lhs = 0.0
    for i, (c, v) in enumerate(zip(cts, vs)):
        if not need[i]:
            assert c is None, "an input that is not needed gets no cotangent"
            continue
        assert np.shape(c) == shapes[i]
        lhs += float(np.sum(c * v))
        # this input's share of J v: perturb it alone
        one = [x + eps * v if j == i else x for j, x in enumerate(xs)]
        other = [x - eps * v if j == i else x for j, x in enumerate(xs)]
        jv_total += float(np.sum(u * (F.linear(*one)[0] - F.linear(*other)[0]) / (2 * eps)))
    assert np.isclose(lhs, jv_total, rtol=1e-6, atol=1e-8)
    if all(need):  # all at once agrees with the sum of the parts
        assert np.isclose(lhs, float(np.sum(u * (plus - minus) / (2 * eps))), rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("shapes", SHAPES, ids=str)
def test_linear_keeps_float32(shapes: tuple[tuple[int, ...], ...]) -> None:
    x, w, b = (normal(i, s, np.float32) for i, s in enumerate(shapes))
    ans, vjp = F.linear(x, w, b)
    assert ans.dtype == np.float32
    assert all(c.dtype == np.float32 for c in vjp(np.ones(ans.shape, np.float32)))


def test_linear_promotes_like_numpy_when_the_bias_is_float64() -> None:
    x, w = normal(0, (2, 3), np.float32), normal(1, (3, 2), np.float32)
    b = normal(2, (2,))
    ans, _ = F.linear(x, w, b)
    assert ans.dtype == (x @ w + b).dtype == np.float64
    assert np.array_equal(ans, x @ w + b)


def test_linear_writes_into_none_of_its_inputs() -> None:
    x, w, b = normal(0, (4, 3)), normal(1, (3, 2)), normal(2, (2,))
    copies = [a.copy() for a in (x, w, b)]
    ans, vjp = F.linear(x, w, b)
    vjp(np.ones_like(ans))
    assert all(np.array_equal(a, c) for a, c in zip((x, w, b), copies))
    assert not np.shares_memory(ans, b) and not np.shares_memory(ans, x)


def test_linear_layer_records_one_node_with_the_gradients_of_matmul_plus_bias() -> None:
    layer = nn.Linear(3, 2, rng=0, dtype=np.float64)
    x = normal(3, (5, 3))
    seen = []

    def one_op(m: nn.Linear) -> Tensor:
        out = m(x)
        seen.append(out)
        return (out**2).sum()

    def two_ops(m: nn.Linear) -> Tensor:
        return ((x @ m.weight + m.bias) ** 2).sum()

    g_layer = lp.grad(one_op)(layer)
    assert seen[0]._op == "linear" and seen[0]._a is x  # (x, weight, bias): one node
    assert np.array_equal(lp.stop_gradient(seen[0]).data, x @ layer.weight.data + layer.bias.data)
    g_ops = lp.grad(two_ops)(layer)
    assert np.allclose(g_layer.weight.data, g_ops.weight.data, rtol=1e-14)
    assert np.allclose(g_layer.bias.data, g_ops.bias.data, rtol=1e-14)


def test_linear_on_tensors_arrays_and_under_no_grad() -> None:
    x = Tensor(normal(0, (2, 3)), requires_grad=True)
    w, b = normal(1, (3, 4)), normal(2, (4,))
    y = lp.linear(x, w, b)  # only x is differentiated
    y.sum().backward()
    assert x.grad is not None and np.allclose(x.grad.data, np.broadcast_to(w.sum(axis=1), (2, 3)))
    with lp.no_grad():
        z = lp.linear(x, w, b)
    assert z._op == "leaf" and not z.requires_grad
    assert lp.linear([[1.0, 2.0]], [[1.0], [1.0]], [0.5]).item() == 3.5


def test_linear_gradient_of_a_gradient_through_a_layer() -> None:
    """The differentiable pass replays linear's rule on Tensors: grad of grad works through it."""
    x = normal(4, (3, 2))
    w0 = normal(5, (2, 2))

    def loss(w: Tensor) -> Tensor:
        return (lp.linear(x, w, np.zeros(2)).sigmoid() ** 2).sum()

    check_grads(loss, [w0], order=2)
    hvp = lp.hvp(loss)(w0, np.ones((2, 2)))
    eps = 1e-5
    g_plus = lp.grad(loss)(w0 + eps * np.ones((2, 2)))
    g_minus = lp.grad(loss)(w0 - eps * np.ones((2, 2)))
    assert np.allclose(np.asarray(hvp), (g_plus - g_minus) / (2 * eps), rtol=1e-5, atol=1e-8)


def test_linear_errors_name_the_shapes() -> None:
    with pytest.raises(ValueError, match=r"inner dimensions do not match: \(4, 3\) @ \(2, 2\)"):
        F.linear(np.ones((4, 3)), np.ones((2, 2)), np.ones(2))
    with pytest.raises(ValueError, match=r"bias of shape \(3, 4, 2\) would broadcast x @ w of shape "
                                         r"\(4, 2\) to \(3, 4, 2\).*such as shape \(2,\)"):
        F.linear(np.ones((4, 3)), np.ones((3, 2)), np.ones((3, 4, 2)))
    with pytest.raises(ValueError, match="operands could not be broadcast|broadcast"):
        F.linear(np.ones((4, 3)), np.ones((3, 2)), np.ones(3))
    with pytest.raises(TypeError, match="unsupported operand for 'linear': str"):
        lp.linear(Tensor(np.ones((1, 2))), "w", np.ones(1))
