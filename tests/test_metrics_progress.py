"""``lp.metrics.accuracy`` / ``top_k_accuracy`` by hand, and ``lp.progress``: tqdm's bar when tqdm is
installed (a stand-in module here), the plain bar otherwise."""

from __future__ import annotations

import io
import sys
import types

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn
from leanpass.tools.progress_bar import Progress

LOGITS = np.array([[2.0, 0.5, 0.1], [0.2, 0.3, 0.9], [1.0, 3.0, 0.0], [0.0, 0.0, 0.0]])


# ----- accuracy -------------------------------------------------------------------------------------------
def test_accuracy_of_class_scores_one_hot_binary_and_class_predictions():
    acc = lp.metrics.accuracy
    assert acc(LOGITS, np.array([0, 2, 0, 0])) == 0.75  # argmax, the first class on ties
    assert acc(LOGITS, np.eye(3)[[0, 2, 0, 0]]) == 0.75  # one-hot labels (0.1.14's targets)
    assert acc(lp.Tensor(LOGITS, requires_grad=True), np.array([0, 2, 2, 1])) == 0.5  # a Tensor that requires grad
    assert acc(np.array([-2.0, 0.5, 3.0, 0.0]), np.array([0, 1, 0, 1]), threshold=0.0) == 0.5
    assert acc(np.array([0.2, 0.7]), np.array([0.0, 1.0]), threshold=0.5) == 1.0
    assert acc(np.array([1, 2, 2]), np.array([1, 2, 0])) == 2 / 3
    assert acc(LOGITS.reshape(2, 2, 3), np.array([[0, 2], [0, 0]])) == 0.75  # leading axes
    assert nn.metrics.accuracy is acc


def test_accuracy_refuses_what_it_cannot_read_unambiguously():
    with pytest.raises(ValueError, match="ambiguous: pass threshold="):
        lp.metrics.accuracy(np.array([0.2, 0.7]), np.array([0.0, 1.0]))
    with pytest.raises(ValueError, match="do not fit"):
        lp.metrics.accuracy(LOGITS, np.array([0, 1]))
    with pytest.raises(ValueError, match="threshold is for binary"):
        lp.metrics.accuracy(LOGITS, np.array([0, 1, 2, 0]), threshold=0.5)


def test_top_k_accuracy_by_hand():
    top_k = lp.metrics.top_k_accuracy
    labels = np.array([1, 0, 2, 1])
    # classes scoring strictly higher than the label: 1, 2, 2, 0 (the last row is a tie)
    assert top_k(LOGITS, labels, k=1) == 0.25
    assert top_k(LOGITS, labels, k=2) == 0.5
    assert top_k(LOGITS, labels, k=3) == 1.0
    assert top_k(LOGITS, np.eye(3)[labels], k=2) == 0.5
    assert top_k(LOGITS, np.array([0, 2, 1, 0]), k=1) == lp.metrics.accuracy(LOGITS, np.array([0, 2, 1, 0]))
    with pytest.raises(ValueError, match="k must be an int >= 1"):
        top_k(LOGITS, labels, k=0)
    with pytest.raises(ValueError, match=r"in \[0, 3\)"):
        top_k(LOGITS, np.array([0, 1, 2, 3]), k=1)


# ----- progress --------------------------------------------------------------------------------------------
@pytest.fixture
def no_tqdm(monkeypatch):
    monkeypatch.setitem(sys.modules, "tqdm", None)  # (import tqdm.auto raises ImportError)
    monkeypatch.setitem(sys.modules, "tqdm.auto", None)


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_plain_bar_in_a_file_prints_a_line_per_tenth(no_tqdm):
    out = io.StringIO()
    seen = [i for i in lp.progress(range(20), desc="train", file=out)]
    assert seen == list(range(20))
    lines = out.getvalue().splitlines()
    assert [ln.split(" [")[0] for ln in lines] == [f"train: {n}/20" for n in range(2, 21, 2)]
    assert lines[-1].startswith("train: 20/20 [" + "#" * 30 + "]") and "it/s" in lines[-1]
    assert "\r" not in out.getvalue()


def test_plain_bar_in_a_terminal_redraws_one_line(no_tqdm):
    out = Tty()
    with lp.progress(total=3, file=out, mininterval=0.0) as bar:
        for i in range(3):
            bar.set_postfix(loss=1.0 / (i + 1), note="ok")
            bar.update()
    text = out.getvalue()
    assert text.count("\r") == 4 and text.endswith("\n") and text.count("\n") == 1
    assert text.rstrip().endswith("loss=0.3333, note=ok")


def test_plain_bar_without_total_a_break_and_a_description(no_tqdm):
    out = io.StringIO()
    for i in lp.progress(iter(range(100)), file=out):
        if i == 4:
            break
    assert out.getvalue().startswith("4 it, ")  # closed when the loop stopped
    out = io.StringIO()
    bar = lp.progress(range(10), file=out)
    bar.set_description("eval")
    for _ in bar:
        if _ == 2:
            break
    assert [ln.split(" [")[0] for ln in out.getvalue().splitlines()] == ["eval: 1/10", "eval: 2/10"]
    assert len(Progress(range(7))) == 7


def test_tqdm_is_used_when_installed(monkeypatch):
    calls = []

    def fake_tqdm(iterable=None, **kwargs):
        calls.append(kwargs)
        return ("tqdm", iterable)

    auto = types.ModuleType("tqdm.auto")
    auto.tqdm = fake_tqdm  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "tqdm", types.ModuleType("tqdm"))
    monkeypatch.setitem(sys.modules, "tqdm.auto", auto)
    r = range(3)
    assert lp.progress(r, desc="d", leave=False) == ("tqdm", r)
    assert calls == [{"total": None, "desc": "d", "file": None, "mininterval": 0.1, "leave": False}]
    assert isinstance(lp.progress(r, use_tqdm=False), Progress)


def test_without_tqdm_its_options_and_use_tqdm_true_say_how_to_install(no_tqdm):
    with pytest.raises(ImportError, match=r'pip install tqdm'):
        lp.progress(range(3), use_tqdm=True)
    with pytest.raises(TypeError, match=r"\['leave'\] are tqdm's options"):
        lp.progress(range(3), leave=False)


def test_the_regression_example_fits_with_a_plain_progress_bar():
    from leanpass.examples import regression

    out = io.StringIO()
    result = regression.train(steps=120, stream=out, use_tqdm=False)
    lines = out.getvalue().splitlines()
    assert lines[-7].startswith("test mse: model") and lines[-6].split()[0] == "layers.0.weight"
    assert [ln.split(" [")[0] for ln in lines[:-7]] == [f"fitting: {n}/120" for n in range(12, 121, 12)]
    assert result["ema_mse"] < 0.1 and result["mse"] < 0.1
