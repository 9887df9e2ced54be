"""Winograd's numerics: an output depends on its window only.

Winograd's F(4x4, 3x3) mixes the 36 pixels of a tile, so an inf, a NaN or a huge value would
spread to outputs outside its window. The convolutions take im2col for such arrays (the input, the
weight or the cotangent): non-finite values give exactly a direct convolution's pattern of inf and
NaN, and the float32 error of every output and gradient stays within the bound docs/performance.md
states, against a float64 direct convolution of the same float32 inputs, over random inputs with
outliers. Under jit the choice is a guard of the program, so a replay still gives eager's bits.
"""

from __future__ import annotations

import numpy as np
import pytest

import leanpass as lp
from leanpass import functional as F
from leanpass.functional import conv as C

EPS = float(np.finfo(np.float32).eps)
BOUND = 256  # in units of EPS times the scale below: the bound docs/performance.md states (outputs, input gradients)
WEIGHT_BOUND = 1024  # its bound on weight gradients (a sparse cotangent leaves few terms whose errors could cancel)
_win = np.lib.stride_tricks.sliding_window_view


# ----- float64 direct references (a sum over each window, no transforms) ---------------------------------
def _columns(x, p):
    """Each 3x3 window of ``x`` padded by ``p`` as a row ``(c, a, b)``: ``(N * Ho * Wo, C * 9)``."""
    xp = np.pad(x, ((0, 0), (0, 0), (p, p), (p, p)))
    win = _win(xp, (3, 3), axis=(2, 3)).transpose(0, 2, 3, 1, 4, 5)
    return win.reshape(-1, x.shape[1] * 9), win.shape[:3]


def direct(x, w, p):
    cols, (n, ho, wo) = _columns(x, p)
    return (cols @ w.reshape(w.shape[0], -1).T).reshape(n, ho, wo, -1).transpose(0, 3, 1, 2)


def transposed(g, w, p):
    """The input gradient of ``direct(x, w, p)`` for the output cotangent ``g``."""
    return direct(g, w[:, :, ::-1, ::-1].transpose(1, 0, 2, 3), 2 - p)


def weight_grad(x, g, p):
    cols = _columns(x, p)[0]
    o, c = g.shape[1], x.shape[1]
    return (cols.T @ g.transpose(0, 2, 3, 1).reshape(-1, o)).reshape(c, 3, 3, o).transpose(3, 0, 1, 2)


def mean_abs(a):
    """The mean of ``a``'s nonzero magnitudes (0 for an array of zeros): the range check's and the bound's."""
    mags = np.abs(a)
    return mags.sum() / max(np.count_nonzero(mags), 1)


def error_ratio(got, want, scale):
    """The largest ``|got - want| / (EPS * scale)``."""
    err = np.abs(got - want)
    assert np.all(scale > 0) or np.all(err[scale == 0] == 0)
    return float(np.max(err / (EPS * np.where(scale > 0, scale, 1))))


def output_scale(x, w, p):
    """The bound's scale for ``conv2d(x, w)``: the sum of ``|x| |w|`` over each output's window plus the mean of
    the nonzero ``|x|`` times the sum of the output channel's ``|w|`` (float64 ``x`` and ``w``)."""
    return direct(np.abs(x), np.abs(w), p) + mean_abs(x) * np.abs(w).sum(axis=(1, 2, 3))[None, :, None, None]


def input_grad_scale(g, w, p):
    """The same for the input gradient: the cotangent ``g`` in the input's place."""
    return transposed(np.abs(g), np.abs(w), p) + mean_abs(g) * np.abs(w).sum(axis=(0, 2, 3))[None, :, None, None]


def weight_grad_scale(x, g, p):
    """The same for the weight gradient: the cotangent ``g`` in the weight's place."""
    return weight_grad(np.abs(x), np.abs(g), p) + mean_abs(x) * np.abs(g).sum(axis=(0, 2, 3))[:, None, None, None]


def within(r):
    """Whether the error ratios ``(output, input gradient, weight gradient)`` of ``ratios`` are within the bounds."""
    return max(r[:2]) <= BOUND and r[2] <= WEIGHT_BOUND


