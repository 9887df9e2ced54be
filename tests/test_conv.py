"""Convolutions, pooling, padding and normalisation: values against loop references, VJPs against
finite differences (first and second order, float64), and the errors for bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import functional as F
from leanpass.functional import conv as C
from leanpass.testing import CONV_SAMPLES, check_grads


# ----- straightforward references (loops over output positions, test-only) --------------------------
def ref_conv2d(x, w, b=None, stride=(1, 1), pads=((0, 0), (0, 0)), dilation=(1, 1), groups=1):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), pads[0], pads[1]))
    ho = (h + sum(pads[0]) - dilation[0] * (kh - 1) - 1) // stride[0] + 1
    wo = (wd + sum(pads[1]) - dilation[1] * (kw - 1) - 1) // stride[1] + 1
    y = np.zeros((n, o, ho, wo))
    og = o // groups
    for oc in range(o):
        grp = oc // og
        for i in range(ho):
            for j in range(wo):
                for a in range(kh):
                    for bb in range(kw):
                        r, s = i * stride[0] + a * dilation[0], j * stride[1] + bb * dilation[1]
                        y[:, oc, i, j] += xp[:, grp * cg:(grp + 1) * cg, r, s] @ w[oc, :, a, bb]
    if b is not None:
        y += b.reshape(-1, 1, 1)
    return y


def ref_conv_transpose2d(x, w, stride=(1, 1), pad=(0, 0), output_padding=(0, 0), dilation=(1, 1), groups=1):
    n, cin, h, wd = x.shape
    _, cog, kh, kw = w.shape
    ho = (h - 1) * stride[0] - 2 * pad[0] + dilation[0] * (kh - 1) + output_padding[0] + 1
    wo = (wd - 1) * stride[1] - 2 * pad[1] + dilation[1] * (kw - 1) + output_padding[1] + 1
    full = np.zeros((n, cog * groups, ho + 2 * pad[0] + kh * dilation[0], wo + 2 * pad[1] + kw * dilation[1]))
    cig = cin // groups
    for ci in range(cin):
        grp = ci // cig
        for i in range(h):
            for j in range(wd):
                for a in range(kh):
                    for bb in range(kw):
                        r, s = i * stride[0] + a * dilation[0], j * stride[1] + bb * dilation[1]
                        full[:, grp * cog:(grp + 1) * cog, r, s] += x[:, ci, i, j, None] * w[ci, :, a, bb]
    return full[:, :, pad[0]:pad[0] + ho, pad[1]:pad[1] + wo]


def ref_pool(x, k, s, p, reduce, fill):
    n, c, h, w = x.shape
    xp = np.pad(x, ((0, 0), (0, 0), (p[0], p[0]), (p[1], p[1])), constant_values=fill)
    ho, wo = (h + 2 * p[0] - k[0]) // s[0] + 1, (w + 2 * p[1] - k[1]) // s[1] + 1
    y = np.zeros((n, c, ho, wo))
    for i in range(ho):
        for j in range(wo):
            y[:, :, i, j] = reduce(xp[:, :, i * s[0]:i * s[0] + k[0], j * s[1]:j * s[1] + k[1]], axis=(2, 3))
    return y


# ----- conv2d over hypothesis-chosen settings -------------------------------------------------------
@st.composite
def conv_case(draw):
    groups = draw(st.sampled_from([1, 1, 2, 3]))
    cg = draw(st.integers(1, 2))
    og = draw(st.integers(1, 2))
    kh, kw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    pads = ((draw(st.integers(0, 2)), draw(st.integers(0, 2))), (draw(st.integers(0, 2)), draw(st.integers(0, 2))))
    h = draw(st.integers(max(1, dilation[0] * (kh - 1) + 1 - sum(pads[0])), 7))
    w = draw(st.integers(max(1, dilation[1] * (kw - 1) + 1 - sum(pads[1])), 7))
    n = draw(st.integers(1, 2))
    seed = draw(st.integers(0, 2**16))
    return n, groups * cg, h, w, groups * og, cg, kh, kw, stride, pads, dilation, groups, seed


@settings(max_examples=25, deadline=None)
@given(conv_case())
def test_conv2d_matches_the_loop_reference_and_finite_differences(case):
    n, c, h, w, o, cg, kh, kw, stride, pads, dilation, groups, seed = case
    rng = np.random.default_rng(seed)
    x, wt, b = rng.standard_normal((n, c, h, w)), rng.standard_normal((o, cg, kh, kw)), rng.standard_normal(o)
    y, _ = F.conv2d(x, wt, b, stride, pads, dilation, groups)
    np.testing.assert_allclose(y, ref_conv2d(x, wt, b, stride, pads, dilation, groups), rtol=1e-10, atol=1e-10)
    check_grads(lambda x, wt, b: lp.conv2d(x, wt, b, stride=stride, padding=pads, dilation=dilation,
                                           groups=groups), [x, wt, b], order=2)


@st.composite
def transpose_case(draw):
    groups = draw(st.sampled_from([1, 2]))
    cig, cog = draw(st.integers(1, 2)), draw(st.integers(1, 2))
    k = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 2)))
    dilation = (draw(st.integers(1, 2)), 1)
    pad = (draw(st.integers(0, 1)), draw(st.integers(0, 1)))
    op = tuple(draw(st.integers(0, max(s, d) - 1)) for s, d in zip(stride, dilation))
    h, w = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    size = [(n - 1) * s - 2 * p + d * (kk - 1) + o + 1
            for n, s, p, d, kk, o in zip((h, w), stride, pad, dilation, k, op)]
    if min(size) < 1:
        pad = (0, 0)
    seed = draw(st.integers(0, 999))
    return draw(st.integers(1, 2)), groups * cig, h, w, groups * cog, k, stride, pad, op, dilation, groups, seed


@settings(max_examples=20, deadline=None)
@given(transpose_case())
def test_conv_transpose2d_matches_the_loop_reference_and_finite_differences(case):
    n, cin, h, w, cout, k, stride, pad, op, dilation, groups, seed = case
    rng = np.random.default_rng(seed)
    x, wt = rng.standard_normal((n, cin, h, w)), rng.standard_normal((cin, cout // groups, *k))
    b = rng.standard_normal(cout)
    y, _ = F.conv_transpose2d(x, wt, b, stride, pad, op, dilation, groups)
    want = ref_conv_transpose2d(x, wt, stride, pad, op, dilation, groups) + b.reshape(-1, 1, 1)
    np.testing.assert_allclose(y, want, rtol=1e-10, atol=1e-10)
    check_grads(lambda x, wt, b: lp.conv_transpose2d(x, wt, b, stride=stride, padding=pad, output_padding=op,
                                                     dilation=dilation, groups=groups), [x, wt, b], order=2)


def test_the_three_bilinear_routines_are_adjoint():
    rng = np.random.default_rng(1)
    x, w = rng.standard_normal((2, 4, 7, 6)), rng.standard_normal((6, 2, 3, 2))
    st_, pads, dil = (2, 1), ((1, 0), (2, 1)), (1, 2)
    y, _ = F.conv2d(x, w, None, st_, pads, dil, 2)
    g = rng.standard_normal(y.shape)
    xt, _ = F.conv_transpose_input(g, w, (7, 6), st_, pads, dil, 2)
    wg, _ = F.conv2d_weight(x, g, w.shape, st_, pads, dil, 2)
    inner = np.vdot(y, g)
    assert np.isclose(inner, np.vdot(x, xt)) and np.isclose(inner, np.vdot(w, wg))
    check_grads(lambda g, w: lp.apply(F.conv_transpose_input, "conv_transpose_input", g, w, (7, 6), st_, pads, dil, 2),
                [g, w], order=2)
    check_grads(lambda x, g: lp.apply(F.conv2d_weight, "conv2d_weight", x, g, w.shape, st_, pads, dil, 2),
                [x, g], order=2)


def test_winograd_layers_match_im2col():
    rng = np.random.default_rng(2)
    c = C.WINOGRAD_MIN_CHANNELS
    for h, w, pads in ((8, 8, ((1, 1), (1, 1))), (9, 10, ((1, 1), (0, 2))), (8, 11, ((0, 0), (0, 0))),
                       (13, 9, ((2, 0), (1, 2)))):
        x, wt = rng.standard_normal((2, c, h, w)), rng.standard_normal((c + 1, c, 3, 3))
        assert C._winograd_fits(x, wt, (1, 1), (1, 1), 1)
        got, vjp = F.conv2d(x, wt, None, 1, pads)
        g = rng.standard_normal(got.shape)
        gx, gw = vjp(g)[:2]
        np.testing.assert_allclose(gw, C._wgrad_raw(x, g, wt.shape, (1, 1), pads, (1, 1), 1), rtol=1e-9,
                                   atol=1e-9)  # the Winograd weight gradient against im2col's
        ref_gx = ref_conv_transpose2d(g, wt)[:, :, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + w]
        np.testing.assert_allclose(gx, ref_gx, rtol=1e-9, atol=1e-9)  # the transposed transforms' input gradient
        assert C._winograd_t_fits(g, wt, (h, w), pads, (1, 1), (1, 1), 1)
        np.testing.assert_allclose(F.conv_transpose_input(g, wt, (h, w), (1, 1), pads, (1, 1), 1)[0], ref_gx,
                                   rtol=1e-9, atol=1e-9)
        cols = C._im2col(x, (3, 3), (1, 1), pads, (1, 1), got.shape[2:], 1)
        want = C._nchw(np.matmul(cols, C._weight_matrix(wt, 1)), 2, got.shape[2:])
        np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9)
        x32, w32 = x.astype(np.float32), wt.astype(np.float32)
        for _ in range(2):  # the second call reuses the first one's scratch buffers
            y32 = F.conv2d(x32, w32, None, 1, pads)[0]
            assert y32.dtype == np.float32
            assert np.max(np.abs(y32 - want)) < 2e-5 * np.max(np.abs(want))
        other = F.conv2d(2 * x32, w32, None, 1, pads)[0]  # reusing buffers never changes an earlier result
        assert np.max(np.abs(y32 - want)) < 2e-5 * np.max(np.abs(want))
        assert np.max(np.abs(other - 2 * want)) < 4e-5 * np.max(np.abs(want))
    check_grads(lambda x, w, b: lp.conv2d(x, w, b, padding=1), [rng.standard_normal((1, c, 8, 8)),
                                                               rng.standard_normal((c, c, 3, 3)) * 0.1,
                                                               rng.standard_normal(c)], order=2)


@pytest.mark.parametrize("c, o, h, stride, groups, algorithm", [
    (3, 8, 6, (1, 1), 1, "col2im"),  # few input channels
    (8, 4, 5, (2, 1), 1, "col2im"),  # strided
    (8, 6, 4, (1, 1), 1, "convolution"),  # of the padded gradient with the flipped kernel
    (4, 6, 7, (2, 2), 2, "phases"),
    (32, 32, 8, (1, 1), 1, "winograd"),
])
def test_each_input_gradient_algorithm_matches_the_reference(c, o, h, stride, groups, algorithm):
    rng = np.random.default_rng(c + o + h)
    x, w = rng.standard_normal((2, c, h, h + 1)), rng.standard_normal((o, c // groups, 3, 3))
    pads, size = ((1, 0), (1, 2)), (h, h + 1)
    y, vjp = F.conv2d(x, w, None, stride, pads, 1, groups)
    g = rng.standard_normal(y.shape)
    fits = {"col2im": C._col2im_fits(g, w, size, stride, pads, (1, 1), groups),
            "winograd": C._winograd_t_fits(g, w, size, pads, stride, (1, 1), groups)}
    assert all(fit == (name == algorithm) for name, fit in fits.items())
    covered = ref_conv_transpose2d(g, w, stride, groups=groups)  # the padded input's rows the windows reach
    padded = np.zeros((2, c, h + 1, h + 4))
    padded[:, :, :covered.shape[2], :covered.shape[3]] = covered
    want = padded[:, :, 1:1 + h, 1:2 + h]
    np.testing.assert_allclose(vjp(g)[0], want, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(F.conv_transpose_input(g, w, size, stride, pads, (1, 1), groups)[0], want,
                               rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("c, o, h, stride", [(1, 8, 6, 1), (8, 16, 4, 1), (8, 16, 7, 2), (32, 32, 8, 1)])
def test_interleaved_calls_keep_their_own_saved_values(c, o, h, stride):
    # The fast paths reuse scratch buffers from call to call: a second forward pass before the first
    # one's backward pass must change neither the first output nor its gradients.
    rng = np.random.default_rng(c + h)
    x1, x2 = (rng.standard_normal((2, c, h, h)).astype(np.float32) for _ in range(2))
    w = (rng.standard_normal((o, c, 3, 3)) * 0.2).astype(np.float32)
    y1, vjp1 = F.conv2d(x1, w, None, stride, 1)
    before = y1.copy()
    g = rng.standard_normal(y1.shape).astype(np.float32)
    y2, vjp2 = F.conv2d(x2, w, None, stride, 1)
    vjp2(g)
    gx1, gw1 = vjp1(g)[:2]
    np.testing.assert_array_equal(y1, before)
    x64, w64, g64 = x1.astype(np.float64), w.astype(np.float64), g.astype(np.float64)
    want_gw = C._wgrad_raw(x64, g64, w.shape, (stride, stride), ((1, 1), (1, 1)), (1, 1), 1)
    np.testing.assert_allclose(gw1, want_gw, rtol=1e-4, atol=1e-4 * np.abs(want_gw).max())
    want_gx = F.conv_transpose_input(g64, w64, (h, h), (stride, stride), ((1, 1), (1, 1)), (1, 1), 1)[0]
    np.testing.assert_allclose(gx1, want_gx, rtol=1e-4, atol=1e-4 * np.abs(want_gx).max())


def test_reused_zero_borders_follow_the_interior():
    # 14 and 13 rows both make 4 Winograd tile rows: the second call's padded buffer must not keep
    # the first call's 14th row where its own border (zeros) belongs.
    rng = np.random.default_rng(6)
    c = C.WINOGRAD_MIN_CHANNELS
    w = rng.standard_normal((c, c, 3, 3)).astype(np.float32)
    for h in (14, 13, 14):
        x = rng.standard_normal((1, c, h, 8)).astype(np.float32)
        assert C._winograd_fits(x, w, (1, 1), (1, 1), 1)
        got = F.conv2d(x, w, None, 1, 1)[0]
        want = ref_conv2d(x.astype(np.float64), w.astype(np.float64), None, (1, 1), ((1, 1), (1, 1)))
        assert np.max(np.abs(got - want)) < 2e-5 * np.max(np.abs(want))


def test_winograd_calls_in_a_row_over_sizes_and_paddings():
    # One process, many shapes in a row (the scratch buffers see each): forward and both gradients
    # against im2col from np.pad and a window view (no reused buffer), in float64.
    rng = np.random.default_rng(7)
    c = C.WINOGRAD_MIN_CHANNELS
    w = rng.standard_normal((c, c, 3, 3))
    for _ in range(10):
        h, wd = int(rng.integers(8, 15)), int(rng.integers(8, 15))
        pads = tuple(tuple(int(p) for p in rng.integers(0, 3, 2)) for _ in range(2))
        x = rng.standard_normal((2, c, h, wd))
        y, vjp = F.conv2d(x, w, None, 1, pads)
        cols = C._nhwc_windows(x, (3, 3), (1, 1), pads, (1, 1), y.shape[2:]).transpose(0, 1, 2, 4, 5, 3)
        cols = cols.reshape(1, -1, 9 * c)
        np.testing.assert_allclose(y, C._nchw(np.matmul(cols, C._weight_matrix(w, 1)), 2, y.shape[2:]), atol=1e-9)
        g = rng.standard_normal(y.shape)
        gx, gw = vjp(g)[:2]
        np.testing.assert_allclose(gw, C._wgrad_cols(cols, g, w.shape, 1), atol=1e-9)
        full = ref_conv_transpose2d(g, w)
        np.testing.assert_allclose(gx, full[:, :, pads[0][0]:pads[0][0] + h, pads[1][0]:pads[1][0] + wd], atol=1e-9)


def test_winograd_sized_layers_under_transforms():
    rng = np.random.default_rng(5)
    c = C.WINOGRAD_MIN_CHANNELS
    x, w = rng.standard_normal((2, c, 8, 8)), rng.standard_normal((c, c, 3, 3)) * 0.1
    y = lp.conv2d(x, w, padding=1).numpy()

    def loss(x, w):
        return (lp.conv2d(x, w, padding=1) ** 2).sum()

    gx, gw = lp.grad(loss, argnums=(0, 1))(x, w)
    jx, jw = lp.jit(lp.grad(loss, argnums=(0, 1)))(x, w)
    np.testing.assert_allclose(jx, gx, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(jw, gw, rtol=1e-9, atol=1e-9)
    batched = lp.vmap(lambda x: lp.conv2d(x[None], w, padding=1)[0])(x)
    np.testing.assert_allclose(batched, y, rtol=1e-9, atol=1e-9)
    _, tangent = lp.jvp(lambda x: lp.conv2d(x, w, padding=1), (x,), (x,))
    np.testing.assert_allclose(tangent, y, rtol=1e-9, atol=1e-9)  # linear in x


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_winograd_layers_under_jit_give_eagers_bits(dtype):
    """jit runs the Winograd transforms on its stand-ins (fresh traced work arrays instead of the reused
    buffers): the forward, the three gradients and a second-order gradient equal eager's bit for bit."""
    rng = np.random.default_rng(8)
    c = C.WINOGRAD_MIN_CHANNELS
    x = rng.standard_normal((2, c + 2, 9, 10)).astype(dtype)
    w = (rng.standard_normal((c, c + 2, 3, 3)) * 0.1).astype(dtype)
    b = rng.standard_normal(c).astype(dtype)
    assert C._winograd_fits(x, w, (1, 1), (1, 1), 1)

    def loss(x, w, b):
        return (lp.conv2d(x, w, b, padding=1) ** 2).sum()

    def second(x):
        return (lp.grad(loss)(x, w, b) ** 2).sum()

    eager_y = lp.conv2d(x, w, b, padding=1).numpy()
    assert np.array_equal(lp.jit(lambda x, w, b: lp.conv2d(x, w, b, padding=1))(x, w, b).numpy(), eager_y)
    eager_g = lp.grad(loss, argnums=(0, 1, 2))(x, w, b)
    compiled = lp.jit(lp.grad(loss, argnums=(0, 1, 2)))
    for _ in range(2):  # the trace, then a replay
        assert all(np.array_equal(a, e) for a, e in zip(compiled(x, w, b), eager_g))
    assert np.array_equal(lp.jit(lp.grad(second))(x), lp.grad(second)(x))
    # and the values are the convolution (against the reference loop, to rounding)
    np.testing.assert_allclose(eager_y, ref_conv2d(x, w, b, (1, 1), ((1, 1), (1, 1)), (1, 1), 1),
                               rtol=1e-4 if dtype == np.float32 else 1e-10, atol=1e-4 if dtype == np.float32 else 1e-10)


