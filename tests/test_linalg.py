"""``lp.linalg`` and ``np.linalg`` on Tensors: values equal to NumPy's (batched), gradients to second
order against finite differences, hand-computed gradients, the conventions where no derivative
exists, float32, the errors, and the sample table for the transform walks."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from op_samples_linalg_special import SAMPLES

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

L = lp.linalg
rng = np.random.default_rng(0)


def square(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape) + 3 * np.eye(shape[-1])


def spd(seed: int, shape: tuple[int, ...]) -> np.ndarray:
    a = np.random.default_rng(seed).standard_normal(shape)
    return a @ np.swapaxes(a, -1, -2) + shape[-1] * np.eye(shape[-1])


def sym(a: Any) -> Any:
    return (a + np.swapaxes(a, -1, -2)) / 2


# ----- values: NumPy's, batched, through np.linalg and lp.linalg --------------------------------------
BATCHES = [(), (2,), (2, 1)]


@pytest.mark.parametrize("batch", BATCHES, ids=str)
@pytest.mark.parametrize("name", ["inv", "det", "cholesky", "eigvalsh"])
def test_values_match_numpy(name: str, batch: tuple[int, ...]) -> None:
    a = spd(1, (*batch, 3, 3))
    want = getattr(np.linalg, name)(a)
    assert np.allclose(getattr(np.linalg, name)(Tensor(a))._data, want, rtol=1e-13, atol=1e-13)
    assert np.allclose(getattr(L, name)(a)._data, want, rtol=1e-13, atol=1e-13)


@pytest.mark.parametrize("batch", BATCHES, ids=str)
def test_factorisations_match_numpy(batch: tuple[int, ...]) -> None:
    a = spd(2, (*batch, 3, 3))
    t = Tensor(a)
    sign, logdet = np.linalg.slogdet(t)
    assert np.allclose(sign, np.linalg.slogdet(a)[0]) and np.allclose(logdet._data, np.linalg.slogdet(a)[1])
    w, v = np.linalg.eigh(t)
    assert np.allclose(w._data, np.linalg.eigh(a)[0]) and np.allclose(np.abs(v._data), np.abs(np.linalg.eigh(a)[1]))
    m = np.random.default_rng(3).standard_normal((*batch, 4, 3))
    for full in (m, np.swapaxes(m, -1, -2)):
        u, s, vh = np.linalg.svd(Tensor(full), full_matrices=False)
        nu, ns, nvh = np.linalg.svd(full, full_matrices=False)
        assert np.allclose(s._data, ns) and np.allclose(u._data, nu) and np.allclose(vh._data, nvh)
        q, r = np.linalg.qr(Tensor(full))
        nq, nr = np.linalg.qr(full)
        assert np.allclose(q._data, nq) and np.allclose(r._data, nr)
        assert np.allclose(np.linalg.pinv(Tensor(full))._data, np.linalg.pinv(full))
    b = np.random.default_rng(4).standard_normal((*batch, 3, 2))
    assert np.allclose(np.linalg.solve(t, Tensor(b))._data, np.linalg.solve(a, b))
    # a 1-D b is a vector for every matrix of the stack (NumPy 1.x refuses it: solved as columns here)
    ones = np.linalg.solve(a, np.ones((*batch, 3, 1)))[..., 0]
    assert np.allclose(np.linalg.solve(t, np.ones(3))._data, ones)
    assert np.allclose(np.linalg.matrix_power(t, 3)._data, np.linalg.matrix_power(a, 3))
    assert np.allclose(np.linalg.matrix_power(t, -2)._data, np.linalg.matrix_power(a, -2))
    assert np.allclose(np.linalg.matrix_power(t, 0)._data, np.linalg.matrix_power(a, 0))


def test_results_are_named_as_numpys() -> None:
    a = Tensor(spd(5, (3, 3)))
    assert L.eigh(a).eigenvalues.shape == (3,) and L.svd(a).S.shape == (3,) and L.qr(a).R.shape == (3, 3)
    assert L.slogdet(a).sign == 1.0


def test_lstsq_matches_numpy() -> None:
    a, b = rng.standard_normal((6, 3)), rng.standard_normal((6, 2))
    for bb in (b, b[:, 0]):
        x, res, rank, s = np.linalg.lstsq(Tensor(a), Tensor(bb), rcond=None)
        nx, nres, nrank, ns = np.linalg.lstsq(a, bb, rcond=None)
        assert np.allclose(x._data, nx) and np.allclose(res._data, nres) and rank == nrank
        assert np.allclose(s._data, ns) and res.shape == nres.shape
    x, res, rank, _ = L.lstsq(np.ones((2, 3)), np.ones(2))  # underdetermined: no residuals, as NumPy
    assert res.shape == (0,) and rank == 1


NORMS: list[tuple[Any, Any]] = [
    (None, None), (2, 0), (1, 1), (np.inf, -1), (-np.inf, 0), (3, 1), (0.5, 0), (0, 1),
    ("fro", None), ("nuc", None), (1, None), (-1, None), (2, None), (-2, None), (np.inf, None), (-np.inf, None),
    ("nuc", (2, 0)), (2, (0, 2)), (np.inf, (1, 2)), ("fro", (2, 1)), (None, (0, 1)),
]


@pytest.mark.parametrize(("ord", "axis"), NORMS, ids=str)
@pytest.mark.parametrize("keepdims", [False, True])
def test_norm_matches_numpy(ord: Any, axis: Any, keepdims: bool) -> None:  # noqa: A002
    x = rng.standard_normal((2, 3, 4)) if isinstance(axis, tuple) and max(axis) == 2 else rng.standard_normal((3, 4))
    want = np.linalg.norm(x, ord, axis, keepdims)
    got = np.linalg.norm(Tensor(x), ord, axis, keepdims)
    assert got.shape == np.shape(want) and np.allclose(got._data, want, rtol=1e-13)


# ----- gradients: finite differences to second order -----------------------------------------------
@pytest.mark.parametrize("batch", [(), (2,)], ids=str)
def test_gradients_to_second_order(batch: tuple[int, ...]) -> None:
    a = square(6, (*batch, 3, 3))
    for f in (L.inv, L.det, lambda t: L.slogdet(t)[1], lambda t: L.matrix_power(t, 3), lambda t: L.matrix_power(t, -1)):
        check_grads(f, [a], order=2)
    b = rng.standard_normal((*batch, 3, 2))
    check_grads(L.solve, [a, b], order=2)
    check_grads(L.solve, [a, rng.standard_normal(3)], order=2)
    check_grads(lambda t: L.cholesky(t @ np.swapaxes(t, -1, -2)), [a], order=2)
    check_grads(lambda t: L.cholesky(t @ np.swapaxes(t, -1, -2), upper=True), [a], order=2)
    # eigenvectors: a loss that does not depend on their signs
    def spectral(t: Tensor) -> Tensor:
        w, v = L.eigh(sym(t))
        return (v * w[..., None, :] ** 2) @ np.swapaxes(v, -1, -2)

    check_grads(spectral, [a], order=2)
    check_grads(lambda t: L.eigh(sym(t))[0], [a], order=2)


@pytest.mark.parametrize("shape", [(3, 3), (4, 3), (3, 4), (2, 4, 3), (2, 3, 5)], ids=str)
def test_rectangular_gradients_to_second_order(shape: tuple[int, ...]) -> None:
    m = np.random.default_rng(7).standard_normal(shape)

    def usv(t: Tensor) -> Any:
        u, s, vh = L.svd(t, full_matrices=False)
        return (u * s[..., None, :] ** 2) @ vh, u[..., :1] @ vh[..., :1, :], s

    check_grads(usv, [m], order=2)
    check_grads(lambda t: L.qr(t), [m], order=2)
    check_grads(L.pinv, [m], order=2)
    for ord_ in ("fro", "nuc", 2, -2, 1, np.inf):
        check_grads(lambda t, o=ord_: L.norm(t, o, axis=(-2, -1)), [m], order=2)


def test_lstsq_and_vector_norm_gradients() -> None:
    a, b = rng.standard_normal((5, 3)), rng.standard_normal((5, 2))
    check_grads(lambda x, y: L.lstsq(x, y)[:2], [a, b], order=2)
    check_grads(lambda x, y: L.lstsq(x, y)[0], [a, b[:, 0]], order=2)
    x = rng.standard_normal((3, 4))
    for ord_ in (None, 1, 2, 3, np.inf, -np.inf):
        check_grads(lambda t, o=ord_: L.norm(t, o, axis=1), [x], order=2)


@settings(max_examples=15, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.lists(st.integers(1, 3), min_size=0, max_size=2),
       st.integers(1, 3), st.integers(0, 2**31 - 1))
def test_solve_broadcasts_batches_as_numpy(batch_a: list[int], batch_b: list[int], n: int, seed: int) -> None:
    # two batch shapes that broadcast: b's is a's with some axes set to 1, or shorter
    ones = [i < len(batch_b) and batch_b[i] == 1 for i in range(len(batch_a))]
    batch_b = [1 if one else k for one, k in zip(ones, batch_a)][len(batch_a) - len(batch_b):]
    a = square(seed, (*batch_a, n, n))
    b = np.random.default_rng(seed + 1).standard_normal((*batch_b, n, 2))
    try:
        want = np.linalg.solve(a, b)
    except ValueError:  # (NumPy 1.x reads a b with one axis fewer than a as vectors, which may not fit)
        with pytest.raises(ValueError):
            L.solve(a, b)
        return
    got = L.solve(a, b)._data
    assert got.shape == want.shape and np.allclose(got, want)
    check_grads(L.solve, [a, b], order=1)


def test_solve_reads_b_as_the_installed_numpy_does() -> None:
    # b with one axis fewer than a: matrices in NumPy 2, a stack of vectors in NumPy 1.x (a (3, 3, 3) and
    # b (3, 3) give (3, 3, 3) and (3, 3)); np.linalg.solve on Tensors gives NumPy's own answer
    a, b = square(5, (3, 3, 3)), np.random.default_rng(6).standard_normal((3, 3))
    want = np.linalg.solve(a, b)
    for got in (np.linalg.solve(Tensor(a), b), L.solve(a, Tensor(b)), lp.vmap(np.linalg.solve)(a[None], b[None])[0]):
        assert got.shape == want.shape and np.allclose(getattr(got, "_data", got), want, rtol=1e-13, atol=1e-13)
    check_grads(L.solve, [a, b], order=2)


# ----- hand-computed gradients ------------------------------------------------------------------------
def test_hand_computed_gradients() -> None:
    a = np.array([[2.0, 1.0], [1.0, 3.0]])
    # d det / dA = det(A) inv(A).T = adjugate.T
    assert np.allclose(lp.grad(L.det)(a), [[3.0, -1.0], [-1.0, 2.0]])
    assert np.allclose(lp.grad(lambda t: L.slogdet(t)[1])(a), np.array([[3.0, -1.0], [-1.0, 2.0]]) / 5)
    # d/dA sum(inv(A)) = -inv(A).T @ ones @ inv(A).T
    ia = np.linalg.inv(a)
    assert np.allclose(lp.grad(lambda t: L.inv(t).sum())(a), -ia.T @ np.ones((2, 2)) @ ia.T)
    # eigenvalues of a diagonal matrix: dw_i/dA = e_i e_i^T
    assert np.allclose(lp.grad(lambda t: L.eigh(t)[0][1])(np.diag([1.0, 5.0])), [[0.0, 0.0], [0.0, 1.0]])
    # the spectral norm's gradient is u1 v1^T
    m = np.diag([3.0, 1.0])
    assert np.allclose(lp.grad(lambda t: L.norm(t, 2))(m), [[1.0, 0.0], [0.0, 0.0]])
    assert np.allclose(lp.grad(lambda t: L.norm(t))(np.array([3.0, 4.0])), [0.6, 0.8])
    # d/db solve(A, b) . 1 = inv(A).T @ 1
    assert np.allclose(lp.grad(lambda t: L.solve(a, t).sum())(np.ones(2)), ia.T @ np.ones(2))
    # cholesky of [[4]] is 2, d sqrt(a) / da = 1 / (2 sqrt(a))
    assert np.allclose(lp.grad(lambda t: L.cholesky(t).sum())(np.array([[4.0]])), [[0.25]])


# ----- where no derivative exists --------------------------------------------------------------------
def test_norm_at_zero_has_the_zero_subgradient() -> None:
    for ord_, axis, x in [(None, None, np.zeros(3)), (3, 0, np.zeros(3)), (1, 0, np.zeros(3)), (np.inf, 0, np.zeros(3)),
                          ("fro", None, np.zeros((2, 2)))]:
        g = lp.grad(lambda t, o=ord_, a=axis: L.norm(t, o, a))(x)
        assert np.array_equal(g, np.zeros_like(x)), (ord_, g)
    # second order is finite too
    assert np.all(np.isfinite(lp.hessian(lambda t: L.norm(t))(np.zeros(3))))
    # the nuclear norm at 0: a subgradient (spectral norm <= 1), not nan
    g = lp.grad(lambda t: L.norm(t, "nuc"))(np.zeros((2, 3)))
    assert np.all(np.isfinite(g)) and np.linalg.norm(g, 2) <= 1 + 1e-12


def _degenerate(seed: int) -> tuple[np.ndarray, np.ndarray]:
    q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((3, 3)))
    return q @ np.diag([1.0, 1.0, 3.0]) @ q.T, q


def test_eigh_at_a_repeated_eigenvalue_losses_of_the_space() -> None:
    a, q = _degenerate(8)
    # the projector onto the repeated eigenvalue's space is smooth: finite differences agree
    check_grads(lambda t: (lambda v: v[:, :2] @ v[:, :2].T)(L.eigh(sym(t))[1]), [a], order=1)
    # so is the sum of the eigenvalues in that space, and any function of the separate one
    check_grads(lambda t: (lambda w: w[:2].sum() + w[2] ** 2)(L.eigh(sym(t))[0]), [a], order=1)
    # and the gradient of the projector, by hand: a projector's derivative is P' = (I-P) dA P / gap + ...
    p = q[:, :2] @ q[:, :2].T
    g = lp.grad(lambda t: (L.eigh(t)[1][:, 2:] @ L.eigh(t)[1][:, 2:].T * p).sum())(a)
    assert np.all(np.isfinite(g))


def test_eigh_at_a_repeated_eigenvalue_refuses_what_has_no_gradient() -> None:
    a, _ = _degenerate(9)
    for f in (lambda t: L.eigh(t)[1][:, 0].sum(),  # one eigenvector: depends on the basis chosen
              lambda t: L.eigh(t)[0][0],  # one of the two repeated eigenvalues
              lambda t: (lambda w, v: ((v * np.exp(w)) @ v.T).sum())(*L.eigh(t))):  # needs divided differences
        with pytest.raises(ValueError, match="repeated"):
            lp.grad(f)(a)
    with pytest.raises(ValueError, match="second derivative at repeated eigenvalues"):
        lp.hessian(lambda t: L.eigh(t)[0].sum())(a)


def test_svd_at_repeated_singular_values() -> None:
    a, _ = _degenerate(10)
    check_grads(lambda t: L.svd(t, full_matrices=False)[1].sum(), [a], order=1)
    # s = 3, 1, 1: the pair's space, U[:, 1:] Vh[1:], has a gradient
    check_grads(lambda t: (lambda u, s, vh: u[:, 1:] @ vh[1:])(*L.svd(t, full_matrices=False)), [a], order=1)
    with pytest.raises(ValueError, match="repeated"):
        lp.grad(lambda t: L.svd(t, full_matrices=False)[0][:, 1].sum())(a)


# ----- one triangle read (eigh, eigvalsh, cholesky, pinv(hermitian=True)), as NumPy ---------------------
def mirrored(a: np.ndarray, uplo: str) -> np.ndarray:
    """The symmetric matrix NumPy's eigh sees in ``a``: one triangle mirrored."""
    t = np.tril(a) if uplo == "L" else np.triu(a)
    return t + np.swapaxes(t, -1, -2) - t * np.eye(a.shape[-1])


