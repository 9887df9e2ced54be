"""Saving and loading pytrees of parameters: ``leanpass.save(path, tree)`` and ``leanpass.load(path)``.

A checkpoint is a NumPy ``.npz`` file: one array per leaf (Tensors, arrays, Python numbers of
any size and strings, NumPy random generators), plus the tree's structure as JSON text. A Tensor
at several leaves (tied weights) is stored once and loads as one Tensor again. Loading reads each
``.npy`` record itself, never unpickling, and checks every size a file declares against the bytes
it holds before allocating anything; it rebuilds containers only from a fixed set (dict, list,
tuple, None and the pytree classes registered with LeanPass, such as the ``leanpass.nn`` modules
and optimizer states), so opening a file never runs code from it, and a malformed one raises
``CheckpointError``. Values and dtypes round-trip exactly. Writing is atomic: the file is written
beside its destination and moved into place with ``os.replace``, so a crash never leaves a
truncated checkpoint where a good one was; a new file gets the permissions the umask allows, a
replaced one keeps its own, a read-only one is not replaced (``PermissionError``), and a symbolic
link is written through (the file it names gets the checkpoint).

>>> import tempfile, os
>>> import numpy as np
>>> import leanpass as lp
>>> params = {"w": lp.Tensor(np.ones((2, 2), dtype=np.float32)), "step": 3}
>>> path = os.path.join(tempfile.mkdtemp(), "params.npz")
>>> lp.save(path, params)
>>> lp.load(path)
{'w': Tensor([[1., 1.],
        [1., 1.]], dtype=float32), 'step': 3}
"""

from __future__ import annotations

import errno
import io
import json
import os
import re
import struct
import tempfile
import zipfile
import zlib
from dataclasses import is_dataclass
from pathlib import Path
from typing import Any, cast

import numpy as np

from .core import tree as _tree
from .core.tensor import Tensor, _const
from .core.tree import TreeDef, child_names, tree_flatten, tree_unflatten

__all__ = ["save", "load", "CheckpointError"]

