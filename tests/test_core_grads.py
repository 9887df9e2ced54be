"""Gradients of the core operations: finite differences to second order, property tests of the
functional VJPs over random shapes, and dtype preservation (float32 stays float32)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from conftest import NUMPY1
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

RNG = np.random.default_rng(20261129)


def randn(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape)


def positive(*shape: int) -> np.ndarray:
    return RNG.uniform(0.5, 2.0, shape)


def away_from_zero(*shape: int) -> np.ndarray:
    """Values in +-[0.3, 2]: no kink of relu and no pole of 1/x within finite-difference reach."""
    return RNG.choice([-1.0, 1.0], shape) * RNG.uniform(0.3, 2.0, shape)


# ----- check_grads, to second order, on every core op ------------------------------------------

CASES: list[tuple[str, Callable[..., Any], list[Any]]] = [
    ("add", lambda x, y: x + y, [randn(3), randn(3)]),
    ("add broadcast", lambda x, y: x + y, [randn(2, 1, 3), randn(4, 1)]),
    ("add scalar", lambda x: 2.0 + x + 1.0, [randn(2, 3)]),
    ("sub", lambda x, y: x - y, [randn(3), randn(3)]),
    ("sub broadcast", lambda x, y: x - y, [randn(2, 3), randn(3)]),
    ("rsub scalar", lambda x: 3.0 - x, [randn(2)]),
    ("mul", lambda x, y: x * y, [randn(3), randn(3)]),
    ("mul broadcast", lambda x, y: x * y, [randn(4, 1), randn(1, 5)]),
    ("mul 0-d", lambda x, y: x * y, [randn(), randn(2, 2)]),
    ("div", lambda x, y: x / y, [randn(3), away_from_zero(3)]),
    ("div broadcast", lambda x, y: x / y, [randn(2, 3), away_from_zero(2, 1)]),
    ("rdiv scalar", lambda x: 2.0 / x, [away_from_zero(4)]),
    ("pow 3", lambda x: x**3, [randn(4)]),
    ("pow 2", lambda x: x**2, [randn(2, 2)]),
    ("pow 0.5", lambda x: x**0.5, [positive(4)]),
    ("pow -1", lambda x: x**-1, [away_from_zero(4)]),
    ("pow -2.5", lambda x: x**-2.5, [positive(3)]),
    ("pow tensor exponent", lambda x, p: x**p, [positive(3), randn(3)]),
    ("pow tensor exponent broadcast", lambda x, p: x**p, [positive(2, 3), randn(3)]),
    ("rpow scalar base", lambda p: 2.0**p, [randn(3)]),
    ("matmul 1-D @ 1-D", lambda x, y: x @ y, [randn(3), randn(3)]),
    ("matmul 2-D @ 2-D", lambda x, y: x @ y, [randn(2, 3), randn(3, 4)]),
    ("matmul 1-D @ 2-D", lambda x, y: x @ y, [randn(3), randn(3, 4)]),
    ("matmul 2-D @ 1-D", lambda x, y: x @ y, [randn(2, 3), randn(3)]),
    ("matmul batched", lambda x, y: x @ y, [randn(2, 2, 3), randn(2, 3, 4)]),
    ("matmul broadcast batch", lambda x, y: x @ y, [randn(2, 1, 2, 3), randn(3, 3, 2)]),
    ("matmul N-D @ 2-D", lambda x, y: x @ y, [randn(2, 2, 3), randn(3, 2)]),
    ("matmul 1-D @ N-D", lambda x, y: x @ y, [randn(3), randn(2, 3, 2)]),
    ("matmul N-D @ 1-D", lambda x, y: x @ y, [randn(2, 2, 3), randn(3)]),
    ("matmul method", lambda x, y: x.matmul(y), [randn(2, 3), randn(3, 2)]),
    ("neg", lambda x: -x, [randn(3)]),
    ("sum", lambda x: x.sum(), [randn(2, 3)]),
    ("sum axis", lambda x: x.sum(axis=0), [randn(2, 3)]),
    ("sum axis -1 keepdims", lambda x: x.sum(axis=-1, keepdims=True), [randn(2, 3)]),
    ("sum axis tuple", lambda x: x.sum(axis=(0, 2)), [randn(2, 3, 2)]),
    ("sum 0-d", lambda x: x.sum(), [randn()]),
    ("mean", lambda x: x.mean(), [randn(2, 3)]),
    ("mean axis", lambda x: x.mean(axis=1), [randn(2, 3)]),
    ("mean axis keepdims", lambda x: x.mean(axis=0, keepdims=True), [randn(4, 3)]),
    ("mean axis tuple keepdims", lambda x: x.mean(axis=(1, 2), keepdims=True), [randn(2, 3, 2)]),
    ("relu", lambda x: x.relu(), [away_from_zero(6)]),
    ("exp", lambda x: x.exp(), [randn(3)]),
    ("log", lambda x: x.log(), [positive(3)]),
    ("sigmoid", lambda x: x.sigmoid(), [randn(5) * 3.0]),
    ("composite", lambda x, w: ((x @ w).sigmoid() * (x @ w).relu()).mean(axis=0), [randn(4, 3), randn(3, 2)]),
    ("composite 2", lambda x: (x.exp() + 1.0).log() / (x * x + 1.0), [randn(3)]),
]


@pytest.mark.parametrize(("f", "args"), [(f, a) for _, f, a in CASES], ids=[n for n, _, _ in CASES])
def test_check_grads_second_order(f: Callable[..., Any], args: list[Any]) -> None:
    check_grads(f, args, order=2)


def test_check_grads_third_order_on_a_few() -> None:
    check_grads(lambda x: x**3 * x.exp(), [randn(3)], order=3)
    check_grads(lambda x, y: (x @ y).sigmoid(), [randn(2, 3), randn(3)], order=3)


def test_check_grads_catches_a_wrong_vjp() -> None:
    def bad_square(x: Any) -> tuple[Any, Any]:
        return x * x, lambda g: (g * x,)  # should be 2 * g * x

    with pytest.raises(AssertionError, match="disagrees with finite differences"):
        check_grads(lambda x: lp.apply(bad_square, "bad_square", x), [randn(3)], order=1)


def test_check_grads_catches_a_gradient_of_the_wrong_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    """An un-reduced cotangent (shape (1, 3) for an input of shape (3,)) sums to the right inner
    product with a broadcast direction; check_grads must still refuse it."""
    import leanpass.testing as testing

    real_vjp = testing.vjp

    def vjp_with_extra_axis(f: Any, *xs: Any) -> Any:
        out, pull = real_vjp(f, *xs)
        return out, lambda u: tuple(np.asarray(g)[None] for g in pull(u))

    monkeypatch.setattr(testing, "vjp", vjp_with_extra_axis)
    with pytest.raises(AssertionError, match=r"gradient of argument 0 has shape \(1, 3\).*shape \(3,\)"):
        check_grads(lambda x: x * 2.0, [randn(3)], order=1)


@pytest.mark.parametrize("p", [3, 0.5, -1, 2, -2.5, 1.5])
def test_power_gradient_for_any_real_exponent(p: float) -> None:
    x = Tensor([0.5, 1.0, 2.0, 3.0], requires_grad=True)
    (x**p).sum().backward()
    np.testing.assert_allclose(x.grad.data, p * x.data ** (p - 1), rtol=1e-12)


def test_relu_gradient_at_zero_is_zero() -> None:
    x = Tensor([-1.0, 0.0, 1.0], requires_grad=True)
    x.relu().sum().backward()
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0, 1.0])


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_relu_vjp_multiplies_into_its_own_array_and_never_into_g(dtype: Any) -> None:
    """The rule writes g * sign(ans) into the fresh sign array: a read-only or shared g is only read."""
    ans, vjp = F.relu(np.array([[-1.5, 0.0, 2.0], [3.0, -0.5, 1.0]], dtype))
    g = np.array([10.0, 20.0, 30.0], dtype)  # broadcast over the rows, read-only
    g.flags.writeable = False
    (ct,) = vjp(g)
    np.testing.assert_array_equal(ct, [[0.0, 0.0, 30.0], [10.0, 0.0, 30.0]])
    assert ct.dtype == dtype and not np.shares_memory(ct, g) and not np.shares_memory(ct, ans)
    np.testing.assert_array_equal(g, [10.0, 20.0, 30.0])
    (again,) = vjp(g)  # nothing the rule keeps was changed by the first call
    np.testing.assert_array_equal(again, ct)


def test_sigmoid_is_stable_at_large_inputs() -> None:
    x = Tensor([-1000.0, -50.0, 0.0, 50.0, 1000.0], requires_grad=True)
    with np.errstate(over="raise", invalid="raise", divide="raise"):  # overflow or nan would raise
        s = x.sigmoid()
        s.sum().backward()
    assert np.isfinite(s.data).all() and np.isfinite(x.grad.data).all()
    np.testing.assert_allclose(s.data[[0, 2, 4]], [0.0, 0.5, 1.0])
    np.testing.assert_allclose(x.grad.data[[0, 2, 4]], [0.0, 0.25, 0.0])
    gg = lp.grad(lambda t: lp.grad(lambda u: u.sigmoid().sum())(t).sum())(np.array([-1000.0, 1000.0]))
    assert np.isfinite(gg).all()


def test_log_of_negative_is_nan_and_of_zero_is_minus_inf_without_error() -> None:
    with np.errstate(over="raise", invalid="raise", divide="raise"):
        out = Tensor([-1.0, 0.0, 1.0]).log().data
    assert np.isnan(out[0]) and out[1] == -np.inf and out[2] == 0.0


# ----- property tests of the functional VJPs ------------------------------------------------------

SETTINGS = settings(max_examples=30, deadline=None)
seeds = st.integers(0, 2**32 - 1)
dtypes = st.sampled_from([np.float64, np.float32])


def _inner(a: Any, b: Any) -> float:
    return float(np.sum(np.asarray(a, np.float64) * np.asarray(b, np.float64)))


def assert_vjp_matches_finite_differences(
    op: Callable[..., tuple[Any, Any]], xs: list[np.ndarray], rng: np.random.Generator, *params: Any,
    rtol: float = 1e-6, atol: float = 1e-8,
) -> None:
    """<vjp(u), v> == <u, J v> for random u, v, with J v by central differences (float64)."""
    ans, vjp = op(*xs, *params)
    u = rng.standard_normal(np.shape(ans))
    cts = vjp(u)
    for x, c in zip(xs, cts):
        assert np.shape(c) == np.shape(x), "a cotangent must have its input's shape"
    vs = [rng.standard_normal(np.shape(x)) for x in xs]
    eps = 1e-6
    plus = op(*[x + eps * v for x, v in zip(xs, vs)], *params)[0]
    minus = op(*[x - eps * v for x, v in zip(xs, vs)], *params)[0]
    jv = (np.asarray(plus) - np.asarray(minus)) / (2 * eps)
    lhs = sum(_inner(c, v) for c, v in zip(cts, vs))
    rhs = _inner(u, jv)
    assert np.isclose(lhs, rhs, rtol=rtol, atol=atol), (lhs, rhs)


def assert_keeps_dtype(op: Callable[..., tuple[Any, Any]], xs: list[np.ndarray], *params: Any) -> None:
    """In float32, the output and every cotangent are float32."""
    xs32 = [np.asarray(x, np.float32) for x in xs]
    ans, vjp = op(*xs32, *params)
    assert np.result_type(ans) == np.float32
    for c in vjp(np.ones(np.shape(ans), np.float32)):
        assert np.result_type(c) == np.float32


def _arrays(rng: np.random.Generator, shapes: tuple[tuple[int, ...], ...]) -> list[np.ndarray]:
    return [np.asarray(rng.standard_normal(s)) for s in shapes]


BINARY = {
    "add": (F.add, lambda a: a),
    "sub": (F.sub, lambda a: a),
    "mul": (F.mul, lambda a: a),
    "div": (F.div, lambda a: [a[0], np.where(a[1] < 0, -1.0, 1.0) * (0.5 + np.abs(a[1]))]),
    "power": (F.power, lambda a: [0.5 + np.abs(a[0]), a[1]]),
}


@pytest.mark.parametrize("name", list(BINARY))
@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3),
       seed=seeds)
def test_binary_vjps_broadcasting(name: str, shapes: Any, seed: int) -> None:
    op, domain = BINARY[name]
    rng = np.random.default_rng(seed)
    xs = [np.asarray(x, np.float64) for x in domain(_arrays(rng, shapes.input_shapes))]
    assert np.shape(op(*xs)[0]) == shapes.result_shape
    assert_vjp_matches_finite_differences(op, xs, rng)
    assert_keeps_dtype(op, xs)


@SETTINGS
@given(shapes=hnp.mutually_broadcastable_shapes(signature=np.matmul.signature, max_dims=2, max_side=3),
       seed=seeds)
def test_matmul_vjp_1d_2d_and_batched(shapes: Any, seed: int) -> None:
    rng = np.random.default_rng(seed)
    xs = _arrays(rng, shapes.input_shapes)
    assert np.shape(F.matmul(*xs)[0]) == shapes.result_shape
    assert_vjp_matches_finite_differences(F.matmul, xs, rng)
    assert_keeps_dtype(F.matmul, xs)


UNARY = {
    "neg": (F.neg, lambda x: x),
    "exp": (F.exp, lambda x: x),
    "log": (F.log, lambda x: 0.5 + np.abs(x)),
    "sigmoid": (F.sigmoid, lambda x: 3.0 * x),
    "relu": (F.relu, lambda x: np.where(x < 0, -1.0, 1.0) * (0.1 + np.abs(x))),  # away from the kink
}


@pytest.mark.parametrize("name", list(UNARY))
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), seed=seeds)
def test_unary_vjps(name: str, shape: tuple[int, ...], seed: int) -> None:
    op, domain = UNARY[name]
    rng = np.random.default_rng(seed)
    x = np.asarray(domain(rng.standard_normal(shape)), np.float64)
    assert_vjp_matches_finite_differences(op, [x], rng)
    assert_keeps_dtype(op, [x])


@pytest.mark.parametrize("p", [3, 2, 0.5, -1, -1.5])
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4), seed=seeds)
def test_power_vjp_python_exponent(p: float, shape: tuple[int, ...], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = 0.5 + np.abs(rng.standard_normal(shape))
    assert_vjp_matches_finite_differences(F.power, [np.asarray(x)], rng, p)
    assert_keeps_dtype(F.power, [x], p)


@st.composite
def shape_and_axis(draw: Any) -> tuple[tuple[int, ...], Any]:
    shape = draw(hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4))
    ndim = len(shape)
    choices = [st.none(), hnp.valid_tuple_axes(ndim)]
    if ndim:
        choices.append(st.integers(-ndim, ndim - 1))
    return shape, draw(st.one_of(*choices))


@pytest.mark.parametrize("name", ["sum", "mean"])
@SETTINGS
@given(case=shape_and_axis(), keepdims=st.booleans(), seed=seeds)
def test_reduction_vjps(name: str, case: tuple[tuple[int, ...], Any], keepdims: bool, seed: int) -> None:
    shape, axis = case
    op = {"sum": F.sum, "mean": F.mean}[name]
    rng = np.random.default_rng(seed)
    x = np.asarray(rng.standard_normal(shape))
    want = {"sum": np.sum, "mean": np.mean}[name](x, axis=axis, keepdims=keepdims)
    np.testing.assert_allclose(op(x, axis, keepdims)[0], want)
    assert_vjp_matches_finite_differences(op, [x], rng, axis, keepdims)
    assert_keeps_dtype(op, [x], axis, keepdims)


@pytest.mark.parametrize("name", list(BINARY))
@settings(max_examples=25, deadline=None)
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3, min_side=1, max_side=3),
       seed=seeds)
def test_tensor_layer_agrees_with_functional(name: str, shapes: Any, seed: int) -> None:
    """``x op y`` on Tensors gives the functional op's value and its cotangents (unbroadcast)."""
    op, domain = BINARY[name]
    rng = np.random.default_rng(seed)
    a, b = (np.asarray(x, np.float64) for x in domain(_arrays(rng, shapes.input_shapes)))
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "power": "**"}[name]
    x, y = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    out = {"+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "/": lambda: x / y, "**": lambda: x**y}[sym]()
    assert out._op == sym
    ans, vjp = op(a, b)
    np.testing.assert_allclose(out.data, ans)
    u = rng.standard_normal(np.shape(ans))
    out.backward(u)
    ga, gb = vjp(u)
    np.testing.assert_allclose(x.grad.data, ga, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(y.grad.data, gb, rtol=1e-12, atol=1e-12)
    assert x.grad.shape == a.shape and y.grad.shape == b.shape


# ----- dtypes through the Tensor layer: .backward(), grad, grad of grad ----------------------------

CORE = {
    "+": lambda a, b: a + b,
    "-": lambda a, b: a - b,
    "*": lambda a, b: a * b,
    "/": lambda a, b: a / b,
    "** 3": lambda a, b: a**3 * b,
    "** 0.5": lambda a, b: a**0.5 * b,
    "** -1": lambda a, b: a**-1 * b,
    "** tensor": lambda a, b: a**b,
    "number ** tensor": lambda a, b: 2.0**a * b,
    "@": lambda a, b: a.reshape(2, 2) @ b.reshape(2, 2),
    "neg": lambda a, b: -(a * b),
    "sum": lambda a, b: (a * b).sum(axis=0, keepdims=True),
    "mean": lambda a, b: (a * b).mean(axis=-1),
    "relu": lambda a, b: (a * b).relu(),
    "exp": lambda a, b: (a * b).exp(),
    "log": lambda a, b: (a * b).log(),
    "sigmoid": lambda a, b: (a * b).sigmoid(),
    "python numbers": lambda a, b: 3.0 - a * 2.0 + 1.0 / b - (a + 1.0) / 2.0 + b**2,
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", list(CORE))
def test_dtype_is_kept_through_every_op_and_gradient(name: str, dtype: type) -> None:
    f = CORE[name]
    av = np.array([0.5, 1.0, 1.5, 2.0], dtype=dtype)
    bv = np.array([1.5, 0.7, 1.2, 0.9], dtype=dtype)
    a, b = Tensor(av, requires_grad=True), Tensor(bv, requires_grad=True)
    out = f(a, b)
    assert out.dtype == dtype
    out.sum().backward()
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    # second order through .backward(create_graph=True)
    a.grad = b.grad = None
    f(a, b).sum().backward(create_graph=True)
    assert a.grad.dtype == dtype and b.grad.dtype == dtype
    if a.grad.requires_grad:
        g1 = a.grad
        a.grad = b.grad = None
        g1.sum().backward()
        assert a.grad is None or a.grad.dtype == dtype
    # the transforms, on arrays and on Tensors
    ga, gb = lp.grad(lambda x, y: f(x, y).sum(), argnums=(0, 1))(av, bv)
    assert ga.dtype == dtype and gb.dtype == dtype
    assert lp.grad(lambda x: f(x, b).sum())(Tensor(av)).dtype == dtype
    gg = lp.grad(lambda x: lp.grad(lambda y: f(y, bv).sum())(x).sum())(av)
    assert gg.dtype == dtype
    out2, pull = lp.vjp(f, av, bv)
    assert out2.dtype == dtype
    assert all(g.dtype == dtype for g in pull(np.ones(out2.shape, dtype)))


def test_float32_is_not_upcast_by_python_numbers() -> None:
    a = Tensor(np.ones(3, np.float32), requires_grad=True)
    for r in (a + 1.0, 1.0 + a, a * 2.5, 2.5 * a, a / 3.0, 3.0 / a, a - 1.0, 1.0 - a, a**2.0, 2.0**a):
        assert r.dtype == np.float32
    y = (2.0**a).sum()
    y.backward()
    assert a.grad.dtype == np.float32


def test_nested_inner_grad_of_number_power_stays_float32() -> None:
    seen = []

    def outer(s: Any) -> Any:
        g = lp.grad(lambda t: (2.0**t).sum())(s)
        seen.append(g.dtype)
        return g.sum()

    out = lp.grad(outer)(np.array([1.0, 2.0], np.float32))
    assert out.dtype == np.float32
    assert seen == [np.float32]


def test_power_zero_gradient_at_zero() -> None:
    x = Tensor([0.0, 1.0, -2.0], requires_grad=True)
    (x**0).sum().backward()  # pytest turns the divide-by-zero RuntimeWarning of 0 * 0**-1 into an error
    np.testing.assert_array_equal(x.grad.data, [0.0, 0.0, 0.0])


def test_polynomial_gradient_at_zero() -> None:
    c = [1.0, 2.0, 3.0, 4.0]

    def poly(t: Tensor) -> Tensor:
        return sum((ck * t**k for k, ck in enumerate(c)), start=Tensor(0.0))

    assert lp.grad(poly)(0.0) == 2.0  # c1
    assert lp.grad(lp.grad(poly))(0.0) == 6.0  # 2 c2


@pytest.mark.parametrize("name", ["add", "sub", "mul", "div"])
def test_a_python_number_operand_gets_the_short_rule_with_the_same_cotangents(name: str) -> None:
    # With a Python number whose cotangent is not wanted the op binds a shorter rule; it must
    # give what the general rule gives (and the general rule is still used when it is wanted).
    fn = getattr(F, name)
    x, g = randn(2, 3), randn(2, 3)
    short = fn(x, 1.5, (True, False))[1](g)
    general = fn(x, np.float64(1.5), (True, False))[1](g)  # a NumPy scalar: the general rule
    np.testing.assert_allclose(short[0], general[0], rtol=1e-15)
    assert short[1] is None
    both = fn(x, 1.5)[1](g)  # need defaults to both: the number's cotangent is summed back
    np.testing.assert_allclose(both[0], general[0], rtol=1e-15)
    assert np.shape(both[1]) == ()
    if name in ("add", "mul"):  # the number on the left
        left = fn(1.5, x, (False, True))[1](g)
        assert left[0] is None
        np.testing.assert_allclose(left[1], fn(np.float64(1.5), x, (False, True))[1](g)[1], rtol=1e-15)


def test_the_rule_of_a_constant_is_shared_but_zero_keeps_its_sign() -> None:
    # A rule bound to a Python-number constant is kept for the next op with that constant; 0.0
    # and -0.0 compare equal, so they must not share one (the gradient's zeros carry the sign).
    x = np.array([1.0, 2.0])
    assert F.mul(x, 0.75, (True, False))[1] is F.mul(x * 2, 0.75, (True, False))[1]
    for order in ((0.0, -0.0), (-0.0, 0.0)):
        for c in order:  # g * c is a signed zero, g / c a signed infinity: the sign of c either way
            with np.errstate(divide="ignore"):
                for g in (F.mul(x, c, (True, False))[1](np.ones(2))[0], F.mul(c, x, (False, True))[1](np.ones(2))[1],
                          F.div(x, c, (True, False))[1](np.ones(2))[0]):
                    assert list(np.signbit(g)) == [np.signbit(c)] * 2, c
    t = Tensor([1.0, 2.0], requires_grad=True)
    (t * -0.0 + t * 0.0).sum().backward()
    assert not np.signbit(t.grad.data).any()  # -0.0 + 0.0 is +0.0


@pytest.mark.parametrize("name", ["mul", "div"])
def test_a_kept_constant_rule_gives_numpys_own_values_and_dtypes(name: str) -> None:
    # The same constant met with arrays of several dtypes, in turn and again: each result (and
    # its cotangent) is bit for bit what NumPy 2 computes with the Python float itself (NEP 50: in
    # a float array's dtype, so 1e300 makes float32 inf; NumPy 1.x would widen to float64 instead).
    fn, op = getattr(F, name), {"mul": np.multiply, "div": np.divide}[name]
    arrays = [np.array([1.5, -2.0, 6e4], dtype) for dtype in (np.float64, np.float32, np.float16)]
    arrays.append(np.array([3, -4]))  # an integer array: a float constant makes it float64

    def weak(c: float, x: np.ndarray) -> Any:
        return np.array(c, x.dtype) if NUMPY1 and x.dtype.kind == "f" else c

    with np.errstate(over="ignore"):
        for x in arrays + arrays:
            for c in (0.3, 1e300):
                ans, vjp = fn(x, c, (True, False))
                want = op(x, weak(c, x))
                assert ans.dtype == want.dtype and ans.tobytes() == want.tobytes(), (x.dtype, c)
                g = np.ones(x.shape, want.dtype)
                assert vjp(g)[0].tobytes() == op(g, weak(c, g)).tobytes()
                if name == "mul":
                    ans, vjp = fn(c, x, (False, True))
                    assert ans.dtype == want.dtype and ans.tobytes() == want.tobytes()
                    assert vjp(g)[1].tobytes() == op(g, weak(c, g)).tobytes()
