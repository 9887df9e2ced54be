"""``optim.SGD`` and ``optim.Adam``, LeanPass 0.1's object-style optimizers: their update formulas, written
out here by hand, over parameter slots (leaf Tensors with requires_grad=True)."""

from __future__ import annotations

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor, nn, optim


def _loss(w: Tensor) -> Tensor:
    return (w**2 * np.array([1.0, 3.0])).sum()  # gradient 2 w * [1, 3]


def test_sgd_plain_momentum_and_weight_decay_by_hand() -> None:
    w = Tensor([1.0, -2.0], requires_grad=True)
    opt = optim.SGD([w], lr=0.1, momentum=0.9, weight_decay=0.5)
    p, v = np.array([1.0, -2.0]), np.zeros(2)
    for _ in range(3):
        opt.zero_grad()
        _loss(w).backward()
        opt.step()
        g = 2 * p * np.array([1.0, 3.0]) + 0.5 * p
        v = 0.9 * v + g
        p = p - 0.1 * v
        np.testing.assert_array_equal(w.data, p)
    np.testing.assert_array_equal(opt.v[0], v)
    plain = Tensor([1.0, -2.0], requires_grad=True)
    sgd = optim.SGD([plain], lr=0.1)
    _loss(plain).backward()
    sgd.step()
    np.testing.assert_array_equal(plain.data, [1.0 - 0.1 * 2.0, -2.0 - 0.1 * -12.0])


def test_adam_by_hand() -> None:
    w = Tensor([1.0, -2.0], requires_grad=True)
    b1, b2, eps, lr, wd = 0.8, 0.99, 1e-6, 0.05, 0.01
    opt = optim.Adam([w], lr=lr, betas=(b1, b2), eps=eps, weight_decay=wd)
    p, m, v = np.array([1.0, -2.0]), np.zeros(2), np.zeros(2)
    for t in range(1, 4):
        opt.zero_grad()
        _loss(w).backward()
        opt.step()
        g = 2 * p * np.array([1.0, 3.0]) + wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * (g**2)
        p = p - lr * (m / (1 - b1**t)) / (np.sqrt(v / (1 - b2**t)) + eps)
        np.testing.assert_array_equal(w.data, p)
    assert opt.t == 3


def test_defaults_are_0_1s() -> None:
    w = Tensor([0.0], requires_grad=True)
    sgd, adam = optim.SGD([w]), optim.Adam([w])
    assert (sgd.lr, sgd.momentum, sgd.weight_decay) == (1e-2, 0.0, 0.0)
    assert (adam.lr, adam.b1, adam.b2, adam.eps, adam.weight_decay) == (1e-3, 0.9, 0.999, 1e-8, 0.0)


def test_a_step_gives_new_arrays_and_old_graphs_keep_theirs() -> None:
    w = Tensor([1.0, 2.0], requires_grad=True)
    opt = optim.Adam([w], lr=0.1)
    before = w.data
    loss = _loss(w)
    loss.backward()
    opt.step()
    assert before.tolist() == [1.0, 2.0] and w.data is not before and w.version == 1
    opt.zero_grad()
    loss.backward()  # the graph recorded before the step: the gradient at [1, 2]
    np.testing.assert_array_equal(w.grad.data, [2.0, 12.0])


def test_zero_grad_and_a_missing_gradient() -> None:
    w = Tensor([1.0], requires_grad=True)
    frozen = Tensor([5.0])  # requires_grad=False: never stepped
    opt = optim.SGD([w, frozen], lr=0.1, weight_decay=1.0)
    opt.step()  # no gradient yet: zeros, as 0.1's parameters always held
    np.testing.assert_array_equal(w.data, [0.9])
    assert frozen.tolist() == [5.0]
    opt.zero_grad()
    assert w.grad.tolist() == [0.0] and frozen.grad is None
    opt.zero_grad(set_to_none=True)
    assert w.grad is None


def test_dtypes_stay() -> None:
    w = Tensor(np.array([1.0, 2.0], dtype=np.float32), requires_grad=True)
    for opt in (optim.SGD([w], lr=0.1, momentum=0.5), optim.Adam([w], lr=np.float64(0.1))):
        w.grad = [1.0, 1.0]
        opt.step()
        assert w.dtype == np.float32
    s = Tensor(2.0, requires_grad=True)  # a 0-d parameter stays an array
    optim.SGD([s], lr=0.5).step()
    s.grad = 1.0
    optim.SGD([s], lr=0.5).step()
    assert s.shape == () and s.item() == 1.5


def test_bad_parameter_lists_say_so() -> None:
    w = Tensor([1.0], requires_grad=True)
    with pytest.raises(TypeError, match=r"not a single Tensor: write \[w\]"):
        optim.SGD(w, lr=0.1)
    with pytest.raises(TypeError, match="parameter 1 is a ndarray, not a Tensor"):
        optim.Adam([w, np.zeros(1)])
    with pytest.raises(ValueError, match=r"parameter 0 was computed \(op '\*'\)"):
        optim.SGD([w * 2])
    w.grad = None
    opt = optim.SGD([w, w], lr=1.0)  # one Tensor twice is one parameter
    w.grad = [1.0]
    opt.step()
    assert w.tolist() == [0.0] and len(opt.params) == 1


def test_module_zero_grad() -> None:
    layer = nn.trainable(nn.Linear(3, 2, rng=0))
    layer(np.ones((4, 3))).sum().backward()
    assert layer.weight.grad is not None
    layer.zero_grad()
    assert not layer.weight.grad.data.any() and layer.bias.grad.shape == (2,)
    layer.zero_grad(set_to_none=True)
    assert layer.weight.grad is None and layer.bias.grad is None


def test_a_hand_built_mlp_trains() -> None:
    rng = np.random.default_rng(0)
    x = rng.standard_normal((32, 2))
    y = x @ np.array([[1.0], [-2.0]])
    ps = [Tensor(rng.standard_normal((2, 8)) * 0.5, requires_grad=True), Tensor(np.zeros(8), requires_grad=True),
          Tensor(rng.standard_normal((8, 1)) * 0.5, requires_grad=True), Tensor(np.zeros(1), requires_grad=True)]
    opt = optim.Adam(ps, lr=0.02)
    losses = []
    for _ in range(60):
        opt.zero_grad()
        loss = ((((lp.Tensor(x) @ ps[0] + ps[1]).relu() @ ps[2] + ps[3]) - y) ** 2).mean()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
