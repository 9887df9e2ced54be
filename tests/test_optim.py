"""Optimizers against hand-computed references; purity; schedules; clipping; the eager helper."""

from __future__ import annotations

import math
import pickle

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses, nn, optim


def adam_reference(grads, lr=0.1, b1=0.9, b2=0.999, eps=1e-8, wd=0.0, p0=1.0):
    """Adam written out step by step in plain Python floats, for one scalar parameter."""
    p, m, v, out = p0, 0.0, 0.0, []
    for t, g in enumerate(grads, start=1):
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        m_hat = m / (1 - b1**t)
        v_hat = v / (1 - b2**t)
        p = p - lr * m_hat / (math.sqrt(v_hat) + eps) - lr * wd * p
        out.append(p)
    return out


def run(opt, grads, p0=1.0):
    params = {"w": lp.Tensor([p0])}
    state = opt.init(params)
    out = []
    for g in grads:
        updates, state = opt.update({"w": np.array([g])}, state, params)
        params = optim.apply_updates(params, updates)
        out.append(params["w"].item())
    return out


def test_adam_matches_a_hand_computed_reference():
    grads = [0.5, -1.0, 2.0, 0.25, -0.125]
    np.testing.assert_allclose(run(optim.adam(0.1), grads), adam_reference(grads), rtol=1e-13)
    # the first three steps, by hand: step 1 moves by -lr*sign(g)
    assert run(optim.adam(0.1), [0.5])[0] == pytest.approx(0.9, abs=1e-8)
    np.testing.assert_allclose(run(optim.adamw(0.1, weight_decay=0.01), grads, p0=2.0),
                               adam_reference(grads, wd=0.01, p0=2.0), rtol=1e-13)


def test_sgd_momentum_and_nesterov_by_hand():
    grads = [1.0, 1.0, 1.0]
    assert run(optim.sgd(0.1), grads) == pytest.approx([0.9, 0.8, 0.7])
    # v = 0.9 v + g: 1, 1.9, 2.71
    assert run(optim.sgd(0.1, momentum=0.9), grads) == pytest.approx([0.9, 0.71, 0.439])
    # nesterov: update -lr (g + m v): 1.9, 2.71, 3.439
    assert run(optim.sgd(0.1, momentum=0.9, nesterov=True), grads) == pytest.approx([0.81, 0.539, 0.1951])
    with pytest.raises(ValueError, match="nesterov=True needs momentum"):
        optim.sgd(0.1, nesterov=True)
    with pytest.raises(ValueError, match="momentum must be"):
        optim.sgd(0.1, momentum=1.5)


def test_schedule_is_called_with_the_step():
    seen = []

    def schedule(step):
        seen.append(step)
        return 0.1 / (step + 1)

    assert run(optim.sgd(schedule), [1.0, 1.0, 1.0]) == pytest.approx([0.9, 0.85, 0.85 - 0.1 / 3])
    assert seen == [0, 1, 2]
    s = optim.warmup_cosine(1.0, 10, 100)
    assert s(0) == 0.0 and s(10) == 1.0 and s(110) == pytest.approx(0.0)
    assert optim.exponential_decay(1.0, 0.5, 10)(10) == 0.5


def test_nothing_is_mutated_and_old_state_stays_valid():
    params = {"a": lp.Tensor(np.ones(3, dtype=np.float32)), "b": [np.zeros(2)]}
    grads = {"a": np.full(3, 0.5, dtype=np.float32), "b": [np.ones(2)]}
    grads_copy = {"a": grads["a"].copy(), "b": [grads["b"][0].copy()]}
    for opt in (optim.sgd(0.1, momentum=0.9), optim.adam(0.1), optim.adamw(0.1)):
        state0 = opt.init(params)
        u1, state1 = opt.update(grads, state0, params)
        u1_again, _ = opt.update(grads, state0, params)  # the old state still gives the same answer
        for x, y in zip(lp.tree_flatten(u1)[0], lp.tree_flatten(u1_again)[0]):
            np.testing.assert_array_equal(x, y)
        new = optim.apply_updates(params, u1)
        assert new is not params and new["a"] is not params["a"]
        np.testing.assert_array_equal(params["a"].numpy(), 1.0)
        np.testing.assert_array_equal(params["b"][0], 0.0)
        np.testing.assert_array_equal(grads["a"], grads_copy["a"])
        assert new["a"].dtype == np.float32 and isinstance(new["b"][0], np.ndarray)


