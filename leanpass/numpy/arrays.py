"""NumPy's functions that arrange arrays, on Tensors: stacking, tiling, flipping, moving axes,
splitting, triangles and diagonals, gathering and scattering along an axis, with NumPy's signatures.

Each is written with the shape ops (``reshape``, ``transpose``, ``concatenate``, ``broadcast_to``,
indexing, ``where``, the ``unindex`` scatter), so the gradient moves back to where each value came
from without a rule of its own.

>>> x = Tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
>>> lp.flip(x, 0).sum().backward()
>>> lp.vstack([x, x]).shape, lp.tile(x, (1, 3)).shape, lp.diagonal(x).tolist()
((4, 2), (2, 6), [1.0, 4.0])
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, _diagonal, _diagonal_index, _repeat, _value, apply
from ..functional import _lift
from .basics import _axis, _tensor, broadcast_to, concatenate, reshape, split, transpose, where


def _shape(x: Any) -> tuple[int, ...]:
    return np.shape(_value(x))


def _axes(axis: Any, ndim: int, name: str) -> tuple[int, ...]:
    """``axis`` (an int or a sequence of them) as non-negative axes, checked."""
    axes = tuple(_axis(int(a), ndim, name) for a in (axis if isinstance(axis, (tuple, list)) else (axis,)))
    if len(set(axes)) != len(axes):
        raise ValueError(f"{name}: repeated axis in {axis!r}")
    return axes


def _one_or_all(results: list[Tensor]) -> Any:
    return results[0] if len(results) == 1 else tuple(results)


# ----- at least N axes, stacking -----------------------------------------------------------------
def atleast_1d(*arys: ArrayLike) -> Any:
    """Each input with at least one axis (a tuple of them for several inputs), as ``np.atleast_1d``.

    >>> lp.atleast_1d(Tensor(2.0)).shape
    (1,)
    """
    return _one_or_all([reshape(x, (1,)) if np.ndim(_value(x)) == 0 else _tensor(x) for x in arys])


def atleast_2d(*arys: ArrayLike) -> Any:
    """Each input with at least two axes: a vector becomes a row, as ``np.atleast_2d``.

    >>> lp.atleast_2d(Tensor([1.0, 2.0])).shape
    (1, 2)
    """
    return _one_or_all([reshape(x, (1,) * (2 - np.ndim(_value(x))) + _shape(x)) if np.ndim(_value(x)) < 2
                        else _tensor(x) for x in arys])


def atleast_3d(*arys: ArrayLike) -> Any:
    """Each input with at least three axes, as ``np.atleast_3d``: ``(n,)`` becomes ``(1, n, 1)`` and
    ``(m, n)`` becomes ``(m, n, 1)``.

    >>> lp.atleast_3d(Tensor([1.0, 2.0])).shape
    (1, 2, 1)
    """
    out = []
    for x in arys:
        shape, nd = _shape(x), np.ndim(_value(x))
        new = (1, 1, 1) if nd == 0 else (1, shape[0], 1) if nd == 1 else shape + (1,) if nd == 2 else None
        out.append(_tensor(x) if new is None else reshape(x, new))
    return _one_or_all(out)


def _listed(tup: Any, name: str) -> list[Any]:
    if type(tup) is Tensor or isinstance(tup, np.ndarray):  # one array: its rows, as NumPy takes it
        return list(tup)
    if not isinstance(tup, (list, tuple)):
        raise TypeError(f"{name}: pass a sequence of arrays (a list or tuple), not {type(tup).__name__}")
    return list(tup)


def vstack(tup: Sequence[ArrayLike] | Tensor | np.ndarray) -> Tensor:
    """Stack along the first axis (vectors become rows), as ``np.vstack``. One array instead of a
    sequence stands for its rows, as in NumPy (so for every join function here).

    >>> lp.vstack([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])]).shape
    (2, 2)
    >>> lp.vstack(Tensor([1.0, 2.0])).shape  # the rows 1.0 and 2.0
    (2, 1)
    """
    return concatenate([atleast_2d(x) for x in _listed(tup, "vstack")], axis=0)


row_stack = vstack


def hstack(tup: Sequence[ArrayLike] | Tensor | np.ndarray) -> Tensor:
    """Stack along the second axis (the first for vectors), as ``np.hstack``.

    >>> lp.hstack([Tensor([1.0]), Tensor([2.0, 3.0])])
    Tensor([1., 2., 3.])
    """
    xs = [atleast_1d(x) for x in _listed(tup, "hstack")]
    return concatenate(xs, axis=0 if xs and np.ndim(_value(xs[0])) == 1 else 1)


def dstack(tup: Sequence[ArrayLike] | Tensor | np.ndarray) -> Tensor:
    """Stack along the third axis, as ``np.dstack``.

    >>> lp.dstack([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])]).shape
    (1, 2, 2)
    """
    return concatenate([atleast_3d(x) for x in _listed(tup, "dstack")], axis=2)


def column_stack(tup: Sequence[ArrayLike] | Tensor | np.ndarray) -> Tensor:
    """Vectors as columns side by side (2-D inputs as they are), as ``np.column_stack``.

    >>> lp.column_stack([Tensor([1.0, 2.0]), Tensor([3.0, 4.0])]).tolist()
    [[1.0, 3.0], [2.0, 4.0]]
    """
    xs = [reshape(x, (-1, 1)) if np.ndim(_value(x)) < 2 else _tensor(x) for x in _listed(tup, "column_stack")]
    return concatenate(xs, axis=1)


def block(arrays: Any) -> Tensor:
    """An array assembled from nested lists of blocks, as ``np.block``: the innermost lists join along
    the last axis, the next ones out along the one before, and so on.

    >>> lp.block([[Tensor(np.eye(2)), Tensor(np.zeros((2, 1)))]]).shape
    (2, 3)
    """
    def depth(a: Any) -> int:
        if isinstance(a, tuple):
            raise TypeError("block: nest blocks in lists, not tuples (as np.block)")
        if isinstance(a, list):
            if not a:
                raise ValueError("block: lists cannot be empty")
            ds = {depth(x) for x in a}
            if len(ds) != 1:
                raise ValueError("block: the nested lists are of different depths")
            return 1 + ds.pop()
        return 0

    def leaves(a: Any) -> list[Any]:
        return [y for x in a for y in leaves(x)] if isinstance(a, list) else [a]

    levels = depth(arrays)
    ndim = max([levels, *(np.ndim(_value(x)) for x in leaves(arrays))])

    def build(a: Any, level: int) -> Any:
        if not isinstance(a, list):
            nd = np.ndim(_value(a))
            return reshape(a, (1,) * (ndim - nd) + _shape(a)) if nd < ndim else _tensor(a)
        parts = [build(x, level + 1) for x in a]
        return concatenate(parts, axis=-(levels - level))

    return build(arrays, 0) if levels else _tensor(arrays)


# ----- repeating, tiling, rolling, flipping --------------------------------------------------------
def repeat(a: ArrayLike, repeats: Any, axis: int | None = None) -> Tensor:
    """Each entry repeated ``repeats`` times along ``axis`` (of the flattened input when None).

    >>> lp.repeat(Tensor([1.0, 2.0]), 2)
    Tensor([1., 1., 2., 2.])
    """
    return _repeat(_tensor(a), repeats, axis)


def tile(A: ArrayLike, reps: Any) -> Tensor:  # noqa: N803 - NumPy's name
    """``A`` repeated ``reps`` times along each axis, as ``np.tile``.

    >>> lp.tile(Tensor([1.0, 2.0]), 2)
    Tensor([1., 2., 1., 2.])
    """
    reps = tuple(int(r) for r in np.atleast_1d(reps))
    shape = _shape(A)
    nd = max(len(reps), len(shape))
    shape = (1,) * (nd - len(shape)) + shape
    reps = (1,) * (nd - len(reps)) + reps
    spread = reshape(A, tuple(v for n in shape for v in (1, n)))
    wide = broadcast_to(spread, tuple(v for r, n in zip(reps, shape) for v in (r, n)))
    return reshape(wide, tuple(r * n for r, n in zip(reps, shape)))


def roll(a: ArrayLike, shift: Any, axis: Any = None) -> Tensor:
    """Entries shifted along ``axis`` by ``shift`` places, wrapping around, as ``np.roll``.

    >>> lp.roll(Tensor([1.0, 2.0, 3.0]), 1)
    Tensor([3., 1., 2.])
    """
    x = _tensor(a)
    if axis is None:
        return reshape(roll(reshape(x, (-1,)), shift, 0), _shape(x))
    shifts = np.broadcast_to(np.asarray(shift), np.shape(axis)).ravel().tolist() if np.ndim(axis) else [shift]
    axes = list(np.ravel(axis))
    if np.ndim(shift) and not np.ndim(axis):
        raise ValueError("roll: give one axis per shift")
    nd = np.ndim(_value(x))
    for s, ax in zip(shifts, axes):
        ax = _axis(int(ax), nd, "roll")
        n = _shape(x)[ax]
        k = int(s) % n if n else 0
        if k:
            lead = (slice(None),) * ax
            x = concatenate([x[lead + (slice(n - k, None),)], x[lead + (slice(0, n - k),)]], axis=ax)
    return x


def flip(m: ArrayLike, axis: Any = None) -> Tensor:
    """The order of the entries reversed along ``axis`` (all axes when None), as ``np.flip``.

    >>> lp.flip(Tensor([1.0, 2.0, 3.0]))
    Tensor([3., 2., 1.])
    """
    x = _tensor(m)
    nd = np.ndim(_value(x))
    axes = tuple(range(nd)) if axis is None else _axes(axis, nd, "flip")
    return x[tuple(slice(None, None, -1) if i in axes else slice(None) for i in range(nd))]


def fliplr(m: ArrayLike) -> Tensor:
    """Columns in reverse order (``flip(m, 1)``), as ``np.fliplr``.

    >>> lp.fliplr(Tensor([[1.0, 2.0]]))
    Tensor([[2., 1.]])
    """
    if np.ndim(_value(m)) < 2:
        raise ValueError("fliplr: the input must have at least two axes")
    return flip(m, 1)


def flipud(m: ArrayLike) -> Tensor:
    """Rows in reverse order (``flip(m, 0)``), as ``np.flipud``.

    >>> lp.flipud(Tensor([[1.0], [2.0]]))
    Tensor([[2.],
            [1.]])
    """
    if np.ndim(_value(m)) < 1:
        raise ValueError("flipud: the input must have at least one axis")
    return flip(m, 0)


def rot90(m: ArrayLike, k: int = 1, axes: Any = (0, 1)) -> Tensor:
    """Rotated by 90 degrees ``k`` times in the plane of ``axes`` (from the first towards the second).

    >>> lp.rot90(Tensor([[1.0, 2.0], [3.0, 4.0]])).tolist()
    [[2.0, 4.0], [1.0, 3.0]]
    """
    nd = np.ndim(_value(m))
    a0, a1 = _axes(axes, nd, "rot90") if len(axes) == 2 else (None, None)
    if a0 is None or a1 is None:
        raise ValueError("rot90: axes must be two different axes")
    k %= 4
    if k == 0:
        return _tensor(m)
    if k == 2:
        return flip(flip(m, a0), a1)
    perm = list(range(nd))
    perm[a0], perm[a1] = perm[a1], perm[a0]
    return transpose(flip(m, a1), tuple(perm)) if k == 1 else flip(transpose(m, tuple(perm)), a1)


def moveaxis(a: ArrayLike, source: Any, destination: Any) -> Tensor:
    """Axes moved from ``source`` to ``destination`` (the others keep their order), as ``np.moveaxis``.

    >>> lp.moveaxis(Tensor(np.zeros((2, 3, 4))), 0, -1).shape
    (3, 4, 2)
    """
    nd = np.ndim(_value(a))
    src, dst = _axes(source, nd, "moveaxis"), _axes(destination, nd, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination must have the same number of axes")
    order = [i for i in range(nd) if i not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return transpose(a, tuple(order)) if order != list(range(nd)) else _tensor(a)


def rollaxis(a: ArrayLike, axis: int, start: int = 0) -> Tensor:
    """Axis ``axis`` moved to just before position ``start``, as ``np.rollaxis``.

    >>> lp.rollaxis(Tensor(np.zeros((2, 3, 4))), 2).shape
    (4, 2, 3)
    """
    nd = np.ndim(_value(a))
    axis = _axis(axis, nd, "rollaxis")
    if not -nd <= start <= nd:
        raise np.exceptions.AxisError(f"rollaxis: start {start} is out of range for {nd} axes")
    start %= nd + 1
    if axis < start:
        start -= 1
    if axis == start:
        return _tensor(a)
    order = [i for i in range(nd) if i != axis]
    order.insert(start, axis)
    return transpose(a, tuple(order))


# ----- splitting -------------------------------------------------------------------------------------
def array_split(ary: ArrayLike, indices_or_sections: Any, axis: int = 0) -> list[Tensor]:
    """Split into pieces along ``axis``, as ``np.array_split``: ``n`` sections (the first ones one
    longer when the length does not divide), or at the given indices.

    >>> [p.shape for p in lp.array_split(Tensor(np.arange(5.0)), 2)]
    [(3,), (2,)]
    """
    x = _tensor(ary)
    n = _shape(x)[_axis(axis, np.ndim(_value(x)), "array_split")]
    if isinstance(indices_or_sections, (int, np.integer)):
        k = int(indices_or_sections)
        if k <= 0:
            raise ValueError("array_split: the number of sections must be larger than 0")
        each, extra = divmod(n, k)
        sizes = [each + 1] * extra + [each] * (k - extra)
        points = np.cumsum(sizes)[:-1].tolist()
    else:
        points = list(indices_or_sections)
    return split(x, points, axis)


def vsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Tensor]:
    """Split along the first axis (the input needs two axes or more), as ``np.vsplit``.

    >>> [p.shape for p in lp.vsplit(Tensor(np.zeros((4, 2))), 2)]
    [(2, 2), (2, 2)]
    """
    if np.ndim(_value(ary)) < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


def hsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Tensor]:
    """Split along the second axis (the first for a vector), as ``np.hsplit``.

    >>> [p.shape for p in lp.hsplit(Tensor(np.zeros((2, 4))), [1])]
    [(2, 1), (2, 3)]
    """
    nd = np.ndim(_value(ary))
    if nd == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if nd > 1 else 0)


def dsplit(ary: ArrayLike, indices_or_sections: Any) -> list[Tensor]:
    """Split along the third axis (the input needs three axes or more), as ``np.dsplit``.

    >>> [p.shape for p in lp.dsplit(Tensor(np.zeros((1, 1, 4))), 2)]
    [(1, 1, 2), (1, 1, 2)]
    """
    if np.ndim(_value(ary)) < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


# ----- triangles and diagonals ---------------------------------------------------------------------
def tril(m: ArrayLike, k: int = 0) -> Tensor:
    """The lower triangle of the last two axes (entries above diagonal ``k`` set to 0), as ``np.tril``.

    >>> lp.tril(Tensor(np.ones((2, 2)))).tolist()
    [[1.0, 0.0], [1.0, 1.0]]
    """
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("tril: the input must have at least two axes")
    return where(np.tri(shape[-2], shape[-1], k, dtype=bool), _tensor(m), 0.0)


def triu(m: ArrayLike, k: int = 0) -> Tensor:
    """The upper triangle of the last two axes (entries below diagonal ``k`` set to 0), as ``np.triu``.

    >>> lp.triu(Tensor(np.ones((2, 2)))).tolist()
    [[1.0, 1.0], [0.0, 1.0]]
    """
    shape = _shape(m)
    if len(shape) < 2:
        raise ValueError("triu: the input must have at least two axes")
    return where(np.tri(shape[-2], shape[-1], k - 1, dtype=bool), 0.0, _tensor(m))


def diagonal(a: ArrayLike, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The diagonal ``offset`` above the main one, in the plane of ``axis1`` and ``axis2``; it becomes
    the last axis, as ``np.diagonal``.

    >>> lp.diagonal(Tensor([[1.0, 2.0], [3.0, 4.0]]), 1)
    Tensor([2.])
    """
    return _diagonal(_tensor(a), offset, axis1, axis2)


