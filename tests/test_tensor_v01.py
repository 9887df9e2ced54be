"""LeanPass 0.1's Tensor surface: its methods, names and values (float64), the ``.grad`` it reads as an
array, and its graph tools (``visualize``, ``visualize_dot``, ``grad_check``, ``zero_grad_all``). The
expected values are 0.1's formulas, written out here in NumPy."""

from __future__ import annotations

import re

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F

X = np.array([[-1.5, -0.2, 0.0, 0.3], [2.0, -3.0, 0.7, 1.1]])
G = np.array([[0.3, -1.0, 2.0, 0.5], [1.5, 0.25, -0.75, 1.0]])  # the cotangent

C = np.sqrt(2 / np.pi)


def _gelu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:  # 0.1's gelu and its slope
    t = np.tanh(C * (x + 0.044715 * x**3))
    return 0.5 * x * (1 + t), 0.5 * (1 + t) + 0.5 * x * (1 - t**2) * C * (1 + 3 * 0.044715 * x**2)


def _softmax0(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    e = np.exp(x - x.max(axis=0, keepdims=True))
    s = e / e.sum(axis=0, keepdims=True)
    return s, s * (G - (G * s).sum(axis=0, keepdims=True))


CASES = {  # name -> (method call, 0.1's value, 0.1's gradient at X with cotangent G)
    "relu": (lambda t: t.relu(), np.maximum(0, X), G * (X > 0)),
    "sigmoid": (lambda t: t.sigmoid(), 1 / (1 + np.exp(-X)), G * np.exp(-X) / (1 + np.exp(-X)) ** 2),
    "tanh": (lambda t: t.tanh(), np.tanh(X), G * (1 - np.tanh(X) ** 2)),
    "leaky_relu": (lambda t: t.leaky_relu(negative_slope=0.2), np.where(X >= 0, X, 0.2 * X),
                   np.where(X > 0, G, 0.2 * G)),  # (at 0 the slope is 0.2: see the docs page)
    "gelu": (lambda t: t.gelu(), _gelu(X)[0], G * _gelu(X)[1]),
    "softmax": (lambda t: t.softmax(axis=0), _softmax0(X)[0], _softmax0(X)[1]),
    "clip": (lambda t: t.clip(a_min=-0.5, a_max=0.5), np.clip(X, -0.5, 0.5), G * ((X > -0.5) & (X < 0.5))),
    "clamp": (lambda t: t.clamp(min=-1.0), np.maximum(X, -1.0), G * (X > -1.0)),
    "exp": (lambda t: t.exp(), np.exp(X), G * np.exp(X)),
    "log": (lambda t: (t * t + 1).log(), np.log(X * X + 1), G * 2 * X / (X * X + 1)),
    "pow": (lambda t: t**3, X**3, G * 3 * X**2),
    "div": (lambda t: 1.0 - t / 2.0, 1.0 - X / 2, -G / 2),
    "getitem": (lambda t: t[1], X[1], np.array([np.zeros(4), G[1]])),
    "mean": (lambda t: t.mean(axis=1, keepdims=True), X.mean(axis=1, keepdims=True),
             np.broadcast_to(G[:, :1], X.shape) / 4),
    "sum": (lambda t: t.sum(axis=0), X.sum(axis=0), np.broadcast_to(G[1], X.shape)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_are_0_1s(name: str) -> None:
    method, value, grad = CASES[name]
    x = Tensor(X, requires_grad=True)
    y = method(x)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y.data, value, rtol=1e-13, atol=1e-15)
    g = {"getitem": G[1], "sum": G[1], "mean": G[:, :1]}.get(name, G)
    y.backward(g)
    np.testing.assert_allclose(x.grad, grad, rtol=1e-12, atol=1e-15)


def test_constructor_takes_name_and_makes_integer_data_that_requires_grad_float() -> None:
    w = Tensor([1, 2, 3], requires_grad=True, name="w")
    assert w.dtype == np.float64 and w.name == "w"
    w.name = "weights"
    assert w.name == "weights" and Tensor([1.0]).name is None


def test_op_names_are_0_1s() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    w = Tensor([[1.0], [2.0]], requires_grad=True)
    ops = {"+": x + 1, "-": x - x, "*": 2 * x, "/": x / 3, "**": x**2, "@": x @ w, "neg": -x, "sum": x.sum(),
           "mean": x.mean(), "relu": x.relu(), "exp": x.exp(), "log": x.log(), "sigmoid": x.sigmoid(),
           "tanh": x.tanh(), "leaky_relu": x.leaky_relu(), "gelu": x.gelu(), "softmax": x.softmax(),
           "clip": x.clamp(0, 1), "getitem": x[0]}
    assert {name: t._op for name, t in ops.items()} == {name: name for name in ops}
    assert x._op == "leaf"  # (0.1 spelled a leaf's op "", and showed it as "leaf")


def test_visualize_lists_nodes_then_edges_as_0_1() -> None:
    x = Tensor([[1.0, 2.0]], requires_grad=False)
    w = Tensor([[1.0], [2.0]], requires_grad=True, name="w")
    y = (x @ w).relu() * 2
    text = y.visualize()
    ids = {id(t): k for k, t in (("y", y), ("x", x), ("w", w))}
    text = re.sub(r"\d{6,}", lambda m: ids.get(int(m.group()), "?"), text)
    lines = text.splitlines()
    assert lines[:2] == ["Node y: * shape=(1, 1)", "Node ?: relu shape=(1, 1)"]
    assert "Node x: leaf shape=(1, 2)" in lines and "Node w: leaf (w) shape=(2, 1)" in lines
    assert lines[5] == "Node ?: leaf shape=()"  # the constant 2
    assert [ln.split(" ")[0] for ln in lines] == ["Node"] * 6 + ["Edge"] * 5
    assert "Edge x -> ?" in lines and "Edge w -> ?" in lines


def test_visualize_dot_is_graphviz() -> None:
    w = Tensor([1.0], requires_grad=True, name="w")
    dot = (w.exp() + w).visualize_dot()
    lines = dot.splitlines()
    assert lines[:3] == ["digraph computation_graph {", "  rankdir=LR;",
                         "  node [shape=box, style=filled, fillcolor=lightgray];"]
    assert lines[-1] == "}"
    assert f'  n{id(w)} [label="leaf\\nw", shape=ellipse];' in lines
    assert sum(" -> " in ln for ln in lines) == 3 and sum("shape=box" in ln for ln in lines) == 3


def test_grad_check_agrees_and_writes_nothing() -> None:
    x = Tensor([[0.5, -1.0], [2.0, 0.1]], requires_grad=True)
    w = Tensor([[1.0], [-0.5]], requires_grad=True)
    y = ((x @ w).tanh() * x[:, :1]).sigmoid().softmax(axis=0) ** 2
    assert y.grad_check() == []
    assert x.grad is None and w.grad is None


def test_grad_check_finds_a_wrong_gradient() -> None:
    def cube(x):
        return x**3, lambda g: (g * 2 * x**2,)  # wrong: 3 x^2

    x = Tensor([1.0, 2.0], requires_grad=True)
    errors = lp.apply(cube, "my_cube", x).sum().grad_check()
    assert len(errors) == 1
    leaf, diff, analytic, numeric = errors[0]
    assert leaf is x and diff == pytest.approx(4.0, rel=1e-4)
    np.testing.assert_allclose(analytic, [2.0, 8.0])
    np.testing.assert_allclose(numeric, [3.0, 12.0], rtol=1e-5)
    with pytest.raises(ValueError, match="require gradients"):
        Tensor([1.0]).grad_check()


def test_zero_grad_all_zeroes_the_graphs_grads() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0], requires_grad=True)
    y = (a * b).sum()
    y.backward()
    y.zero_grad_all()
    assert a.grad.tolist() == [0.0, 0.0] and b.grad.tolist() == [0.0]


def test_copy_is_a_value_of_its_own() -> None:
    x = Tensor([1.0, 2.0], requires_grad=True)
    c = x.copy()
    (c * c).sum().backward()
    assert x.grad.tolist() == [2.0, 4.0]
    k = Tensor([1.0])
    assert k.copy().tolist() == [1.0]
    assert F.gelu(np.array([1.0]))[0][0] == pytest.approx(_gelu(np.array([1.0]))[0][0], rel=1e-15)
