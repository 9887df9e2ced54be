"""Linear algebra (``np.linalg``): each op returns ``(ans, vjp)`` and batches over leading axes.

The rules are written with NumPy calls only (``@``, ``np.swapaxes``, ``np.linalg.solve``, ...),
so a differentiable backward pass replays them on Tensors, where those calls dispatch back to
these ops: every rule differentiates again.

Ops with several results (``eigh``, ``svd``, ``qr``) return them packed into one array, which
``leanpass.linalg`` unpacks by indexing; their VJPs take the packed cotangent.

Conventions where a derivative does not exist:

- ``eigh``: a pair of eigenvalues closer than ``100 * n * eps * max|w|`` counts as equal, and
  the coupling term ``1 / (w_j - w_i)`` of the pair is dropped. That is the exact gradient
  when the loss gives the pair the same cotangent and does not depend on the choice of basis
  inside their space (a projector onto a space that holds all of the repeated eigenvalue's
  vectors, the sum of the eigenvalues, ...): then the dropped term is 0. Where the cotangent
  shows otherwise (no gradient exists, or the eigendecomposition cannot tell it, as for
  ``V f(w) V.T``, whose derivative needs divided differences of ``f``), a ValueError says so,
  rather than a nan or a silently wrong number. A second derivative at repeated values raises
  too (the convention is not the limit of the rule, so its derivative would be wrong).
- ``svd``: the same for repeated singular values (only the ``1 / (s_j - s_i)`` part is dropped:
  the ``1 / (s_j + s_i)`` part stays, as the limit requires); ``1 / s`` is taken as 0 where
  ``s == 0`` (as JAX does).
- ``eigh``, ``cholesky`` and ``pinv(hermitian=True)`` read one triangle of their input, as NumPy
  does (``UPLO``: the lower one by default): the matrix they decompose is that triangle mirrored.
  So their gradient with respect to the whole input, which agrees with finite differences in any
  direction (a non-symmetric one too), is zero on the other triangle and holds both off-diagonal
  terms of the symmetric gradient on the triangle read.
- ``det``: its gradient is the cofactor matrix ``adj(a).T`` (in closed form up to 3 x 3, from an
  SVD beyond), so it is exact at singular matrices too (nonzero at corank 1, zero from corank 2),
  to every order at any rank up to 3 x 3, to second order beyond.
  ``slogdet`` at a singular matrix (``logabsdet = -inf``): the gradient ``adj(a).T / det(a)`` has
  ``inf`` and ``nan`` entries, as JAX gives, rather than an error.
- ``norm`` at 0: the subgradient 0.

Each op's forward-mode rule (``*_jvp``, in its record) sits beside its VJP and follows the same
conventions; where they drop a term, the rule raises unless the tangent gives that term nothing.

>>> ans, vjp = inv(np.array([[2.0, 0.0], [0.0, 4.0]]))
>>> ans, vjp(np.eye(2))[0]
(array([[0.5 , 0.  ],
       [0.  , 0.25]]), array([[-0.25  , -0.    ],
       [-0.    , -0.0625]]))
"""

from __future__ import annotations

from functools import partial
from types import MethodType
from typing import Any

import numpy as np

from ._broadcast import unbroadcast
from ._lift import NUMPY1, weak
from ._registry import op
from ._tangent import total

BOTH = (True, True)


def _T(x: Any) -> Any:  # noqa: N802 - the matrix transpose of the last two axes
    return np.swapaxes(x, -1, -2)


def _triangle(n: int, upper: bool, like: Any, k: int = 0) -> np.ndarray:
    """The 0/1 mask of the lower (or upper) triangle, from diagonal ``k`` outwards (a constant)."""
    low = np.tril(np.ones((n, n), _dtype(like)), -k)
    return low.T if upper else low


def _mirrored(x: Any, upper: bool) -> Any:
    """The symmetric matrix that NumPy's ``eigh`` and ``cholesky`` see in ``x``: one triangle of
    ``x`` (with the diagonal), mirrored onto the other."""
    n = _shape(x)[-1]
    return x * _triangle(n, upper, x) + _T(x * _triangle(n, upper, x, 1))


def _onto_triangle(g: Any, upper: bool) -> Any:
    """The cotangent of ``x`` given ``g``, that of ``_mirrored(x, upper)`` (the transpose of
    ``_mirrored``): ``g + g.T`` on the triangle read, ``g`` on the diagonal, 0 on the other."""
    n = _shape(g)[-1]
    return g * _triangle(n, upper, g) + _T(g) * _triangle(n, upper, g, 1)


def _dtype(x: Any) -> Any:
    dtype = getattr(x, "dtype", np.dtype(np.float64))
    return dtype if dtype.kind == "f" else np.dtype(np.float64)


def _eye(n: int, like: Any) -> np.ndarray:
    return np.eye(n, dtype=_dtype(like))


def _shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x))


def _reciprocal_or_zero(d: Any, zero: Any) -> Any:
    """``1 / d``, and 0 where ``zero`` (a plain boolean array) is true: finite at every order."""
    one = weak(1.0, d)
    return np.where(zero, weak(0.0, d), one / np.where(zero, one, d))


def _near(d: Any, tol: Any) -> Any:
    """Where ``|d| <= tol``, as a plain boolean array (comparisons of Tensors record nothing)."""
    return (d <= tol) & (d >= -tol)


