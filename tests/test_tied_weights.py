"""Tied weights: one Tensor at several leaves of a pytree is one variable, in every door.

The rule: ``grad`` (and every transform built on it) gives each place of a tied Tensor the total
gradient, which is what its one ``.grad`` holds after ``backward()``; ``jvp`` moves it in one
direction; optimizers, ``tree_map``, ``trainable``, ``vmap`` and checkpoints keep the places one object.
"""

from __future__ import annotations

import io
import json
import os
import zipfile

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import leanpass as lp
from leanpass import nn, optim
from leanpass.testing import check_grads


def tied(w):
    return {"a": w, "b": w}


def f(p):  # the example: 2 per element through "a", 3 through "b"
    return (p["a"] * 2).sum() + (p["b"] * 3).sum()


def g(p):  # nonlinear in both places, and mixing them
    return (p["a"] ** 2 * p["b"]).sum() + np.sin(p["b"]).sum() + (p["a"] * p["b"][::-1]).sum()


def as_one(fn):
    """``fn`` of the tied tree as a function of the one variable: what every door must differentiate."""
    return lambda w: fn(tied(w))


W = np.array([0.3, -1.2, 0.7])


def test_both_doors_give_the_total_gradient_at_each_place():
    w = lp.Tensor([1.0, 1.0], requires_grad=True)
    grads = lp.grad(f)(tied(w))
    f(tied(w)).backward()
    eager = optim.collect_grads(tied(w))
    for where in "ab":
        np.testing.assert_array_equal(grads[where].numpy(), [5.0, 5.0])
        np.testing.assert_array_equal(eager[where], [5.0, 5.0])
    assert grads["a"] is grads["b"]  # one gradient, as there is one .grad


