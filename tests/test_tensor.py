"""The Tensor itself: construction, immutability, attributes, repr, NumPy interop, operators."""

from __future__ import annotations

import copy
import operator
import pickle
from dataclasses import FrozenInstanceError

import numpy as np
import pytest

import leanpass as lp
from leanpass import Tensor

# ----- construction ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("data", "shape", "dtype"),
    [
        ([1.0, 2.0, 3.0], (3,), np.float64),
        ([[1.0, 2.0], [3.0, 4.0]], (2, 2), np.float64),
        (2.5, (), np.float64),
        (3, (), np.int64),
        (True, (), np.bool_),
        ([1, 2], (2,), np.int64),
        (np.arange(6.0).reshape(2, 3), (2, 3), np.float64),
        (np.ones(4, dtype=np.float32), (4,), np.float32),
        (np.float32(1.5), (), np.float32),
    ],
)
def test_construction_from_lists_numbers_and_arrays(data: object, shape: tuple, dtype: type) -> None:
    t = Tensor(data)
    assert t.shape == shape
    assert t.dtype == dtype
    np.testing.assert_array_equal(t.data, np.asarray(data))
    assert t._op == "leaf"
    assert not t.requires_grad


def test_dtype_argument_converts() -> None:
    t = Tensor([1, 2, 3], dtype=np.float32)
    assert t.dtype == np.float32
    np.testing.assert_array_equal(t.data, [1.0, 2.0, 3.0])
    assert Tensor(np.ones(2), dtype=np.float32, requires_grad=True).dtype == np.float32


def test_construction_copies_the_users_array_and_leaves_it_writeable() -> None:
    a = np.array([1.0, 2.0, 3.0])
    t = Tensor(a, requires_grad=True)
    assert a.flags.writeable  # the user's flag is not touched
    assert not np.shares_memory(a, t.data)
    a[0] = 100.0  # editing the user's array later does not reach the Tensor
    np.testing.assert_array_equal(t.data, [1.0, 2.0, 3.0])
    # reading .data (which marks the Tensor's own array read-only) still leaves ``a`` alone
    _ = t.data, t.detach().numpy(), np.asarray(t.detach())
    assert a.flags.writeable
    a[1] = 7.0
    np.testing.assert_array_equal(t.data, [1.0, 2.0, 3.0])


def test_construction_from_a_read_only_array_keeps_its_flag() -> None:
    a = np.array([1.0, 2.0])
    a.flags.writeable = False
    t = Tensor(a)
    assert not a.flags.writeable
    np.testing.assert_array_equal(t.data, a)


def test_operations_do_not_touch_the_users_operand_arrays() -> None:
    a = np.array([1.0, 2.0])
    x = Tensor([3.0, 4.0], requires_grad=True)
    (x * a + a).sum().backward()
    assert a.flags.writeable
    np.testing.assert_array_equal(a, [1.0, 2.0])
    np.testing.assert_array_equal(x.grad.data, [1.0, 2.0])


@pytest.mark.parametrize("data", [[1, 2], 3, [True, False], np.arange(3), np.array(True)])
def test_integer_or_boolean_data_requiring_grad_becomes_float64(data: object) -> None:
    # as in LeanPass 0.1 (Tensor([1, 2, 3], requires_grad=True) is a float tensor there)
    t = Tensor(data, requires_grad=True)
    assert t.dtype == np.float64 and t.requires_grad
    np.testing.assert_array_equal(t.data, np.asarray(data, dtype=np.float64))


@pytest.mark.parametrize("dtype", [np.int64, np.int32, bool])
def test_an_integer_dtype_asked_for_cannot_require_grad(dtype: object) -> None:
    with pytest.raises(TypeError, match=r"requires_grad=True needs floating-point data.*dtype"):
        Tensor([1, 2], requires_grad=True, dtype=dtype)