def _check_repeated(values: Any, equal: Any, gvalues: Any, coupling: Any, name: str, what: str) -> None:
    """Refuse a gradient through repeated values that the cotangent cannot determine.

    ``equal`` marks the pairs counted as equal (a plain boolean array); ``coupling[i, j]`` is
    the part of the rule those pairs drop. The gradient exists when the loss spends nothing on
    that part: its cotangent gives equal values the same cotangent and no coupling. Otherwise
    raise. A higher-order pass through repeated values raises too, since the convention is not
    the limit of the rule and so has the wrong derivative. (Values under jit or vmap, which are
    neither arrays nor Tensors, are not inspected.)
    """
    from ._lift import tensor_type as Tensor  # (the Tensor layer's, once it is loaded)

    n = np.shape(equal)[-1]
    pairs = equal & ~np.eye(n, dtype=bool)
    if type(values) is Tensor:
        if np.any(pairs):
            raise ValueError(
                f"linalg.{name}: a second derivative at repeated {what} is not computed by "
                "LeanPass (the first derivative is, for a loss that does not depend on the choice "
                "of basis there). Perturb the input slightly so that the values separate."
            )
        return
    if not isinstance(values, np.ndarray) or not np.any(pairs):
        return
    spread = np.abs(gvalues[..., None, :] - gvalues[..., :, None])
    scale = np.max(np.abs(gvalues), axis=-1)[..., None, None] + np.max(np.abs(coupling), axis=(-1, -2))[..., None, None]
    if np.any(pairs & ((spread > 1e-8 * scale) | (np.abs(coupling) > 1e-8 * scale))):
        raise ValueError(
            f"linalg.{name}: the {what} are repeated here and the loss depends on the choice of "
            f"basis inside their space (or on the repeated {what} one by one), so no gradient "
            "exists at this point. A loss of the space they span (a projector such as V[:, :k] "
            "@ V[:, :k].T with no repeated value split between the kept and the dropped "
            f"columns) or of the sum of the repeated {what} has one; otherwise perturb the input "
            "slightly so that the values separate."
        )


def _check_split(values: Any, equal: Any, coupling: Any, name: str, what: str) -> None:
    """Forward mode's check at repeated values: their tangents (and the vectors') exist only for a
    direction that does not couple them (``coupling`` is 0 on the pairs counted as equal); then
    the terms the convention drops are 0. Otherwise raise, as ``_check_repeated`` does."""
    from ._lift import tensor_type as Tensor  # (the Tensor layer's, once it is loaded)

    n = np.shape(equal)[-1]
    pairs = equal & ~np.eye(n, dtype=bool)
    if type(values) is Tensor:
        _check_repeated(values, equal, None, None, name, what)
        return
    if not isinstance(values, np.ndarray) or not np.any(pairs):
        return
    scale = np.max(np.abs(coupling), axis=(-1, -2), keepdims=True)
    if np.any(pairs & (np.abs(coupling) > 1e-8 * scale)):
        raise ValueError(
            f"linalg.{name}: the {what} are repeated here and the tangent moves them apart (it "
            f"couples vectors of one repeated value), so the tangents of the {what} one by one and "
            "of their vectors do not exist at this point. Use reverse mode for a loss of the space "
            "they span or of their sum, or perturb the input slightly so that the values separate."
        )


def _tolerance(values: Any, n: int) -> Any:
    """How close two eigen- or singular values must be to count as equal (per matrix)."""
    eps = float(np.finfo(_dtype(values)).eps)
    if _shape(values)[-1] == 0:  # no values: nothing to compare
        return np.zeros((*_shape(values)[:-1], 1, 1), _dtype(values))
    return 100 * n * eps * np.max(np.abs(values), axis=-1, keepdims=True)[..., None]


# ----- inverse, determinants, solve --------------------------------------------------------------
def inv(a: Any) -> tuple[Any, Any]:
    """The inverse. Cotangent ``-ans.T @ g @ ans.T``.

    >>> inv(np.array([[2.0]]))[1](np.array([[1.0]]))
    (array([[-0.25]]),)
    """
    ans = np.linalg.inv(a)
    return ans, MethodType(_inv_vjp, ans)


def _inv_vjp(ans: Any, g: Any) -> tuple[Any]:
    t = _T(ans)
    return (-(t @ g @ t),)


def _inv_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """``d inv(a) = -inv(a) da inv(a)``."""
    return -(ans @ tangents[0] @ ans)


op("inv", inv, jvp=_inv_jvp, keeps=("ans",), numpy=(np.linalg.inv,))


def _others(s: Any) -> tuple[Any, Any]:
    """For values ``s`` on the last axis: ``p_i``, the product of all but ``s_i``, and ``q_ij``, the
    product of all but ``s_i`` and ``s_j`` (0 for ``i == j``), by running products (no division,
    so exact where some ``s_k`` is 0), each a product at a time (``cumprod``'s derivative depends
    on where the zeros are, which vmap cannot batch)."""
    n = _shape(s)[-1]
    if n == 0:
        return s, s[..., None] * s[..., None, :]
    before = [np.ones_like(s[..., :1])]  # prod_{k < i}
    after = [before[0]]  # prod_{k > i}, from the last i
    for k in range(n - 1):
        before.append(before[-1] * s[..., k:k + 1])
        after.append(after[-1] * s[..., n - 1 - k:n - k])
    later = _triangle(n, True, s, 1)  # [i, k]: k > i
    between = [np.ones_like(s)]  # column j: prod_{i < k < j}
    for j in range(1, n):
        between.append(between[-1] * np.where(later[:, j - 1] > 0, s[..., j - 1:j], 1.0))
    first, last = np.concatenate(before, axis=-1), np.concatenate(after[::-1], axis=-1)
    q = first[..., :, None] * np.stack(between, axis=-1) * last[..., None, :] * later
    return first * last, q + _T(q)


