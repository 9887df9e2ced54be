"""Shared pytest set-up: NumPy and LeanPass are in scope for every doctest.

The docs and docstrings show NumPy 2's reprs of NumPy scalars (``np.float64(2.0)``); NumPy 1.x
prints the same values without the type (``2.0``), so there the expected text is read that way.
"""

import doctest
import re

import numpy as np
import pytest

import leanpass

NUMPY1 = int(np.__version__.split(".")[0]) < 2
_SCALAR = re.compile(r"np\.(?:float|int|uint|complex)\d+\(([^()]*)\)|np\.(True|False)_")


def as_printed(text: str) -> str:
    """``text`` (output written as NumPy 2 prints it) as the installed NumPy prints it.

    >>> as_printed("(np.float64(11.0), np.True_)") == ("(11.0, True)" if NUMPY1 else "(np.float64(11.0), np.True_)")
    True
    """
    return _SCALAR.sub(lambda m: m.group(1) or m.group(2), text) if NUMPY1 else text


if NUMPY1:
    _check_output = doctest.OutputChecker.check_output

    def _check_numpy1(self: doctest.OutputChecker, want: str, got: str, optionflags: int) -> bool:
        return _check_output(self, as_printed(want), got, optionflags)

    doctest.OutputChecker.check_output = _check_numpy1  # type: ignore[method-assign]


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict) -> None:
    doctest_namespace["np"] = np
    doctest_namespace["lp"] = leanpass
    doctest_namespace["Tensor"] = leanpass.Tensor


def forget_ops(names: object) -> None:
    """Unregister ops a test or a docs page registered with ``functional.op`` (from every table), so that
    the walks over ``functional.OPS`` in later tests see LeanPass's own ops only."""
    from leanpass import functional as F

    for name in list(names):  # type: ignore[call-overload]
        F.REGISTRY.pop(name, None)
        dict.pop(F.OPS, name, None)
        dict.pop(F.JVPS, name, None)
        F.TAKES_NEED.discard(name)

