"""Modules: pytrees, gradients shaped like the model, determinism, dtypes, repr, errors."""

from __future__ import annotations

import dataclasses
import subprocess
import sys

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses, nn
from leanpass.nn.module import _set
from leanpass.testing import check_grads


def leaves(tree):
    return [np.asarray(x) for x in lp.tree_flatten(tree)[0]]


def with_leaves(tree, new):
    return lp.tree_unflatten(lp.tree_flatten(tree)[1], new)


def test_grad_of_a_model_is_model_shaped_and_matches_finite_differences():
    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64, activation="tanh")
    x = np.random.default_rng(1).standard_normal((5, 3))
    y = np.array([0, 1, 1, 0, 1])
    g = lp.grad(lambda m: losses.cross_entropy(m(x), y))(model)
    assert type(g) is nn.MLP and type(g.layers[0]) is nn.Linear
    assert [a.shape for a in leaves(g)] == [a.shape for a in leaves(model)]

    def f(*ws):
        return losses.cross_entropy(with_leaves(model, list(ws))(x), y)

    check_grads(f, leaves(model), order=2)


@pytest.mark.parametrize("make", [
    lambda: nn.Linear(3, 2, rng=0, dtype=np.float64),
    lambda: nn.LayerNorm(3, dtype=np.float64),
    lambda: nn.Sequential(nn.Linear(3, 4, rng=0, dtype=np.float64), nn.gelu, nn.Linear(4, 2, rng=1, dtype=np.float64)),
])
def test_modules_check_grads(make):
    module = make()
    x = np.random.default_rng(2).standard_normal((4, 3))
    # perturb the LayerNorm's weight and bias so the check is not at a special point
    ws = [w + 0.1 * np.random.default_rng(3).standard_normal(w.shape) for w in leaves(module)]
    check_grads(lambda xx, *p: (with_leaves(module, list(p))(xx) ** 2).sum(), [x, *ws], order=2)


def test_embedding_gradient_adds_repeated_indices():
    emb = nn.Embedding(4, 2, rng=0, dtype=np.float64)
    g = lp.grad(lambda e: e(np.array([1, 1, 3])).sum())(emb)
    np.testing.assert_array_equal(np.asarray(g.weight), [[0, 0], [2, 2], [0, 0], [1, 1]])
    with pytest.raises(IndexError, match=r"\[0, 4\)"):
        emb(np.array([4]))
    with pytest.raises(TypeError, match="integers"):
        emb(np.array([1.0]))


def test_same_seed_same_model_bit_for_bit_and_different_seed_differs():
    a, b, c = (nn.MLP([8, 16, 4], rng=np.random.default_rng(s)) for s in (5, 5, 6))
    for x, y in zip(leaves(a), leaves(b)):
        assert x.tobytes() == y.tobytes()
    assert any(x.tobytes() != z.tobytes() for x, z in zip(leaves(a), leaves(c)))


