"""vmap, jvp and grad nested in each other: the results equal the same maps written as loops."""

from __future__ import annotations

from typing import Any

import numpy as np

import leanpass as lp

RNG = np.random.default_rng(3)
W = RNG.standard_normal((3, 2))


def loss(w: Any, x: Any) -> Any:
    return (lp.tanh(x @ w) ** 2).sum() + (w * w).sum() * 0.1


def _stack(rows: list[Any]) -> np.ndarray:
    return np.stack([np.asarray(lp.stop_gradient(r).numpy()) for r in rows])


def test_vmap_of_jvp_of_grad_is_a_per_example_hessian_vector_product() -> None:
    xs = RNG.standard_normal((4, 3))
    vs = RNG.standard_normal((4, 3, 2))

    def hvp(x: Any, v: Any) -> Any:
        return lp.jvp(lambda w: lp.grad(loss)(w, x), (W,), (v,))[1]

    batched = lp.vmap(hvp)(xs, vs)
    looped = _stack([hvp(x, v) for x, v in zip(xs, vs)])
    np.testing.assert_allclose(lp.stop_gradient(batched).numpy(), looped, rtol=1e-12, atol=1e-12)
    # and against the Hessian itself, example by example
    for x, v, got in zip(xs, vs, looped):
        h = lp.hessian(loss)(W, x)
        np.testing.assert_allclose(got, np.einsum("ijkl,kl->ij", h, v), rtol=1e-10, atol=1e-12)


def test_grad_of_vmap_of_jvp() -> None:
    xs = RNG.standard_normal((4, 3))
    v = RNG.standard_normal((3, 2))

    def total(w: Any) -> Any:  # the sum over examples of each example's directional derivative
        return lp.vmap(lambda x: lp.jvp(lambda u: loss(u, x), (w,), (v,))[1], in_axes=0)(xs).sum()

    def direct(w: Any) -> Any:
        return sum(lp.jvp(lambda u, x=x: loss(u, x), (w,), (v,))[1] for x in xs)

    np.testing.assert_allclose(lp.grad(total)(W), lp.grad(direct)(W), rtol=1e-12, atol=1e-12)


def _central(f: Any, x: np.ndarray, v: np.ndarray, eps: float = 1e-6) -> np.ndarray:
    """The derivative of ``f`` at ``x`` along ``v``, by central differences in float64."""
    return (_stack([f(x + eps * v)])[0] - _stack([f(x - eps * v)])[0]) / (2 * eps)


