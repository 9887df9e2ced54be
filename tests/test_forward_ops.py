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
from leanpass.forward import transposed_vjp

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


@pytest.mark.parametrize("name", [k for k in NAMES if op(k) in F.JVPS])  # (the others' rules are the transposed)
def test_direct_rule_matches_the_rule_transposed_from_the_vjp(name: str) -> None:
    f, primals, tangents = _setup(name, seed=1)
    args = list(SAMPLES[name](np.random.default_rng(1)))
    diff = differentiable(tuple(args))
    ts: list[Any] = [None] * len(args)
    for i, t in zip(diff, tangents):
        ts[i] = t
    fn = F.OPS[op(name)]
    ans = fn(*args)[0]
    direct = F.JVPS[op(name)](tuple(ts), ans, *args)
    derived = transposed_vjp(fn, op(name), tuple(args), tuple(ts), False)
    np.testing.assert_allclose(np.broadcast_to(direct, np.shape(ans)), derived, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", NAMES)
def test_forward_over_reverse_matches_reverse_over_reverse(name: str) -> None:
    f, primals, tangents = _setup(name, seed=2)
    c = np.random.default_rng(3).standard_normal(np.shape(_out(f(*primals))))

    def scalar(*xs: Any) -> Any:
        return (f(*xs) * c).sum()

    nums = tuple(range(len(primals)))
    _, fwd = lp.jvp(lp.grad(scalar, argnums=nums), primals, (tuple(tangents),)[0])
    rev = lp.grad(lambda *xs: sum((g * t).sum() for g, t in zip(lp.grad(scalar, argnums=nums)(*xs), tangents)),
                  argnums=nums)(*primals)
    for a, b in zip(fwd, rev):
        np.testing.assert_allclose(_out(a), _out(b), rtol=1e-9, atol=1e-10)


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