_FORMAT = "leanpass-checkpoint"
_VERSION = 1
_TIED_VERSION = 2  # a file in which one Tensor fills several leaves (stored once): older readers refuse it
_HEADER = "__leanpass__"
_NONE = type(None)
_KINDS = "biufcUS"  # the dtype kinds a checkpoint stores (no objects: nothing is unpickled)
_MAX_DEPTH = 100  # how deeply containers may nest in a file (a model is a few levels deep)
# Deflate expands at most about 1032 to 1: what a compressed member may declare it holds.
_DEFLATE_RATIO = 1100


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, or whose contents do not match what was expected.

    It is a ``ValueError``, so ``except ValueError`` catches it too.

    >>> issubclass(CheckpointError, ValueError)
    True
    """


# ----- structure <-> JSON -----------------------------------------------------------------------
def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _fields_missing(cls: type, n: int) -> bool:
    """Whether a module class has other than ``n`` parameter fields (Sequential takes any number)."""
    from . import nn
    from .nn.module import _dynamic_fields

    if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Sequential and is_dataclass(cls):
        return len(_dynamic_fields(cls)) != n  # (a module that is not a dataclass has the fields it was given)
    return False


def _encode_meta(meta: Any, where: str) -> Any:
    from .nn import ACTIVATIONS

    if meta is None or isinstance(meta, (bool, int, float, str)):
        return meta
    if isinstance(meta, TreeDef):  # the parameters' structure, kept in an optimizer's state
        return {"treedef": _encode(meta, where, [])}
    if isinstance(meta, (tuple, list)):
        return {"tuple" if isinstance(meta, tuple) else "list": [_encode_meta(m, where) for m in meta]}
    if callable(meta):
        for name, fn in ACTIVATIONS.items():
            if fn is meta:
                return {"fn": name}
        return {"callable": getattr(meta, "__qualname__", repr(meta))}
    raise TypeError(
        f"save: cannot store the structure at {where or 'the root'}: its metadata {meta!r} is not made of "
        "numbers, strings, tuples or nn activations."
    )


def _decode_meta(meta: Any, where: str) -> Any:
    from .nn import ACTIVATIONS

    if isinstance(meta, dict):
        if "tuple" in meta:
            return tuple(_decode_meta(m, where) for m in _list(meta["tuple"], where))
        if "list" in meta:
            return [_decode_meta(m, where) for m in _list(meta["list"], where)]
        if "treedef" in meta:
            return _decode(meta["treedef"], where)
        if "fn" in meta and isinstance(meta["fn"], str) and meta["fn"] in ACTIVATIONS:
            return ACTIVATIONS[meta["fn"]]
        raise CheckpointError(
            f"load: the structure at {where or 'the root'} refers to the function {meta!r}, which cannot be "
            "rebuilt from a file. Pass the object you saved as a template: load(path, like=model)."
        )
    if isinstance(meta, list):  # (JSON has no other containers, and dicts were handled above)
        raise CheckpointError(f"load: malformed settings at {where or 'the root'}")
    return meta


def _list(x: Any, where: str) -> list[Any]:
    """``x`` checked to be a JSON list (a file's structure is not trusted)."""
    if not isinstance(x, list):
        raise CheckpointError(f"load: malformed structure at {where or 'the root'}")
    return x


def _encode(td: TreeDef, path: str, paths: list[str]) -> Any:
    """JSON for a structure; ``paths`` collects each leaf's path, in order."""
    kind = td.kind
    if kind is None:
        paths.append(path or "<root>")
        return {"leaf": len(paths) - 1}
    if kind is _NONE:
        return {"none": True}
    if kind is list or kind is tuple:
        return {kind.__name__: [_encode(c, f"{path}[{i}]", paths) for i, c in enumerate(td.children)]}
    if kind is dict:
        items = []
        for key, child in zip(td.meta, td.children):
            if isinstance(key, bool) or not isinstance(key, (str, int)):
                raise TypeError(f"save: dict keys must be str or int to be stored, got {key!r} at {path or 'the root'}")
            items.append([key, _encode(child, f"{path}[{key!r}]", paths)])
        return {"dict": items}
    names = child_names(kind, len(td.children))
    node: dict[str, Any] = {"class": _class_name(kind),
                            "children": [_encode(c, path + n, paths) for c, n in zip(td.children, names)]}
    if kind in _tree._REGISTRY:
        node["meta"] = _encode_meta(td.meta, path)
    elif not (issubclass(kind, tuple) and hasattr(kind, "_fields")):
        raise TypeError(f"save: {kind.__name__} at {path or 'the root'} is not a pytree container")
    return node


# Classes whose module path changed since a checkpoint could name them: old prefix -> new.
_MOVED = {"leanpass.conv_layers.": "leanpass.nn."}


def _registered(name: str, where: str) -> Any:
    for old, new in _MOVED.items():
        if name.startswith(old):
            name = new + name[len(old):]
    if name.startswith(("leanpass.nn.", "leanpass.optim.")):  # our own classes: load their module
        import importlib

        module, _, attr = name.rpartition(".")
        getattr(importlib.import_module(module), attr, None)  # (nn's conv layers load on first use)
    for cls in _tree._REGISTRY:
        if isinstance(cls, type) and _class_name(cls) == name:
            return cls
    raise CheckpointError(
        f"load: the checkpoint holds a {name} at {where or 'the root'}, which is not a registered pytree class "
        "here. Import the module that defines (and registers) it, or pass a template: load(path, like=obj)."
    )


def _decode(node: Any, path: str) -> TreeDef:
    if not isinstance(node, dict) or len(node) > 3:
        raise CheckpointError(f"load: malformed structure at {path or 'the root'}")
    if "leaf" in node:
        return TreeDef(None, None, ())
    if "none" in node:
        return TreeDef(_NONE, None, ())
    if "list" in node or "tuple" in node:
        kind = list if "list" in node else tuple
        kids = _list(node[kind.__name__], path)
        return TreeDef(kind, None, tuple(_decode(c, f"{path}[{i}]") for i, c in enumerate(kids)))
    if "dict" in node:
        items = _list(node["dict"], path)
        for item in items:
            if not (isinstance(item, list) and len(item) == 2 and isinstance(item[0], (str, int))
                    and not isinstance(item[0], bool)):
                raise CheckpointError(f"load: malformed dict entry at {path or 'the root'}")
        keys = tuple(k for k, _ in items)
        if len(set(keys)) != len(keys):
            raise CheckpointError(f"load: a dict at {path or 'the root'} repeats a key")
        return TreeDef(dict, keys, tuple(_decode(c, f"{path}[{k!r}]") for k, c in items))
    if "class" in node and isinstance(node["class"], str):
        cls = _registered(node["class"], path)
        kids = _list(node.get("children"), path)
        if len(child_names(cls, len(kids))) != len(kids) or _fields_missing(cls, len(kids)):
            raise CheckpointError(
                f"load: the {cls.__name__} at {path or 'the root'} has {len(kids)} children in the file"
            )
        children = tuple(_decode(c, f"{path}[{i}]") for i, c in enumerate(kids))
        meta = _decode_meta(node.get("meta"), path)
        _check_sequential(cls, meta, len(kids), path)
        return TreeDef(cls, meta, children)
    raise CheckpointError(f"load: malformed structure at {path or 'the root'}")


def _check_sequential(cls: type, meta: Any, n: int, where: str) -> None:
    """A ``Sequential``'s settings list its layers: ``None`` for each of its ``n`` modules, the functions between."""
    from . import nn

    if cls is nn.Sequential and not (isinstance(meta, tuple) and sum(m is None for m in meta) == n
                                     and all(m is None or callable(m) for m in meta)):
        raise CheckpointError(f"load: the Sequential at {where or 'the root'} lists layers ({_shown(meta)!r}) that "
                              f"do not fit its {n} modules in the file")


def _first_difference(saved: Any, expected: Any, path: str = "") -> str | None:
    """Where two JSON structures differ, in words (None when they are the same)."""
    where = path or "the root"
    if type(saved) is not type(expected):
        return f"at {where}: the file has {_describe(saved)}, the template has {_describe(expected)}"
    if isinstance(saved, dict):
        if set(saved) != set(expected):
            return f"at {where}: the file has {_describe(saved)}, the template has {_describe(expected)}"
        for key in saved:
            if key == "leaf":
                continue
            a, b = saved[key], expected[key]
            if key == "dict":
                ka, kb = [k for k, _ in a], [k for k, _ in b]
                if ka != kb:
                    return f"at {where}: the file's dict has keys {ka}, the template's has {kb}"
                for (k, ca), (_, cb) in zip(a, b):
                    found = _first_difference(ca, cb, f"{path}[{k!r}]")
                    if found:
                        return found
            elif key in ("list", "tuple", "children"):
                if len(a) != len(b):
                    return f"at {where}: the file has {len(a)} children, the template has {len(b)}"
                names = [f"[{i}]" for i in range(len(a))]
                if key == "children":
                    cls = next((c for c in _tree._REGISTRY if isinstance(c, type) and _class_name(c) == saved["class"]),
                               None)
                    names = child_names(cls, len(a)) if cls is not None else names
                for name, ca, cb in zip(names, a, b):
                    found = _first_difference(ca, cb, path + name)
                    if found:
                        return found
            elif a != b:
                what = "settings" if key == "meta" else key
                return f"at {where}: {what} differ (file: {_shown(a)!r}, template: {_shown(b)!r})"
        return None
    return None if saved == expected else f"at {where}: the file has {saved!r}, the template has {expected!r}"


def _shown(meta: Any) -> Any:
    """Encoded metadata in Python terms, for messages."""
    if isinstance(meta, dict):
        if "tuple" in meta:
            return tuple(_shown(m) for m in meta["tuple"])
        if "list" in meta:
            return [_shown(m) for m in meta["list"]]
        if "fn" in meta:
            return meta["fn"]
        if "callable" in meta:
            return meta["callable"]
    return meta


def _describe(node: Any) -> str:
    if isinstance(node, dict):
        for key in ("leaf", "none", "list", "tuple", "dict"):
            if key in node:
                return {"leaf": "an array", "none": "None"}.get(key, f"a {key}")
        if "class" in node:
            return f"a {node['class'].rsplit('.', 1)[-1]}"
    return repr(node)


# ----- leaves ------------------------------------------------------------------------------------
def _leaf_record(x: Any, path: str) -> tuple[dict[str, Any], np.ndarray]:
    if type(x) is Tensor:
        arr = np.asarray(x._data)
        info: dict[str, Any] = {"type": "Tensor", "requires_grad": bool(x.requires_grad)}
    elif isinstance(x, np.ndarray):
        arr, info = x, {"type": "ndarray"}
    elif isinstance(x, np.generic):
        arr, info = np.asarray(x), {"type": "scalar"}
    elif isinstance(x, bool):
        arr, info = np.asarray(x), {"type": "bool"}
    elif isinstance(x, int):  # (beyond int64: its digits, in hexadecimal, which has no length limit)
        info = {"type": "int"}
        arr = np.asarray(x, dtype=np.int64) if -2**63 <= x < 2**63 else np.asarray(hex(x), dtype=str)
    elif isinstance(x, np.random.Generator):
        arr, info = np.zeros(0, dtype=np.uint8), {"type": "Generator", **_generator_record(x, path)}
    elif isinstance(x, float):
        arr, info = np.asarray(x, dtype=np.float64), {"type": "float"}
    elif isinstance(x, str):
        arr, info = np.asarray(x, dtype=str), {"type": "str"}
    else:
        raise TypeError(
            f"save: the leaf at {path} is a {type(x).__name__}; a checkpoint holds Tensors, NumPy arrays and "
            "Python numbers and strings. Convert it, or keep it out of the saved tree."
        )
    if arr.dtype.kind not in _KINDS:
        raise TypeError(f"save: the array at {path} has dtype {arr.dtype}, which cannot be stored without pickle")
    info["shape"] = list(arr.shape)
    info["dtype"] = arr.dtype.str
    return info, arr


def _rebuild_leaf(info: dict[str, Any], arr: np.ndarray, where: str) -> Any:
    kind = info.get("type")
    scalar = kind in ("scalar", "bool", "int", "float", "str")
    if scalar and arr.shape != ():
        raise CheckpointError(f"load: the {kind} at {where} holds an array of shape {arr.shape}")
    if kind == "Tensor":
        if arr.dtype.kind not in "biuf" or (info.get("requires_grad") and arr.dtype.kind != "f"):
            raise CheckpointError(f"load: the Tensor at {where} has dtype {arr.dtype}, which a Tensor cannot hold")
        if info.get("requires_grad"):
            return Tensor(arr, requires_grad=True)
        arr.flags.writeable = False
        return _const(arr)
    if kind == "ndarray":
        return arr
    if kind == "scalar":
        return arr[()]
    if kind == "int" and arr.dtype.kind == "U":
        digits = str(arr[()])
        if not _HEX_INT.fullmatch(digits):
            raise CheckpointError(f"load: the int at {where} is stored as {digits[:40]!r}")
        return int(digits, 16)
    if kind == "Generator":
        return _rebuild_generator(info, where)
    if kind in ("bool", "int", "float", "str"):
        if arr.dtype.kind not in {"bool": "b", "int": "iu", "float": "f", "str": "U"}[kind]:
            raise CheckpointError(f"load: the {kind} at {where} is stored as dtype {arr.dtype}")
        return {"bool": bool, "int": int, "float": float, "str": str}[kind](arr[()])
    raise CheckpointError(f"load: unknown leaf type {kind!r} in the checkpoint")


# ----- random generators ------------------------------------------------------------------------
# A np.random.Generator is stored as its bit generator's name, state and seed sequence (JSON: Python
# ints have any size there), and rebuilt as a new Generator in that state: its next draws are the
# ones the saved generator would have made, and spawn() gives the same children.
_BIT_GENERATORS = ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937")
# The largest value each integer of a state may hold. NumPy does not check them when a state is
# set, and a position beyond a buffer makes the next draw read outside it: a file cannot ask that.
_STATE_INTS = {"state": 2**128 - 1, "inc": 2**128 - 1, "has_uint32": 1, "uinteger": 2**32 - 1, "pos": 624,
               "buffer_pos": 4}
_HEX_INT = re.compile("-?0x[0-9a-f]+")


def _generator_record(rng: np.random.Generator, path: str) -> dict[str, Any]:
    bitgen = rng.bit_generator
    name = type(bitgen).__name__
    if name not in _BIT_GENERATORS or getattr(np.random, name) is not type(bitgen):
        raise TypeError(f"save: the generator at {path} uses the bit generator {type(bitgen).__qualname__}; a "
                        f"checkpoint holds generators made with NumPy's own ({', '.join(_BIT_GENERATORS)})")
    seq = getattr(bitgen, "seed_seq", None)
    seed = None
    entropy = seq.entropy if isinstance(seq, np.random.SeedSequence) else None
    if seq is not None and entropy is not None:
        seed = {"entropy": hex(entropy) if isinstance(entropy, int) else [int(v) for v in entropy],
                "spawn_key": [int(v) for v in seq.spawn_key], "pool_size": int(seq.pool_size),
                "n_children_spawned": int(seq.n_children_spawned)}
    return {"bit_generator": name, "state": _state_json(bitgen.state), "seed_seq": seed}


def _state_json(x: Any) -> Any:
    """A bit generator's state (dicts of ints, strings and integer arrays) as JSON."""
    if isinstance(x, dict):
        return {"dict": {str(k): _state_json(v) for k, v in x.items()}}
    if isinstance(x, np.ndarray) and x.dtype.kind in "iu":
        return {"array": [int(v) for v in x.ravel()], "dtype": x.dtype.str, "shape": list(x.shape)}
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return int(x)
    if isinstance(x, str):
        return x
    raise TypeError(f"save: a bit generator's state holds a {type(x).__name__}, which cannot be stored")


def _state_from_json(x: Any, like: Any, where: str) -> Any:
    """The state ``x`` encodes, checked to be laid out as ``like`` (a fresh generator's state) is,
    with every integer within what its field holds."""
    bad = CheckpointError(f"load: the generator at {where} has a malformed state")
    if isinstance(like, dict):
        if not (isinstance(x, dict) and list(x) == ["dict"] and isinstance(x["dict"], dict)
                and set(x["dict"]) == set(like)):
            raise bad
        return {k: _state_from_json(x["dict"][k], v, where) for k, v in like.items()}
    if isinstance(like, np.ndarray):
        if not (isinstance(x, dict) and set(x) == {"array", "dtype", "shape"} and x["dtype"] == like.dtype.str
                and x["shape"] == list(like.shape) and isinstance(x["array"], list) and len(x["array"]) == like.size
                and all(type(v) is int and 0 <= v <= np.iinfo(like.dtype).max for v in x["array"])):
            raise bad
        return np.array(x["array"], dtype=like.dtype).reshape(like.shape)
    if isinstance(like, str):
        if x != like:
            raise bad
        return x
    return x


def _check_state_ints(state: dict[str, Any], where: str) -> None:
    stack = [state]
    while stack:
        for key, value in stack.pop().items():
            if isinstance(value, dict):
                stack.append(value)
            elif not isinstance(value, (str, np.ndarray)) and not (
                    type(value) is int and 0 <= value <= _STATE_INTS.get(key, -1)):
                raise CheckpointError(f"load: the generator at {where} has {key} = {value!r} in its state, "
                                      "which no generator can be in")


def _seed_sequence(seed: Any, where: str) -> np.random.SeedSequence:
    def whole(v: Any) -> bool:
        return type(v) is int and v >= 0

    if not (isinstance(seed, dict) and set(seed) == {"entropy", "spawn_key", "pool_size", "n_children_spawned"}
            and (isinstance(seed["entropy"], str) and _HEX_INT.fullmatch(seed["entropy"])
                 or isinstance(seed["entropy"], list) and all(whole(v) for v in seed["entropy"]))
            and isinstance(seed["spawn_key"], list) and all(whole(v) for v in seed["spawn_key"])
            and whole(seed["pool_size"]) and 4 <= seed["pool_size"] <= 1024 and whole(seed["n_children_spawned"])):
        raise CheckpointError(f"load: the generator at {where} has a malformed seed sequence")
    entropy = seed["entropy"]
    return np.random.SeedSequence(int(entropy, 16) if isinstance(entropy, str) else entropy,
                                  spawn_key=tuple(seed["spawn_key"]), pool_size=seed["pool_size"],
                                  n_children_spawned=seed["n_children_spawned"])


def _rebuild_generator(info: dict[str, Any], where: str) -> np.random.Generator:
    name = info.get("bit_generator")
    if name not in _BIT_GENERATORS:
        raise CheckpointError(f"load: the generator at {where} names the bit generator {name!r}, which is not "
                              f"one of NumPy's ({', '.join(_BIT_GENERATORS)})")
    cls = getattr(np.random, name)
    seed = info.get("seed_seq")
    bitgen = cls(0 if seed is None else _seed_sequence(seed, where))
    state = _state_from_json(info.get("state"), bitgen.state, where)
    _check_state_ints(state, where)
    bitgen.state = state
    return np.random.Generator(bitgen)


# ----- save / load ------------------------------------------------------------------------------------
def save(path: str | os.PathLike[str], tree: Any) -> None:
    """Write the pytree ``tree`` (a model, a dict of Tensors, an optimizer state ...) to ``path``, atomically.

    The file is written to a temporary name in the same directory, flushed to disk, then moved over
    ``path`` in one step (``os.replace``): a reader sees the old file or the new one, never half of one.
    A ``path`` that is a symbolic link is written through (its target gets the checkpoint); a
    read-only file raises ``PermissionError``. A ``np.random.Generator`` leaf is stored in its
    current state (its next draws, after ``load``, are the ones it would have made).

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "w.npz")
    >>> save(path, [np.arange(3, dtype=np.int16), 2.5])
    >>> load(path)
    [array([0, 1, 2], dtype=int16), 2.5]
    """
    target = Path(os.fspath(path))
    leaves, treedef = tree_flatten(tree)
    paths: list[str] = []
    structure = _encode(treedef, "", paths)
    arrays: dict[str, Any] = {}  # (np.savez's stubs would take an ndarray value for allow_pickle)
    infos: list[dict[str, Any]] = []
    first: dict[int, int] = {}  # a Tensor at several leaves (tied weights) is stored once: id -> its leaf
    for i, (leaf, where) in enumerate(zip(leaves, paths)):
        j = first.setdefault(id(leaf), i) if type(leaf) is Tensor else i
        if j < i:
            info = {k: v for k, v in infos[j].items() if k != "path"}
            info.update(path=where, same_as=j)
            infos.append(info)
            continue
        info, arr = _leaf_record(leaf, where)
        info["path"] = where
        infos.append(info)
        arrays[f"leaf_{i}"] = arr
    if _depth(structure) > _MAX_DEPTH:
        raise ValueError(f"save: the tree nests containers more than {_MAX_DEPTH} levels deep; flatten it first")
    version = _VERSION if len(arrays) == len(leaves) else _TIED_VERSION
    header = json.dumps({"format": _FORMAT, "version": version, "structure": structure, "leaves": infos})
    arrays[_HEADER] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
    target = _through_links(target)
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"save: the directory {str(directory)!r} does not exist; create it first")
    try:  # a file replaced keeps its permissions; a new one gets what the umask allows, as open() gives
        mode = target.stat().st_mode & 0o7777
    except FileNotFoundError:
        mode = 0o666 & ~_umask()
    else:
        _check_writable(target, mode)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _through_links(target: Path) -> Path:
    """The file a save to ``target`` writes: a symbolic link's target (as ``open`` writes through a
    link), so the link stays a link and the file it names gets the new contents."""
    if not target.is_symlink():
        return target
    real = Path(os.path.realpath(target))
    if real.is_symlink():  # realpath stops at a loop
        raise OSError(errno.ELOOP, f"save: {str(target)!r} is a loop of symbolic links", str(target))
    return real


