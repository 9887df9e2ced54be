"""Saving and loading pytrees of parameters: ``leanpass.save(path, tree)`` and ``leanpass.load(path)``.

A checkpoint is a NumPy ``.npz`` file: one array per leaf, plus the tree's structure as JSON
text. Loading uses ``np.load(allow_pickle=False)`` and rebuilds containers only from a fixed
set (dict, list, tuple, None and the pytree classes registered with LeanPass, such as the
``leanpass.nn`` modules), so opening a file never runs code from it. Values and dtypes round-trip
exactly. Writing is atomic: the file is written beside its destination and moved into place
with ``os.replace``, so a crash never leaves a truncated checkpoint where a good one was.

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

import json
import os
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Any

import numpy as np

from . import tree as _tree
from .tensor import Tensor, _const
from .tree import TreeDef, tree_flatten, tree_unflatten

__all__ = ["save", "load", "CheckpointError"]

_FORMAT = "leanpass-checkpoint"
_VERSION = 1
_HEADER = "__leanpass__"
_NONE = type(None)


class CheckpointError(ValueError):
    """A checkpoint file that cannot be read, or whose contents do not match what was expected.

    It is a ``ValueError``, so ``except ValueError`` catches it too.

    >>> issubclass(CheckpointError, ValueError)
    True
    """


# ----- structure <-> JSON -----------------------------------------------------------------------
def _class_name(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _child_names(cls: type, n: int) -> list[str]:
    """Names for the children of a registered class in error messages (``.weight``, ``[0]``)."""
    from . import nn

    if isinstance(cls, type) and issubclass(cls, nn.Module) and cls is not nn.Sequential:
        names = nn._dynamic_fields(cls)
        if len(names) == n:
            return [f".{name}" for name in names]
    return [f"[{i}]" for i in range(n)]


def _encode_meta(meta: Any, where: str) -> Any:
    from .nn import ACTIVATIONS

    if meta is None or isinstance(meta, (bool, int, float, str)):
        return meta
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
            return tuple(_decode_meta(m, where) for m in meta["tuple"])
        if "list" in meta:
            return [_decode_meta(m, where) for m in meta["list"]]
        if "fn" in meta and meta["fn"] in ACTIVATIONS:
            return ACTIVATIONS[meta["fn"]]
        raise CheckpointError(
            f"load: the structure at {where or 'the root'} refers to the function {meta!r}, which cannot be "
            "rebuilt from a file. Pass the object you saved as a template: load(path, like=model)."
        )
    return meta


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
    names = _child_names(kind, len(td.children))
    node: dict[str, Any] = {"class": _class_name(kind),
                            "children": [_encode(c, path + n, paths) for c, n in zip(td.children, names)]}
    if kind in _tree._REGISTRY:
        node["meta"] = _encode_meta(td.meta, path)
    elif not (issubclass(kind, tuple) and hasattr(kind, "_fields")):
        raise TypeError(f"save: {kind.__name__} at {path or 'the root'} is not a pytree container")
    return node


def _registered(name: str, where: str) -> Any:
    for cls in _tree._REGISTRY:
        if isinstance(cls, type) and _class_name(cls) == name:
            return cls
    raise CheckpointError(
        f"load: the checkpoint holds a {name} at {where or 'the root'}, which is not a registered pytree class "
        "here. Import the module that defines (and registers) it, or pass a template: load(path, like=obj)."
    )


def _decode(node: Any, path: str) -> TreeDef:
    if not isinstance(node, dict):
        raise CheckpointError(f"load: malformed structure at {path or 'the root'}")
    if "leaf" in node:
        return TreeDef(None, None, ())
    if "none" in node:
        return TreeDef(_NONE, None, ())
    if "list" in node or "tuple" in node:
        kind = list if "list" in node else tuple
        return TreeDef(kind, None, tuple(_decode(c, f"{path}[{i}]") for i, c in enumerate(node[kind.__name__])))
    if "dict" in node:
        keys = tuple(k for k, _ in node["dict"])
        return TreeDef(dict, keys, tuple(_decode(c, f"{path}[{k!r}]") for k, c in node["dict"]))
    if "class" in node:
        cls = _registered(node["class"], path)
        children = tuple(_decode(c, f"{path}[{i}]") for i, c in enumerate(node["children"]))
        return TreeDef(cls, _decode_meta(node.get("meta"), path), children)
    raise CheckpointError(f"load: malformed structure at {path or 'the root'}")


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
                    names = _child_names(cls, len(a)) if cls is not None else names
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
    elif isinstance(x, int):
        arr, info = np.asarray(x, dtype=np.int64), {"type": "int"}
    elif isinstance(x, float):
        arr, info = np.asarray(x, dtype=np.float64), {"type": "float"}
    else:
        raise TypeError(
            f"save: the leaf at {path} is a {type(x).__name__}; a checkpoint holds Tensors, NumPy arrays and "
            "Python numbers. Convert it, or keep it out of the saved tree."
        )
    if arr.dtype.kind not in "biufcUS":
        raise TypeError(f"save: the array at {path} has dtype {arr.dtype}, which cannot be stored without pickle")
    return info, arr


def _rebuild_leaf(info: dict[str, Any], arr: np.ndarray) -> Any:
    kind = info.get("type")
    if kind == "Tensor":
        if info.get("requires_grad"):
            return Tensor(arr, requires_grad=True)
        arr.flags.writeable = False
        return _const(arr)
    if kind == "ndarray":
        return arr
    if kind == "scalar":
        return arr[()]
    if kind == "bool":
        return bool(arr)
    if kind == "int":
        return int(arr)
    if kind == "float":
        return float(arr)
    raise CheckpointError(f"load: unknown leaf type {kind!r} in the checkpoint")


# ----- save / load ------------------------------------------------------------------------------------
def save(path: str | os.PathLike[str], tree: Any) -> None:
    """Write the pytree ``tree`` (a model, a dict of Tensors, an optimizer state ...) to ``path``, atomically.

    The file is written to a temporary name in the same directory, flushed to disk, then moved over
    ``path`` in one step (``os.replace``): a reader sees the old file or the new one, never half of one.

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
    arrays: dict[str, np.ndarray] = {}
    infos = []
    for i, (leaf, where) in enumerate(zip(leaves, paths)):
        info, arr = _leaf_record(leaf, where)
        info["path"] = where
        infos.append(info)
        arrays[f"leaf_{i}"] = arr
    header = json.dumps({"format": _FORMAT, "version": _VERSION, "structure": structure, "leaves": infos})
    arrays[_HEADER] = np.frombuffer(header.encode("utf-8"), dtype=np.uint8)
    directory = target.parent
    if not directory.is_dir():
        raise FileNotFoundError(f"save: the directory {str(directory)!r} does not exist; create it first")
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez(fh, **arrays)  # type: ignore[arg-type]
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, target)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


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
    bad = (zipfile.BadZipFile, zlib.error, ValueError, OSError, EOFError, KeyError, UnicodeDecodeError)
    try:
        with open(target, "rb") as fh, np.load(fh, allow_pickle=False) as f:
            if not hasattr(f, "files") or _HEADER not in f.files:
                raise CheckpointError(
                    f"load: {str(target)!r} is not a LeanPass checkpoint (no {_HEADER} record); "
                    "write checkpoints with leanpass.save(path, params)."
                )
            header = json.loads(bytes(f[_HEADER]).decode("utf-8"))
            if header.get("format") != _FORMAT:
                raise CheckpointError(f"load: {str(target)!r} is not a LeanPass checkpoint")
            if header.get("version") != _VERSION:
                raise CheckpointError(
                    f"load: {str(target)!r} is checkpoint format version {header.get('version')}; this LeanPass "
                    f"reads version {_VERSION}. Upgrade leanpass."
                )
            arrays = [f[f"leaf_{i}"] for i in range(len(header["leaves"]))]
    except CheckpointError:
        raise
    except bad as e:
        raise CheckpointError(
            f"load: {str(target)!r} is corrupt or truncated and cannot be read ({type(e).__name__}: {e}). "
            "Restore it from a backup or save it again."
        ) from None
    return header, arrays


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
    infos = header["leaves"]
    structure = header["structure"]
    leaves = [_rebuild_leaf(info, arr) for info, arr in zip(infos, arrays)]
    if like is None:
        return tree_unflatten(_decode(structure, ""), leaves)
    like_leaves, like_def = tree_flatten(like)
    like_paths: list[str] = []
    expected = _encode(like_def, "", like_paths)
    diff = _first_difference(structure, expected)
    if diff is not None:
        raise CheckpointError(f"load: the checkpoint does not match the template: {diff}")
    for arr, ref, where in zip(arrays, like_leaves, like_paths):
        ref_arr = np.asarray(ref._data if type(ref) is Tensor else ref)
        if arr.shape != ref_arr.shape:
            raise CheckpointError(
                f"load: the checkpoint does not match the template: at {where}: shape {arr.shape} in the file, "
                f"{ref_arr.shape} in the template"
            )
        if isinstance(ref, (Tensor, np.ndarray)) and arr.dtype != ref_arr.dtype:
            raise CheckpointError(
                f"load: the checkpoint does not match the template: at {where}: dtype {arr.dtype} in the file, "
                f"{ref_arr.dtype} in the template (build the template with the dtype you saved)"
            )
    return tree_unflatten(like_def, leaves)