def test_initialisers_have_the_right_scale_and_zero_bias():
    rng = np.random.default_rng(0)
    w = np.asarray(nn.he_normal(rng, (1000, 500)))
    assert abs(w.std() - np.sqrt(2 / 1000)) < 1e-3
    g = np.asarray(nn.glorot_uniform(rng, (300, 700)))
    assert abs(g.max()) <= np.sqrt(6 / 1000) + 1e-7 and abs(g.std() - np.sqrt(2 / 1000)) < 2e-3
    assert nn.xavier_normal is nn.glorot_normal
    lin = nn.Linear(3, 2, rng=0)
    assert not np.asarray(lin.bias).any()
    with pytest.raises(TypeError, match="np.random.Generator"):
        nn.Linear(3, 2, rng="seed")
    with pytest.raises(ValueError, match="unknown initialiser"):
        nn.Linear(3, 2, rng=0, init="nope")


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_dtype_is_preserved_through_forward_grad_and_update(dtype):
    from leanpass import optim

    model = nn.Sequential(nn.Linear(4, 8, rng=0, dtype=dtype), nn.relu, nn.LayerNorm(8, dtype=dtype),
                          nn.Linear(8, 3, rng=1, dtype=dtype))
    x = np.random.default_rng(0).standard_normal((5, 4))  # float64 data is cast to the layer dtype
    out = model(x)
    assert out.dtype == dtype
    g = lp.grad(lambda m: losses.cross_entropy(m(x), np.array([0, 1, 2, 0, 1])))(model)
    assert all(a.dtype == dtype for a in leaves(g))
    opt = optim.adam(1e-2)
    updates, _ = opt.update(g, opt.init(model), model)
    new = optim.apply_updates(model, updates)
    assert all(a.dtype == dtype for a in leaves(new))
    with pytest.raises(TypeError, match="float32 or float64"):
        nn.Linear(2, 2, rng=0, dtype=np.int32)
    other = np.float64 if dtype == np.float32 else np.float32
    t = lp.Tensor(x, dtype=other, requires_grad=True)
    out = model(t)
    assert out.dtype == dtype
    out.sum().backward()
    assert t.grad.dtype == other


def test_modules_are_frozen_and_updates_return_new_models():
    model = nn.MLP([2, 3, 1], rng=0)
    before = [a.copy() for a in leaves(model)]
    with pytest.raises(dataclasses.FrozenInstanceError):
        model.layers = ()
    new = lp.tree_map(lambda p: p * 2.0, model)
    assert type(new) is nn.MLP and new is not model
    for a, b in zip(before, leaves(model)):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(leaves(new)[0], before[0] * 2)
    assert model.replace(activation="tanh").activation == "tanh" and model.activation == "relu"


@dataclasses.dataclass(frozen=True, repr=False, init=False, eq=False)
class Scaled(nn.Module):
    """A module of one's own: a child field, a static one and a child sub-module."""

    scale: object
    inner: object
    name: str = "s"
    _static = ("name",)

    def __init__(self, scale, inner, name="s"):
        _set(self, scale=scale, inner=inner, name=name)


@pytest.mark.parametrize("make", [
    lambda: nn.Dropout(0.25),  # no children, one static field
    lambda: nn.Linear(2, 3, rng=0),  # two children, no static field
    lambda: nn.LayerNorm(3, eps=1e-3),  # two children, one static field
    lambda: nn.MLP([2, 3, 1], rng=0),  # one child (a tuple of modules), one static field
    lambda: Scaled(lp.Tensor([2.0]), nn.Linear(1, 1, rng=0, bias=False), name="x"),
])
def test_modules_flatten_and_rebuild_field_by_field(make):
    module = make()
    flat, treedef = lp.tree_flatten(module)
    rebuilt = lp.tree_unflatten(treedef, flat)
    assert type(rebuilt) is type(module) and sorted(vars(rebuilt)) == sorted(vars(module))
    fields = [f.name for f in dataclasses.fields(module)]
    assert [k for k in vars(rebuilt) if k in fields] == fields  # in field order, as __init__ sets them
    assert all(getattr(rebuilt, f) == getattr(module, f) for f in module._static)
    assert lp.tree_flatten(rebuilt) == (flat, treedef)
    tagged = lp.tree_unflatten(treedef, list(range(len(flat))))
    assert lp.tree_flatten(tagged)[0] == list(range(len(flat)))


def test_a_module_class_unflattened_before_its_first_flatten():
    @dataclasses.dataclass(frozen=True, repr=False, init=False, eq=False)
    class Pair(nn.Module):
        left: object
        tag: str
        right: object
        _static = ("tag",)

    from leanpass.core.tree import _LEAF, TreeDef

    pair = lp.tree_unflatten(TreeDef(Pair, ("t",), (_LEAF, _LEAF)), [1.0, 2.0])
    assert (pair.left, pair.tag, pair.right) == (1.0, "t", 2.0)
    assert lp.tree_flatten(pair)[0] == [1.0, 2.0]