def diag(v: ArrayLike, k: int = 0) -> Tensor:
    """A vector's square matrix with it on diagonal ``k``, or a matrix's diagonal ``k``, as ``np.diag``.

    >>> lp.diag(Tensor([1.0, 2.0])).tolist()
    [[1.0, 0.0], [0.0, 2.0]]
    """
    nd = np.ndim(_value(v))
    if nd == 2:
        return diagonal(v, k)
    if nd != 1:
        raise ValueError(f"diag: the input must be 1-D or 2-D, not {nd}-D")
    n = _shape(v)[0] + abs(k)
    return apply(F.unindex, "unindex", _tensor(v), _diagonal_index(n, n, k), (n, n))


def diagflat(v: ArrayLike, k: int = 0) -> Tensor:
    """The flattened input on diagonal ``k`` of a square matrix, as ``np.diagflat``.

    >>> lp.diagflat(Tensor([[1.0, 2.0]])).shape
    (2, 2)
    """
    return diag(reshape(_tensor(v), (-1,)), k)


# ----- gathering and scattering along an axis --------------------------------------------------------
def _along_axis_index(shape: tuple[int, ...], indices: Any, axis: int, name: str) -> tuple[Any, ...]:
    idx = _lift.asarray(_value(indices))  # (kept traced under jit)
    if idx.dtype.kind not in "iu":
        raise TypeError(f"{name}: indices must be integers, got dtype {idx.dtype}")
    if idx.ndim != len(shape):
        raise ValueError(f"{name}: indices must have as many axes as the array ({len(shape)}), not {idx.ndim}")
    nd = len(shape)
    return tuple(idx if i == axis else np.arange(n).reshape((1,) * i + (n,) + (1,) * (nd - i - 1))
                 for i, n in enumerate(shape))


