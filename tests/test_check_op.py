"""``leanpass.testing``'s property tests for users: the hypothesis strategies (shapes, broadcasting
shapes, dtypes, values inside an op's domain) and ``check_op``, which passes LeanPass's own ops and a
plugin's, and fails loudly on deliberately wrong VJPs, JVPs, second orders and batching."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from conftest import forget_ops
from leanpass import functional as F
from leanpass.plugin_registry import TRANSPOSED, register_op
from leanpass.testing import arrays, broadcastable_shapes, check_op, float_dtypes, op_inputs, shapes


@pytest.fixture(autouse=True)
def _forget_registered() -> Iterator[None]:
    before = set(F.REGISTRY)
    yield
    forget_ops(set(F.REGISTRY) - before)


# ----- the strategies ---------------------------------------------------------------------------------------
@settings(max_examples=40, deadline=None)
@given(broadcastable_shapes(3, max_dims=4), shapes(min_dims=1, max_dims=2, max_side=3), float_dtypes())
def test_shape_and_dtype_strategies(shapes3: tuple[tuple[int, ...], ...], shape: tuple[int, ...],
                                    dtype: np.dtype) -> None:
    assert len(shapes3) == 3 and all(len(s) <= 4 for s in shapes3)
    np.broadcast_shapes(*shapes3)
    assert 1 <= len(shape) <= 2 and all(1 <= n <= 3 for n in shape)
    assert dtype in (np.float32, np.float64)


@settings(max_examples=40, deadline=None)
@given(arrays(shapes(), np.float32, domain=(0.0, 2.0), margin=0.1, avoid=(1.0,)),
       op_inputs(2, domain=[(1.0, 3.0), (-5.0, -4.0)]))
def test_values_stay_inside_the_domain_and_away_from_the_points_to_avoid(x: np.ndarray, xy: Any) -> None:
    assert x.dtype == np.float32 and np.all(x >= np.float32(0.1)) and np.all(x <= np.float32(1.9))
    assert np.all(np.abs(x - 1.0) >= 0.1 - 1e-6)
    a, b = xy
    assert np.all((a > 1.0) & (a < 3.0)) and np.all((b > -5.0) & (b < -4.0))
    np.broadcast_shapes(a.shape, b.shape)


def test_strategies_refuse_an_empty_domain() -> None:
    with pytest.raises(ValueError, match="empty"):
        arrays((2,), domain=(0.0, 0.01))
    with pytest.raises(ValueError, match="outside the domain"):
        arrays((2,), domain=(0.0, 1.0), avoid=(2.0,))
    with pytest.raises(ValueError, match="2 domains for 3 inputs"):  # (for op_inputs(3))
        op_inputs(3, domain=[(0.0, 1.0), (0.0, 1.0)])


def test_the_strategies_name_the_extra_when_hypothesis_is_missing_and_check_op_runs_on_examples() -> None:
    code = ("import sys; sys.modules['hypothesis'] = None\n"
            "import numpy as np, leanpass.testing as t\n"
            "t.check_op('exp', examples=[(np.array([0.5, 1.0]),)])\n"
            "for call in (t.shapes, lambda: t.check_op('exp')):\n"
            "    try:\n"
            "        call()\n"
            "    except ImportError as e:\n"
            "        print('pip install hypothesis' in str(e), 'examples=' in str(e))\n")
    env = {**os.environ, "PYTHONPATH": str(Path(lp.__file__).parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True", "True", "True"]


# ----- check_op passes right ops ----------------------------------------------------------------------------
@pytest.mark.parametrize("op, options", [
    ("exp", {}), ("tanh", {}), ("sigmoid", {}), (F.mul, {}), ("logaddexp", {}), ("/", {"domain": (0.2, 3.0)}),
    ("log", {"domain": (0.0, 5.0)}), ("sqrt", {"domain": (0.0, 4.0)}), ("abs", {"avoid": (0.0,)}),
    ("arctan2", {"domain": (0.1, 3.0)}), ("sum", {}), ("softmax", {"inputs": op_inputs(1, min_dims=1)}),
], ids=str)
def test_check_op_passes_leanpass_own_ops(op: Any, options: dict) -> None:
    check_op(op, max_examples=10, **options)


def test_check_op_takes_a_strategy_of_inputs() -> None:
    pairs = st.tuples(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3)).flatmap(
        lambda nkm: st.tuples(arrays((nkm[0], nkm[1])), arrays((nkm[1], nkm[2]))))
    check_op("@", inputs=pairs, max_examples=10)


def _softsign(x: Any) -> tuple[Any, Any]:
    d = 1.0 + np.abs(x)
    return x / d, lambda g: (g / (d * d),)


def test_a_plugin_op_is_checked_in_one_line() -> None:
    register_op("lp_softsign", _softsign, jvp=lambda ts, ans, x: ts[0] / (1.0 + np.abs(x)) ** 2)
    check_op("lp_softsign", avoid=(0.0,))
    check_op(lp.ops.lp_softsign, avoid=(0.0,), max_examples=5)
    register_op("lp_mish", lambda x: x * np.tanh(np.log1p(np.exp(x))))  # forward only, NumPy calls on Tensors
    check_op("lp_mish", max_examples=10)


# ----- check_op fails loudly on wrong rules ------------------------------------------------------------------
def _fails(op: Any, check: str, **options: Any) -> str:
    with pytest.raises(AssertionError, match=f"check_op.*{check}") as e:
        check_op(op, max_examples=10, **options)
    return str(e.value)


def test_check_op_catches_a_wrong_vjp() -> None:
    def cube(x: Any) -> tuple[Any, Any]:
        return x ** 3, lambda g: (2 * x ** 2 * g,)  # should be 3 x^2

    register_op("lp_bad_cube", cube, jvp=TRANSPOSED)
    assert "lp_bad_cube" in _fails("lp_bad_cube", "the VJP")


def test_check_op_catches_a_vjp_that_forgets_to_unbroadcast() -> None:
    def add(x: Any, y: Any) -> tuple[Any, Any]:
        return x + y, lambda g: (g, g)  # (cotangents of the broadcast shape)

    register_op("lp_bad_add", add, jvp=lambda ts, ans, x, y: ts[0] + ts[1])
    _fails("lp_bad_add", "the VJP")


def test_check_op_catches_a_wrong_second_order() -> None:
    def sin(x: Any) -> tuple[Any, Any]:  # right at first order; its VJP hides x from a second one
        return np.sin(x), lambda g: (g * np.cos(lp.stop_gradient(x)),)

    register_op("lp_bad_sin", sin, jvp=lambda ts, ans, x: ts[0] * np.cos(x))
    check_op("lp_bad_sin", order=1, max_examples=5)
    assert "order 1 remaining" in _fails("lp_bad_sin", "the VJP")


def test_check_op_catches_a_wrong_jvp_rule_even_one_finite_differences_cannot_see() -> None:
    def square(x: Any) -> tuple[Any, Any]:
        return x * x, lambda g: (2 * x * g,)

    register_op("lp_bad_jvp", square, jvp=lambda ts, ans, x: -2 * x * ts[0])
    _fails("lp_bad_jvp", "the JVP")
    forget_ops(["lp_bad_jvp"])
    register_op("lp_bad_jvp", square, jvp=lambda ts, ans, x: 2 * x * ts[0] * (1 + 1e-7))  # within FD's tolerance
    assert "not the VJP transposed" in _fails("lp_bad_jvp", "the JVP", avoid=(0.0,))


def test_check_op_catches_an_op_that_cannot_be_batched_and_checks_a_declared_refusal() -> None:
    def checked(x: Any) -> tuple[Any, Any]:
        if float(np.max(x)) > 1e3:  # a Python number: each example has its own, which vmap cannot make
            raise ValueError("too large")
        return 2 * x, lambda g: (2 * g,)

    register_op("lp_unbatchable", checked, jvp=TRANSPOSED)
    assert "raised TypeError" in _fails("lp_unbatchable", "vmap", order=1)
    register_op("lp_refuses", _softsign, jvp=TRANSPOSED, vmap="it refuses")
    check_op("lp_refuses", avoid=(0.0,), max_examples=5)  # (vmap raises the refusal: checked, and passes)


def test_check_op_reports_the_plugin_error_of_a_forward_function_on_plain_arrays() -> None:
    register_op("lp_plain", lambda x: np.asarray(x) * 2.0)
    with pytest.raises(AssertionError, match="the VJP.*raised TypeError: op 'lp_plain'.*cannot be differentiated"):
        check_op("lp_plain", examples=[(np.array([1.0]),)])


@settings(max_examples=10, deadline=None)
@given(hnp.arrays(np.float64, (3,), elements=st.floats(-2, 2)))
def test_check_op_on_examples_is_the_same_check(x: np.ndarray) -> None:
    check_op("tanh", examples=[(x,)])
