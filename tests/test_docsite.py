"""The documentation site builds with warnings as errors, and holds every page of docs/ and an API
reference entry for every public name (mkdocs.yml; the pages are made by scripts/docsite.py)."""

from __future__ import annotations

import importlib
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "scripts"))
import docsite  # noqa: E402


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1", "PYTHONPATH": os.pathsep.join(
        [str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(ROOT / "mkdocs.yml"),
                          "-d", str(out)], cwd=ROOT, env=env, capture_output=True, text=True)
    assert run.returncode == 0, f"mkdocs build --strict failed:\n{run.stdout}\n{run.stderr}"
    return out


def test_every_page_of_docs_and_the_readme_are_on_the_site(site: Path) -> None:
    home = (site / "index.html").read_text()
    assert "Two commands" in home and "Which door do I use" in home  # README, with the guidance, is the first page
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert (site / page.stem / "index.html").exists(), f"docs/{page.name} is not on the site"
        assert f'href="{page.stem}/"' in home, f"docs/{page.name} is not in the navigation"


def test_the_reference_has_an_entry_for_every_public_name(site: Path) -> None:
    import leanpass

    modules = docsite.public_modules()
    for name in ("leanpass", "leanpass.nn", "leanpass.optim", "leanpass.testing", "leanpass.checkpoint",
                 "leanpass.data", "leanpass.datasets", "leanpass.distributed", "leanpass.numpy.linalg",
                 "leanpass.scipy.special", "leanpass.scipy.stats", "leanpass.functional", "leanpass.nn.losses"):
        assert name in modules
    for value in vars(leanpass).values():  # every module reached as lp.<name> has its page
        if isinstance(value, types.ModuleType) and value.__name__ in docsite.public_names(leanpass):
            assert value.__name__ in modules
    for name in modules:
        module = importlib.import_module(name)
        title = docsite.shown_as(name)
        html = (site / "reference" / title / "index.html").read_text()
        for public in docsite.public_names(module):
            assert re.search(rf">\s*{re.escape(title)}\.{public}\s*<", html), \
                f"{title}.{public} has no entry in the API reference"


def test_a_lazily_loaded_name_and_a_generated_function_are_rendered_from_their_docstrings(site: Path) -> None:
    html = (site / "reference" / "leanpass" / "index.html").read_text()
    for name in ("jit", "log1p", "conv2d"):
        assert re.search(rf">\s*leanpass\.{name}\s*<", html), name
    assert "<code>log1p</code> elementwise, differentiable" in html
    nn = (site / "reference" / "leanpass.nn" / "index.html").read_text()
    assert "activation" in nn and "init" in nn  # nn.MLP's signature, from its constructor


def test_doctests_become_code_blocks() -> None:
    text = "Adds.\n\n>>> 1 + 1\n2\n\nMore."
    assert docsite.fence_doctests(text) == "Adds.\n\n```pycon\n>>> 1 + 1\n2\n```\n\nMore."


def test_the_autograd_pages_convolve_is_scipys_convolution() -> None:
    """docs/autograd.md maps autograd.scipy.signal.convolve onto lp.conv2d; check it against SciPy itself."""
    import numpy as np
    import scipy.signal
    from test_docs import blocks

    namespace: dict = {"__name__": "__docs__"}
    for code, _, _ in blocks(ROOT / "docs" / "autograd.md"):
        if "scipy.optimize" not in code:
            exec(code, namespace)
    rng = np.random.default_rng(1)
    inputs, filters = rng.standard_normal((2, 3, 6, 7)), rng.standard_normal((3, 2, 2, 3))
    want = np.array([[sum(scipy.signal.convolve(inputs[n, c], filters[c, o], mode="valid") for c in range(3))
                      for o in range(2)] for n in range(2)])
    np.testing.assert_allclose(namespace["convolve_valid"](inputs, filters).numpy(), want, atol=1e-12)
