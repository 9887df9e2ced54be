"""The fitted erf / erfc kernels (functional/_erf.py): accuracy against the standard library and SciPy over
the whole line (tails and subnormal results included), the special values, float32 computed in float32;
the exact GELU (``lp.gelu(x, approximate="none")``), its kernel and its derivatives."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special as sp
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import leanpass as lp
from leanpass.functional import _erf as E
from leanpass.testing import check_grads


def _grid(dtype: type) -> np.ndarray:
    rng = np.random.default_rng(0)
    tiny = np.geomspace(1e-300 if dtype == np.float64 else 1e-44, 30, 4000)
    x = np.concatenate([np.arange(-7, 7, 7e-4), tiny, -tiny, rng.standard_normal(3000),
                        rng.uniform(-30, 30, 3000), [0.5, -0.5, 6.0, 4.0, 27.0, 1e300, -1e300]])
    with np.errstate(over="ignore"):
        return x.astype(dtype)


def _ulps(got: np.ndarray, want: np.ndarray, dtype: type) -> np.ndarray:
    """``|got - want|`` in units of the spacing of ``dtype`` at ``want`` (0 where both are the same)."""
    spacing = np.spacing(np.abs(want).astype(dtype)).astype(np.float64)
    same = got.astype(np.float64) == want
    return np.where(same, 0.0, np.abs(got.astype(np.float64) - want) / spacing)


def test_float64_erf_and_erfc_within_a_few_ulps_of_the_standard_library() -> None:
    x = _grid(np.float64)
    want_erf = np.array([math.erf(v) for v in x])
    want_erfc = np.array([math.erfc(v) for v in x])  # (subnormal results included: down to 5e-324 at 27.2)
    assert _ulps(E.erf_values(x), want_erf, np.float64).max() <= 3
    assert _ulps(E.erfc_values(x), want_erfc, np.float64).max() <= 4  # (about 2 of them the standard library's)
    # the same against SciPy, where SciPy is accurate (its erfc errs by x**2 ulps further out, and by up to
    # 4 ulps here: the bound adds them)
    inner = np.abs(x) <= 2
    assert _ulps(E.erfc_values(x)[inner], sp.erfc(x)[inner], np.float64).max() <= 12
    assert _ulps(E.erf_values(x), sp.erf(x), np.float64).max() <= 3


def test_erfc_keeps_its_relative_precision_down_to_the_subnormals() -> None:
    x = np.linspace(25.0, 27.3, 2001)
    want = np.array([math.erfc(v) for v in x])
    got = E.erfc_values(x)
    assert np.all(got[x > 27.25] == 0) and np.all(got[x < 27.0] > 0)
    normal = want > np.finfo(np.float64).tiny
    np.testing.assert_allclose(got[normal], want[normal], rtol=2e-15)
    assert np.all(np.abs(got - want)[~normal] <= 4 * 5e-324)  # (subnormals: a few of their spacing)
    # float32: the tail to 10, where it becomes subnormal (computed in float64 and rounded once)
    x32 = np.linspace(3.0, 10.1, 2001).astype(np.float32)
    want32 = sp.erfc(x32.astype(np.float64))
    assert _ulps(E.erfc_values(x32), want32, np.float32).max() <= 2


def test_float32_is_computed_in_float32_within_a_few_ulps() -> None:
    x = _grid(np.float32)
    x64 = x.astype(np.float64)
    for fn, want, ulps in ((E.erf_values, sp.erf(x64), 3), (E.erfc_values, sp.erfc(x64), 2)):
        got = fn(x)
        assert got.dtype == np.float32
        assert _ulps(got, want, np.float32).max() <= ulps


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_special_values(dtype: type) -> None:
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], dtype)
    erf, erfc = E.erf_values(x), E.erfc_values(x)
    np.testing.assert_array_equal(erf, np.array([0.0, -0.0, 1.0, -1.0, np.nan], dtype))
    assert list(np.signbit(erf[:2])) == [False, True]
    np.testing.assert_array_equal(erfc, np.array([1.0, 1.0, 0.0, 2.0, np.nan], dtype))
    assert erf.dtype == erfc.dtype == dtype


def test_numbers_scalars_integers_and_float16() -> None:
    assert E.erf_values(0.5) == pytest.approx(math.erf(0.5), rel=1e-16)
    assert isinstance(E.erf_values(0.5), np.float64)
    assert E.erf_values(np.float32(0.5)).dtype == np.float32 and np.ndim(E.erf_values(np.float32(0.5))) == 0
    assert E.erfc_values(np.array(2.0)).shape == ()
    np.testing.assert_allclose(E.erfc_values(np.arange(3)), [math.erfc(v) for v in range(3)], rtol=1e-15)
    half = E.erf_values(np.array([0.25, 2.0], np.float16))
    assert half.dtype == np.float16
    np.testing.assert_allclose(half, [math.erf(0.25), math.erf(2.0)], rtol=1e-3)
    assert E.erf_values(np.zeros((0, 3))).shape == (0, 3)


def test_normal_cdf_keeps_the_left_tail() -> None:
    x = np.linspace(-37.5, 8.0, 4001)
    got = lp.special.ndtr(x)._data
    assert E.erfc_values(np.array([1.0]), -math.sqrt(0.5)).dtype == np.float64
    # the left tail as 0.5 erfcx(|x| / sqrt(2)) exp(-x**2 / 2), the exponential split exactly (SciPy's ndtr
    # rounds x / sqrt(2) before squaring it: 1e-13 off at -37)
    ax = np.abs(x)
    hi = np.round(ax * 16) / 16
    tail = 0.5 * sp.erfcx(ax / np.sqrt(2)) * np.exp(-hi * hi / 2) * np.exp(-(ax - hi) * (ax + hi) / 2)
    np.testing.assert_allclose(got, np.where(x < -3, tail, sp.ndtr(x)), rtol=3e-15)
    with pytest.raises(ValueError, match="scale must be 1"):
        E.erfc_values(np.ones(2), 0.5)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gelu_kernel_against_the_normal_cdf(dtype: type) -> None:
    x = np.concatenate([np.linspace(-12, 12, 20001), [-1e30, 1e30]]).astype(dtype)
    x64 = x.astype(np.float64)
    value, slope = E.gelu_values(x)
    assert value.dtype == slope.dtype == dtype
    phi = sp.ndtr(x64)
    density = np.exp(-0.5 * np.minimum(x64 * x64, 1e4)) / math.sqrt(2 * math.pi)
    # absolute accuracy of Φ, as PyTorch's float32 GELU: 4e-9 in float32 (the fit), rounding in float64
    tol = 5e-15 if dtype == np.float64 else 2e-7
    np.testing.assert_allclose(value, x64 * phi, rtol=tol, atol=tol)
    np.testing.assert_allclose(slope, phi + x64 * density, rtol=tol, atol=tol)
    if dtype == np.float64:  # the left tail to its own relative precision
        left = x64 < -1
        np.testing.assert_allclose(value[left], (x64 * phi)[left], rtol=5e-14)
    v, d = E.gelu_values(np.array([-np.inf, np.inf, np.nan, -0.0], dtype))
    np.testing.assert_array_equal(v, np.array([0.0, np.inf, np.nan, 0.0], dtype))
    np.testing.assert_allclose(d, np.array([0.0, 1.0, np.nan, 0.5], dtype), rtol=1e-7, atol=0)


def test_jit_and_vmap_give_eager_bits() -> None:
    x = np.random.default_rng(1).standard_normal((4, 50)) * 4
    for fn in (lp.erf, lp.erfc, _gelu_exact):
        eager = fn(x)._data
        np.testing.assert_array_equal(lp.jit(fn)(x)._data, eager)
        np.testing.assert_array_equal(lp.vmap(fn)(x)._data, eager)
        x32 = x.astype(np.float32)
        np.testing.assert_array_equal(lp.jit(fn)(x32)._data, fn(x32)._data)


@pytest.mark.parametrize("scale", [1.0, math.sqrt(0.5), -math.sqrt(0.5)])
def test_float64_erfc_parts_gathered_or_blended_give_the_same_bits(scale: float) -> None:
    # a plain array runs each part on its own values (gathered); anything else (the stand-ins of jit and vmap,
    # here an ndarray subclass) runs every part on every value and blends them: the same bits, edges included
    edges = np.array([0.5, 1.25]) / abs(scale)
    near = (edges[:, None] * (1 + np.arange(-40, 41) * 2.0**-52)).ravel()
    x = np.concatenate([near, -near, np.linspace(-45, 45, 9001), [0.0, -0.0, np.inf, -np.inf, np.nan, 1e300]])

    class Other(np.ndarray):
        pass

    plain = E.erfc_values(x, scale)
    np.testing.assert_array_equal(np.asarray(E.erfc_values(x.view(Other), scale)), plain)
    np.testing.assert_array_equal(plain[-6:], [1.0, 1.0, 0.0, 2.0, np.nan, 0.0] if scale > 0 else
                                  [1.0, 1.0, 2.0, 0.0, np.nan, 2.0])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_large_array_in_slices_gives_the_bits_of_one_pass(dtype: type) -> None:
    x = (np.random.default_rng(2).standard_normal((3, E._CHUNK_BYTES // 4 + 5)) * 5).astype(dtype)
    x[0, :7] = [0.0, -0.0, np.inf, -np.inf, np.nan, 30.0, -30.0]
    assert x.nbytes > 2 * E._CHUNK_BYTES  # (sliced eagerly; the stand-ins of jit run one pass)
    for fn in (lp.erf, lp.erfc, lp.special.ndtr):
        eager = fn(x)._data
        np.testing.assert_array_equal(lp.jit(fn)(x)._data, eager)
        np.testing.assert_array_equal(fn(x[:, ::-1])._data, eager[:, ::-1])  # (a strided view)
    np.testing.assert_array_equal(E.erfc_values(x, -math.sqrt(0.5))[1], E.erfc_values(x[1], -math.sqrt(0.5)))


def _gelu_exact(t: object) -> lp.Tensor:
    return lp.gelu(t, approximate="none")


# ----- lp.gelu(approximate="none") ------------------------------------------------------------------------
def test_exact_gelu_by_hand() -> None:
    # gelu(1) = Φ(1) = 0.8413447460685429; gelu'(0) = 1/2; gelu''(x) = φ(x) (2 - x**2): 2 / sqrt(2 pi) at 0
    np.testing.assert_allclose(_gelu_exact(lp.Tensor([1.0, -1.0]))._data, [0.8413447460685429, -0.15865525393145707],
                               rtol=1e-15)
    assert lp.grad(_gelu_exact)(0.0) == pytest.approx(0.5, rel=1e-15)
    assert lp.grad(lp.grad(_gelu_exact))(0.0) == pytest.approx(2 / math.sqrt(2 * math.pi), rel=1e-14)
    third = lp.grad(lp.grad(lp.grad(_gelu_exact)))(1.0)  # φ'(x)(2 - x²) - 2x φ(x) = -x φ(x)(4 - x²)
    assert third == pytest.approx(-3 * math.exp(-0.5) / math.sqrt(2 * math.pi), rel=1e-12)


def test_exact_gelu_keeps_its_input_and_output_and_no_array_of_its_own() -> None:
    x = np.random.default_rng(0).standard_normal(6)
    ans, vjp = lp.functional.gelu(x, approximate="none")
    assert len(vjp.args) == 2 and vjp.args[0] is x and vjp.args[1] is ans  # (both held by the graph anyway)
    slope = sp.ndtr(x) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)
    np.testing.assert_allclose(vjp(np.full(6, 2.0))[0], 2 * slope, rtol=1e-14)
    np.testing.assert_array_equal(x, np.random.default_rng(0).standard_normal(6))  # nothing written into x


def _edge_values(dtype: type) -> np.ndarray:
    """Where ``gelu(x) / x`` is not ``Φ(x)`` (0, subnormals, infinities, NaN, squares that overflow) and beside."""
    f = np.finfo(dtype)
    tiny = [0.0, -0.0, f.smallest_subnormal, 3 * f.smallest_subnormal, f.tiny / 3, f.tiny, np.sqrt(f.tiny)]
    big = [np.sqrt(f.max) / 2, np.sqrt(f.max) * 2, f.max, np.inf, 1e4, 20.0, 14.0]
    return np.array(tiny + [-v for v in tiny] + big + [-v for v in big] + [np.nan, 0.3, -0.75, -13.0], dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_gelu_slope_from_its_output_matches_the_kernels(dtype: type) -> None:
    # the VJP's Φ(x) + x φ(x) with Φ = gelu(x) / x: within the kernel's own error of the reference
    x = np.concatenate([_grid(dtype), np.linspace(-50, 50, 200001).astype(dtype)])
    ans, kernel = E.gelu_values(x)
    got = lp.functional.gelu(x, approximate="none")[1](np.ones_like(x))[0]
    assert got.dtype == dtype
    x64 = x.astype(np.float64)
    xc = np.clip(x64, -60, 60)  # (x φ(x) is 0 beyond)
    want = sp.ndtr(x64) + xc * np.exp(-0.5 * xc * xc) / math.sqrt(2 * math.pi)
    eps = np.finfo(dtype).eps
    assert np.max(np.abs(got - want)) <= 2.5 * eps
    assert np.max(np.abs(got - kernel)) <= 2 * eps
    # at the edges, the kernel's slope (0.5 at 0 and the subnormals, the limits at the infinities, NaN at NaN)
    edge = _edge_values(dtype)
    np.testing.assert_array_equal(lp.functional.gelu(edge, approximate="none")[1](np.ones_like(edge))[0],
                                  E.gelu_values(edge)[1])
    mixed = np.concatenate([x[:1000], edge])  # the same slope for the rest, the kernel's at the edges
    g = np.random.default_rng(2).standard_normal(mixed.shape).astype(dtype)
    out = lp.functional.gelu(mixed, approximate="none")[1](g)[0]
    np.testing.assert_array_equal(out[:1000], g[:1000] * got[:1000])
    np.testing.assert_array_equal(out[1000:], g[1000:] * E.gelu_values(edge)[1])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_gelu_gradient_under_jit_and_vmap_is_eagers_with_and_without_edges(dtype: type) -> None:
    rng = np.random.default_rng(3)
    plain = (rng.standard_normal((3, 40)) * 3).astype(dtype)
    edged = plain.copy()
    edged[:, :3] = [0.0, np.inf, np.finfo(dtype).smallest_subnormal]
    w = (1 + plain * plain).astype(dtype)  # (positive: the loss is inf, not NaN, with an inf in x)

    def loss(t: object) -> lp.Tensor:
        return (_gelu_exact(t) * w).sum()

    grad = lp.grad(loss)
    jitted = lp.jit(grad)
    strict = lp.jit(grad, strict=True)  # (the check is a choice between two ways to the same slope)
    for x in (plain, edged, plain):
        eager = grad(x)
        assert eager.dtype == dtype
        np.testing.assert_array_equal(jitted(x), eager)
        np.testing.assert_array_equal(strict(x), eager)
        np.testing.assert_array_equal(lp.vmap(grad)(x), np.stack([grad(row) for row in x]))
    assert jitted.trace_count == 2
    np.testing.assert_allclose(grad(edged)[:, :3], w[:, :3] * np.array([0.5, 1.0, 0.5], dtype),
                               rtol=2 * np.finfo(dtype).eps)


def test_exact_gelu_is_finite_at_every_order_at_the_infinities() -> None:
    x = np.array([-np.inf, -60.0, 60.0, np.inf])
    np.testing.assert_array_equal(_gelu_exact(x)._data, [0.0, 0.0, 60.0, np.inf])
    np.testing.assert_array_equal(lp.grad(lambda t: _gelu_exact(t).sum())(x), [0.0, 0.0, 1.0, 1.0])
    second = lp.grad(lambda t: lp.grad(lambda u: _gelu_exact(u).sum())(t).sum())(x)
    np.testing.assert_array_equal(second, [0.0, 0.0, 0.0, 0.0])


def test_gelu_rejects_an_unknown_approximation() -> None:
    for bad in ("exact", "erf", None, True):
        with pytest.raises(ValueError, match="approximate must be 'none'"):
            lp.gelu(np.ones(2), approximate=bad)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="approximate must be 'none'"):
            lp.functional.gelu(np.ones(2), bad)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exact_gelu_matches_the_normal_cdf_and_its_gradients(dtype: type) -> None:
    x = np.linspace(-6, 6, 241).astype(dtype)
    check_grads(_gelu_exact, [x.astype(np.float64)], order=2)
    y = _gelu_exact(x)._data
    assert y.dtype == dtype
    x64 = x.astype(np.float64)
    np.testing.assert_allclose(y, x64 * sp.ndtr(x64), rtol=1e-6 if dtype == np.float32 else 1e-14, atol=1e-7)


@settings(max_examples=25, deadline=None)
@given(hnp.array_shapes(min_dims=0, max_dims=3, max_side=4), st.integers(0, 2**31 - 1))
def test_exact_gelu_on_any_shape_against_its_reference(shape: tuple[int, ...], seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal(shape) * 4
    y = _gelu_exact(lp.Tensor(x))
    assert y.shape == shape
    np.testing.assert_allclose(y._data, x * sp.ndtr(x), rtol=1e-13, atol=1e-15)
    g = lp.grad(lambda t: (_gelu_exact(t) * np.cos(x)).sum())(x)
    np.testing.assert_allclose(g, np.cos(x) * (sp.ndtr(x) + x * np.exp(-x * x / 2) / math.sqrt(2 * math.pi)),
                               rtol=1e-13, atol=1e-15)


def test_nn_names_the_exact_gelu() -> None:
    assert lp.nn.ACTIVATIONS["gelu_exact"] is lp.nn.gelu_exact
    net = lp.nn.MLP([3, 4, 2], rng=0, activation="gelu_exact", dtype=np.float64)
    assert net.activation == "gelu_exact"
    x = np.random.default_rng(1).standard_normal((5, 3))
    l0, l1 = net.layers
    want = _gelu_exact(x @ l0.weight._data + l0.bias._data)._data @ l1.weight._data + l1.bias._data
    np.testing.assert_allclose(net(x)._data, want, rtol=1e-14)
    assert lp.nn.MLP([3, 4, 2], rng=0, activation=lp.nn.gelu_exact).activation == "gelu_exact"