def ratios(x, w, g, p):
    """The error ratios of conv2d's output and both gradients (float32 ``x``, ``w``, ``g``) over their scales."""
    x64, w64, g64 = (a.astype(np.float64) for a in (x, w, g))
    y, vjp = F.conv2d(x, w, None, 1, p)
    gx, gw = vjp(g)[:2]
    return (error_ratio(y, direct(x64, w64, p), output_scale(x64, w64, p)),
            error_ratio(gx, transposed(g64, w64, p), input_grad_scale(g64, w64, p)),
            error_ratio(gw, weight_grad(x64, g64, p), weight_grad_scale(x64, g64, p)))


def _base(rng, shape):
    kind = rng.integers(4)
    if kind == 1:  # relu'd and sparse
        return np.maximum(rng.standard_normal(shape), 0) * (rng.random(shape) < 10 ** rng.uniform(-1, 0))
    if kind == 2:
        return rng.laplace(size=shape)
    if kind == 3:
        return rng.uniform(-1, 1, shape)
    return rng.standard_normal(shape)


def _spikes(rng, a):
    """Half the time ``a`` with up to three values, whole pixels (every channel) or whole channels made up to 1e6
    times larger."""
    kind = rng.integers(6)
    if kind < 3:
        factor = 10 ** rng.uniform(0, 6)
        for _ in range(int(rng.integers(1, 4))):
            at: list = [int(rng.integers(0, s)) for s in a.shape]
            if kind == 1:
                at[1] = slice(None)
            if kind == 2:
                at[2:] = [slice(None), slice(None)]
            a[tuple(at)] *= factor
    return a


# ----- non-finite values: the pattern of a direct convolution -----------------------------------------------
def _pattern(a):
    return np.isnan(a), np.isposinf(a), np.isneginf(a)


def _same_pattern(got, want):
    for g, w in zip(_pattern(got), _pattern(want)):
        np.testing.assert_array_equal(g, w)
    finite = np.isfinite(want)
    np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4 * np.abs(want[finite]).max())


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_a_non_finite_pixel_reaches_its_window_only(value):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    x[0, 1, 5, 6] = value
    y = lp.conv2d(x, w, padding=1).numpy()
    assert np.sum(~np.isfinite(y)) == 32 * 9  # every output channel at the 3x3 positions whose window holds it
    _same_pattern(y, direct(x.astype(np.float64), w.astype(np.float64), 1))
    # the transposed convolution (Winograd's transposed transforms on these shapes) too
    wt = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    yt = lp.conv_transpose2d(x, wt, padding=1).numpy()
    _same_pattern(yt, transposed(x.astype(np.float64), wt.astype(np.float64), 1))


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("value", [np.inf, np.nan])
def test_a_non_finite_weight_gives_a_direct_convolutions_pattern(value):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    w[3, 4, 0, 2] = value
    y = lp.conv2d(x, w, padding=1).numpy()
    want = direct(x.astype(np.float64), w.astype(np.float64), 1)
    _same_pattern(y, want)
    assert np.all(np.isfinite(np.delete(y, 3, axis=1)))  # the other output channels are untouched


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
@pytest.mark.parametrize("value", [np.inf, -np.inf, np.nan])
def test_a_non_finite_cotangent_gives_a_direct_convolutions_gradients(value):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 32, 10, 9)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    assert C._winograd_fits(x, w, (1, 1), (1, 1), 1)  # the forward runs Winograd
    y, vjp = F.conv2d(x, w, None, 1, 1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    g[1, 2, 4, 3] = value
    gx, gw = vjp(g)[:2]
    x64, w64, g64 = x.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    _same_pattern(gx, transposed(g64, w64, 1))
    _same_pattern(gw, weight_grad(x64, g64, 1))  # (NaN where the padding's zeros meet the inf)
    assert np.sum(~np.isfinite(gx)) == 32 * 9


# ----- outliers: no output moves outside the outlier's window ----------------------------------------------
def test_an_outlier_moves_no_output_outside_its_window():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 32, 16, 16)).astype(np.float32)
    w = rng.standard_normal((32, 32, 3, 3)).astype(np.float32)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    clean_scale = output_scale(x64, w64, 1)
    outside = np.ones((1, 32, 16, 16), bool)
    outside[:, :, 4:7, 5:8] = False
    for value in (1e5, -1e30):
        spiked = x.copy()
        spiked[0, 1, 5, 6] = value
        y = lp.conv2d(spiked, w, padding=1).numpy()
        want = direct(spiked.astype(np.float64), w64, 1)
        # outside the window: within the bound of the convolution without the outlier
        assert error_ratio(y[outside], want[outside], clean_scale[outside]) <= BOUND
        inside = ~outside
        assert np.all(np.abs(y[inside] - want[inside]) <= BOUND * EPS * np.abs(value) * np.abs(w64).max())


