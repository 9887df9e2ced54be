"""``rmsprop``, ``adagrad``, the step / piecewise / staircase schedules, ``reduce_on_plateau``,
``set_to_zero`` / ``freeze``, ``ema`` / ``incremental_update``: by hand, against references transcribed
from optax's and PyTorch's algorithms, float32 kept, and under ``lp.jit`` bit for bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses, nn, optim

RNG = np.random.default_rng(0)
P0 = RNG.standard_normal(5)
GRADS = [RNG.standard_normal(5) for _ in range(6)]


def run(opt, grads=GRADS, p0=P0):
    p = p0.copy()
    state = opt.init(p)
    for g in grads:
        u, state = opt.update(g, state, p)
        p = p + u
    return p


# ----- rmsprop ----------------------------------------------------------------------------------------
def test_rmsprop_by_hand():
    opt = optim.rmsprop(0.1, decay=0.5, eps=0.0)
    state = opt.init(np.array([0.0]))
    u1, state = opt.update(np.array([2.0]), state)
    u2, state = opt.update(np.array([2.0]), state)
    # nu = 0.5 * 4 = 2, then 0.5 * 2 + 0.5 * 4 = 3
    np.testing.assert_allclose([u1[0], u2[0]], [-0.2 / math.sqrt(2), -0.2 / math.sqrt(3)], rtol=1e-15)
    opt = optim.rmsprop(1.0, decay=0.5, eps=0.0, centered=True)
    state = opt.init(np.array([0.0]))
    _, state = opt.update(np.array([2.0]), state)
    u, _ = opt.update(np.array([4.0]), state)
    # nu = 2 then 0.5 * 2 + 0.5 * 16 = 9; mu = 1 then 0.5 + 2 = 2.5: 4 / sqrt(9 - 6.25)
    np.testing.assert_allclose(u, [-4 / math.sqrt(2.75)], rtol=1e-15)


def torch_rmsprop(lr, alpha, eps, momentum=0.0, centered=False):
    """torch.optim.RMSprop's algorithm (from its documentation), on P0 and GRADS."""
    p, v, b, g_avg = P0.copy(), np.zeros(5), np.zeros(5), np.zeros(5)
    for g in GRADS:
        v = alpha * v + (1 - alpha) * g * g
        v_tilde = v
        if centered:
            g_avg = alpha * g_avg + (1 - alpha) * g
            v_tilde = v - g_avg * g_avg
        if momentum:
            b = momentum * b + g / (np.sqrt(v_tilde) + eps)
            p = p - lr * b
        else:
            p = p - lr * g / (np.sqrt(v_tilde) + eps)
    return p


@pytest.mark.parametrize("momentum", [0.0, 0.9])
@pytest.mark.parametrize("centered", [False, True])
def test_rmsprop_is_pytorchs_with_eps_outside_the_root(momentum, centered):
    ours = run(optim.rmsprop(0.01, decay=0.99, eps=1e-8, momentum=momentum, centered=centered, eps_in_sqrt=False))
    np.testing.assert_allclose(ours, torch_rmsprop(0.01, 0.99, 1e-8, momentum, centered), rtol=1e-13)


def test_rmsprop_optax_defaults_and_nesterov():
    # optax: nu from initial_scale, g / sqrt(nu + eps), then the learning rate, then trace(momentum, nesterov)
    p, nu, t = P0.copy(), np.full(5, 0.5), np.zeros(5)
    for g in GRADS:
        nu = 0.9 * nu + 0.1 * g * g
        u = -0.01 * (g / np.sqrt(nu + 1e-8))
        t = u + 0.8 * t
        p = p + (u + 0.8 * t)
    ours = run(optim.rmsprop(0.01, initial_scale=0.5, momentum=0.8, nesterov=True))
    np.testing.assert_allclose(ours, p, rtol=1e-13)
    with pytest.raises(ValueError, match="nesterov=True needs momentum"):
        optim.rmsprop(0.1, nesterov=True)


