"""The examples run end to end (small) and do what they say."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import leanpass as lp
from leanpass.examples import digits, digits_eager, output_dir


def test_digits_trains_saves_and_reports(tmp_path):
    out = io.StringIO()
    ckpt = tmp_path / "digits.npz"
    result = digits.train(epochs=8, output=str(ckpt), stream=out)
    assert result["test_acc"] >= 0.94
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("digits: 1438 training and 359 test images")
    epoch_lines = [ln for ln in lines if ln.startswith("epoch")]
    assert len(epoch_lines) == 8 and "\r" not in text  # not a terminal: plain lines
    assert "loss" in epoch_lines[0] and "train" in epoch_lines[0] and "test" in epoch_lines[0]
    assert f"saved the model to {ckpt}" in text
    restored = lp.load(ckpt, like=result["model"])
    x, y = digits.load_digits()
    assert digits.accuracy(restored, x[:50], y[:50]) == digits.accuracy(result["model"], x[:50], y[:50])


def test_same_seed_same_run():
    a = digits.train(epochs=2, output=None, stream=io.StringIO())
    b = digits.train(epochs=2, output=None, stream=io.StringIO())
    assert a["history"]["loss"] == b["history"]["loss"]


def test_progress_line_updates_in_place_in_a_terminal():
    class Tty(io.StringIO):
        def isatty(self):
            return True

    out = Tty()
    p = digits.Progress(out)
    p.show("epoch 1 long line")
    p.show("epoch 2")
    p.done()
    assert out.getvalue() == "\repoch 1 long line\repoch 2          \n"


def test_plot_without_matplotlib_is_a_clear_message(monkeypatch, capsys, tmp_path):
    monkeypatch.setattr(digits, "have_matplotlib", lambda: False)
    digits.main(["--epochs", "1", "--output", "", "--plot", str(tmp_path / "p.png"), "--blas-threads", "0"])
    err = capsys.readouterr().err
    assert "pip install" in err and "matplotlib" in err
    assert not (tmp_path / "p.png").exists()


def test_command_line_help_and_bad_options():
    run = subprocess.run([sys.executable, "-m", "leanpass.examples.digits", "--help"],
                         capture_output=True, text=True, check=True)
    for option in ("--epochs", "--seed", "--hidden", "--lr", "--output", "--plot"):
        assert option in run.stdout
    with pytest.raises(SystemExit):
        digits.main(["--epochs", "0"])


def test_eager_example_learns():
    result = digits_eager.train(epochs=3, verbose=False)
    assert result["test_acc"] >= 0.93
    assert all(p.requires_grad for p in lp.tree_flatten(result["model"])[0])
    assert np.isfinite(result["seconds"])


def test_plot_option_writes_a_png_or_says_how_to_get_matplotlib(tmp_path, capsys):
    target = tmp_path / "curves.png"
    digits.main(["--epochs", "2", "--output", "", "--plot", str(target), "--blas-threads", "0"])
    captured = capsys.readouterr()
    if digits.have_matplotlib():
        assert target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert f"wrote the plot to {target}" in captured.out
    else:
        assert not target.exists() and "pip install" in captured.err


def test_examples_save_into_the_cache_folder_not_the_current_directory(tmp_path):
    """Run from another directory (as from `/`), the example writes nothing there: by default the model
    goes to ~/.cache/leanpass/examples (XDG_CACHE_HOME unset), and --help says so."""
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "XDG_CACHE_HOME"} | {"HOME": str(home)}
    run = subprocess.run([sys.executable, "-m", "leanpass.examples.digits", "--epochs", "1", "--blas-threads", "0"],
                         capture_output=True, text=True, check=True, cwd=work, env=env)
    saved = home / ".cache" / "leanpass" / "examples" / "digits_mlp.npz"
    assert f"saved the model to {saved} " in run.stdout
    assert saved.is_file() and list(work.iterdir()) == []
    help_text = subprocess.run([sys.executable, "-m", "leanpass.examples.digits", "--help"], capture_output=True,
                               text=True, check=True, cwd=work, env=env | {"COLUMNS": "1000"}).stdout  # (no wrapping)
    assert f"in {saved.parent}," in help_text


def test_eager_example_saves_into_xdg_cache_home(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    result = digits_eager.main(["--epochs", "1", "--blas-threads", "0"])
    saved = tmp_path / "cache" / "leanpass" / "examples" / "digits_eager.npz"
    assert f"saved the model to {saved}" in capsys.readouterr().out
    back = lp.load(saved, like=result["model"])
    assert all(np.array_equal(a.data, b.data) for a, b in zip(lp.tree_flatten(back)[0],
                                                             lp.tree_flatten(result["model"])[0]))
    assert list(tmp_path.iterdir()) == [tmp_path / "cache"]
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/dir")  # not absolute: ignored, as the XDG spec says
    assert output_dir() == Path.home() / ".cache" / "leanpass" / "examples"
