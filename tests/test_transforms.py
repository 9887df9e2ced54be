"""``grad``, ``value_and_grad`` and ``vjp``: pytrees, argnums, has_aux, higher order, nesting."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor

grad, value_and_grad, vjp = lp.grad, lp.value_and_grad, lp.vjp


# ----- basics -------------------------------------------------------------------------------------


def test_grad_of_a_float_is_a_numpy_scalar() -> None:
    g = grad(lambda x: x**3)(2.0)
    assert g == pytest.approx(12.0)
    assert type(g) is not Tensor
    assert isinstance(g, np.floating) and np.ndim(g) == 0


def test_grad_of_an_array_is_an_array_of_its_shape_and_dtype() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0]])
    g = grad(lambda w: (w * w).sum())(x)
    assert type(g) is np.ndarray and g.shape == (2, 2) and g.dtype == np.float64
    np.testing.assert_array_equal(g, 2 * x)


def test_grad_of_a_tensor_is_a_constant_tensor_and_leaves_its_grad_alone() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    g = grad(lambda w: (w * w).sum())(x)
    assert type(g) is Tensor and not g.requires_grad
    np.testing.assert_array_equal(g.numpy(), [2.0, 4.0])
    assert x.grad is None
    g = grad(lambda w: (w * w).sum())(Tensor([3.0]))  # a Tensor that does not require grad
    np.testing.assert_array_equal(g.numpy(), [6.0])


def test_grad_does_not_change_the_users_array() -> None:
    x = np.array([1.0, 2.0])
    grad(lambda w: (w.exp() * w).sum())(x)
    assert x.flags.writeable
    np.testing.assert_array_equal(x, [1.0, 2.0])


def test_the_gradient_of_the_output_itself_is_a_read_only_one_that_stays_one() -> None:
    # A scalar loss's seed is shared between calls; it reaches the caller only read-only.
    for x in (np.array(2.0), np.array(2.0, np.float32), Tensor(2.0)):
        g = lp.grad(lambda v: v)(x)
        data = g.numpy() if type(g) is Tensor else g
        assert data == 1.0 and data.dtype == np.asarray(x).dtype and not data.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            data[...] = 5.0
        assert lp.grad(lambda v: v)(x) == 1.0


def test_grad_of_a_function_that_ignores_its_input_is_zero() -> None:
    assert grad(lambda x: 5.0)(3.0) == 0.0
    np.testing.assert_array_equal(grad(lambda x, y: (y * 2.0).sum())(np.ones(2), np.ones(3)), np.zeros(2))


def test_value_and_grad() -> None:
    value, g = value_and_grad(lambda w: (w * w).sum())(np.array([1.0, 2.0]))
    assert type(value) is Tensor and value.item() == 5.0 and not value.requires_grad
    np.testing.assert_array_equal(g, [2.0, 4.0])


def test_keyword_arguments_pass_through() -> None:
    def f(x: Any, *, scale: float) -> Any:
        return (x * scale).sum()

    np.testing.assert_array_equal(grad(f)(np.ones(2), scale=3.0), [3.0, 3.0])


def test_vjp_basic_and_repeatable() -> None:
    out, pull = vjp(lambda x, y: x * y, np.array([1.0, 2.0]), np.array([3.0, 4.0]))
    np.testing.assert_array_equal(out.numpy(), [3.0, 8.0])
    gx, gy = pull(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(gx, [3.0, 40.0])
    np.testing.assert_array_equal(gy, [1.0, 20.0])
    gx2, _ = pull(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(gx2, gx)


def test_vjp_with_pytree_output_and_a_tensor_cotangent() -> None:
    out, pull = vjp(lambda a: {"sq": a * a, "parts": [a.sum(), a * 3.0]}, np.array([1.0, 2.0]))
    assert set(out) == {"sq", "parts"}
    (g,) = pull({"sq": np.ones(2), "parts": [Tensor(1.0), np.zeros(2)]})
    np.testing.assert_array_equal(g, [2.0 + 1.0, 4.0 + 1.0])


def test_vjp_has_aux() -> None:
    out, pull, aux = vjp(lambda x: (x * 2.0, {"note": x.sum()}), np.ones(3), has_aux=True)
    np.testing.assert_array_equal(pull(np.ones(3))[0], [2.0, 2.0, 2.0])
    assert aux["note"].item() == 3.0 and not aux["note"].requires_grad


# ----- pytrees, argnums, has_aux ---------------------------------------------------------------------


def test_grad_of_a_pytree_keeps_the_structure_and_leaf_kinds() -> None:
    params = {
        "w": Tensor([1.0, 2.0]),
        "layers": [np.array([[1.0]]), (3.0, np.array(0.5))],
        "b": np.array([0.0, 1.0]),
    }

    def loss(p: Any, x: Any) -> Any:
        w, (m, (s, t)), b = p["w"], p["layers"], p["b"]
        return ((w * x + b) * s).sum() + (m * t).sum() + s * t

    g = grad(loss)(params, np.array([10.0, 20.0]))
    assert list(g) == ["w", "layers", "b"]
    assert type(g["layers"]) is list and type(g["layers"][1]) is tuple
    assert type(g["w"]) is Tensor and type(g["b"]) is np.ndarray
    assert type(g["layers"][0]) is np.ndarray and g["layers"][0].shape == (1, 1)
    assert isinstance(g["layers"][1][0], np.floating)
    np.testing.assert_allclose(g["w"].numpy(), [30.0, 60.0])
    np.testing.assert_allclose(g["b"], [3.0, 3.0])
    np.testing.assert_allclose(g["layers"][0], [[0.5]])
    assert g["layers"][1][0] == pytest.approx(10 + 40 + 1.0 + 0.5)  # d/ds
    assert float(g["layers"][1][1]) == pytest.approx(1.0 + 3.0)  # d/dt


class Params(NamedTuple):
    w: Any
    b: Any


def test_grad_of_a_namedtuple_and_none_leaves() -> None:
    g = grad(lambda p: (p.w * 2.0).sum() + p.b)(Params(np.ones(2), 1.0))
    assert type(g) is Params
    np.testing.assert_array_equal(g.w, [2.0, 2.0])
    assert g.b == 1.0
    g2 = grad(lambda p: p["x"] * 2.0)({"x": 1.0, "unused": None})
    assert g2 == {"x": 2.0, "unused": None}


@pytest.mark.parametrize(
    ("argnums", "want"),
    [(0, 6.0), (1, 1.0), (-1, 1.0), ((0, 1), (6.0, 1.0)), ((1, 0), (1.0, 6.0)), ((1,), (1.0,))],
)
def test_argnums(argnums: Any, want: Any) -> None:
    g = grad(lambda x, y: x * x * y, argnums=argnums)(1.0, 3.0)
    if isinstance(want, tuple):
        assert type(g) is tuple and len(g) == len(want)
        for gi, wi in zip(g, want):
            assert gi == pytest.approx(wi)
    else:
        assert g == pytest.approx(want)


def test_argnums_tuple_with_pytrees() -> None:
    def f(p: Any, x: Any, y: Any) -> Any:
        return (p["a"] * x).sum() + y

    gp, gy = grad(f, argnums=(0, 2))({"a": np.array([1.0, 2.0])}, np.array([3.0, 4.0]), 5.0)
    np.testing.assert_array_equal(gp["a"], [3.0, 4.0])
    assert gy == 1.0


def test_has_aux() -> None:
    def loss(w: Any) -> Any:
        pred = w * 2.0
        return (pred * pred).sum(), {"pred": pred, "n": 2}

    g, aux = grad(loss, has_aux=True)(np.array([1.0, 3.0]))
    np.testing.assert_array_equal(g, [8.0, 24.0])
    np.testing.assert_array_equal(aux["pred"].numpy(), [2.0, 6.0])
    assert aux["n"] == 2 and not aux["pred"].requires_grad
    (value, aux2), g2 = value_and_grad(loss, has_aux=True)(np.array([1.0, 3.0]))
    assert value.item() == 40.0
    np.testing.assert_array_equal(g2, g)
    assert aux2["n"] == 2


def test_value_and_grad_with_argnums_tuple() -> None:
    value, (gx, gy) = value_and_grad(lambda x, y: (x * y).sum(), argnums=(0, 1))(np.ones(2), np.full(2, 3.0))
    assert value.item() == 6.0
    np.testing.assert_array_equal(gx, [3.0, 3.0])
    np.testing.assert_array_equal(gy, [1.0, 1.0])


# ----- higher order ----------------------------------------------------------------------------------

X0 = 0.7
SIG = 1 / (1 + np.exp(-X0))
SECOND: dict[str, tuple[Callable[[Any], Any], float]] = {
    "+": (lambda x: x * x + x + 1.0, 2.0),
    "-": (lambda x: 1.0 - x * x * x - x, -6 * X0),
    "*": (lambda x: x * x * x, 6 * X0),
    "/": (lambda x: 2.0 / x + x / 4.0, 4 / X0**3),
    "** 3": (lambda x: x**3, 6 * X0),
    "** 2": (lambda x: x**2, 2.0),
    "** 0.5": (lambda x: x**0.5, -0.25 * X0**-1.5),
    "** -1": (lambda x: x**-1, 2 * X0**-3),
    "** tensor": (lambda x: x**x, X0**X0 * ((np.log(X0) + 1) ** 2 + 1 / X0)),
    "number ** x": (lambda x: 2.0**x, 2**X0 * np.log(2) ** 2),
    "@": (lambda x: ((x * np.ones((2, 2))) @ (x * np.ones(2))).sum(), 2 * 4.0),
    "@ batched": (lambda x: ((x * np.ones((3, 2, 2))) @ (x * np.ones((2, 1)))).sum(), 2 * 12.0),
    "neg": (lambda x: -(x * x), -2.0),
    "sum": (lambda x: (x * x * np.ones(3)).sum(), 6.0),
    "mean": (lambda x: (x * x * np.ones((2, 3))).mean(axis=0).sum(), 6.0),
    "relu": (lambda x: (x * x * x).relu(), 6 * X0),
    "exp": (lambda x: (2.0 * x).exp(), 4 * np.exp(2 * X0)),
    "log": (lambda x: x.log(), -1 / X0**2),
    "sigmoid": (lambda x: x.sigmoid(), SIG * (1 - SIG) * (1 - 2 * SIG)),
}


@pytest.mark.parametrize("name", list(SECOND))
def test_grad_of_grad_for_every_core_op(name: str) -> None:
    f, want = SECOND[name]
    assert float(grad(grad(f))(X0)) == pytest.approx(want, rel=1e-10)


@pytest.mark.parametrize("name", list(SECOND))
def test_grad_of_grad_matches_finite_differences_of_grad(name: str) -> None:
    f, _ = SECOND[name]
    eps = 1e-6
    fd = (float(grad(f)(X0 + eps)) - float(grad(f)(X0 - eps))) / (2 * eps)
    assert float(grad(grad(f))(X0)) == pytest.approx(fd, rel=1e-6, abs=1e-8)


def test_third_order() -> None:
    assert float(grad(grad(grad(lambda x: x**4)))(2.0)) == pytest.approx(48.0)
    assert float(grad(grad(grad(lambda x: x.exp() * x)))(0.0)) == pytest.approx(3.0)


def test_grad_of_grad_on_vectors_is_a_hessian_row_sum() -> None:
    a = np.array([[2.0, 1.0], [1.0, 3.0]])

    def f(w: Any) -> Any:
        return ((w @ a) * w).sum() * 0.5 + (w * w * w).sum()  # Hessian a + diag(6 w)

    w = np.array([0.5, -1.0])
    h_sum = grad(lambda v: grad(f)(v).sum())(w)
    np.testing.assert_allclose(h_sum, (a + np.diag(6 * w)).sum(axis=0))


def test_no_perturbation_confusion() -> None:
    assert grad(lambda x: grad(lambda y: x * y)(x))(3.0) == 1.0
    assert grad(lambda x: grad(lambda y: x * y)(2.0))(3.0) == 1.0
    # d/dx [x * (d/dy (x + y))] = d/dx x = 1
    assert grad(lambda x: x * grad(lambda y: x + y)(1.0))(2.0) == 1.0
    # d/dx [d/dy (x * y^2) at y=x] = d/dx 2 x y |_{y=x} = d/dx 2 x^2 = 4 x
    assert grad(lambda x: grad(lambda y: x * y * y)(x))(3.0) == pytest.approx(12.0)


def test_no_perturbation_confusion_with_tensors_and_closures() -> None:
    x0 = Tensor(3.0, requires_grad=True)
    g = grad(lambda x: grad(lambda y: x * y)(x))(x0)
    assert type(g) is Tensor and g.item() == 1.0
    assert x0.grad is None

    w = Tensor(2.0, requires_grad=True)  # a closure that requires grad: a different trace
    assert grad(lambda x: grad(lambda y: w * x * y)(1.0))(3.0) == 2.0
    assert w.grad is None


def test_vjp_inside_grad() -> None:
    def f(x: Any) -> Any:
        _, pull = vjp(lambda y: y * y * x, x)
        return pull(Tensor(1.0))[0]  # d/dy (y^2 x) at y = x: 2 x^2 (3 x^2 would be confusion)

    assert float(grad(f)(2.0)) == pytest.approx(8.0)  # 4 x


def test_grad_of_value_and_grad() -> None:
    def f(x: Any) -> Any:
        v, g = value_and_grad(lambda y: y**3)(x)
        return v + g

    assert float(grad(f)(2.0)) == pytest.approx(3 * 4.0 + 6 * 2.0)


@pytest.mark.parametrize("arg", [3, np.array([1, 2]), np.array(True)])
def test_integer_inputs_to_grad_are_a_type_error(arg: Any) -> None:
    with pytest.raises(TypeError, match="floating-point"):
        grad(lambda x: (x * 2.0).sum())(arg)


def test_integer_arguments_not_differentiated_are_fine() -> None:
    g = grad(lambda x, n: (x**n).sum(), argnums=0)(np.array([2.0]), 3)
    np.testing.assert_array_equal(g, [12.0])


def test_float32_inputs_give_float32_gradients() -> None:
    x = np.array([1.0, 2.0], np.float32)
    g = grad(lambda w: (w.sigmoid() * w).sum())(x)
    assert g.dtype == np.float32
    gg = grad(lambda w: grad(lambda v: (v**3).sum())(w).sum())(x)
    assert gg.dtype == np.float32
    np.testing.assert_allclose(gg, 6 * x)


def test_vjp_does_not_lock_or_return_the_users_cotangent() -> None:
    u = np.array([3.0, 4.0])
    _, pull = vjp(lambda t: t + 0.0, np.array([1.0, 2.0]))
    (g,) = pull(u)
    assert u.flags.writeable
    assert not np.shares_memory(g, u)
    np.testing.assert_array_equal(g, [3.0, 4.0])
    u2 = np.array([5.0, 6.0])
    _, pull = vjp(lambda t: t, np.array([1.0, 2.0]))  # the identity function
    pull(u2)
    assert u2.flags.writeable


# ----- ops of the user's own (lp.apply) at higher order --------------------------------------------


def _cube(x: Any) -> tuple[Any, Any]:
    """``x ** 3`` written with NumPy operators only, so that it can be replayed on Tensors."""
    return x * x * x, lambda g: (g * 3.0 * x * x,)


def test_custom_op_first_and_second_order() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    lp.apply(_cube, "cube", x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [3.0, 12.0])
    g2 = grad(lambda t: grad(lambda s: lp.apply(_cube, "cube", s).sum())(t).sum())(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g2, [6.0, 12.0])
    y = Tensor(2.0, requires_grad=True)
    lp.apply(_cube, "cube", y).backward(create_graph=True)
    first = y.grad
    y.grad = None
    first.backward()
    assert y.grad.item() == pytest.approx(12.0)


def test_check_grads_order_2_on_a_custom_op() -> None:
    from leanpass.testing import check_grads

    check_grads(lambda t: lp.apply(_cube, "cube", t), [np.array([0.5, -1.5])], order=2)


def test_custom_op_parameters_passed_as_arguments_replay_correctly() -> None:
    def scaled_cube(s: float, x: Any) -> tuple[Any, Any]:
        return s * x * x * x, lambda g: (None, g * 3.0 * s * x * x)

    def f(x: Any) -> Any:
        return lp.apply(scaled_cube, "scaled_cube_args", 2.0, x) + lp.apply(scaled_cube, "scaled_cube_args", 3.0, x)

    assert float(grad(f)(1.0)) == pytest.approx(15.0)
    assert float(grad(grad(f))(1.0)) == pytest.approx(30.0)


def test_custom_op_may_not_take_a_built_in_name() -> None:
    with pytest.raises(ValueError, match=r"'exp' is the name of a built-in op"):
        lp.apply(_cube, "exp", Tensor([1.0], requires_grad=True))