def test_scalar_tensor_params_train_and_results_are_read_only():
    params = {"w": lp.Tensor(1.0), "v": lp.Tensor([1.0, 2.0])}  # a 0-d update is a NumPy scalar
    opt = optim.sgd(0.25)
    grads = lp.grad(lambda p: p["w"] ** 2 + (p["v"] ** 2).sum())(params)
    updates, _ = opt.update(grads, opt.init(params), params)
    new = optim.apply_updates(params, updates)
    assert new["w"].item() == 0.5 and new["v"].tolist() == [0.5, 1.0]
    assert not new["v"].numpy().flags.writeable


def test_float32_state_and_updates_stay_float32_with_a_schedule():
    p = {"w": lp.Tensor(np.ones(4, dtype=np.float32))}
    for opt in (optim.sgd(optim.cosine_decay(0.1, 10), momentum=0.9), optim.adam(optim.cosine_decay(0.1, 10))):
        updates, state = opt.update({"w": np.ones(4, dtype=np.float32)}, opt.init(p), p)
        assert updates["w"].dtype == np.float32
        assert optim.apply_updates(p, updates)["w"].dtype == np.float32


def test_clip_by_global_norm_and_chain():
    grads = {"a": np.array([3.0]), "b": np.array([4.0])}
    assert optim.global_norm(grads) == 5.0
    clip = optim.clip_by_global_norm(1.0)
    clipped, _ = clip.update(grads, clip.init(grads))
    assert optim.global_norm(clipped) == pytest.approx(1.0)
    np.testing.assert_allclose(clipped["a"], 0.6)
    small, _ = clip.update({"a": np.array([0.1]), "b": np.array([0.1])}, ())
    np.testing.assert_allclose(small["a"], 0.1)  # under the limit: unchanged
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.sgd(1.0))
    updates, _ = opt.update(grads, opt.init(grads), grads)
    np.testing.assert_allclose(updates["b"], -0.8)
    with pytest.raises(ValueError, match="max_norm"):
        optim.clip_by_global_norm(0.0)


def test_every_leaf_gets_its_own_update():
    # several leaves of different shapes and kinds: each parameter is paired with its own gradient
    # and state, and the results come back in the parameters' structure
    params = {"a": lp.Tensor([1.0, 2.0]), "b": [np.array([3.0]), lp.Tensor(np.full((2, 2), 4.0))]}
    grads = {"a": np.array([0.5, -0.5]), "b": [np.array([2.0]), np.full((2, 2), -1.0)]}
    p_leaves = [np.asarray(x) for x in lp.tree_flatten(params)[0]]
    g_leaves = lp.tree_flatten(grads)[0]
    cases = [
        (optim.sgd(0.1), lambda p, g: p - 0.1 * g),
        (optim.sgd(0.1, weight_decay=0.5), lambda p, g: p - 0.1 * (g + 0.5 * p)),
        (optim.sgd(0.1, momentum=0.9), lambda p, g: p - 0.1 * g),  # first step: v = g
        (optim.sgd(0.1, momentum=0.9, nesterov=True), lambda p, g: p - 0.1 * 1.9 * g),
        (optim.adam(0.1), lambda p, g: p - 0.1 * np.sign(g)),  # first step: -lr * sign(g)
        (optim.adamw(0.1, weight_decay=0.5), lambda p, g: p - 0.1 * np.sign(g) - 0.05 * p),
    ]
    for opt, expected in cases:
        updates, _ = opt.update(grads, opt.init(params), params)
        new = optim.apply_updates(params, updates)
        for got, p, g in zip(lp.tree_flatten(new)[0], p_leaves, g_leaves):
            np.testing.assert_allclose(np.asarray(got), expected(p, g), rtol=1e-7)
        assert type(new["a"]) is lp.Tensor and isinstance(new["b"][0], np.ndarray)


