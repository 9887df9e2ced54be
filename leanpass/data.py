"""Feeding data to a training loop: a train / test split and a mini-batch iterator.

Randomness always comes from a generator you pass (``rng=np.random.default_rng(seed)`` or an
int seed), so a run can be repeated exactly.

>>> import numpy as np
>>> from leanpass.data import batches, train_test_split
>>> x, y = np.arange(20.0).reshape(10, 2), np.arange(10)
>>> x_train, x_test, y_train, y_test = train_test_split(x, y, test_size=0.2, rng=0)
>>> x_train.shape, x_test.shape
((8, 2), (2, 2))
>>> [xb.shape[0] for xb, yb in batches(x_train, y_train, batch_size=3, rng=0)]
[3, 3, 2]
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["batches", "train_test_split", "num_batches"]


def _generator(rng: Any, where: str) -> np.random.Generator:
    """``rng`` as a Generator: one given is used as is, an int seeds a new one (also for ``nn``)."""
    if isinstance(rng, np.random.Generator):
        return rng
    if isinstance(rng, (int, np.integer)) and not isinstance(rng, bool):
        if rng < 0:
            raise ValueError(f"{where}: an int seed must be >= 0, got {int(rng)}; pass e.g. rng=0")
        return np.random.default_rng(int(rng))
    raise TypeError(
        f"{where}: rng must be a np.random.Generator or an int seed, got {type(rng).__name__}. "
        "Pass rng=np.random.default_rng(0): the same seed gives the same result."
    )


def _arrays(arrays: tuple[Any, ...], where: str) -> tuple[list[np.ndarray], int]:
    if not arrays:
        raise TypeError(f"{where}: pass at least one array, e.g. {where}(x, y, ...)")
    out = [a._data if hasattr(a, "_data") else np.asarray(a) for a in arrays]
    for i, a in enumerate(out):
        if a.ndim == 0:
            raise ValueError(f"{where}: array {i} is a scalar; every array needs a first (example) axis")
    n = len(out[0])
    lengths = [len(a) for a in out]
    if any(m != n for m in lengths):
        raise ValueError(
            f"{where}: the arrays must have the same number of examples (first axis), got lengths {lengths}"
        )
    return out, n


def num_batches(n: int, batch_size: int, drop_last: bool = False, shard: tuple[int, int] | None = None) -> int:
    """How many batches ``batches`` yields for ``n`` examples (with the same ``shard``).

    >>> num_batches(10, 3), num_batches(10, 3, drop_last=True)
    (4, 3)
    >>> num_batches(10, 4, shard=(0, 4))  # the last 2 examples are fewer than the 4 ranks
    2
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"num_batches: batch_size must be a positive int, got {batch_size!r}")
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 0:
        raise ValueError(f"num_batches: n (the number of examples) must be an int >= 0, got {n!r}")
    if shard is None:
        return n // batch_size if drop_last else -(-n // batch_size)
    world = _check_shard(shard, batch_size, "num_batches")[1]
    tail = n % batch_size
    return n // batch_size + (0 if drop_last or tail < world else 1)


def _check_shard(shard: Any, batch_size: int, where: str) -> tuple[int, int]:
    ok = isinstance(shard, tuple) and len(shard) == 2 and all(
        isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in shard)
    if not ok or not 0 <= shard[0] < shard[1]:
        raise ValueError(
            f"{where}: shard must be a pair (rank, world_size) of ints with 0 <= rank < world_size, got {shard!r}; "
            "e.g. shard=(distributed.rank(), distributed.world_size())"
        )
    rank, world = int(shard[0]), int(shard[1])
    if batch_size % world:
        raise ValueError(
            f"{where}: with shard=(rank, world_size), batch_size is the global batch and must be divisible by "
            f"world_size {world}, got {batch_size}; use e.g. batch_size={max(1, batch_size // world) * world}"
        )
    return rank, world


