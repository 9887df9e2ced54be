"""jacobian, hessian and hvp: against finite differences, hand-computed Hessians of quadratics, and
each other (hvp == hessian @ v)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_ops_helpers import FAST, SMALL, normal, numeric_grad, seeds, shapes, value

import leanpass as lp
from leanpass import Tensor


def numeric_jacobian(f: Callable[[np.ndarray], np.ndarray], x: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """Central differences, one input coordinate at a time: shape ``out.shape + x.shape``."""
    out_shape = np.shape(f(x))
    jac = np.zeros(out_shape + x.shape)
    for i in np.ndindex(x.shape):
        e = np.zeros_like(x)
        e[i] = eps
        jac[(Ellipsis,) + i] = (np.asarray(f(x + e)) - np.asarray(f(x - e))) / (2 * eps)
    return jac


def as_numpy(f: Callable[[Tensor], Tensor]) -> Callable[[np.ndarray], np.ndarray]:
    return lambda x: value(f(Tensor(x)))


VECTOR_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "tanh": lambda x: lp.tanh(x) * x,
    "softmax": lambda x: lp.softmax(x, axis=-1),
    "matmul": lambda x: (lp.sin(x).reshape(-1, 1) @ x.reshape(1, -1)).T,
    "sum_axis": lambda x: lp.sum(x * x, axis=0),
    "outer": lambda x: lp.einsum("i,j->ij", x.flatten(), lp.exp(x.flatten())),
    "scalar": lambda x: lp.logsumexp(x),
}


@FAST
@given(st.sampled_from(sorted(VECTOR_FUNCTIONS)), shapes.filter(lambda s: len(s) >= 1), seeds)
def test_jacobian_matches_finite_differences(name: str, shape: tuple[int, ...], seed: int) -> None:
    f = VECTOR_FUNCTIONS[name]
    x = normal(seed, shape)
    jac = lp.jacobian(f)(x)
    want = numeric_jacobian(as_numpy(f), x)
    assert jac.shape == want.shape
    np.testing.assert_allclose(jac, want, rtol=1e-5, atol=1e-7)


def test_jacobian_by_hand() -> None:
    a = np.array([[1.0, 2.0, 0.0], [0.0, -1.0, 3.0]])
    np.testing.assert_array_equal(lp.jacobian(lambda x: a @ x)(np.ones(3)), a)  # linear: J = A
    np.testing.assert_allclose(lp.jacobian(lambda x: x ** 2)(np.array([1.0, 3.0])), np.diag([2.0, 6.0]))
    assert lp.jacobian(lambda x: x ** 3)(2.0) == 12.0  # a scalar function of a scalar
    j = lp.jacobian(lambda x: lp.stack([x.sum(), (x * x).sum()]))(np.array([[1.0, 2.0]]))
    np.testing.assert_array_equal(j, [[[1.0, 1.0]], [[2.0, 4.0]]])  # shape out + in = (2, 1, 2)


def test_jacobian_edge_cases() -> None:
    x = np.array([1.0, 2.0])
    np.testing.assert_array_equal(lp.jacobian(lambda t: t[:0])(x), np.zeros((0, 2)))  # empty output
    np.testing.assert_array_equal(lp.jacobian(lambda t: Tensor([5.0, 6.0, 7.0]))(x), np.zeros((3, 2)))  # constant
    j = lp.jacobian(lambda t: t * 2.0)(Tensor(x))
    assert type(j) is Tensor  # a Tensor in, a Tensor out
    np.testing.assert_array_equal(value(j), 2 * np.eye(2))
    empty = lp.jacobian(lambda t: t[:0])(Tensor(x))
    assert type(empty) is Tensor and empty.shape == (0, 2)
    # a list is a pytree (as in JAX): one Jacobian block per leaf
    j = lp.jacobian(lambda t: t[0] * 3.0 + t[1])([1.0, 2.0])
    assert isinstance(j, list) and [float(b) for b in j] == [3.0, 1.0]
    np.testing.assert_array_equal(lp.hvp(lambda t: (t ** 2).sum())([1.0, 2.0], [1.0, 0.0]), [2.0, 0.0])
    pair = lp.jacobian(lambda t: (t, t * 2.0))(x)  # a tuple output: a tuple of Jacobians
    assert type(pair) is tuple
    np.testing.assert_array_equal(pair[1], 2 * np.eye(2))
    with pytest.raises(TypeError, match="jacobian: f must return arrays"):
        lp.jacobian(lambda t: "no")(x)
    np.testing.assert_array_equal(lp.hessian(lambda t: (t ** 2).sum())(np.array([1.0, 2.0])), 2 * np.eye(2))
    with pytest.raises(TypeError, match="floating-point"):
        lp.jacobian(lambda t: t * 2)(np.array([1, 2]))


# ----- Hessians ---------------------------------------------------------------------------------------------
@FAST
@given(st.integers(1, 5), seeds)
def test_hessian_of_a_quadratic_is_a_plus_a_transpose(n: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((n, n))  # not symmetric
    b = rng.standard_normal(n)
    x = rng.standard_normal(n)
    h = lp.hessian(lambda t: t @ (a @ t) + b @ t + 3.0)(x)
    np.testing.assert_allclose(h, a + a.T, rtol=1e-12, atol=1e-12)
    # (an entry near 0 is a difference of O(1) terms: its rounding is absolute, not relative)
    np.testing.assert_allclose(lp.grad(lambda t: t @ (a @ t))(x), (a + a.T) @ x, rtol=1e-12, atol=1e-12)
    h2 = lp.hessian(lambda t: lp.einsum("i,ij,j->", t, a, t))(x)  # the same quadratic, spelled as einsum
    np.testing.assert_allclose(h2, a + a.T, rtol=1e-12, atol=1e-12)


def test_hessians_by_hand() -> None:
    # f(x, y) = x^2 y + y^3  ->  [[2y, 2x], [2x, 6y]]
    h = lp.hessian(lambda v: v[0] ** 2 * v[1] + v[1] ** 3)(np.array([1.0, 2.0]))
    np.testing.assert_allclose(h, [[4.0, 2.0], [2.0, 12.0]])
    # 0.5 ||W x||^2 in x  ->  W^T W
    w = normal(0, (3, 2))
    np.testing.assert_allclose(lp.hessian(lambda t: 0.5 * ((w @ t) ** 2).sum())(np.ones(2)), w.T @ w)
    # a matrix argument: the Hessian has shape x.shape + x.shape
    assert lp.hessian(lambda m: (m ** 3).sum())(np.ones((2, 3))).shape == (2, 3, 2, 3)
    assert lp.hessian(lambda s: lp.exp(s * 2.0))(0.0) == pytest.approx(4.0)


SCALAR_FUNCTIONS: dict[str, Callable[[Any], Any]] = {
    "logsumexp": lambda x: lp.logsumexp(x),
    "log_softmax": lambda x: lp.log_softmax(x)[..., 0].sum(),
    "tanh_sq": lambda x: (lp.tanh(x) ** 2).sum(),
    "var": lambda x: lp.var(x) * lp.mean(x),
    "gelu": lambda x: lp.gelu(x).sum() * lp.sigmoid(x).mean(),
}


@SMALL
@given(st.sampled_from(sorted(SCALAR_FUNCTIONS)), st.integers(2, 4), seeds)
def test_hessian_matches_finite_differences_of_the_gradient(name: str, n: int, seed: int) -> None:
    f = SCALAR_FUNCTIONS[name]
    x = normal(seed, (n,))
    h = lp.hessian(f)(x)
    want = numeric_jacobian(lambda z: lp.grad(f)(z), x)
    np.testing.assert_allclose(h, want, rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(h, h.T, rtol=1e-9, atol=1e-12)  # Hessians are symmetric
    np.testing.assert_allclose(lp.grad(f)(x), numeric_grad(lambda z: float(value(f(Tensor(z)))), x), rtol=1e-5,
                               atol=1e-8)


def test_hessian_of_a_vector_function_is_each_output_s_hessian() -> None:
    # as in JAX: shape out.shape + x.shape + x.shape; for t * t, H[i, j, k] = 2 if i == j == k
    h = lp.hessian(lambda t: t * t)(np.ones(2))
    want = np.zeros((2, 2, 2))
    want[0, 0, 0] = want[1, 1, 1] = 2.0
    np.testing.assert_array_equal(h, want)


# ----- Hessian-vector products -------------------------------------------------------------------------------
@FAST
@given(st.sampled_from(sorted(SCALAR_FUNCTIONS)), st.integers(1, 4), seeds)
def test_hvp_matches_hessian_times_v(name: str, n: int, seed: int) -> None:
    f = SCALAR_FUNCTIONS[name]
    x, v = normal(seed, (n,)), normal(seed + 1, (n,))
    np.testing.assert_allclose(lp.hvp(f)(x, v), lp.hessian(f)(x) @ v, rtol=1e-10, atol=1e-12)


def test_hvp_of_a_quadratic_and_on_matrices() -> None:
    a = normal(0, (3, 3))
    x, v = normal(1, (3,)), normal(2, (3,))
    np.testing.assert_allclose(lp.hvp(lambda t: t @ (a @ t))(x, v), (a + a.T) @ v, rtol=1e-12)
    m, u = normal(3, (2, 3)), normal(4, (2, 3))
    f = lambda t: (lp.tanh(t) ** 2).sum()  # noqa: E731
    h = lp.hessian(f)(m).reshape(6, 6)
    np.testing.assert_allclose(lp.hvp(f)(m, u), (h @ u.ravel()).reshape(2, 3), rtol=1e-10, atol=1e-12)


def test_hvp_checks_the_shape_of_v() -> None:
    with pytest.raises(ValueError, match=r"hvp: v must have the shape of x, \(2,\)"):
        lp.hvp(lambda t: (t ** 2).sum())(np.ones(2), np.ones(3))


# ----- dtypes and composition -----------------------------------------------------------------------------------
def test_float32_stays_float32() -> None:
    x32 = np.array([0.5, -1.0, 2.0], np.float32)
    f = lambda t: (lp.tanh(t) * t).sum()  # noqa: E731
    assert lp.jacobian(lambda t: lp.tanh(t) * t)(x32).dtype == np.float32
    assert lp.hessian(f)(x32).dtype == np.float32
    assert lp.hvp(f)(x32, np.ones(3)).dtype == np.float32  # v is cast to x's dtype
    np.testing.assert_allclose(lp.hessian(f)(x32), lp.hessian(f)(x32.astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_jacobian_composes_with_grad() -> None:
    # d/dx sum(J(x)) for f = x^3 elementwise: J = diag(3x^2), sum = 3 sum x^2 -> 6x
    g = lp.grad(lambda x: lp.jacobian(lambda y: y ** 3)(x).sum())(np.array([1.0, 2.0]))
    np.testing.assert_allclose(g, [6.0, 12.0])
    # third derivative through hessian: d/dx sum(H) for sum(x^4) -> H = diag(12 x^2) -> 24x
    g3 = lp.grad(lambda x: lp.hessian(lambda y: (y ** 4).sum())(x).sum())(np.array([1.0, -1.0]))
    np.testing.assert_allclose(g3, [24.0, -24.0])