def test_an_outlier_in_the_cotangent_moves_no_gradient_outside_its_window():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 32, 12, 12)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    y, vjp = F.conv2d(x, w, None, 1, 1)
    g = rng.standard_normal(y.shape).astype(np.float32)
    g64, w64 = g.astype(np.float64), w.astype(np.float64)
    clean_scale = input_grad_scale(g64, w64, 1)
    g[0, 7, 3, 8] = 1e6
    gx = vjp(g)[0]
    want = transposed(g.astype(np.float64), w64, 1)
    outside = np.ones(gx.shape, bool)
    outside[:, :, 2:5, 7:10] = False
    assert error_ratio(gx[outside], want[outside], clean_scale[outside]) <= BOUND


def test_float32_error_stays_within_the_stated_bound():
    """Random inputs, weights and cotangents with outliers (up to 1e6 times the rest, in single values, whole
    pixels or whole channels; sparse, uniform and heavy-tailed), each output and gradient against a float64
    direct convolution: within the bounds whichever algorithm runs (and Winograd runs on many of them)."""
    rng = np.random.default_rng(5)
    ran = [0, 0]
    for _ in range(60):
        n, c, o, h, p = (int(rng.integers(1, 3)), int(rng.choice([32, 40])), int(rng.choice([32, 36])),
                         int(rng.integers(8, 14)), int(rng.integers(0, 2)))
        x = _spikes(rng, _base(rng, (n, c, h, h))).astype(np.float32)
        w = _spikes(rng, _base(rng, (o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        g = _spikes(rng, _base(rng, (n, o, h + 2 * p - 2, h + 2 * p - 2))).astype(np.float32)
        forward = C._winograd_fits(x, w, (1, 1), (1, 1), 1)
        ran[0] += forward
        ran[1] += forward and C._in_range(g)
        assert within(ratios(x, w, g, p))
    assert min(ran) >= 5  # Winograd's forward and its gradients were among the cases


def _relu_max_pool_cotangent(rng, shape):
    """The cotangent of a layer's output under relu then 2x2 max pooling, from a cotangent of the pooled output
    that a later relu made half zeros (as in VGG-style networks): about one value in nine is nonzero."""
    u = rng.standard_normal((shape[0], shape[1], shape[2] // 2, shape[3] // 2))
    u *= rng.random(u.shape) < 0.5
    y = rng.standard_normal(shape).astype(np.float32)
    g = lp.grad(lambda y: (lp.max_pool2d(lp.relu(y), 2) * u).sum())(y)
    return np.array(g, np.float32)


def test_float32_error_on_sparse_layers_stays_within_the_stated_bound():
    """Inputs with 50-95% zeros (relu'd or not) and relu + max pooling cotangents, with outliers as above: zeros do
    not count against the range check, so Winograd runs on many of them, within the bounds of the stated scale."""
    rng = np.random.default_rng(10)
    ran = [0, 0]
    for _ in range(40):
        n, c, o, h, p = (int(rng.integers(1, 3)), int(rng.choice([32, 40])), int(rng.choice([32, 36])),
                         2 * int(rng.integers(4, 7)), int(rng.integers(0, 2)))
        x = rng.standard_normal((n, c, h, h)) * (rng.random((n, c, h, h)) >= rng.uniform(0.5, 0.95))
        x = _spikes(rng, np.maximum(x, 0) if rng.integers(2) else x).astype(np.float32)
        w = _spikes(rng, _base(rng, (o, c, 3, 3)) / np.sqrt(9 * c)).astype(np.float32)
        g = _spikes(rng, _relu_max_pool_cotangent(rng, (n, o, h + 2 * p - 2, h + 2 * p - 2)))
        forward = C._winograd_fits(x, w, (1, 1), (1, 1), 1)
        ran[0] += forward
        ran[1] += forward and C._in_range(g)
        assert within(ratios(x, w, g, p))
    assert min(ran) >= 8


def test_a_sparse_cotangent_keeps_winograds_gradients(monkeypatch):
    """A wide layer's cotangent through relu and max pooling is mostly zeros: its gradients still take Winograd's
    transposed transforms (the zeros add no rounding error), within the bound."""
    rng = np.random.default_rng(11)
    x = np.maximum(rng.standard_normal((4, 64, 16, 16)), 0).astype(np.float32)
    w = (rng.standard_normal((64, 64, 3, 3)) / 24).astype(np.float32)
    g = _relu_max_pool_cotangent(rng, (4, 64, 16, 16))
    assert 0.05 < np.count_nonzero(g) / g.size < 0.17
    calls = []
    grads = C._winograd_grads
    monkeypatch.setattr(C, "_winograd_grads", lambda *a: calls.append(1) or grads(*a))
    assert within(ratios(x, w, g, 1))
    assert calls == [1]


def test_the_range_check_sends_wide_arrays_to_im2col():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    assert C._winograd_fits(x, w, (1, 1), (1, 1), 1)
    for a, where in ((x, (0, 5, 2, 2)), (w, (1, 1, 1, 1))):
        wide = a.copy()
        wide[where] = C.WINOGRAD_MAX_RANGE * mean_abs(a.astype(np.float64)) * 2
        assert not C._in_range(wide)
        assert not C._winograd_fits(*((wide, w) if a is x else (x, wide)), (1, 1), (1, 1), 1)
    sparse = x * (rng.random(x.shape) < 0.05)  # zeros do not count: the range is the nonzero values'
    assert C._in_range(sparse)
    sparse[0, 5, 2, 2] = C.WINOGRAD_MAX_RANGE * mean_abs(sparse.astype(np.float64)) * 2
    assert not C._in_range(sparse)
    assert C._in_range(np.zeros((2, 32, 8, 8), np.float32))
    assert C._in_range(np.zeros((0, 32, 8, 8), np.float32))
    assert C._in_range(np.full((2, 32, 8, 8), 1e30, np.float32))
    assert not C._in_range(np.full((2, 32, 8, 8), 1e36, np.float32))  # (the sum of magnitudes overflows: im2col)


# ----- jit: the choice is a guard, and a replay gives eager's bits ----------------------------------------------
@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_jit_replays_the_algorithm_eager_chose():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 32, 8, 8)).astype(np.float32)
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    spiked, broken = x.copy(), x.copy()
    spiked[0, 3, 2, 2] = 1e5
    broken[1, 0, 0, 0] = np.nan
    sparse = np.maximum(x, 0) * (rng.random(x.shape) < 0.2)  # (Winograd's, as x)

    def loss(x, w):
        y = lp.conv2d(x, w, padding=1)
        return (y * y).sum()

    layer = lp.jit(lambda x, w: lp.conv2d(x, w, padding=1))
    grads = lp.jit(lp.grad(loss, argnums=(0, 1)))
    for a in (x, spiked, x, broken, spiked, sparse, x):
        assert np.array_equal(layer(a, w).numpy(), lp.conv2d(a, w, padding=1).numpy(), equal_nan=True)
        for got, want in zip(grads(a, w), lp.grad(loss, argnums=(0, 1))(a, w)):
            assert np.array_equal(got, want, equal_nan=True)
    assert layer.trace_count == 2  # one program per choice, each replayed when its guard holds


@pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")
def test_strict_jit_keeps_the_choice_as_a_guard():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 32, 8, 8)).astype(np.float32)
    x[0, 0, 0, 0] = np.inf
    w = (rng.standard_normal((32, 32, 3, 3)) * 0.1).astype(np.float32)
    layer = lp.jit(lambda x, w: lp.conv2d(x, w, padding=1), strict=True)
    assert np.array_equal(layer(x, w).numpy(), lp.conv2d(x, w, padding=1).numpy(), equal_nan=True)