def test_repr_and_parameter_count():
    model = nn.MLP([64, 128, 10], rng=0)
    assert model.num_params == 64 * 128 + 128 + 128 * 10 + 10 == nn.param_count(model)
    assert repr(model) == (
        "MLP(\n  (0): Linear(64 -> 128, dtype=float32)\n  (1): Linear(128 -> 10, dtype=float32)\n"
        "  activation=relu, parameters=9,610\n)"
    )
    seq = nn.Sequential(nn.Linear(2, 2, rng=0, bias=False), nn.tanh, nn.Dropout(0.1), nn.LayerNorm(2),
                        nn.Embedding(3, 2, rng=0))
    text = repr(seq)
    for part in ("Linear(2 -> 2, bias=False", "tanh", "Dropout(0.1)", "LayerNorm(2", "Embedding(3, 2", "parameters=14"):
        assert part in text


def test_dropout_is_deterministic_by_generator_and_off_without_one():
    x = lp.Tensor(np.ones((100, 100)))
    drop = nn.Dropout(0.3)
    assert drop(x) is x
    a = drop(x, rng=np.random.default_rng(0)).numpy()
    b = drop(x, rng=np.random.default_rng(0)).numpy()
    np.testing.assert_array_equal(a, b)
    assert abs((a == 0).mean() - 0.3) < 0.02
    np.testing.assert_allclose(a[a != 0], 1 / 0.7)
    assert abs(a.mean() - 1.0) < 0.03  # expectation kept
    with pytest.raises(ValueError, match=r"\[0, 1\)"):
        nn.Dropout(1.0)
    g = lp.grad(lambda t: nn.dropout(t, 0.5, np.random.default_rng(1)).sum())(np.ones(6))
    np.testing.assert_array_equal(g, nn.dropout(np.ones(6), 0.5, np.random.default_rng(1)))


def test_layernorm_normalises_the_last_axis():
    ln = nn.LayerNorm(5, dtype=np.float64)
    y = ln(np.random.default_rng(0).standard_normal((3, 5)) * 10 + 4).numpy()
    np.testing.assert_allclose(y.mean(axis=-1), 0, atol=1e-12)
    np.testing.assert_allclose(y.var(axis=-1), 1, atol=1e-3)


def test_activation_errors_and_names():
    with pytest.raises(ValueError, match="unknown activation"):
        nn.MLP([2, 2], rng=0, activation="swish")
    assert nn.MLP([2, 3, 2], rng=0, activation=nn.tanh).activation == "tanh"
    with pytest.raises(ValueError, match="at least an input and an output"):
        nn.MLP([2], rng=0)
    with pytest.raises(TypeError, match="not callable"):
        nn.Sequential(nn.Linear(2, 2, rng=0), 3)


def test_eager_backward_through_a_trainable_model():
    model = nn.trainable(nn.MLP([3, 4, 2], rng=0, dtype=np.float64))
    x = np.ones((2, 3))
    losses.cross_entropy(model(x), np.array([0, 1])).backward()
    eager = [np.asarray(p.grad) for p in lp.tree_flatten(model)[0]]
    functional = leaves(lp.grad(lambda m: losses.cross_entropy(m(x), np.array([0, 1])))(model))
    for a, b in zip(eager, functional):
        np.testing.assert_allclose(a, b, rtol=1e-12)


# ----- the remembered flatten of frozen modules (leanpass.core.tree) ------------------------------------
def _walked(tree):
    """What a fresh walk gives (the cache bypassed: a shallow copy made without its entry)."""
    fresh = object.__new__(type(tree))
    fresh.__dict__.update({k: v for k, v in vars(tree).items() if k != lp.core.tree._CACHE})
    return lp.tree_flatten(fresh)


