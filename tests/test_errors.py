"""Error messages: each says what was wrong (naming the shapes or types involved) and what to do."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor


def shapes(a: tuple[int, ...], b: tuple[int, ...]) -> str:
    """A pattern matching a message that names shape ``a`` and, later, shape ``b``."""
    return rf"{re.escape(str(a))}.*{re.escape(str(b))}"


# ----- shapes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("left", "right"),
    [((2, 3), (4, 5)), ((3,), (4,)), ((2, 3), (2,)), ((5, 2, 3), (4, 2)), ((3,), (4, 2))],
)
def test_matmul_inner_dimension_mismatch_names_both_shapes(left: tuple, right: tuple) -> None:
    a, b = Tensor(np.ones(left), requires_grad=True), Tensor(np.ones(right))
    with pytest.raises(ValueError, match=r"matmul: inner dimensions do not match: " + shapes(left, right)):
        a @ b
    with pytest.raises(ValueError, match=shapes(left, right)):
        a.matmul(b)
    with pytest.raises(ValueError, match=shapes(left, right)):
        a @ np.ones(right)
    with pytest.raises(ValueError, match=shapes(left, right)):
        np.ones(left) @ Tensor(np.ones(right))


def test_matmul_message_says_which_axes_must_agree() -> None:
    with pytest.raises(ValueError, match=r"last axis of the left operand \(3\).*second-to-last axis.*\(4\)"):
        Tensor(np.ones((2, 3))) @ Tensor(np.ones((4, 5)))


def test_matmul_batch_axes_that_do_not_broadcast_name_both_shapes() -> None:
    with pytest.raises(ValueError, match=r"batch axes of " + shapes((2, 2, 3), (3, 3, 4)) + ".*do not broadcast"):
        Tensor(np.ones((2, 2, 3))) @ Tensor(np.ones((3, 3, 4)))


def test_matmul_of_scalars_is_an_error() -> None:
    with pytest.raises(ValueError, match=r"at least one axis.*\(\) @ \(\)"):
        Tensor(1.0) @ Tensor(2.0)


@pytest.mark.parametrize("sym", ["+", "-", "*", "/", "**"])
@pytest.mark.parametrize(("left", "right"), [((3,), (4,)), ((2, 3), (3, 2)), ((2, 1, 3), (4, 2))])
def test_non_broadcasting_shapes_name_both_shapes(sym: str, left: tuple, right: tuple) -> None:
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b, "**": lambda a, b: a**b}
    a = Tensor(np.ones(left), requires_grad=True)
    pattern = rf"{re.escape(repr(sym))}: shapes " + shapes(left, right) + r" do not broadcast.*reshape"
    with pytest.raises(ValueError, match=pattern):
        ops[sym](a, Tensor(np.ones(right)))
    with pytest.raises(ValueError, match=pattern):
        ops[sym](a, np.ones(right))
    with pytest.raises(ValueError, match=shapes(right, left)):
        ops[sym](np.ones(right), a)


# ----- operand types ------------------------------------------------------------------------------


@pytest.mark.parametrize("other", ["a", None, [1.0, 2.0], {"x": 1.0}, object()])
@pytest.mark.parametrize("sym", ["+", "-", "*", "/", "**", "@"])
def test_unsupported_operand_type_is_a_type_error(other: Any, sym: str) -> None:
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
           "/": lambda a, b: a / b, "**": lambda a, b: a**b, "@": lambda a, b: a @ b}
    t = Tensor([1.0, 2.0], requires_grad=True)
    kind = type(other).__name__
    with pytest.raises(TypeError, match=rf"unsupported operand for {re.escape(repr(sym))}: {kind}.*Tensor\(\.\.\.\)"):
        ops[sym](t, other)
    with pytest.raises(TypeError, match=rf"unsupported operand.*{kind}"):
        ops[sym](other, t)


def test_integer_data_with_requires_grad() -> None:
    with pytest.raises(TypeError, match=r"requires_grad=True needs floating-point data, but got dtype int64"):
        Tensor([1, 2], requires_grad=True, dtype=np.int64)
    with pytest.raises(TypeError, match=r"dtype bool"):
        Tensor([True], requires_grad=True, dtype=bool)


def test_non_numeric_data() -> None:
    with pytest.raises(TypeError, match=r"Tensor\(data\): unsupported dtype <U3"):
        Tensor("abc")
    with pytest.raises(TypeError, match=r"Tensor\(data\).*object"):
        Tensor(None)


# ----- backward -----------------------------------------------------------------------------------


def test_backward_on_a_non_scalar_without_cotangent() -> None:
    y = Tensor([1.0, 2.0, 3.0], requires_grad=True) * 2.0
    with pytest.raises(RuntimeError, match=r"one-element Tensor.*shape \(3,\).*t\.sum\(\)\.backward\(\).*cotangent"):
        y.backward()


def test_backward_with_a_cotangent_of_the_wrong_shape() -> None:
    y = Tensor([1.0, 2.0, 3.0], requires_grad=True) * 2.0
    with pytest.raises(ValueError, match=r"cotangent has shape \(2,\) but the Tensor has shape \(3,\)"):
        y.backward(np.ones(2))


def test_backward_where_nothing_requires_grad() -> None:
    with pytest.raises(RuntimeError, match=r"does not require grad.*requires_grad=True"):
        (Tensor([1.0, 2.0]) * 2.0).sum().backward()
    x = Tensor([1.0], requires_grad=True)
    with lp.no_grad():
        y = (x * 2.0).sum()
    with pytest.raises(RuntimeError, match=r"no_grad\(\)"):
        y.backward()
    with pytest.raises(RuntimeError, match="does not require grad"):
        x.detach().sum().backward()


def test_grad_assignment_takes_arrays_of_the_tensors_shape() -> None:
    x = Tensor([1.0], requires_grad=True)
    x.grad = np.ones(1)
    assert type(x.grad) is Tensor and x.grad.tolist() == [1.0]
    with pytest.raises(ValueError, match=r"\.grad = \.\.\.: an array of shape \(2,\) for a Tensor of shape \(1,\)"):
        x.grad = np.ones(2)
    with pytest.raises(TypeError, match=r"\.grad must be None, a Tensor or an array of numbers, not str"):
        x.grad = "abc"


# ----- transforms ---------------------------------------------------------------------------------


def test_grad_of_a_non_scalar_function_gives_the_shape_and_points_to_vjp() -> None:
    with pytest.raises(TypeError, match=r"scalar output\. Output had shape \(3,\).*leanpass\.vjp"):
        lp.grad(lambda x: x * 2.0)(np.ones(3))
    with pytest.raises(TypeError, match=r"Output had shape \(2, 2\)"):
        lp.value_and_grad(lambda x: x @ x)(np.ones((2, 2)))


def test_grad_of_a_one_element_output_is_fine() -> None:
    np.testing.assert_array_equal(lp.grad(lambda x: x * 2.0)(np.ones((1, 1))), [[2.0]])


@pytest.mark.parametrize("arg", [3, np.arange(3), True, [1, 2]])
def test_grad_of_integer_inputs_is_a_type_error(arg: Any) -> None:
    with pytest.raises(TypeError, match=r"grad needs floating-point inputs.*e\.g\. 3\.0, not 3"):
        lp.grad(lambda x: (x * 2.0).sum())(arg)


def test_integer_leaf_in_a_pytree_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="floating-point"):
        lp.grad(lambda p: p["w"] * p["n"])({"w": 2.0, "n": 3})


def test_vjp_of_integer_inputs_is_a_type_error() -> None:
    with pytest.raises(TypeError, match=r"vjp needs floating-point inputs"):
        lp.vjp(lambda x: x, np.arange(3))


def test_grad_of_a_function_returning_a_non_number() -> None:
    with pytest.raises(TypeError, match=r"must return a scalar Tensor, but returned str"):
        lp.grad(lambda x: "loss")(1.0)


def test_argnums_out_of_range() -> None:
    with pytest.raises(ValueError, match=r"argnums=2 but the function got 2 arguments"):
        lp.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)


@pytest.mark.parametrize(
    "f",
    [
        lambda x: x * np.ones(2),  # a two-element Tensor would unpack into (value, aux)
        lambda x: (x * 2.0, 1.0, 2.0),  # three values
        lambda x: x * 2.0,  # a 0-d Tensor, no aux at all
        lambda x: [x * 2.0, 1.0],  # a list, not a tuple
    ],
)
def test_has_aux_needs_a_pair(f: Any) -> None:
    with pytest.raises(TypeError, match=r"has_aux=True.*must return a pair \(value, aux\)"):
        lp.grad(f, has_aux=True)(1.0)
    with pytest.raises(TypeError, match=r"has_aux=True.*must return a pair \(value, aux\)"):
        lp.value_and_grad(f, has_aux=True)(1.0)


def test_vjp_has_aux_needs_a_pair() -> None:
    with pytest.raises(TypeError, match=r"has_aux=True.*must return a pair \(value, aux\)"):
        lp.vjp(lambda x: x * 2.0, np.ones(3), has_aux=True)


def test_vjp_cotangent_structure_and_shape() -> None:
    _, pull = lp.vjp(lambda x: {"a": x * 2.0}, np.ones(3))
    with pytest.raises(ValueError, match=r"cotangent must have the structure of the output"):
        pull([np.ones(3)])
    with pytest.raises(ValueError, match=r"cotangent shape \(2,\) does not match the output shape \(3,\)"):
        pull({"a": np.ones(2)})


def test_errors_are_not_asserts() -> None:
    """User errors must survive ``python -O``: none of the above is an AssertionError."""
    for bad in (
        lambda: Tensor(np.ones((2, 3))) @ Tensor(np.ones((4, 5))),
        lambda: Tensor([1.0]) + "a",
        lambda: (Tensor([1.0, 2.0], requires_grad=True) * 1.0).backward(),
        lambda: lp.grad(lambda x: x)(np.ones(2)),
    ):
        with pytest.raises(Exception) as info:
            bad()
        assert not isinstance(info.value, AssertionError)
