"""Resumable training, and checkpoint files from anywhere: every malformed file is a CheckpointError."""

from __future__ import annotations

import io
import json
import os
import stat
import struct
import zipfile
import zlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import nn, optim
from leanpass.checkpoint import CheckpointError


# ----- resuming a run continues it bit for bit ------------------------------------------------------
def _data():
    rng = np.random.default_rng(0)
    return rng.standard_normal((16, 4)).astype(np.float32), rng.integers(0, 3, 16)


def _step(opt, model, state, x, y):
    grads = lp.grad(lambda m: lp.losses.cross_entropy(m(x), y))(model)
    updates, state = opt.update(grads, state, model)
    return optim.apply_updates(model, updates), state


OPTIMIZERS = {
    "sgd+momentum": lambda: optim.sgd(0.1, momentum=0.9),
    "adam": lambda: optim.adam(1e-2),
    "adamw+schedule": lambda: optim.adamw(optim.warmup_cosine(1e-2, 3, 10), weight_decay=1e-2),
    "clip+adam": lambda: optim.chain(optim.clip_by_global_norm(1.0), optim.adam(1e-2)),
}


def _bits(tree):
    leaves, treedef = lp.tree_flatten(tree)
    return treedef, [(np.asarray(x._data if isinstance(x, lp.Tensor) else x).dtype.str,
                      np.asarray(x._data if isinstance(x, lp.Tensor) else x).tobytes()) for x in leaves]


@pytest.mark.parametrize("name", sorted(OPTIMIZERS))
@pytest.mark.parametrize("with_template", [False, True])
def test_a_resumed_run_matches_the_uninterrupted_one_bit_for_bit(tmp_path, name, with_template):
    x, y = _data()
    opt = OPTIMIZERS[name]()
    model = nn.MLP([4, 8, 3], rng=0)
    state = opt.init(model)
    straight_model, straight_state = model, state
    for _ in range(8):
        straight_model, straight_state = _step(opt, straight_model, straight_state, x, y)

    for _ in range(5):
        model, state = _step(opt, model, state, x, y)
    path = tmp_path / "run.npz"
    lp.save(path, {"model": model, "opt": state, "step": 5, "name": "mlp"})
    fresh = nn.MLP([4, 8, 3], rng=1)
    template = {"model": fresh, "opt": opt.init(fresh), "step": 0, "name": ""}
    run = lp.load(path, like=template) if with_template else lp.load(path)
    assert run["step"] == 5 and run["name"] == "mlp" and type(run["name"]) is str
    assert lp.tree_flatten(run["opt"])[1] == lp.tree_flatten(state)[1]
    model, state = run["model"], run["opt"]
    for _ in range(3):
        model, state = _step(opt, model, state, x, y)
    assert _bits(model) == _bits(straight_model)
    assert _bits(state) == _bits(straight_state)


def test_an_eager_run_resumes_too(tmp_path):
    x, y = _data()
    opt = optim.sgd(0.1, momentum=0.9)

    def step(model, state):
        lp.losses.cross_entropy(model(x), y).backward()
        updates, state = opt.update(optim.collect_grads(model), state, model)
        return optim.apply_updates(model, updates), state

    model = nn.trainable(nn.MLP([4, 5, 3], rng=0, dtype=np.float64))
    state = opt.init(model)
    for _ in range(2):
        model, state = step(model, state)
    lp.save(tmp_path / "e.npz", {"model": model, "opt": state})
    back = lp.load(tmp_path / "e.npz", like={"model": model, "opt": state})
    assert back["model"].layers[0].weight.requires_grad
    a, b = step(model, state), step(back["model"], back["opt"])
    assert _bits(a) == _bits(b)


def test_the_template_still_checks_an_optimizer_state(tmp_path):
    model = nn.MLP([4, 8, 3], rng=0)
    lp.save(tmp_path / "s.npz", optim.adam().init(model))
    with pytest.raises(CheckpointError, match="shape"):
        lp.load(tmp_path / "s.npz", like=optim.adam().init(nn.MLP([4, 9, 3], rng=0)))
    with pytest.raises(CheckpointError, match="does not match the template"):
        lp.load(tmp_path / "s.npz", like=optim.sgd(0.1, momentum=0.9).init(model))
    with pytest.raises(CheckpointError, match="dtype"):
        lp.load(tmp_path / "s.npz", like=optim.adam().init(nn.MLP([4, 8, 3], rng=0, dtype=np.float64)))