# ----- adagrad ----------------------------------------------------------------------------------------
def test_adagrad_by_hand_and_against_optax_formula():
    opt = optim.adagrad(1.0, initial_accumulator_value=0.0, eps=0.0)
    state = opt.init(np.array([0.0, 0.0]))
    u1, state = opt.update(np.array([3.0, 0.0]), state)
    u2, state = opt.update(np.array([4.0, 0.0]), state)
    np.testing.assert_array_equal(u1, [-1.0, 0.0])  # 0 where nothing was accumulated: no nan
    np.testing.assert_allclose(u2, [-0.8, 0.0], rtol=1e-15)
    p, s = P0.copy(), np.full(5, 0.1)
    for g in GRADS:
        s = s + g * g
        p = p - 0.3 * g / np.sqrt(s + 1e-7)
    np.testing.assert_allclose(run(optim.adagrad(0.3)), p, rtol=1e-13)
    with pytest.raises(ValueError, match="initial_accumulator_value must be >= 0"):
        optim.adagrad(0.1, initial_accumulator_value=-1.0)


@pytest.mark.parametrize("opt", [optim.rmsprop(0.1, momentum=0.5, centered=True), optim.adagrad(0.1),
                                 optim.chain(optim.adam(0.1), optim.freeze({"w": True, "b": False})),
                                 optim.ema(0.9)])
def test_float32_stays_float32(opt):
    params = {"w": np.ones((2, 2), np.float32), "b": np.ones(2, np.float32)}
    updates, _ = opt.update(params, opt.init(params), params)
    assert all(u.dtype == np.float32 for u in lp.tree_flatten(updates)[0])


# ----- schedules ----------------------------------------------------------------------------------------
def test_step_piecewise_and_staircase():
    s = optim.step_decay(0.1, 3, gamma=0.5)
    assert [s(k) for k in range(8)] == [0.1, 0.1, 0.1, 0.05, 0.05, 0.05, 0.025, 0.025]
    e = optim.exponential_decay(1.0, 0.5, 4, staircase=True)
    assert [e(k) for k in (0, 3, 4, 7, 8)] == [1.0, 1.0, 0.5, 0.5, 0.25]
    assert optim.exponential_decay(1.0, 0.5, 4)(2) == 0.5 ** 0.5  # without staircase, as before
    pc = optim.piecewise_constant_schedule(2.0, {5: 0.5, 2: 0.1})
    assert [pc(k) for k in (0, 1, 2, 4, 5, 9)] == [2.0, 2.0, 0.2, 0.2, 0.1, 0.1]
    assert all(type(f(3)) is float for f in (s, e, pc))
    with pytest.raises(ValueError, match="step_size must be > 0"):
        optim.step_decay(0.1, 0)
    with pytest.raises(ValueError, match="must be >= 0"):
        optim.piecewise_constant_schedule(0.1, {-1: 0.5})


# ----- reduce_on_plateau -----------------------------------------------------------------------------------
def optax_plateau(values, factor, patience, rtol, atol, cooldown, accumulation_size, min_scale):
    """optax.contrib.reduce_on_plateau's algorithm (transcribed): the scale after each value."""
    scale, best, plateau, cool, count, avg = 1.0, math.inf, 0, 0, 0, 0.0
    out = []
    for v in values:
        avg = (count * avg + v) / (count + 1)
        count += 1
        if count == accumulation_size:
            improved = avg < (1 - rtol) * best - atol
            best = avg if improved else best
            current = 0 if improved else plateau + 1
            if cool > 0:
                plateau, cool = 0, cool - 1
            else:
                plateau = 0 if current == patience else current
                new_cool = cooldown if current == patience else 0
                scale = max(scale * factor if current == patience else scale, min_scale)
                cool = new_cool
            count, avg = 0, 0.0
        out.append(scale)
    return out


