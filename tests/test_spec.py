"""Every example of the user's specification page (spec/operations.md), run exactly as written, with
every value the page states asserted, and the Gradient Flow table checked against gradients worked
out by hand.

The examples are copied here (CI may not have the spec at the same path); only the imports the page
leaves implicit are added.
"""

from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor


def vals(t: Tensor) -> np.ndarray:
    return np.asarray(t.data)


def test_arithmetic_operations() -> None:
    a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = Tensor([4.0, 5.0, 6.0], requires_grad=True)

    c = a + b      # addition
    d = a - b      # subtraction
    e = a * b      # element-wise multiplication
    f = a / b      # division

    # With Python scalars
    g = a + 10.0
    h = a * 2.0
    i = 3.0 - a

    np.testing.assert_array_equal(vals(c), [5.0, 7.0, 9.0])
    np.testing.assert_array_equal(vals(d), [-3.0, -3.0, -3.0])
    np.testing.assert_array_equal(vals(e), [4.0, 10.0, 18.0])
    np.testing.assert_allclose(vals(f), [0.25, 0.4, 0.5])
    np.testing.assert_array_equal(vals(g), [11.0, 12.0, 13.0])
    np.testing.assert_array_equal(vals(h), [2.0, 4.0, 6.0])
    np.testing.assert_array_equal(vals(i), [2.0, 1.0, 0.0])
    assert [t._op for t in (c, d, e, f, g, h, i)] == ["+", "-", "*", "/", "+", "*", "-"]
    assert all(t.requires_grad for t in (c, d, e, f, g, h, i))


def test_matrix_multiplication() -> None:
    x = Tensor(np.random.randn(32, 64), requires_grad=True)
    w = Tensor(np.random.randn(64, 16), requires_grad=True)

    y = x @ w   # shape (32, 16)

    assert y.shape == (32, 16)
    assert y._op == "@"
    np.testing.assert_allclose(vals(y), vals(x) @ vals(w))
    np.testing.assert_array_equal(vals(x.matmul(w)), vals(y))  # "or .matmul()"
    assert x.matmul(w)._op == "@"


def test_power() -> None:
    x = Tensor([2.0, 3.0], requires_grad=True)
    y = x ** 2   # element-wise square: [4.0, 9.0]

    np.testing.assert_array_equal(vals(y), [4.0, 9.0])
    assert y._op == "**"


def test_power_takes_any_real_exponent() -> None:
    # The page says "currently only ** 2 is supported"; LeanPass lifts that limit.
    x = Tensor([2.0, 3.0], requires_grad=True)
    np.testing.assert_array_equal(vals(x ** 3), [8.0, 27.0])
    np.testing.assert_allclose(vals(x ** 0.5), np.sqrt([2.0, 3.0]))
    np.testing.assert_allclose(vals(x ** -1), [0.5, 1 / 3])
    (x ** 3).sum().backward()
    np.testing.assert_array_equal(vals(x.grad), [12.0, 27.0])  # 3 x^2
    x.grad = None
    (x ** 0.5).sum().backward()
    np.testing.assert_allclose(vals(x.grad), 0.5 / np.sqrt([2.0, 3.0]))
    x.grad = None
    (x ** 2.5).sum().backward()
    np.testing.assert_allclose(vals(x.grad), 2.5 * np.array([2.0, 3.0]) ** 1.5)


def test_negation() -> None:
    x = Tensor([1.0, -2.0], requires_grad=True)
    y = -x       # [-1.0, 2.0]

    np.testing.assert_array_equal(vals(y), [-1.0, 2.0])
    assert y._op == "neg"


def test_reduction_operations() -> None:
    x = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)

    s = x.sum()    # scalar: 10.0
    m = x.mean()   # scalar: 2.5

    assert s.shape == () and s.item() == 10.0
    assert m.shape == () and m.item() == 2.5
    assert s._op == "sum" and m._op == "mean"