@pytest.mark.parametrize("uplo", ["L", "U"])
@pytest.mark.parametrize("batch", [(), (2, 3)], ids=str)
def test_eigh_reads_one_triangle_in_both_modes(uplo: str, batch: tuple[int, ...]) -> None:
    # A non-symmetric input (as HIPS autograd's test_eigvalh_lower / _upper): NumPy decomposes the
    # triangle UPLO names, mirrored; finite differences in any direction are then the honest check.
    a = np.random.default_rng(20).standard_normal((*batch, 4, 4))
    w, v = np.linalg.eigh(Tensor(a), uplo)
    nw, nv = np.linalg.eigh(a, uplo)
    assert np.allclose(w._data, nw, rtol=1e-12) and np.allclose(np.abs(v._data), np.abs(nv), rtol=1e-10)
    assert np.allclose(np.linalg.eigvalsh(Tensor(a), uplo)._data, np.linalg.eigvalsh(a, uplo), rtol=1e-12)

    def both(t: Tensor) -> Any:  # eigenvalues and a loss of the eigenvectors that does not depend on their signs
        w, v = L.eigh(t, uplo)
        return w, (v * w[..., None, :] ** 3) @ np.swapaxes(v, -1, -2), v ** 2

    check_grads(both, [a], order=2)
    g = lp.grad(lambda t: (L.eigvalsh(t, uplo) ** 2).sum())(a)
    other = np.triu(np.ones((4, 4)), 1) if uplo == "L" else np.tril(np.ones((4, 4)), -1)
    assert np.all(g[..., other == 1] == 0)  # the triangle not read has no gradient
    t = np.random.default_rng(21).standard_normal(a.shape)
    _, dw = lp.jvp(lambda x: L.eigvalsh(x, uplo), (a,), (t,))
    eps = 1e-6
    fd = (np.linalg.eigvalsh(a + eps * t, uplo) - np.linalg.eigvalsh(a - eps * t, uplo)) / (2 * eps)
    assert np.allclose(dw._data, fd, rtol=1e-6, atol=1e-8)
    # jvp is the vjp transposed: <grad of <c, w>, t> = <c, jvp>
    c = np.random.default_rng(22).standard_normal(nw.shape)
    gc = lp.grad(lambda x: (L.eigvalsh(x, uplo) * c).sum())(a)
    assert np.isclose((gc * t).sum(), (dw._data * c).sum(), rtol=1e-12)


