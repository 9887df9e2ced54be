"""Differentiable ``np.linalg``: ``lp.linalg.inv(t)``, or NumPy's own ``np.linalg.inv(t)`` on a Tensor.

Every function batches over leading axes as NumPy does, and differentiates to any order. Where a
derivative does not exist (repeated eigenvalues or singular values, a norm at 0) the gradient
follows the conventions in ``leanpass.functional.linalg``: finite, never nan.

>>> import leanpass as lp
>>> a = lp.Tensor([[2.0, 1.0], [1.0, 3.0]], requires_grad=True)
>>> lp.linalg.det(a).backward()
>>> a.grad
Tensor([[ 3., -1.],
        [-1.,  2.]])
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, _value, apply
from ..functional.linalg import unpack_qr, unpack_svd
from .basics import _as_tensor, _tensor
from .basics import abs as _abs
from .basics import max as _max
from .basics import min as _min
from .basics import sum as _sum

__all__ = ["inv", "det", "slogdet", "solve", "cholesky", "eigh", "eigvalsh", "svd", "qr", "pinv",
           "matrix_power", "lstsq", "norm"]


class SlogdetResult(NamedTuple):
    sign: Any
    logabsdet: Tensor


class EighResult(NamedTuple):
    eigenvalues: Tensor
    eigenvectors: Tensor


class SVDResult(NamedTuple):
    U: Tensor
    S: Tensor
    Vh: Tensor


class QRResult(NamedTuple):
    Q: Tensor
    R: Tensor


class LstsqResult(NamedTuple):
    x: Tensor
    residuals: Tensor
    rank: int
    s: Tensor


def _square(a: Any, name: str, min_ndim: int = 2) -> Any:
    """``a`` (lists made arrays), checked to be a stack of matrices (square ones for most functions)."""
    a = _tensor(a)
    shape = np.shape(_value(a))
    if len(shape) < min_ndim:
        raise ValueError(
            f"linalg.{name}: expected a matrix or a stack of matrices (at least 2 axes), got shape "
            f"{shape}. Reshape a single number or vector first, e.g. x.reshape(1, -1)."
        )
    if name not in ("svd", "qr", "pinv", "lstsq", "norm") and shape[-1] != shape[-2]:
        raise ValueError(f"linalg.{name}: the last two axes must be square, got shape {shape}")
    if np.iscomplexobj(_value(a)):
        raise TypeError(f"linalg.{name}: complex matrices are not supported by LeanPass")
    return a


def inv(a: ArrayLike) -> Tensor:
    """The inverse of a square matrix (or of each in a stack).

    >>> inv(Tensor([[2.0, 0.0], [0.0, 4.0]]))
    Tensor([[0.5 , 0.  ],
            [0.  , 0.25]])
    """
    return apply(F.inv, "inv", _square(a, "inv"))


def det(a: ArrayLike) -> Tensor:
    """The determinant. Its gradient is the cofactor matrix ``adj(a).T``, at singular matrices too.

    >>> det(Tensor([[2.0, 1.0], [1.0, 3.0]]))
    Tensor(5.)
    """
    return apply(F.det, "det", _square(a, "det"))


def slogdet(a: ArrayLike) -> SlogdetResult:
    """``(sign, logabsdet)`` of the determinant; ``sign`` is a constant array, ``logabsdet`` a Tensor.

    >>> slogdet(Tensor([[-2.0, 0.0], [0.0, 3.0]]))
    SlogdetResult(sign=np.float64(-1.0), logabsdet=Tensor(1.79175947))
    """
    a = _square(a, "slogdet")
    sign = np.linalg.slogdet(_value(a))[0]
    return SlogdetResult(sign, apply(F.slogdet, "slogdet", a))


def solve(a: ArrayLike, b: ArrayLike) -> Tensor:
    """``x`` with ``a @ x == b``; ``b`` is a vector when 1-D, else a (stack of) matrices.

    >>> solve(Tensor([[2.0, 0.0], [0.0, 4.0]]), Tensor([2.0, 2.0]))
    Tensor([1. , 0.5])
    """
    return apply(F.solve, "solve", _square(a, "solve"), _tensor(b))


def cholesky(a: ArrayLike, upper: bool = False) -> Tensor:
    """The Cholesky factor of a symmetric positive-definite matrix: lower ``L`` with
    ``a = L @ L.T`` (``upper=True``: ``L.T``). As NumPy, it reads the lower triangle of ``a``
    (``upper=True``: the upper one), so the gradient is zero on the other triangle.

    >>> cholesky(Tensor([[4.0, 2.0], [2.0, 5.0]]))
    Tensor([[2., 0.],
            [1., 2.]])
    """
    a = _square(a, "cholesky")
    if upper:  # the upper triangle of a is the lower one of a.T
        return apply(F.cholesky, "cholesky", np.swapaxes(a, -1, -2)).swapaxes(-1, -2)
    return apply(F.cholesky, "cholesky", a)


def eigh(a: ArrayLike, UPLO: str = "L") -> EighResult:  # noqa: N803 - NumPy's name
    """Eigenvalues (ascending) and eigenvectors (columns) of a symmetric matrix. As NumPy, it reads
    one triangle of ``a``: the lower one (``UPLO="L"``) or the upper one (``"U"``); the gradient
    is zero on the other.

    Repeated eigenvalues: the gradient is exact for losses that depend on the eigenvectors
    only through the space they span (see ``leanpass.functional.linalg``).

    >>> w, v = eigh(Tensor([[2.0, 0.0], [0.0, 1.0]]))
    >>> w
    Tensor([1., 2.])
    """
    if UPLO not in ("L", "U"):
        raise ValueError(f"linalg.eigh: UPLO must be 'L' or 'U', not {UPLO!r}")
    packed = apply(F.eigh, "eigh", _square(a, "eigh"), UPLO)
    return EighResult(packed[..., 0, :], packed[..., 1:, :])


def eigvalsh(a: ArrayLike, UPLO: str = "L") -> Tensor:  # noqa: N803 - NumPy's name
    """The eigenvalues of a symmetric matrix, ascending (read from one triangle, as ``eigh``).

    >>> eigvalsh(Tensor([[2.0, 0.0], [0.0, 1.0]]))
    Tensor([1., 2.])
    """
    return eigh(a, UPLO).eigenvalues


def svd(a: ArrayLike, full_matrices: bool = True, compute_uv: bool = True, hermitian: bool = False) -> Any:
    """The singular value decomposition ``a = U @ diag(S) @ Vh``, as ``np.linalg.svd``.

    Differentiable in its thin form: a matrix that is not square needs ``full_matrices=False``
    (the extra columns of the full form are not determined by ``a``). Repeated singular values:
    see ``leanpass.functional.linalg``.

    >>> u, s, vh = svd(Tensor([[3.0, 0.0], [0.0, 2.0]]), full_matrices=False)
    >>> s
    Tensor([3., 2.])
    >>> svd(Tensor([[0.0, 2.0]]), compute_uv=False)
    Tensor([2.])
    """
    a = _square(a, "svd")
    m, n = np.shape(_value(a))[-2:]
    if full_matrices and compute_uv and m != n:
        raise ValueError(
            f"linalg.svd: full_matrices=True for a {m} x {n} matrix adds columns that a does not "
            "determine, so they have no gradient. Pass full_matrices=False (the thin SVD)."
        )
    if hermitian:
        raise TypeError("linalg.svd: hermitian=True is not supported on Tensors; use linalg.eigh")
    packed = apply(F.svd, "svd", a)
    u, s, vh = unpack_svd(packed, m, n)
    return SVDResult(u, s, vh) if compute_uv else s


def qr(a: ArrayLike, mode: str = "reduced") -> QRResult:
    """The reduced QR factorisation ``a = Q @ R`` (``R`` needs a nonzero diagonal for the gradient).

    >>> q, r = qr(Tensor([[2.0], [0.0]]))
    >>> q @ r
    Tensor([[2.],
            [0.]])
    """
    if mode != "reduced":
        raise ValueError(f"linalg.qr on a Tensor supports mode='reduced' only, not {mode!r}")
    a = _square(a, "qr")
    m, n = np.shape(_value(a))[-2:]
    return QRResult(*unpack_qr(apply(F.qr, "qr", a), m, n))


def pinv(a: ArrayLike, rcond: Any = None, hermitian: bool = False) -> Tensor:
    """The Moore-Penrose pseudo-inverse (its gradient holds where the rank does not change).
    ``hermitian=True`` takes ``a`` to be symmetric and reads its lower triangle, as NumPy.

    >>> pinv(Tensor([[2.0, 0.0]]))
    Tensor([[0.5],
            [0. ]])
    >>> pinv(Tensor([[2.0, 9.0], [0.0, 4.0]]), hermitian=True)  # reads [[2, 0], [0, 4]]
    Tensor([[0.5 , 0.  ],
            [0.  , 0.25]])
    """
    a = _square(a, "pinv" if not hermitian else "pinv(hermitian=True)")
    return apply(F.pinv, "pinv", a, None if rcond is None else _value(rcond), bool(hermitian))


def matrix_power(a: ArrayLike, n: int) -> Tensor:
    """``a @ a @ ... @ a`` (``n`` times; ``inv(a)`` repeated for ``n < 0``; the identity for 0).

    >>> matrix_power(Tensor([[1.0, 1.0], [0.0, 1.0]]), 3)
    Tensor([[1., 3.],
            [0., 1.]])
    """
    a = _square(a, "matrix_power")
    if not isinstance(n, (int, np.integer)) or isinstance(n, bool):
        raise TypeError(f"linalg.matrix_power: n must be an integer, got {type(n).__name__}")
    t = a if type(a) is Tensor else Tensor(a)
    if n == 0:
        shape = t.shape
        return Tensor(np.broadcast_to(np.eye(shape[-1], dtype=t.dtype), shape).copy())
    base = inv(t) if n < 0 else t
    k = abs(int(n))
    while not k & 1:  # by squaring: log2(n) products (k >= 1 here)
        base = base @ base
        k >>= 1
    result = base
    k >>= 1
    while k:
        base = base @ base
        if k & 1:
            result = result @ base
        k >>= 1
    return result


def lstsq(a: ArrayLike, b: ArrayLike, rcond: Any = None) -> LstsqResult:
    """Least squares, as ``np.linalg.lstsq``: ``(x, residuals, rank, s)``.

    ``x``, the residuals and the singular values ``s`` are Tensors (the gradient holds where
    the rank does not change); ``rank`` is an int.

    >>> x, res, rank, s = lstsq(Tensor([[1.0], [1.0]]), Tensor([1.0, 3.0]))
    >>> x, res, rank
    (Tensor([2.]), Tensor([2.]), 1)
    """
    a = _square(a, "lstsq")
    b = _tensor(b)
    ad, bd = _value(a), _value(b)
    if np.ndim(ad) != 2 or np.ndim(bd) not in (1, 2):
        raise ValueError(f"linalg.lstsq: a must be 2-D and b 1-D or 2-D, got shapes {np.shape(ad)} and {np.shape(bd)}")
    _, _, rank, _ = np.linalg.lstsq(ad, bd, rcond=rcond)
    x = apply(F.lstsq, "lstsq", a, b, rcond)
    m, n = np.shape(ad)
    if rank == n and m > n:
        r = b - (a @ x if type(a) is Tensor else Tensor(ad) @ x)
        residuals = _sum(r * r, axis=0)
        if np.ndim(bd) == 1:
            residuals = residuals.reshape(1)
    else:
        residuals = Tensor(np.zeros(0, dtype=np.result_type(ad, bd, np.float64)))
    return LstsqResult(x, residuals, int(rank), svd(a, compute_uv=False))


def norm(x: ArrayLike, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:  # noqa: A002
    """Vector and matrix norms, as ``np.linalg.norm`` (``ord`` and ``axis`` mean what they mean there).

    At 0 the gradient is the subgradient 0 (for ``ord='nuc'`` and ``ord=2`` of a matrix, a
    subgradient built from an SVD of the zero matrix).

    >>> norm(Tensor([3.0, 4.0])), norm(Tensor([[1.0, -2.0], [3.0, 4.0]]), ord=1)
    (Tensor(5.), Tensor(6.))
    """
    x = _tensor(x)
    nd = np.ndim(_value(x))
    if np.iscomplexobj(_value(x)):
        raise TypeError("linalg.norm: complex arrays are not supported by LeanPass")
    if axis is None:
        if ord is None:
            return apply(F.norm, "norm", x, 2, None, bool(keepdims))
        if nd not in (1, 2):
            raise ValueError(f"linalg.norm: ord={ord!r} without axis needs a 1-D or 2-D array, got {nd}-D")
        axis = (0, 1) if nd == 2 else 0
    if isinstance(axis, (list, tuple)) and len(axis) == 1:
        axis = axis[0]
    if isinstance(axis, (list, tuple)):
        if len(axis) != 2:
            raise ValueError(f"linalg.norm: axis must be an int or a pair of ints, got {axis!r}")
        return _matrix_norm(x, ord, (int(axis[0]) % nd, int(axis[1]) % nd), bool(keepdims), nd)
    return _vector_norm(x, ord, int(axis), bool(keepdims))


def _vector_norm(x: Any, ord: Any, axis: int, keepdims: bool) -> Tensor:  # noqa: A002
    if ord is None or ord == 2:
        return apply(F.norm, "norm", x, 2, axis, keepdims)
    if isinstance(ord, str):
        raise ValueError(f"linalg.norm: ord={ord!r} is a matrix norm; a vector norm takes a number")
    if ord == np.inf:
        return _max(_abs(x), axis=axis, keepdims=keepdims)
    if ord == -np.inf:
        return _min(_abs(x), axis=axis, keepdims=keepdims)
    if ord == 0:  # the number of nonzero entries: piecewise constant
        return Tensor(np.sum(_value(x) != 0, axis=axis, keepdims=keepdims).astype(F.linalg._dtype(_value(x))))
    if ord == 1:
        return _sum(_abs(x), axis=axis, keepdims=keepdims)
    return apply(F.norm, "norm", x, float(ord), axis, keepdims)


def _matrix_norm(x: Any, ord: Any, axes: tuple[int, int], keepdims: bool, nd: int) -> Tensor:  # noqa: A002
    row, col = axes
    if row == col:
        raise ValueError("linalg.norm: the two axes of a matrix norm must differ")
    if ord is None or ord == "fro":
        return apply(F.norm, "norm", x, 2, axes, keepdims)
    shape = np.shape(_value(x))
    if (shape[row] == 0 or shape[col] == 0) and not isinstance(ord, str) and ord in (1, 2, np.inf):
        return _sum(_abs(x), axis=axes, keepdims=keepdims)  # an empty matrix: 0, as NumPy gives
    if ord in (1, -1, np.inf, -np.inf):
        summed, over = (row, col) if ord in (1, -1) else (col, row)
        s = _sum(_abs(x), axis=summed, keepdims=True)
        pick = _max if ord in (1, np.inf) else _min
        out = pick(s, axis=over, keepdims=True)
    elif ord in (2, -2, "nuc"):
        t = _as_tensor(x)
        rest = [i for i in range(nd) if i not in axes]
        s = svd(t.transpose(*rest, row, col), compute_uv=False)
        out = (_sum(s, axis=-1) if ord == "nuc" else (_max if ord == 2 else _min)(s, axis=-1))
        out = out.reshape(tuple(1 if i in axes else n for i, n in enumerate(np.shape(_value(x)))))
    else:
        raise ValueError(f"linalg.norm: invalid norm order {ord!r} for matrices")
    return out if keepdims else out.squeeze(axes)


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
