"""Parameter slots: a leaf Tensor that requires grad takes new arrays (``p.data = ...``, an optimizer's
``step()``, ``p -= ...`` under ``no_grad()``), never written in place, with a version counter that keeps
every recorded graph honest about the values it saw; everything else stays frozen."""

from __future__ import annotations

import copy
import dataclasses

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor, optim


def test_data_assignment_gives_a_parameter_a_new_array_and_leaves_the_old_one() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    old = w.data
    mine = np.array([5.0, 6.0])
    w.data = mine
    mine[0] = 100.0  # the caller's array is copied, not taken
    assert w.tolist() == [5.0, 6.0] and old.tolist() == [1.0, 2.0]
    assert w.version == 1 and not w.data.flags.writeable
    assert (w * 2).tolist() == [10.0, 12.0]  # the next forward sees the new values
    w.data = w * 0.5  # a Tensor's values (PyTorch: t.data = other)
    w.data = [1, 2]  # a list, cast to the parameter's dtype
    assert w.dtype == np.float64 and w.tolist() == [1.0, 2.0] and w.version == 3


def test_data_assignment_keeps_dtype_and_shape() -> None:
    w = Tensor(np.ones(2, dtype=np.float32), requires_grad=True)
    w.data = np.array([0.1, 0.2])  # float64 values into a float32 parameter
    assert w.dtype == np.float32
    with pytest.raises(ValueError, match=r"new values have shape \(3,\), but the parameter has shape \(2,\)"):
        w.data = np.zeros(3)
    with pytest.raises(TypeError, match="cannot make an array of float32"):
        w.data = "abc"
    assert w.version == 1


@pytest.mark.parametrize("make", [lambda: Tensor([1.0]), lambda: Tensor([1.0], requires_grad=True) * 2,
                                  lambda: Tensor([1.0], requires_grad=True).detach()])