def test_eigh_gradient_by_hand() -> None:
    # reads [[1, 1], [1, 1]] (eigenvalues 0 and 2, v = [1, 1] / sqrt 2 for 2): dw / dM = v v.T = 1/2 each;
    # the lower triangle read holds both off-diagonal halves, the diagonal its own
    a = np.array([[1.0, 5.0], [1.0, 1.0]])
    assert np.allclose(lp.grad(lambda t: L.eigvalsh(t)[1])(a), [[0.5, 0.0], [1.0, 0.5]])
    assert np.allclose(lp.grad(lambda t: L.eigvalsh(t, "U")[1])(a.T), [[0.5, 1.0], [0.0, 0.5]])


@pytest.mark.parametrize("upper", [False, True])
def test_cholesky_reads_one_triangle(upper: bool) -> None:
    a = spd(23, (2, 3, 3))
    junk = np.random.default_rng(24).standard_normal((2, 3, 3))
    b = a + (np.tril(junk, -1) if upper else np.triu(junk, 1))  # noise where NumPy does not read
    want = np.swapaxes(np.linalg.cholesky(np.swapaxes(b, -1, -2)), -1, -2) if upper else np.linalg.cholesky(b)
    assert np.allclose(L.cholesky(Tensor(b), upper=upper)._data, want, rtol=1e-12)
    if not upper or np.lib.NumpyVersion(np.__version__) >= "2.0.0":  # (upper= is new in NumPy 2)
        assert np.allclose(np.linalg.cholesky(Tensor(b), **({"upper": True} if upper else {}))._data, want)
    check_grads(lambda t: L.cholesky(t, upper=upper), [b], order=2)
    g = lp.grad(lambda t: L.cholesky(t, upper=upper).sum())(b)
    assert np.all((np.tril(g, -1) if upper else np.triu(g, 1)) == 0)