@pytest.mark.parametrize("data", ["abc", None, [1.0, "x"], {"a": 1.0}])
def test_non_numeric_data_is_a_type_error(data: object) -> None:
    with pytest.raises(TypeError, match="Tensor"):
        Tensor(data)


# ----- immutability ----------------------------------------------------------------------------


def test_data_is_read_only() -> None:
    for t in (Tensor([1.0, 2.0]), Tensor([1.0, 2.0], requires_grad=True) * 2.0):
        for arr in (t.data, t.detach().numpy(), np.asarray(t.detach())):
            assert not arr.flags.writeable
            with pytest.raises(ValueError, match="read-only"):
                arr[0] = 5.0
        np.testing.assert_array_equal(t.data, [1.0, 2.0] if t._op == "leaf" else [2.0, 4.0])


def test_item_assignment_says_to_build_a_new_tensor() -> None:
    t = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match=r"immutable.*Build a new\s+Tensor"):
        t[0] = 1.0
    np.testing.assert_array_equal(t.data, [1.0, 2.0])


@pytest.mark.parametrize("name", ["data", "shape", "_data", "_op", "requires_grad"])
def test_attribute_assignment_says_to_build_a_new_tensor(name: str) -> None:
    t = Tensor([1.0, 2.0])
    with pytest.raises(FrozenInstanceError, match=rf"immutable: cannot assign to '{name}'.*Build a new Tensor"):
        setattr(t, name, np.zeros(2))
    np.testing.assert_array_equal(t.data, [1.0, 2.0])


def test_the_way_to_edit_is_a_copy() -> None:
    t = Tensor([1.0, 2.0])
    a = t.data.copy()
    a[0] = 5.0
    u = Tensor(a)
    np.testing.assert_array_equal(u.data, [5.0, 2.0])
    np.testing.assert_array_equal(t.data, [1.0, 2.0])


def test_in_place_numpy_ufunc_into_a_tensor_is_refused() -> None:
    t = Tensor([1.0, 2.0])
    with pytest.raises(TypeError, match="immutable"):
        np.add(t, 1.0, out=t)


# ----- attributes ------------------------------------------------------------------------------


def test_shape_dtype_ndim_size_len() -> None:
    t = Tensor(np.zeros((2, 3, 4)))
    assert (t.shape, t.dtype, t.ndim, t.size, len(t)) == ((2, 3, 4), np.float64, 3, 24, 2)
    s = Tensor(1.5)
    assert (s.shape, s.ndim, s.size) == ((), 0, 1)
    with pytest.raises(TypeError):
        len(s)


def test_transpose_property() -> None:
    m = np.arange(6.0).reshape(2, 3)
    t = Tensor(m, requires_grad=True)
    np.testing.assert_array_equal(t.T.data, m.T)
    assert t.T.shape == (3, 2)
    (t.T * np.arange(6.0).reshape(3, 2)).sum().backward()
    np.testing.assert_array_equal(t.grad.data, np.arange(6.0).reshape(3, 2).T)


def test_data_numpy_item_tolist() -> None:
    t = Tensor([[2.5]])
    assert isinstance(t.data, np.ndarray)
    np.testing.assert_array_equal(t.data, [[2.5]])
    np.testing.assert_array_equal(t.data, [[2.5]])
    assert t.item() == 2.5 and type(t.item()) is float
    assert Tensor(3).item() == 3 and type(Tensor(3).item()) is int
    assert Tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    with pytest.raises(ValueError):
        Tensor([1.0, 2.0]).item()


def test_asarray() -> None:
    t = Tensor([1.0, 2.0])
    a = np.asarray(t)
    assert type(a) is np.ndarray
    np.testing.assert_array_equal(a, [1.0, 2.0])
    assert np.asarray(t, dtype=np.float32).dtype == np.float32
    assert np.array(t).dtype == np.float64


