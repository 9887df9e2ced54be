"""Shared pytest set-up: NumPy and LeanPass are in scope for every doctest."""

import numpy as np
import pytest

import leanpass


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace: dict) -> None:
    doctest_namespace["np"] = np
    doctest_namespace["lp"] = leanpass
    doctest_namespace["Tensor"] = leanpass.Tensor
