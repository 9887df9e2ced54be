"""float32 stays float32: every op's value, cotangents and tangents, to second order, for its sample
inputs and for 0-d inputs; Python numbers with 0-d Tensors; losses and optimizers.

0-d values are where NumPy 1.x differs: it combines a 0-d array (or a NumPy scalar: a loss, a
scalar parameter, the cotangent of a sum) with a Python number in float64, where NumPy 2 keeps
the array's dtype (NEP 50). LeanPass keeps it on both.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from op_samples import differentiable, every_sample, op_of

import leanpass as lp
from leanpass import Tensor, losses, optim
from leanpass import functional as F

SAMPLES = every_sample()


def _float32(key: str, zero_d: bool) -> tuple[list[Any], list[int]]:
    """The sample arguments of ``key`` with the float inputs in float32 (their first elements, 0-d,
    with ``zero_d``), and the positions of the float inputs."""
    args = list(SAMPLES[key](np.random.default_rng(0)))
    diff = differentiable(tuple(args))
    for i in diff:
        args[i] = np.asarray(args[i].flat[0] if zero_d else args[i], np.float32)
    return args, diff


def _takes_0d(key: str) -> bool:
    """True for the ops whose float inputs may all be 0-d (the elementwise ones, ``sum``, ...)."""
    args = SAMPLES[key](np.random.default_rng(0))
    diff = differentiable(args)
    if len({args[i].shape for i in diff}) != 1:
        return False
    try:
        ans = F.OPS[op_of(key)](*_float32(key, True)[0])[0]
    except Exception:  # (no 0-d form: a shape op, a matrix op, a reduction over an axis, ...)
        return False
    return np.shape(ans) == ()


CASES = [(key, False) for key in sorted(SAMPLES)] + [(key, True) for key in sorted(SAMPLES) if _takes_0d(key)]


def _dtypes(tree: Any) -> set[str]:
    out = set()
    for leaf in lp.tree_flatten(tree)[0]:
        value = leaf._data if type(leaf) is Tensor else leaf
        if value is not None and np.result_type(value).kind == "f":
            out.add(str(np.result_type(value)))
    return out


def test_the_walk_covers_every_op_and_0d_inputs() -> None:
    assert {op_of(key) for key, _ in CASES} == set(F.OPS)
    zero_d = {op_of(key) for key, z in CASES if z}
    assert {"sigmoid", "**", "var", "logsumexp", "erf", "arctan2", "logit", "norm"} <= zero_d


@pytest.mark.parametrize(("key", "zero_d"), CASES, ids=[f"{k}{'-0d' if z else ''}" for k, z in CASES])
def test_every_op_keeps_float32_to_second_order(key: str, zero_d: bool) -> None:
    args, diff = _float32(key, zero_d)
    name = op_of(key)
    fn = F.OPS[name]
    ans, vjp = fn(*args)
    assert _dtypes(ans) == {"float32"}
    cotangents = vjp(np.ones(np.shape(ans), np.float32))
    assert _dtypes([cotangents[i] for i in diff]) == {"float32"}

    def f(*xs: Any) -> Any:
        full = list(args)
        for i, x in zip(diff, xs):
            full[i] = x
        return lp.apply(fn, name, *full)

    def loss(*xs: Any) -> Any:
        return (f(*xs) * 1.5).sum()

    primals = [args[i] for i in diff]
    nums = tuple(range(len(primals)))
    tangents = [np.ones_like(p) for p in primals]
    assert _dtypes(lp.jvp(f, primals, tangents)) == {"float32"}
    assert _dtypes(lp.grad(loss, argnums=nums)(*primals)) == {"float32"}
    second = lp.grad(lambda *xs: sum((g * g).sum() for g in lp.grad(loss, argnums=nums)(*xs)), argnums=nums)
    assert _dtypes(second(*primals)) == {"float32"}
    assert _dtypes(lp.jvp(lp.grad(loss, argnums=nums), primals, tangents)) == {"float32"}


NUMBERS = {
    "t + 1": lambda t: t + 1, "1 - t": lambda t: 1 - t, "t * 2.5": lambda t: t * 2.5, "t / 3": lambda t: t / 3,
    "3 / t": lambda t: 3 / t, "t ** 3": lambda t: t**3, "t ** 0.5": lambda t: t**0.5, "2.0 ** t": lambda t: 2.0**t,
    "t % 0.3": lambda t: t % 0.3, "np.where": lambda t: np.where(t > 0, t, 0.0),
    "np.maximum": lambda t: np.maximum(t, 0.25), "np.clip": lambda t: np.clip(t, 0, 0.5),
    "np.arctan2": lambda t: np.arctan2(t, 2.0), "np.hypot": lambda t: np.hypot(2.0, t),
    "np.logaddexp": lambda t: np.logaddexp(t, 0.0), "np.quantile": lambda t: np.quantile(t, 0.3),
    "np.linalg.norm": lambda t: np.linalg.norm(np.reshape(t, -1), 3), "np.std": lambda t: np.std(t),
    "np.mean": lambda t: np.mean(t) * 2.0,
    "lp.gelu": lambda t: lp.gelu(t), "lp.special.logit": lambda t: lp.special.logit(t * 0.5),
}


@pytest.mark.parametrize("shape", [(), (3,)], ids=["0-d", "1-d"])
@pytest.mark.parametrize("name", list(NUMBERS))
def test_python_numbers_take_the_tensors_dtype(name: str, shape: tuple[int, ...]) -> None:
    # What NumPy 2 does with a Python number (NEP 50), on NumPy 1.x too, where np.float32(0.7) * 2.5
    # is float64: in eager mode, gradients, forward mode, jit, and the eager door (.backward()).
    e = NUMBERS[name]
    x = np.full(shape, 0.7, np.float32)
    t = Tensor(x, requires_grad=True)
    e(t).sum().backward()
    assert _dtypes(e(t)) == _dtypes(t.grad) == {"float32"}
    assert _dtypes(lp.grad(lambda u: e(u).sum())(x)) == {"float32"}
    assert _dtypes(lp.jit(lp.grad(lambda u: e(u).sum()))(x)) == {"float32"}
    assert _dtypes(lp.jvp(e, (x,), (np.ones_like(x),))) == {"float32"}
    assert _dtypes(lp.grad(lambda u: (lp.grad(lambda v: e(v).sum())(u) ** 2).sum())(x)) == {"float32"}


def test_a_float32_loss_is_float32() -> None:
    logits = np.random.default_rng(0).standard_normal((4, 3)).astype(np.float32)
    for reduction in ("mean", "sum", "none"):
        loss = losses.cross_entropy(Tensor(logits, requires_grad=True), np.array([0, 2, 1, 0]), reduction=reduction)
        assert loss.dtype == np.float32
        assert _dtypes(lp.jvp(lambda x, r=reduction: losses.cross_entropy(x, np.array([0, 2, 1, 0]), reduction=r),
                              (logits,), (np.ones_like(logits),))) == {"float32"}


@pytest.mark.parametrize("shape", [(), (3,)], ids=["0-d", "1-d"])
@pytest.mark.parametrize("name", ["sgd", "momentum", "nesterov", "weight decay", "adam", "adamw"])
def test_optimizers_keep_a_float32_parameter_float32(name: str, shape: tuple[int, ...]) -> None:
    # a scalar parameter (a temperature, a bias) as well as a vector: adam crashed on a 0-d one
    opt = {"sgd": optim.sgd(0.1), "momentum": optim.sgd(0.1, momentum=0.9),
           "nesterov": optim.sgd(0.1, momentum=0.9, nesterov=True), "weight decay": optim.sgd(0.1, weight_decay=0.1),
           "adam": optim.adam(0.1), "adamw": optim.adamw(0.1)}[name]
    params = {"w": np.full(shape, 0.5, np.float32)}
    state = opt.init(params)
    for _ in range(3):
        grads = lp.grad(lambda p: (p["w"] ** 2).sum() * 0.5)(params)
        updates, state = opt.update(grads, state, params)
        params = optim.apply_updates(params, updates)
        assert _dtypes((updates, state.slots, params)) == {"float32"}
    want = {"sgd": 0.5 * 0.9**3, "weight decay": 0.5 * 0.89**3}.get(name)
    if want is not None:  # (plain steps, by hand: w <- w - 0.1 (w + decay w))
        np.testing.assert_allclose(params["w"], np.full(shape, want), rtol=1e-6)


@pytest.mark.parametrize("name", sorted(n for n, (_, ds) in F.ELEMENTWISE.items() if len(ds) == 2))
def test_float32_meeting_float64_gives_float64(name: str) -> None:
    # (the casts that keep 0-d float32 float32 on NumPy 1.x must not narrow a float64 result)
    x = np.asarray(0.5, np.float32)
    for y in (np.asarray(0.25), np.full(3, 0.25)):
        ans, vjp = F.OPS[name](x, y)
        assert ans.dtype == np.float64
        assert _dtypes(vjp(np.ones(np.shape(ans)))) == {"float64"}
        assert _dtypes(lp.jvp(lambda a, b, f=F.OPS[name], n=name: lp.apply(f, n, a, b), (x, y),
                              (np.ones_like(x), np.ones_like(y)))) == {"float64"}