# ----- repr ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("make", "text"),
    [
        (lambda: Tensor([1.0, 2.0]), "Tensor([1., 2.])"),
        (lambda: Tensor(2.5), "Tensor(2.5)"),
        (lambda: Tensor([1, 2]), "Tensor([1, 2], dtype=int64)"),
        (lambda: Tensor(np.float32(3.0)), "Tensor(3., dtype=float32)"),
        (lambda: Tensor([1.0, 2.0], requires_grad=True), "Tensor([1., 2.], requires_grad=True)"),
        (lambda: Tensor([1.0, 2.0], requires_grad=True) * 2.0, "Tensor([2., 4.], requires_grad=True, op='*')"),
        (
            lambda: Tensor(np.arange(3, dtype=np.float32), requires_grad=True).exp() * 0.0,
            "Tensor([0., 0., 0.], dtype=float32, requires_grad=True, op='*')",
        ),
        (lambda: Tensor([[1.0, 2.0], [3.0, 4.0]]), "Tensor([[1., 2.],\n        [3., 4.]])"),
        (lambda: Tensor([1.0, 2.0]) * 2.0, "Tensor([2., 4.])"),  # a constant records no op
    ],
)
def test_repr(make: object, text: str) -> None:
    assert repr(make()) == text  # type: ignore[operator]


# ----- operators and NumPy on the left -------------------------------------------------------------

OPERATORS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.pow]


@pytest.mark.parametrize("op", OPERATORS, ids=lambda f: f.__name__)
def test_python_numbers_on_either_side(op: object) -> None:
    a = np.array([1.0, 2.0, 4.0])
    t = Tensor(a, requires_grad=True)
    for left, right, want in ((t, 3.0, op(a, 3.0)), (3.0, t, op(3.0, a)), (t, 2, op(a, 2)), (2, t, op(2, a))):
        r = op(left, right)  # type: ignore[operator]
        assert type(r) is Tensor
        np.testing.assert_allclose(r.data, want)
        assert r.requires_grad


def test_spec_scalar_examples() -> None:
    a = Tensor([1.0, 2.0, 4.0], requires_grad=True)
    np.testing.assert_allclose((3.0 - a).data, [2.0, 1.0, -1.0])
    np.testing.assert_allclose((2.0 / a).data, [2.0, 1.0, 0.5])
    np.testing.assert_allclose((2.0**a).data, [2.0, 4.0, 16.0])
    (3.0 - a + 2.0 / a + 2.0**a).sum().backward()
    want = -1.0 - 2.0 / np.array([1.0, 2.0, 4.0]) ** 2 + np.log(2.0) * 2.0 ** np.array([1.0, 2.0, 4.0])
    np.testing.assert_allclose(a.grad.data, want)


@pytest.mark.parametrize(
    "op", [*OPERATORS, operator.matmul], ids=lambda f: f.__name__
)
def test_numpy_array_on_the_left_dispatches_to_the_tensor(op: object) -> None:
    arr = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = Tensor([[0.5, 1.0], [1.5, 2.0]], requires_grad=True)
    r = op(arr, t)  # type: ignore[operator]
    assert type(r) is Tensor
    np.testing.assert_allclose(r.data, op(arr, t.data))  # type: ignore[operator]
    assert r.requires_grad
    r.sum().backward()
    assert t.grad is not None and t.grad.shape == (2, 2)


def test_numpy_array_on_the_left_gradient_values() -> None:
    arr = np.array([1.0, 2.0, 3.0])
    t = Tensor([4.0, 5.0, 6.0], requires_grad=True)
    (arr * t).sum().backward()
    np.testing.assert_array_equal(t.grad.data, arr)
    np.testing.assert_array_equal(arr, [1.0, 2.0, 3.0])


def test_numpy_scalars_on_the_left() -> None:
    t = Tensor([1.0, 2.0], requires_grad=True)
    r = np.float64(2.0) * t
    assert type(r) is Tensor and r.requires_grad
    np.testing.assert_array_equal(r.data, [2.0, 4.0])


