"""Ops of the user's own, recorded with ``lp.apply``: each node replays the very function it was
recorded with, so two functions under one name (closures made per call, partials) never mix up
at second order."""

from __future__ import annotations

from typing import Any

import pytest

import leanpass as lp


def _make_scaled_cube(s: float) -> Any:
    def op(x: Any) -> tuple[Any, Any]:
        return s * x * x * x, lambda g: (g * 3.0 * s * x * x,)

    return op


def test_two_functions_recorded_under_one_name_are_not_mixed_up() -> None:
    def f(x: Any) -> Any:
        return lp.apply(_make_scaled_cube(2.0), "scaled_cube", x) + lp.apply(_make_scaled_cube(3.0), "scaled_cube", x)

    assert float(lp.grad(f)(1.0)) == pytest.approx(15.0)  # (2 + 3) * 3 x^2
    try:
        second = float(lp.grad(lp.grad(f))(1.0))
    except ValueError as e:  # a clear refusal would also do
        assert "scaled_cube" in str(e)
    else:
        assert second == pytest.approx(30.0)  # (2 + 3) * 6 x; it gives 2 * 3 * 6 x = 36