def _check_writable(target: Path, mode: int) -> None:
    """Refuse to replace a read-only file, as ``open(path, "wb")`` would (``os.replace`` needs only the
    directory's permission). A file with no write permission bits at all is read-only for every
    user, root too (whom ``open`` lets through): it was made read-only to be kept."""
    effective = os.access in os.supports_effective_ids
    if not mode & 0o222 or not os.access(target, os.W_OK, effective_ids=effective):
        raise PermissionError(
            errno.EACCES, f"save: {str(target)!r} is read-only, so it is not replaced. Make it writable "
            "(chmod u+w) to overwrite it, or save to another path", str(target))


def _umask() -> int:
    """The process's umask, read without changing it where Linux says it (``os.umask`` sets it)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    old = os.umask(0o077)  # (elsewhere: set and restore it at once; the stricter value meanwhile)
    os.umask(old)
    return old


def _depth(node: Any) -> int:
    """How deeply JSON containers nest in ``node``, counted without recursion."""
    deepest = 0
    stack = [(node, 1)]
    while stack:
        x, d = stack.pop()
        if isinstance(x, (dict, list)):
            deepest = max(deepest, d)
            if deepest > _MAX_DEPTH:
                return deepest
            stack.extend((c, d + 1) for c in (x.values() if isinstance(x, dict) else x))
    return deepest


class _CorruptError(Exception):
    """Raised inside ``_read`` for a file that breaks the format; ``_read`` turns it into a CheckpointError."""


def _read_array(zf: zipfile.ZipFile, name: str) -> np.ndarray:
    """One ``.npy`` member, read without trusting what it declares.

    Before anything is allocated, the array's size (from its ``.npy`` header) must equal what the
    zip directory says the member holds, and that must be possible for the bytes the member
    occupies in the file (stored: as many; deflated: at most ``_DEFLATE_RATIO`` times as many).
    So a small file cannot ask for a large allocation, whatever it declares.
    """
    try:
        info = zf.getinfo(name)
    except KeyError:
        raise _CorruptError(f"the record {name} is missing") from None
    if info.compress_type == zipfile.ZIP_STORED:
        bound = info.compress_size
    elif info.compress_type == zipfile.ZIP_DEFLATED:
        bound = info.compress_size * _DEFLATE_RATIO + 1024
    else:
        raise _CorruptError(f"the record {name} uses compression method {info.compress_type}, which is not "
                       "supported (a checkpoint is stored uncompressed, or deflated as np.savez_compressed does)")
    if info.file_size > bound:
        raise _CorruptError(f"the record {name} declares {info.file_size} bytes but occupies {info.compress_size}")
    with zf.open(info) as fh:
        version = np.lib.format.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = np.lib.format.read_array_header_2_0(fh)
        else:
            raise _CorruptError(f"the record {name} is .npy format version {version}")
        if dtype.hasobject or dtype.kind not in _KINDS or dtype.fields is not None:
            raise _CorruptError(f"the record {name} has dtype {dtype}, which a checkpoint does not hold")
        count = 1
        for n in shape:
            count *= n
        nbytes = count * dtype.itemsize
        if nbytes != info.file_size - fh.tell():
            raise _CorruptError(f"the record {name} declares an array of {nbytes} bytes in "
                           f"{info.file_size - fh.tell()} bytes of data")
        buf = bytearray(nbytes)
        # (reading to the end also checks the CRC)
        if cast(io.BufferedIOBase, fh).readinto(buf) != nbytes or fh.read(1):
            raise _CorruptError(f"the record {name} is truncated")
    arr = np.frombuffer(buf, dtype=dtype)
    return arr.reshape(shape[::-1]).T if fortran else arr.reshape(shape)


def _check_header(header: Any) -> None:
    if not isinstance(header, dict) or header.get("format") != _FORMAT:
        raise CheckpointError("load: not a LeanPass checkpoint (its header is not LeanPass's)")
    if header.get("version") not in (_VERSION, _TIED_VERSION):
        raise CheckpointError(
            f"load: this is checkpoint format version {header.get('version')!r}; this LeanPass "
            f"reads versions {_VERSION} and {_TIED_VERSION}. Upgrade leanpass."
        )
    leaves, structure = header.get("leaves"), header.get("structure")
    if not isinstance(leaves, list) or not all(isinstance(i, dict) for i in leaves) or not isinstance(structure, dict):
        raise _CorruptError("its header is malformed")
    if _depth(structure) > _MAX_DEPTH:
        raise _CorruptError(f"its structure nests more than {_MAX_DEPTH} levels deep")
    numbers = []
    stack = [structure]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "leaf" in node:
                numbers.append(node["leaf"])
            stack.extend(v for k, v in node.items() if k != "meta")
        elif isinstance(node, list):
            stack.extend(node)
    if sorted(n for n in numbers if type(n) is int) != list(range(len(leaves))) or len(numbers) != len(leaves):
        raise _CorruptError(f"its structure does not number its {len(leaves)} leaves in order")


def _read(target: Path) -> tuple[dict[str, Any], list[np.ndarray]]:
    if not target.exists():
        raise FileNotFoundError(
            f"load: no checkpoint at {str(target)!r}. Check the path (it is relative to the current directory, "
            f"{os.getcwd()!r}), or create one with leanpass.save(path, params)."
        )
    with open(target, "rb") as head:
        magic = head.read(4)
    if magic != b"PK\x03\x04":
        raise CheckpointError(
            f"load: {str(target)!r} is not a LeanPass checkpoint (not an .npz archive"
            f"{', the file is empty' if not magic else ''}); write checkpoints with leanpass.save(path, params)."
        )
    # What reading a hostile file can raise, from zipfile, zlib, NumPy's header parser and json.
    bad = (_CorruptError, zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, KeyError, IndexError,
           UnicodeDecodeError, NotImplementedError, RuntimeError, RecursionError, OverflowError, MemoryError,
           struct.error, SyntaxError, TypeError)
    try:
        with zipfile.ZipFile(target) as zf:
            names = {n[:-4] for n in zf.namelist() if n.endswith(".npy")}
            if _HEADER not in names:
                raise CheckpointError(
                    f"load: {str(target)!r} is not a LeanPass checkpoint (no {_HEADER} record); "
                    "write checkpoints with leanpass.save(path, params)."
                )
            raw = _read_array(zf, _HEADER + ".npy")
            if raw.dtype != np.uint8 or raw.ndim != 1:
                raise _CorruptError("its header record is not text")
            header = json.loads(raw.tobytes().decode("utf-8"))
            _check_header(header)
            arrays: list[np.ndarray] = []
            for i, info in enumerate(header["leaves"]):
                if "same_as" in info:  # a tied Tensor: the array of an earlier leaf
                    arrays.append(arrays[_tied_to(header["leaves"], i)])
                    continue
                arr = _read_array(zf, f"leaf_{i}.npy")
                declared = (info.get("shape"), info.get("dtype"))
                if declared != (None, None) and declared != (list(arr.shape), arr.dtype.str):
                    raise _CorruptError(f"the record leaf_{i} is not the array its header declares")
                arrays.append(arr)
    except CheckpointError:
        raise
    except bad as e:
        why = str(e) if type(e) is _CorruptError else f"{type(e).__name__}: {e}"
        raise CheckpointError(
            f"load: {str(target)!r} is corrupt or truncated and cannot be read ({why}). "
            "Restore it from a backup or save it again."
        ) from None
    return header, arrays


def _tied_to(infos: list[dict[str, Any]], i: int) -> int:
    """The earlier leaf whose Tensor leaf ``i`` is (``same_as``), checked: a file is not trusted."""
    j, info = infos[i]["same_as"], infos[i]
    if type(j) is not int or not 0 <= j < i or "same_as" in infos[j] or infos[j].get("type") != "Tensor":
        raise _CorruptError(f"leaf {i} refers to leaf {j!r}, which is not an earlier stored Tensor")
    if info.get("type") != "Tensor" or any(info.get(k) != infos[j].get(k) for k in ("shape", "dtype", "requires_grad")):
        raise _CorruptError(f"leaf {i} is declared the same Tensor as leaf {j} but differs from it")
    return j


def load(path: str | os.PathLike[str], like: Any = None) -> Any:
    """Read a pytree written by ``save``; with ``like``, check it has ``like``'s structure, shapes and dtypes.

    ``like`` is a template, usually the freshly built model: the result is a model of the same
    class with the saved values, and any difference (another architecture, a missing key, a
    changed width or dtype) raises ``CheckpointError`` saying where. Without ``like``, dicts,
    lists, tuples and registered pytree classes (``leanpass.nn`` modules) are rebuilt from the file.

    Raises ``FileNotFoundError`` for a missing file and ``CheckpointError`` (a ``ValueError``) for
    a corrupt one or a mismatch.

    >>> import tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "p.npz")
    >>> save(path, {"w": np.zeros(2)})
    >>> load(path, like={"w": np.ones(3)})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    leanpass.checkpoint.CheckpointError: load: the checkpoint does not match the template: at ['w']: shape (2,) ...
    """
    target = Path(os.fspath(path))
    header, arrays = _read(target)
    try:
        return _rebuild(header, arrays, like)
    except CheckpointError:
        raise
    except Exception as e:  # (a registered class's unflatten, given settings from the file, may raise anything)
        raise CheckpointError(f"load: {str(target)!r} holds a structure that cannot be rebuilt "
                              f"({type(e).__name__}: {e})") from None


def _leaf_type(x: Any) -> str | None:
    """The leaf type ``save`` records for ``x`` (None for a leaf it cannot store)."""
    for cls, name in ((Tensor, "Tensor"), (np.ndarray, "ndarray"), (np.generic, "scalar"), (bool, "bool"),
                      (int, "int"), (float, "float"), (str, "str"), (np.random.Generator, "Generator")):
        if isinstance(x, cls):
            return name
    return None


def _check_rebuilt(treedef: TreeDef, again: TreeDef) -> None:
    """What the file's classes built must flatten to the structure the file describes (a class's
    unflatten can drop or invent children when its settings do not fit them)."""
    stack = [(treedef, again, "")]
    while stack:
        a, b, where = stack.pop()
        if a.kind is not b.kind or a.meta != b.meta or len(a.children) != len(b.children):
            name = getattr(a.kind, "__name__", "container")
            raise CheckpointError(f"load: the {name} at {where or 'the root'} in the file does not rebuild as "
                                  "written: its settings do not fit its children")
        n = len(a.children)
        names = ([f"[{k!r}]" for k in a.meta] if a.kind is dict else [f"[{i}]" for i in range(n)]
                 if a.kind in (list, tuple) else child_names(a.kind, n))
        stack.extend((x, y, where + name) for name, x, y in zip(names, a.children, b.children))


def _rebuild(header: dict[str, Any], arrays: list[np.ndarray], like: Any) -> Any:
    infos = header["leaves"]
    structure = header["structure"]
    leaves: list[Any] = []
    for i, (info, arr) in enumerate(zip(infos, arrays)):
        if "same_as" in info:  # a tied Tensor: the same object at each of its leaves
            leaves.append(leaves[info["same_as"]])
        else:
            leaves.append(_rebuild_leaf(info, arr, str(info.get("path", i))))
    if like is None:
        treedef = _decode(structure, "")
        tree = tree_unflatten(treedef, leaves)
        _check_rebuilt(treedef, tree_flatten(tree)[1])
        return tree
    like_leaves, like_def = tree_flatten(like)
    like_paths: list[str] = []
    expected = _encode(like_def, "", like_paths)
    diff = _first_difference(structure, expected)
    if diff is not None:
        raise CheckpointError(f"load: the checkpoint does not match the template: {diff}")
    for arr, info, ref, where in zip(arrays, infos, like_leaves, like_paths):
        kind, ref_kind = info.get("type"), _leaf_type(ref)
        if kind != ref_kind:
            raise CheckpointError(f"load: the checkpoint does not match the template: at {where}: a {kind} in the "
                                  f"file, a {ref_kind or type(ref).__name__} in the template")
        if kind == "Generator":
            name, ref_name = info.get("bit_generator"), type(ref.bit_generator).__name__
            if name != ref_name:
                raise CheckpointError(f"load: the checkpoint does not match the template: at {where}: a generator "
                                      f"using {name} in the file, {ref_name} in the template")
            continue
        ref_arr = np.asarray(ref._data if type(ref) is Tensor else ref)
        if arr.shape != ref_arr.shape:
            raise CheckpointError(
                f"load: the checkpoint does not match the template: at {where}: shape {arr.shape} in the file, "
                f"{ref_arr.shape} in the template"
            )
        if isinstance(ref, (Tensor, np.ndarray, np.generic)) and arr.dtype != ref_arr.dtype:
            raise CheckpointError(
                f"load: the checkpoint does not match the template: at {where}: dtype {arr.dtype} in the file, "
                f"{ref_arr.dtype} in the template (build the template with the dtype you saved)"
            )
    _tie_like(like_leaves, like_paths, leaves)
    return tree_unflatten(like_def, leaves)


def _tie_like(like_leaves: list[Any], paths: list[str], leaves: list[Any]) -> None:
    """Where the template holds one Tensor at several leaves (tied weights), so does the result: the
    file's values there must be the same (a file saved untied), else a CheckpointError."""
    if not _tree.repeats(like_leaves):
        return
    first: dict[int, int] = {}
    for i, ref in enumerate(like_leaves):
        j = first.setdefault(id(ref), i) if type(ref) is Tensor else i
        if j == i or leaves[i] is leaves[j]:
            continue
        a, b = leaves[j], leaves[i]
        if not (type(a) is Tensor and type(b) is Tensor and a.requires_grad == b.requires_grad
                and a.dtype == b.dtype and a.shape == b.shape and a._data.tobytes() == b._data.tobytes()):
            raise CheckpointError(
                f"load: the template holds one Tensor at {paths[j]} and {paths[i]} (tied weights), but the "
                "checkpoint holds different values there. Load it into an untied template, or tie the weights "
                "after loading."
            )
        leaves[i] = a