def _svd_sign(a: Any) -> tuple[Any, Any, Any, Any]:
    """``U, s, Vh`` of ``a`` and ``det(U) det(Vh)`` (+-1, a constant), so that ``det(a) = sign * prod(s)``."""
    from ._lift import constant

    u, s, vh = np.linalg.svd(a, full_matrices=False)
    sign = np.sign(np.linalg.det(constant(u)) * np.linalg.det(constant(vh)))
    return u, s, vh, sign[..., None, None]


def _det_hessian(u: Any, s: Any, vh: Any, sign: Any, e: Any) -> Any:
    """The Hessian of ``det`` at ``a = sign U diag(s) Vh`` applied to ``e``: with ``e' = U.T e Vh.T``,
    ``H e = sign U (diag(q @ diag(e')) - q * e'.T) Vh``. The same map takes a tangent of ``a`` to
    that of ``cofactor(a)`` and a cotangent of ``cofactor(a)`` to that of ``a`` (it is symmetric)."""
    n = _shape(s)[-1]
    e1 = _T(u) @ e @ _T(vh)
    q = _others(s)[1]
    diagonal = np.sum(e1 * _eye(n, s), axis=-1)  # diag(e')
    inner = (q @ diagonal[..., None]) * _eye(n, s) - q * _T(e1)
    return sign * (u @ inner @ vh)


# Up to 3 x 3 the cofactor matrix is a polynomial of a few terms. 3 x 3: each entry is its signed
# 2 x 2 minor, ``C_ij = a[i+1, j+1] a[i+2, j+2] - a[i+1, j+2] a[i+2, j+1]`` (indices mod 3), with
# these rows and columns; 2 x 2: ``a`` turned by half a turn, negated off the diagonal.
_ROW1, _ROW2 = np.array([[1], [2], [0]]), np.array([[2], [0], [1]])
_COL1, _COL2 = _ROW1.T, _ROW2.T
_DIAGONAL2 = np.eye(2, dtype=bool)


def _minors(x: Any, y: Any) -> Any:
    """``B(x, y)_ij = x[i+1, j+1] y[i+2, j+2] - x[i+1, j+2] y[i+2, j+1]`` for 3 x 3 ``x``, ``y``:
    ``cofactor(a) = B(a, a)``, and its tangent along ``e`` is ``B(e, a) + B(a, e)``."""
    return x[..., _ROW1, _COL1] * y[..., _ROW2, _COL2] - x[..., _ROW1, _COL2] * y[..., _ROW2, _COL1]


def _small_cofactor(a: Any) -> Any:
    """The cofactor matrix of ``n x n`` matrices, ``n <= 3``, in closed form."""
    n = _shape(a)[-1]
    if n == 3:
        return _minors(a, a)
    if n == 2:
        turned = a[..., ::-1, ::-1]
        return np.where(_DIAGONAL2, turned, 0.0 - turned)  # (0 - x: no -0.0 where x is 0)
    return np.ones_like(a)


def _cofactor_tangent(a: Any, e: Any) -> Any:
    """The tangent of ``cofactor(a)`` along ``e``, which is also the cotangent of ``a`` given ``e``,
    that of ``cofactor(a)`` (the Hessian of ``det`` is symmetric): up to 3 x 3 in closed form, then
    from an SVD (``_det_hessian``)."""
    n = _shape(a)[-1]
    if n == 3:
        return _minors(e, a) + _minors(a, e)
    if n == 2:
        return _small_cofactor(e)  # (linear in a)
    if n <= 1:
        return np.zeros_like(e)
    return _det_hessian(*_svd_sign(a), e)


def cofactor(a: Any) -> tuple[Any, Any]:
    """The cofactor matrix ``adj(a).T``, which is ``d det(a) / da``: exact at singular matrices too
    (nonzero at corank 1, zero from corank 2). Up to 3 x 3 in closed form (the signed minors); from
    4 x 4, from an SVD ``a = U diag(s) Vh``: ``det(U) det(Vh) U diag(p) Vh`` with ``p_i`` the
    product of the singular values but ``s_i``. An op of its own (``det``'s rules call it) so that
    its derivative, the Hessian of ``det``, is exact at any rank as well (``_cofactor_tangent``).

    >>> cofactor(np.array([[1.0, 2.0], [2.0, 4.0]]))[0]  # singular: adj(a).T is not 0
    array([[ 4., -2.],
           [-2.,  1.]])
    """
    from ._lift import apply  # (the Tensor layer's, once it is loaded)
    from ._lift import tensor_type as Tensor

    if type(a) is Tensor:  # a replayed rule: this op again
        return apply(cofactor, "cofactor", a), MethodType(_cofactor_vjp, a)  # type: ignore[misc]
    if _shape(a)[-1] <= 3:
        return _small_cofactor(a), MethodType(_cofactor_vjp, a)
    u, s, vh, sign = _svd_sign(a)
    return sign * ((u * _others(s)[0][..., None, :]) @ vh), partial(_svd_cofactor_vjp, u, s, vh, sign)


def _cofactor_vjp(a: Any, g: Any) -> tuple[Any]:
    return (_cofactor_tangent(a, g),)


def _svd_cofactor_vjp(u: Any, s: Any, vh: Any, sign: Any, g: Any) -> tuple[Any]:
    return (_det_hessian(u, s, vh, sign, g),)


def _cofactor_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    return _cofactor_tangent(a, tangents[0])


op("cofactor", cofactor, jvp=_cofactor_jvp, keeps=("a", "work"))


def det(a: Any) -> tuple[Any, Any]:
    """The determinant. Cotangent ``g * cofactor(a)`` (``g * det(a) * inv(a).T`` where ``a`` is
    invertible; exact at singular matrices too).

    >>> det(np.array([[2.0, 1.0], [1.0, 3.0]]))[1](np.array(1.0))[0]
    array([[ 3., -1.],
           [-1.,  2.]])
    """
    ans = np.linalg.det(a)
    return ans, MethodType(_det_vjp, a)


