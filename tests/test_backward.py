"""``Tensor.backward`` and the one reverse pass under it: accumulation, cotangents, create_graph,
which nodes are visited, a very long chain, and what the graph keeps alive afterwards."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor


def test_scalar_backward() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    (x**2).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [2.0, 4.0, 6.0])
    assert x.grad.dtype == np.float64 and not x.grad.requires_grad


def test_one_element_tensor_needs_no_cotangent() -> None:
    x = Tensor([[3.0]], requires_grad=True)
    (x * x).backward()
    np.testing.assert_array_equal(x.grad.data, [[6.0]])


def test_gradients_accumulate_across_calls() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    (x * x).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [3.0 + 2.0, 3.0 + 4.0])
    y = (x * 10.0).sum()
    y.backward()
    y.backward()  # the same graph twice: it is not consumed by the first pass
    np.testing.assert_array_equal(x.grad.data, [25.0, 27.0])


def test_clearing_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    (x * 3.0).sum().backward()
    x.grad = None
    assert x.grad is None
    (x * 5.0).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [5.0, 5.0])


def test_grad_is_a_new_tensor_each_accumulation() -> None:
    x = Tensor([1.0], requires_grad=True)
    (x * 2.0).sum().backward()
    first = x.grad
    (x * 2.0).sum().backward()
    assert x.grad is not first
    np.testing.assert_array_equal(first.data, [2.0])  # the earlier gradient is not changed
    np.testing.assert_array_equal(x.grad.data, [4.0])


def test_backward_with_a_cotangent_for_a_non_scalar() -> None:
    x = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * x
    y.backward(np.array([1.0, 10.0, 100.0]))
    np.testing.assert_array_equal(x.grad.data, [2.0, 40.0, 600.0])
    x.grad = None
    y.backward(Tensor([1.0, 0.0, 1.0]))
    np.testing.assert_array_equal(x.grad.data, [2.0, 0.0, 6.0])
    x.grad = None
    y.backward([0.5, 0.5, 0.5])
    np.testing.assert_array_equal(x.grad.data, [1.0, 2.0, 3.0])


def test_cotangent_backward_through_matmul() -> None:
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3)), rng.standard_normal((3, 4))
    x, w = Tensor(a, requires_grad=True), Tensor(b, requires_grad=True)
    g = rng.standard_normal((2, 4))
    (x @ w).backward(g)
    np.testing.assert_allclose(x.grad.data, g @ b.T)
    np.testing.assert_allclose(w.grad.data, a.T @ g)


def test_gradients_land_only_on_leaves_that_require_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([3.0, 4.0])  # a constant leaf
    h = x * c
    y = (h + 1.0).sum()
    y.backward()
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.0])
    assert c.grad is None
    assert h.grad is None and y.grad is None  # intermediate nodes keep no gradient


def test_shared_subexpressions_add_up() -> None:
    x = Tensor(2.0, requires_grad=True)
    h = x * x  # used twice below
    y = h * h + h  # x^4 + x^2
    y.backward()
    assert x.grad.item() == pytest.approx(4 * 8.0 + 2 * 2.0)
    z = Tensor(3.0, requires_grad=True)
    (z * z * z).backward()
    assert z.grad.item() == pytest.approx(27.0)


def test_broadcast_gradients_are_summed_to_the_leaf_shape() -> None:
    b = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    x = Tensor(np.ones((4, 3)), requires_grad=True)
    (x + b).sum().backward()
    np.testing.assert_array_equal(b.grad.data, [4.0, 4.0, 4.0])
    s = Tensor(2.0, requires_grad=True)
    (x * s).sum().backward()
    assert s.grad.shape == () and s.grad.item() == 12.0


def test_gradient_of_an_unused_leaf_stays_none() -> None:
    x = Tensor([1.0], requires_grad=True)
    unused = Tensor([5.0], requires_grad=True)
    _ = unused * 2.0
    (x * 2.0).sum().backward()
    assert unused.grad is None


def test_sum_gradient_is_a_full_array() -> None:
    x = Tensor(np.ones((2, 3)), requires_grad=True)
    x.sum().backward()
    np.testing.assert_array_equal(x.grad.data, np.ones((2, 3)))
    assert x.grad.shape == (2, 3)


# ----- create_graph -------------------------------------------------------------------------------


def test_create_graph_gives_a_differentiable_grad() -> None:
    x = Tensor(2.0, requires_grad=True)
    (x**3).backward(create_graph=True)
    g = x.grad
    assert g.requires_grad
    assert g.item() == pytest.approx(12.0)  # 3 x^2
    x.grad = None
    g.backward()
    assert x.grad.item() == pytest.approx(12.0)  # 6 x


def test_create_graph_third_derivative() -> None:
    x = Tensor(0.5, requires_grad=True)
    x.exp().sigmoid().backward(create_graph=True)
    g1 = x.grad
    x.grad = None
    g1.backward(create_graph=True)
    g2 = x.grad
    x.grad = None
    g2.backward()
    want = lp.grad(lp.grad(lp.grad(lambda t: t.exp().sigmoid())))(0.5)
    assert x.grad.item() == pytest.approx(float(want))


def test_create_graph_on_vectors_and_hessian_vector_product() -> None:
    rng = np.random.default_rng(1)
    a = rng.standard_normal((3, 3))
    w = Tensor(rng.standard_normal(3), requires_grad=True)
    loss = ((Tensor(a) @ w).sigmoid() * w).sum()
    loss.backward(create_graph=True)
    v = rng.standard_normal(3)
    g = w.grad
    w.grad = None
    (g * v).sum().backward()  # H v
    want = lp.hvp(lambda t: ((a @ t).sigmoid() * t).sum())(w.data, v)
    np.testing.assert_allclose(w.grad.data, want, rtol=1e-10)


def test_create_graph_with_two_leaves_mixed_partials() -> None:
    x = Tensor(2.0, requires_grad=True)
    y = Tensor(3.0, requires_grad=True)
    (x * x * y).backward(create_graph=True)
    gx = x.grad  # 2xy
    x.grad = y.grad = None
    gx.backward()
    assert x.grad.item() == pytest.approx(2 * 3.0)  # d(2xy)/dx = 2y
    assert y.grad.item() == pytest.approx(2 * 2.0)  # d(2xy)/dy = 2x


# ----- the reverse pass -------------------------------------------------------------------------

CHAIN = 200_000  # the lead measures 1,000,000 in benchmarks/; 200,000 keeps this test ~3 s


def test_long_chain_has_no_recursion_error() -> None:
    x = Tensor(np.ones(2), requires_grad=True)
    y = x
    for _ in range(CHAIN):
        y = y * 1.0000001
    y.sum().backward()
    np.testing.assert_allclose(x.grad.data, [1.0000001**CHAIN] * 2, rtol=1e-9)
    del y  # freeing a deep graph must not recurse either


def _spy(log: list[str], name: str) -> Any:
    """A functional op (identity) whose VJP writes its name into ``log``."""

    def op(x: Any) -> tuple[Any, Any]:
        def vjp(g: Any) -> tuple[Any]:
            log.append(name)
            return (g * 1.0,)

        return x, vjp

    return op


def test_grad_visits_only_nodes_on_a_path_to_its_inputs() -> None:
    w = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    log: list[str] = []

    def f(x: Any) -> Any:
        side = lp.apply(_spy(log, "W only"), "spy", w)  # depends on W, not on x
        on_path = lp.apply(_spy(log, "x"), "spy", x)
        return (on_path @ side).sum()

    g = lp.grad(f)(np.array([1.0, 1.0]))
    np.testing.assert_array_equal(g, [3.0, 7.0])
    assert log == ["x"]
    assert w.grad is None


def test_backward_skips_branches_without_gradient() -> None:
    log: list[str] = []
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = Tensor([3.0, 4.0])
    const_branch = lp.apply(_spy(log, "const"), "spy", c)
    assert not const_branch.requires_grad  # nothing recorded: no VJP will ever run there
    y = (lp.apply(_spy(log, "x"), "spy", x) * const_branch).sum()
    y.backward()
    assert log == ["x"]
    np.testing.assert_array_equal(x.grad.data, [3.0, 4.0])


def test_each_cotangent_is_freed_once_passed_on() -> None:
    refs: list[weakref.ref[Any]] = []
    alive_when_called: list[list[bool]] = []

    def link(x: Any) -> tuple[Any, Any]:
        def vjp(g: Any) -> tuple[Any]:
            alive_when_called.append([r() is not None for r in refs])
            refs.append(weakref.ref(g))
            return (g * 1.0,)

        return x, vjp

    x = Tensor(np.ones(3), requires_grad=True)
    y = x
    for _ in range(5):
        y = lp.apply(link, "link", y)
    y.backward(np.ones(3))
    # When link k runs, the cotangents the earlier links received (and passed on) are gone;
    # only the seed, which the caller of the pass holds, may still be alive.
    assert len(alive_when_called) == 5
    for k, alive in enumerate(alive_when_called):
        assert len(alive) == k and not any(alive[1:]), (k, alive)
    np.testing.assert_array_equal(x.grad.data, np.ones(3))


def test_nothing_keeps_the_graph_alive_after_the_pass() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = x * 2.0
    ref = weakref.ref(h)
    y = (h.exp() * h).sum()
    del h
    y.backward()
    assert ref() is not None  # the user still holds y, which holds the graph
    del y
    gc.collect()
    assert ref() is None
    assert x.grad is not None and x.grad._parents == ()


def test_create_graph_graph_is_freed_with_the_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = x * x
    ref = weakref.ref(h)
    y = h.exp().sum()
    del h
    y.backward(create_graph=True)
    del y
    gc.collect()
    assert x.grad.requires_grad  # x.grad is on a graph of its own (x.grad -> ... -> x)
    x.grad = None  # dropping it (and y) frees everything: the cycle through x is collected
    gc.collect()
    assert ref() is None


def test_nothing_kept_alive_by_transforms() -> None:
    refs: list[weakref.ref[Any]] = []

    def f(x: Any) -> Any:
        h = x * x
        refs.append(weakref.ref(h))
        return h.sum()

    g = lp.grad(f)(np.array([1.0, 2.0]))
    value, g2 = lp.value_and_grad(f)(np.array([1.0, 2.0]))
    gc.collect()
    assert [r() for r in refs] == [None, None]
    np.testing.assert_array_equal(g, g2)
    assert value._parents == () and not value.requires_grad


def test_vjp_function_holds_the_graph_until_dropped() -> None:
    refs: list[weakref.ref[Any]] = []

    def f(x: Any) -> Any:
        h = x * x
        refs.append(weakref.ref(h))
        return h.exp()

    out, pull = lp.vjp(f, np.array([1.0, 2.0]))
    gc.collect()
    assert refs[0]() is not None
    g1 = pull(np.ones(2))
    g2 = pull(np.ones(2))  # may be called more than once
    np.testing.assert_array_equal(g1[0], g2[0])
    del pull
    gc.collect()
    assert refs[0]() is None
    assert not out.requires_grad


# ----- the user's cotangent is not aliased ------------------------------------------------------


def test_backward_does_not_alias_the_users_cotangent() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    u = np.array([1.0, 1.0])
    (x + 1.0).backward(u)  # add passes the cotangent through unchanged
    u[0] = 5.0  # the user reuses their buffer
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
    assert u.flags.writeable  # reading x.grad (above) does not lock the user's array


def test_backward_gradient_is_not_a_view_of_the_users_cotangent() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    u = np.ones((2, 1))
    x.reshape(2, 1).backward(u)  # the gradient would be a reshaped view of u
    u[:] = 7.0
    np.testing.assert_array_equal(x.grad.data, [1.0, 1.0])