def test_non_linear_operations() -> None:
    x = Tensor([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)

    r = x.relu()      # [0.0, 0.0, 0.0, 1.0, 2.0]
    e = x.exp()       # [0.135, 0.368, 1.0, 2.718, 7.389]
    l = x.log()       # nan, nan, -inf, 0.0, 0.693  (log of negative is nan)  # noqa: E741
    s = x.sigmoid()   # [0.119, 0.269, 0.5, 0.731, 0.881]

    np.testing.assert_array_equal(vals(r), [0.0, 0.0, 0.0, 1.0, 2.0])
    np.testing.assert_array_equal(np.round(vals(e), 3), [0.135, 0.368, 1.0, 2.718, 7.389])
    lv = vals(l)
    assert np.isnan(lv[0]) and np.isnan(lv[1])  # log of negative is nan (no exception, no warning)
    assert lv[2] == -np.inf
    assert lv[3] == 0.0 and round(float(lv[4]), 3) == 0.693
    np.testing.assert_array_equal(np.round(vals(s), 3), [0.119, 0.269, 0.5, 0.731, 0.881])
    assert [t._op for t in (r, e, l, s)] == ["relu", "exp", "log", "sigmoid"]


def test_operation_graph() -> None:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        x = Tensor([2.0], requires_grad=True)
        y = x ** 2
        z = y + 1.0

        print(z._op)    # "+"
        print(y._op)    # "**"
        print(x._op)    # "leaf" (no operation — a root node)

    assert out.getvalue().splitlines() == ["+", "**", "leaf"]
    assert z._parents[0] is y and y._parents[0] is x  # parents in order, Tensors as the edges


# ----- the Gradient Flow table, by hand -------------------------------------------------------------------
def test_gradient_flow_add_passes_unchanged_summed_if_broadcast() -> None:
    a = Tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = Tensor([10.0, 20.0, 30.0], requires_grad=True)  # broadcast over the rows
    g = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    (a + b).backward(g)
    np.testing.assert_array_equal(vals(a.grad), g)
    np.testing.assert_array_equal(vals(b.grad), [5.0, 7.0, 9.0])  # summed over the broadcast axis


def test_gradient_flow_sub_unchanged_to_first_negated_to_second() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 5.0], requires_grad=True)
    (a - b).backward(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(vals(a.grad), [1.0, 10.0])
    np.testing.assert_array_equal(vals(b.grad), [-1.0, -10.0])


def test_gradient_flow_mul_by_the_other_input() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 5.0], requires_grad=True)
    (a * b).backward(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(vals(a.grad), [3.0, 50.0])
    np.testing.assert_array_equal(vals(b.grad), [1.0, 20.0])


def test_gradient_flow_div() -> None:
    a = Tensor([1.0, 6.0], requires_grad=True)
    b = Tensor([2.0, 3.0], requires_grad=True)
    (a / b).backward(np.array([1.0, 1.0]))
    np.testing.assert_allclose(vals(a.grad), [1 / 2.0, 1 / 3.0])  # 1 / other
    np.testing.assert_allclose(vals(b.grad), [-1.0 / 4.0, -6.0 / 9.0])  # -self / other^2


def test_gradient_flow_pow_two_times_self() -> None:
    x = Tensor([2.0, -3.0], requires_grad=True)
    (x ** 2).backward(np.array([1.0, 10.0]))
    np.testing.assert_array_equal(vals(x.grad), [4.0, -60.0])  # g * 2 * self


def test_gradient_flow_matmul_by_the_other_transposed() -> None:
    x = Tensor(np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]), requires_grad=True)  # (3, 2)
    w = Tensor(np.array([[1.0, -1.0, 0.5, 2.0], [0.0, 1.0, 1.0, -2.0]]), requires_grad=True)  # (2, 4)
    g = np.arange(12.0).reshape(3, 4)
    (x @ w).backward(g)
    np.testing.assert_allclose(vals(x.grad), g @ vals(w).T)
    np.testing.assert_allclose(vals(w.grad), vals(x).T @ g)
    np.testing.assert_allclose(vals(x.grad)[0, 0], g[0] @ vals(w)[0])  # one entry, by hand: 0-1+1+6 = 6
    assert vals(x.grad)[0, 0] == 6.0


def test_gradient_flow_sum_broadcasts_back() -> None:
    x = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    x.sum().backward()
    np.testing.assert_array_equal(vals(x.grad), np.ones((2, 2)))


def test_gradient_flow_mean_divided_by_count() -> None:
    x = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]), requires_grad=True)
    x.mean().backward()
    np.testing.assert_array_equal(vals(x.grad), np.full((2, 2), 0.25))


def test_gradient_flow_through_the_graph_example() -> None:
    # z = x ** 2 + 1  ->  dz/dx = 2x = 4 at x = 2, by both front doors
    x = Tensor([2.0], requires_grad=True)
    z = x ** 2 + 1.0
    z.backward()
    np.testing.assert_array_equal(vals(x.grad), [4.0])
    assert lp.grad(lambda t: (t ** 2 + 1.0).sum())(np.array([2.0])).tolist() == [4.0]


@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_python_numbers_on_either_side(op: str) -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    left = {"+": 3.0 + a, "-": 3.0 - a, "*": 3.0 * a, "/": 3.0 / a}[op]
    right = {"+": a + 3.0, "-": a - 3.0, "*": a * 3.0, "/": a / 3.0}[op]
    assert left._op == op and right._op == op
    left.sum().backward()
    want = {"+": [1.0, 1.0], "-": [-1.0, -1.0], "*": [3.0, 3.0], "/": [-3.0, -0.75]}[op]
    np.testing.assert_allclose(vals(a.grad), want)
