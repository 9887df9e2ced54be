"""Forward mode and whole Jacobians: ``jvp`` against central finite differences and against
``vjp`` transposed over hypothesis-chosen programs and broadcasting shapes; ``jacfwd`` against
``jacrev``; second order (``jvp`` of ``grad``, ``grad`` of ``jvp``, ``jacfwd`` of ``jacrev``);
perturbation confusion; pytrees; the ops without a rule of their own; bad input."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_ops_helpers import bshapes, normal, seeds
from test_random_programs import SHAPE, Y_SHAPES, _held, _program, steps

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads

PROPS = settings(max_examples=25, deadline=None)


def arr(t: Any) -> np.ndarray:
    return np.asarray(t._data if type(t) is Tensor else t, dtype=np.float64)


def inner(a: Any, b: Any) -> float:
    return float(np.sum(arr(a) * arr(b)))


# ----- hypothesis-chosen programs ------------------------------------------------------------------------------
# Each step maps the running value v (and the inputs x, y, which broadcast together) to a new value.
STEPS: dict[str, Callable[[Any, Any, Any], Any]] = {
    "tanh": lambda v, x, y: lp.tanh(v),
    "sin": lambda v, x, y: lp.sin(v) * y,
    "sigmoid": lambda v, x, y: lp.sigmoid(v + x),
    "softplus": lambda v, x, y: lp.softplus(v) - y,
    "gauss": lambda v, x, y: lp.exp(-v * v),
    "ratio": lambda v, x, y: v / (1.0 + y * y),
    "power": lambda v, x, y: (v * v + 1.0) ** 0.75,  # (** 1.5 four times over grows to 1e9: beyond finite differences)
    "logaddexp": lambda v, x, y: lp.logaddexp(v, x),
    "gelu": lambda v, x, y: lp.gelu(v) * x,
    "square": lambda v, x, y: lp.square(v - y) * 0.5,
    "np.cos": lambda v, x, y: np.cos(v) + x,
}
ENDS: dict[str, Callable[[Any], Any]] = {
    "none": lambda v: v,
    "sum0": lambda v: v.sum(axis=0) if v.ndim else v,
    "mean": lambda v: lp.mean(v, keepdims=True),
    "logsumexp": lambda v: lp.logsumexp(v, axis=-1) if v.ndim else v,
    "softmax": lambda v: lp.softmax(v, axis=-1) if v.ndim else v,
    "reshape": lambda v: v.reshape(-1)[::-1],
    "stack": lambda v: lp.stack([v, v * 2.0]),
}


@st.composite
def programs(draw: Any) -> tuple[Callable[[Any, Any], Any], np.ndarray, np.ndarray]:
    steps = draw(st.lists(st.sampled_from(sorted(STEPS)), min_size=1, max_size=4))
    end = draw(st.sampled_from(sorted(ENDS)))
    sx, sy = draw(bshapes(2))
    seed = draw(seeds)

    def f(x: Any, y: Any) -> Any:
        v = x * y
        for s in steps:
            v = STEPS[s](v, x, y)
        return ENDS[end](v)

    return f, normal(seed, tuple(sx)), normal(seed + 1, tuple(sy))


@PROPS
@given(programs(), seeds)
def test_jvp_matches_central_finite_differences(program: Any, seed: int) -> None:
    f, x, y = program
    tx, ty = normal(seed, x.shape), normal(seed + 1, y.shape)
    out, t_out = lp.jvp(f, (x, y), (tx, ty))
    np.testing.assert_allclose(arr(out), arr(f(Tensor(x), Tensor(y))), rtol=1e-12)
    eps = 1e-6
    plus, minus = arr(f(Tensor(x + eps * tx), Tensor(y + eps * ty))), arr(f(Tensor(x - eps * tx), Tensor(y - eps * ty)))
    assert t_out.shape == out.shape
    np.testing.assert_allclose(arr(t_out), (plus - minus) / (2 * eps), rtol=1e-5, atol=1e-7)


@PROPS
@given(programs(), seeds)
def test_jvp_is_vjp_transposed(program: Any, seed: int) -> None:
    f, x, y = program
    tx, ty = normal(seed, x.shape), normal(seed + 1, y.shape)
    out, t_out = lp.jvp(f, (x, y), (tx, ty))
    c = normal(seed + 2, out.shape)
    gx, gy = lp.vjp(f, x, y)[1](c)
    assert inner(t_out, c) == pytest.approx(inner(tx, gx) + inner(ty, gy), rel=1e-10, abs=1e-12)


@PROPS
@given(programs(), seeds)
def test_second_order_forward_and_reverse_agree(program: Any, seed: int) -> None:
    f, x, y = program
    tx, ty = normal(seed, x.shape), normal(seed + 1, y.shape)
    c = normal(seed + 2, np.shape(arr(f(Tensor(x), Tensor(y)))))

    def scalar(a: Any, b: Any) -> Any:
        return (f(a, b) * c).sum()

    both = lp.grad(scalar, argnums=(0, 1))
    _, (hx, hy) = lp.jvp(both, (x, y), (tx, ty))  # forward over reverse
    rx, ry = lp.grad(lambda a, b: sum((g * t).sum() for g, t in zip(both(a, b), (tx, ty))), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(arr(hx), arr(rx), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(arr(hy), arr(ry), rtol=1e-9, atol=1e-10)
    # grad of jvp, and its second order, against finite differences
    check_grads(lambda a, b: lp.jvp(f, (a, b), (tx, ty))[1], [x, y], order=2, rtol=1e-4, atol=1e-6)


@PROPS
@given(programs())
def test_jacfwd_equals_jacrev(program: Any) -> None:
    f, x, y = program
    fwd = lp.jacfwd(f, argnums=(0, 1))(x, y)
    rev = lp.jacrev(f, argnums=(0, 1))(x, y)
    out_shape = np.shape(arr(f(Tensor(x), Tensor(y))))
    for a, b, p in zip(fwd, rev, (x, y)):
        assert a.shape == b.shape == out_shape + p.shape
        np.testing.assert_allclose(a, b, rtol=1e-10, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(programs())
def test_hessians_agree_in_every_mode(program: Any) -> None:
    f, x, y = program

    def scalar(a: Any, b: Any) -> Any:
        return (f(a, b) ** 2).sum()

    h = lp.hessian(scalar, argnums=(0, 1))(x, y)
    for inner_jac, outer_jac in ((lp.jacrev, lp.jacrev), (lp.jacfwd, lp.jacfwd), (lp.jacrev, lp.jacfwd)):
        other = outer_jac(inner_jac(scalar, argnums=(0, 1)), argnums=(0, 1))(x, y)
        for i in range(2):
            for j in range(2):
                np.testing.assert_allclose(h[i][j], other[i][j], rtol=1e-9, atol=1e-10)
    for i in range(2):  # symmetric: H[i][j] is H[j][i] with its axes swapped
        for j in range(2):
            nj = (x, y)[j].ndim  # h[j][i] has the axes of (x, y)[j] first
            perm = tuple(range(nj, h[i][j].ndim)) + tuple(range(nj))
            np.testing.assert_allclose(h[i][j], np.transpose(h[j][i], perm), rtol=1e-9, atol=1e-10)


@PROPS
@given(steps, st.sampled_from(Y_SHAPES), st.integers(0, 2**16))
def test_jvp_of_random_programs_is_the_gradient_along_the_tangent(plan: Any, y_shape: Any, seed: int) -> None:
    # the programs of test_random_programs.py (a custom op whose rule calls grad, stop_gradient, ...)
    rng = np.random.default_rng(seed)
    x, y = rng.uniform(-1.5, 1.5, SHAPE), rng.uniform(-1.5, 1.5, y_shape)
    tx, ty = rng.standard_normal(SHAPE), rng.standard_normal(y_shape)
    f = _program(plan)
    _held.values, _held.replay = [], None
    both = lp.grad(f, argnums=(0, 1))
    gx, gy = both(x, y)
    _, t = lp.jvp(f, (x, y), (tx, ty))
    assert float(arr(t)) == pytest.approx(inner(gx, tx) + inner(gy, ty), rel=1e-9, abs=1e-11)
    _, (hx, hy) = lp.jvp(both, (x, y), (tx, ty))  # forward over reverse = reverse over reverse
    rx, ry = lp.grad(lambda a, b: sum((g * d).sum() for g, d in zip(both(a, b), (tx, ty))), argnums=(0, 1))(x, y)
    np.testing.assert_allclose(arr(hx), arr(rx), rtol=1e-9, atol=1e-10)
    np.testing.assert_allclose(arr(hy), arr(ry), rtol=1e-9, atol=1e-10)


# ----- values by hand ------------------------------------------------------------------------------------------
def test_jvp_by_hand() -> None:
    x = np.array([1.0, 2.0])
    y, t = lp.jvp(lambda a: a ** 3, (x,), (np.array([1.0, 0.5]),))
    np.testing.assert_array_equal(arr(y), [1.0, 8.0])
    np.testing.assert_array_equal(arr(t), [3.0, 6.0])  # 3 x^2 t
    # two arguments: d(a * b) = ta * b + a * tb; broadcasting b over a
    _, t = lp.jvp(lambda a, b: a * b, (np.ones((2, 2)), np.array([2.0, 3.0])), (np.ones((2, 2)), np.array([1.0, 0.0])))
    np.testing.assert_array_equal(arr(t), [[3.0, 3.0], [3.0, 3.0]])
    # a tangent of one input only still spans the broadcast output
    _, t = lp.jvp(lambda a, b: a + b, (np.zeros(3), np.zeros((2, 3))), (np.ones(3), np.zeros((2, 3))))
    assert t.shape == (2, 3)
    np.testing.assert_array_equal(arr(t), np.ones((2, 3)))
    # a matrix product and a reduction
    a = np.array([[1.0, 2.0], [3.0, 4.0]])
    _, t = lp.jvp(lambda w: (w @ w).sum(), (a,), (np.eye(2),))
    assert float(arr(t)) == float(np.sum(a + a))  # d(w w) = t w + w t


def test_jvp_nested_to_third_order() -> None:
    def d(f: Callable[[Any], Any]) -> Callable[[Any], Any]:
        return lambda x: lp.jvp(f, (x,), (1.0,))[1]

    assert float(arr(d(d(d(lp.sin)))(0.5))) == pytest.approx(-np.cos(0.5), rel=1e-12)
    assert float(arr(d(lp.grad(d(lp.exp)))(0.3))) == pytest.approx(np.exp(0.3), rel=1e-12)


def test_no_perturbation_confusion() -> None:
    # d/dx [d/dy (x * y)] = d/dx x = 1 (a mix-up of the two levels gives 2)
    assert float(arr(lp.jvp(lambda x: lp.jvp(lambda y: x * y, (x,), (1.0,))[1], (3.0,), (1.0,))[1])) == 1.0
    assert float(lp.grad(lambda x: lp.jvp(lambda y: x * y, (x,), (1.0,))[1])(3.0)) == 1.0
    assert float(arr(lp.jvp(lambda x: lp.grad(lambda y: x * y)(x), (3.0,), (1.0,))[1])) == 1.0
    assert float(arr(lp.jvp(lambda x: lp.jvp(lambda y: x * y, (2.0,), (1.0,))[1], (3.0,), (1.0,))[1])) == 1.0
    # the tangent of an outer level seen from inside: d/dx [x * d/dy (x * y)^2 at y = x]
    f = lambda x: x * lp.jvp(lambda y: (x * y) ** 2, (x,), (1.0,))[1]  # noqa: E731  x * 2 x^2 y = 2 x^4
    assert float(arr(lp.jvp(f, (1.5,), (1.0,))[1])) == pytest.approx(8 * 1.5 ** 3)


def test_forward_over_reverse_is_the_hessian_times_v() -> None:
    a = normal(0, (4, 4))
    f = lambda t: lp.tanh(t @ a).sum() + (t ** 4).sum()  # noqa: E731
    x, v = normal(1, (4,)), normal(2, (4,))
    h = lp.hessian(f)(x)
    np.testing.assert_allclose(arr(lp.jvp(lp.grad(f), (x,), (v,))[1]), h @ v, rtol=1e-12)
    np.testing.assert_allclose(lp.hvp(f)(x, v), h @ v, rtol=1e-12)
    # hvp over a pytree
    p = {"w": normal(3, (2, 2)), "b": normal(4, (2,))}
    g = lambda q: (lp.tanh(q["w"] @ q["b"]) ** 2).sum()  # noqa: E731
    u = {"w": normal(5, (2, 2)), "b": normal(6, (2,))}
    hv = lp.hvp(g)(p, u)
    hh = lp.hessian(g)(p)
    for k in p:
        want = sum(np.tensordot(hh[k][j], u[j], axes=u[j].ndim) for j in p)
        np.testing.assert_allclose(hv[k], want, rtol=1e-10, atol=1e-12)


# ----- pytrees and structure -----------------------------------------------------------------------------------
def test_jvp_over_pytrees_with_aux() -> None:
    params = {"w": np.array([[1.0, 2.0], [0.0, 1.0]]), "b": np.array([0.5, -0.5])}
    dirs = {"w": np.ones((2, 2)), "b": np.array([1.0, 0.0])}

    def f(p: Any, x: Any) -> Any:
        h = x @ p["w"] + p["b"]
        return (h, {"sq": (h * h).sum()}), "aux"

    x = np.array([1.0, 1.0])
    out, t, aux = lp.jvp(f, (params, x), (dirs, np.zeros(2)), has_aux=True)
    assert aux == "aux" and type(t) is tuple and set(t[1]) == {"sq"}
    h = x @ params["w"] + params["b"]
    th = x @ dirs["w"] + dirs["b"]
    np.testing.assert_allclose(arr(t[0]), th)
    assert float(arr(t[1]["sq"])) == pytest.approx(float(2 * h @ th))


def test_jacobian_structures_follow_jax() -> None:
    p = {"a": np.array([1.0, 2.0]), "b": 3.0}

    def f(q: Any, s: Any) -> Any:
        return {"u": q["a"] * q["b"] * s, "v": (q["a"] ** 2).sum()}

    for jac in (lp.jacfwd, lp.jacrev, lp.jacobian):
        j = jac(f)(p, 2.0)
        assert set(j) == {"u", "v"} and set(j["u"]) == {"a", "b"}
        assert j["u"]["a"].shape == (2, 2) and j["u"]["b"].shape == (2,) and j["v"]["a"].shape == (2,)
        np.testing.assert_allclose(j["u"]["a"], np.diag([6.0, 6.0]))
        np.testing.assert_allclose(j["u"]["b"], [2.0, 4.0])
        np.testing.assert_allclose(j["v"]["a"], [2.0, 4.0])
        assert float(j["v"]["b"]) == 0.0
        both = jac(f, argnums=(0, 1))(p, 2.0)
        assert type(both["u"]) is tuple and both["u"][1].shape == (2,)
        np.testing.assert_allclose(both["u"][1], [3.0, 6.0])
        value, aux = jac(lambda q: (q["a"] * 2.0, "note"), has_aux=True)(p)
        assert aux == "note"
        np.testing.assert_allclose(value["a"], 2 * np.eye(2))


def test_hessian_of_a_dict_is_a_dict_of_dicts() -> None:
    def f(p: Any) -> Any:
        return (p["x"] ** 2 * p["y"]).sum() + p["y"] ** 3

    p = {"x": np.array([1.0, 2.0]), "y": 3.0}
    h = lp.hessian(f)(p)
    assert set(h) == {"x", "y"} and set(h["x"]) == {"x", "y"}
    np.testing.assert_allclose(h["x"]["x"], 2 * 3.0 * np.eye(2))  # 2 y
    np.testing.assert_allclose(h["x"]["y"], [2.0, 4.0])  # 2 x
    np.testing.assert_allclose(h["y"]["x"], [2.0, 4.0])
    assert float(h["y"]["y"]) == pytest.approx(18.0)  # 6 y


def test_jacobians_compose_with_grad_and_keep_tensors_and_float32() -> None:
    g = lp.grad(lambda x: lp.jacfwd(lambda y: y ** 3)(x).sum())(np.array([1.0, 2.0]))  # d/dx sum diag(3x^2)
    np.testing.assert_allclose(g, [6.0, 12.0])
    j = lp.jacfwd(lambda t: t * 2.0)(Tensor([1.0, 2.0]))
    assert type(j) is Tensor
    np.testing.assert_array_equal(arr(j), 2 * np.eye(2))
    x32 = np.array([0.5, -1.0], np.float32)
    assert lp.jacfwd(lambda t: lp.tanh(t) * t)(x32).dtype == np.float32
    assert lp.hessian(lambda t: (lp.tanh(t) * t).sum())(x32).dtype == np.float32
    np.testing.assert_array_equal(lp.jacfwd(lambda t: t[:0])(np.ones(2)), np.zeros((0, 2)))  # empty output
    np.testing.assert_array_equal(lp.jacfwd(lambda t: Tensor([5.0, 6.0]))(np.ones(3)), np.zeros((2, 3)))  # constant


# ----- ops without a forward-mode rule of their own ------------------------------------------------------------
def _scaled_cube(x: Any) -> tuple[Any, Any]:
    return 2.0 * x * x * x, lambda g: (6.0 * g * x * x,)


def _weighted(x: Any, y: Any, axis: int) -> tuple[Any, Any]:  # sum over axis of x * exp(y)
    e = np.exp(y)
    return (x * e).sum(axis=axis), lambda g: (np.expand_dims(g, axis) * e, np.expand_dims(g, axis) * x * e, None)


def test_an_op_without_a_rule_gets_its_vjp_transposed() -> None:
    x = np.array([1.0, -2.0])
    _, t = lp.jvp(lambda a: lp.apply(_scaled_cube, "scaled_cube", a), (x,), (np.array([1.0, 0.5]),))
    np.testing.assert_allclose(arr(t), 6.0 * x * x * [1.0, 0.5])
    # to second order: jvp of grad, grad of jvp
    f = lambda a: lp.apply(_scaled_cube, "scaled_cube", a).sum()  # noqa: E731
    np.testing.assert_allclose(arr(lp.jvp(lp.grad(f), (x,), (np.ones(2),))[1]), 12.0 * x)
    np.testing.assert_allclose(lp.grad(lambda a: lp.jvp(f, (a,), (np.ones(2),))[1])(x), 12.0 * x)
    # two inputs (broadcasting) and a parameter
    a, b = normal(0, (2, 3)), normal(1, (3,))
    ta, tb = normal(2, (2, 3)), normal(3, (3,))
    g = lambda u, v: lp.apply(_weighted, "weighted", u, lp.broadcast_to(v, (2, 3)), 1)  # noqa: E731
    _, t = lp.jvp(g, (a, b), (ta, tb))
    np.testing.assert_allclose(arr(t), (ta * np.exp(b) + a * np.exp(b) * tb).sum(axis=1), rtol=1e-12)
    check_grads(lambda u, v: lp.jvp(g, (u, v), (ta, tb))[1], [a, b], order=2)


# ----- calling conventions and bad input ------------------------------------------------------------------------
def test_jvp_leaves_the_callers_arrays_alone_and_works_under_no_grad() -> None:
    x, t = np.array([1.0, 2.0]), np.array([3.0, 4.0])
    _, out = lp.jvp(lambda a: a, (x,), (t,))
    np.testing.assert_array_equal(arr(out), t)
    assert t.flags.writeable and x.flags.writeable
    t[0] = 100.0
    assert float(arr(out)[0]) == 3.0  # not a view of the caller's array
    with lp.no_grad():
        _, d = lp.jvp(lambda a: a * a, (2.0,), (1.0,))
    assert float(arr(d)) == 4.0
    _, zero = lp.jvp(lambda a: Tensor([1.0, 2.0]) * 3.0, (x,), (t,))  # the output does not depend on x
    np.testing.assert_array_equal(arr(zero), [0.0, 0.0])


def test_jvp_bad_input_names_the_problem() -> None:
    f = lambda a, b: a * b  # noqa: E731
    with pytest.raises(ValueError, match=r"tangent of primals\[1\] has shape \(3,\) but the primal has shape \(2,\)"):
        lp.jvp(f, (np.ones(2), np.ones(2)), (np.ones(2), np.ones(3)))
    with pytest.raises(TypeError, match=r"primals\[0\] has dtype float64 but the primal has dtype float32"):
        lp.jvp(f, (np.ones(2, np.float32), np.ones(2, np.float32)), (np.ones(2), np.ones(2, np.float32)))
    with pytest.raises(ValueError, match="different structure"):
        lp.jvp(lambda p: p["a"], ({"a": 1.0},), ({"b": 1.0},))
    with pytest.raises(ValueError, match="2 primals but 1 tangents"):
        lp.jvp(f, (1.0, 2.0), (1.0,))
    with pytest.raises(TypeError, match="must be tuples"):
        lp.jvp(lambda a: a, np.ones(2), np.ones(2))
    with pytest.raises(TypeError, match="floating-point"):
        lp.jvp(lambda a: a * 2, (np.array([1, 2]),), (np.array([1, 2]),))
    # a Python number takes its primal's dtype
    _, t = lp.jvp(lambda a: a * 2.0, (np.float32(1.0),), (1.0,))
    assert arr(t) == 2.0 and t.dtype == np.float32


def test_jit_of_forward_mode_and_hessians() -> None:
    f = lambda a: (lp.tanh(a) * a).sum() + (a ** 3).sum()  # noqa: E731
    x, v = np.array([0.3, -0.2, 1.0]), np.array([1.0, 0.5, -1.0])
    tangent = lp.jit(lambda a: lp.jvp(f, (a,), (v,))[1])
    for z in (x, 2 * x):  # (the second call replays the first one's trace)
        assert float(arr(tangent(z))) == pytest.approx(float(arr(lp.jvp(f, (z,), (v,))[1])), rel=1e-12)
    np.testing.assert_allclose(lp.jit(lambda a: lp.hvp(f)(a, v))(x), lp.hvp(f)(x, v), rtol=1e-12)
    np.testing.assert_allclose(lp.jit(lp.hessian(f))(x), lp.hessian(f)(x), rtol=1e-12)
    # and jvp of a jitted function (which runs its ops inside the jvp)
    _, t = lp.jvp(lp.jit(f), (x,), (v,))
    assert float(arr(t)) == pytest.approx(float(arr(lp.jvp(f, (x,), (v,))[1])), rel=1e-12)


# ----- what a running jvp leaves alone ---------------------------------------------------------------------------
def test_jvps_in_threads_and_gradients_beside_them() -> None:
    # jvps running at once in several threads each push their own tangents, gradients taken in
    # another thread meanwhile are unaffected, and once none runs the recorders' hook is unset.
    import threading

    from leanpass.core import tensor as tensor_module

    errors: list[BaseException] = []

    def forward(k: int) -> None:
        try:
            x = np.linspace(-1.0, 1.0, 5) * (k + 1)
            for _ in range(30):
                _, t = lp.jvp(lambda a: lp.tanh(a) * a, (x,), (np.ones(5),))
                np.testing.assert_allclose(arr(t), (1 - np.tanh(x) ** 2) * x + np.tanh(x), rtol=1e-12)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def reverse() -> None:
        try:
            for _ in range(30):
                w = Tensor([1.0, 2.0], requires_grad=True)
                (w * w * 3.0).sum().backward()
                np.testing.assert_array_equal(arr(w.grad), [6.0, 12.0])
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=forward, args=(k,)) for k in range(3)] + [threading.Thread(target=reverse)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors, errors
    assert tensor_module._forward_hook is None
    with pytest.raises(ZeroDivisionError):
        lp.jvp(lambda a: a * (1 / 0), (1.0,), (1.0,))
    assert tensor_module._forward_hook is None  # (also after a function that raised)


def test_a_value_kept_from_an_earlier_jvp_is_a_constant_in_the_next() -> None:
    kept = []

    def f(a: Any) -> Any:
        y = a * 2.0
        kept.append(y)  # (leaked out of the jvp: its tangent there was 2)
        return y

    lp.jvp(f, (1.0,), (1.0,))
    _, t = lp.jvp(lambda a: a * kept[0], (3.0,), (1.0,))
    assert float(arr(t)) == 2.0  # d/da (a * 2.0): the kept value is a constant here


def test_no_grad_and_debug_nans_inside_a_jvp() -> None:
    def f(a: Any) -> Any:
        with lp.no_grad():
            c = a * a  # a constant: no tangent flows through it
        return c * a

    _, t = lp.jvp(f, (3.0,), (1.0,))
    assert float(arr(t)) == 9.0
    with lp.debug_nans(), np.errstate(invalid="ignore"), pytest.raises(FloatingPointError, match="op 'log'"):
        lp.jvp(lambda a: lp.log(a) * a, (np.array([1.0, -1.0]),), (np.ones(2),))


# ----- debug_nans in forward mode -------------------------------------------------------------------------------
def _norm(x: Any) -> Any:
    return lp.sqrt((x * x).sum())  # at 0: sqrt's derivative is infinite, and the tangent there is 0 * inf


def _root(x: Any) -> tuple[Any, Any]:  # an op of the user's (no rule of its own): its VJP is transposed
    a = np.sqrt(x)
    return a, lambda g: (g * 0.5 / a,)


@pytest.mark.parametrize("run", [
    lambda: lp.jvp(_norm, (np.zeros(3),), (np.ones(3),)),
    lambda: lp.jacfwd(_norm)(np.zeros(3)),
    lambda: lp.hvp(lambda x: lp.exp(_norm(x)))(np.zeros(3), np.ones(3)),  # forward over reverse
    lambda: lp.jvp(lambda x: lp.exp(lp.sqrt(x)), (np.zeros(2),), (np.zeros(2),)),  # sqrt's, not exp's
    lambda: lp.grad(lambda x: lp.jvp(lambda y: lp.sqrt(y).sum(), (x,), (np.zeros(2),))[1])(np.zeros(2)),  # on Tensors
    lambda: lp.jacfwd(lambda x: lp.jvp(_norm, (x,), (np.ones(3),))[1])(np.zeros(3)),
], ids=["jvp", "jacfwd", "hvp", "first", "grad-of-jvp", "jacfwd-of-jvp"])
def test_debug_nans_stops_at_the_first_op_whose_tangent_is_nan(run: Callable[[], Any]) -> None:
    with np.errstate(all="ignore"):
        run()  # (silently NaN without it)
        with lp.debug_nans(), pytest.raises(FloatingPointError, match=r"op 'sqrt' made a NaN in the tangent of its "
                                                                       r"output \(forward mode\)"):
            run()


def test_debug_nans_in_forward_mode_names_a_nan_tangent_given_and_ops_of_the_users() -> None:
    with lp.debug_nans(), pytest.raises(FloatingPointError, match="op '\\*' .* a tangent that already held a NaN"):
        lp.jvp(lambda x: x * 2.0, (np.ones(2),), (np.array([1.0, np.nan]),))
    op = lambda a: lp.apply(_root, "root", a)  # noqa: E731
    x = np.array([0.0, 4.0])
    with np.errstate(all="ignore"), lp.debug_nans():
        # The VJP is transposed by replaying it on a cotangent of zeros (0 * inf there): not the program's
        # values, so not checked; the tangent, inf and 1/4, holds no NaN.
        _, t = lp.jvp(op, (x,), (np.ones(2),))
        np.testing.assert_array_equal(arr(t), [np.inf, 0.25])
        with pytest.raises(FloatingPointError, match="op 'root' made a NaN in the tangent"):
            lp.jacfwd(op)(x)  # the direction (0, 1): 0 * inf in the first entry
        _, t = lp.jvp(lambda a: lp.sqrt(a * a + 1.0), (x,), (np.ones(2),))  # no NaN anywhere: the values as without
    np.testing.assert_allclose(arr(t), x / np.sqrt(x * x + 1.0))