def test_pinv_hermitian() -> None:
    a = spd(25, (2, 3, 3))
    b = a + np.triu(np.random.default_rng(26).standard_normal((2, 3, 3)), 1)  # NumPy reads the lower triangle
    assert np.allclose(np.linalg.pinv(Tensor(b), hermitian=True)._data, np.linalg.pinv(b, hermitian=True), rtol=1e-10)
    assert np.allclose(L.pinv(b, hermitian=True)._data, np.linalg.pinv(mirrored(b, "L")), rtol=1e-10)
    check_grads(lambda t: L.pinv(t, hermitian=True), [b], order=2)
    with pytest.raises(ValueError, match="square"):
        L.pinv(np.ones((2, 3)), hermitian=True)


# ----- det at singular matrices: the adjugate ---------------------------------------------------------
def adjugate_by_minors(a: np.ndarray) -> np.ndarray:
    """adj(a), entry by entry from its signed minors (float64)."""
    n = a.shape[-1]
    out = np.zeros(a.shape)
    for i in range(n):
        for j in range(n):
            minor = np.delete(np.delete(a, j, axis=-2), i, axis=-1)
            out[..., i, j] = (-1) ** (i + j) * (np.linalg.det(minor) if n > 1 else 1.0)
    return out


def of_rank(seed: int, n: int, rank: int, batch: tuple[int, ...] = ()) -> np.ndarray:
    r = np.random.default_rng(seed)
    return r.standard_normal((*batch, n, rank)) @ r.standard_normal((*batch, rank, n))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_det_gradient_at_singular_matrices_is_the_adjugate(dtype: Any) -> None:
    # corank 1 (adj nonzero), 2 and 3 (adj zero), a nonsingular one, in one batch; both modes
    a = np.stack([np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]), of_rank(30, 3, 1),
                  np.zeros((3, 3)), square(31, (3, 3)), of_rank(32, 3, 2)]).astype(dtype)
    want = np.swapaxes(adjugate_by_minors(a.astype(np.float64)), -1, -2)
    tol = 1e-4 if dtype == np.float32 else 1e-12
    g = lp.grad(lambda t: L.det(t).sum())(a)
    assert g.dtype == dtype and np.allclose(g, want, rtol=tol, atol=tol * np.abs(want).max())
    assert np.abs(want[[0, 4]]).max(axis=(-2, -1)).min() > 0.1 and np.allclose(want[1:3], 0, atol=1e-6)
    t = np.random.default_rng(33).standard_normal(a.shape).astype(dtype)
    _, dt = lp.jvp(lambda x: L.det(x), (a,), (t,))
    assert dt.dtype == dtype and np.allclose(dt._data, (want * t).sum(axis=(-2, -1)), rtol=tol, atol=tol * 10)
    assert np.allclose(g[0], [[4.0, 4.0, -4.0], [-2.0, -2.0, 2.0], [0.0, 0.0, 0.0]], atol=tol * 10)


