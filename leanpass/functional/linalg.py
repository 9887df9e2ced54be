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
- ``eigh`` and ``cholesky`` read the symmetric part ``(a + a.T) / 2`` of their input, as JAX
  does (NumPy reads one triangle: the same for a symmetric matrix, bit for bit), so their
  gradients are symmetric and agree with finite differences in any direction.
- ``norm`` at 0: the subgradient 0.

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

BOTH = (True, True)


def _T(x: Any) -> Any:  # noqa: N802 - the matrix transpose of the last two axes
    return np.swapaxes(x, -1, -2)


def _sym(x: Any) -> Any:
    return (x + _T(x)) / 2


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
    from ..tensor import Tensor

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


def _tolerance(values: Any, n: int) -> Any:
    """How close two eigen- or singular values must be to count as equal (per matrix)."""
    eps = float(np.finfo(_dtype(values)).eps)
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


def _inverse_for_gradient(a: Any, name: str) -> Any:
    try:
        return np.linalg.inv(a)
    except np.linalg.LinAlgError:
        raise np.linalg.LinAlgError(
            f"linalg.{name}: the gradient at a singular matrix (of the determinant, the adjugate) "
            "is not computed by LeanPass, which takes it through the inverse. Keep the matrix "
            "invertible (e.g. add a small multiple of the identity)."
        ) from None


def det(a: Any) -> tuple[Any, Any]:
    """The determinant. Cotangent ``g * ans * inv(a).T``.

    >>> det(np.array([[2.0, 1.0], [1.0, 3.0]]))[1](np.array(1.0))[0]
    array([[ 3., -1.],
           [-1.,  2.]])
    """
    ans = np.linalg.det(a)
    return ans, partial(_det_vjp, a, ans)


def _det_vjp(a: Any, ans: Any, g: Any) -> tuple[Any]:
    return ((g * ans)[..., None, None] * _T(_inverse_for_gradient(a, "det")),)


def slogdet(a: Any) -> tuple[Any, Any]:
    """``log |det(a)|`` (the second result of ``np.linalg.slogdet``). Cotangent ``g * inv(a).T``.

    >>> float(slogdet(np.array([[-2.0]]))[0]), slogdet(np.array([[-2.0]]))[1](np.array(1.0))
    (0.6931471805599453, (array([[-0.5]]),))
    """
    ans = np.linalg.slogdet(a)[1]
    return ans, MethodType(_slogdet_vjp, a)


def _slogdet_vjp(a: Any, g: Any) -> tuple[Any]:
    return (g[..., None, None] * _T(_inverse_for_gradient(a, "slogdet")),)


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


# ----- factorisations -----------------------------------------------------------------------------
def cholesky(a: Any) -> tuple[Any, Any]:
    """The lower Cholesky factor ``L`` of a symmetric positive-definite ``a`` (of its symmetric part).

    Cotangent ``sym(L^-T phi(L.T g) L^-1)``, where ``phi`` keeps the lower triangle and halves
    the diagonal.

    >>> cholesky(np.array([[4.0]]))[1](np.array([[1.0]]))
    (array([[0.25]]),)
    """
    ans = np.linalg.cholesky(_sym(a))
    return ans, MethodType(_cholesky_vjp, ans)


def _cholesky_vjp(low: Any, g: Any) -> tuple[Any]:
    n = _shape(low)[-1]
    phi = np.tril(np.ones((n, n), _dtype(low)), -1) + 0.5 * _eye(n, low)  # a constant mask
    p = (_T(low) @ g) * phi
    x = np.linalg.solve(_T(low), p)  # L^-T P
    s = _T(np.linalg.solve(_T(low), _T(x)))  # L^-T P L^-1
    return (_sym(s),)


def eigh(a: Any, UPLO: str = "L") -> tuple[Any, Any]:  # noqa: N803 - NumPy's name
    """Eigenvalues ``w`` (ascending) and eigenvectors ``V`` of a symmetric matrix (of the symmetric
    part of ``a``: ``UPLO`` changes nothing), packed as ``ans[..., 0, :] = w`` and ``ans[..., 1:, :] = V``.

    Cotangent ``sym(V (diag(gw) + F * (V.T gV)) V.T)`` with ``F_ij = 1 / (w_j - w_i)``, 0 on
    the diagonal and between equal eigenvalues (see the module's conventions).

    >>> ans, vjp = eigh(np.array([[2.0, 0.0], [0.0, 1.0]]))
    >>> ans[0], vjp(np.array([[1.0, 0.0], [0.0, 0.0], [0.0, 0.0]]))[0]
    (array([1., 2.]), array([[0., 0.],
           [0., 1.]]))
    """
    w, v = np.linalg.eigh(_sym(a), UPLO)  # type: ignore[call-overload]
    ans = np.concatenate([w[..., None, :], v], axis=-2)
    return ans, partial(_eigh_vjp, w, v)


