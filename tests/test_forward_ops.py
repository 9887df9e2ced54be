"""Every op in ``functional.OPS`` under forward mode: its tangent against central finite
differences, its direct rule against the rule transposed from its VJP, forward over reverse
against reverse over reverse, and its dtype. Inputs come from ``op_samples.SAMPLES``."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from op_samples import differentiable, every_sample

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F
from leanpass.transforms import forward_mode as forward
from leanpass.transforms.forward_mode import transposed_vjp

SAMPLES = every_sample()
NAMES = sorted(SAMPLES)  # an op's name, or name/variant


def op(key: str) -> str:
    return key if key in F.OPS else key.split("/")[0]


def _setup(name: str, seed: int = 0) -> tuple[Any, list[np.ndarray], list[np.ndarray]]:
    """``(f, primals, tangents)``: ``f`` calls the op with its differentiable inputs as arguments."""
    rng = np.random.default_rng(seed)
    args = SAMPLES[name](rng)
    diff = differentiable(args)
    fn = F.OPS[op(name)]

    def f(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return lp.apply(fn, op(name), *full)

    primals = [args[i] for i in diff]
    return f, primals, [rng.standard_normal(p.shape) for p in primals]


def _out(t: Any) -> np.ndarray:
    return np.asarray(t._data if type(t) is Tensor else t, dtype=np.float64)


def test_every_op_has_samples() -> None:
    missing = sorted(set(F.OPS) - {op(key) for key in SAMPLES})
    assert not missing, f"ops without sample inputs in tests/op_samples*.py: {missing}"
    for key in NAMES:
        assert op(key) in F.OPS and differentiable(SAMPLES[key](np.random.default_rng(0))), key


@pytest.mark.parametrize("name", NAMES)
def test_jvp_of_every_op_matches_finite_differences(name: str) -> None:
    f, primals, tangents = _setup(name)
    out, tangent = lp.jvp(f, primals, tangents)
    single = out.dtype == np.float32  # (an op that casts to float32: differences in its precision)
    eps, tol = (1e-3, 1e-4) if single else (1e-6, 1e-6)
    plus = _out(f(*[Tensor(p + eps * t) for p, t in zip(primals, tangents)]))
    minus = _out(f(*[Tensor(p - eps * t) for p, t in zip(primals, tangents)]))
    assert tangent.shape == out.shape and tangent.dtype == out.dtype
    np.testing.assert_allclose(_out(tangent), (plus - minus) / (2 * eps), rtol=tol, atol=tol * 1e-2)


def test_every_op_has_a_forward_mode_rule_of_its_own() -> None:
    missing = sorted(set(F.OPS) - set(F.JVPS))
    assert not missing, f"ops without a forward-mode rule in functional.JVPS: {missing}"


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_direct_rule_matches_the_rule_transposed_from_the_vjp(name: str, dtype: Any) -> None:
    f, primals, tangents = _setup(name, seed=1)
    args = [a.astype(dtype) if i in differentiable(tuple(a for a in SAMPLES[name](np.random.default_rng(1))))
            else a for i, a in enumerate(SAMPLES[name](np.random.default_rng(1)))]
    diff = differentiable(tuple(args))
    ts: list[Any] = [None] * len(args)
    for i, t in zip(diff, tangents):
        ts[i] = t.astype(dtype)
    fn = F.OPS[op(name)]
    ans = fn(*args)[0]
    direct = np.broadcast_to(F.JVPS[op(name)](tuple(ts), ans, *args), np.shape(ans))
    derived = transposed_vjp(fn, op(name), tuple(args), tuple(ts), False)
    assert direct.dtype == derived.dtype == np.result_type(ans)
    if dtype == np.float64:
        np.testing.assert_allclose(direct, derived, rtol=1e-12, atol=1e-12)
    else:  # (two float32 computations: the same up to their rounding, relative to the tangent's size)
        scale = float(np.max(np.abs(derived.astype(np.float64)), initial=1.0))
        np.testing.assert_allclose(direct, derived, rtol=2e-5, atol=2e-6 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_jvp_never_transposes_a_built_in_op(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    # Every op the function records, and every op its gradient's replay records (jvp of grad), has a rule.
    def refuse(fn: Any, name: str, *args: Any) -> Any:
        raise AssertionError(f"jvp transposed the VJP of the built-in op {name!r}")

    monkeypatch.setattr(forward, "transposed_vjp", refuse)
    f, primals, tangents = _setup(name, seed=7)
    lp.jvp(f, primals, tangents)
    c = np.random.default_rng(8).standard_normal(np.shape(_out(f(*primals))))
    lp.jvp(lp.grad(lambda *xs: (f(*xs) * c).sum(), argnums=tuple(range(len(primals)))), primals, tangents)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("name", NAMES)
def test_forward_over_reverse_matches_reverse_over_reverse(name: str, dtype: Any) -> None:
    f, primals, tangents = _setup(name, seed=2)
    primals, tangents = [p.astype(dtype) for p in primals], [t.astype(dtype) for t in tangents]
    c = np.random.default_rng(3).standard_normal(np.shape(_out(f(*primals)))).astype(dtype)

    def scalar(*xs: Any) -> Any:
        return (f(*xs) * c).sum()

    nums = tuple(range(len(primals)))
    _, fwd = lp.jvp(lp.grad(scalar, argnums=nums), primals, (tuple(tangents),)[0])
    rev = lp.grad(lambda *xs: sum((g * t).sum() for g, t in zip(lp.grad(scalar, argnums=nums)(*xs), tangents)),
                  argnums=nums)(*primals)
    for a, b in zip(fwd, rev):
        assert a.dtype == b.dtype == dtype, (a.dtype, b.dtype)
        if dtype == np.float64:
            np.testing.assert_allclose(_out(a), _out(b), rtol=1e-9, atol=1e-10)
        else:  # (two float32 computations, relative to the size of the product)
            scale = float(np.max(np.abs(_out(b)), initial=1.0))
            np.testing.assert_allclose(_out(a), _out(b), rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("name", NAMES)
def test_float32_tangents_stay_float32(name: str) -> None:
    f, primals, tangents = _setup(name, seed=4)
    out, tangent = lp.jvp(f, [p.astype(np.float32) for p in primals], [t.astype(np.float32) for t in tangents])
    assert out.dtype == np.float32 and tangent.dtype == np.float32, (out.dtype, tangent.dtype)


# The limits at +-inf that the VJPs define (docs/operations.md): the forward rules give the same.
LIMITS: dict[str, tuple[Any, tuple[Any, ...]]] = {
    "softmax": (lambda x: lp.softmax(x), (np.array([[np.inf, 1.0, np.inf], [-np.inf, 0.0, 2.0]]),)),
    "log_softmax": (lambda x: lp.log_softmax(x), (np.array([[-np.inf, 0.0, 2.0], [1000.0, -1000.0, 0.0]]),)),
    "logsumexp": (lambda x: lp.logsumexp(x, axis=1), (np.array([[np.inf, 1.0], [-np.inf, -np.inf]]),)),
    "softplus": (lp.softplus, (np.array([np.inf, -np.inf, 0.0, 800.0]),)),
    "sigmoid": (lp.sigmoid, (np.array([np.inf, -np.inf, 1000.0, -1000.0]),)),
    "gelu": (lp.gelu, (np.array([np.inf, -np.inf, 20.0, -20.0]),)),
    "logaddexp": (lp.logaddexp, (np.array([np.inf, -np.inf, 0.0]), np.array([np.inf, -np.inf, -np.inf]))),
    "cross_entropy": (lambda x: lp.losses.cross_entropy(x, np.array([0, 1])),
                      (np.array([[1000.0, -1000.0, 0.0], [-np.inf, 0.0, 1.0]]),)),
}


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_forward_rules_keep_the_vjps_limits(name: str) -> None:
    f, primals = LIMITS[name]
    tangents = tuple(np.random.default_rng(0).standard_normal(np.shape(p)) for p in primals)
    out, jt = lp.jvp(f, primals, tangents)
    jac = lp.jacrev(f, argnums=tuple(range(len(primals))))(*primals)  # from the VJPs
    want = sum(np.tensordot(j, t, axes=t.ndim) for j, t in zip(jac, tangents))
    assert np.all(np.isfinite(_out(jt))), _out(jt)
    np.testing.assert_allclose(_out(jt), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_vmap_over_the_tangents_of_every_op(name: str) -> None:
    # Plain primals, batched tangents: each rule then meets a tangent that is batched where the
    # values it combines it with are not (what vmap(jvp) over directions, or jacfwd by vmap, does).
    f, primals, _ = _setup(name, seed=5)
    rng = np.random.default_rng(6)
    stacks = [rng.standard_normal((3, *np.shape(p))) for p in primals]
    batched = lp.vmap(lambda *ts: lp.jvp(f, primals, ts)[1])(*stacks)
    looped = [_out(lp.jvp(f, primals, [s[k] for s in stacks])[1]) for k in range(3)]
    np.testing.assert_allclose(_out(batched), np.stack(looped), rtol=1e-12, atol=1e-12)


# ----- edge cases of the rules: each against the Jacobian the VJPs give, and values by hand ---------------------
def _jac_times(f: Any, primals: tuple[Any, ...], tangents: tuple[Any, ...]) -> np.ndarray:
    jac = lp.jacrev(f, argnums=tuple(range(len(primals))))(*primals)  # from the VJPs
    return sum(np.tensordot(_out(j), t, axes=np.ndim(t)) for j, t in zip(jac, tangents))


def test_prod_and_cumprod_tangents_are_exact_at_zeros() -> None:
    one = np.ones(3)
    for x, axis, want in (
        ([2.0, 0.0, 4.0], None, 8.0),  # only the zero's own tangent counts: 2 * 4
        ([0.0, 0.0, 3.0], None, 0.0),  # two zeros: every product of the others holds a zero
        ([0.0, 1.0, 3.0], 0, 3.0),
    ):
        _, t = lp.jvp(lambda a, axis=axis: lp.prod(a, axis=axis), (np.array(x),), (one,))
        assert float(_out(t)) == want
    x = np.array([2.0, 0.0, 4.0])
    _, t = lp.jvp(lp.cumprod, (x,), (one,))  # [x0, x0 x1, x0 x1 x2]: [1, x1 + x0, x1 x2 + x0 x2 + x0 x1]
    np.testing.assert_array_equal(_out(t), [1.0, 2.0, 8.0])
    rng = np.random.default_rng(0)
    x = rng.uniform(0.5, 1.5, (3, 4, 2))
    x[0, 1, 0] = x[2, 0, 1] = x[2, 3, 1] = 0.0
    tx = rng.standard_normal(x.shape)
    for f in (lambda a: lp.prod(a, axis=1), lambda a: lp.prod(a, axis=(0, 2), keepdims=True), lp.prod,
              lambda a: lp.cumprod(a, axis=1), lambda a: lp.cumprod(a, axis=-1), lp.cumprod):
        _, t = lp.jvp(f, (x,), (tx,))
        np.testing.assert_allclose(_out(t), _jac_times(f, (x,), (tx,)), rtol=1e-12, atol=1e-14)
        # and to second order: forward over reverse against reverse over reverse, at the zeros
        c = rng.standard_normal(np.shape(_out(f(x))))
        g = lp.grad(lambda a, f=f, c=c: (f(a) * c).sum())
        np.testing.assert_allclose(_out(lp.jvp(g, (x,), (tx,))[1]),
                                   lp.grad(lambda a, g=g: (g(a) * tx).sum())(x), rtol=1e-12, atol=1e-14)


def test_max_pooling_tangents_follow_the_vjps_choice_on_ties() -> None:
    # windows [1, 3], [3, 3], [3, 2]: the first maximum of each, as the VJP (and PyTorch) choose
    x = np.array([[[1.0, 3.0, 3.0, 2.0]]])
    t = np.array([[[10.0, 20.0, 30.0, 40.0]]])
    _, jt = lp.jvp(lambda a: lp.max_pool1d(a, 2, 1), (x,), (t,))
    np.testing.assert_array_equal(_out(jt), [[[20.0, 20.0, 30.0]]])
    _, jt = lp.jvp(lambda a: lp.max_pool2d(a, 2), (np.ones((1, 1, 2, 2)),), (np.arange(4.0).reshape(1, 1, 2, 2),))
    assert float(_out(jt).squeeze()) == 0.0  # all four tie: the first tap's tangent
    rng = np.random.default_rng(1)
    x = np.round(rng.standard_normal((2, 3, 7, 6)))  # integers: many ties
    x[0, 0, 2, 3] = np.nan  # its windows choose nothing (no tangent, as no cotangent)
    x[1, 2, :3, :3] = -np.inf  # a window of -inf that reaches into the padding
    tx = rng.standard_normal(x.shape)
    for f in (lambda a: lp.max_pool2d(a, 2), lambda a: lp.max_pool2d(a, 3, 1, 1), lambda a: lp.max_pool2d(a, 3, 2, 1),
              lambda a: lp.max_pool2d(a, 2, 1, 0, 2), lambda a: lp.max_pool1d(lp.reshape(a, (2, 3, 42)), 3, 2, 1)):
        with np.errstate(invalid="ignore"):
            _, jt = lp.jvp(f, (x,), (tx,))
            want = _jac_times(f, (x,), (tx,))
        np.testing.assert_array_equal(_out(jt), want)
        for dtype in (np.float32, np.float64):  # a tangent is one of the input's tangents, bit for bit
            assert set(np.ravel(_out(lp.jvp(f, (x.astype(dtype),), (tx.astype(dtype),))[1]))) <= {0.0, *np.ravel(
                tx.astype(dtype).astype(np.float64))}


def test_power_tangents_at_negative_bases_and_zero() -> None:
    x = np.array([-2.0, -0.5, 0.0, 0.0, 3.0])
    tx = np.array([1.0, 2.0, 1.0, 1.0, 0.5])
    for p, want in ((3, [12.0, 1.5, 0.0, 0.0, 13.5]), (2, [-4.0, -2.0, 0.0, 0.0, 3.0]), (1, [1.0, 2.0, 1.0, 1.0, 0.5]),
                    (0, [0.0] * 5), (-1, [-0.25, -8.0, -np.inf, -np.inf, -0.5 / 9])):
        with np.errstate(divide="ignore"):
            _, t = lp.jvp(lambda a, p=p: a ** p, (x,), (tx,))
        np.testing.assert_allclose(_out(t), want, rtol=1e-15)
    with np.errstate(divide="ignore"):
        _, t = lp.jvp(lambda a: a ** 0.5, (np.array([0.0, 4.0]),), (np.array([1.0, 1.0]),))
    np.testing.assert_array_equal(_out(t), [np.inf, 0.25])
    # an array exponent: the base's slope y x^(y-1) for any base; the exponent's, x^y log x, is 0 where x <= 0
    # (no real log there), as in the VJP; 0 ** 0 = 1 has slope 0 in the base
    y = np.array([3.0, 2.0, 0.0, 2.0, 0.5])
    ty = np.array([1.0, 1.0, 1.0, 1.0, 2.0])
    with np.errstate(divide="ignore", invalid="ignore"):
        _, t = lp.jvp(lambda a, b: a ** b, (x, y), (tx, ty))
        want = _jac_times(lambda a, b: a ** b, (x, y), (tx, ty))
    np.testing.assert_allclose(_out(t), [12.0, -2.0, 0.0, 0.0, 0.5 * 0.5 / np.sqrt(3) + 2 * np.sqrt(3) * np.log(3)],
                               rtol=1e-15)
    np.testing.assert_allclose(_out(t), want, rtol=1e-15)
    # broadcast inputs, and infinite ones (the VJP's limits: slopes 0 where the value is flat at 0)
    a, b = np.array([[0.5], [2.0], [np.inf]]), np.array([-np.inf, -1.0, 2.0, np.inf])
    ta, tb = np.ones((3, 1)), np.ones(4)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        _, t = lp.jvp(lambda u, v: u ** v, (a, b), (ta, tb))
        want = transposed_vjp(F.power, "**", (a, b), (ta, tb), False)  # (J t element by element: no inf * 0)
    np.testing.assert_array_equal(_out(t), want)
    assert not np.isnan(_out(t)).any()