def test_a_winograd_layer_under_jit_traces_once_for_new_weights():
    """The weight transform stays on jit's trace: new weight values replay the program (no value
    check of the transformed weight, no trace per weight), and give eager's bits."""
    rng = np.random.default_rng(9)
    c = C.WINOGRAD_MIN_CHANNELS
    x = rng.standard_normal((2, c, 8, 8)).astype(np.float32)
    layer = lp.jit(lambda x, w: lp.conv2d(x, w, padding=1))
    step = lp.jit(lp.grad(lambda w, x: (lp.conv2d(x, w, padding=1) ** 2).sum()))
    for _ in range(3):
        w = (rng.standard_normal((c, c, 3, 3)) * 0.1).astype(np.float32)
        assert C._winograd_fits(x, w, (1, 1), (1, 1), 1)
        assert np.array_equal(layer(x, w).numpy(), lp.conv2d(x, w, padding=1).numpy())
        assert np.array_equal(step(w, x), lp.grad(lambda w, x: (lp.conv2d(x, w, padding=1) ** 2).sum())(w, x))
    assert layer.trace_count == 1 and step.trace_count == 1


def test_conv2d_same_valid_and_depthwise():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 5, 6))
    w = rng.standard_normal((3, 1, 2, 3))  # depthwise, even kernel height
    y = lp.conv2d(x, w, padding="same", groups=3, dilation=(2, 1))
    assert y.shape == x.shape
    want = ref_conv2d(x, w, None, (1, 1), ((1, 1), (1, 1)), (2, 1), 3)
    np.testing.assert_allclose(y.numpy(), want, atol=1e-12)
    assert lp.conv2d(x, w, padding="valid", groups=3).shape == (2, 3, 4, 4)
    y32 = lp.conv2d(x.astype(np.float32), w.astype(np.float32), groups=3)
    assert y32.dtype == np.float32