def _eigh_vjp(w: Any, v: Any, g: Any) -> tuple[Any, None]:
    n = _shape(w)[-1]
    gw, gv = g[..., 0, :], g[..., 1:, :]
    diff = w[..., None, :] - w[..., :, None]  # w_j - w_i
    equal = _near(diff, _tolerance(w, n))
    cross = _T(v) @ gv
    _check_repeated(w, equal, gw, cross - _T(cross), "eigh", "eigenvalues")
    inner = _reciprocal_or_zero(diff, equal) * cross + gw[..., :, None] * _eye(n, w)
    return (_sym(v @ inner @ _T(v)), None)


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


# ----- pseudo-inverse and least squares -------------------------------------------------------------
def _pinv_cotangent(a: Any, p: Any, g: Any) -> Any:
    """The cotangent of ``a`` given ``g``, that of ``p = pinv(a)`` (valid while the rank is constant):
    ``-P.T g P.T + (I - a P) g.T P P.T + P.T P g.T (I - P a)``."""
    m, n = _shape(a)[-2:]
    pt, gt = _T(p), _T(g)
    return (-(pt @ g @ pt) + (_eye(m, a) - a @ p) @ gt @ (p @ pt)
            + (pt @ p) @ gt @ (_eye(n, a) - p @ a))


def pinv(a: Any, rcond: Any = None) -> tuple[Any, Any]:
    """The Moore-Penrose pseudo-inverse (singular values below ``rcond * max(s)`` count as 0).

    The gradient is that of a matrix of constant rank.

    >>> pinv(np.array([[2.0, 0.0]]))[0]
    array([[0.5],
           [0. ]])
    """
    ans = np.linalg.pinv(a) if rcond is None else np.linalg.pinv(a, rcond)
    return ans, partial(_pinv_vjp, a, ans)


def _pinv_vjp(a: Any, ans: Any, g: Any) -> tuple[Any, None]:
    return (_pinv_cotangent(a, ans, g), None)


def lstsq(a: Any, b: Any, rcond: Any = None) -> tuple[Any, Any]:
    """The least-squares solution ``x`` of ``a @ x = b`` (the first result of ``np.linalg.lstsq``,
    to rounding), computed as ``pinv(a) @ b`` with lstsq's cutoff for small singular values (so
    that it batches, as NumPy's lstsq does not).

    ``gb = pinv(a).T @ g``, and ``a`` gets ``pinv``'s cotangent for ``g b.T`` (constant rank).

    >>> lstsq(np.array([[1.0], [1.0]]), np.array([1.0, 3.0]))[0]
    array([2.])
    """
    m, n = _shape(a)[-2:]
    cutoff = float(np.finfo(_dtype(a)).eps) * max(m, n) if rcond is None else rcond
    p = np.linalg.pinv(a, cutoff)
    ans = p @ b
    return ans, partial(_lstsq_vjp, a, b, p)


def _lstsq_vjp(a: Any, b: Any, p: Any, g: Any) -> tuple[Any, Any, None]:
    vector = np.ndim(b) == 1
    g2, b2 = (g[:, None], b[:, None]) if vector else (g, b)
    gb = _T(p) @ g2
    ga = _pinv_cotangent(a, p, g2 @ _T(b2))
    return (ga, gb[:, 0] if vector else gb, None)


# ----- norms ------------------------------------------------------------------------------------------
def norm(x: Any, ord: float = 2, axis: Any = None, keepdims: bool = False) -> tuple[Any, Any]:  # noqa: A002
    """The vector ``p``-norm ``sum(|x| ** p) ** (1 / p)`` over ``axis`` (None: all axes; a pair
    of axes with ``p = 2``: the Frobenius norm). Cotangent ``g sign(x) |x|**(p-1) / ans**(p-1)``,
    0 where ``ans == 0`` (a subgradient).

    >>> norm(np.array([3.0, 4.0]))[0], norm(np.zeros(2))[1](np.array(1.0))[0]
    (array(5.), array([0., 0.]))
    """
    from ..tensor import Tensor, apply

    p = float(ord)
    if type(x) is Tensor:  # a replayed rule: the norm as this op again, so its derivative keeps the rule at 0
        kept = apply(norm, "norm", x, ord, axis, True)
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


def _norm_vjp(x: Any, kept: Any, p: float, axis: Any, keepdims: bool, g: Any) -> tuple[Any, None, None, None]:
    g = g if keepdims else np.reshape(g, _shape(kept))
    zero = kept == 0
    if p == 2:
        return (g * x * _reciprocal_or_zero(kept, zero), None, None, None)
    ax = np.abs(x)
    scale = _reciprocal_or_zero(kept ** weak(p - 1, kept), zero)
    grow = np.where(ax == 0, weak(0.0, x), np.sign(x) * np.where(ax == 0, weak(1.0, x), ax) ** weak(p - 1, x))
    return (g * grow * scale, None, None, None)


from . import _loaded  # noqa: E402 (its ops join functional.OPS: this module loads on first use)

_loaded(__name__, globals())