def test_everything_but_a_parameter_stays_frozen(make) -> None:
    t = make()
    with pytest.raises(dataclasses.FrozenInstanceError, match="only a parameter .* takes new values"):
        t.data = np.zeros(1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        t._data = np.zeros(1)


def test_a_graph_recorded_before_a_change_gives_the_gradient_at_the_values_it_saw() -> None:
    w = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    x = Tensor([0.5, 0.25, 2.0], requires_grad=True)
    loss = (w * w * x).sum() + (w @ x).tanh()
    w.data = np.array([10.0, 10.0, 10.0])
    loss.backward()
    w0, x0 = np.array([1.0, -2.0, 3.0]), np.array([0.5, 0.25, 2.0])
    t = np.tanh(w0 @ x0)
    np.testing.assert_allclose(w.grad.data, 2 * w0 * x0 + (1 - t**2) * x0)
    np.testing.assert_allclose(x.grad.data, w0 * w0 + (1 - t**2) * w0)
    assert loss.item() == pytest.approx(float((w0 * w0 * x0).sum() + t))  # its value too


def test_after_a_step_a_new_forward_sees_new_values_and_an_old_graph_the_old_ones() -> None:
    w = Tensor([2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.25)
    old_loss = (w**3).sum()
    old_loss.backward()  # 3 w^2 = 12
    opt.step()  # w = 2 - 0.25 * 12 = -1
    assert w.tolist() == [-1.0]
    opt.zero_grad()
    old_loss.backward()  # still at w = 2
    assert w.grad.tolist() == [12.0]
    opt.zero_grad()
    (w**3).sum().backward()  # at w = -1
    assert w.grad.tolist() == [3.0]


def test_create_graph_through_a_graph_older_than_the_parameter_raises_as_pytorch() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True, name="w")
    loss = (w**3).sum()
    with lp.no_grad():
        w -= 1.0
    with pytest.raises(RuntimeError, match=r"one of the variables needed for gradient computation has been modified "
                                           r"by an inplace operation: the parameter 'w' is at version 1.*Compute the "
                                           r"loss again after the step"):
        loss.backward(create_graph=True)
    assert w.grad is None  # nothing written: never a mix
    new_loss = (w**3).sum()  # recorded after the change: fine
    new_loss.backward(create_graph=True)
    np.testing.assert_allclose(w.grad.data, 3 * np.array([0.0, 1.0]) ** 2)


def test_in_place_update_under_no_grad_is_pytorchs() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([0.5], requires_grad=True)
    loss = ((w * 3).sum() + b * 2).sum()
    loss.backward()
    ids = (id(w), id(b))
    with lp.no_grad():
        w -= 0.1 * w.grad
        b -= 0.1 * b.grad
    assert (id(w), id(b)) == ids
    np.testing.assert_allclose(w.data, [0.7, 1.7])
    np.testing.assert_allclose(b.data, [0.3])


def test_grad_is_assignable_with_arrays_and_works_as_an_array() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    g = w.grad.copy()
    assert np.allclose(w.grad, [2.0, 4.0]) and np.allclose(g, [2.0, 4.0])
    np.testing.assert_allclose(np.ones(2) + w.grad, [3.0, 5.0])
    np.testing.assert_allclose(w.grad * np.array([0.5, 0.25]), [1.0, 1.0])
    w.grad = None
    assert w.grad is None
    w.grad = [1.0, 1.0]
    w.grad = w.grad * 2  # (augmented assignment on .grad rebinds it)
    assert w.grad.tolist() == [2.0, 2.0]


def test_the_functional_style_is_unchanged() -> None:
    w = Tensor([1.0, -2.0], requires_grad=True)
    g = lp.grad(lambda p: (p**2).sum())(w)
    np.testing.assert_allclose(g, [2.0, -4.0])
    opt = optim.sgd(0.1)
    w2 = optim.apply_updates(w, opt.update(np.asarray(g), opt.init(w))[0])
    assert w2 is not w and w.tolist() == [1.0, -2.0] and w.version == 0
    np.testing.assert_allclose(w2.data, [0.8, -1.6])


def test_copies_of_a_parameter_have_its_current_values() -> None:
    w = Tensor([1.0], requires_grad=True)
    w.data = [3.0]
    for c in (copy.copy(w), copy.deepcopy(w)):
        assert c is not w and c.tolist() == [3.0] and c.requires_grad


# ----- the object-style step under jit ------------------------------------------------------------
def _stepper(ps: list[Tensor], opt, set_to_none: bool = False, act=Tensor.relu):
    """An object-style training step over the parameters ``ps``, closing over them and ``opt``."""

    def step(x, y):
        opt.zero_grad(set_to_none=set_to_none)
        loss = (((act(x @ ps[0] + ps[1]) @ ps[2] + ps[3]) - y) ** 2).mean()
        loss.backward()
        opt.step()
        return loss

    return step


def _problem() -> tuple[np.ndarray, np.ndarray, list[np.ndarray]]:
    rng = np.random.default_rng(3)
    return (rng.standard_normal((16, 2)), rng.standard_normal((16, 3)),
            [rng.standard_normal((2, 8)) * 0.5, np.zeros(8), rng.standard_normal((8, 3)) * 0.5, np.zeros(3)])


@pytest.mark.parametrize("make", [lambda ps: optim.SGD(ps, lr=0.05, momentum=0.9, weight_decay=0.01),
                                  lambda ps: optim.Adam(ps, lr=0.01, weight_decay=0.001)])
@pytest.mark.parametrize("set_to_none", [False, True])
def test_an_object_style_step_under_jit_equals_eager_bit_for_bit(make, set_to_none: bool) -> None:
    x, y, init = _problem()
    runs = []
    for jitted in (False, True):
        ps = [Tensor(a, requires_grad=True) for a in init]
        opt = make(ps)
        step = _stepper(ps, opt, set_to_none)
        f = lp.jit(step) if jitted else step
        losses = [f(x, y).item() for _ in range(6)]
        runs.append((losses, [p.data for p in ps], opt, f))
    (l0, p0, o0, _), (l1, p1, o1, f) = runs
    assert l0 == l1 and l0[-1] < l0[0]
    assert all(np.array_equal(a, b) for a, b in zip(p0, p1))
    assert all(np.array_equal(a.grad.data, b.grad.data) for a, b in zip(o0.params, o1.params))
    assert f.trace_count <= 2 and o1.params[0].version == 6
    if isinstance(o1, optim.Adam):
        assert type(o1.t) is int and o1.t == 6
        assert all(np.array_equal(a, b) for a, b in zip(o0.m, o1.m))


def test_under_jit_a_new_learning_rate_and_eager_steps_in_between_are_seen() -> None:
    x, y, init = _problem()
    results = []
    for jitted in (False, True):
        ps = [Tensor(a, requires_grad=True) for a in init]
        opt = optim.SGD(ps, lr=0.1)
        step = _stepper(ps, opt, act=Tensor.tanh)
        f = lp.jit(step) if jitted else step
        f(x, y)
        opt.lr = 0.01
        f(x, y)
        step(x, y)  # an eager step in between
        ps[1].data = ps[1].data + 1.0
        f(x, y)
        results.append([p.data for p in ps])
    assert all(np.array_equal(a, b) for a, b in zip(*results))


def test_a_jitted_function_reads_the_parameters_current_values() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    predict = lp.jit(lambda x: (x @ w).detach())
    assert predict(np.ones(2)).item() == 3.0
    w.data = [10.0, 20.0]
    assert predict(np.ones(2)).item() == 30.0


def test_a_parameter_passed_as_an_argument_to_an_object_style_step_is_refused() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1)

    def step(w, x):
        loss = (w * x).sum()
        loss.backward()
        opt.step()
        return loss

    with pytest.raises(TypeError, match=r"gives a new \.grad to a parameter of shape \(2,\) passed as an argument, "
                                        r"which an object the function closes over \(an optimizer\) also holds.*"
                                        r"pass only the data"):
        lp.jit(step)(w, np.ones(2))
    assert w.grad is None and w.tolist() == [1.0, 2.0] and w.version == 0

    def local(w, x):  # the argument's stand-in only: the function's own (as without a closure)
        (w * x).sum().backward()
        return w.grad

    assert lp.jit(local)(w, np.array([3.0, 4.0])).tolist() == [3.0, 4.0]
    assert w.grad is None


def test_a_parameter_out_of_jits_reach_is_refused() -> None:
    deep = Tensor([1.0], requires_grad=True)
    box = [[[[[[deep]]]]]]  # deeper than jit looks

    def step(x):
        p = box[0][0][0][0][0][0]
        (p * x).sum().backward()
        return x

    with pytest.raises(TypeError, match=r"that jit did not find outside the function's arguments"):
        lp.jit(step)(np.ones(1))
    assert deep.grad is None
