"""The pieces a transformer's training needs: cross_entropy(ignore_index=), optim.masked, adamw(mask=),
and tied weights through nn.Embedding.attend (both doors, and jit)."""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses, nn, optim
from leanpass.testing import check_grads

RNG = np.random.default_rng(0)
X = RNG.standard_normal((2, 5, 4))
LABELS = np.array([[0, -1, 3, 2, 1], [3, 3, -1, -1, 0]])


def ref_per_example(x, labels, smoothing=0.0):
    """Hand-written: -log_softmax at the label, mixed with the mean over classes, 0 where ignored."""
    m = x.max(-1, keepdims=True)
    logp = x - m - np.log(np.exp(x - m).sum(-1, keepdims=True))
    keep = labels != -1
    hard = -np.take_along_axis(logp, np.where(keep, labels, 0)[..., None], -1)[..., 0]
    per = (1 - smoothing) * hard - smoothing * logp.mean(-1)
    return np.where(keep, per, 0.0), keep


# ----- cross_entropy(ignore_index=) ---------------------------------------------------------------
def test_ignore_index_hand_values():
    # row 0: log(2) (equal logits); row 1 ignored; the mean is over the one row kept
    logits = lp.Tensor([[0.0, 0.0], [5.0, -5.0]])
    assert losses.cross_entropy(logits, np.array([1, -1]), ignore_index=-1).item() == pytest.approx(np.log(2))
    assert losses.cross_entropy(logits, np.array([1, -1]), "sum", ignore_index=-1).item() == pytest.approx(np.log(2))
    none = losses.cross_entropy(logits, np.array([1, -1]), "none", ignore_index=-1).numpy()
    np.testing.assert_allclose(none, [np.log(2), 0.0])
    # its gradient: softmax - onehot on the kept row only, not divided by the 2 rows
    g = lp.grad(lambda x: losses.cross_entropy(x, np.array([1, -1]), ignore_index=-1))(np.array([[0.0, 0.0], [5, -5]]))
    np.testing.assert_allclose(g, [[0.5, -0.5], [0.0, 0.0]])


@pytest.mark.parametrize("smoothing", [0.0, 0.2])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_ignore_index_matches_a_hand_written_reference(reduction, smoothing):
    per, keep = ref_per_example(X, LABELS, smoothing)
    want = {"mean": per.sum() / keep.sum(), "sum": per.sum(), "none": per}[reduction]
    got = losses.cross_entropy(X, LABELS, reduction, smoothing, ignore_index=-1)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-12, atol=1e-15)
    # the same as dropping the ignored examples first (mean and sum)
    if reduction != "none":
        kept = losses.cross_entropy(X[keep], LABELS[keep], reduction, smoothing)
        np.testing.assert_allclose(got.numpy(), kept.numpy(), rtol=1e-12)
        g = lp.grad(lambda x: losses.cross_entropy(x, LABELS, reduction, smoothing, ignore_index=-1))(X)
        g_kept = lp.grad(lambda x: losses.cross_entropy(x, LABELS[keep], reduction, smoothing))(X[keep])
        np.testing.assert_allclose(g[keep], g_kept, rtol=1e-12, atol=1e-15)
        assert not g[~keep].any()
    check_grads(lambda x: losses.cross_entropy(x, LABELS, reduction, smoothing, ignore_index=-1), [X], order=2)


def test_ignore_index_both_doors_and_jit_agree():
    def loss(x, y):
        return losses.cross_entropy(x, y, ignore_index=-100)

    labels = np.where(LABELS == -1, -100, LABELS)
    x32 = X.astype(np.float32)
    g = lp.grad(loss)(x32, labels)
    t = lp.Tensor(x32, requires_grad=True)
    loss(t, labels).backward()
    assert np.array_equal(t.grad.numpy(), g)
    jitted = lp.jit(lp.value_and_grad(loss))
    value, g_jit = jitted(x32, labels)
    assert np.array_equal(g_jit, g) and value.item() == loss(x32, labels).item()
    assert g.dtype == np.float32 and value.numpy().dtype == np.float32