@pytest.mark.parametrize("kw", [
    dict(factor=0.5, patience=2, rtol=1e-4, atol=0.0, cooldown=0, accumulation_size=1, min_scale=0.0),
    dict(factor=0.1, patience=1, rtol=0.0, atol=0.05, cooldown=2, accumulation_size=1, min_scale=0.001),
    dict(factor=0.5, patience=0, rtol=1e-4, atol=0.0, cooldown=1, accumulation_size=3, min_scale=0.0),
])
def test_reduce_on_plateau_follows_optax(kw):
    values = list(np.concatenate([np.linspace(1.0, 0.5, 6), np.full(10, 0.5), RNG.uniform(0.4, 0.6, 20)]))
    plateau = optim.reduce_on_plateau(**kw)
    state = plateau.init(None)
    scales = []
    for v in values:
        updates, state = plateau.update({"w": np.array([1.0])}, state, value=v)
        scales.append(float(updates["w"][0]))
    assert scales == optax_plateau(values, **kw)
    assert min(scales) < 1.0


def test_reduce_on_plateau_in_a_chain_takes_the_loss():
    opt = optim.chain(optim.clip_by_global_norm(10.0), optim.sgd(1.0), optim.reduce_on_plateau(0.5, patience=1))
    p = np.array([0.0])
    state = opt.init(p)
    ups = []
    for loss in (1.0, 2.0, 2.0, 2.0):
        u, state = opt.update(np.array([1.0]), state, p, value=loss)
        ups.append(float(u[0]))
    assert ups == [-1.0, -0.5, -0.25, -0.125]
    with pytest.raises(TypeError, match="value=loss"):
        opt.update(np.array([1.0]), state, p)
    with pytest.raises(ValueError, match="factor must be in"):
        optim.reduce_on_plateau(factor=1.0)


# ----- freezing ------------------------------------------------------------------------------------------
def test_set_to_zero_and_freeze_by_hand():
    params = {"w": np.array([1.0, 2.0]), "b": np.array([3.0])}
    grads = {"w": np.array([1.0, 1.0]), "b": np.array([1.0])}
    zero = optim.set_to_zero()
    assert lp.tree_flatten(zero.update(grads, zero.init(params), params)[0])[0][0].tolist() == [0.0, 0.0]
    opt = optim.chain(optim.adamw(0.1, weight_decay=0.5), optim.freeze({"w": False, "b": True}))
    updates, _ = opt.update(grads, opt.init(params), params)
    assert updates["b"].tolist() == [0.0]  # the weight decay is frozen too
    np.testing.assert_allclose(updates["w"], [-0.1 - 0.05, -0.1 - 0.1])
    with pytest.raises(ValueError, match="structure of the parameters"):
        optim.freeze({"w": True}).update(grads, (), params)


def test_freezing_a_models_first_layer_while_training():
    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64)
    frozen_first = optim.freeze(lambda m: lp.tree_map(lambda p: p is m.layers[0].weight or p is m.layers[0].bias, m))
    opt = optim.chain(optim.sgd(0.1), frozen_first)
    state = opt.init(model)
    x, y = RNG.standard_normal((8, 3)), RNG.integers(0, 2, 8)
    new = model
    for _ in range(3):
        grads = lp.grad(lambda m: losses.cross_entropy(m(x), y))(new)
        updates, state = opt.update(grads, state, new)
        new = optim.apply_updates(new, updates)
    assert np.array_equal(new.layers[0].weight.numpy(), model.layers[0].weight.numpy())
    assert not np.array_equal(new.layers[1].weight.numpy(), model.layers[1].weight.numpy())


