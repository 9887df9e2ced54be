"""``no_grad()`` and ``detach()``: nothing is recorded, per thread and per asyncio task."""

from __future__ import annotations

import asyncio
import threading

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor


def test_results_under_no_grad_do_not_require_grad() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    with lp.no_grad():
        ys = [x + 1.0, x * x, x @ x, (x**2).sum(), x.exp().log().sigmoid().relu(), -x, x.mean(), 2.0 / x]
    for y in ys:
        assert not y.requires_grad
        assert y._op == "leaf" and y._parents == ()
    np.testing.assert_allclose(ys[1].numpy(), [1.0, 4.0])  # the values are still computed
    assert (x * 2.0).requires_grad  # recording is back on after the block


def test_no_grad_restores_after_an_exception() -> None:
    x = Tensor([1.0], requires_grad=True)
    with pytest.raises(ZeroDivisionError), lp.no_grad():
        raise ZeroDivisionError
    assert (x * 2.0).requires_grad


def test_nested_no_grad() -> None:
    x = Tensor([1.0], requires_grad=True)
    with lp.no_grad():
        with lp.no_grad():
            assert not (x * 2.0).requires_grad
        assert not (x * 2.0).requires_grad  # leaving the inner block keeps the outer one
    assert (x * 2.0).requires_grad


def test_no_grad_as_a_decorator() -> None:
    x = Tensor([1.0], requires_grad=True)

    @lp.no_grad()
    def step(t: Tensor) -> Tensor:
        return t * 2.0

    assert not step(x).requires_grad
    assert (x * 2.0).requires_grad


def test_no_grad_update_then_train() -> None:
    """The usual pattern: a parameter update under no_grad makes a fresh leaf."""
    w = Tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    with lp.no_grad():
        new = w - 0.1 * w.grad
    assert not new.requires_grad
    w2 = Tensor(new.numpy(), requires_grad=True)
    (w2 * w2).sum().backward()
    np.testing.assert_allclose(w2.grad.numpy(), [1.6, 3.2])


def test_backward_on_a_graph_built_before_no_grad_still_works_inside_it() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    y = (x * x).sum()
    with lp.no_grad():
        y.backward()
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0])


def test_grad_transform_inside_no_grad_still_differentiates() -> None:
    with lp.no_grad():
        g = lp.grad(lambda t: (t * t).sum())(np.array([1.0, 3.0]))
    np.testing.assert_array_equal(g, [2.0, 6.0])


def test_no_grad_in_one_thread_does_not_affect_another() -> None:
    x = Tensor([1.0], requires_grad=True)
    inside = threading.Event()
    checked = threading.Event()
    seen: dict[str, bool] = {}

    def quiet() -> None:
        with lp.no_grad():
            inside.set()
            checked.wait(5)
            seen["quiet"] = (x * 2.0).requires_grad

    def normal() -> None:
        inside.wait(5)  # the other thread is inside no_grad now
        seen["normal"] = (x * 2.0).requires_grad
        checked.set()

    threads = [threading.Thread(target=quiet), threading.Thread(target=normal)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert seen == {"quiet": False, "normal": True}


def test_no_grad_in_the_main_thread_does_not_leak_into_a_new_thread() -> None:
    x = Tensor([1.0], requires_grad=True)
    seen: list[bool] = []
    with lp.no_grad():
        t = threading.Thread(target=lambda: seen.append((x * 2.0).requires_grad))
        t.start()
        t.join(10)
        assert not (x * 2.0).requires_grad
    assert seen == [True]


def test_no_grad_in_one_asyncio_task_does_not_affect_another() -> None:
    x = Tensor([1.0], requires_grad=True)

    async def main() -> list[bool]:
        inside, checked = asyncio.Event(), asyncio.Event()

        async def quiet() -> bool:
            with lp.no_grad():
                inside.set()
                await checked.wait()
                return (x * 2.0).requires_grad

        async def normal() -> bool:
            await inside.wait()
            result = (x * 2.0).requires_grad
            checked.set()
            return result

        return list(await asyncio.gather(quiet(), normal()))

    assert asyncio.run(main()) == [False, True]


def test_detach() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    h = x * 3.0
    d = h.detach()
    assert not d.requires_grad and d._op == "leaf" and d._parents == ()
    np.testing.assert_array_equal(d.numpy(), [3.0, 6.0])
    (h * d).sum().backward()  # no gradient flows through the detached factor
    np.testing.assert_array_equal(x.grad.numpy(), [9.0, 18.0])
    assert d.grad is None


def test_detach_inside_grad_stops_the_gradient() -> None:
    g = lp.grad(lambda t: (t * t.detach()).sum())(np.array([2.0, 5.0]))
    np.testing.assert_array_equal(g, [2.0, 5.0])