@pytest.mark.parametrize("rank", [0, 1, 2, 3, 4])
def test_det_at_any_rank_to_second_order(rank: int) -> None:
    a = of_rank(40 + rank, 4, rank, (2,))
    check_grads(L.det, [a], order=2)
    check_grads(lambda t: L.det(t) ** 2 + L.det(t @ t.swapaxes(-1, -2)), [a], order=2)
    # the Hessian by hand at the identity: H[e, f] = tr(e) tr(f) - tr(e f)
    if rank == 4:
        h = lp.hessian(L.det)(np.eye(3)).reshape(9, 9)
        e = np.eye(9).reshape(9, 3, 3)
        want = np.array([[np.trace(x) * np.trace(y) - np.trace(x @ y) for y in e] for x in e])
        assert np.allclose(h, want, atol=1e-12)


# ----- the cofactor matrix: in closed form up to 3 x 3, from an SVD beyond ----------------------------
def cofactor(t: Any) -> Any:
    return lp.apply(F.cofactor, "cofactor", t)


def in_a_corner(x: np.ndarray, base: np.ndarray) -> np.ndarray:
    """``x`` (n x n) over the top-left corner of ``base`` (4 x 4). With ``base`` the identity, the
    cofactor matrix of the result (the SVD path) holds ``x``'s in that corner; so does its tangent
    along ``e`` put in the corner of zeros."""
    n = x.shape[-1]
    out = np.broadcast_to(base.astype(x.dtype), (*x.shape[:-2], *base.shape)).copy()
    out[..., :n, :n] = x
    return out