def take_along_axis(arr: ArrayLike, indices: ArrayLike, axis: int | None = -1) -> Tensor:
    """Entries picked along ``axis`` by ``indices`` (as returned by ``argsort``), as
    ``np.take_along_axis``; repeated picks add their gradients.

    >>> lp.take_along_axis(Tensor([[3.0, 1.0, 2.0]]), np.array([[1, 2, 0]]), 1)
    Tensor([[1., 2., 3.]])
    """
    x = _tensor(arr)
    if axis is None:
        x, axis = reshape(x, (-1,)), 0
    nd = np.ndim(_value(x))
    return x[_along_axis_index(_shape(x), indices, _axis(axis, nd, "take_along_axis"), "take_along_axis")]


def put_along_axis(arr: ArrayLike, indices: ArrayLike, values: ArrayLike, axis: int | None) -> Tensor:
    """A new array: ``arr`` with ``values`` put at ``indices`` along ``axis``, as ``np.put_along_axis``
    does in place. The gradient goes to ``values`` where they were put and to ``arr`` elsewhere.
    An index may appear only once (which value would win is not defined).

    >>> lp.put_along_axis(Tensor([[1.0, 2.0, 3.0]]), np.array([[0, 2]]), 0.0, 1)
    Tensor([[0., 2., 0.]])
    """
    x = _tensor(arr)
    shape = _shape(x)
    if axis is None:
        flat = put_along_axis(reshape(x, (-1,)), np.ravel(_value(indices)), values, 0)
        return reshape(flat, shape)
    index = _along_axis_index(shape, indices, _axis(axis, len(shape), "put_along_axis"), "put_along_axis")
    spots = np.broadcast_arrays(*index)
    positions = np.ravel_multi_index(tuple(s.ravel() for s in spots), shape) if spots[0].size else spots[0].ravel()
    if len(np.unique(positions)) != positions.size:
        raise ValueError(
            "put_along_axis: an index appears more than once along the axis, so which value is put "
            "there is not defined; pass each index once."
        )
    hit = np.zeros(shape, dtype=bool)
    hit[tuple(spots)] = True
    v = _tensor(values)
    v = broadcast_to(v, spots[0].shape) if type(v) is Tensor else np.broadcast_to(v, spots[0].shape)
    placed = apply(F.unindex, "unindex", v, tuple(spots), shape)
    return where(hit, placed, x)


