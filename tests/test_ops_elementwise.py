"""Elementwise ops: tanh, abs, sqrt, square, sin, cos, clip, maximum, minimum, where, softplus, gelu,
leaky_relu. Gradients are checked at points away from kinks; the kinks have their own tests."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from scipy.special import ndtr
from test_ops_helpers import (
    FAST,
    SMALL,
    assert_cotangents_match,
    away_from,
    bshapes,
    normal,
    seeds,
    shapes,
    value,
)

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

C = np.sqrt(2 / np.pi)


def ref_gelu(x: np.ndarray) -> np.ndarray:
    return 0.5 * x * (1 + np.tanh(C * (x + 0.044715 * x**3)))


def ref_gelu_exact(x: np.ndarray) -> np.ndarray:
    return x * ndtr(x)


# name -> (Tensor-level function, NumPy reference, input sampler(seed, shape, dtype))
UNARY: dict[str, tuple[Callable[..., Any], Callable[..., Any], Callable[..., np.ndarray]]] = {
    "tanh": (lp.tanh, np.tanh, normal),
    "abs": (lp.abs, np.abs, away_from),
    "sqrt": (lp.sqrt, np.sqrt, lambda s, sh, dtype=np.float64: (np.abs(normal(s, sh)) + 0.5).astype(dtype)),
    "square": (lp.square, np.square, normal),
    "sin": (lp.sin, np.sin, normal),
    "cos": (lp.cos, np.cos, normal),
    "softplus": (lp.softplus, lambda x: np.log1p(np.exp(x)), normal),
    "gelu": (lp.gelu, ref_gelu, normal),
    "gelu_exact": (lambda x: lp.gelu(x, approximate="none"), ref_gelu_exact, normal),
    "leaky_relu": (lambda x: lp.leaky_relu(x, 0.1), lambda x: np.where(x > 0, x, 0.1 * x), away_from),
    "clip": (lambda x: lp.clip(x, -0.5, 0.8), lambda x: np.clip(x, -0.5, 0.8),
             lambda s, sh, dtype=np.float64: away_from(s, sh, (-0.5, 0.8), dtype=dtype)),
}
FUNCTIONAL = {  # name -> (functional op, extra parameters after x)
    "tanh": (F.tanh, ()), "abs": (F.abs, ()), "sqrt": (F.sqrt, ()), "square": (F.square, ()),
    "sin": (F.sin, ()), "cos": (F.cos, ()), "softplus": (F.softplus, ()), "gelu": (F.gelu, ()),
    "gelu_exact": (F.gelu, ("none",)),
    "leaky_relu": (F.leaky_relu, (0.1,)), "clip": (F.clip, (-0.5, 0.8)),
}


@FAST
@given(st.sampled_from(sorted(UNARY)), shapes, seeds)
def test_unary_values_and_gradients(name: str, shape: tuple[int, ...], seed: int) -> None:
    fn, ref, sample = UNARY[name]
    x = sample(seed, shape)
    y = fn(Tensor(x))
    assert y.shape == shape
    np.testing.assert_allclose(value(y), ref(x), rtol=1e-12, atol=1e-12)
    check_grads(fn, [x], order=2)


@SMALL
@given(st.sampled_from(sorted(UNARY)), shapes, seeds)
def test_unary_cotangents_have_the_input_shape(name: str, shape: tuple[int, ...], seed: int) -> None:
    op, params = FUNCTIONAL[name]
    assert_cotangents_match(lambda t: op(t, *params), [UNARY[name][2](seed, shape)], [0])


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float32(name: str) -> None:
    fn, _, sample = UNARY[name]
    x32 = sample(7, (2, 3), dtype=np.float32)
    op, params = FUNCTIONAL[name]
    assert_cotangents_match(lambda t: op(t, *params), [x32], [0])
    ans, vjp = op(Tensor(x32), *params)
    (ct,) = vjp(Tensor(np.ones_like(x32)))
    assert ans.dtype == np.float32 and type(ct) is Tensor and ct.dtype == np.float32
    t = Tensor(x32, requires_grad=True)
    y = fn(t)
    assert y.dtype == np.float32
    (y * y).sum().backward(create_graph=True)
    assert t.grad.dtype == np.float32
    assert lp.hessian(lambda u: (fn(u) ** 2).sum())(x32[0]).dtype == np.float32


@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_op_names(name: str) -> None:
    y = UNARY[name][0](Tensor([0.5, 2.0], requires_grad=True))
    assert y._op == name.removesuffix("_exact")


def test_methods_match_functions() -> None:
    x = Tensor([0.25, 4.0], requires_grad=True)
    for name in ["tanh", "sqrt", "abs"]:
        np.testing.assert_array_equal(value(getattr(x, name)()), value(getattr(lp, name)(x)))
        assert getattr(x, name)()._op == name
    np.testing.assert_array_equal(value(x.clip(0.5, 1.0)), [0.5, 1.0])


# ----- binary: maximum, minimum (broadcasting pairs) --------------------------------------------------
@FAST
@given(bshapes(2), seeds, st.sampled_from(["maximum", "minimum"]))
def test_maximum_minimum_broadcasting(shp: list[tuple[int, ...]], seed: int, name: str) -> None:
    a = normal(seed, shp[0])
    b = normal(seed + 1, shp[1]) + 0.05  # continuous values: ties have probability 0
    fn = getattr(lp, name)
    np.testing.assert_array_equal(value(fn(Tensor(a), Tensor(b))), getattr(np, name)(a, b))
    check_grads(fn, [a, b], order=2)
    assert_cotangents_match(getattr(F, name), [a, b], [0, 1])


def test_maximum_minimum_ties_split_evenly() -> None:
    ga, gb = lp.grad(lambda a, b: lp.maximum(a, b).sum(), argnums=(0, 1))(np.array([1.0, 2.0, 3.0]),
                                                                         np.array([1.0, 0.0, 5.0]))
    np.testing.assert_array_equal(ga, [0.5, 1.0, 0.0])
    np.testing.assert_array_equal(gb, [0.5, 0.0, 1.0])
    g = lp.grad(lambda a: lp.minimum(a, 2.0).sum())(np.array([2.0, 1.0, 3.0]))
    np.testing.assert_array_equal(g, [0.5, 1.0, 0.0])
    # a scalar broadcast against ties collects half of each tied element
    g0 = lp.grad(lambda s: lp.maximum(np.array([2.0, 2.0, 0.0]), s).sum())(2.0)
    assert g0 == 2.0


def test_maximum_with_a_python_number() -> None:
    x = Tensor([-1.0, 3.0], requires_grad=True)
    y = lp.maximum(x, 0.0)
    assert y._op == "maximum"
    y.sum().backward()
    np.testing.assert_array_equal(value(x.grad), [0.0, 1.0])


# ----- where ------------------------------------------------------------------------------------------------
@FAST
@given(bshapes(3), seeds)
def test_where_broadcasting(shp: list[tuple[int, ...]], seed: int) -> None:
    cond = normal(seed, shp[0]) > 0
    a, b = normal(seed + 1, shp[1]), normal(seed + 2, shp[2])
    np.testing.assert_array_equal(value(lp.where(cond, Tensor(a), Tensor(b))), np.where(cond, a, b))
    check_grads(lambda x, y: lp.where(cond, x * x, y), [a, b], order=2)
    assert_cotangents_match(F.where, [cond, a, b], [1, 2])


def test_where_gradient_flows_only_to_the_selected_branch() -> None:
    x = np.array([-1.0, -0.5, 2.0, 4.0])
    g = lp.grad(lambda t: lp.where(t > 0, lp.log(t), 0.0).sum())(x)
    np.testing.assert_array_equal(g, [0.0, 0.0, 0.5, 0.25])  # log(-1) is nan, but not selected
    h = lp.hessian(lambda t: lp.where(t > 0, lp.log(t), 0.0).sum())(x)
    np.testing.assert_allclose(h, np.diag([0.0, 0.0, -0.25, -1 / 16]))
    t = Tensor(x, requires_grad=True)
    lp.where(t > 0, lp.sqrt(lp.where(t > 0, t, 1.0)), t * 0.0).sum().backward()  # sqrt(-1) is nan: double where
    np.testing.assert_allclose(value(t.grad), [0.0, 0.0, 0.5 / np.sqrt(2), 0.25])


def test_where_at_exactly_zero_needs_the_double_where() -> None:
    # At x = 0 the unselected rule g / x is 0 / 0 (as in JAX); docs/operations.md shows the fix:
    # make the unselected branch's input safe too.
    x = np.array([0.0, 2.0])
    g = lp.grad(lambda t: lp.where(t > 0, lp.log(lp.where(t > 0, t, 1.0)), 0.0).sum())(x)
    np.testing.assert_array_equal(g, [0.0, 0.5])


def test_where_with_a_tensor_condition_and_op_name() -> None:
    x = Tensor([1.0, -1.0], requires_grad=True)
    y = lp.where(x > 0, x, -x)
    assert y._op == "where"
    np.testing.assert_array_equal(value(y), [1.0, 1.0])
    y2 = lp.where(Tensor([True, False]), x, 0.0)
    np.testing.assert_array_equal(value(y2), [1.0, 0.0])


def test_where_float32() -> None:
    a = np.array([1.0, -2.0], np.float32)
    assert_cotangents_match(F.where, [a > 0, a, a * 2], [1, 2])
    assert lp.where(a > 0, Tensor(a), 0.0).dtype == np.float32


@pytest.mark.parametrize("name", ["maximum", "minimum"])
def test_binary_float32(name: str) -> None:
    a = np.array([1.0, -2.0, 3.0], np.float32)
    b = np.array([0.5, 0.0, 4.0], np.float32)
    assert_cotangents_match(getattr(F, name), [a, b], [0, 1])
    ans, vjp = getattr(F, name)(Tensor(a), Tensor(b))
    assert all(c.dtype == np.float32 for c in vjp(Tensor(np.ones(3, np.float32))))
    t = Tensor(a, requires_grad=True)
    y = getattr(lp, name)(t, 0.0)
    assert y.dtype == np.float32
    (y * y).sum().backward(create_graph=True)
    assert t.grad.dtype == np.float32


# ----- kinks and stability ---------------------------------------------------------------------------------
def test_conventions_at_kinks() -> None:
    g = lp.grad(lambda t: lp.abs(t).sum())(np.array([-2.0, 0.0, 3.0]))
    np.testing.assert_array_equal(g, [-1.0, 0.0, 1.0])  # abs'(0) = 0
    g = lp.grad(lambda t: lp.leaky_relu(t, 0.2).sum())(np.array([-1.0, 0.0, 1.0]))
    np.testing.assert_allclose(g, [0.2, 0.2, 1.0])  # the negative slope at 0
    g = lp.grad(lambda t: lp.clip(t, 0.0, 1.0).sum())(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]))
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 1.0, 0.0])  # the bounds pass the gradient


def test_softplus_and_gelu_are_stable_at_plus_minus_1000() -> None:
    x = np.array([-1000.0, 0.0, 1000.0])
    np.testing.assert_allclose(value(lp.softplus(Tensor(x))), [0.0, np.log(2.0), 1000.0])
    np.testing.assert_allclose(lp.grad(lambda t: lp.softplus(t).sum())(x), [0.0, 0.5, 1.0])
    np.testing.assert_allclose(value(lp.gelu(Tensor(x))), [0.0, 0.0, 1000.0])
    assert np.all(np.isfinite(lp.grad(lambda t: lp.gelu(t).sum())(x)))
    assert np.all(np.isfinite(lp.grad(lambda t: lp.tanh(t).sum())(x)))


def test_gelu_gradient_by_hand_at_zero() -> None:
    # gelu'(0) = 0.5, gelu''(0) = 2 * C * 0.5 = C
    assert lp.grad(lambda t: lp.gelu(t))(0.0) == pytest.approx(0.5)
    assert lp.grad(lp.grad(lambda t: lp.gelu(t)))(0.0) == pytest.approx(C)


def test_clip_with_tensor_bounds_differentiates_the_bounds() -> None:
    lo = Tensor(0.0, requires_grad=True)
    hi = Tensor(1.0, requires_grad=True)
    x = Tensor([-1.0, 0.5, 2.0], requires_grad=True)
    y = lp.clip(x, lo, hi)
    np.testing.assert_array_equal(value(y), [0.0, 0.5, 1.0])
    y.sum().backward()
    assert lo.grad.item() == 1.0 and hi.grad.item() == 1.0
    np.testing.assert_array_equal(value(x.grad), [0.0, 1.0, 0.0])
    np.testing.assert_array_equal(value(lp.clip(Tensor([3.0]), None, Tensor(2.0))), [2.0])


def test_clip_with_broadcasting_array_bounds_unbroadcasts_the_cotangent() -> None:
    x = np.array([1.0])
    ans, vjp = F.clip(x, np.array([0.0, 2.0]), None)
    assert ans.shape == (2,) and vjp(np.ones(2))[0].shape == (1,)
    g = lp.grad(lambda t: lp.clip(t, np.array([0.0, 2.0]), None).sum())(x)
    np.testing.assert_array_equal(g, [1.0])  # passes in slot 0, clamped in slot 1


def test_power_with_a_broadcasting_exponent_containing_zero() -> None:
    _, vjp = F.power(np.array([2.0]), np.array([0.0, 1.0, 2.0]))
    assert vjp(np.ones(3))[0].shape == (1,)
    g = lp.grad(lambda x: (x ** np.array([0.0, 1.0, 2.0])).sum())(np.array([2.0]))
    np.testing.assert_array_equal(g, [5.0])  # 0 + 1 + 2 * 2