def test_structure_mismatch_is_a_clear_error():
    opt = optim.adam()
    state = opt.init({"w": np.zeros(2)})
    with pytest.raises(ValueError, match="structure of the parameters"):
        opt.update({"v": np.zeros(2)}, state)
    with pytest.raises(ValueError, match="structure of the params"):
        optim.apply_updates({"w": np.zeros(2)}, [np.zeros(2)])
    with pytest.raises(ValueError, match="needs params"):
        optim.adamw(0.1).update({"w": np.zeros(2)}, optim.adamw(0.1).init({"w": np.zeros(2)}))
    for opt in (optim.sgd(0.1, weight_decay=0.1), optim.adamw(0.1)):  # params unlike the state's
        with pytest.raises(ValueError, match="the params do not have the structure of the parameters the state"):
            opt.update({"w": np.zeros(2)}, opt.init({"w": np.zeros(2)}), {"w": np.zeros(2), "v": np.zeros(2)})


def test_eager_style_collect_grads_and_training_decreases_the_loss():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 4))
    y = (x[:, 0] + x[:, 1] > 0).astype(int)
    model = nn.trainable(nn.MLP([4, 16, 2], rng=0, dtype=np.float64))
    opt = optim.sgd(0.5, momentum=0.9)
    state = opt.init(model)
    first = None
    for _ in range(30):
        loss = losses.cross_entropy(model(x), y)
        first = loss.item() if first is None else first
        loss.backward()
        grads = optim.collect_grads(model)
        assert type(grads) is nn.MLP
        updates, state = opt.update(grads, state, model)
        model = optim.apply_updates(model, updates)
        assert all(p.requires_grad and p.grad is None for p in lp.tree_flatten(model)[0])
    assert losses.cross_entropy(model(x), y).item() < 0.3 * first
    with pytest.raises(TypeError, match="not a Tensor"):
        optim.collect_grads([np.zeros(2)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_adam_update_is_the_formula_bit_for_bit(dtype):
    """Adam's in-place arithmetic on plain arrays gives the formula's own bits, step after step."""
    rng = np.random.default_rng(3)
    b1, b2, eps, lr = 0.9, 0.999, 1e-8, 1e-2
    p = rng.standard_normal((5, 4)).astype(dtype)
    opt = optim.adam(lr, b1, b2, eps)
    state = opt.init(p)
    m, v = np.zeros_like(p), np.zeros_like(p)
    for t in range(1, 4):
        g = rng.standard_normal(p.shape).astype(dtype)
        u, state = opt.update(g, state, p)
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * (g * g)
        want = m * -(lr / (1.0 - b1**t)) / (np.sqrt(v) / math.sqrt(1.0 - b2**t) + eps)
        assert u.dtype == dtype and np.array_equal(u, want)


@pytest.mark.parametrize("make", [lambda: optim.sgd(0.1), lambda: optim.sgd(0.1, momentum=0.9),
                                  lambda: optim.adam(0.1), lambda: optim.adamw(0.1)])
def test_a_gradient_numpy_would_broadcast_is_refused(make):
    """A gradient of shape (3,) for a (2, 3) parameter broadcasts in NumPy: every row would get the
    same step. The update (or the apply) raises instead, naming the leaf and both shapes."""
    params = {"b": np.zeros(3), "w": np.ones((2, 3))}
    before = {k: v.copy() for k, v in params.items()}
    opt = make()
    state = opt.init(params)
    with pytest.raises(ValueError, match=r"\['w'\].*\(3,\).*\(2, 3\)"):
        updates, state = opt.update({"b": np.ones(3), "w": np.ones(3)}, state, params)
        optim.apply_updates(params, updates)
    assert all(np.array_equal(params[k], before[k]) for k in params)
    with pytest.raises(ValueError, match=r"apply_updates: the update at \['w'\] has shape \(1, 2, 3\)"):
        optim.apply_updates(params, {"b": np.zeros(3), "w": np.zeros((1, 2, 3))})


def test_every_optim_name_keeps_its_public_module_and_a_state_pickles() -> None:
    # Checkpoints and pickle name classes by module: everything optim defines is named leanpass.optim.
    modules = {getattr(optim, n).__module__ for n in optim.__all__} | {optim._State.__module__}
    assert modules == {"leanpass.optim"}
    opt = optim.adam(0.1)
    state = opt.update(np.array([1.0]), opt.init(np.array([0.0])))[1]
    again = pickle.loads(pickle.dumps(state))
    assert type(again) is type(state) and again.step == 1 and np.array_equal(again.slots[0][0], state.slots[0][0])