def select(condlist: Sequence[Any], choicelist: Sequence[ArrayLike], default: ArrayLike = 0) -> Tensor:
    """From each of ``choicelist`` where its condition (the first true one) holds, else ``default``,
    as ``np.select``.

    >>> x = Tensor([-1.0, 0.5, 2.0])
    >>> lp.select([x.numpy() < 0, x.numpy() > 1], [x * 0.0, x * 10.0], x)
    Tensor([-0. ,  0.5, 20. ])
    """
    if len(condlist) != len(choicelist):
        raise ValueError("select: list of cases must be same length as list of conditions")
    result = _tensor(default)
    for cond, choice in reversed(list(zip(condlist, choicelist))):
        c = _lift.asarray(_value(cond))  # (kept traced under jit)
        if c.dtype != bool:
            raise TypeError(f"select: conditions must be boolean arrays, got dtype {c.dtype}")
        result = where(c, _tensor(choice), result)
    return result if type(result) is Tensor else Tensor(result)


def broadcast_arrays(*args: ArrayLike, subok: bool = False) -> tuple[Tensor, ...]:
    """The inputs broadcast to one shape, as ``np.broadcast_arrays``.

    >>> [t.shape for t in lp.broadcast_arrays(Tensor([1.0, 2.0]), Tensor([[0.0], [1.0]]))]
    [(2, 2), (2, 2)]
    """
    shape = np.broadcast_shapes(*(_shape(a) for a in args))
    return tuple(broadcast_to(_tensor(a), shape) for a in args)


