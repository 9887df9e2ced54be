"""The package as users get it: the wheel and the sdist build without a warning, carry the licences and
the metadata, the wheel installs into a fresh environment and imports from outside the repository, and
the sdist holds every file the test suite reads. Every install instruction works as written.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tarfile
import textwrap
import zipfile
from pathlib import Path

import numpy as np
import typing_extensions

ROOT = Path(__file__).resolve().parent.parent
DIST = "leanpass-ad"  # the distribution's name (`leanpass` on the package index is another project)
FOLDERS = ("leanpass", "docs", "tests", "benchmarks", "scripts")
TOP = ("LICENSE", "README.md", "conftest.py", "pyproject.toml", "mkdocs.yml")


def source_files() -> set[str]:
    """The files of the source tree the sdist must hold: git's list in a clone, else (in an unpacked
    sdist) the files under the same folders."""
    if (ROOT / ".git").exists():
        listed = subprocess.run(["git", "ls-files", *TOP, *FOLDERS], cwd=ROOT, capture_output=True, text=True,
                                check=True).stdout.split()
        return {name for name in listed if (ROOT / name).exists()}
    found = {name for name in TOP if (ROOT / name).exists()}
    for folder in FOLDERS:
        found |= {str(p.relative_to(ROOT)) for p in (ROOT / folder).rglob("*")
                  if p.is_file() and "__pycache__" not in p.parts and not p.name.startswith("_sample")}
    return found


def extras() -> set[str]:
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[project.optional-dependencies]")[1].split("\n[")[0]
    return set(re.findall(r"^(\w+) = \[", section, re.M))


def install_lines() -> list[tuple[str, str]]:
    files = [ROOT / "README.md", *(ROOT / "docs").glob("*.md"), *(ROOT / "leanpass").rglob("*.py"),
             *(ROOT / "benchmarks").glob("*.py"), *(ROOT / "scripts").glob("*.py"), *(ROOT / "tests").glob("*.py")]
    return [(f"{path.relative_to(ROOT)}:{number}", line) for path in files
            for number, line in enumerate(path.read_text().splitlines(), 1) if "pip install" in line]


def test_every_install_instruction_works_as_written() -> None:
    """No instruction asks the package index for `leanpass` (another project) or for our distribution
    (not there); the extras an instruction names exist."""
    lines = install_lines()
    assert len(lines) > 10
    here = Path(__file__).name
    for where, line in lines:
        if where.startswith(f"tests/{here}"):
            continue
        for command in re.findall(r"pip install ([^`;)]*)", line):
            for word in command.split("#")[0].split():
                spec = word.strip("\"'\\,.")
                assert not re.match(r"leanpass(-ad)?($|\[|[<>=!~])", spec, re.I), f"{where}: {line.strip()}"
                extra = re.match(r"(?:\.|\S+\.whl)\[([\w,]+)\]$", spec)
                if extra:
                    assert set(extra.group(1).split(",")) <= extras(), f"{where}: {line.strip()}"


def test_the_built_wheel_and_sdist_install_and_carry_the_licence(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "PYTHONPATH")}
    out = tmp_path / "dist"
    # `python -m build` makes the sdist, then the wheel from the unpacked sdist (so the sdist builds)
    built = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir", str(out), str(ROOT)],
                           capture_output=True, text=True, env=env, cwd=tmp_path)
    log = built.stdout + built.stderr
    assert built.returncode == 0, log
    assert "warning" not in log.lower(), log
    (sdist,) = out.glob("leanpass_ad-*.tar.gz")
    (wheel,) = out.glob("leanpass_ad-*-py3-none-any.whl")

    with tarfile.open(sdist) as tar:
        top = tar.getnames()[0].split("/")[0]
        in_sdist = {name.partition("/")[2] for name in tar.getnames()}
        pkg_info = tar.extractfile(f"{top}/PKG-INFO").read().decode()  # type: ignore[union-attr]
    missing = source_files() - in_sdist
    assert not missing, f"the sdist lacks files of the source tree (add them to MANIFEST.in): {sorted(missing)}"
    assert {"LICENSE", "conftest.py", "docs/training.md", "tests/test_docs.py", "leanpass/datasets/digits.npz",
            "leanpass/datasets/DIGITS_LICENSE.txt"} <= in_sdist
    assert f"Name: {DIST}\n" in pkg_info and "License-Expression: MIT" in pkg_info

    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
    assert any(name.endswith(".dist-info/licenses/LICENSE") for name in names)
    assert "leanpass/datasets/DIGITS_LICENSE.txt" in names and "leanpass/py.typed" in names

    # a fresh environment, outside the repository, with no index: the wheel, and this environment's
    # NumPy and typing_extensions (its two dependencies) through a .pth file
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    site = subprocess.run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                          capture_output=True, text=True, check=True).stdout.strip()
    deps = {str(Path(np.__file__).parent.parent), str(Path(typing_extensions.__file__).parent)}
    Path(site, "dependencies.pth").write_text("\n".join(sorted(deps)) + "\n")
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-deps",
                              "--no-index", "--no-cache-dir", "--disable-pip-version-check", str(wheel)],
                             capture_output=True, text=True, env=env, cwd=tmp_path)
    assert install.returncode == 0, install.stdout + install.stderr

    check = textwrap.dedent(f"""
        import sys
        from importlib import metadata
        from pathlib import Path
        import leanpass as lp
        from leanpass.datasets import load_digits

        assert Path(lp.__file__).is_relative_to(Path(sys.prefix)), lp.__file__
        meta = metadata.metadata("{DIST}")
        assert meta["License-Expression"] == "MIT AND CC-BY-4.0", meta["License-Expression"]
        assert set(meta.get_all("License-File")) == {{"LICENSE", "leanpass/datasets/DIGITS_LICENSE.txt"}}
        assert meta["Keywords"] and meta["Requires-Python"] == ">=3.10"
        assert "Typing :: Typed" in meta.get_all("Classifier")
        assert {{"plot", "graph", "mpi", "test", "dev"}} <= set(meta.get_all("Provides-Extra"))
        licence = [f for f in metadata.files("{DIST}") if f.name == "LICENSE"]
        assert licence and licence[0].read_text().startswith("MIT License"), licence
        assert metadata.version("{DIST}") == lp.__version__
        print(lp.grad(lambda w: (w ** 3).sum())(2.0), load_digits()[0].shape, "jit" in dir(lp))
        """)
    ran = subprocess.run([python, "-c", check], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.split() == ["12.0", "(1797,", "64)", "True"]
