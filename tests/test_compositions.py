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
