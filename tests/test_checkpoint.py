"""save / load: exact round trips, atomic writes, and clear errors."""

from __future__ import annotations

import os

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn, optim
from leanpass.checkpoint import CheckpointError


def same(a, b):
    la, da = lp.tree_flatten(a)
    lb, db = lp.tree_flatten(b)
    assert da == db
    for x, y in zip(la, lb):
        assert type(x) is type(y)
        xa, ya = np.asarray(x), np.asarray(y)
        assert xa.dtype == ya.dtype and xa.shape == ya.shape and xa.tobytes() == ya.tobytes()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_models_round_trip_exactly(tmp_path, dtype):
    model = nn.Sequential(nn.Linear(3, 5, rng=0, dtype=dtype), nn.relu, nn.Dropout(0.1),
                          nn.LayerNorm(5, eps=1e-6, dtype=dtype), nn.Embedding(4, 2, rng=1, dtype=dtype),
                          nn.MLP([2, 3], rng=2, activation="tanh", dtype=dtype))
    path = tmp_path / "model.npz"
    lp.save(path, model)
    same(lp.load(path), model)
    same(lp.load(str(path), like=model), model)
    assert lp.load(path).layers[1] is nn.relu


def test_any_pytree_round_trips(tmp_path):
    tree = {"w": lp.Tensor(np.arange(6.0).reshape(2, 3)), "ints": np.arange(3, dtype=np.int16),
            "nested": [(1.5, None), {"k": np.float32(2.0)}], "n": 7, "flag": True,
            "edge": np.array([np.nan, np.inf, -0.0, 1e-310])}
    lp.save(tmp_path / "t.npz", tree)
    back = lp.load(tmp_path / "t.npz")
    same(back, tree)
    assert back["nested"][0][0] == 1.5 and back["n"] == 7 and back["flag"] is True
    assert np.signbit(back["edge"][2])


def test_optimizer_state_can_be_checkpointed(tmp_path):
    model = nn.MLP([2, 2], rng=0)
    opt = optim.adam(0.1)
    state = opt.init(model)
    updates, state = opt.update(lp.tree_map(np.ones_like, model), state, model)
    lp.save(tmp_path / "s.npz", {"step": state.step, "slots": state.slots})
    back = lp.load(tmp_path / "s.npz")
    assert back["step"] == 1
    np.testing.assert_array_equal(back["slots"][0][0], state.slots[0][0])


def test_eager_parameters_keep_requires_grad(tmp_path):
    model = nn.trainable(nn.Linear(2, 1, rng=0))
    lp.save(tmp_path / "e.npz", model)
    assert lp.load(tmp_path / "e.npz").weight.requires_grad


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        lp.load(tmp_path / "nope.npz")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        lp.save(tmp_path / "no_dir" / "x.npz", {"a": 1.0})


def test_corrupt_and_foreign_files(tmp_path):
    path = tmp_path / "m.npz"
    lp.save(path, nn.MLP([4, 8, 2], rng=0))
    blob = path.read_bytes()
    path.write_bytes(blob[: len(blob) // 2])
    with pytest.raises(CheckpointError, match="corrupt or truncated"):
        lp.load(path)
    flipped = bytearray(blob)
    flipped[200] ^= 0xFF
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match="corrupt"):
        lp.load(path)
    path.write_bytes(b"")
    with pytest.raises(CheckpointError, match="file is empty"):
        lp.load(path)
    np.savez(tmp_path / "plain.npz", a=np.zeros(2))
    with pytest.raises(CheckpointError, match="not a LeanPass checkpoint"):
        lp.load(tmp_path / "plain.npz")


def test_loading_never_unpickles(tmp_path):
    path = tmp_path / "evil.npz"
    np.savez(path, __leanpass__=np.frombuffer(b'{"format": "leanpass-checkpoint"}', np.uint8),
             leaf_0=np.array([object()], dtype=object))
    with pytest.raises(CheckpointError):
        lp.load(path)


@pytest.mark.parametrize("template, message", [
    (lambda: nn.MLP([4, 9, 2], rng=0), r"at .layers\[0\].weight: shape \(4, 8\) in the file, \(4, 9\)"),
    (lambda: nn.MLP([4, 8, 2], rng=0, dtype=np.float64), "dtype float32 in the file, float64"),
    (lambda: nn.MLP([4, 8, 8, 2], rng=0), "at .layers: the file has 2 children, the template has 3"),
    (lambda: nn.MLP([4, 8, 2], rng=0, activation="tanh"), "settings differ"),
    (lambda: {"w": np.zeros(2)}, "the file has a MLP, the template has a dict"),
])
def test_structure_mismatch_says_where(tmp_path, template, message):
    path = tmp_path / "m.npz"
    lp.save(path, nn.MLP([4, 8, 2], rng=0))
    with pytest.raises(CheckpointError, match=message):
        lp.load(path, like=template())


def test_write_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "good.npz"
    lp.save(path, {"w": np.ones(3)})
    good = path.read_bytes()

    def crash(fh, **arrays):
        fh.write(b"PK\x03\x04 half a file")
        raise KeyboardInterrupt("power cut")

    monkeypatch.setattr(np, "savez", crash)
    with pytest.raises(KeyboardInterrupt):
        lp.save(path, {"w": np.zeros(3)})
    assert path.read_bytes() == good
    assert os.listdir(tmp_path) == ["good.npz"]  # no temporary file left behind


def test_unsavable_leaves_are_refused(tmp_path):
    with pytest.raises(TypeError, match="leaf at \\['a'\\] is a bytes"):
        lp.save(tmp_path / "x.npz", {"a": b"text"})
    with pytest.raises(TypeError, match="without pickle"):
        lp.save(tmp_path / "x.npz", [np.array([object()])])