def test_conv1d_matches_conv2d_and_finite_differences():
    rng = np.random.default_rng(4)
    x, w, b = rng.standard_normal((2, 4, 9)), rng.standard_normal((6, 2, 3)), rng.standard_normal(6)
    y = lp.conv1d(x, w, b, stride=2, padding=2, dilation=2, groups=2)
    want = ref_conv2d(x[:, :, None], w[:, :, None], b, (1, 2), ((0, 0), (2, 2)), (1, 2), 2)[:, :, 0]
    np.testing.assert_allclose(y.numpy(), want, atol=1e-12)
    assert lp.conv1d(x, w, padding="same", groups=2).shape == (2, 6, 9)
    check_grads(lambda x, w, b: lp.conv1d(x, w, b, stride=2, padding=1, groups=2), [x, w, b], order=2)


# ----- pooling -----------------------------------------------------------------------------------------
@settings(max_examples=20, deadline=None)
@given(st.integers(1, 3), st.integers(1, 3), st.integers(1, 3), st.integers(0, 1), st.integers(0, 2**16))
def test_pools_match_the_loop_reference_and_finite_differences(kh, kw, s, p, seed):
    p = min(p, kh // 2, kw // 2)
    rng = np.random.default_rng(seed)
    x = rng.permutation(2 * 2 * 6 * 5).reshape(2, 2, 6, 5) / 7.0  # distinct values: max is differentiable
    k = (kh, kw)
    np.testing.assert_allclose(lp.max_pool2d(x, k, s, p).numpy(), ref_pool(x, k, (s, s), (p, p), np.max, -np.inf))
    np.testing.assert_allclose(lp.avg_pool2d(x, k, s, p).numpy(), ref_pool(x, k, (s, s), (p, p), np.mean, 0.0))
    check_grads(lambda x: lp.max_pool2d(x, k, s, p), [x], order=2, eps=1e-4)
    check_grads(lambda x: lp.avg_pool2d(x, k, s, p), [x], order=2)


def test_max_pool_sends_a_tie_to_one_entry_per_window():
    x = lp.Tensor(np.ones((1, 1, 4, 4)), requires_grad=True)
    lp.max_pool2d(x, 2).sum().backward()
    assert x.grad.numpy()[0, 0].tolist() == [[1, 0, 1, 0], [0, 0, 0, 0], [1, 0, 1, 0], [0, 0, 0, 0]]
    x = lp.Tensor(np.ones((1, 1, 3, 3)), requires_grad=True)  # overlapping windows, stride 1
    lp.max_pool2d(x, 2, 1).sum().backward()
    assert x.grad.numpy()[0, 0].tolist() == [[1, 1, 0], [1, 1, 0], [0, 0, 0]]


def test_pool_1d_forms():
    x = np.random.default_rng(5).permutation(24).reshape(2, 3, 4).astype(float)
    np.testing.assert_allclose(lp.max_pool1d(x, 2).numpy(), x.reshape(2, 3, 2, 2).max(-1))
    np.testing.assert_allclose(lp.avg_pool1d(x, 2, 1, 1).numpy(),
                               ref_pool(x[:, :, None], (1, 2), (1, 1), (0, 1), np.mean, 0.0)[:, :, 0])
    check_grads(lambda x: lp.max_pool1d(x, 3, 1, 1), [x], order=2, eps=1e-4)
    check_grads(lambda x: lp.avg_pool1d(x, 3, 2, 1), [x], order=2)


# ----- pad ----------------------------------------------------------------------------------------------
@settings(max_examples=25, deadline=None)
@given(st.sampled_from(["constant", "edge", "reflect", "symmetric", "wrap"]),
       st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=3), st.integers(0, 999))
