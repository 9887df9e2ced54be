"""NumPy interop: ufuncs and functions on Tensors dispatch to LeanPass ops (recorded, differentiable);
anything LeanPass does not differentiate raises a TypeError naming it. Comparisons give plain
boolean arrays and leave the operand's graph intact."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from test_ops_helpers import FAST, bshapes, normal, seeds, value

import leanpass as lp
from leanpass import Tensor
from leanpass.testing import check_grads


def test_the_four_named_calls_return_recorded_tensors() -> None:
    t = Tensor([[1.0, -2.0], [3.0, 0.5]], requires_grad=True)
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0], requires_grad=True)
    cases = [(np.exp(t), "exp"), (np.sum(t, axis=0), "sum"), (np.maximum(t, 0), "maximum"),
             (np.concatenate([a, b]), "concatenate")]
    for out, op in cases:
        assert type(out) is Tensor and out._op == op and out.requires_grad
    np.testing.assert_allclose(value(cases[0][0]), np.exp(value(t)))
    np.testing.assert_array_equal(value(cases[1][0]), [4.0, -1.5])
    np.testing.assert_array_equal(value(cases[2][0]), [[1.0, 0.0], [3.0, 0.5]])
    np.testing.assert_array_equal(value(cases[3][0]), [1.0, 2.0, 3.0])
    (np.concatenate([a, b]) * np.array([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(value(a.grad), [1.0, 2.0])
    np.testing.assert_array_equal(value(b.grad), [3.0])
    np.maximum(t, 0).sum().backward()
    np.testing.assert_array_equal(value(t.grad), [[1.0, 0.0], [1.0, 1.0]])


UFUNCS: dict[str, tuple[Callable[..., Any], Callable[..., Any], str]] = {
    # name: (NumPy call, LeanPass call, _op)
    "exp": (np.exp, lp.exp, "exp"),
    "log": (np.log, lp.log, "log"),
    "tanh": (np.tanh, lp.tanh, "tanh"),
    "abs": (np.abs, lp.abs, "abs"),
    "sqrt": (np.sqrt, lp.sqrt, "sqrt"),
    "square": (np.square, lp.square, "square"),
    "sin": (np.sin, lp.sin, "sin"),
    "cos": (np.cos, lp.cos, "cos"),
    "negative": (np.negative, lp.negative, "neg"),
    "reciprocal": (np.reciprocal, lambda x: 1.0 / x, "reciprocal"),
}


@pytest.mark.parametrize("name", sorted(UFUNCS))
def test_unary_ufuncs_dispatch_and_differentiate(name: str) -> None:
    np_fn, lp_fn, op = UFUNCS[name]
    x = np.abs(normal(0, (2, 3))) + 0.5
    y = np_fn(Tensor(x, requires_grad=True))
    assert type(y) is Tensor and y._op == op
    np.testing.assert_allclose(value(y), np_fn(x))
    np.testing.assert_allclose(lp.grad(lambda t: np_fn(t).sum())(x), lp.grad(lambda t: lp_fn(t).sum())(x))
    check_grads(np_fn, [x], order=2)


BINARY = {"add": (np.add, "+"), "subtract": (np.subtract, "-"), "multiply": (np.multiply, "*"),
          "divide": (np.divide, "/"), "power": (np.power, "**"), "maximum": (np.maximum, "maximum"),
          "minimum": (np.minimum, "minimum"), "logaddexp": (np.logaddexp, "logaddexp")}


@FAST
@given(bshapes(2), seeds)
def test_binary_ufuncs_with_arrays_on_either_side(shp: list[tuple[int, ...]], seed: int) -> None:
    a = np.abs(normal(seed, shp[0])) + 0.5
    b = np.abs(normal(seed + 1, shp[1])) + 0.25
    for fn, op in BINARY.values():
        y = fn(a, Tensor(b, requires_grad=True))  # the array first: NumPy defers to the Tensor
        assert type(y) is Tensor and y._op == op
        np.testing.assert_allclose(value(y), fn(a, b))
        check_grads(lambda s, t, fn=fn: fn(s, t), [a, b], order=2)


def test_array_operators_on_the_left_record() -> None:
    t = Tensor([1.0, 2.0], requires_grad=True)
    arr = np.array([3.0, 4.0])
    assert (arr + t)._op == "+" and (arr - t)._op == "-" and (arr * t)._op == "*"
    assert (arr / t)._op == "/" and (arr ** t)._op == "**" and (np.eye(2) @ t)._op == "@"
    ((arr * t) + (np.eye(2) @ t)).sum().backward()
    np.testing.assert_array_equal(value(t.grad), [4.0, 5.0])


def test_ufunc_reduce_maps_to_reductions() -> None:
    t = Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    s = np.add.reduce(t)  # NumPy's default axis for reduce is 0
    assert s._op == "sum" and s.tolist() == [3.0, 5.0, 7.0]
    m = np.maximum.reduce(t, axis=1)
    assert m._op == "max" and m.tolist() == [2.0, 5.0]
    assert np.minimum.reduce(t, axis=None, keepdims=True).shape == (1, 1)


FUNCTIONS: list[tuple[str, Callable[[Any], Any], str]] = [
    ("mean", lambda t: np.mean(t, axis=1, keepdims=True), "mean"),
    ("max", lambda t: np.max(t, axis=0), "max"),
    ("amax", lambda t: np.amax(t), "max"),
    ("min", lambda t: np.min(t, axis=-1), "min"),
    ("var", lambda t: np.var(t, axis=0, ddof=1), "var"),
    ("std", lambda t: np.std(t), "std"),
    ("reshape", lambda t: np.reshape(t, (3, 2)), "reshape"),
    ("ravel", lambda t: np.ravel(t), "reshape"),
    ("transpose", lambda t: np.transpose(t), "transpose"),
    ("swapaxes", lambda t: np.swapaxes(t, 0, 1), "swapaxes"),
    ("expand_dims", lambda t: np.expand_dims(t, 0), "expand_dims"),
    ("squeeze", lambda t: np.squeeze(np.expand_dims(t, 0)), "squeeze"),
    ("broadcast_to", lambda t: np.broadcast_to(t, (4, 2, 3)), "broadcast_to"),
    ("stack", lambda t: np.stack([t, t], axis=-1), "stack"),
    ("concatenate_none", lambda t: np.concatenate([t, t], axis=None), "concatenate"),
    ("split", lambda t: np.split(t, 3, axis=1)[2], "getitem"),
    ("where", lambda t: np.where(t > 0, t, 0.0), "where"),
    ("clip", lambda t: np.clip(t, -0.5, 0.5), "clip"),
    ("take", lambda t: np.take(t, [0, 0], axis=0), "getitem"),
    ("einsum", lambda t: np.einsum("ij,kj->ik", t, t), "einsum"),
    ("dot", lambda t: np.dot(t, np.ones(3)), "@"),
    ("dot_scalar", lambda t: np.dot(2.0, t), "*"),
]


@pytest.mark.parametrize(("name", "call", "op"), FUNCTIONS, ids=[n for n, _, _ in FUNCTIONS])
def test_numpy_functions_dispatch_and_differentiate(name: str, call: Callable[[Any], Any], op: str) -> None:
    x = np.array([[0.3, -1.2, 2.1], [1.7, 0.9, -0.2]])  # no ties, away from the clip bounds
    y = call(Tensor(x, requires_grad=True))
    assert type(y) is Tensor and y._op == op, (type(y), getattr(y, "_op", None))
    np.testing.assert_allclose(value(y), call(x))
    check_grads(call, [x], order=2)


def test_numpy_functions_inside_grad_and_float32() -> None:
    g = lp.grad(lambda x: np.sum(np.exp(x) * np.sin(x)))(np.array([0.0, 1.0]))
    np.testing.assert_allclose(g, np.exp([0.0, 1.0]) * (np.sin([0.0, 1.0]) + np.cos([0.0, 1.0])))
    x32 = Tensor(np.array([0.5, 1.5], np.float32), requires_grad=True)
    y = np.sum(np.tanh(x32) * np.maximum(x32, 1.0))
    assert y.dtype == np.float32
    y.backward(create_graph=True)
    assert x32.grad.dtype == np.float32


def test_np_asarray_and_questions_give_plain_values() -> None:
    t = Tensor([[1.0, 5.0], [3.0, 2.0]], requires_grad=True)
    assert type(np.asarray(t.detach())) is np.ndarray
    assert np.shape(t) == (2, 2) and np.ndim(t) == 2 and np.size(t) == 4
    assert int(np.argmax(t)) == 1 and np.argmin(t, axis=1).tolist() == [0, 1]
    assert np.allclose(t, [[1.0, 5.0], [3.0, 2.0]]) and np.array_equal(t, value(t))
    assert type(np.zeros_like(t)) is np.ndarray and np.ones_like(t).shape == (2, 2)
    assert np.where(t > 2)[1].tolist() == [1, 0]  # the one-argument form: indices
    with pytest.raises(ValueError, match="both or neither"):
        np.where(t > 2, t)


# ----- what is not differentiable raises, naming it --------------------------------------------------------
@pytest.mark.parametrize(("call", "name"), [
    (lambda t: np.unique(t), "np.unique"),
    (lambda t: np.linalg.cond(t), "np.linalg.cond"),
    (lambda t: np.fft.fft(t), "np.fft.fft"),
    (lambda t: np.interp(t, [0.0, 1.0], [0.0, 1.0]), "np.interp"),
    (lambda t: np.maximum.accumulate(t), "np.maximum.accumulate"),
    (lambda t: np.subtract.reduce(t), "np.subtract.reduce"),
    (lambda t: np.i0(t), "np.i0"),
])
def test_unsupported_numpy_functions_raise_a_type_error_naming_them(call: Callable[[Any], Any], name: str) -> None:
    t = Tensor([1.0, 2.0], requires_grad=True)
    pattern = rf"^{name.replace('.', '[.]')} is not differentiable in LeanPass.*t\.numpy\(\)"
    with pytest.raises(TypeError, match=pattern):
        call(t)


@pytest.mark.parametrize(("call", "arg"), [
    (lambda t: np.sum(t, where=np.array([True, False])), "where="),
    (lambda t: np.sum(t, initial=1.0), "initial="),
    (lambda t: np.add.reduce(t, where=np.array([True, False])), "where="),
    (lambda t: np.mean(t, dtype=np.float32), "dtype="),
    (lambda t: np.exp(t, dtype=np.float32), "dtype="),
    (lambda t: np.concatenate([t, t], out=np.zeros(4)), "out="),
    (lambda t: np.exp(t, out=np.zeros(2)), "out="),
    (lambda t: np.take(t, [0], mode="clip"), "mode='raise'"),
    (lambda t: np.reshape(t, (2,), order="F"), "order='C'"),
])
def test_arguments_lean_pass_would_ignore_raise(call: Callable[[Any], Any], arg: str) -> None:
    with pytest.raises(TypeError, match=arg):
        call(Tensor([1.0, 2.0], requires_grad=True))


def test_in_place_numpy_operations_are_refused() -> None:
    arr = np.zeros(2)
    with pytest.raises(TypeError, match="out= cannot be used with Tensors"):
        arr += Tensor([1.0, 2.0])
    np.testing.assert_array_equal(arr, [0.0, 0.0])


# ----- comparisons -----------------------------------------------------------------------------------------
def test_comparisons_return_plain_boolean_arrays() -> None:
    x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    other = Tensor([1.0, 0.0, 5.0])
    results = [x > 0, x >= 1.0, x < other, x <= other, x == other, x != other,
               np.array([0.0, 0.0, 0.0]) < x, np.greater(x, 0), np.isfinite(x)]
    for r in results:
        assert type(r) is np.ndarray and r.dtype == bool
    assert (x > 0).tolist() == [True, False, True]
    assert (x == other).tolist() == [True, False, False]
    assert (np.array([0.0, 0.0, 0.0]) < x).tolist() == [True, False, True]


def test_comparisons_do_not_break_the_operands_graph() -> None:
    x = Tensor([1.0, -2.0, 3.0], requires_grad=True)
    y = x * 2.0
    mask = y > 0  # a comparison in the middle of the graph
    assert y._op == "*" and y.requires_grad
    loss = (y * mask).sum() + (y ** 2).sum()
    loss.backward()
    np.testing.assert_array_equal(value(x.grad), 2.0 * mask + 8.0 * value(x))
    g = lp.grad(lambda t: lp.where(t > 0, t * t, -t).sum())(np.array([2.0, -1.0]))
    np.testing.assert_array_equal(g, [4.0, -1.0])