def test_jvp_of_vmap_of_grad_is_the_per_example_hessian_along_the_tangent() -> None:
    xs, ys = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 2))
    v = RNG.standard_normal((3, 2))

    def fit(w: Any, x: Any, y: Any) -> Any:
        return ((lp.tanh(x @ w) - y) ** 2).sum() + (w * w).sum() * 0.1

    def per_example(w: Any) -> Any:
        return lp.vmap(lp.grad(fit), in_axes=(None, 0, 0))(w, xs, ys)

    out, t = lp.jvp(per_example, (W,), (v,))
    assert t.shape == (4, 3, 2)
    np.testing.assert_allclose(lp.stop_gradient(out).numpy(), _stack([lp.grad(fit)(W, x, y) for x, y in zip(xs, ys)]),
                               rtol=1e-12, atol=1e-12)
    looped = _stack([lp.jvp(lambda w, x=x, y=y: lp.grad(fit)(w, x, y), (W,), (v,))[1] for x, y in zip(xs, ys)])
    np.testing.assert_allclose(lp.stop_gradient(t).numpy(), looped, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(lp.stop_gradient(t).numpy(), _central(per_example, W, v), rtol=1e-6, atol=1e-8)
    # the whole Jacobian, forward and reverse, agrees with it along v
    jac = np.asarray(lp.jacfwd(per_example)(W))
    np.testing.assert_allclose(np.einsum("eijkl,kl->eij", jac, v), looped, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jac, np.asarray(lp.jacrev(per_example)(W)), rtol=1e-10, atol=1e-12)


def test_jvp_of_vmap_equals_the_loop_over_examples() -> None:
    xs, ts = RNG.standard_normal((5, 3)), RNG.standard_normal((5, 3))
    b, tb = RNG.standard_normal(3), RNG.standard_normal(3)

    def f(x: Any, b: Any) -> Any:
        return lp.sigmoid(x * b).sum() * lp.tanh(x)

    mapped = lp.vmap(f, in_axes=(0, None))
    out, t = lp.jvp(mapped, (xs, b), (ts, tb))  # a mapped argument and a shared one both move
    looped = _stack([lp.jvp(f, (x, b), (tx, tb))[1] for x, tx in zip(xs, ts)])
    np.testing.assert_allclose(lp.stop_gradient(t).numpy(), looped, rtol=1e-12, atol=1e-12)
    eps = 1e-6
    up, down = _stack([mapped(xs + eps * ts, b + eps * tb)]), _stack([mapped(xs - eps * ts, b - eps * tb)])
    fd = (up[0] - down[0]) / (2 * eps)
    np.testing.assert_allclose(lp.stop_gradient(t).numpy(), fd, rtol=1e-6, atol=1e-8)
    # out_axes moves the batch in the tangent as in the value
    out1, t1 = lp.jvp(lp.vmap(f, in_axes=(0, None), out_axes=1), (xs, b), (ts, tb))
    np.testing.assert_allclose(lp.stop_gradient(t1).numpy(), looped.T, rtol=1e-12, atol=1e-12)
    # the tangent of the shared argument alone: every example moves with it
    _, tb_only = lp.jvp(lambda b: mapped(xs, b), (b,), (tb,))
    np.testing.assert_allclose(lp.stop_gradient(tb_only).numpy(),
                               _stack([lp.jvp(lambda b, x=x: f(x, b), (b,), (tb,))[1] for x in xs]), rtol=1e-12)


def test_grad_of_jvp_of_vmap_and_vmap_over_tangents() -> None:
    xs = RNG.standard_normal((4, 3))
    v = RNG.standard_normal((3, 2))

    def directional(w: Any) -> Any:  # sum over examples of d/dw loss(w, x) . v, through jvp(vmap)
        return lp.jvp(lambda u: lp.vmap(loss, in_axes=(None, 0))(u, xs), (w,), (v,))[1].sum()

    def direct(w: Any) -> Any:
        return sum(lp.jvp(lambda u, x=x: loss(u, x), (w,), (v,))[1] for x in xs)

    np.testing.assert_allclose(lp.grad(directional)(W), lp.grad(direct)(W), rtol=1e-12, atol=1e-12)
    # vmap over the tangents of one jvp: the rows of the Jacobian of a per-example map
    vs = RNG.standard_normal((6, 3, 2))
    rows = lp.vmap(lambda d: lp.jvp(lambda u: lp.vmap(loss, in_axes=(None, 0))(u, xs), (W,), (d,))[1])(vs)
    jac = np.asarray(lp.jacrev(lambda u: lp.vmap(loss, in_axes=(None, 0))(u, xs))(W))
    np.testing.assert_allclose(lp.stop_gradient(rows).numpy(), np.einsum("eij,dij->de", jac, vs),
                               rtol=1e-10, atol=1e-12)


def test_jvp_of_jvp_of_vmap_and_grad_of_jvp_of_vmap_of_grad() -> None:
    from leanpass.testing import check_grads

    xs, vs = RNG.standard_normal((4, 3)), RNG.standard_normal((4, 3))

    def f(x: Any) -> Any:
        return (lp.tanh(x) * x[::-1]).sum() + (x ** 3).sum()

    second = lp.jvp(lambda y: lp.jvp(lp.vmap(f), (y,), (vs,))[1], (xs,), (vs,))[1]  # v . H v per example
    want = [v @ np.asarray(lp.hessian(f)(x)) @ v for x, v in zip(xs, vs)]
    np.testing.assert_allclose(lp.stop_gradient(second).numpy(), want, rtol=1e-10)
    ys, v = RNG.standard_normal((4, 2)), RNG.standard_normal((3, 2))

    def fit(w: Any, x: Any, y: Any) -> Any:
        return ((lp.tanh(x @ w) - y) ** 2).sum()

    def directional(w: Any) -> Any:  # summed per-example Hessian-vector products, through jvp(vmap(grad))
        return lp.jvp(lambda p: lp.vmap(lp.grad(fit), in_axes=(None, 0, 0))(p, xs, ys), (w,), (v,))[1].sum()

    check_grads(directional, [W], order=1)