def test_in_place_operator_on_a_tensor_name_rebinds() -> None:
    t = Tensor([1.0, 2.0], requires_grad=True)
    original = t
    t += 1.0  # no __iadd__: a new Tensor is bound, the old one is untouched
    assert t is not original
    np.testing.assert_array_equal(original.data, [1.0, 2.0])
    np.testing.assert_array_equal(t.data, [2.0, 3.0])


def test_matmul_method_and_operator_agree() -> None:
    x = np.arange(6.0).reshape(2, 3)
    w = np.arange(12.0).reshape(3, 4)
    assert np.array_equal(Tensor(x).matmul(w).data, (Tensor(x) @ Tensor(w)).data)
    np.testing.assert_array_equal((Tensor(x) @ w).data, x @ w)


# ----- the spec page's values --------------------------------------------------------------------


def test_spec_values() -> None:
    a = Tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = Tensor([4.0, 5.0, 6.0], requires_grad=True)
    np.testing.assert_array_equal((a + b).data, [5.0, 7.0, 9.0])
    np.testing.assert_array_equal((a - b).data, [-3.0, -3.0, -3.0])
    np.testing.assert_array_equal((a * b).data, [4.0, 10.0, 18.0])
    np.testing.assert_allclose((a / b).data, [0.25, 0.4, 0.5])
    np.testing.assert_array_equal((a + 10.0).data, [11.0, 12.0, 13.0])
    np.testing.assert_array_equal((a * 2.0).data, [2.0, 4.0, 6.0])
    np.testing.assert_array_equal((3.0 - a).data, [2.0, 1.0, 0.0])
    x = Tensor(np.random.default_rng(0).standard_normal((32, 64)), requires_grad=True)
    w = Tensor(np.random.default_rng(1).standard_normal((64, 16)), requires_grad=True)
    assert (x @ w).shape == (32, 16)
    np.testing.assert_array_equal((Tensor([2.0, 3.0]) ** 2).data, [4.0, 9.0])
    np.testing.assert_array_equal((-Tensor([1.0, -2.0])).data, [-1.0, 2.0])
    m = Tensor(np.array([[1.0, 2.0], [3.0, 4.0]]))
    assert m.sum().item() == 10.0 and m.mean().item() == 2.5
    x = Tensor([-2.0, -1.0, 0.0, 1.0, 2.0], requires_grad=True)
    np.testing.assert_array_equal(x.relu().data, [0.0, 0.0, 0.0, 1.0, 2.0])
    np.testing.assert_allclose(x.exp().data, [0.135, 0.368, 1.0, 2.718, 7.389], atol=5e-4)
    log = x.log().data
    assert np.isnan(log[:2]).all() and log[2] == -np.inf
    np.testing.assert_allclose(log[3:], [0.0, 0.693], atol=5e-4)
    np.testing.assert_allclose(x.sigmoid().data, [0.119, 0.269, 0.5, 0.731, 0.881], atol=5e-4)


def test_op_names() -> None:
    x = Tensor([2.0], requires_grad=True)
    y = x**2
    z = y + 1.0
    assert (z._op, y._op, x._op) == ("+", "**", "leaf")
    a = Tensor([[1.0, 2.0]], requires_grad=True)
    b = Tensor([[3.0], [4.0]], requires_grad=True)
    named = {
        "+": a + 1.0,
        "-": a - 1.0,
        "*": a * 2.0,
        "/": a / 2.0,
        "**": a**3,
        "@": a @ b,
        "neg": -a,
        "sum": a.sum(),
        "mean": a.mean(),
        "relu": a.relu(),
        "exp": a.exp(),
        "log": a.log(),
        "sigmoid": a.sigmoid(),
    }
    for name, t in named.items():
        assert t._op == name
    assert (1.0 - a)._op == "-" and (2.0 / a)._op == "/" and (2.0**a)._op == "**"
    assert a.matmul(b)._op == "@"
    assert lp.exp(a)._op == "exp" and lp.sum(a)._op == "sum"
    assert np.exp(a)._op == "exp"