def _det_vjp(a: Any, g: Any) -> tuple[Any]:
    return (g[..., None, None] * cofactor(a)[0],)


def _det_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """``d det = sum(cofactor(a) * da)`` (``det tr(inv(a) da)`` where ``a`` is invertible)."""
    return np.sum(cofactor(a)[0] * tangents[0], axis=(-2, -1))


op("det", det, jvp=_det_jvp, keeps=("a",), numpy=(np.linalg.det,))


def slogdet(a: Any) -> tuple[Any, Any]:
    """``log |det(a)|`` (the second result of ``np.linalg.slogdet``). Cotangent ``g * inv(a).T``;
    at a singular matrix (``-inf``) ``g * cofactor(a) / det(a)``, whose entries are ``inf`` or
    ``nan`` (as JAX's).

    >>> float(slogdet(np.array([[-2.0]]))[0]), slogdet(np.array([[-2.0]]))[1](np.array(1.0))
    (0.6931471805599453, (array([[-0.5]]),))
    """
    ans = np.linalg.slogdet(a)[1]
    return ans, MethodType(_slogdet_vjp, a)


def _inverse_transposed(a: Any) -> Any:
    """``inv(a).T``, the gradient of ``log |det(a)|``; at a singular matrix its limit ``cofactor(a) /
    det(a)``, ``inf`` or ``nan`` where it does not exist."""
    try:
        return _T(np.linalg.inv(a))
    except np.linalg.LinAlgError:
        with np.errstate(divide="ignore", invalid="ignore"):
            return cofactor(a)[0] / np.linalg.det(a)[..., None, None]


def _slogdet_vjp(a: Any, g: Any) -> tuple[Any]:
    with np.errstate(invalid="ignore"):  # (0 * inf at a singular matrix: nan)
        return (g[..., None, None] * _inverse_transposed(a),)


def _slogdet_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """``d log |det(a)| = tr(inv(a) da)``."""
    with np.errstate(invalid="ignore"):
        return np.sum(_inverse_transposed(a) * tangents[0], axis=(-2, -1))


op("slogdet", slogdet, jvp=_slogdet_jvp, keeps=("a",))


# NumPy 2 reads a 1-D ``b`` of np.linalg.solve as a vector; NumPy 1.x also a ``b`` with one axis
# fewer than ``a`` (a stack of vectors), and a 1-D ``b`` with a stack of matrices not at all.
_VECTOR_STACKS = NUMPY1


def rhs_is_vector(a_ndim: int, b_ndim: int) -> bool:
    """True where ``np.linalg.solve(a, b)`` reads ``b`` as a vector (or a stack of them), as the
    installed NumPy does: 1-D, and on NumPy 1.x also with one axis fewer than ``a``.

    >>> rhs_is_vector(2, 1), rhs_is_vector(3, 3)
    (True, False)
    """
    return b_ndim == 1 or (_VECTOR_STACKS and b_ndim == a_ndim - 1)


def solve(a: Any, b: Any, need: tuple[bool, bool] = BOTH) -> tuple[Any, Any]:
    """``x`` with ``a @ x == b`` (``b`` a vector when 1-D, as in NumPy; see ``rhs_is_vector``).
    Cotangents ``gb = solve(a.T, g)`` and ``ga = -gb @ x.T``, unbroadcast over the batch axes.

    >>> solve(np.array([[2.0, 0.0], [0.0, 4.0]]), np.array([2.0, 2.0]))[0]
    array([1. , 0.5])
    """
    # The batch axes are lined up explicitly (leading 1s) and a vector is solved as a column, so
    # that no call depends on NumPy's rank-dependent rules (a batching transform needs that).
    if rhs_is_vector(np.ndim(a), np.ndim(b)):
        col = np.reshape(b, (1,) * (np.ndim(a) - 1 - np.ndim(b)) + _shape(b) + (1,))
        ans = np.linalg.solve(a, col)[..., 0]
    else:
        ans = np.linalg.solve(*_same_rank(a, b))
    return ans, partial(_solve_vjp, a, b, ans, need)