# ----- permissions and temporary files ----------------------------------------------------------------
def test_save_respects_the_umask_and_keeps_the_permissions_it_replaces(tmp_path):
    old = os.umask(0o027)
    try:
        lp.save(tmp_path / "new.npz", [1.0])
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(tmp_path / "new.npz").st_mode) == 0o640
    (tmp_path / "kept.npz").write_bytes(b"")
    os.chmod(tmp_path / "kept.npz", 0o600)
    lp.save(tmp_path / "kept.npz", [1.0])
    assert stat.S_IMODE(os.stat(tmp_path / "kept.npz").st_mode) == 0o600
    assert lp.load(tmp_path / "kept.npz") == [1.0]


def test_a_failed_save_leaves_no_temporary_file(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "fsync", fail)
    with pytest.raises(OSError, match="disk full"):
        lp.save(tmp_path / "x.npz", {"w": np.zeros(3)})
    assert os.listdir(tmp_path) == []


# ----- hostile files ---------------------------------------------------------------------------------------
def _good_bytes(tmp_path, tree=None):
    path = tmp_path / "good.npz"
    lp.save(path, {"w": np.arange(6.0).reshape(2, 3), "n": 3} if tree is None else tree)
    return path.read_bytes()


def _npy(arr, shape=None, descr=None):
    """An .npy record, with a header that may lie about the shape or dtype."""
    header = {"descr": descr or np.lib.format.dtype_to_descr(arr.dtype), "fortran_order": False,
              "shape": tuple(arr.shape) if shape is None else shape}
    out = io.BytesIO()
    np.lib.format.write_array_header_1_0(out, header)
    return out.getvalue() + arr.tobytes()


def _zip(members, compression=zipfile.ZIP_STORED):
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", compression=compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return out.getvalue()


def _header(structure, leaves):
    text = json.dumps({"format": "leanpass-checkpoint", "version": 1, "structure": structure, "leaves": leaves})
    return _npy(np.frombuffer(text.encode(), dtype=np.uint8))


def _loads(tmp_path, data, like=None):
    path = tmp_path / "hostile.npz"
    path.write_bytes(data)
    return lp.load(path, like=like)


def test_an_unsupported_compression_is_a_checkpoint_error(tmp_path):
    good = zipfile.ZipFile(io.BytesIO(_good_bytes(tmp_path)))
    members = {n: good.read(n) for n in good.namelist()}
    with pytest.raises(CheckpointError, match="compression"):
        _loads(tmp_path, _zip(members, zipfile.ZIP_BZIP2))
    raw = bytearray(_zip(members))  # a compression method number zipfile does not know at all
    for sig, offset in ((b"PK\x03\x04", 8), (b"PK\x01\x02", 10)):  # where each record keeps its method
        at = raw.find(sig)
        while at != -1:
            raw[at + offset:at + offset + 2] = struct.pack("<H", 99)
            at = raw.find(sig, at + 4)
    with pytest.raises(CheckpointError):
        _loads(tmp_path, bytes(raw))


def test_a_corrupt_zip_directory_is_a_checkpoint_error(tmp_path):
    raw = bytearray(_good_bytes(tmp_path))
    at = raw.rfind(b"PK\x05\x06")  # the end-of-directory record: point the directory elsewhere
    raw[at + 16:at + 20] = struct.pack("<I", 3)
    with pytest.raises(CheckpointError, match="corrupt"):
        _loads(tmp_path, bytes(raw))
    with pytest.raises(CheckpointError, match="corrupt"):
        _loads(tmp_path, bytes(raw[:at]))  # no directory at all