def test_all_ignored_is_nan_with_zero_gradient_as_in_pytorch():
    labels = np.full((2, 5), -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no division-by-zero warning
        value, g = lp.value_and_grad(lambda x: losses.cross_entropy(x, labels, ignore_index=-1))(X)
        assert np.isnan(value.item())
        assert np.array_equal(g, np.zeros_like(X))
        assert losses.cross_entropy(X, labels, "sum", ignore_index=-1).item() == 0.0
        jitted = lp.jit(lambda x, y: losses.cross_entropy(x, y, ignore_index=-1))
        assert np.isnan(jitted(X, labels).item())
        assert jitted(X, LABELS).item() == losses.cross_entropy(X, LABELS, ignore_index=-1).item()
        assert jitted.trace_count == 1


def test_ignore_index_errors():
    with pytest.raises(ValueError, match=r"\[0, 4\).*ignore_index"):
        losses.cross_entropy(X, LABELS)  # -1 without ignore_index: the message names the fix
    with pytest.raises(ValueError, match=r"\[0, 4\)"):
        losses.cross_entropy(X, np.where(LABELS == -1, 7, LABELS), ignore_index=-1)  # 7 is not ignored
    with pytest.raises(TypeError, match="integer class labels"):
        losses.cross_entropy(X, np.full(X.shape, 0.25), ignore_index=-1)
    with pytest.raises(TypeError, match="ignore_index must be an int"):
        losses.cross_entropy(X, LABELS, ignore_index=-1.0)  # type: ignore[arg-type]


# ----- optim.masked and adamw(mask=) --------------------------------------------------------------
def params_tree():
    return {"w": np.full((2, 2), 2.0), "b": np.full(2, 2.0), "inner": [np.full((1, 3), 2.0), np.ones(3)]}


def grads_tree():
    return {"w": np.full((2, 2), 1.0), "b": np.full(2, 3.0), "inner": [np.full((1, 3), -1.0), np.full(3, 4.0)]}


def is_matrix(tree):
    return lp.tree_map(lambda x: np.ndim(x) >= 2, tree)


def test_masked_hand_values():
    opt = optim.masked(optim.sgd(0.5), is_matrix)
    params, grads = params_tree(), grads_tree()
    state = opt.init(params)
    updates, state = opt.update(grads, state, params)
    np.testing.assert_array_equal(updates["w"], np.full((2, 2), -0.5))
    np.testing.assert_array_equal(updates["inner"][0], np.full((1, 3), 0.5))
    assert updates["b"] is grads["b"] and updates["inner"][1] is grads["inner"][1]  # untouched
    assert np.array_equal(grads["w"], np.ones((2, 2))) and np.array_equal(params["w"], np.full((2, 2), 2.0))


def test_masked_adam_keeps_state_for_the_chosen_leaves_only_and_matches_a_reference():
    opt = optim.masked(optim.adam(0.1), {"w": True, "b": False, "inner": [True, False]})
    params = params_tree()
    state = opt.init(params)
    assert [np.shape(m) for m in state.slots[0]] == [(2, 2), (1, 3)]
    m = {"w": np.zeros((2, 2)), "i": np.zeros((1, 3))}
    v = {"w": np.zeros((2, 2)), "i": np.zeros((1, 3))}
    for t in range(1, 4):
        grads = lp.tree_map(lambda g, t=t: g * t, grads_tree())
        updates, state = opt.update(grads, state, params)
        for key, g, u in (("w", grads["w"], updates["w"]), ("i", grads["inner"][0], updates["inner"][0])):
            m[key] = 0.9 * m[key] + 0.1 * g
            v[key] = 0.999 * v[key] + 0.001 * g * g
            want = -0.1 * (m[key] / (1 - 0.9**t)) / (np.sqrt(v[key] / (1 - 0.999**t)) + 1e-8)
            np.testing.assert_allclose(u, want, rtol=1e-12)
        np.testing.assert_array_equal(updates["b"], grads["b"])


def test_masked_prefix_callable_and_single_bool():
    params, grads = params_tree(), grads_tree()
    prefix = {"w": True, "b": False, "inner": True}  # one bool for the whole list
    full = {"w": True, "b": False, "inner": [True, True]}
    a, _ = optim.masked(optim.sgd(1.0), prefix).update(grads, optim.masked(optim.sgd(1.0), prefix).init(params))
    b, _ = optim.masked(optim.sgd(1.0), full).update(grads, optim.masked(optim.sgd(1.0), full).init(params))
    c, _ = optim.masked(optim.sgd(1.0), lambda p: full).update(grads, optim.sgd(1.0).init([1, 2, 3]))
    for x, y, z in zip(lp.tree_flatten(a)[0], lp.tree_flatten(b)[0], lp.tree_flatten(c)[0]):
        assert np.array_equal(x, y) and np.array_equal(x, z)
    everything, _ = optim.masked(optim.sgd(1.0), True).update(grads, optim.sgd(1.0).init([1, 2, 3, 4]))
    assert all(np.array_equal(u, -g) for u, g in zip(lp.tree_flatten(everything)[0], lp.tree_flatten(grads)[0]))


def test_masked_on_a_model_under_chain_and_jit():
    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64)
    opt = optim.chain(optim.clip_by_global_norm(1.0), optim.masked(optim.adam(1e-2), is_matrix))
    x, y = RNG.standard_normal((5, 3)), np.array([0, 1, 1, 0, 1])

    def step(model, state, x, y):
        loss, grads = lp.value_and_grad(lambda m: losses.cross_entropy(m(x), y))(model)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    m1, s1 = model, opt.init(model)
    m2, s2 = model, opt.init(model)
    fast = lp.jit(step)
    for _ in range(3):
        m1, s1, _ = step(m1, s1, x, y)
        m2, s2, _ = fast(m2, s2, x, y)
    for p, q in zip(lp.tree_flatten(m1)[0], lp.tree_flatten(m2)[0]):
        assert np.array_equal(p.numpy(), q.numpy())
    assert not np.array_equal(m1.layers[0].weight.numpy(), model.layers[0].weight.numpy())


