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


# ----- random generators and big integers ----------------------------------------------------------------
BIT_GENERATORS = ["PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937"]


@pytest.mark.parametrize("name", BIT_GENERATORS)
def test_a_generator_saved_mid_stream_continues_bit_for_bit(tmp_path, name):
    rng = np.random.Generator(getattr(np.random, name)(7))
    rng.standard_normal(5)
    rng.integers(0, 2**32, 3, dtype=np.uint32)  # (a buffered half of a 64-bit draw, for some generators)
    lp.save(tmp_path / "g.npz", {"rng": rng, "state": rng.bit_generator.state})
    back = lp.load(tmp_path / "g.npz")
    again = lp.load(tmp_path / "g.npz", like={"rng": np.random.Generator(getattr(np.random, name)()),
                                               "state": rng.bit_generator.state})
    assert type(back["rng"]) is np.random.Generator and type(back["rng"].bit_generator).__name__ == name
    plain = getattr(np.random, name)()
    plain.state = back["state"]  # the state dict round-trips too, and sets a bit generator
    want = [rng.integers(0, 2**32, 3, dtype=np.uint32), rng.standard_normal(4), rng.permutation(10)]
    for restored in (back["rng"], again["rng"], np.random.Generator(plain)):
        got = [restored.integers(0, 2**32, 3, dtype=np.uint32), restored.standard_normal(4), restored.permutation(10)]
        for a, b in zip(got, want):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
    # its seed sequence too: spawned children draw alike
    child = back["rng"].bit_generator.seed_seq.spawn(1)[0]
    assert child.generate_state(4).tolist() == rng.bit_generator.seed_seq.spawn(1)[0].generate_state(4).tolist()


def test_saving_a_generator_leaves_it_as_it_was(tmp_path):
    rng = np.random.default_rng(3)
    before = rng.bit_generator.state
    lp.save(tmp_path / "g.npz", [rng])
    assert rng.bit_generator.state == before


def test_a_training_state_with_its_generator_resumes_the_batch_order(tmp_path):
    x = np.random.default_rng(0).standard_normal((20, 3))
    y = x @ np.array([1.0, -2.0, 0.5])
    opt = optim.adam(0.05)
    loss = lp.grad(lambda p, xb, yb: ((xb @ p["w"] + p["b"] - yb) ** 2).mean())

    def train(state, steps):
        for _ in range(steps):
            idx = state["rng"].permutation(20)[:5]  # the batch order comes from the generator
            grads = loss(state["params"], x[idx], y[idx])
            updates, opt_state = opt.update(grads, state["opt"], state["params"])
            state = dict(state, params=optim.apply_updates(state["params"], updates), opt=opt_state,
                         step=state["step"] + 1)
        return state

    def fresh():
        params = {"w": np.zeros(3), "b": np.zeros(1)}
        return {"params": params, "opt": opt.init(params), "step": 0, "rng": np.random.default_rng(42),
                "seed": 2**96 + 5}

    straight = train(fresh(), 6)
    half = train(fresh(), 3)
    lp.save(tmp_path / "run.npz", half)
    for run in (lp.load(tmp_path / "run.npz"), lp.load(tmp_path / "run.npz", like=fresh())):
        assert run["step"] == 3 and run["seed"] == 2**96 + 5
        resumed = train(run, 3)
        for key in ("w", "b"):
            assert resumed["params"][key].tobytes() == straight["params"][key].tobytes()
        assert resumed["rng"].bit_generator.state == straight["rng"].bit_generator.state


@pytest.mark.parametrize("value", [2**63, -2**63 - 1, 2**128 + 1, "-16**5000", 2**63 - 1, -2**63])
def test_python_ints_of_any_size_round_trip(tmp_path, value):
    value = -(16**5000) if value == "-16**5000" else value  # (more digits than str(int) allows)
    lp.save(tmp_path / "i.npz", {"n": value})
    back = lp.load(tmp_path / "i.npz", like={"n": 0})["n"]
    assert type(back) is int and back == value


def test_a_generator_of_another_kind_or_class_is_refused(tmp_path):
    class Mine(np.random.PCG64):
        pass

    with pytest.raises(TypeError, match="bit generator .*Mine"):
        lp.save(tmp_path / "g.npz", [np.random.Generator(Mine(0))])
    lp.save(tmp_path / "g.npz", {"rng": np.random.Generator(np.random.MT19937(0))})
    with pytest.raises(CheckpointError, match=r"at \['rng'\]: a generator using MT19937 in the file, PCG64"):
        lp.load(tmp_path / "g.npz", like={"rng": np.random.default_rng()})
    with pytest.raises(CheckpointError, match=r"at \['rng'\]: a Generator in the file, a int in the template"):
        lp.load(tmp_path / "g.npz", like={"rng": 0})


def test_the_template_checks_each_leafs_type(tmp_path):
    lp.save(tmp_path / "t.npz", {"step": 3.5, "x": np.float32(1.0)})
    with pytest.raises(CheckpointError, match=r"at \['step'\]: a float in the file, a int in the template"):
        lp.load(tmp_path / "t.npz", like={"step": 0, "x": np.float32(0.0)})
    with pytest.raises(CheckpointError, match=r"at \['x'\]: dtype float32 in the file, float64"):
        lp.load(tmp_path / "t.npz", like={"step": 0.0, "x": np.float64(0.0)})
