"""Every way a gradient could quietly go to zero or go wrong either raises a clear error or is right.

The conversion rule: a Tensor being differentiated (``requires_grad``, or inside ``grad`` /
``vjp`` / ``jacobian``) cannot become a NumPy array or Python number behind the graph's back.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
import scipy.integrate
import scipy.special
import scipy.stats

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads

X = np.array([0.5, -1.5, 2.0])


def _raises_conversion(fn: Callable[[Any], Any], *, match: str = "stop_gradient") -> None:
    """``fn`` raises a ConversionError (a TypeError) both under ``grad`` and on a requires-grad Tensor."""
    with pytest.raises(TypeError, match=match):
        lp.grad(lambda x: lp.sum(fn(x)))(X.copy())
    with pytest.raises(TypeError, match=match):
        fn(Tensor(X, requires_grad=True))


# ----- values that leave the graph ----------------------------------------------------------------------------
LEAVING: dict[str, Callable[[Any], Any]] = {
    "np.array of a list": lambda x: np.array([x, x * 2]),
    "np.asarray of a list": lambda x: np.asarray([x, x]),
    "np.mean of a list": lambda x: np.mean([x, x + 2]),
    "np.r_": lambda x: np.r_[x, x],
    "np.c_": lambda x: np.c_[x, x],
    "np.append of nested lists": lambda x: np.append([[1.0, 2.0, 3.0]], [[x[0], x[1], x[2]]], axis=0),
    "Tensor of a list of Tensors": lambda x: Tensor([x[0] * 2.0, x[1]]),
    "Tensor of .numpy()": lambda x: Tensor(x.numpy() * 2),
    "np.full": lambda x: np.full(3, x[0]),
    "np.asarray": lambda x: np.asarray(x) * 2,
    "x.numpy()": lambda x: x.numpy(),
    "scipy.stats.norm.logpdf": lambda x: scipy.stats.norm.logpdf(x),
    "scipy.integrate.odeint": lambda x: scipy.integrate.odeint(lambda y, t: -y, x, [0.0, 1.0]),
}


@pytest.mark.parametrize("name", sorted(LEAVING))
def test_a_value_leaving_the_graph_raises_instead_of_a_zero_gradient(name: str) -> None:
    _raises_conversion(LEAVING[name])


def test_a_list_of_tensors_has_a_differentiable_spelling() -> None:
    # what the error message offers instead
    g = lp.grad(lambda x: (lp.stack([x, x * 2]) ** 2).sum())(X)
    np.testing.assert_allclose(g, 2 * X + 8 * X)


def test_the_error_names_scipy_and_the_fix() -> None:
    with pytest.raises(TypeError, match=r"scipy\.stats\.norm\.logpdf .*use lp\.stats\.norm\.logpdf"):
        lp.grad(lambda x: scipy.stats.norm.logpdf(x).sum())(X)
    with pytest.raises(TypeError, match=r"scipy\.special\.gammaln is not differentiable"):
        lp.grad(lambda x: scipy.special.gammaln(x).sum())(X)


@pytest.mark.parametrize("read", [float, int, lambda t: t.item(), lambda t: t.tolist(), lambda t: t.data,
                                  lambda t: t.numpy(), np.asarray, lambda t: [0, 1, 2][t]])
@pytest.mark.parametrize("transform", ["grad", "value_and_grad", "vjp", "jacobian"])
def test_reading_a_traced_value_inside_a_transform_raises(read: Callable[[Any], Any], transform: str) -> None:
    def f(x: Any) -> Any:
        read(x[0])
        return (x * 2.0).sum()

    run = {
        "grad": lambda: lp.grad(f)(X),
        "value_and_grad": lambda: lp.value_and_grad(f)(X),
        "vjp": lambda: lp.vjp(f, X),
        "jacobian": lambda: lp.jacobian(f)(X),
    }[transform]
    with pytest.raises(TypeError, match="being differentiated"):
        run()


def test_reading_a_finished_loss_for_logging_keeps_working() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    loss = (w * w).sum()
    assert loss.item() == 5.0 and float(loss) == 5.0  # before backward, as in PyTorch
    loss.backward()
    assert loss.item() == 5.0 and float(loss) == 5.0 and int(loss) == 5
    np.testing.assert_array_equal(loss.data, 5.0)  # .data: an explicit detached read, as in PyTorch
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 4.0])  # a gradient is a constant
    np.testing.assert_array_equal(w.detach().numpy(), [1.0, 2.0])
    value, g = lp.value_and_grad(lambda v: (v * v).sum())(np.array([3.0]))
    assert value.item() == 9.0 and float(value) == 9.0  # a transform's output is finished


def test_eager_requires_grad_refuses_numpy_as_pytorch_does() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    for read in (lambda t: t.numpy(), np.asarray, np.array):
        with pytest.raises(TypeError, match="requires grad"):
            read(w)
    with pytest.raises(TypeError, match="Tensor"):
        Tensor(w)
    np.testing.assert_array_equal(Tensor(w.detach()).numpy(), [1.0, 2.0])
    with lp.no_grad():  # no recording, but the parameter still requires grad
        with pytest.raises(TypeError, match="requires grad"):
            w.numpy()


def test_constants_convert_freely() -> None:
    t = Tensor([1.0, 2.0])
    assert np.asarray(t).tolist() == [1.0, 2.0] and t.numpy().tolist() == [1.0, 2.0]
    assert float(Tensor(2.5)) == 2.5 and Tensor([3]).item() == 3
    # inside a transform, a constant Tensor that is not being differentiated converts too
    assert lp.grad(lambda x: x * float(Tensor(2.0)))(1.0) == 2.0


def test_stop_gradient() -> None:
    assert lp.grad(lambda x: x * lp.stop_gradient(x))(3.0) == 3.0
    assert lp.grad(lambda x: (lp.stop_gradient(x) ** 2).sum())(X).tolist() == [0.0, 0.0, 0.0]
    y = lp.stop_gradient(Tensor([1.0], requires_grad=True))
    assert not y.requires_grad and y.numpy().tolist() == [1.0]
    assert lp.stop_gradient([1.0, 2.0]).numpy().tolist() == [1.0, 2.0]


# ----- complex numbers and non-float outputs -------------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda x: x * np.array(1j),
    lambda x: x + np.complex128(1j),
    lambda x: np.array([1j, 2j, 3j]) * x,
    lambda x: np.multiply(x, 1j),
    lambda x: x.astype(np.complex128),
    lambda x: x * 1j,
])
def test_complex_is_refused(make: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError, match="complex|real numbers"):
        lp.grad(lambda x: make(x).sum())(X)


@pytest.mark.parametrize("f", [lambda x: np.allclose(x, x), lambda x: (x > 0).sum(), lambda x: 3,
                               lambda x: np.array_equal(x, x)])
def test_grad_of_a_bool_or_int_output_raises(f: Callable[[Any], Any]) -> None:
    with pytest.raises(TypeError, match="floating-point scalar"):
        lp.grad(f)(X)


def test_grad_of_a_float_constant_is_zero() -> None:
    np.testing.assert_array_equal(lp.grad(lambda x: 3.0)(X), np.zeros(3))


# ----- rules at special points and orders ---------------------------------------------------------------------
def test_power_mixed_second_derivative_at_a_zero_exponent() -> None:
    h = lp.hessian(lambda v: v[0] ** v[1])(np.array([4.0, 0.0]))
    # d2/dx dy x**y = x**(y-1) (1 + y log x) = 1/4 at (4, 0); d2/dy2 = x**y log(x)**2
    np.testing.assert_allclose(h, [[0.0, 0.25], [0.25, np.log(4.0) ** 2]], rtol=1e-12)
    check_grads(lambda v: v[0] ** v[1], (np.array([4.0, 0.0]),), order=2)
    check_grads(lambda x, y: x ** y, (np.array([1.5, 2.0, 0.7]), np.array([0.0, 0.0, 3.0])), order=2)
    # at x = 0 with y = 0 the value is the constant 1: a zero, finite gradient
    assert lp.grad(lambda x: x ** 0.0)(0.0) == 0.0
    assert lp.grad(lambda v: (v[0] ** v[1]))(np.array([0.0, 0.0]))[0] == 0.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_high_order_derivatives_of_division_stay_accurate(dtype: Any) -> None:
    def nth(f: Callable[[Any], Any], n: int) -> Callable[[Any], Any]:
        for _ in range(n):
            f = lp.grad(f)
        return f

    x = dtype(4.0)
    for n in range(1, 8):
        exact = (-1.0) ** n * np.prod(np.arange(1, n + 1)) / 4.0 ** (n + 1)  # d^n/dx^n 1/x
        by_div = nth(lambda t: 1.0 / t, n)(x)
        by_pow = nth(lambda t: t ** -1.0, n)(x)
        assert np.sign(by_div) == np.sign(exact)
        np.testing.assert_allclose(by_div, exact, rtol=1e-5 if dtype == np.float32 else 1e-12)
        assert abs(by_div - exact) <= 4 * abs(by_pow - exact) + 1e-7 * abs(exact)  # as good as x ** -1.0


INF = np.array([-np.inf, -1e4, -1.0, 0.0, 1.0, 1e4, np.inf])


@pytest.mark.parametrize(("name", "slope"), [
    ("softplus", [0, 0, 0.26894142, 0.5, 0.73105858, 1, 1]),
    ("sigmoid", [0, 0, 0.19661193, 0.25, 0.19661193, 0, 0]),
    ("tanh", [0, 0, 0.41997434, 1, 0.41997434, 0, 0]),
    ("gelu", [0, 0, -0.08296408, 0.5, 1.08296408, 1, 1]),
])
def test_elementwise_rules_are_finite_at_infinity_to_third_order(name: str, slope: list[float]) -> None:
    fn = getattr(lp, name)
    g1 = lp.grad(lambda x: fn(x).sum())
    np.testing.assert_allclose(g1(INF.copy()), slope, atol=1e-8)
    g2 = lp.grad(lambda x: g1(x).sum())
    g3 = lp.grad(lambda x: g2(x).sum())
    for g in (g2, g3):
        assert np.isfinite(g(INF.copy())).all()
    assert np.isfinite(fn(Tensor(INF)).numpy()).sum() >= 5  # values: only +-inf where the function is


@pytest.mark.parametrize("v", [[np.inf, 0.0], [0.0, np.inf], [np.inf, np.inf], [-np.inf, 0.0], [1e4, -1e4]])
def test_softmax_family_takes_the_limit_at_infinity(v: list[float]) -> None:
    x = np.array(v)
    far = np.where(np.isinf(x), np.sign(x) * 800.0, x)  # the same ordering, far out (exp underflows)
    for f in (lp.logsumexp, lambda t: lp.softmax(t)[0], lambda t: lp.log_softmax(t)[1],
              lambda t: lp.losses.cross_entropy(t.reshape(1, -1), np.array([0]))):
        g = lp.grad(f)(x)
        g2 = lp.grad(lambda t, f=f: lp.grad(f)(t).sum())(x)
        np.testing.assert_allclose(g, lp.grad(f)(far), atol=1e-12)  # the limit, not nan
        np.testing.assert_allclose(g2, lp.grad(lambda t, f=f: lp.grad(f)(t).sum())(far), atol=1e-12)
    np.testing.assert_allclose(lp.softmax(Tensor(x)).numpy(), lp.softmax(Tensor(far)).numpy(), atol=1e-12)


# ----- transforms inside rules and pull-backs ------------------------------------------------------------------
def _cube(x: Any) -> Any:
    """A custom op whose VJP rule itself calls lp.grad."""
    def vjp(g: Any) -> Any:
        return (lp.grad(lambda y: (y ** 3 * g).sum())(x),)
    return x ** 3, vjp


def test_a_transform_inside_a_custom_rule_differentiates_again() -> None:
    x = np.array([1.0, 2.0])

    def f(t: Any) -> Any:
        return lp.apply(_cube, "cube", t).sum()

    np.testing.assert_allclose(lp.grad(f)(x), 3 * x ** 2)
    # d/dx sum((3 x^2)^2) = 36 x^3
    np.testing.assert_allclose(lp.grad(lambda t: (lp.grad(f)(t) ** 2).sum())(x), 36 * x ** 3)
    np.testing.assert_allclose(lp.hessian(f)(x), np.diag(6 * x))
    w = Tensor(x, requires_grad=True)
    f(w).backward(create_graph=True)  # the eager door: .grad itself differentiable
    (w.grad ** 2).sum().backward()
    np.testing.assert_allclose(w.grad.detach().numpy(), 3 * x ** 2 + 36 * x ** 3)


def test_a_vjp_pull_back_differentiates_under_grad() -> None:
    x = np.array([1.0, 2.0])
    _, pull = lp.vjp(lambda t: t ** 2, x)
    np.testing.assert_allclose(lp.grad(lambda c: pull(c)[0].sum())(np.ones(2)), 2 * x)
    np.testing.assert_allclose(lp.jacobian(lambda c: pull(c)[0])(np.ones(2)), np.diag(2 * x))


# ----- Jacobians and Hessians over pytrees -----------------------------------------------------------------------
def test_hessian_over_a_dict_of_parameters_is_a_dict_of_dicts() -> None:
    params = {"w": np.array([1.0, 2.0]), "b": np.array(0.5)}
    x = np.array([0.3, -0.7])

    def loss(p: Any) -> Any:
        return ((p["w"] * x).sum() + p["b"]) ** 2

    h = lp.hessian(loss)(params)
    assert set(h) == {"w", "b"} and set(h["w"]) == {"w", "b"}
    assert h["w"]["w"].shape == (2, 2) and h["w"]["b"].shape == (2,) and h["b"]["w"].shape == (2,)
    np.testing.assert_allclose(h["w"]["w"], 2 * np.outer(x, x))
    np.testing.assert_allclose(h["w"]["b"], 2 * x)
    np.testing.assert_allclose(h["b"]["b"], 2.0)


def test_jacobian_argnums_has_aux_and_pytree_outputs() -> None:
    x, y = np.array([1.0, 2.0]), np.array(3.0)

    def f(a: Any, b: Any) -> Any:
        return {"prod": a * b, "sum": (a + b).sum()}, "aux"

    j, aux = lp.jacobian(f, argnums=(0, 1), has_aux=True)(x, y)
    assert aux == "aux"  # JAX's structure: the output's tree, a tuple (one per argnum) at each leaf
    assert set(j) == {"prod", "sum"} and type(j["prod"]) is tuple
    np.testing.assert_allclose(j["prod"][0], 3.0 * np.eye(2))
    np.testing.assert_allclose(j["prod"][1], x)
    np.testing.assert_allclose(j["sum"][0], [1.0, 1.0])
    np.testing.assert_allclose(j["sum"][1], 2.0)
    j = lp.jacobian(lambda a, b: a * b, argnums=1)(x, y)  # one argnum: no tuple
    np.testing.assert_allclose(j, x)
    h, aux = lp.hessian(lambda a: ((a ** 3).sum(), a.shape), has_aux=True)(x)
    np.testing.assert_allclose(h, np.diag(6 * x))
    assert aux == (2,)
    with pytest.raises(ValueError, match="argnums"):
        lp.jacobian(lambda a: a, argnums=2)(x)


def test_hessian_matches_finite_differences_over_a_model() -> None:
    model = lp.nn.Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float64)
    xb = np.random.default_rng(1).standard_normal((4, 3))

    def loss(m: Any) -> Any:
        return (lp.tanh(m(xb)) ** 2).mean()

    h = lp.hessian(loss)(model)
    assert h.weight.weight.shape == (3, 2, 3, 2) and h.weight.bias.shape == (3, 2, 2)
    flat = lambda m: np.concatenate([m.weight.numpy().ravel(), m.bias.numpy().ravel()])  # noqa: E731
    blocks = np.block([[h.weight.weight.numpy().reshape(6, 6), h.weight.bias.numpy().reshape(6, 2)],
                       [h.bias.weight.numpy().reshape(2, 6), h.bias.bias.numpy().reshape(2, 2)]])
    base = flat(model)
    eps = 1e-5

    def grad_at(v: np.ndarray) -> np.ndarray:
        m = lp.nn.Linear(3, 2, rng=np.random.default_rng(0), dtype=np.float64)
        m = lp.tree_unflatten(lp.tree_flatten(m)[1], [Tensor(v[:6].reshape(3, 2)), Tensor(v[6:])])
        return flat(lp.grad(loss)(m))

    numeric = np.stack([(grad_at(base + eps * e) - grad_at(base - eps * e)) / (2 * eps) for e in np.eye(8)])
    np.testing.assert_allclose(blocks, numeric.T, atol=1e-7)
    np.testing.assert_allclose(blocks, blocks.T, atol=1e-12)


def test_a_cast_to_integers_has_no_gradient() -> None:
    # rounding is flat: the cast back to float carries no slope (a recorded cast would pass g through)
    x = np.array([1.5, 2.5])
    np.testing.assert_array_equal(lp.grad(lambda t: (t.astype(int).astype(float) * t).sum())(x), [1.0, 2.0])
    np.testing.assert_array_equal(lp.grad(lambda t: lp.astype(t, np.int32).sum() * 1.0 + t.sum())(x), [1.0, 1.0])
    idx = lp.grad(lambda t: t[lp.astype(t * 0.0, int)].sum())(x)  # an integer index made from a traced value
    np.testing.assert_array_equal(idx, [2.0, 0.0])


def test_copying_a_computed_tensor_would_drop_its_history_and_raises() -> None:
    import copy
    import pickle

    w = Tensor([1.0, 2.0], requires_grad=True)
    assert copy.deepcopy(w).requires_grad  # a leaf copies, as in PyTorch
    for dup in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="copy"):
            dup(w * 2.0)
        with pytest.raises(TypeError, match="copy"):
            lp.grad(lambda t, dup=dup: dup(t).sum())(X)


EDGES = np.array([-np.inf, -1e4, -1.0, -0.5, 0.0, 0.5, 1.0, 1e4, np.inf])


def _elementwise_ops() -> list[str]:
    from leanpass.functional.elementwise import ELEMENTWISE

    return sorted(ELEMENTWISE) + ["sigmoid", "tanh", "softplus", "gelu", "exp", "log", "sqrt", "abs", "relu",
                                  "sin", "cos", "square", "logaddexp", "maximum", "minimum", "*", "/", "**"]


@pytest.mark.parametrize("name", _elementwise_ops())
def test_no_nan_gradient_where_the_value_is_a_number(name: str) -> None:
    """At +-inf and the edges of each domain: where an op's value is not nan, neither are its
    first and second derivatives (the ``inf - inf`` and ``0 * inf`` traps)."""
    import warnings

    from leanpass import functional as F

    op = F.OPS[name]
    two = op.__code__.co_argcount - len(op.__defaults__ or ()) >= 2  # (inputs: the parameters without defaults)
    xs, ys = (np.repeat(EDGES, len(EDGES)), np.tile(EDGES, len(EDGES))) if two else (EDGES, None)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # values outside a domain are nan, and may warn
        args = (xs, ys) if two else (xs,)
        value = np.asarray(getattr(op(*args)[0], "data", op(*args)[0]))

        def first(*a: Any) -> Any:
            return lp.grad(lambda *t: lp.apply(op, name, *t).sum(), argnums=tuple(range(len(a))))(*a)

        def second(*a: Any) -> Any:
            return lp.grad(lambda *t: sum(g.sum() for g in lp.grad(
                lambda *u: lp.apply(op, name, *u).sum(), argnums=tuple(range(len(a))))(*t)),
                argnums=tuple(range(len(a))))(*a)

        slopes = first(*args)
        for g in slopes:
            bad = ~np.isnan(value) & np.isnan(g)
            assert not bad.any(), f"{name}: nan gradient at {[a[bad] for a in args]}"
        smooth = ~np.isnan(value) & np.all([np.isfinite(g) for g in slopes], axis=0)  # (a finite first slope)
        for g in second(*args):
            bad = smooth & np.isnan(g)
            assert not bad.any(), f"{name}: nan second derivative at {[a[bad] for a in args]}"