def test_masked_errors():
    params, grads = params_tree(), grads_tree()
    with pytest.raises(ValueError, match="structure of the params"):
        optim.masked(optim.sgd(1.0), {"w": True, "b": False}).init(params)
    with pytest.raises(TypeError, match="must be bools"):
        optim.masked(optim.sgd(1.0), lambda p: lp.tree_map(np.ndim, p)).update(grads, ())
    with pytest.raises(TypeError, match="must be an Optimizer"):
        optim.masked(lambda g: g, True)  # type: ignore[arg-type]


def test_adamw_mask_decays_only_the_chosen_leaves():
    params, grads = params_tree(), grads_tree()
    masked_w = optim.adamw(0.1, weight_decay=0.5, mask=is_matrix)
    plain = optim.adamw(0.1, weight_decay=0.5)
    adam = optim.adam(0.1)
    ups, _ = masked_w.update(grads, masked_w.init(params), params)
    decayed, _ = plain.update(grads, plain.init(params), params)
    undecayed, _ = adam.update(grads, adam.init(params), params)
    for path in (("w",), ("inner", 0)):
        got, want = ups[path[0]], decayed[path[0]]
        if len(path) == 2:
            got, want = got[path[1]], want[path[1]]
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(ups["b"], undecayed["b"])
    np.testing.assert_array_equal(ups["inner"][1], undecayed["inner"][1])
    # hand value: first Adam step -lr * sign(g), decay -lr * wd * p = -0.1 on the matrices
    np.testing.assert_allclose(ups["w"], np.full((2, 2), -0.2))
    np.testing.assert_allclose(ups["b"], np.full(2, -0.1))
    # the same as two adamw instances, one for the matrices and one (no decay) for the rest
    matrices = optim.masked(optim.adamw(0.1, weight_decay=0.5), is_matrix)
    vectors = optim.masked(optim.adam(0.1), lambda p: lp.tree_map(lambda x: np.ndim(x) < 2, p))
    two = optim.chain(matrices, vectors)
    state, state2 = masked_w.init(params), two.init(params)
    p1 = p2 = params
    for _ in range(3):
        u1, state = masked_w.update(grads, state, p1)
        u2, state2 = two.update(grads, state2, p2)
        p1, p2 = optim.apply_updates(p1, u1), optim.apply_updates(p2, u2)
    for a, b in zip(lp.tree_flatten(p1)[0], lp.tree_flatten(p2)[0]):
        np.testing.assert_array_equal(a, b)