def test_value_and_grad_vjp_and_the_jacobians_follow_the_rule():
    w = lp.Tensor(W)
    total = lp.grad(as_one(g))(W)
    check_grads(as_one(g), [W], order=2)  # the reference itself, against finite differences
    value, grads = lp.value_and_grad(g)(tied(w))
    assert value.item() == pytest.approx(as_one(g)(W).item())
    out, pull = lp.vjp(g, tied(w))
    (pulled,) = pull(np.array(1.0))
    for tree in (grads, pulled, lp.jacrev(g)(tied(w)), lp.jacfwd(g)(tied(w))):
        np.testing.assert_allclose(tree["a"].numpy(), total, rtol=1e-13)
        np.testing.assert_allclose(tree["b"].numpy(), total, rtol=1e-13)
    hess = lp.hessian(g)(tied(w))
    ref = lp.hessian(as_one(g))(W)
    for i in "ab":
        for j in "ab":
            np.testing.assert_allclose(hess[i][j].numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(lp.jacrev(lp.grad(g))(tied(w))["a"]["b"].numpy(), ref, rtol=1e-12)


def test_a_tensor_passed_as_two_arguments_is_one_variable_too():
    w = lp.Tensor(W)
    ga, gb = lp.grad(lambda x, y: (x * x * y).sum(), argnums=(0, 1))(w, w)
    np.testing.assert_allclose(ga.numpy(), 3 * W**2)
    assert ga is gb
    _, pull = lp.vjp(lambda x, y: x * y, w, w)
    np.testing.assert_allclose(pull(np.ones(3))[1], 2 * W)
    # arrays and numbers are values, as in JAX: each place is an input of its own
    a = np.array(W)
    ga, gb = lp.grad(lambda x, y: (x * x * y).sum(), argnums=(0, 1))(a, a)
    np.testing.assert_allclose(ga, 2 * W * W)
    np.testing.assert_allclose(gb, W * W)


def test_nested_transforms_keep_the_tie():
    w = lp.Tensor(W)
    inner = lp.grad(lambda p: lp.grad(g)(p)["a"].sum())(tied(w))
    ref = lp.grad(lambda v: lp.grad(as_one(g))(v).sum())(W)
    np.testing.assert_allclose(inner["a"].numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(inner["b"].numpy(), ref, rtol=1e-12)


def test_jvp_moves_a_tied_tensor_in_its_one_direction():
    w = lp.Tensor(W)
    v = np.array([1.0, 0.5, -2.0])
    _, t = lp.jvp(g, (tied(w),), ({"a": v, "b": v.copy()},))
    _, ref = lp.jvp(as_one(g), (W,), (v,))
    assert t.item() == pytest.approx(ref.item(), rel=1e-13)
    # transposed: <vjp(1), v> over the one variable
    assert t.item() == pytest.approx(float(lp.grad(g)(tied(w))["a"].numpy() @ v), rel=1e-13)
    np.testing.assert_allclose(lp.hvp(g)(tied(w), tied(v))["b"].numpy(), lp.hvp(as_one(g))(W, v), rtol=1e-12)
    with pytest.raises(ValueError, match=r"primals\[0\]\['a'\] and primals\[0\]\['b'\] are the same Tensor"):
        lp.jvp(g, (tied(w),), ({"a": v, "b": np.zeros(3)},))
    with pytest.raises(ValueError, match=r"primals\[0\] and primals\[1\] are the same Tensor"):
        lp.jvp(lambda x, y: x * y, (w, w), (v, np.zeros(3)))
    # a tangent being differentiated: one object at both places (two would each need a derivative of their own)
    outer = lp.grad(lambda u: lp.hvp(g)(tied(w), tied(u))["a"].sum())(v)
    np.testing.assert_allclose(outer, lp.grad(lambda u: lp.hvp(as_one(g))(W, u).sum())(v), rtol=1e-12)
    with pytest.raises(ValueError, match="the same object, for a tangent that is itself being differentiated"):
        lp.grad(lambda u: lp.hvp(g)(tied(w), {"a": u, "b": u * 1.0})["a"].sum())(v)


def test_vmap_of_grad_keeps_a_mapped_tied_tensor_tied():
    ws = np.arange(6.0).reshape(2, 3) / 4
    t = lp.Tensor(ws)
    out = lp.vmap(lp.grad(g))(tied(t))
    ref = np.stack([lp.grad(as_one(g))(row) for row in ws])
    np.testing.assert_allclose(out["a"].numpy(), ref, rtol=1e-12)
    np.testing.assert_allclose(out["b"].numpy(), ref, rtol=1e-12)


@pytest.mark.parametrize("make", [lambda: optim.adam(0.05), lambda: optim.adamw(0.05, weight_decay=0.1),
                                  lambda: optim.sgd(0.05, momentum=0.9, nesterov=True),
                                  lambda: optim.chain(optim.clip_by_global_norm(0.5), optim.adam(0.05))])
def test_optimizers_keep_tied_tensors_one_and_the_doors_agree_bit_for_bit(make):
    opt = make()
    x = np.linspace(-1.0, 1.0, 3)

    def loss(p):
        return ((p["a"] * x - 0.5) ** 2).sum() + (p["b"] * p["c"]).sum()

    def train(door):
        w = lp.Tensor(W, requires_grad=True)
        params = {"a": w, "b": w, "c": lp.Tensor(np.ones(3), requires_grad=True)}
        state = opt.init(params)
        for _ in range(60):
            if door == "grad":
                grads = lp.grad(loss)(params)
            else:
                loss(params).backward()
                grads = optim.collect_grads(params)
            updates, state = opt.update(grads, state, params)
            params = optim.apply_updates(params, updates)
            assert params["a"] is params["b"]
        return params

    functional, eager = train("grad"), train("backward")
    for key in "abc":
        np.testing.assert_array_equal(functional[key].data, eager[key].data)
    assert not np.array_equal(functional["a"].data, W)  # it moved


def test_clipping_counts_a_tied_tensor_once():
    w = lp.Tensor([3.0, 0.0])
    params = {"a": w, "b": w, "c": lp.Tensor([4.0])}
    grads = {"a": np.array([3.0, 0.0]), "b": np.array([3.0, 0.0]), "c": np.array([4.0])}
    clip = optim.clip_by_global_norm(1.0)
    clipped, _ = clip.update(grads, clip.init(params), params)
    np.testing.assert_allclose(clipped["c"], [0.8])  # the norm of the two parameters is 5, not sqrt(34)
    np.testing.assert_allclose(clipped["a"], [0.6, 0.0])


def test_apply_updates_refuses_different_updates_for_one_tensor():
    w = lp.Tensor([1.0, 2.0])
    with pytest.raises(ValueError, match=r"\['a'\] and \['b'\] are one Tensor \(tied weights\)"):
        optim.apply_updates(tied(w), {"a": np.ones(2), "b": np.zeros(2)})
    same = optim.apply_updates(tied(w), {"a": np.ones(2), "b": np.ones(2)})
    assert same["a"] is same["b"]
    np.testing.assert_array_equal(same["a"].numpy(), [2.0, 3.0])
    apart = optim.apply_updates({"a": w, "b": lp.Tensor([1.0, 2.0])}, {"a": np.ones(2), "b": np.zeros(2)})
    assert apart["a"] is not apart["b"]


def test_tree_map_trainable_and_param_count_keep_the_tie():
    w = lp.Tensor(W)
    p = {"a": w, "b": w, "c": lp.Tensor(np.ones(2))}
    calls = []
    mapped = lp.tree_map(lambda x: calls.append(1) or x * 2, p)
    assert mapped["a"] is mapped["b"] and len(calls) == 2
    grads = lp.grad(lambda q: (q["a"] * q["b"]).sum() + q["c"].sum())(p)
    stepped = lp.tree_map(lambda x, dx: x - 0.1 * dx, p, grads)
    assert stepped["a"] is stepped["b"]
    marked = nn.trainable(p)
    assert marked["a"] is marked["b"] and marked["a"].requires_grad
    assert nn.param_count(p) == 5
    floats = lp.tree_map(lambda x: x + 1, {"a": 1.0, "b": 1.0})  # numbers are values: mapped one by one
    assert floats == {"a": 2.0, "b": 2.0}


def test_a_checkpoint_stores_a_tied_tensor_once_and_loads_it_tied(tmp_path):
    w = lp.Tensor(np.arange(6.0).reshape(2, 3), requires_grad=True)
    tree = {"embed": w, "layers": [lp.Tensor(np.ones(2)), w], "step": 3}
    path = os.fspath(tmp_path / "tied.npz")
    lp.save(path, tree)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["__leanpass__.npy", "leaf_0.npy", "leaf_1.npy", "leaf_3.npy"]
    untied = {"embed": lp.Tensor(w.data), "layers": [lp.Tensor(np.ones(2)), lp.Tensor(w.data)], "step": 0}
    for loaded in (lp.load(path), lp.load(path, like=tree), lp.load(path, like=untied)):  # the file's ties
        assert loaded["embed"] is loaded["layers"][1]
        assert loaded["embed"].requires_grad
        np.testing.assert_array_equal(loaded["embed"].data, w.data)
    state = optim.adam(0.1).init(tree["layers"])
    lp.save(path, {"model": tree, "opt": state})
    back = lp.load(path, like={"model": tree, "opt": state})
    assert back["model"]["embed"] is back["model"]["layers"][1]


def test_loading_into_a_tied_template_ties_equal_values_and_refuses_different_ones(tmp_path):
    path = os.fspath(tmp_path / "untied.npz")
    t = lp.Tensor(np.zeros(2))
    lp.save(path, {"a": lp.Tensor([1.0, 2.0]), "b": lp.Tensor([1.0, 2.0])})
    loaded = lp.load(path, like=tied(t))
    assert loaded["a"] is loaded["b"]
    lp.save(path, {"a": lp.Tensor([1.0, 2.0]), "b": lp.Tensor([1.0, 5.0])})
    with pytest.raises(lp.CheckpointError, match=r"one Tensor at \['a'\] and \['b'\]"):
        lp.load(path, like=tied(t))


def _rewrite_header(path, edit):
    with zipfile.ZipFile(path) as zf:
        members = {n: zf.read(n) for n in zf.namelist()}
    raw = members["__leanpass__.npy"]
    arr = np.load(io.BytesIO(raw))
    header = json.loads(arr.tobytes().decode())
    edit(header)
    text = np.frombuffer(json.dumps(header).encode(), dtype=np.uint8)
    buf = io.BytesIO()
    np.save(buf, text)
    members["__leanpass__.npy"] = buf.getvalue()
    with zipfile.ZipFile(path, "w") as zf:
        for n, data in members.items():
            zf.writestr(n, data)


@pytest.mark.parametrize("edit", [
    lambda h: h["leaves"][1].update(same_as=1),          # itself
    lambda h: h["leaves"][1].update(same_as=5),          # past the end
    lambda h: h["leaves"][1].update(same_as="0"),        # not a number
    lambda h: h["leaves"][1].update(shape=[7]),          # not the Tensor it names
    lambda h: h["leaves"][0].update(type="ndarray"),     # names an array, not a Tensor
])
def test_a_hostile_tie_in_a_file_is_a_checkpoint_error(tmp_path, edit):
    path = os.fspath(tmp_path / "t.npz")
    w = lp.Tensor(np.ones(3))
    lp.save(path, [w, w])
    _rewrite_header(path, edit)
    with pytest.raises(lp.CheckpointError):
        lp.load(path)


@settings(max_examples=25, deadline=None)
@given(st.integers(1, 4), st.lists(st.sampled_from("abc"), min_size=2, max_size=5), st.integers(0, 2**31 - 1))
def test_any_pattern_of_ties_gives_the_gradient_of_the_variables(n, places, seed):
    """Leaves named by letter: equal letters are one Tensor. The gradient at each place is the
    gradient with respect to its variable, of the function written on the variables."""
    rng = np.random.default_rng(seed)
    variables = {k: lp.Tensor(rng.normal(size=n)) for k in "abc"}
    weights = rng.normal(size=len(places))
    tree = [variables[k] for k in places]

    def loss(leaves):
        return sum(w * (np.tanh(x) * x).sum() for w, x in zip(weights, leaves))

    grads = lp.grad(loss)(tree)
    ref = lp.grad(lambda vs: loss([vs[k] for k in places]))({k: v.numpy() for k, v in variables.items()})
    for k, gr in zip(places, grads):
        np.testing.assert_allclose(gr.numpy(), ref[k], rtol=1e-12, atol=1e-15)
    eager = [lp.Tensor(v.numpy(), requires_grad=True) for v in variables.values()]
    by_name = dict(zip("abc", eager))
    loss([by_name[k] for k in places]).backward()
    collected = optim.collect_grads([by_name[k] for k in places])
    for c, gr in zip(collected, grads):
        np.testing.assert_allclose(c, gr.numpy(), rtol=1e-12, atol=1e-15)


# ----- jit: a tied Tensor is one input of the program, and the tie is part of its signature --------
def bits(a, b) -> bool:
    """Equal pytrees, bit for bit, leaf by leaf (Tensors by their arrays)."""
    la, ta = lp.tree_flatten(a)
    lb, tb = lp.tree_flatten(b)
    def raw(x):
        return np.asarray(x.data if type(x) is lp.Tensor else x)

    return ta == tb and all(type(x) is type(y) and raw(x).dtype == raw(y).dtype and np.array_equal(raw(x), raw(y))
                            for x, y in zip(la, lb))


def test_jit_sees_a_tied_tensor_as_one_variable_as_eager_does():
    w = lp.Tensor(W, requires_grad=True)
    for fn in (f, g):
        jitted = lp.jit(lp.grad(fn))
        for _ in range(3):  # traced, then replayed
            out = jitted(tied(w))
            assert bits(out, lp.grad(fn)(tied(w)))
            assert out["a"] is out["b"]  # one gradient at both places, as eager gives
        assert jitted.trace_count == 1
    np.testing.assert_array_equal(lp.jit(lp.grad(f))(tied(lp.Tensor([1.0, 1.0])))["a"].numpy(), [5.0, 5.0])
    # one Tensor as two arguments
    two = lp.jit(lp.grad(lambda x, y: (x * x * y).sum(), argnums=(0, 1)))
    ga, gb = two(w, w)
    np.testing.assert_array_equal(ga.numpy(), lp.grad(lambda x, y: (x * x * y).sum(), argnums=(0, 1))(w, w)[0].numpy())
    assert ga is gb
    # the eager door inside jit: backward() leaves the total in the one .grad
    def by_backward(p):
        f(p).backward()
        return optim.collect_grads(p)

    for _ in range(2):
        out = lp.jit(by_backward)(tied(lp.Tensor([1.0, 1.0], requires_grad=True)))
        np.testing.assert_array_equal(out["a"], [5.0, 5.0])
        np.testing.assert_array_equal(out["b"], [5.0, 5.0])
    # arrays are values: one array at two places is two inputs, as without jit
    a = np.array(W)
    jitted = lp.jit(lp.grad(f))
    for _ in range(2):
        out = jitted({"a": a, "b": a})
        np.testing.assert_array_equal(out["a"], [2.0, 2.0, 2.0])
        np.testing.assert_array_equal(out["b"], [3.0, 3.0, 3.0])


def h(p):  # a different weight at each place: every tie pattern gives other numbers
    return sum((k + 1.0) * (np.tanh(x) * x).sum() for k, x in enumerate(p))


def test_jit_traces_again_when_the_tie_pattern_changes_in_either_order():
    u, v, w, x = (lp.Tensor(W * k) for k in (1.0, 2.0, 3.0, 4.0))
    patterns = [[u, v, w], [u, u, w], [u, v, v], [u, v, u], [u, u, u],
                [u, v, w, x, u, v], [u, v, w, x, lp.Tensor(W), lp.Tensor(W)],  # six Tensors alike
                [u, v, w, x, x, x]]
    for order, change in ((patterns, r"args\[0\]\[4\], a Tensor of its own then the same Tensor as args\[0\]\[3\]"),
                          (patterns[::-1], r"args\[0\]\[1\], the same Tensor as args\[0\]\[0\] then one of its own")):
        jitted = lp.jit(lp.grad(h))
        for p in order[:-1]:
            jitted(p)
        with pytest.warns(RuntimeWarning, match=r"traced for 8 different argument signatures \(the last change: "
                          + change):  # (it names the last change: here a tie)
            jitted(order[-1])
        for _ in range(2):  # every pattern's program is in the cache now
            for p in order:
                ref = lp.grad(h)(p)
                assert bits(jitted(p), ref)
                out = jitted(p)  # the same pattern again: the quick check of the last signature
                assert bits(out, ref)
                for i in range(len(p)):
                    for j in range(len(p)):
                        assert (out[i] is out[j]) == (p[i] is p[j])
        assert jitted.trace_count == 8


@pytest.mark.parametrize("make", [lambda: optim.adam(0.05), lambda: optim.sgd(0.05, momentum=0.9)])
@pytest.mark.parametrize("donate", [(), (0, 1)])
def test_a_jitted_training_step_keeps_tied_weights_one_tensor_bit_for_bit(make, donate):
    opt = make()
    x = np.linspace(-1.0, 1.0, 3)

    def loss(p):
        return ((p["a"] * x - 0.5) ** 2).sum() + (p["b"] * p["c"]).sum()

    def step(params, state):
        value, grads = lp.value_and_grad(loss)(params)
        updates, state = opt.update(grads, state, params)
        return optim.apply_updates(params, updates), state, value

    def start():
        w = lp.Tensor(W, requires_grad=True)
        params = {"a": w, "b": w, "c": lp.Tensor(np.ones(3), requires_grad=True)}
        return params, opt.init(params)

    jitted = lp.jit(step, donate_argnums=donate)
    params, state = start()
    eager_params, eager_state = start()
    for _ in range(6):
        params, state, value = jitted(params, state)
        eager_params, eager_state, eager_value = step(eager_params, eager_state)
        assert params["a"] is params["b"]
        assert bits((params, state, value), (eager_params, eager_state, eager_value))
    assert jitted.trace_count == 1
    assert not np.array_equal(params["a"].data, W)  # it moved


def test_jit_returns_one_tensor_where_the_function_returns_one():
    def twice(w):
        y = w * 2
        return {"a": y, "b": [y, w * 2]}

    jitted = lp.jit(twice)
    for _ in range(2):
        out = jitted(lp.Tensor(W))
        assert out["a"] is out["b"][0] and out["a"] is not out["b"][1]
        assert bits(out, twice(lp.Tensor(W)))
