"""NumPy's products of arrays on Tensors: ``dot``, ``vdot``, ``inner``, ``outer``, ``tensordot``,
``kron`` and ``cross``, with NumPy's semantics for every number of axes.

They are written with ``@``, ``einsum`` (whose contraction order ``np.einsum_path`` chooses),
``*`` and the shape ops, so their gradients come from those rules.

>>> a, b = Tensor([1.0, 2.0]), Tensor([[3.0, 4.0], [5.0, 6.0]])
>>> lp.dot(a, b), lp.outer(a, a).shape, lp.kron(a, a)
(Tensor([13., 16.]), (2, 2), Tensor([1., 2., 2., 4.]))
"""

from __future__ import annotations

import string
from typing import Any

import numpy as np

from ..core.tensor import ArrayLike, Tensor, _dot, _value
from .arrays import moveaxis
from .basics import _axis, _tensor, einsum, matmul, multiply, reshape, stack


def _nd(x: Any) -> int:
    return np.ndim(_value(x))


def dot(a: ArrayLike, b: ArrayLike) -> Tensor:
    """``np.dot``: a product for 0-d operands, the inner product of vectors, ``@`` for matrices, and
    for N-D operands the sum over ``a``'s last axis and ``b``'s second-to-last.

    >>> lp.dot(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((5, 4, 6)))).shape
    (2, 3, 5, 6)
    """
    return _dot(_tensor(a), _tensor(b))


def vdot(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The inner product of the flattened inputs (they need the same size), as ``np.vdot``.

    >>> lp.vdot(Tensor([[1.0, 2.0]]), Tensor([3.0, 4.0]))
    Tensor(11.)
    """
    a, b = reshape(_tensor(a), (-1,)), reshape(_tensor(b), (-1,))
    if np.shape(_value(a)) != np.shape(_value(b)):
        raise ValueError("vdot: the inputs must have the same number of entries")
    return matmul(a, b)


def inner(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The sum over the last axes of both inputs, as ``np.inner`` (a product for 0-d inputs).

    >>> lp.inner(Tensor(np.ones((2, 3))), Tensor(np.ones((4, 3)))).shape
    (2, 4)
    """
    a, b = _tensor(a), _tensor(b)
    if _nd(a) == 0 or _nd(b) == 0:
        return multiply(a, b)
    return tensordot(a, b, ([_nd(a) - 1], [_nd(b) - 1]))


def outer(a: ArrayLike, b: ArrayLike) -> Tensor:
    """``a_i * b_j`` of the flattened inputs, as ``np.outer``.

    >>> lp.outer(Tensor([1.0, 2.0]), Tensor([1.0, 10.0])).tolist()
    [[1.0, 10.0], [2.0, 20.0]]
    """
    return multiply(reshape(_tensor(a), (-1, 1)), reshape(_tensor(b), (1, -1)))


def tensordot(a: ArrayLike, b: ArrayLike, axes: Any = 2) -> Tensor:
    """The sum over ``axes`` (``N``: the last ``N`` of ``a`` with the first ``N`` of ``b``; or a pair
    of axis lists), as ``np.tensordot``.

    >>> lp.tensordot(Tensor(np.ones((2, 3, 4))), Tensor(np.ones((3, 4, 5)))).shape
    (2, 5)
    """
    a, b = _tensor(a), _tensor(b)
    na, nb = _nd(a), _nd(b)
    if isinstance(axes, (int, np.integer)):
        n = int(axes)
        if n < 0 or n > min(na, nb):
            raise ValueError(f"tensordot: cannot sum over {n} axes of operands with {na} and {nb} axes")
        xa, xb = list(range(na - n, na)), list(range(n))
    else:
        xa, xb = ([int(v)] if np.ndim(v) == 0 else [int(i) for i in v] for v in axes)
    if len(xa) != len(xb):
        raise ValueError("tensordot: the two lists of axes must have the same length")
    xa = [_axis(i, na, "tensordot") for i in xa]
    xb = [_axis(i, nb, "tensordot") for i in xb]
    sa, sb = np.shape(_value(a)), np.shape(_value(b))
    if any(sa[i] != sb[j] for i, j in zip(xa, xb)):
        raise ValueError(f"tensordot: shape mismatch for sum: {sa} and {sb} over axes {xa} and {xb}")
    letters = iter(string.ascii_letters)
    sub_a = [next(letters) for _ in range(na)]
    sub_b = [next(letters) for _ in range(nb)]
    for i, j in zip(xa, xb):
        sub_b[j] = sub_a[i]
    out = [c for i, c in enumerate(sub_a) if i not in xa] + [c for j, c in enumerate(sub_b) if j not in xb]
    return einsum(f"{''.join(sub_a)},{''.join(sub_b)}->{''.join(out)}", a, b)


def kron(a: ArrayLike, b: ArrayLike) -> Tensor:
    """The Kronecker product (blocks ``a_ij * b``), as ``np.kron``.

    >>> lp.kron(Tensor(np.eye(2)), Tensor(np.ones((1, 2)))).tolist()
    [[1.0, 1.0, 0.0, 0.0], [0.0, 0.0, 1.0, 1.0]]
    """
    a, b = _tensor(a), _tensor(b)
    nd = max(_nd(a), _nd(b))
    sa = (1,) * (nd - _nd(a)) + np.shape(_value(a))
    sb = (1,) * (nd - _nd(b)) + np.shape(_value(b))
    spread = multiply(reshape(a, tuple(v for n in sa for v in (n, 1))),
                      reshape(b, tuple(v for n in sb for v in (1, n))))
    return reshape(spread, tuple(m * n for m, n in zip(sa, sb)))


def cross(a: ArrayLike, b: ArrayLike, axisa: int = -1, axisb: int = -1, axisc: int = -1,
          axis: int | None = None) -> Tensor:
    """The cross product of 3-vectors (a 2-vector has z = 0; two 2-vectors give the z component) along
    ``axisa`` / ``axisb``, the result's vectors along ``axisc`` (``axis`` sets all three), as ``np.cross``.

    >>> lp.cross(Tensor([1.0, 0.0, 0.0]), Tensor([0.0, 1.0, 0.0]))
    Tensor([0., 0., 1.])
    """
    if axis is not None:
        axisa = axisb = axisc = axis
    a = moveaxis(_tensor(a), _axis(axisa, _nd(a), "cross"), -1)
    b = moveaxis(_tensor(b), _axis(axisb, _nd(b), "cross"), -1)
    da, db = np.shape(_value(a))[-1], np.shape(_value(b))[-1]
    if da not in (2, 3) or db not in (2, 3):
        raise ValueError("cross: incompatible dimensions for cross product (dimension must be 2 or 3)")
    a0, a1 = a[..., 0], a[..., 1]
    b0, b1 = b[..., 0], b[..., 1]
    z = a0 * b1 - a1 * b0
    if da == 2 and db == 2:
        return z
    if da == 3 and db == 3:
        a2, b2 = a[..., 2], b[..., 2]
        c = [a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, z]
    elif da == 2:
        b2 = b[..., 2]
        c = [a1 * b2, -(a0 * b2), z]
    else:
        a2 = a[..., 2]
        c = [-(a2 * b1), a2 * b0, z]
    out = stack(c, axis=-1)
    return moveaxis(out, -1, _axis(axisc, _nd(out), "cross"))


__all__ = ["dot", "vdot", "inner", "outer", "tensordot", "kron", "cross"]