def test_malformed_headers_and_leaf_records_are_checkpoint_errors(tmp_path):
    leaf = _npy(np.zeros(2))
    cases = [
        {"__leanpass__.npy": _npy(np.frombuffer(b"not json", dtype=np.uint8))},
        {"__leanpass__.npy": _npy(np.frombuffer(b"[1, 2]", dtype=np.uint8))},
        {"__leanpass__.npy": _npy(np.zeros(3))},  # not text
        {"__leanpass__.npy": _header({"leaf": 0}, [])},  # a leaf the header does not list
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "ndarray"}])},  # its record is missing
        {"__leanpass__.npy": _header({"leaf": 0}, ["ndarray"]), "leaf_0.npy": leaf},
        {"__leanpass__.npy": _header({"list": 3}, []), "leaf_0.npy": leaf},
        {"__leanpass__.npy": _header({"dict": [[1, 2, 3]]}, [])},
        {"__leanpass__.npy": _header({"dict": [["a", {"leaf": 0}], ["a", {"leaf": 1}]]},
                                     [{"type": "int"}, {"type": "int"}]),
         "leaf_0.npy": _npy(np.array(1)), "leaf_1.npy": _npy(np.array(1))},
        {"__leanpass__.npy": _header({"class": "leanpass.nn.Linear", "children": [{"leaf": 0}]},
                                     [{"type": "Tensor"}]), "leaf_0.npy": leaf},
        {"__leanpass__.npy": _header({"class": "os.system", "children": []}, [])},
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "int"}]), "leaf_0.npy": leaf},  # not a scalar
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "str"}]), "leaf_0.npy": _npy(np.array(1.5))},
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "Tensor", "requires_grad": True}]),
         "leaf_0.npy": _npy(np.array([1, 2]))},
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "pickle"}]), "leaf_0.npy": leaf},
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "ndarray", "shape": [3], "dtype": "<f8"}]),
         "leaf_0.npy": leaf},  # not the array the header declares
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "ndarray"}]),
         "leaf_0.npy": _npy(np.zeros(2), descr="|O")},  # objects would need pickle
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "ndarray"}]), "leaf_0.npy": leaf[:-3]},
        {"__leanpass__.npy": _header({"leaf": 0}, [{"type": "ndarray"}]), "leaf_0.npy": b"\x93NUMPY\x09\x00"},
    ]
    for members in cases:
        with pytest.raises(CheckpointError):
            _loads(tmp_path, _zip(members))


def test_deeply_nested_json_is_a_checkpoint_error(tmp_path):
    for depth in (150, 100_000):
        structure = "[" * depth + "]" * depth
        text = '{"format": "leanpass-checkpoint", "version": 1, "leaves": [], "structure": {"list": ' + structure + "}}"
        data = _zip({"__leanpass__.npy": _npy(np.frombuffer(text.encode(), dtype=np.uint8))})
        with pytest.raises(CheckpointError):
            _loads(tmp_path, data)
    with pytest.raises(ValueError, match="levels deep"):
        nested: list = []
        for _ in range(150):
            nested = [nested]
        lp.save(tmp_path / "deep.npz", nested)


def test_a_header_declaring_a_huge_array_allocates_nothing(tmp_path):
    header = _header({"leaf": 0}, [{"type": "ndarray"}])
    huge = _npy(np.zeros(0), shape=(10**6, 10**6))  # 8 terabytes declared, none present
    with pytest.raises(CheckpointError, match="declares"):
        _loads(tmp_path, _zip({"__leanpass__.npy": header, "leaf_0.npy": huge}))
    # a zip directory that lies about the member's size (stored: it cannot hold more than it occupies)
    raw = bytearray(_zip({"__leanpass__.npy": header, "leaf_0.npy": _npy(np.zeros(4))}))
    at = raw.rfind(b"PK\x01\x02")
    raw[at + 24:at + 28] = struct.pack("<I", 2**31)
    with pytest.raises(CheckpointError):
        _loads(tmp_path, bytes(raw))