def meshgrid(*xi: ArrayLike, copy: bool = True, sparse: bool = False, indexing: str = "xy") -> tuple[Tensor, ...]:
    """Coordinate grids from coordinate vectors, as ``np.meshgrid`` (``indexing="xy"`` or ``"ij"``).

    >>> [g.shape for g in lp.meshgrid(Tensor([1.0, 2.0, 3.0]), Tensor([0.0, 1.0]))]
    [(2, 3), (2, 3)]
    """
    if indexing not in ("xy", "ij"):
        raise ValueError("meshgrid: indexing must be 'xy' or 'ij'")
    n = len(xi)
    out = [reshape(x, (1,) * i + (-1,) + (1,) * (n - i - 1)) for i, x in enumerate(xi)]
    if indexing == "xy" and n > 1:
        out[0] = reshape(out[0], (1, -1) + (1,) * (n - 2))
        out[1] = reshape(out[1], (-1, 1) + (1,) * (n - 2))
    return tuple(out) if sparse else broadcast_arrays(*out)


def ravel(a: ArrayLike, order: str = "C") -> Tensor:
    """All entries along one axis (``order="C"``), as ``np.ravel``.

    >>> lp.ravel(Tensor([[1.0], [2.0]]))
    Tensor([1., 2.])
    """
    if order != "C":
        raise TypeError(f"ravel on a Tensor supports only order='C', not {order!r}")
    return reshape(_tensor(a), (-1,))