def test_cofactor_by_hand() -> None:
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 10.0]])
    assert np.array_equal(F.cofactor(a)[0], [[2, 2, -3], [4, -11, 6], [-3, 6, -3]])
    singular = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]])  # rank 2: adj of rank 1
    assert np.array_equal(F.cofactor(singular)[0], [[-3, 6, -3], [6, -12, 6], [-3, 6, -3]])
    assert np.array_equal(F.cofactor(np.array([[1.0, 2.0], [3.0, 4.0]]))[0], [[4, -3], [-2, 1]])
    assert np.array_equal(F.cofactor(np.array([[5.0]]))[0], [[1.0]])
    # its tangent along e, by hand: 2 x 2 it is linear (cofactor(e)); 1 x 1 constant
    e = np.array([[1.0, 0.0], [2.0, 3.0]])
    assert np.array_equal(lp.jvp(cofactor, (np.ones((2, 2)),), (e,))[1]._data, [[3, -2], [0, 1]])
    assert np.array_equal(lp.jvp(cofactor, (np.array([[5.0]]),), (np.array([[2.0]]),))[1]._data, [[0.0]])
    # 3 x 3 at the identity along e_00: the cofactors of entries 11 and 22 move (a_11 a_22 - ...)
    e3 = np.zeros((3, 3))
    e3[0, 0] = 1.0
    assert np.array_equal(lp.jvp(cofactor, (np.eye(3),), (e3,))[1]._data, np.diag([0.0, 1.0, 1.0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_cofactor_in_closed_form_is_the_minors_and_the_svd_path(n: int, dtype: Any) -> None:
    tol = 2e-5 if dtype == np.float32 else 1e-12
    eye4, zeros4 = np.eye(4), np.zeros((4, 4))
    batches = [square(50, (5, n, n))] + [of_rank(51 + k, n, n - k, (5,)) for k in (1, 2) if k <= n]
    for b in batches:  # random, corank 1, corank 2
        a = b.astype(dtype)
        scale = max(1.0, float(np.abs(a).max())) ** (n - 1)
        want = np.swapaxes(adjugate_by_minors(a.astype(np.float64)), -1, -2)
        got = F.cofactor(a)[0]
        by_svd = F.cofactor(in_a_corner(a, eye4))[0][..., :n, :n]
        assert got.dtype == dtype and by_svd.dtype == dtype
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * scale)
        np.testing.assert_allclose(by_svd, want, rtol=tol, atol=10 * tol * scale)
        # its derivative (a tangent, and a cotangent: the Hessian of det is symmetric) against the SVD rule's
        e = np.random.default_rng(52).standard_normal(a.shape).astype(dtype)
        tangent = lp.jvp(cofactor, (a,), (e,))[1]._data
        svd_tangent = lp.jvp(cofactor, (in_a_corner(a, eye4),), (in_a_corner(e, zeros4),))[1]._data
        cotangent = lp.vjp(cofactor, a)[1](e)[0]
        assert tangent.dtype == dtype and cotangent.dtype == dtype
        np.testing.assert_allclose(svd_tangent[..., :n, :n], tangent, rtol=10 * tol, atol=10 * tol * scale * 3)
        np.testing.assert_allclose(cotangent, tangent, rtol=tol, atol=tol * scale)
        if dtype == np.float64:  # against finite differences, to second order
            check_grads(cofactor, [b], order=2)


@pytest.mark.parametrize("n", [3, 4])
def test_det_derivatives_batch_singular_and_regular_matrices_alike(n: int) -> None:
    # exact zero singular values in some matrices of a batch and not in others: no branch per
    # matrix (vmap refuses one that goes two ways), and jit traces once; up to the third derivative
    # (3 x 3 in closed form: any rank; 4 x 4 from an SVD: corank 0 and 1)
    a = np.stack([square(60, (n, n)), np.diag(np.arange(n, dtype=np.float64)), of_rank(61, n, n - 1)]
                 + ([np.zeros((3, 3)), of_rank(62, 3, 1)] if n == 3 else []))
    v, w = np.random.default_rng(63).standard_normal((2, n, n))

    def hvp(x: Any) -> Any:  # the second derivative of det along v
        return lp.grad(lambda y: lp.sum(lp.grad(L.det)(y) * v))(x)

    def third(x: Any) -> Any:  # the third, along v and w
        return lp.grad(lambda y: lp.sum(hvp(y) * w))(x)

    for f in (hvp, third):
        want = np.stack([f(x) for x in a])
        np.testing.assert_allclose(lp.vmap(f)(a), want, rtol=1e-12, atol=1e-12)
        jitted = lp.jit(f)
        for x in a:
            assert np.array_equal(jitted(x), f(x))
        assert jitted.trace_count == 1


def test_slogdet_at_a_singular_matrix_follows_jax() -> None:
    # log |det| is -inf there; its gradient inv(a).T has no limit: inf or nan entries, no error (as JAX)
    sign, logdet = L.slogdet(np.ones((2, 2)))
    assert sign == 0 and logdet._data == -np.inf
    g = lp.grad(lambda t: L.slogdet(t)[1])(np.ones((2, 2)))
    assert np.all(np.isinf(g))
    assert np.all(np.isnan(lp.grad(lambda t: L.slogdet(t)[1])(np.zeros((2, 2)))))
    _, dt = lp.jvp(lambda t: L.slogdet(t)[1], (np.ones((2, 2)),), (np.eye(2),))
    assert not np.isfinite(dt._data)


# ----- float32, errors, immutability ---------------------------------------------------------------
def test_float32_stays_float32() -> None:
    a = spd(11, (3, 3)).astype(np.float32)
    for f in (L.inv, L.det, L.cholesky, lambda t: L.eigh(t)[0], lambda t: L.svd(t)[1], L.pinv, L.norm):
        out = f(Tensor(a))
        assert out.dtype == np.float32
        g = lp.grad(lambda t, f=f: f(t).sum())(a)
        assert g.dtype == np.float32 and np.all(np.isfinite(g))


def test_errors_name_the_problem() -> None:
    with pytest.raises(ValueError, match="at least 2 axes"):
        L.inv(Tensor([1.0, 2.0]))
    with pytest.raises(ValueError, match="square"):
        L.det(Tensor(np.ones((2, 3))))
    with pytest.raises(ValueError, match="full_matrices=False"):
        np.linalg.svd(Tensor(np.ones((2, 3)), requires_grad=True))
    with pytest.raises(ValueError, match="mode='reduced'"):
        L.qr(Tensor(np.ones((2, 2))), mode="complete")
    with pytest.raises(TypeError, match="complex"):
        L.inv(np.eye(2) * 1j)
    with pytest.raises(TypeError, match="n must be an integer"):
        L.matrix_power(Tensor(np.eye(2)), 1.5)
    with pytest.raises(ValueError, match="ord"):
        L.norm(Tensor(np.ones((2, 2))), ord="nuc", axis=0)
    with pytest.raises(TypeError, match="np.linalg.eig is not differentiable"):
        np.linalg.eig(Tensor(np.eye(2)))


def test_inputs_are_not_written_to() -> None:
    a = spd(12, (3, 3))
    before = a.copy()
    for f in (L.inv, L.det, L.cholesky, lambda t: L.eigh(t)[1], lambda t: L.svd(t)[0], lambda t: L.qr(t)[0]):
        lp.grad(lambda t, f=f: (f(t) ** 2).sum())(a)
    assert np.array_equal(a, before)


def test_eager_style() -> None:
    a = Tensor(spd(13, (3, 3)), requires_grad=True)
    np.linalg.slogdet(a)[1].backward()
    assert np.allclose(a.grad._data, np.linalg.inv(a._data).T)


# ----- the sample table the transform walks use --------------------------------------------------------
MINE = ("inv det cofactor slogdet solve cholesky eigh svd qr pinv lstsq norm gammaln digamma polygamma "
        "erfinv ndtr log_ndtr logit xlogy xlog1py betaln i0e i1e").split()


def test_samples_cover_the_ops() -> None:
    assert set(MINE) <= set(F.OPS)
    assert {key.split("/")[0] for key in SAMPLES} == set(MINE)


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_each_sample_runs_and_differentiates(key: str) -> None:
    name = key.split("/")[0]
    args = SAMPLES[key](np.random.default_rng(1))
    again = SAMPLES[key](np.random.default_rng(2))  # new values, the same shapes and parameters
    diff = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    assert [np.shape(a) for a in args] == [np.shape(a) for a in again]
    op = F.OPS[name]
    ans, vjp = op(*args, need=tuple(i in diff for i in range(len(args)))) if name in F.TAKES_NEED else op(*args)
    cts = vjp(np.ones_like(ans))
    for i in diff:
        assert np.shape(cts[i]) == np.shape(args[i]) and np.all(np.isfinite(cts[i]))

    def f(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return lp.apply(op, name, *full)

    check_grads(f, [args[i] for i in diff], order=2)


@settings(max_examples=12, deadline=None)
@given(st.lists(st.integers(1, 3), min_size=0, max_size=2), st.integers(1, 4), st.integers(1, 4),
       st.integers(0, 2**31 - 1))
def test_batched_shapes_values_and_gradients(batch: list[int], m: int, n: int, seed: int) -> None:
    # singular values in [1, 3]: square() can draw a condition number of 1e4 or more, where the finite
    # differences of inv's gradient, not the gradient, miss the tolerance
    rng = np.random.default_rng(seed)
    q1, q2 = np.linalg.qr(rng.standard_normal((2, *batch, n, n)))[0]
    a = q1 @ (rng.uniform(1.0, 3.0, (*batch, n, 1)) * q2)
    r = np.random.default_rng(seed).standard_normal((*batch, m, n))
    for name in ("inv", "det", "cholesky"):
        arg = spd(seed, (*batch, n, n)) if name == "cholesky" else a
        assert np.allclose(getattr(L, name)(arg)._data, getattr(np.linalg, name)(arg))
    assert np.allclose(L.slogdet(a)[1]._data, np.linalg.slogdet(a)[1])
    assert np.allclose(L.svd(r, full_matrices=False)[1]._data, np.linalg.svd(r, compute_uv=False))
    assert np.allclose(L.pinv(r)._data, np.linalg.pinv(r))
    check_grads(lambda t: L.slogdet(t)[1], [a], order=1)
    check_grads(lambda t: L.inv(t), [a], order=1)
    check_grads(lambda t: L.svd(t, compute_uv=False), [r], order=1)
    check_grads(lambda t: L.eigh(sym(t))[0], [a], order=1)


@settings(max_examples=20, deadline=None)
@given(st.lists(st.integers(1, 4), min_size=1, max_size=3), st.data())
def test_vector_norms_over_shapes_and_axes(shape: list[int], data: Any) -> None:
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    ord_ = data.draw(st.sampled_from([None, 1, 2, 3, np.inf, -np.inf]))
    keepdims = data.draw(st.booleans())
    x = np.random.default_rng(len(shape)).standard_normal(shape) + 0.1
    want = np.linalg.norm(x, ord_, axis, keepdims)
    got = L.norm(x, ord_, axis, keepdims)
    assert got.shape == np.shape(want) and np.allclose(got._data, want)
    check_grads(lambda t: L.norm(t, ord_, axis, keepdims), [x], order=2)


# ----- empty matrices: 0 x 0, m x 0, 0 x n, values as NumPy's, gradients and tangents of their shapes -----
EMPTY: list[tuple[str, Any, Any, list[tuple[int, ...]]]] = [
    ("inv", L.inv, np.linalg.inv, [(0, 0), (2, 0, 0)]),
    ("det", L.det, np.linalg.det, [(0, 0), (2, 0, 0)]),
    ("slogdet", lambda t: L.slogdet(t)[1], lambda a: np.linalg.slogdet(a)[1], [(0, 0), (2, 0, 0)]),
    ("solve", lambda t: L.solve(t, np.zeros((0, 2))), lambda a: np.linalg.solve(a, np.zeros((0, 2))), [(0, 0)]),
    ("solve/vector", lambda t: L.solve(t, np.zeros(0)), lambda a: np.linalg.solve(a, np.zeros(0)), [(0, 0)]),
    ("cholesky", L.cholesky, np.linalg.cholesky, [(0, 0), (2, 0, 0)]),
    ("eigh", lambda t: L.eigh(t)[1], lambda a: np.linalg.eigh(a)[1], [(0, 0), (2, 0, 0)]),
    ("eigvalsh", L.eigvalsh, np.linalg.eigvalsh, [(0, 0)]),
    ("svd", lambda t: L.svd(t, full_matrices=False)[0], lambda a: np.linalg.svd(a, full_matrices=False)[0],
     [(0, 0), (3, 0), (0, 3), (2, 3, 0)]),
    ("svd/s", lambda t: L.svd(t, compute_uv=False), lambda a: np.linalg.svd(a, compute_uv=False),
     [(0, 0), (3, 0), (0, 3), (2, 0, 3)]),
    ("svd/vh", lambda t: L.svd(t, full_matrices=False)[2], lambda a: np.linalg.svd(a, full_matrices=False)[2],
     [(3, 0), (0, 3)]),
    ("qr", lambda t: L.qr(t)[0], lambda a: np.linalg.qr(a)[0], [(0, 0), (3, 0), (0, 3)]),
    ("qr/r", lambda t: L.qr(t)[1], lambda a: np.linalg.qr(a)[1], [(3, 0), (0, 3), (2, 0, 3)]),
    ("pinv", L.pinv, np.linalg.pinv, [(0, 0), (3, 0), (0, 3), (2, 3, 0)]),
    ("lstsq", lambda t: L.lstsq(t, np.ones(t.shape[0]))[:2],
     lambda a: np.linalg.lstsq(a, np.ones(a.shape[0]), rcond=None)[:2], [(3, 0), (0, 3)]),
    ("norm", L.norm, np.linalg.norm, [(0, 0), (3, 0)]),
    *[(f"norm/{o}", lambda t, o=o: L.norm(t, o), lambda a, o=o: empty_norm(a, o), [(0, 0), (3, 0), (0, 3)])
      for o in ("fro", "nuc", 1, 2, np.inf)],
]


def empty_norm(a: np.ndarray, o: Any) -> Any:
    """NumPy's matrix norm of an empty matrix: 0 (NumPy 1.x raises for some orders; LeanPass gives NumPy 2's 0)."""
    try:
        return np.linalg.norm(a, o)
    except ValueError:
        return np.zeros(())


@pytest.mark.parametrize(("name", "f", "want", "shapes"), EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_matrices(name: str, f: Any, want: Any, shapes: list[tuple[int, ...]]) -> None:
    for shape in shapes:
        a = np.zeros(shape)
        outs = f(Tensor(a))
        outs, wants = (outs, want(a)) if isinstance(outs, tuple) else ((outs,), (want(a),))
        for o, w in zip(outs, wants):
            assert o.shape == np.shape(w) and np.array_equal(o._data, w), (shape, o, w)
        g = lp.grad(lambda t: sum(((x * x).sum() for x in lp.tree_flatten(f(t))[0]), Tensor(0.0)))(a)
        assert g.shape == shape and np.all(g == 0), (shape, g)
        _, tangents = lp.jvp(f, (a,), (np.ones(shape),))
        for t, o in zip(lp.tree_flatten(tangents)[0], outs):
            assert t.shape == o.shape and np.all(t._data == 0), (shape, t)


# ----- the forward-mode rules in float32 (test_forward_ops.py walks them in float64) -------------------
@pytest.mark.parametrize("key", sorted(k for k in SAMPLES if k.split("/")[0] in F._LAZY_OPS["linalg"]))
def test_direct_jvp_rules_match_the_transposed_vjp_in_float32(key: str) -> None:
    from leanpass.transforms.forward_mode import transposed_vjp

    name = key.split("/")[0]
    rng32 = np.random.default_rng(3)
    args = [a.astype(np.float32) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
            for a in SAMPLES[key](np.random.default_rng(1))]
    ts = tuple(rng32.standard_normal(a.shape).astype(np.float32) if isinstance(a, np.ndarray) else None for a in args)
    ans = F.OPS[name](*args)[0]
    direct = F.JVPS[name](ts, ans, *args)
    derived = transposed_vjp(F.OPS[name], name, tuple(args), ts, False)
    assert direct.dtype == np.float32 and derived.dtype == np.float32
    scale = max(1.0, float(np.abs(derived).max()))
    np.testing.assert_allclose(direct, derived, rtol=2e-4, atol=2e-5 * scale)