def test_parents_are_an_ordered_tuple_of_the_inputs() -> None:
    a = Tensor([1.0], requires_grad=True)
    b = Tensor([2.0], requires_grad=True)
    d = b - a
    assert type(d._parents) is tuple
    assert d._parents[0] is b and d._parents[1] is a
    e = 3.0 - a
    assert e._parents[1] is a


def test_detach_and_no_grad_results_are_leaves() -> None:
    a = Tensor([1.0], requires_grad=True)
    d = (a * 2.0).detach()
    assert d._op == "leaf" and not d.requires_grad
    np.testing.assert_array_equal(d.data, [2.0])


# ----- iteration, copy and pickle ------------------------------------------------------------------


def test_iterating_a_0d_tensor_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="0-d"):
        list(Tensor(1.0))


def test_iterating_rows_records_them() -> None:
    x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    rows = list(x)
    assert len(rows) == 2 and all(r.shape == (2,) for r in rows)
    (rows[0] * rows[1]).sum().backward()
    np.testing.assert_array_equal(x.grad.data, [[3.0, 4.0], [1.0, 2.0]])


@pytest.mark.parametrize("how", [copy.copy, copy.deepcopy, lambda t: pickle.loads(pickle.dumps(t))],
                         ids=["copy", "deepcopy", "pickle"])
@pytest.mark.parametrize(
    "make",
    [lambda: Tensor([1.0, 2.0], requires_grad=True), lambda: Tensor(np.ones(3, np.float32)), lambda: Tensor(3)],
    ids=["leaf", "float32", "int"],
)
def test_copy_and_pickle_a_tensor(how: object, make: object) -> None:
    t = make()  # type: ignore[operator]
    c = how(t)  # type: ignore[operator]
    assert type(c) is Tensor
    np.testing.assert_array_equal(c.data, t.data)
    assert c.dtype == t.dtype and c.requires_grad == t.requires_grad
    with pytest.raises(ValueError, match="read-only"):
        c.data[0] = 5.0


def test_deepcopy_of_a_parameter_dict_is_independent() -> None:
    params = {"w": Tensor([1.0, 2.0], requires_grad=True)}
    best = copy.deepcopy(params)
    (params["w"] * 2.0).sum().backward()
    assert best["w"].grad is None
    np.testing.assert_array_equal(best["w"].data, [1.0, 2.0])


def test_parents_of_one_input_ops_ops_with_constants_and_many_inputs() -> None:
    a = Tensor([1.0, 2.0], requires_grad=True)
    b = Tensor([3.0, 4.0], requires_grad=True)
    assert a._parents == ()
    assert a.relu()._parents[0] is a and len(a.relu()._parents) == 1
    s = a.sum(axis=0, keepdims=True)
    assert s._parents[0] is a and s._parents[1:] == (0, True)
    c = lp.concatenate([a, b, a])
    assert [p is q for p, q in zip(c._parents[1:], (a, b, a))] == [True, True, True]
    assert (a * 2.0)._parents[1] == 2.0 and (2.0 * a)._parents == (2.0, a)


def test_a_reflected_operator_called_with_a_tensor_records_other_op_self() -> None:
    a, b = Tensor([1.0, 2.0], requires_grad=True), Tensor([3.0, 5.0], requires_grad=True)
    y = a.__rsub__(b)  # b - a, as Python would call it if b's own operator declined
    y.sum().backward()
    assert y.op == "-" and np.array_equal(y.detach().numpy(), [2.0, 3.0])
    assert np.array_equal(a.grad.numpy(), [-1.0, -1.0]) and np.array_equal(b.grad.numpy(), [1.0, 1.0])
