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


def _fresh_python(code: str) -> str:
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout


def test_ops_that_load_on_first_use_are_in_the_table():
    """The convolution, pooling, padding, normalisation, linalg and special ops load on first use, yet
    the op table answers for them, lists them, and records them, whichever way their module loads."""
    out = _fresh_python(
        "import sys, numpy as np, leanpass as lp\n"
        "from leanpass import functional as F\n"
        "print('leanpass.functional.conv' in sys.modules, 'leanpass.numpy.convolution' in sys.modules)\n"
        "print('conv2d' in F.OPS, F.OPS['max_pool2d'].__name__, 'leanpass.functional.conv' in sys.modules)\n"
        "print(all(n in list(F.OPS) for n in F._LAZY_MODULE), len(F.OPS) == len(dict(F.OPS)))\n"
    )
    assert out.split() == ["False", "False", "True", "max_pool2d", "True", "True", "True"]
    # a module imported directly registers its ops: lp.apply knows the built-in (its name is taken)
    out = _fresh_python(
        "import numpy as np, leanpass as lp\n"
        "from leanpass.functional.linalg import det\n"
        "x = lp.Tensor(np.eye(2) * 2.0, requires_grad=True)\n"
        "y = lp.apply(det, 'det', x)\n"
        "y.backward(); print(y._op, type(y._vjp).__name__ != 'CustomVJP', x.grad.numpy().tolist())\n"
        "try:\n"
        "    lp.apply(lambda a: (a, lambda g: (g,)), 'det', x)\n"
        "except ValueError as e:\n"
        "    print('refused')\n"
    )
    assert out.split() == ["det", "True", "[[2.0,", "0.0],", "[0.0,", "2.0]]", "refused"]
