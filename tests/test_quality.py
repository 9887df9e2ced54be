"""The code stays ruff-clean and mypy-clean: the README's test command checks both."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", *args], cwd=ROOT, capture_output=True, text=True)


def test_ruff_finds_nothing() -> None:
    result = run("ruff", "check", "leanpass", "tests", "benchmarks", "scripts")
    assert result.returncode == 0, result.stdout + result.stderr


def test_mypy_finds_nothing() -> None:
    result = run("mypy")
    assert result.returncode == 0, result.stdout + result.stderr