def _same_rank(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` with leading size-1 axes added to the one with fewer batch axes."""
    na, nb = np.ndim(a), np.ndim(b)
    if na < nb:
        a = np.reshape(a, (1,) * (nb - na) + _shape(a))
    elif nb < na:
        b = np.reshape(b, (1,) * (na - nb) + _shape(b))
    return a, b


def _solve_vjp(a: Any, b: Any, ans: Any, need: tuple[bool, bool], g: Any) -> tuple[Any, Any]:
    if rhs_is_vector(np.ndim(a), np.ndim(b)):  # vectors: solved as columns (g has a's batch axes)
        gb = np.linalg.solve(_T(a), g[..., None])[..., 0]
        ga = -(gb[..., :, None] * ans[..., None, :]) if need[0] else None
    else:
        gb = np.linalg.solve(*_same_rank(_T(a), g))
        ga = -(gb @ _T(ans)) if need[0] else None
    return (unbroadcast(ga, a) if need[0] else None, unbroadcast(gb, b) if need[1] else None)


def _solve_jvp(tangents: tuple[Any, ...], ans: Any, a: Any, b: Any) -> Any:
    """``dx = solve(a, db - da x)``."""
    ta, tb = tangents
    if np.ndim(b) == 1:  # vectors: solved as columns
        rhs = total(tb, None if ta is None else -(ta @ ans[..., None])[..., 0])
        return np.linalg.solve(*_same_rank(a, rhs[..., None]))[..., 0]
    rhs = total(tb, None if ta is None else -(ta @ ans))
    return np.linalg.solve(*_same_rank(a, rhs))


op("solve", solve, jvp=_solve_jvp, need=True, keeps=("a", "b", "ans"), numpy=(np.linalg.solve,))


# ----- factorisations -----------------------------------------------------------------------------
def cholesky(a: Any) -> tuple[Any, Any]:
    """The lower Cholesky factor ``L`` of a symmetric positive-definite matrix, read from the lower
    triangle of ``a`` (as NumPy).

    Cotangent: ``S = L^-T phi(L.T g) L^-1``, where ``phi`` keeps the lower triangle and halves the
    diagonal, put onto the lower triangle (``S + S.T`` below the diagonal, ``S`` on it).

    >>> cholesky(np.array([[4.0]]))[1](np.array([[1.0]]))
    (array([[0.25]]),)
    """
    ans = np.linalg.cholesky(a)
    return ans, MethodType(_cholesky_vjp, ans)


def _phi(low: Any) -> np.ndarray:
    """The lower triangle with the diagonal halved, as a constant mask."""
    n = _shape(low)[-1]
    return np.tril(np.ones((n, n), _dtype(low)), -1) + 0.5 * _eye(n, low)


def _cholesky_vjp(low: Any, g: Any) -> tuple[Any]:
    p = (_T(low) @ g) * _phi(low)
    x = np.linalg.solve(_T(low), p)  # L^-T P
    s = _T(np.linalg.solve(_T(low), _T(x)))  # L^-T P L^-1
    return (_onto_triangle(s, False),)


def _cholesky_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """``dL = L phi(L^-1 dM L^-T)``, ``dM`` the tangent's lower triangle mirrored."""
    x = np.linalg.solve(ans, _mirrored(tangents[0], False))  # L^-1 dM
    y = np.linalg.solve(ans, _T(x))  # L^-1 dM L^-T
    return ans @ (y * _phi(ans))


op("cholesky", cholesky, jvp=_cholesky_jvp, keeps=("ans",), numpy=(np.linalg.cholesky,))


def eigh(a: Any, UPLO: str = "L") -> tuple[Any, Any]:  # noqa: N803 - NumPy's name
    """Eigenvalues ``w`` (ascending) and eigenvectors ``V`` of a symmetric matrix, read from one
    triangle of ``a`` (``UPLO``, as NumPy), packed as ``ans[..., 0, :] = w`` and ``ans[..., 1:, :] = V``.

    Cotangent: ``S = V (diag(gw) + F * (V.T gV)) V.T`` with ``F_ij = 1 / (w_j - w_i)``, 0 on the
    diagonal and between equal eigenvalues (see the module's conventions), put onto the triangle read.

    >>> ans, vjp = eigh(np.array([[2.0, 0.0], [0.0, 1.0]]))
    >>> ans[0], vjp(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))[0]
    (array([1., 2.]), array([[0., 0.],
           [0., 1.]]))
    """
    w, v = np.linalg.eigh(a, UPLO)  # type: ignore[call-overload]
    ans = np.concatenate([w[..., None, :], v], axis=-2)
    return ans, partial(_eigh_vjp, w, v, UPLO == "U")


def _eigh_coupling(w: Any) -> tuple[Any, Any]:
    """``F_ij = 1 / (w_j - w_i)`` (0 between equal eigenvalues), and which pairs count as equal."""
    diff = w[..., None, :] - w[..., :, None]  # w_j - w_i
    equal = _near(diff, _tolerance(w, _shape(w)[-1]))
    return _reciprocal_or_zero(diff, equal), equal


def _eigh_vjp(w: Any, v: Any, upper: bool, g: Any) -> tuple[Any, None]:
    n = _shape(w)[-1]
    gw, gv = g[..., 0, :], g[..., 1:, :]
    f, equal = _eigh_coupling(w)
    cross = _T(v) @ gv
    _check_repeated(w, equal, gw, cross - _T(cross), "eigh", "eigenvalues")
    inner = f * cross + gw[..., :, None] * _eye(n, w)
    return (_onto_triangle(v @ inner @ _T(v), upper), None)


def _eigh_jvp(tangents: tuple[Any, ...], ans: Any, a: Any, UPLO: str = "L") -> Any:  # noqa: N803
    """``dw = diag(C)``, ``dV = V (F * C)`` with ``C = V.T dM V``, ``dM`` the tangent's triangle mirrored."""
    w, v = ans[..., 0, :], ans[..., 1:, :]
    f, equal = _eigh_coupling(w)
    c = _T(v) @ _mirrored(tangents[0], UPLO == "U") @ v
    _check_split(w, equal, c, "eigh", "eigenvalues")
    dw = np.sum(c * _eye(_shape(w)[-1], w), axis=-1)
    return np.concatenate([dw[..., None, :], v @ (f * c)], axis=-2)


op("eigh", eigh, jvp=_eigh_jvp, keeps=("work",))


def svd(a: Any) -> tuple[Any, Any]:
    """The thin SVD ``a = U diag(s) Vh`` (``full_matrices=False``), packed along one last axis:
    ``U`` (m*k entries), ``s`` (k), ``Vh`` (k*n), with ``k = min(m, n)``.

    Cotangent ``U (diag(gs) + T) Vh + (I - U U.T) gU diag(1/s) Vh + U diag(1/s) gVh (I - V V.T)``
    with ``T_ij = (a_ij + b_ij) / (2 (s_j - s_i)) + (a_ij - b_ij) / (2 (s_j + s_i))``,
    ``a = U.T gU - gU.T U``, ``b = V.T gV - gV.T V`` (see the module's conventions).

    >>> ans, vjp = svd(np.array([[3.0, 0.0], [0.0, 2.0]]))
    >>> ans[4:6]
    array([3., 2.])
    """
    u, s, vh = np.linalg.svd(a, full_matrices=False)
    shape = _shape(a)
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    ans = np.concatenate([np.reshape(u, (*batch, m * k)), s, np.reshape(vh, (*batch, k * n))], axis=-1)
    return ans, partial(_svd_vjp, u, s, vh, (m, n))


def unpack_svd(packed: Any, m: int, n: int) -> tuple[Any, Any, Any]:
    """``U, s, Vh`` from the packed result (or cotangent) of ``svd`` for an ``m x n`` matrix."""
    k = min(m, n)
    batch = _shape(packed)[:-1]
    u = np.reshape(packed[..., : m * k], (*batch, m, k))
    s = packed[..., m * k: m * k + k]
    vh = np.reshape(packed[..., m * k + k:], (*batch, k, n))
    return u, s, vh


def _svd_vjp(u: Any, s: Any, vh: Any, mn: tuple[int, int], g: Any) -> tuple[Any]:
    m, n = mn
    k = min(m, n)
    gu, gs, gvh = unpack_svd(g, m, n)
    gv = _T(gvh)
    j = _T(u) @ gu
    kk = vh @ gv
    a_ = j - _T(j)
    b_ = kk - _T(kk)
    tol = _tolerance(s, max(m, n))
    minus = s[..., None, :] - s[..., :, None]
    plus = s[..., None, :] + s[..., :, None]
    equal = _near(minus, tol)
    _check_repeated(s, equal, gs, a_ + b_, "svd", "singular values")
    t = 0.5 * ((a_ + b_) * _reciprocal_or_zero(minus, equal)
               + (a_ - b_) * _reciprocal_or_zero(plus, _near(plus, tol)))
    ga = u @ (t + gs[..., :, None] * _eye(k, s)) @ vh
    s_inv = _reciprocal_or_zero(s, _near(s, tol[..., 0]))[..., None, :]
    if m > k:  # the part of gU outside U's columns
        ga = ga + ((gu - u @ j) * s_inv) @ vh
    if n > k:  # the part of gV outside V's columns
        ga = ga + (u * s_inv) @ (gvh - _T(kk) @ vh)
    return (ga,)


def _svd_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """With ``dP = U.T da V``: ``ds = diag(dP)``, ``dU = U (sym(dP) / (s_j - s_i) + skew(dP) / (s_j + s_i))``
    and ``dV = V (sym(dP) / (s_j - s_i) - skew(dP) / (s_j + s_i))`` (the VJP's conventions), plus
    ``(I - U U.T) da V / s`` (tall) or ``(I - V V.T) da.T U / s`` (wide)."""
    m, n = _shape(a)[-2:]
    k = min(m, n)
    batch = _shape(a)[:-2]
    u, s, vh = unpack_svd(ans, m, n)
    t, v = tangents[0], _T(vh)
    dp = _T(u) @ t @ v
    sym, skew = (dp + _T(dp)) / 2, (dp - _T(dp)) / 2
    tol = _tolerance(s, max(m, n))
    minus = s[..., None, :] - s[..., :, None]
    plus = s[..., None, :] + s[..., :, None]
    equal = _near(minus, tol)
    _check_split(s, equal, sym, "svd", "singular values")
    by_minus = sym * _reciprocal_or_zero(minus, equal)
    by_plus = skew * _reciprocal_or_zero(plus, _near(plus, tol))
    du = u @ (by_minus + by_plus)
    dv = v @ (by_minus - by_plus)
    s_inv = _reciprocal_or_zero(s, _near(s, tol[..., 0]))[..., None, :]
    if m > k:  # the part of dU outside U's columns
        du = du + (t @ v - u @ dp) * s_inv
    if n > k:  # the part of dV outside V's columns
        dv = dv + (_T(t) @ u - v @ _T(dp)) * s_inv
    ds = np.sum(dp * _eye(k, s), axis=-1)
    return np.concatenate([np.reshape(du, (*batch, m * k)), ds, np.reshape(_T(dv), (*batch, k * n))], axis=-1)


op("svd", svd, jvp=_svd_jvp, keeps=("work",))


def qr(a: Any) -> tuple[Any, Any]:
    """The reduced QR factorisation ``a = Q R``, packed along one last axis: ``Q`` (m*k entries),
    then ``R`` (k*n), ``k = min(m, n)``.

    For ``m >= n`` the cotangent is ``(gQ + Q copyltu(M)) R^-T`` with ``M = R gR.T - gQ.T Q``
    (``copyltu`` mirrors the lower triangle onto the upper); a wide matrix ``[X, Y]`` is taken
    as ``X = Q U`` (square, the same rule with ``gQ + Y gV.T``) and ``Y = Q V``. ``R`` must have
    a nonzero diagonal (full rank).

    >>> np.abs(qr(np.array([[2.0], [0.0]]))[0])  # Q, then R (their signs are LAPACK's choice)
    array([1., 0., 2.])
    """
    q, r = np.linalg.qr(a)
    shape = _shape(a)
    batch, (m, n) = shape[:-2], shape[-2:]
    k = min(m, n)
    ans = np.concatenate([np.reshape(q, (*batch, m * k)), np.reshape(r, (*batch, k * n))], axis=-1)
    return ans, partial(_qr_vjp, a, q, r, (m, n))


def unpack_qr(packed: Any, m: int, n: int) -> tuple[Any, Any]:
    """``Q, R`` from the packed result (or cotangent) of ``qr`` for an ``m x n`` matrix."""
    k = min(m, n)
    batch = _shape(packed)[:-1]
    return (np.reshape(packed[..., : m * k], (*batch, m, k)), np.reshape(packed[..., m * k:], (*batch, k, n)))


def _qr_tall(q: Any, r: Any, gq: Any, gr: Any) -> Any:
    """The cotangent of a tall (or square) ``a = Q R`` (``R`` square)."""
    k = _shape(r)[-1]
    mm = r @ _T(gr) - _T(gq) @ q
    lower = np.tril(np.ones((k, k), _dtype(r)), -1)
    copyltu = mm * lower + _T(mm * lower) + mm * _eye(k, r)
    b = gq + q @ copyltu
    return _T(np.linalg.solve(r, _T(b)))  # b R^-T


def _qr_vjp(a: Any, q: Any, r: Any, mn: tuple[int, int], g: Any) -> tuple[Any]:
    m, n = mn
    gq, gr = unpack_qr(g, m, n)
    if m >= n:
        return (_qr_tall(q, r, gq, gr),)
    y, gv = a[..., :, m:], gr[..., :, m:]
    gx = _qr_tall(q, r[..., :, :m], gq + y @ _T(gv), gr[..., :, :m])
    return (np.concatenate([gx, q @ gv], axis=-1),)


def _qr_tall_jvp(q: Any, r: Any, t: Any) -> tuple[Any, Any]:
    """``dQ, dR`` of a tall (or square) ``a = Q R``: with ``X = Q.T da R^-1`` and ``W`` the skew
    matrix of ``X``'s strict lower triangle, ``dR = (X - W) R`` and ``dQ = da R^-1 - Q (X - W)``."""
    k = _shape(r)[-1]
    t_r = _T(np.linalg.solve(_T(r), _T(t)))  # da R^-1
    x = _T(q) @ t_r
    low = x * _triangle(k, False, r, 1)
    upper = x - low + _T(low)  # X - W: upper triangular
    return t_r - q @ upper, upper @ r


def _qr_jvp(tangents: tuple[Any, ...], ans: Any, a: Any) -> Any:
    """The tall rule; a wide ``[X, Y] = Q [U, V]`` takes it for ``X``, and ``dV = Q.T (dY - dQ V)``."""
    m, n = _shape(a)[-2:]
    batch = _shape(a)[:-2]
    q, r = unpack_qr(ans, m, n)
    t = tangents[0]
    if m >= n:
        dq, dr = _qr_tall_jvp(q, r, t)
    else:
        dq, du = _qr_tall_jvp(q, r[..., :, :m], t[..., :, :m])
        dr = np.concatenate([du, _T(q) @ (t[..., :, m:] - dq @ r[..., :, m:])], axis=-1)
    k = min(m, n)
    return np.concatenate([np.reshape(dq, (*batch, m * k)), np.reshape(dr, (*batch, k * n))], axis=-1)


op("qr", qr, jvp=_qr_jvp, keeps=("a", "work"))


# ----- pseudo-inverse and least squares -------------------------------------------------------------
def _pinv_cotangent(a: Any, p: Any, g: Any) -> Any:
    """The cotangent of ``a`` given ``g``, that of ``p = pinv(a)`` (valid while the rank is constant):
    ``-P.T g P.T + (I - a P) g.T P P.T + P.T P g.T (I - P a)``."""
    m, n = _shape(a)[-2:]
    pt, gt = _T(p), _T(g)
    return (-(pt @ g @ pt) + (_eye(m, a) - a @ p) @ gt @ (p @ pt)
            + (pt @ p) @ gt @ (_eye(n, a) - p @ a))


def _pinv_tangent(a: Any, p: Any, t: Any) -> Any:
    """The tangent of ``p = pinv(a)`` given ``t``, that of ``a`` (constant rank; the transpose of
    ``_pinv_cotangent``): ``-P t P + P P.T t.T (I - a P) + (I - P a) t.T P.T P``."""
    m, n = _shape(a)[-2:]
    pt, tt = _T(p), _T(t)
    return (-(p @ t @ p) + (p @ pt) @ tt @ (_eye(m, a) - a @ p)
            + (_eye(n, a) - p @ a) @ tt @ (pt @ p))


def pinv(a: Any, rcond: Any = None, hermitian: bool = False) -> tuple[Any, Any]:
    """The Moore-Penrose pseudo-inverse (singular values below ``rcond * max(s)`` count as 0).
    ``hermitian=True`` reads the lower triangle of ``a`` mirrored, as NumPy (by ``eigh``).

    The gradient is that of a matrix of constant rank.

    >>> pinv(np.array([[2.0, 0.0]]))[0]
    array([[0.5],
           [0. ]])
    """
    ans = np.linalg.pinv(a, hermitian=hermitian) if rcond is None else np.linalg.pinv(a, rcond, hermitian)
    return ans, partial(_pinv_vjp, a, ans, hermitian)


def _pinv_vjp(a: Any, ans: Any, hermitian: bool, g: Any) -> tuple[Any, None, None]:
    if hermitian:
        return (_onto_triangle(_pinv_cotangent(_mirrored(a, False), ans, g), False), None, None)
    return (_pinv_cotangent(a, ans, g), None, None)


def _pinv_jvp(tangents: tuple[Any, ...], ans: Any, a: Any, rcond: Any = None, hermitian: bool = False) -> Any:
    if hermitian:
        return _pinv_tangent(_mirrored(a, False), ans, _mirrored(tangents[0], False))
    return _pinv_tangent(a, ans, tangents[0])


op("pinv", pinv, jvp=_pinv_jvp, keeps=("a", "ans"), numpy=(np.linalg.pinv,))


def _lstsq_pinv(a: Any, rcond: Any) -> Any:
    """``pinv(a)`` with lstsq's cutoff for small singular values."""
    m, n = _shape(a)[-2:]
    cutoff = float(np.finfo(_dtype(a)).eps) * max(m, n) if rcond is None else rcond
    return np.linalg.pinv(a, cutoff)


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[Any, Any]:
    """The least-squares solution ``x`` of ``a @ x = b`` (the first result of ``np.linalg.lstsq``,
    to rounding), computed as ``pinv(a) @ b`` with lstsq's cutoff for small singular values (so
    that it batches, as NumPy's lstsq does not).

    ``gb = pinv(a).T @ g``, and ``a`` gets ``pinv``'s cotangent for ``g b.T`` (constant rank).

    >>> lstsq(np.array([[1.0], [1.0]]), np.array([1.0, 3.0]))[0]
    array([2.])
    """
    p = _lstsq_pinv(a, rcond)
    ans = p @ b
    return ans, partial(_lstsq_vjp, a, b, p)


def _lstsq_vjp(a: Any, b: Any, p: Any, g: Any) -> tuple[Any, Any, None]:
    vector = np.ndim(b) == 1
    g2, b2 = (g[:, None], b[:, None]) if vector else (g, b)
    gb = _T(p) @ g2
    ga = _pinv_cotangent(a, p, g2 @ _T(b2))
    return (ga, gb[:, 0] if vector else gb, None)


def _lstsq_jvp(tangents: tuple[Any, ...], ans: Any, a: Any, b: Any, rcond: Any = None) -> Any:
    """``dx = dP b + P db``, ``dP`` pinv's tangent."""
    ta, tb = tangents[0], tangents[1]
    p = _lstsq_pinv(a, rcond)
    return total(None if ta is None else _pinv_tangent(a, p, ta) @ b, None if tb is None else p @ tb)


op("lstsq", lstsq, jvp=_lstsq_jvp, keeps=("a", "b", "work"))


# ----- norms ------------------------------------------------------------------------------------------
def norm(x: Any, ord: float = 2, axis: Any = None, keepdims: bool = False) -> tuple[Any, Any]:  # noqa: A002
    """The vector ``p``-norm ``sum(|x| ** p) ** (1 / p)`` over ``axis`` (None: all axes; a pair
    of axes with ``p = 2``: the Frobenius norm). Cotangent ``g sign(x) |x|**(p-1) / ans**(p-1)``,
    0 where ``ans == 0`` (a subgradient).

    >>> norm(np.array([3.0, 4.0]))[0], norm(np.zeros(2))[1](np.array(1.0))[0]
    (array(5.), array([0., 0.]))
    """
    from ._lift import apply  # (the Tensor layer's, once it is loaded)
    from ._lift import tensor_type as Tensor

    p = float(ord)
    if type(x) is Tensor:  # a replayed rule: the norm as this op again, so its derivative keeps the rule at 0
        kept = apply(norm, "norm", x, ord, axis, True)  # type: ignore[misc]
    elif p == 2:
        kept = np.sqrt(np.sum(x * x, axis=axis, keepdims=True))
    else:
        total = np.sum(np.abs(x) ** weak(p, x), axis=axis, keepdims=True)
        kept = total ** weak(1 / p, total)
    ans = kept if keepdims else np.reshape(kept, _dropped(_shape(x), axis))
    return ans, partial(_norm_vjp, x, kept, p, axis, keepdims)


def _dropped(shape: tuple[int, ...], axis: Any) -> tuple[int, ...]:
    if axis is None:
        return ()
    axes = {a % len(shape) for a in (axis if isinstance(axis, tuple) else (axis,))}
    return tuple(k for i, k in enumerate(shape) if i not in axes)


def _norm_slope(x: Any, kept: Any, p: float) -> tuple[Any, Any]:
    """``d ans / dx = grow * scale``: ``grow = sign(x) |x|**(p-1)`` (``x`` for ``p = 2``) and
    ``scale = 1 / ans**(p-1)``, 0 where ``ans == 0``."""
    zero = kept == 0
    if p == 2:
        return x, _reciprocal_or_zero(kept, zero)
    ax = np.abs(x)
    grow = np.where(ax == 0, weak(0.0, x), np.sign(x) * np.where(ax == 0, weak(1.0, x), ax) ** weak(p - 1, x))
    return grow, _reciprocal_or_zero(kept ** weak(p - 1, kept), zero)


def _norm_vjp(x: Any, kept: Any, p: float, axis: Any, keepdims: bool, g: Any) -> tuple[Any, None, None, None]:
    g = g if keepdims else np.reshape(g, _shape(kept))
    grow, scale = _norm_slope(x, kept, p)
    return (g * grow * scale, None, None, None)


def _norm_jvp(tangents: tuple[Any, ...], ans: Any, x: Any, ord: float = 2, axis: Any = None,  # noqa: A002
              keepdims: bool = False) -> Any:
    """``sum(grow * dx) * scale`` over ``axis`` (``_norm_slope``)."""
    shape = _shape(x)
    reduced = range(len(shape)) if axis is None else {a % len(shape) for a in (axis if isinstance(axis, tuple)
                                                                               else (axis,))}
    kept = ans if keepdims else np.reshape(ans, tuple(1 if i in reduced else k for i, k in enumerate(shape)))
    grow, scale = _norm_slope(x, kept, float(ord))
    out = np.sum(grow * tangents[0], axis=axis, keepdims=True) * scale
    return out if keepdims else np.reshape(out, _shape(ans))


op("norm", norm, jvp=_norm_jvp, keeps=("x", "ans"), numpy=(np.linalg.norm,))


# The forward-mode rules, each beside its op above: ``rule(tangents, ans, *inputs)`` (see ``_tangent.py``).