def test_pad_matches_numpy_and_finite_differences(mode, widths, seed):
    shape = tuple(2 + i for i in range(len(widths)))
    x = np.random.default_rng(seed).standard_normal(shape)
    kwargs = {"constant_values": 1.5} if mode == "constant" else {}
    want = np.pad(x, widths, mode=mode, **kwargs)
    np.testing.assert_array_equal(lp.pad(x, widths, mode, **kwargs).numpy(), want)
    t = lp.Tensor(x, requires_grad=True)
    got = np.pad(t, widths, mode=mode, **kwargs)
    assert got._op == "pad"
    np.testing.assert_array_equal(got.detach().numpy(), want)
    check_grads(lambda x: lp.pad(x, widths, mode, **kwargs), [x], order=2)


def test_pad_forms_of_pad_width():
    x = np.arange(6.0).reshape(2, 3)
    for pw in (1, (1, 2), ((0, 1), (2, 0)), [[1, 1]]):
        np.testing.assert_array_equal(lp.pad(x, pw, "symmetric").numpy(), np.pad(x, pw, "symmetric"))


# ----- normalisation ----------------------------------------------------------------------------------------
def test_batch_norm_values_and_grads():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 3, 2, 2)) * 3 + 1
    w, b = rng.standard_normal(3), rng.standard_normal(3)
    mean = x.mean(axis=(0, 2, 3), keepdims=True)
    var = x.var(axis=(0, 2, 3), keepdims=True)
    want = (x - mean) / np.sqrt(var + 1e-5) * w.reshape(-1, 1, 1) + b.reshape(-1, 1, 1)
    np.testing.assert_allclose(lp.batch_norm(x, w, b).numpy(), want, atol=1e-12)
    check_grads(lambda x, w, b: lp.batch_norm(x, w, b), [x, w, b], order=2)
    x2 = rng.standard_normal((5, 3))
    check_grads(lambda x: lp.batch_norm(x, axis=-1), [x2], order=2)
    y = lp.batch_norm(x2.T, axis=0).numpy()
    np.testing.assert_allclose(y.mean(axis=1), 0, atol=1e-12)


