"""NumPy's elementwise math (the table functional.ELEMENTWISE): values equal to NumPy's, gradients
to second order against finite differences, through lp.<name> and np.<name>, with broadcasting,
float32, and the conventions where a derivative does not exist."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.special
from hypothesis import assume, given
from hypothesis import strategies as st
from op_samples import DOMAINS, SAMPLES, pair
from test_ops_helpers import SMALL, bshapes, seeds, shapes, value

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.testing import check_grads

UNARY = sorted(n for n, (_, ds) in F.ELEMENTWISE.items() if len(ds) == 1)
BINARY = sorted(n for n, (_, ds) in F.ELEMENTWISE.items() if len(ds) == 2)
NOT_NUMPY = {"erf": scipy.special.erf, "erfc": scipy.special.erfc}  # NumPy has none: SciPy is the reference


def lp_fn(name: str):  # the Tensor-level function
    return getattr(lp, name)


def np_fn(name: str):
    return getattr(np, name)


def test_every_entry_is_an_op_with_its_derivatives_and_a_sample() -> None:
    for name, (forward, derivatives) in F.ELEMENTWISE.items():
        op = F.OPS[name]
        assert op.forward is forward and op.derivatives is derivatives and op.__name__ == name
        assert name in SAMPLES and (name in F.TAKES_NEED) == (len(derivatives) == 2)


@pytest.mark.parametrize("name", UNARY)
def test_unary_values_and_gradients(name: str) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    x = DOMAINS[name](rng, (3, 4))
    y = lp_fn(name)(Tensor(x, requires_grad=True))
    assert y._op == name and y.shape == x.shape
    if name in NOT_NUMPY:
        np.testing.assert_allclose(value(y), NOT_NUMPY[name](x), rtol=1e-15, atol=0)
    else:
        np.testing.assert_array_equal(value(y), np_fn(name)(x))
        assert np_fn(name)(Tensor(x, requires_grad=True))._op == name  # NumPy's own function dispatches
    check_grads(lp_fn(name), [x], order=2)


@pytest.mark.parametrize("name", BINARY)
def test_binary_values_and_gradients(name: str) -> None:
    rng = np.random.default_rng(sum(map(ord, name)))
    x, y = pair(name, rng, (3, 4))
    np.testing.assert_array_equal(value(lp_fn(name)(Tensor(x), Tensor(y))), np_fn(name)(x, y))
    assert np_fn(name)(Tensor(x, requires_grad=True), y)._op == name
    assert np_fn(name)(x, Tensor(y, requires_grad=True))._op == name
    check_grads(lp_fn(name), [x, y], order=2)
    check_grads(lambda t: lp_fn(name)(t, y), [x], order=2)  # one input differentiated (need=)
    check_grads(lambda t: lp_fn(name)(x, t), [y], order=2)


@SMALL
@given(st.sampled_from(BINARY), bshapes(), seeds)
def test_binary_broadcasting(name: str, shape_pair: list[tuple[int, ...]], seed: int) -> None:
    rng = np.random.default_rng(seed)
    x, y = pair(name, rng, shape_pair[0])[0], pair(name, rng, shape_pair[1])[1]
    bx, by = np.broadcast_arrays(x, y)
    if name in ("remainder", "fmod"):  # away from the jumps, where x / y is a whole number
        assume(np.all(np.abs(bx / by - np.round(bx / by)) > 0.05))
    if name in ("fmax", "fmin"):  # away from ties
        assume(np.all(np.abs(bx - by) > 0.05))
    out = lp_fn(name)(Tensor(x), Tensor(y))
    np.testing.assert_array_equal(value(out), np_fn(name)(x, y))
    check_grads(lp_fn(name), [x, y], order=2)


@SMALL
@given(st.sampled_from(UNARY), shapes, seeds)
def test_unary_over_shapes(name: str, shape: tuple[int, ...], seed: int) -> None:
    x = DOMAINS[name](np.random.default_rng(seed), shape)
    assert lp_fn(name)(Tensor(x)).shape == shape
    check_grads(lp_fn(name), [x], order=2)


@pytest.mark.parametrize("name", sorted(F.ELEMENTWISE))
def test_float32_stays_float32(name: str) -> None:
    args = [np.asarray(a, dtype=np.float32) if isinstance(a, np.ndarray) else a
            for a in SAMPLES[name](np.random.default_rng(1))]
    arrays = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    ans, vjp = F.OPS[name](*args)
    assert ans.dtype == np.float32, ans.dtype
    cts = vjp(np.ones_like(ans))
    for i in arrays:
        assert cts[i].dtype == np.float32 and cts[i].shape == args[i].shape, (i, cts[i].dtype)
    g = lp.grad(lambda t: lp.apply(F.OPS[name], name, t, *args[1:]).sum())(args[0])
    assert g.dtype == np.float32


def test_aliases_and_operators() -> None:
    x = np.array([30.0, 90.0, -45.0])
    assert lp.radians is lp.deg2rad and lp.degrees is lp.rad2deg and lp.mod is lp.remainder
    np.testing.assert_array_equal(value(np.radians(Tensor(x))), np.radians(x))
    np.testing.assert_array_equal(value(np.degrees(Tensor(x))), np.degrees(x))
    a, b = np.array([5.5, -5.5, 7.0]), np.array([2.0, 2.0, -3.0])
    t = Tensor(a, requires_grad=True)
    for out in (t % b, np.mod(t, b), np.remainder(t, b), a % Tensor(b, requires_grad=True)):
        assert out._op == "remainder"
        np.testing.assert_array_equal(value(out), a % b)
    assert (t % 2.0)._op == "remainder" and (3.0 % t)._op == "remainder"
    # d(x mod y)/dy = -floor(x / y): by hand for the first entry, 5.5 mod 2 = 5.5 - 2 * 2
    assert lp.grad(lambda s: lp.remainder(5.5, s))(np.array(2.0)) == -2.0
    assert lp.grad(lambda s: lp.fmod(-5.5, s))(np.array(2.0)) == 2.0


def test_hand_computed_derivatives() -> None:
    d = lambda f, x: float(lp.grad(f)(np.array(x)))  # noqa: E731
    assert d(lp.log1p, 1.0) == 0.5
    assert math.isclose(d(lp.exp2, 3.0), 8 * math.log(2))
    assert math.isclose(d(lp.log10, 10.0), 1 / (10 * math.log(10)))
    assert math.isclose(d(lp.arcsin, 0.6), 1 / 0.8)
    assert math.isclose(d(lp.arccosh, 2.0), 1 / math.sqrt(3))
    assert math.isclose(d(lp.cbrt, 8.0), 1 / 12)
    assert math.isclose(d(lp.erf, 1.0), 2 / math.sqrt(math.pi) / math.e)
    assert d(lp.reciprocal, 2.0) == -0.25
    assert math.isclose(d(lp.sinc, 0.5), (math.cos(math.pi / 2) - math.sin(math.pi / 2) / (math.pi / 2)) / 0.5)
    gx, gy = lp.grad(lambda x, y: lp.arctan2(x, y), argnums=(0, 1))(np.array(3.0), np.array(4.0))
    assert math.isclose(gx, 4 / 25) and math.isclose(gy, -3 / 25)
    gx, gy = lp.grad(lambda x, y: lp.hypot(x, y), argnums=(0, 1))(np.array(3.0), np.array(4.0))
    assert math.isclose(gx, 0.6) and math.isclose(gy, 0.8)


def test_erf_and_erfc_match_scipy_to_float64_precision() -> None:
    x = np.linspace(-6.0, 6.0, 24001)
    np.testing.assert_allclose(value(lp.erf(Tensor(x))), scipy.special.erf(x), rtol=2e-15, atol=1e-300)
    np.testing.assert_allclose(value(lp.erfc(Tensor(x))), scipy.special.erfc(x), rtol=3e-14)
    far = np.linspace(6.0, 26.0, 401)  # erfc is tiny there and still relatively accurate
    # (against the C library's erfc: SciPy's own errs by up to 5e-14 there)
    np.testing.assert_allclose(value(lp.erfc(Tensor(far))), np.vectorize(math.erfc)(far), rtol=3e-15)
    assert value(lp.erf(Tensor(np.array([np.inf, -np.inf])))).tolist() == [1.0, -1.0]
    x32 = np.linspace(-3, 3, 7, dtype=np.float32)
    assert lp.erf(Tensor(x32)).dtype == np.float32 and lp.erfc(Tensor(x32)).dtype == np.float32
    # a replayed backward pass records one erf node, and the third derivative is right
    d3 = lp.grad(lp.grad(lp.grad(lp.erf)))(np.array(0.7))
    np.testing.assert_allclose(d3, 2 / np.sqrt(np.pi) * np.exp(-0.49) * (4 * 0.49 - 2), rtol=1e-12)


# ----- where a derivative does not exist: one convention, never nan where a subgradient exists ------
def test_zero_gradient_functions_record_and_give_zeros() -> None:
    x = np.array([-1.5, -0.2, 0.0, 0.7, 2.5])
    for name in ("floor", "ceil", "trunc", "rint", "round", "sign"):
        t = Tensor(x, requires_grad=True)
        out = np_fn(name)(t)
        assert out._op == name and out.requires_grad
        np.testing.assert_array_equal(value(out), np_fn(name)(x))
        (out * 3.0).sum().backward()
        np.testing.assert_array_equal(value(t.grad), np.zeros(5))
    assert lp.round(Tensor([1.234]), 2).item() == 1.23
    np.testing.assert_array_equal(value(np.fix(Tensor(x, requires_grad=True))), np.fix(x))
    np.testing.assert_array_equal(value(np.around(Tensor(x), 1)), np.around(x, 1))


def test_kinks_follow_the_documented_convention() -> None:
    g = lambda f, *xs: lp.grad(f, argnums=tuple(range(len(xs))))(*map(np.array, xs))  # noqa: E731
    assert g(lp.fabs, 0.0) == (0.0,)
    assert g(lp.hypot, 0.0, 0.0) == (0.0, 0.0)  # |(x, y)| at the origin: 0, as abs
    assert g(lp.fmax, 1.0, 1.0) == (0.5, 0.5) and g(lp.fmin, 2.0, 2.0) == (0.5, 0.5)
    assert g(lp.fmax, np.nan, 1.0) == (0.0, 1.0)  # fmax ignores the nan
    assert g(lp.arctan2, 0.0, 0.0) == (0.0, 0.0)
    assert g(lp.logaddexp2, -np.inf, -np.inf) == (0.5, 0.5)
    np.testing.assert_array_equal(lp.grad(lambda t: lp.nan_to_num(t).sum())(np.array([np.nan, np.inf, 2.0])),
                                  [0.0, 0.0, 1.0])
    # sinc at 0: first derivative 0, second -pi^2/3 (its Taylor series), no nan at any order
    assert lp.grad(lp.sinc)(np.array(0.0)) == 0.0
    np.testing.assert_allclose(lp.grad(lp.grad(lp.sinc))(np.array(0.0)), -np.pi**2 / 3, rtol=1e-12)
    check_grads(lp.sinc, [np.array([0.0, 1e-4, -0.009, 0.011, 0.5])], order=2)


def test_outside_the_domain_is_nan_without_warnings() -> None:
    out = lp.arcsin(Tensor([2.0], requires_grad=True))
    assert np.isnan(value(out)).all()
    assert np.isnan(lp.grad(lambda t: lp.arccosh(t).sum())(np.array([0.5]))).all()
    assert lp.grad(lambda t: lp.log2(t).sum())(np.array([0.0]))[0] == np.inf


def test_complex_operands_are_refused_naming_the_function() -> None:
    t = Tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(TypeError, match="np.arctan2.*complex"):
        np.arctan2(t, np.array([1j, 1.0]))
    with pytest.raises(TypeError, match="np.dot.*complex"):
        np.dot(t, np.array([1j, 1.0]))
    with pytest.raises(TypeError, match="complex"):
        lp.hypot(t, np.array([1j, 2.0]))


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_sample_runs_its_op_to_second_order(name: str) -> None:
    args = SAMPLES[name](np.random.default_rng(3))
    spots = [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]
    assert spots and name in F.OPS

    def f(*ts: object) -> object:
        full = list(args)
        for i, t in zip(spots, ts):
            full[i] = t
        return lp.apply(F.OPS[name], name, *full)

    check_grads(f, [args[i] for i in spots], order=2)


@pytest.mark.parametrize("name", sorted(F.ELEMENTWISE))
def test_table_derivatives_match_finite_differences(name: str) -> None:
    """Each derivative of the table, on its own (what a forward-mode rule ``t * d(x, ans)`` uses)."""
    forward, derivatives = F.ELEMENTWISE[name]
    args = list(SAMPLES[name](np.random.default_rng(5)))
    inputs = [i for i, a in enumerate(args) if isinstance(a, np.ndarray)]
    assert len(inputs) == len(derivatives)
    ans = forward(*args)
    eps = 1e-6
    for i, d in zip(inputs, derivatives):
        up, down = list(args), list(args)
        up[i], down[i] = args[i] + eps, args[i] - eps
        numeric = (forward(*up) - forward(*down)) / (2 * eps)
        analytic = d(*[args[j] for j in inputs], ans)
        np.testing.assert_allclose(np.broadcast_to(analytic, ans.shape), numeric, rtol=1e-6, atol=1e-7)