# ----- ema and incremental_update ----------------------------------------------------------------------
def test_ema_by_hand_and_optax_formula():
    averager = optim.ema(0.5)
    state = averager.init(np.array([0.0]))
    a1, state = averager.update(np.array([2.0]), state)
    a2, state = averager.update(np.array([4.0]), state)
    np.testing.assert_allclose([a1[0], a2[0]], [2.0, 2.5 / 0.75], rtol=1e-15)
    raw = optim.ema(0.9, debias=False)
    s, m = raw.init(P0), np.zeros(5)
    for g in GRADS:
        out, s = raw.update(g, s)
        m = 0.9 * m + (1 - 0.9) * g
        np.testing.assert_allclose(out, m, rtol=1e-15)
    with pytest.raises(ValueError, match="decay must be in"):
        optim.ema(1.0)


def test_ema_of_a_models_parameters_is_a_model_to_evaluate():
    model = nn.Linear(3, 2, rng=0, dtype=np.float64)
    averager = optim.ema(0.9)
    state = averager.init(model)
    avg, state = averager.update(model, state)
    assert isinstance(avg, nn.Linear) and type(avg.weight) is lp.Tensor
    np.testing.assert_allclose(avg.weight.numpy(), model.weight.numpy(), rtol=1e-15)  # debiased: the value itself
    np.testing.assert_allclose(avg(np.ones((1, 3))).numpy(), model(np.ones((1, 3))).numpy(), rtol=1e-14)


def test_incremental_update_by_hand():
    out = optim.incremental_update({"w": lp.Tensor([1.0])}, {"w": np.array([3.0])}, 0.25)
    assert type(out["w"]) is lp.Tensor and out["w"].item() == 2.5
    with pytest.raises(ValueError, match="same structure"):
        optim.incremental_update([1.0], [1.0, 2.0], 0.5)


# ----- under lp.jit: the same bits as eager ---------------------------------------------------------------
@pytest.mark.parametrize("make", [
    lambda: optim.rmsprop(0.01, momentum=0.9, centered=True),
    lambda: optim.rmsprop(0.01, eps_in_sqrt=False, momentum=0.5, nesterov=True),
    lambda: optim.adagrad(0.1),
    lambda: optim.sgd(optim.step_decay(0.1, 2, 0.5)),
    lambda: optim.sgd(optim.piecewise_constant_schedule(0.1, {1: 0.5, 3: 0.1})),
    lambda: optim.adam(optim.exponential_decay(0.01, 0.5, 2, staircase=True)),
    lambda: optim.chain(optim.adam(0.01), optim.freeze(lambda m: lp.tree_map(lambda p: p.ndim == 1, m))),
])
def test_steps_under_jit_equal_eager(make):
    opt = make()
    x, y = RNG.standard_normal((8, 3)).astype(np.float32), RNG.integers(0, 2, 8)

    def step(model, state):
        grads = lp.grad(lambda m: losses.cross_entropy(m(x), y))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state

    jitted = lp.jit(step)
    me = mj = nn.MLP([3, 4, 2], rng=0)
    se = sj = opt.init(me)
    for _ in range(5):
        me, se = step(me, se)
        mj, sj = jitted(mj, sj)
        for a, b in zip(lp.tree_flatten(me)[0], lp.tree_flatten(mj)[0]):
            assert np.array_equal(np.asarray(a.numpy()), np.asarray(b.numpy()))


def test_the_new_states_save_and_load(tmp_path):
    model = nn.MLP([2, 3, 1], rng=0)
    grads = lp.grad(lambda m: (m(np.ones((1, 2))) ** 2).sum())(model)
    for opt, extra in ((optim.chain(optim.rmsprop(0.1, momentum=0.9), optim.reduce_on_plateau()), {"value": 1.0}),
                       (optim.ema(0.9), {}), (optim.adagrad(0.1), {})):
        _, state = opt.update(grads, opt.init(model), model, **extra)
        lp.save(tmp_path / "s.lp", state)
        loaded = lp.load(tmp_path / "s.lp")
        assert lp.tree_flatten(loaded)[1] == lp.tree_flatten(state)[1]
        for a, b in zip(lp.tree_flatten(state)[0], lp.tree_flatten(loaded)[0]):
            assert np.array_equal(np.asarray(a), np.asarray(b))