def full(shape: Any, fill_value: ArrayLike, dtype: Any = None) -> Tensor:
    """An array of ``shape`` filled with ``fill_value``, which may be a Tensor (its gradient is the
    sum over the array). ``np.full`` cannot take a Tensor being differentiated: use this.

    >>> lp.grad(lambda c: lp.full((2, 3), c).sum())(np.array(2.0))
    array(6.)
    """
    from .basics import astype

    v = _tensor(fill_value)
    if type(v) is not Tensor:
        return Tensor(np.full(shape, v, dtype=dtype))
    if dtype is not None and np.dtype(dtype) != v.dtype:
        v = astype(v, dtype)
    return broadcast_to(v, tuple(np.atleast_1d(shape).tolist()) if np.ndim(shape) else (int(shape),))


def full_like(a: ArrayLike, fill_value: ArrayLike, dtype: Any = None, shape: Any = None) -> Tensor:
    """An array like ``a`` (its shape and dtype) filled with ``fill_value``, which may be a Tensor.

    >>> lp.full_like(np.zeros(2), Tensor(3.0))
    Tensor([3., 3.])
    """
    like = _value(a)
    return full(np.shape(like) if shape is None else shape, fill_value,
                getattr(like, "dtype", None) if dtype is None else dtype)


__all__ = [
    "atleast_1d", "atleast_2d", "atleast_3d", "vstack", "row_stack", "hstack", "dstack", "column_stack", "block",
    "repeat", "tile", "roll", "flip", "fliplr", "flipud", "rot90", "moveaxis", "rollaxis", "array_split",
    "vsplit", "hsplit", "dsplit", "tril", "triu", "diagonal", "diag", "diagflat", "take_along_axis",
    "put_along_axis", "select", "broadcast_arrays", "meshgrid", "ravel", "full", "full_like",
]