def test_group_norm_values_and_grads():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 6, 3)) * 2
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    xg = x.reshape(2, 3, -1)
    want = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    want = want * w.reshape(-1, 1) + b.reshape(-1, 1)
    np.testing.assert_allclose(lp.group_norm(x, 3, w, b).numpy(), want, atol=1e-12)
    check_grads(lambda x, w, b: lp.group_norm(x, 3, w, b), [x, w, b], order=2)
    check_grads(lambda x: lp.group_norm(x, 2), [rng.standard_normal((2, 4, 2, 2))], order=2)


# ----- bad input ----------------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, words", [
    (lambda: lp.conv2d(np.ones((1, 3, 5, 5)), np.ones((4, 2, 3, 3))), ["3 channels", "(4, 2, 3, 3)"]),
    (lambda: lp.conv2d(np.ones((1, 4, 5, 5)), np.ones((3, 2, 3, 3)), groups=2), ["groups=2", "(3, 2, 3, 3)"]),
    (lambda: lp.conv2d(np.ones((1, 3, 5, 5)), np.ones((3, 1, 3, 3)), groups=2), ["groups=2", "(1, 3, 5, 5)"]),
    (lambda: lp.conv2d(np.ones((1, 1, 2, 2)), np.ones((1, 1, 3, 3))), ["kernel", "padded input", "(1, 1, 2, 2)"]),
    (lambda: lp.conv2d(np.ones((1, 5, 5)), np.ones((1, 1, 3, 3))), ["4 axes", "(1, 5, 5)"]),
    (lambda: lp.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), padding=-1), ["padding", ">= 0"]),
    (lambda: lp.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=0), ["stride", ">= 1"]),
    (lambda: lp.conv2d(np.ones((1, 1, 5, 5)), np.ones((1, 1, 3, 3)), stride=2, padding="same"), ["same", "stride"]),
    (lambda: lp.conv2d(np.ones((1, 1, 5, 5)), np.ones((2, 1, 3, 3)), np.ones(3)), ["bias", "(2,)"]),
    (lambda: lp.conv1d(np.ones((1, 5)), np.ones((1, 1, 3))), ["3 axes", "(1, 5)"]),
    (lambda: lp.conv_transpose2d(np.ones((1, 2, 3, 3)), np.ones((3, 1, 3, 3))), ["2 channels", "(3, 1, 3, 3)"]),
    (lambda: lp.conv_transpose2d(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), output_padding=1),
     ["output_padding", "stride"]),
    (lambda: lp.max_pool2d(np.ones((1, 1, 2, 2)), 3), ["kernel", "(1, 1, 2, 2)"]),
    (lambda: lp.max_pool2d(np.ones((1, 1, 4, 4)), 2, padding=2), ["padding", "half"]),
    (lambda: lp.avg_pool2d(np.ones((4, 4)), 2), ["4 axes", "(4, 4)"]),
    (lambda: lp.pad(np.ones(3), -1), ["negative"]),
    (lambda: lp.pad(np.ones((2, 2)), ((1, 1), (1, 1), (1, 1))), ["(2, 2)"]),
    (lambda: lp.pad(np.ones(3), 1, mode="mean"), ["mode"]),
    (lambda: lp.batch_norm(np.ones((2, 3)), np.ones(2)), ["weight", "(3,)"]),
    (lambda: lp.group_norm(np.ones((2, 6, 2)), 4), ["num_groups=4", "(6)"]),
])
def test_bad_input_raises_a_value_error_naming_it(call, words):
    with pytest.raises(ValueError) as info:
        call()
    for w in words:
        assert w in str(info.value), (w, str(info.value))


def test_inputs_are_not_mutated():
    x, w = np.ones((1, 2, 4, 4)), np.ones((2, 1, 3, 3))
    x.flags.writeable = w.flags.writeable = False
    lp.grad(lambda x, w: lp.conv2d(x, w, groups=2, padding=1).sum(), argnums=(0, 1))(x, w)
    lp.grad(lambda x: lp.max_pool2d(x, 2).sum())(x)


@pytest.mark.parametrize("name", sorted(CONV_SAMPLES))
def test_every_sample_op_is_in_the_table_and_differentiates_twice(name):
    args = CONV_SAMPLES[name]()
    assert name in F.OPS
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]

    def f(*xs):
        full = list(args)
        for i, x in zip(arrays, xs):
            full[i] = x
        return lp.apply(F.OPS[name], name, *full)

    check_grads(f, [args[i] for i in arrays], order=2)
