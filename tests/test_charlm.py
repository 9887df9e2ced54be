"""The third main job, leanpass.examples.charlm, run small: data, model, training, sampling, saving."""

from __future__ import annotations

import io
import os
import subprocess
import sys

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn
from leanpass.examples import charlm
from leanpass.testing import check_grads

TINY = charlm.Config(**{**charlm.QUICK, "steps": 6, "eval_every": 3, "sample_chars": 12, "max_chars": 50_000})


def test_the_text_is_the_standard_library_in_a_fixed_order():
    files = charlm.source_files()
    assert files == sorted(files) and all(f.parent == files[0].parent and f.suffix == ".py" for f in files)
    text, count = charlm.load_text(30_000)
    again, _ = charlm.load_text(30_000)
    assert text == again and len(text) == 30_000 and set(text) <= set(charlm.KEPT)
    first = files[0].read_text(encoding="utf-8", errors="ignore")
    assert text.startswith("".join(ch for ch in first if ch in charlm.KEPT)[:1000])
    vocab = "".join(sorted(set(text)))
    assert charlm.decode(charlm.encode(text[:500], vocab), vocab) == text[:500]


def test_the_model_is_causal_tied_and_decays_only_matrices():
    model = charlm.GPT.create(11, block_size=8, n_layer=2, n_head=2, n_embd=16, rng=0, dtype=np.float64)
    x = np.random.default_rng(0).integers(0, 11, (2, 8))
    y = model(x).numpy()
    x2 = x.copy()
    x2[:, 5:] = (x2[:, 5:] + 1) % 11  # changing later characters leaves the earlier logits alone
    np.testing.assert_array_equal(model(x2).numpy()[:, :5], y[:, :5])
    assert not np.allclose(model(x2).numpy()[:, 5:], y[:, 5:])
    # one token table, used as the output layer too (no separate lm_head parameter)
    names = [p for p in lp.tree_flatten(model)[0] if p.shape == (11, 16)]
    assert len(names) == 1
    with pytest.raises(ValueError, match="block size"):
        model(np.zeros((1, 9), dtype=np.int64))
    with pytest.raises(ValueError, match="multiple of n_head"):
        charlm.GPT.create(11, n_embd=10, n_head=4)


def test_gradients_of_the_model_match_finite_differences():
    model = charlm.GPT.create(7, block_size=4, n_layer=1, n_head=2, n_embd=8, rng=0, dtype=np.float64)
    x, y = np.array([[1, 2, 3, 4], [0, 6, 5, 1]]), np.array([[2, 3, 4, 0], [6, 5, 1, 1]])
    leaves, treedef = lp.tree_flatten(model)
    arrays = [p.numpy() for p in leaves]

    def loss_of(*ws):
        return charlm.loss_fn(lp.tree_unflatten(treedef, list(ws)), x, y)

    check_grads(loss_of, arrays, order=1)


def test_generate_samples_with_temperature_and_top_k():
    model = charlm.GPT.create(9, block_size=4, n_layer=1, n_head=1, n_embd=8, rng=0)
    start = np.array([[1], [2]])
    out = charlm.generate(model, start, 10, top_k=1, rng=np.random.default_rng(0))
    assert out.shape == (2, 11) and np.array_equal(out[:, :1], start)
    greedy = start
    with lp.no_grad():
        for _ in range(10):  # top_k=1 is greedy: the argmax of the last position each time
            nxt = np.argmax(model(greedy[:, -4:]).numpy()[:, -1], axis=-1)[:, None]
            greedy = np.concatenate([greedy, nxt], axis=1)
    assert np.array_equal(out, greedy)
    a = charlm.generate(model, start, 10, temperature=2.0, rng=np.random.default_rng(1))
    b = charlm.generate(model, start, 10, temperature=2.0, rng=np.random.default_rng(1))
    assert np.array_equal(a, b) and a.max() < 9
    with pytest.raises(ValueError, match="temperature"):
        charlm.generate(model, start, 1, temperature=0.0, rng=np.random.default_rng(0))


def test_training_runs_reports_samples_saves_and_reloads(tmp_path):
    out = io.StringIO()
    ckpt = tmp_path / "sub" / "charlm.npz"
    result = charlm.train(TINY, output=str(ckpt), stream=out)
    text = out.getvalue()
    lines = text.splitlines()
    assert lines[0].startswith("charlm: 50,000 characters of Python")
    steps = [ln for ln in lines if ln.startswith("step")]
    assert len(steps) == 2 and all("val loss" in ln for ln in steps)
    assert "--- a sample (temperature 0.8, top-k 10) ---" in text and "\ndef " in text
    assert result["history"]["loss"][-1] < result["history"]["loss"][0]
    assert np.isfinite(result["val_loss"]) and result["val_loss"] < np.log(len(result["vocab"]))
    assert f"saved the model to {ckpt}" in text
    back = lp.load(ckpt)
    assert bytes(back["vocab"]).decode("ascii") == result["vocab"]
    for a, b in zip(lp.tree_flatten(back["model"])[0], lp.tree_flatten(result["model"])[0]):
        assert np.array_equal(a.numpy(), b.numpy())


def test_jit_and_eager_train_the_same_bits():
    cfg = charlm.Config(**{**TINY.__dict__, "steps": 3, "eval_every": 3})
    a = charlm.train(cfg, jit=True, stream=io.StringIO())
    b = charlm.train(cfg, jit=False, stream=io.StringIO())
    assert a["history"] == b["history"]
    for p, q in zip(lp.tree_flatten(a["model"])[0], lp.tree_flatten(b["model"])[0]):
        assert np.array_equal(p.numpy(), q.numpy())
    assert nn.param_count(a["model"]) == nn.param_count(b["model"])


def test_the_command_line_quick_run_saves_under_the_cache_directory(tmp_path):
    env = {**os.environ, "XDG_CACHE_HOME": str(tmp_path / "cache")}
    run = subprocess.run([sys.executable, "-m", "leanpass.examples.charlm", "--quick", "--steps", "4",
                          "--eval-every", "2"], capture_output=True, text=True, check=True, env=env, cwd=tmp_path)
    target = tmp_path / "cache" / "leanpass" / "examples" / "charlm.npz"
    assert target.exists() and f"saved the model to {target}" in run.stdout
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cache"]  # nothing in the current directory
    assert "step     4/4" in run.stdout and "jit" in run.stdout.splitlines()[0]


def test_help_and_bad_options(capsys):
    run = subprocess.run([sys.executable, "-m", "leanpass.examples.charlm", "--help"],
                         capture_output=True, text=True, check=True)
    for option in ("--quick", "--steps", "--jit", "--no-jit", "--output", "--temperature", "--top-k", "--n-layer"):
        assert option in run.stdout
    assert ".cache" in run.stdout or "XDG" in run.stdout or "leanpass" in run.stdout
    for bad in (["--steps", "0"], ["--n-embd", "30", "--n-head", "4"], ["--temperature", "0"], ["--seed", "-1"]):
        with pytest.raises(SystemExit):
            charlm.main(bad + ["--output", ""])
    assert "error" in capsys.readouterr().err
