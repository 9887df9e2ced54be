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


def test_a_read_only_file_is_not_replaced(tmp_path):
    path = tmp_path / "best.npz"
    lp.save(path, {"w": np.ones(3)})
    good = path.read_bytes()
    os.chmod(path, 0o444)  # (no write bit for anyone: refused for root too, whom open() would let through)
    try:
        with pytest.raises(PermissionError, match="best.npz' is read-only.*chmod u\\+w"):
            lp.save(path, {"w": np.zeros(3)})
        assert path.read_bytes() == good and os.listdir(tmp_path) == ["best.npz"]
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o444
    finally:
        os.chmod(path, 0o644)
    lp.save(path, {"w": np.zeros(3)})  # writable again: replaced
    assert lp.load(path)["w"].tolist() == [0.0, 0.0, 0.0]


def test_a_file_writable_by_its_owner_only_is_refused_to_others(tmp_path, monkeypatch):
    path = tmp_path / "theirs.npz"
    lp.save(path, [1.0])
    monkeypatch.setattr(os, "access", lambda *args, **kwargs: False)  # as another user, not its owner, sees it
    with pytest.raises(PermissionError, match="read-only"):
        lp.save(path, [2.0])
    monkeypatch.undo()
    assert lp.load(path) == [1.0]


def test_saving_to_a_symbolic_link_writes_through_it(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    lp.save(run / "step100.npz", {"step": 100})
    os.symlink(os.path.join("run", "step100.npz"), tmp_path / "latest.npz")  # relative, as `ln -s` makes it
    os.symlink("latest.npz", tmp_path / "newest.npz")  # a link to the link
    os.chmod(run / "step100.npz", 0o640)
    lp.save(tmp_path / "newest.npz", {"step": 200})
    assert os.path.islink(tmp_path / "latest.npz") and os.path.islink(tmp_path / "newest.npz")
    assert lp.load(run / "step100.npz") == {"step": 200} and lp.load(tmp_path / "latest.npz") == {"step": 200}
    assert stat.S_IMODE(os.stat(run / "step100.npz").st_mode) == 0o640
    assert sorted(os.listdir(run)) == ["step100.npz"]  # the temporary file was beside the target
    os.symlink(os.path.join("run", "next.npz"), tmp_path / "dangling.npz")  # a link to no file yet: made
    lp.save(tmp_path / "dangling.npz", [1])
    assert lp.load(run / "next.npz") == [1] and os.path.islink(tmp_path / "dangling.npz")
    os.symlink("loop_b", tmp_path / "loop_a")
    os.symlink("loop_a", tmp_path / "loop_b")
    with pytest.raises(OSError, match="loop of symbolic links"):
        lp.save(tmp_path / "loop_a", [1])
    os.chmod(run / "step100.npz", 0o444)
    try:
        with pytest.raises(PermissionError, match="step100.npz' is read-only"):
            lp.save(tmp_path / "latest.npz", {"step": 300})
    finally:
        os.chmod(run / "step100.npz", 0o644)


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


def _members(data):
    zf = zipfile.ZipFile(io.BytesIO(data))
    return {n: zf.read(n) for n in zf.namelist()}


def _header_of(data):
    raw = np.lib.format.read_array(io.BytesIO(_members(data)["__leanpass__.npy"]))
    return json.loads(raw.tobytes().decode())


def _with_header(data, header):
    members = _members(data)
    members["__leanpass__.npy"] = _npy(np.frombuffer(json.dumps(header).encode(), dtype=np.uint8))
    return _zip(members)


def test_a_sequential_whose_settings_do_not_fit_its_children(tmp_path):
    model = nn.Sequential(nn.Linear(2, 3, rng=0), nn.relu, nn.Linear(3, 2, rng=1))
    good = _good_bytes(tmp_path, model)
    header = _header_of(good)
    metas = [
        {"tuple": [None, {"fn": "relu"}]},  # one module listed, two in the file (was a RuntimeError)
        {"tuple": [None, {"fn": "relu"}, None, None]},  # three listed, two in the file (was a RuntimeError)
        {"list": [None, {"fn": "relu"}, None]},  # (a list: flattening gives a tuple)
        "ab",  # (was a Sequential of the layers "a" and "b")
        {"tuple": [None, 3, None]},  # a layer that is not callable
        None,
    ]
    for meta in metas:
        header["structure"]["meta"] = meta
        with pytest.raises(CheckpointError, match="Sequential at the root"):
            _loads(tmp_path, _with_header(good, header))
    header["structure"]["children"] = header["structure"]["children"][:1]  # fewer children than listed
    header["structure"]["meta"] = {"tuple": [None, {"fn": "relu"}]}
    header["leaves"] = header["leaves"][:2]
    assert len(_loads(tmp_path, _with_header(good, header)).layers) == 2  # consistent: a smaller Sequential


def test_a_module_whose_settings_do_not_fit_its_fields(tmp_path):
    good = _good_bytes(tmp_path, {"m": nn.LayerNorm(3)})
    header = _header_of(good)
    node = header["structure"]["dict"][0][1]
    node["meta"] = {"tuple": node["meta"]["tuple"] + [1.0]}  # one setting more than the class has
    with pytest.raises(CheckpointError, match="LayerNorm at \\['m'\\] in the file does not rebuild as written"):
        _loads(tmp_path, _with_header(good, header))
    node["meta"] = {"tuple": []}
    with pytest.raises(CheckpointError):
        _loads(tmp_path, _with_header(good, header))


@pytest.mark.parametrize(("name", "field", "value"), [
    ("MT19937", ("state", "pos"), 10**8),  # NumPy accepts these, and its next draw reads outside memory
    ("Philox", ("buffer_pos",), -10**8),
    ("Philox", ("buffer_pos",), 5),
    ("PCG64", ("state", "state"), 2**128),
    ("PCG64", ("has_uint32",), 2),
    ("SFC64", ("uinteger",), -1),
    ("PCG64", ("has_uint32",), True),
    ("PCG64", ("has_uint32",), 0.5),
])
def test_a_generator_state_out_of_range_is_refused(tmp_path, name, field, value):
    good = _good_bytes(tmp_path, {"rng": np.random.Generator(getattr(np.random, name)(0))})
    header = _header_of(good)
    node = header["leaves"][0]["state"]
    for key in field[:-1]:
        node = node["dict"][key]
    node["dict"][field[-1]] = value
    with pytest.raises(CheckpointError, match=r"generator at \['rng'\] has .*state"):
        _loads(tmp_path, _with_header(good, header))


def test_malformed_generator_records_are_checkpoint_errors(tmp_path):
    good = _good_bytes(tmp_path, {"rng": np.random.Generator(np.random.MT19937(0))})
    edits = [
        lambda info: info.update(bit_generator="os.system"),
        lambda info: info.update(bit_generator="PCG64"),  # a state of another generator's layout
        lambda info: info["state"]["dict"]["state"]["dict"]["key"].update(array=[1, 2, 3]),
        lambda info: info["state"]["dict"]["state"]["dict"]["key"].update(dtype="<u8"),
        lambda info: info["state"]["dict"]["state"]["dict"]["key"]["array"].__setitem__(0, 2**40),
        lambda info: info["state"]["dict"].update(extra=1),
        lambda info: info.update(state=[]),
        lambda info: info["seed_seq"].update(pool_size=10**12),  # would allocate 4 TB
        lambda info: info["seed_seq"].update(entropy="0x-1"),
        lambda info: info["seed_seq"].update(spawn_key=[-1]),
        lambda info: info.update(seed_seq=[]),
    ]
    for edit in edits:
        header = _header_of(good)
        edit(header["leaves"][0])
        with pytest.raises(CheckpointError, match=r"generator at \['rng'\]|rebuilt"):
            _loads(tmp_path, _with_header(good, header))


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


# Mutations of a real header: a value replaced by another (from a pool of troublemakers, or a piece of
# the header itself), a key or element deleted, an element repeated. Loading the result, with or
# without a template, either works or raises CheckpointError; nothing else escapes.
def _rich_tree():
    model = nn.Sequential(nn.Linear(2, 3, rng=0), nn.relu, nn.LayerNorm(3), nn.Linear(3, 2, rng=1))
    return {"model": model, "opt": optim.adam().init(model), "step": 7, "big": 2**90, "name": "run",
            "rngs": [np.random.default_rng(3), np.random.Generator(np.random.MT19937(1)),
                     np.random.Generator(np.random.Philox(2))], "misc": [1.5, None, (True, np.float32(2.0))]}


_POOL = [None, True, False, -1, 0, 1, 2, 3, 5, 624, 2**64, 2**128, -2**63, 1.5, float("nan"), "", "x", "relu",
         "leanpass.nn.Sequential", "leanpass.nn.Linear", "leanpass.optim._State", "PCG64", "MT19937", "Tensor",
         "int", "Generator", "0x-5", [], {}, [None], {"leaf": 0}, {"none": True}, {"tuple": []}, {"list": [None]},
         {"fn": "relu"}, {"treedef": {"leaf": 0}}, {"dict": {}}, {"array": [1], "dtype": "<u4", "shape": [1]}]


def _spots(node, spots, depth=0):
    """(container, key) of every value in a JSON tree (long lists: their ends only)."""
    if isinstance(node, dict):
        for key in list(node):
            spots.append((node, key))
            _spots(node[key], spots, depth + 1)
    elif isinstance(node, list):
        keys = range(len(node)) if len(node) <= 6 else [0, 1, len(node) - 1]
        for key in keys:
            spots.append((node, key))
            _spots(node[key], spots, depth + 1)
    return spots


_RICH: dict[str, bytes] = {}


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_fuzz_mutated_headers(tmp_path_factory, data):
    d = tmp_path_factory.mktemp("m")
    if not _RICH:
        _RICH["b"] = _good_bytes(d, _rich_tree())
    good = _RICH["b"]
    header = _header_of(good)
    for _ in range(data.draw(st.integers(1, 3))):
        spots = _spots(header, [])
        node, key = spots[data.draw(st.integers(0, len(spots) - 1))]
        action = data.draw(st.sampled_from(["pool", "copy", "delete", "repeat"]))
        if action == "pool":
            node[key] = json.loads(json.dumps(data.draw(st.sampled_from(_POOL))))
        elif action == "copy":
            other, other_key = spots[data.draw(st.integers(0, len(spots) - 1))]
            node[key] = json.loads(json.dumps(other[other_key]))
        elif action == "delete":
            del node[key]
        elif isinstance(node, list):
            node.insert(key, json.loads(json.dumps(node[key])))
    raw = _with_header(good, header)
    for like in (None, _rich_tree()):
        try:
            back = _loads(d, raw, like=like)
        except CheckpointError:
            continue
        lp.tree_flatten(back)  # what loads is a pytree