def test_a_compressed_bomb_is_refused_before_it_expands(tmp_path):
    # 4 GB of zeros deflate to about 4 MB; here a member claims 4 GB but holds a few hundred bytes.
    header = _header({"leaf": 0}, [{"type": "ndarray"}])
    npy_head = _npy(np.zeros(0, dtype=np.uint8), shape=(2**32 - 1000,))
    stream = zlib.compressobj(9, zlib.DEFLATED, -15)
    body = stream.compress(npy_head + bytes(1 << 20)) + stream.flush()  # only 1 MB is really there
    info = zipfile.ZipInfo("leaf_0.npy")
    info.compress_type = zipfile.ZIP_DEFLATED
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as zf:
        zf.writestr("__leanpass__.npy", header)
        zf.writestr(info, npy_head + bytes(1 << 20))
    raw = bytearray(out.getvalue())
    at = raw.rfind(b"PK\x01\x02")  # the directory now says it expands to 4 GB + header
    raw[at + 24:at + 28] = struct.pack("<I", len(npy_head) + 2**32 - 1000)
    assert len(body) < 10_000 and len(raw) < 20_000
    with pytest.raises(CheckpointError, match="declares 42949[0-9]+ bytes but occupies"):
        _loads(tmp_path, bytes(raw))


def test_a_compressed_checkpoint_written_by_numpy_loads(tmp_path):
    good = zipfile.ZipFile(io.BytesIO(_good_bytes(tmp_path)))
    data = _zip({n: good.read(n) for n in good.namelist()}, zipfile.ZIP_DEFLATED)
    back = _loads(tmp_path, data)
    np.testing.assert_array_equal(back["w"], np.arange(6.0).reshape(2, 3))
    assert back["n"] == 3


# ----- fuzzing the loader ----------------------------------------------------------------------------------
_GOOD: dict[str, bytes] = {}


def _good(tmp_path_factory):
    if not _GOOD:
        d = tmp_path_factory.mktemp("good")
        _GOOD["b"] = _good_bytes(d, {"model": nn.Linear(2, 2, rng=0), "opt": optim.adam().init([np.zeros(2)]),
                                     "name": "x", "step": 2, "f": [1.5, None, (True,)]})
    return _GOOD["b"]


def _must_fail_cleanly(tmp_path, data):
    try:
        _loads(tmp_path, data)
    except (CheckpointError, FileNotFoundError):
        pass  # anything else (RuntimeError, KeyError, RecursionError, MemoryError, ...) fails the test


@settings(max_examples=30, deadline=None)
@given(data=st.binary(max_size=2000))
def test_fuzz_random_bytes(tmp_path_factory, data):
    _must_fail_cleanly(tmp_path_factory.mktemp("f"), b"PK\x03\x04" + data)


@settings(max_examples=30, deadline=None)
@given(cut=st.integers(min_value=0, max_value=10**6))
def test_fuzz_truncations(tmp_path_factory, cut):
    good = _good(tmp_path_factory)
    _must_fail_cleanly(tmp_path_factory.mktemp("f"), good[: cut % len(good)])


@settings(max_examples=30, deadline=None)
@given(flips=st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=7)), min_size=1,
                      max_size=4))
def test_fuzz_bit_flips(tmp_path_factory, flips):
    raw = bytearray(_good(tmp_path_factory))
    for at, bit in flips:
        raw[at % len(raw)] ^= 1 << bit
    _must_fail_cleanly(tmp_path_factory.mktemp("f"), bytes(raw))


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=5),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(
                         st.sampled_from(["leaf", "list", "tuple", "dict", "none", "class", "children", "meta",
                                          "treedef", "fn", "type", "shape", "dtype"]), kids, max_size=3),
                     max_leaves=12)


@settings(max_examples=30, deadline=None)
@given(structure=_json, leaves=st.lists(st.dictionaries(st.sampled_from(["type", "requires_grad", "shape", "dtype",
                                                                          "path"]), _json, max_size=4), max_size=3),
       kinds=st.lists(st.sampled_from(["<f8", "<i8", "|b1", "<U3", "<c16", "|u1"]), min_size=3, max_size=3))
def test_fuzz_crafted_headers(tmp_path_factory, structure, leaves, kinds):
    members = {"__leanpass__.npy": _header(structure, leaves)}
    for i, kind in enumerate(kinds[: len(leaves)]):
        members[f"leaf_{i}.npy"] = _npy(np.zeros(2, dtype=kind))
    _must_fail_cleanly(tmp_path_factory.mktemp("f"), _zip(members))
