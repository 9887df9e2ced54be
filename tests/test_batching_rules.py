"""The batching rules of NumPy's functions, one by one: ``vmap(f)(xs)`` equals stacking ``f(x)``,
with the batch axis on the first, the second or both arguments (the ops of ``functional.OPS``
are walked in test_vmap_ops.py; these are the NumPy calls below them and beside them)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import leanpass as lp

R = np.random.default_rng(0)
A, B, C = R.standard_normal((4, 3, 5)), R.standard_normal((4, 5)), R.standard_normal((4, 3, 3))
D = R.standard_normal((4, 3, 2, 5))
SPD = np.einsum("nij,nkj->nik", C, C) + 3 * np.eye(3)
IDX = np.array([[0, 2, 1, 2], [1, 0, 0, 2], [2, 2, 1, 0], [0, 1, 2, 1]])  # one row per example
sliding = np.lib.stride_tricks.sliding_window_view

# name: (function of one example, batched arguments, in_axes)
CASES: dict[str, tuple[Any, tuple[Any, ...], Any]] = {
    "ufunc broadcast ranks": (lambda a, b: np.arctan2(a, b), (A, B), 0),
    "ufunc shared operand": (lambda a: np.hypot(a, B[0]), (A,), 0),
    "ufunc reduce": (lambda a: np.maximum.reduce(a, axis=-1, keepdims=True), (A,), 0),
    "ufunc reduce all": (lambda a: np.add.reduce(a, axis=None), (A,), 0),
    "ufunc accumulate": (lambda a: np.multiply.accumulate(a, axis=1), (A,), 0),
    "ufunc outer": (lambda a, b: np.subtract.outer(a[0], b), (A, B), 0),
    "ufunc outer shared": (lambda a: np.multiply.outer(a, B[0]), (B,), 0),
    "ufunc at": (lambda a, i: _scatter(a, i), (B, IDX), 0),
    "in place": (lambda a: _in_place(a), (A,), 0),
    "setitem batched index": (lambda a, i: _assign(a, i), (B, IDX), 0),
    "sum axis tuple": (lambda a: np.sum(a, axis=(0, -1)), (A,), 0),
    "mean keepdims": (lambda a: np.mean(a, axis=1, keepdims=True), (A,), 0),
    "var ddof": (lambda a: np.var(a, axis=0, ddof=1), (A,), 0),
    "median": (lambda a: np.median(a, axis=1), (A,), 0),
    "argmax flat": (lambda a: np.argmax(a), (A,), 0),
    "cumsum flat": (lambda a: np.cumsum(a), (A,), 0),
    "sort": (lambda a: np.sort(a, axis=0), (A,), 0),
    "argsort": (lambda a: np.argsort(a), (A,), 0),
    "partition": (lambda a: np.partition(a, 2, axis=-1), (A,), 0),
    "diff": (lambda a: np.diff(a, axis=0, prepend=0.0), (A,), 0),
    "reshape": (lambda a: np.reshape(a, (5, -1)), (A,), 0),
    "transpose": (lambda a: np.transpose(a, (1, 0)), (A,), 0),
    "moveaxis": (lambda a: np.moveaxis(a, 0, -1), (A,), 0),
    "expand squeeze": (lambda a: np.squeeze(np.expand_dims(a, (0, 2)), 0), (A,), 0),
    "broadcast_to": (lambda b: np.broadcast_to(b, (2, 5)), (B,), 0),
    "concatenate shared": (lambda a: np.concatenate([a, np.zeros((1, 5))], axis=0), (A,), 0),
    "stack": (lambda a, b: np.stack([a[0], b], axis=-1), (A, B), 0),
    "hstack vstack": (lambda b: np.vstack([np.hstack([b, b]), np.ones(10)]), (B,), 0),
    "split": (lambda a: np.split(a, [1], axis=1)[1], (A,), 0),
    "tile": (lambda b: np.tile(b, (2, 1)), (B,), 0),
    "repeat": (lambda a: np.repeat(a, 2, axis=1), (A,), 0),
    "flip roll": (lambda a: np.roll(np.flip(a, 0), 2), (A,), 0),
    "pad": (lambda a: np.pad(a, ((1, 0), (2, 1)), mode="reflect"), (A,), 0),
    "diagonal trace": (lambda c: np.diagonal(c) + np.trace(c, offset=1), (C,), 0),
    "diag of vector": (lambda b: np.diag(b, 1), (B,), 0),
    "tril": (lambda c: np.tril(c, -1), (C,), 0),
    "take": (lambda b, i: np.take(b, i), (B, IDX), 0),
    "take_along_axis": (lambda a, i: np.take_along_axis(a, i[None, :1] % 3, axis=0), (A, IDX), 0),
    "getitem mixed": (lambda a, i: a[1:, i[:2]], (A, IDX), 0),
    "getitem scattered": (lambda d, i: d[i[0], :, i[1:3]], (D, IDX), 0),
    "getitem shared": (lambda i: lp.take(A[0], i, axis=1), (IDX,), 0),
    "where": (lambda a, b: np.where(a > 0, a, b), (A, B), 0),
    "clip": (lambda a: np.clip(a, -0.5, 0.5), (A,), 0),
    "einsum": (lambda a, b: np.einsum("ij,j->i", a, b), (A, B), 0),
    "einsum implicit": (lambda a: np.einsum("ij,jk", a, A[0].T), (A,), 0),
    "tensordot": (lambda a, b: np.tensordot(a, b, axes=([1], [0])), (A, B), 0),
    "tensordot shared": (lambda b: np.tensordot(A[0], b, axes=1), (B,), 0),
    "matmul vectors": (lambda b, c: c[:, :1].T @ c @ b[:3], (B, C), 0),
    "matmul shared batch": (lambda b: A @ b, (B,), 0),
    "dot": (lambda a, b: np.dot(a, b), (A, B), 0),
    "outer kron": (lambda b: np.outer(b, b[:2]) + np.kron(b[:2], b[:2]).sum(), (B,), 0),
    "sliding windows": (lambda b: sliding(b, 3), (B,), 0),
    "sliding windows 2d": (lambda a: sliding(a, (2, 3), axis=(0, 1)).sum(axis=(-1, -2)), (A,), 0),
    "inv det": (lambda c: np.linalg.inv(c) * np.linalg.det(c), (SPD,), 0),
    "inv of non-symmetric matrices": (lambda c: np.linalg.inv(c), (C + 3 * np.eye(3),), 0),
    "solve vector": (lambda c, b: np.linalg.solve(c, b[:3]), (SPD, B), 0),
    "solve shared matrix": (lambda b: np.linalg.solve(SPD[0], b[:3]), (B,), 0),
    # per-example batch axes of a and b of different ranks: lined up from the right behind vmap's axis
    "solve stacks of ranks 2 and 0": (lambda c, a: np.linalg.solve(c, a[:, :2]),
                                      (np.broadcast_to(SPD[:2], (4, 2, 2, 3, 3)) * 1, A), 0),
    "solve shared stack": (lambda a: np.linalg.solve(SPD[:2, None], a[:, :2]), (A,), 0),
    "solve b one axis fewer": (lambda c, b: np.linalg.solve(c, b[:, :3]), (np.stack([SPD[:3]] * 4), C), 0),
    "cholesky eigh": (lambda c: np.linalg.cholesky(c) + np.linalg.eigh(c)[1] ** 2, (SPD,), 0),
    "svd norm": (lambda c: np.linalg.svd(c)[1] + np.linalg.norm(c) + np.linalg.norm(c[0], 1), (C,), 0),
    "slogdet": (lambda c: np.linalg.slogdet(c)[1], (SPD,), 0),
    "second axis": (lambda a, b: a @ b, (np.swapaxes(A, 0, 1), B), (1, 0)),
    "zeros_like full_like": (lambda a: np.zeros_like(a) + np.full_like(a, 2.0, shape=(3,)) [:, None], (A,), 0),
    "allclose": (lambda a: np.allclose(a, a[:1]), (A,), 0),
    "nan_to_num round": (lambda a: np.round(np.nan_to_num(a / (a > 0)), 2), (A,), 0),
}


def _scatter(a: Any, i: Any) -> Any:
    out = np.zeros_like(a)
    np.add.at(out, i, 1.0)
    return out


def _in_place(a: Any) -> Any:
    out = np.ones_like(a)
    out *= a
    out += 1.0
    return out


def _assign(a: Any, i: Any) -> Any:
    out = np.zeros_like(a)
    out[i[:2]] = a[:2]
    return out


@pytest.mark.parametrize("name", sorted(CASES))
def test_rule_equals_stacking(name: str) -> None:
    f, args, in_axes = CASES[name]
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    n = args[0].shape[axes[0]]
    with np.errstate(all="ignore"):
        want = np.stack([f(*(np.take(a, k, axis=ax) for a, ax in zip(args, axes))) for k in range(n)])
        got = lp.vmap(f, in_axes=in_axes)(*args)
    got = got._data if isinstance(got, lp.Tensor) else got
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_a_rule_named_after_a_numpy_function_batches_only_that_function() -> None:
    # On a NumPy without np.linalg.matrix_transpose (1.x), matrix_transpose's rule was registered
    # under np.linalg.inv instead, and vmap(np.linalg.inv) returned each matrix transposed.
    from leanpass.transforms.vmap.batching import RULES

    for func, rule in RULES.items():
        if rule.__name__.startswith("_"):  # (a rule written for one function: _where, _solve, ...)
            assert func.__name__ in rule.__name__, f"{rule.__name__} is the batching rule of {func.__name__}"


def test_nested_levels_meet_in_one_call() -> None:
    xs, ys = R.standard_normal((3, 4)), R.standard_normal((2, 4))
    got = lp.vmap(lambda x: lp.vmap(lambda y: np.einsum("i,i", x, y) + np.maximum(x, y).sum())(ys))(xs)
    want = np.array([[x @ y + np.maximum(x, y).sum() for y in ys] for x in xs])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    got = lp.vmap(lambda x: lp.vmap(lambda i: x[i])(np.array([0, 3])))(xs)  # an inner index, an outer array
    np.testing.assert_allclose(got, xs[:, [0, 3]])


def test_data_dependent_sizes_are_refused_by_name() -> None:
    for f, what in ((lambda a: a[a > 0], "boolean mask"), (lambda a: np.unique(a), "np.unique"),
                    (lambda a: np.where(a > 0), "np.where\\(condition\\)")):
        with pytest.raises(TypeError, match=what):
            lp.vmap(f)(A)


def test_what_numpy_cannot_hand_over_raises() -> None:
    # A plain array indexed by, or written with, per-example values: NumPy has no hook to ask the
    # stand-in, so it asks for a plain array, which the stand-in refuses (lp.take and the LeanPass
    # ops do this through their own code).
    with pytest.raises(TypeError, match="cannot become a plain NumPy array"):
        lp.vmap(lambda i: A[0][:, i])(IDX)
    with pytest.raises(TypeError, match="write batched values into a plain array"):
        lp.vmap(lambda i: _scatter(B[0], i))(IDX)
    with pytest.raises(TypeError, match="write batched values into a plain array"):
        lp.vmap(lambda b: np.add(b, 1.0, out=np.zeros(5)))(B)