@pytest.mark.parametrize("make", [
    lambda: nn.MLP([2, 3, 1], rng=0),
    lambda: nn.Linear(2, 3, rng=0, bias=False),
    lambda: nn.LayerNorm(3),
    lambda: Scaled(lp.Tensor([2.0]), (nn.Linear(1, 1, rng=0), None), name="x"),
])
def test_frozen_modules_remember_their_flatten_with_the_walks_result(make):
    module = make()
    first, treedef = lp.tree_flatten(module)
    first.append("caller's own list")  # a fresh list each time: the caller may change it
    again, treedef2 = lp.tree_flatten(module)
    walked, walked_def = _walked(module)
    assert treedef2 is treedef and treedef == walked_def
    assert len(again) == len(walked) and all(a is b for a, b in zip(again, walked))
    rebuilt = lp.tree_unflatten(treedef, list(walked))  # remembered from unflatten too
    assert lp.tree_flatten(rebuilt)[1] is treedef
    assert all(a is b for a, b in zip(lp.tree_flatten(rebuilt)[0], walked))


def test_unflatten_remembers_a_copy_of_the_leaves_and_only_real_leaves():
    model = nn.Linear(2, 2, rng=0)
    leaves_, treedef = lp.tree_flatten(model)
    new = [lp.Tensor(np.ones((2, 2))), lp.Tensor(np.ones(2))]
    rebuilt = lp.tree_unflatten(treedef, new)
    new[0] = "changed after the call"
    assert lp.tree_flatten(rebuilt)[0][0] is rebuilt.weight
    # a container passed as a leaf is walked into, as it always was
    odd = lp.tree_unflatten(treedef, [leaves_[0], None])
    assert lp.tree_flatten(odd) == _walked(odd) == ([leaves_[0]], _walked(odd)[1])


def test_replace_copy_deepcopy_and_pickle_do_not_carry_a_stale_flatten():
    import copy
    import pickle

    model = nn.MLP([2, 3, 1], rng=0)
    lp.tree_flatten(model)  # remembered
    fields = sorted(vars(nn.MLP([2, 3, 1], rng=0)))
    new_layer = nn.Linear(2, 3, rng=1)
    replaced = model.replace(layers=(new_layer, model.layers[1]))
    assert lp.tree_flatten(replaced)[0][0] is new_layer.weight
    assert sorted(vars(model.replace())) == fields
    for clone in (copy.copy(model), copy.deepcopy(model), pickle.loads(pickle.dumps(model))):
        assert sorted(vars(clone)) == fields
        assert [a is b for a, b in zip(lp.tree_flatten(clone)[0], _walked(clone)[0])] == [True] * 4
    deep = copy.deepcopy(model)
    assert lp.tree_flatten(deep)[0][0] is deep.layers[0].weight is not model.layers[0].weight
    assert repr(deep) == repr(model)


def test_equality_of_a_dataclass_module_ignores_the_remembered_flatten():
    @dataclasses.dataclass(frozen=True)
    class Pair(nn.Module):
        a: object
        b: object

    w = np.ones(2)
    p, q = Pair(w, None), Pair(w, None)
    lp.tree_flatten(p)
    assert p == q and repr(p) == repr(q) and repr(p).endswith(f"Pair(a={w!r}, b=None)")


def test_save_and_load_of_a_remembered_model(tmp_path):
    model = nn.MLP([2, 3, 1], rng=0, dtype=np.float64)
    lp.tree_flatten(model)
    lp.save(tmp_path / "m.npz", model)
    for loaded in (lp.load(tmp_path / "m.npz"), lp.load(tmp_path / "m.npz", like=model)):
        assert repr(loaded) == repr(model)
        got, treedef = lp.tree_flatten(loaded)
        assert treedef == lp.tree_flatten(model)[1] and got[0] is loaded.layers[0].weight
        assert all(np.array_equal(a.numpy(), b.numpy()) for a, b in zip(got, lp.tree_flatten(model)[0]))