def batches(*arrays: Any, batch_size: int, rng: np.random.Generator | int | None = None,
            drop_last: bool = False, shard: tuple[int, int] | None = None) -> Iterator[tuple[np.ndarray, ...]]:
    """Yield mini-batches ``(x_batch, y_batch, ...)``: the same rows of every array.

    With ``rng`` the order is a fresh random permutation each time you iterate (a new epoch);
    with ``rng=None`` the rows come in order. ``drop_last`` skips a final smaller batch. The
    batches are new arrays (fancy-indexed copies), so nothing you hold is shared or changed.

    ``shard=(rank, world_size)`` is for data-parallel training (``leanpass.distributed``):
    ``batch_size`` is then the global batch, and rank ``r`` gets the ``r``-th of ``world_size``
    equal, disjoint parts of each one. Every rank must pass the same ``rng`` seed, so that all
    see the same order. A last batch whose size does not divide by ``world_size`` loses its
    last few examples (fewer than ``world_size``), and is skipped if none are left, in the same
    way on every rank: each rank yields the same number of batches, and each part of a batch
    has the same size (so the mean of the ranks' mean gradients is the whole batch's).

    >>> x = np.arange(5)
    >>> [b.tolist() for (b,) in batches(x, batch_size=2)]
    [[0, 1], [2, 3], [4]]
    >>> [b.tolist() for (b,) in batches(x, batch_size=2, rng=np.random.default_rng(0), drop_last=True)]
    [[2, 4], [3, 0]]
    >>> [b.tolist() for (b,) in batches(np.arange(7), batch_size=4, shard=(1, 2))]  # rank 1 of 2
    [[2, 3], [5]]
    """
    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size < 1:
        raise ValueError(f"batches: batch_size must be a positive int, got {batch_size!r}")
    rank, world = (0, 1) if shard is None else _check_shard(shard, batch_size, "batches")
    data, n = _arrays(arrays, "batches")
    gen = None if rng is None else _generator(rng, "batches")
    order = np.arange(n) if gen is None else gen.permutation(n)
    stop = n - n % batch_size if drop_last else n
    for start in range(0, stop, batch_size):
        idx = order[start:start + batch_size]
        if world > 1:
            part = len(idx) // world  # == batch_size // world but in a last, smaller batch
            if part == 0:
                break
            idx = idx[rank * part:(rank + 1) * part]
        yield tuple(a[idx] for a in data)


def train_test_split(*arrays: Any, test_size: float | int = 0.2, rng: np.random.Generator | int,
                     stratify: Any = None) -> list[np.ndarray]:
    """Shuffle the examples with ``rng`` and split each array into a train part and a test part.

    Returns ``[a_train, a_test, b_train, b_test, ...]`` (the order scikit-learn uses).
    ``test_size`` is a fraction in (0, 1) or a number of examples. With ``stratify=labels``
    each class is split in the same proportion.

    >>> x = np.arange(10)
    >>> train, test = train_test_split(x, test_size=3, rng=1)
    >>> len(train), len(test), sorted(np.concatenate([train, test]).tolist()) == list(range(10))
    (7, 3, True)
    """
    data, n = _arrays(arrays, "train_test_split")
    if isinstance(test_size, float):
        if not 0.0 < test_size < 1.0:
            raise ValueError(f"train_test_split: a fractional test_size must be in (0, 1), got {test_size}")
        n_test = int(round(n * test_size))
    elif isinstance(test_size, (int, np.integer)) and not isinstance(test_size, bool):
        n_test = int(test_size)
    else:
        raise TypeError(f"train_test_split: test_size must be a float fraction or an int count, got {test_size!r}")
    if not 0 < n_test < n:
        raise ValueError(
            f"train_test_split: test_size={test_size} leaves {n_test} of {n} examples for testing; "
            "both parts need at least one."
        )
    gen = _generator(rng, "train_test_split")
    if stratify is None:
        order = gen.permutation(n)
        test_idx, train_idx = order[:n_test], order[n_test:]
    else:
        labels = stratify._data if hasattr(stratify, "_data") else np.asarray(stratify)
        if labels.shape[:1] != (n,):
            raise ValueError(f"train_test_split: stratify must have one label per example ({n}), got {labels.shape}")
        if labels.ndim != 1:
            raise ValueError(f"train_test_split: stratify must be one label per example (1-d), got {labels.shape}")
        if labels.dtype.kind in "fc" and np.isnan(labels).any():
            raise ValueError(
                f"train_test_split: stratify holds NaN labels (at rows {np.flatnonzero(np.isnan(labels))[:5].tolist()}"
                "...); every example needs a class. Drop those rows or give them a label."
            )
        classes, counts = np.unique(labels, return_counts=True)
        if counts.min() < 2:
            raise ValueError(
                f"train_test_split: the class {classes[counts.argmin()].item()!r} of stratify has only 1 example; a "
                "stratified split needs at least 2 of each class (one for each part). Merge or drop rare "
                "classes, or split without stratify."
            )
        test_parts, train_parts = [], []
        for cls in classes:
            members = gen.permutation(np.flatnonzero(labels == cls))
            k = int(round(len(members) * n_test / n))
            test_parts.append(members[:k])
            train_parts.append(members[k:])
        test_idx = gen.permutation(np.concatenate(test_parts))
        train_idx = gen.permutation(np.concatenate(train_parts))
        if not len(test_idx) or not len(train_idx):
            raise ValueError(
                f"train_test_split: with test_size={test_size} and {len(classes)} classes, no class gets an "
                f"example in the {'test' if not len(test_idx) else 'train'} part; use a "
                f"{'larger' if not len(test_idx) else 'smaller'} test_size."
            )
    out: list[np.ndarray] = []
    for a in data:
        out += [a[train_idx], a[test_idx]]
    return out


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
