"""Every code block in the docs runs, and prints what the docs say it prints.

In each Markdown file (README.md and docs/*.md) the ```python blocks run in order in one
namespace. A ```python block followed directly by an ```output block must print exactly that
text (trailing spaces ignored).
"""

from __future__ import annotations

import contextlib
import io
import re
from pathlib import Path

import pytest

from conftest import as_printed, forget_ops
from leanpass import functional as F

ROOT = Path(__file__).resolve().parent.parent
FILES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```\s*$", re.S | re.M)


def blocks(path: Path) -> list[tuple[str, str | None, int]]:
    """(code, expected output or None, line number) for each python block of ``path``."""
    text = path.read_text()
    found = [(m.group(1), m.group(2), text[: m.start()].count("\n") + 1, m.end(), m.start())
             for m in FENCE.finditer(text)]
    out = []
    for i, (lang, body, line, end, _) in enumerate(found):
        if lang != "python":
            continue
        expected = None
        if i + 1 < len(found) and found[i + 1][0] == "output" and not text[end:found[i + 1][4]].strip():
            expected = found[i + 1][1]
        out.append((body, expected, line))
    return out


@pytest.mark.parametrize("path", FILES, ids=lambda p: p.name)
def test_doc_examples_run_and_print_what_they_say(path: Path) -> None:
    found = blocks(path)
    assert found, f"{path.name} has no ```python blocks"
    namespace: dict = {"__name__": "__docs__"}
    registered = set(F.REGISTRY)
    try:
        _run(path, found, namespace)
    finally:  # (ops a page registers with functional.op are its own: later tests walk LeanPass's ops)
        forget_ops(name for name, rec in list(F.REGISTRY.items())
                   if name not in registered and not rec.module.startswith("leanpass."))


def _run(path: Path, found: list[tuple[str, str | None, int]], namespace: dict) -> None:
    for code, expected, line in found:
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            exec(compile(code, f"{path.name}:{line}", "exec", dont_inherit=True), namespace)  # (as a script runs)
        if expected is not None:
            got = "\n".join(s.rstrip() for s in buf.getvalue().rstrip().splitlines())
            want = "\n".join(s.rstrip() for s in as_printed(expected).rstrip().splitlines())
            assert got == want, f"{path.name}:{line} printed:\n{got}\nbut the docs say:\n{want}"


def test_blocks_are_found_with_their_outputs() -> None:
    sample = "```python\nprint(1)\n```\n```output\n1\n```\n```python\nx = 2\n```\n"
    tmp = ROOT / "tests" / "_sample_doc.md"
    tmp.write_text(sample)
    try:
        assert blocks(tmp) == [("print(1)\n", "1\n", 1), ("x = 2\n", None, 7)]
    finally:
        tmp.unlink()