def test_a_module_holding_a_list_or_dict_is_never_remembered():
    for children in ([lp.Tensor([1.0])], {"k": lp.Tensor([1.0])}):
        module = Scaled(lp.Tensor([2.0]), children)
        before = lp.tree_flatten(module)[0]
        if isinstance(children, list):
            children.append(lp.Tensor([3.0]))
        else:
            children["j"] = lp.Tensor([3.0])
        after = lp.tree_flatten(module)[0]
        assert len(after) == len(before) + 1 and lp.core.tree._CACHE not in vars(module)


def test_registering_a_pytree_type_later_forgets_remembered_flattens():
    class Box:
        def __init__(self, items):
            self.items = items

    module = Scaled(Box((1.0, 2.0)), None)
    assert len(lp.tree_flatten(module)[0]) == 1
    leaves_, treedef = lp.tree_flatten(nn.Linear(2, 2, rng=0))
    assert len(lp.tree_flatten(lp.tree_unflatten(treedef, [Box((1.0,)), leaves_[1]]))[0]) == 2  # a leaf
    lp.register_pytree(Box, lambda b: (b.items, None), lambda meta, ch: Box(tuple(ch)))
    try:
        assert lp.tree_flatten(module)[0] == [1.0, 2.0]
        leaves_, treedef = lp.tree_flatten(nn.Linear(2, 2, rng=0))  # a structure unflatten trusts
        odd = lp.tree_unflatten(treedef, [Box((1.0, 2.0)), leaves_[1]])  # now a container given as a leaf
        assert lp.tree_flatten(odd)[0] == [1.0, 2.0, leaves_[1]]
    finally:
        del lp.core.tree._REGISTRY[Box]


def test_a_dropped_model_and_its_arrays_die_without_the_cycle_collector():
    import gc
    import weakref

    model = nn.MLP([3, 4, 2], rng=0, dtype=np.float64)
    x, y = np.ones((5, 3)), np.array([0, 1, 0, 1, 1])
    opt = lp.optim.sgd(0.1)
    state = opt.init(model)
    gc.disable()
    try:
        for _ in range(2):  # a step through grad, update and apply: every flatten remembered
            grads = lp.grad(lambda m: losses.cross_entropy(m(x), y))(model)
            updates, state = opt.update(grads, state, model)
            model = lp.optim.apply_updates(model, updates)
        assert lp.core.tree._CACHE in vars(model) and lp.core.tree._CACHE in vars(grads)
        refs = [weakref.ref(obj) for obj in (model, grads, updates, *lp.tree_flatten(model)[0],
                                               *(t._data for t in lp.tree_flatten(model)[0]))]
        del model, grads, updates, state
        assert [r() for r in refs] == [None] * len(refs)
    finally:
        gc.enable()


def test_a_module_that_is_not_a_frozen_dataclass_is_never_remembered():
    @dataclasses.dataclass(eq=False)
    class Loose(nn.Module):
        w: object

    module = Loose(lp.Tensor([1.0]))
    lp.tree_flatten(module)
    module.w = lp.Tensor([2.0])
    assert lp.tree_flatten(module)[0] == [module.w] and lp.core.tree._CACHE not in vars(module)


def test_the_nn_namespace_lists_every_layer_and_keeps_its_public_module() -> None:
    # The conv layers load on first use, but dir(nn) (tab completion) lists them; every class and
    # function keeps the module name a checkpoint stores and a repr shows, wherever it is defined.
    code = ("import sys\nfrom leanpass import nn\nprint('leanpass.nn.conv' in sys.modules)\n"
            "print(all(n in dir(nn) for n in nn.__all__))\n"
            "print(sorted({getattr(nn, n).__module__ for n in nn.__all__ if callable(getattr(nn, n))} - "
            "{'leanpass.numpy.basics', 'leanpass.numpy.attention'}))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    assert out[:3] == ["False", "True", "['leanpass.nn']"]