# ----- tied weights: nn.Embedding.attend ----------------------------------------------------------
@dataclass(frozen=True, repr=False, eq=False)
class TiedLM(nn.Module):
    embed: nn.Embedding
    mix: nn.Linear

    def __call__(self, tokens):
        return self.embed.attend(lp.tanh(self.mix(self.embed(tokens))))


TOKENS = np.array([[1, 5, 7], [3, 5, 0]])
TARGETS = np.array([[5, 7, 3], [5, 1, 1]])


def lm_loss(model, tokens, targets):
    return losses.cross_entropy(model(tokens), targets)


def make_lm(dtype=np.float64):
    return TiedLM(embed=nn.Embedding(8, 4, rng=0, dtype=dtype), mix=nn.Linear(4, 4, rng=1, dtype=dtype))


def test_attend_is_x_times_the_table_transposed():
    emb = nn.Embedding(6, 3, rng=0, dtype=np.float64)
    x = RNG.standard_normal((2, 4, 3))
    np.testing.assert_allclose(emb.attend(x).numpy(), x @ emb.weight.numpy().T, rtol=1e-14)
    assert emb.attend(x[0, 0]).shape == (6,)
    with pytest.raises(ValueError, match=r"\(\.\.\., 3\)"):
        emb.attend(np.ones((2, 4)))
    w = emb.weight.numpy()
    check_grads(lambda w, x: emb.replace(weight=w).attend(x), [w, x], order=2)


def test_attend_ties_the_weights_both_doors_agree():
    lm = make_lm()
    g = lp.grad(lm_loss)(lm, TOKENS, TARGETS)
    assert nn.param_count(lm) == 8 * 4 + 4 * 4 + 4  # one table
    # the door of .backward(): the one .grad, the total of both uses
    eager = nn.trainable(lm)
    lm_loss(eager, TOKENS, TARGETS).backward()
    np.testing.assert_allclose(eager.embed.weight.grad.numpy(), g.embed.weight.numpy(), rtol=1e-13, atol=1e-15)
    # the same as a hand-written loss with the table used explicitly twice
    table, w, b = lm.embed.weight.numpy(), lm.mix.weight.numpy(), lm.mix.bias.numpy()

    def by_hand(table):
        h = np.tanh(table[TOKENS] @ w + b)
        return losses.cross_entropy(h @ table.T, TARGETS).item()

    eps = 1e-6
    fd = np.zeros_like(table)
    for idx in np.ndindex(*table.shape):
        d = np.zeros_like(table)
        d[idx] = eps
        fd[idx] = (by_hand(table + d) - by_hand(table - d)) / (2 * eps)
    np.testing.assert_allclose(g.embed.weight.numpy(), fd, rtol=1e-6, atol=1e-8)
    # both uses count: the gradient differs from either use alone
    h = np.tanh(table[TOKENS] @ w + b)
    only_output = lp.grad(lambda e_out: losses.cross_entropy(h @ e_out.T, TARGETS))(table)
    assert not np.allclose(only_output, g.embed.weight.numpy())


def test_attend_training_eager_functional_and_jit_stay_equal():
    opt = optim.adamw(1e-2, weight_decay=0.1, mask=is_matrix)
    lm = make_lm(np.float32)

    def step(model, state, tokens, targets):
        loss, grads = lp.value_and_grad(lm_loss)(model, tokens, targets)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    m1, s1 = lm, opt.init(lm)
    m2, s2 = lm, opt.init(lm)
    m3, s3 = nn.trainable(lm), opt.init(lm)
    fast = lp.jit(step)
    for _ in range(4):
        m1, s1, l1 = step(m1, s1, TOKENS, TARGETS)
        m2, s2, l2 = fast(m2, s2, TOKENS, TARGETS)
        loss = lm_loss(m3, TOKENS, TARGETS)
        loss.backward()
        updates, s3 = opt.update(optim.collect_grads(m3), s3, m3)
        m3 = optim.apply_updates(m3, updates)
        assert l1.item() == l2.item() == loss.item()
    for a, b, c in zip(lp.tree_flatten(m1)[0], lp.tree_flatten(m2)[0], lp.tree_flatten(m3)[0]):
        assert np.array_equal(a.numpy(), b.numpy()) and np.array_equal(a.numpy(), c.data)
