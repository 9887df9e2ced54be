"""Reused scratch arrays for the convolution and normalisation rules' temporaries.

A fresh NumPy array of a layer's size starts with a page fault every 4 KiB: glibc maps it anew
(or gives back the top of its heap on ``free``), and on a busy machine those faults cost more
than the arithmetic. Temporaries that never leave a rule go into ``buffer``s instead, one per
tag and shape and thread, reused by the next call. Only plain arrays qualify (``plain``): the
stand-ins of ``jit`` and ``vmap`` and the Tensors of a replayed rule take the ordinary NumPy path.

>>> a = buffer("doc", (2, 3), np.float32)
>>> a is buffer("doc", (2, 3), np.float32), float_arrays(a), float_arrays(a, np.zeros(2))
(True, True, False)
"""

from __future__ import annotations

import threading
from typing import Any

import numpy as np

SCRATCH_BYTES = 64 * 1024 * 1024  # the most the reused scratch buffers of one thread may hold
_scratch = threading.local()


def buffer(tag: str, shape: tuple[int, ...], dtype: Any, border: Any = None) -> Any:
    """A scratch array of ``shape`` that the next call with the same ``tag`` gets back, its contents left over.

    ``border`` asks for zeros the first time: the caller then only ever writes the same interior,
    and the border stays zero, so ``border`` must be a key that fixes that interior (the padding and
    the interior's size). At most ``SCRATCH_BYTES`` per thread are kept.
    """
    arrays = getattr(_scratch, "arrays", None)
    if arrays is None:
        arrays = _scratch.arrays = {}
    key = (tag, shape, np.dtype(dtype), border)
    a = arrays.get(key)
    if a is None:
        a = np.zeros(shape, dtype) if border is not None else np.empty(shape, dtype)
        if sum(b.nbytes for b in arrays.values()) + a.nbytes > SCRATCH_BYTES:
            arrays.clear()
        arrays[key] = a
    return a


def work(tag: str, shape: tuple[int, ...], dtype: Any, like: Any, border: Any = None) -> Any:
    """``buffer(tag, ...)`` for a plain ``like``; for a stand-in of ``jit``, a fresh traced array of zeros (made
    with ``np.zeros_like(like)``), so that the writes into it are recorded and the replay repeats them."""
    if type(like) is np.ndarray:
        return buffer(tag, shape, dtype, border)
    return np.zeros_like(like, shape=shape, dtype=dtype)


def float_arrays_or_traced(*arrays: Any) -> bool:
    """All float arrays of one dtype, each plain or a stand-in of ``jit`` (not of ``vmap``): where the buffered
    algorithms also run under ``jit``, writing into ``work`` arrays, so that jit replays eager's bits."""
    dt = getattr(arrays[0], "dtype", None)
    if dt is None or dt.kind != "f":
        return False
    for a in arrays:
        t = type(a)
        if not (t is np.ndarray or (getattr(t, "_lp_traced", False) and not getattr(t, "_lp_batched", False))):
            return False
        if a.dtype != dt:
            return False
    return True


def like(*arrays: Any) -> Any:
    """The first of ``arrays`` that is a stand-in (work arrays are made like it), else the first."""
    for a in arrays:
        if type(a) is not np.ndarray:
            return a
    return arrays[0]


def float_arrays(*arrays: Any) -> bool:
    """All plain float arrays of one dtype: what the rules' buffered fast paths may write for."""
    dt = arrays[0].dtype if type(arrays[0]) is np.ndarray else None
    return dt is not None and dt.kind == "f" and all(type(a) is np.ndarray and a.dtype == dt for a in arrays)
