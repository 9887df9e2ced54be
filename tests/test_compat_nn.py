"""LeanPass 0.1.14's ``nn`` names with their 0.1.14 meaning: ``parameters()`` / ``named_parameters()``,
``rng`` optional (NumPy's global generator), ``train()`` / ``eval()``, ``Dropout(p)(x, training=True)``,
``mse_loss`` / ``cross_entropy_loss`` / ``binary_cross_entropy_loss``, and the initialisers."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn, optim
from leanpass.testing import check_grads


# ----- parameters() and named_parameters() ------------------------------------------------------------
def test_named_parameters_are_attribute_paths_in_flatten_order_and_the_same_objects():
    mlp = nn.MLP([2, 3, 4, 1], rng=0)
    named = mlp.named_parameters()
    assert [n for n, _ in named] == ["layers.0.weight", "layers.0.bias", "layers.1.weight", "layers.1.bias",
                                     "layers.2.weight", "layers.2.bias"]
    leaves, _ = lp.tree_flatten(mlp)
    assert all(p is leaf for (_, p), leaf in zip(named, leaves)) and len(named) == len(leaves)
    assert named[2][1] is mlp.layers[1].weight
    assert [id(p) for p in mlp.parameters()] == [id(p) for _, p in named]


def test_sequential_names_its_layers_by_position_skipping_functions():
    net = nn.Sequential(nn.Linear(2, 3, rng=0), nn.relu, nn.LayerNorm(3), nn.Linear(3, 1, rng=1, bias=False))
    names = [n for n, _ in net.named_parameters()]
    assert names == ["layers.0.weight", "layers.0.bias", "layers.2.weight", "layers.2.bias", "layers.3.weight"]
    assert net.named_parameters()[4][1] is net.layers[3].weight


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Pair(nn.Module):
    enc: Any
    dec: Any
    extra: Any

    def __init__(self, shared: bool) -> None:
        enc = nn.Linear(2, 2, rng=0)
        dec = enc if shared else nn.Linear(2, 2, rng=1)
        self.__dict__.update(enc=enc, dec=dec, extra={"scale": lp.Tensor([1.0]), "off": [lp.Tensor([0.0])]})

    def __call__(self, x: Any) -> Any:
        return self.dec(self.enc(x))


def test_a_module_of_your_own_with_dicts_lists_and_tied_weights():
    names = [n for n, _ in Pair(shared=False).named_parameters()]
    assert names == ["enc.weight", "enc.bias", "dec.weight", "dec.bias", "extra.scale", "extra.off.0"]
    tied = Pair(shared=True)
    named = tied.named_parameters()  # a Tensor at two places is one parameter, named where met first
    assert [n for n, _ in named] == ["enc.weight", "enc.bias", "extra.scale", "extra.off.0"]
    assert len(tied.parameters()) == 4 and tied.parameters()[0] is tied.dec.weight


def test_conv_and_embedding_parameters():
    conv = nn.Conv2d(1, 2, 3, rng=0)
    assert [(n, p.shape) for n, p in conv.named_parameters()] == [("weight", (2, 1, 3, 3)), ("bias", (2,))]
    assert [n for n, _ in nn.Embedding(5, 2, rng=0).named_parameters()] == ["weight"]
    assert nn.Dropout(0.5).parameters() == []


# ----- train() / eval() ----------------------------------------------------------------------------------
def test_train_explains_how_leanpass_trains_and_eval_is_the_module_itself():
    net = nn.Sequential(nn.Linear(2, 2, rng=0), nn.Dropout(0.5))
    with pytest.raises(TypeError, match=r"no training mode.*rng=np.random.default_rng\(0\).*training=True"):
        net.train()
    assert net.eval() is net and net.train(False) is net


# ----- rng optional: NumPy's global generator ----------------------------------------------------------
def _datas(module: Any) -> list[np.ndarray]:
    return [np.array(p.data) for p in module.parameters()]


@pytest.mark.parametrize("make", [
    lambda: nn.Linear(3, 4), lambda: nn.MLP([3, 5, 2]), lambda: nn.Embedding(6, 3),
    lambda: nn.Conv2d(2, 3, 3), lambda: nn.Conv1d(2, 3, 3), lambda: nn.ConvTranspose2d(2, 3, 3),
])
def test_without_rng_np_random_seed_repeats_the_weights(make):
    np.random.seed(3)
    a = make()
    b = make()
    np.random.seed(3)
    c = make()
    assert all(np.array_equal(x, y) for x, y in zip(_datas(a), _datas(c)))
    assert not all(np.array_equal(x, y) for x, y in zip(_datas(a), _datas(b)))  # the generator moved on
    for p in a.parameters():  # 0.1.14's form: float64 parameters that require grad
        assert p.dtype == np.float64 and p.requires_grad


def test_with_rng_a_layer_is_as_before():
    layer = nn.Linear(3, 4, rng=0)
    assert layer.weight.dtype == np.float32 and not layer.weight.requires_grad
    assert np.array_equal(layer.weight.numpy(), nn.he_normal(np.random.default_rng(0), (3, 4)).numpy())
    state = np.random.get_state()
    nn.MLP([3, 4], rng=1)
    assert np.array_equal(np.random.get_state()[1], state[1])  # the global generator untouched


def test_linear_without_rng_is_initialised_as_in_0_1_14():
    np.random.seed(0)
    layer = nn.Linear(16, 200)
    w = layer.weight.data
    np.random.seed(0)
    want = np.random.uniform(-0.25, 0.25, size=(16, 200))  # 0.1.14: U(-1/sqrt(in), 1/sqrt(in)), bias 0
    assert np.array_equal(w, want)
    assert np.array_equal(layer.bias.data, np.zeros(200))
    assert nn.Linear(2, 2, dtype=np.float32).weight.dtype == np.float32  # dtype= still chooses


def test_initialisers_take_rng_none():
    for init in (nn.he_normal, nn.he_uniform, nn.glorot_normal, nn.glorot_uniform, nn.normal, nn.orthogonal,
                 nn.fan_in_uniform):
        np.random.seed(1)
        a = init(None, (4, 3), np.float64)
        np.random.seed(1)
        assert np.array_equal(a.numpy(), init(None, (4, 3), np.float64).numpy())


def test_the_0_1_14_readme_program_trains():
    from leanpass import Tensor

    np.random.seed(0)
    x = Tensor([[1.0, 2.0]], requires_grad=False)
    model = nn.MLP([2, 16, 3])
    output = model(x)
    assert output.shape == (1, 3) and output.dtype == np.float64
    target = np.array([[0.0, 1.0, 0.0]])
    loss = nn.mse_loss(output, target)
    loss.backward()
    grads = lp.grad(lambda m: nn.mse_loss(m(x), target))(model)  # the functional door agrees
    for p, g in zip(model.parameters(), grads.parameters()):
        np.testing.assert_allclose(np.asarray(p.grad), np.asarray(g), rtol=1e-12, atol=1e-15)


# ----- Dropout(p)(x, training=True) ------------------------------------------------------------------
def test_dropout_with_training_true_draws_from_the_global_generator():
    drop = nn.Dropout(p=0.25)
    x = lp.Tensor(np.ones(1000))
    np.random.seed(5)
    y = drop(x, training=True).numpy()
    np.random.seed(5)
    assert np.array_equal(y, drop(x, training=True).numpy())
    assert set(np.unique(y)) == {0.0, 1 / 0.75} and 150 < (y == 0).sum() < 350
    assert drop(x, training=False) is x and drop(x) is x  # evaluation
    assert drop(x, False, rng=np.random.default_rng(0)) is x
    assert np.array_equal(drop(x, True, rng=np.random.default_rng(0)).numpy(),
                          drop(x, rng=np.random.default_rng(0)).numpy())
    assert nn.Dropout(p=0.3).rate == 0.3


# ----- the 0.1.14 losses: its values (transcribed from its code), and the fixes ---------------------------
RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 4)) * 3
ONE_HOT = np.eye(4)[[0, 3, 1, 1, 2]]
BITS = RNG.integers(0, 2, (5, 4)).astype(float)


def softmax(x, axis=-1):
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def sigmoid(x):
    return 1 / (1 + np.exp(-x))


def test_mse_loss_value_and_gradient():
    pred = lp.Tensor(X, requires_grad=True)
    loss = nn.mse_loss(pred, ONE_HOT)
    np.testing.assert_allclose(loss.item(), ((X - ONE_HOT) ** 2).mean(), rtol=1e-15)
    loss.backward()
    np.testing.assert_allclose(np.asarray(pred.grad), 2 * (X - ONE_HOT) / X.size, rtol=1e-14)
    assert nn.mse_loss(lp.Tensor([[1.0, 2.0]]), 0.0).item() == 2.5  # a target that broadcasts
    assert nn.mse_loss(lp.Tensor([[1.0, 2.0], [0.0, 0.0]]), np.array([1.0, 1.0])).item() == 0.75
    with pytest.raises(ValueError, match=r"\(3, 1\) but the targets \(3,\).*reshape\(-1, 1\)"):
        nn.mse_loss(lp.Tensor(np.zeros((3, 1))), np.zeros(3))  # 0.1.14 averaged a (3, 3) table


def test_cross_entropy_loss_value_and_gradient():
    pred = lp.Tensor(X, requires_grad=True)
    loss = nn.cross_entropy_loss(pred, ONE_HOT)
    want = -(ONE_HOT * np.log(np.clip(softmax(X), 1e-15, None))).sum(-1).mean()  # 0.1.14's formula
    np.testing.assert_allclose(loss.item(), want, rtol=1e-14)
    loss.backward()
    np.testing.assert_allclose(np.asarray(pred.grad), (softmax(X) - ONE_HOT) / 5, rtol=1e-12, atol=1e-16)
    labels = ONE_HOT.argmax(-1)
    np.testing.assert_allclose(nn.cross_entropy_loss(X, labels).item(), want, rtol=1e-14)  # class indices
    np.testing.assert_allclose(nn.cross_entropy_loss(X.T, ONE_HOT.T, axis=0).item(), want, rtol=1e-14)
    np.testing.assert_allclose(nn.cross_entropy_loss(X, ONE_HOT.astype(int)).item(), want, rtol=1e-14)
    check_grads(lambda x: nn.cross_entropy_loss(x, ONE_HOT), [X])


def test_cross_entropy_loss_over_axis_1_of_a_4d_batch():
    x = RNG.standard_normal((2, 3, 4, 5))
    labels = RNG.integers(0, 3, (2, 4, 5))
    one_hot = np.moveaxis(np.eye(3)[labels], -1, 1)
    want = -(one_hot * np.log(softmax(x, axis=1))).sum(1).mean()
    np.testing.assert_allclose(nn.cross_entropy_loss(x, one_hot, axis=1).item(), want, rtol=1e-13)
    np.testing.assert_allclose(nn.cross_entropy_loss(x, labels, axis=1).item(), want, rtol=1e-13)


def test_binary_cross_entropy_loss_takes_logits_value_and_gradient():
    pred = lp.Tensor(X, requires_grad=True)
    loss = nn.binary_cross_entropy_loss(pred, BITS)
    p = sigmoid(X)
    want = -(BITS * np.log(p) + (1 - BITS) * np.log(1 - p)).mean()  # 0.1.14's formula
    np.testing.assert_allclose(loss.item(), want, rtol=1e-13)
    loss.backward()
    np.testing.assert_allclose(np.asarray(pred.grad), (p - BITS) / X.size, rtol=1e-12, atol=1e-16)
    check_grads(lambda x: nn.binary_cross_entropy_loss(x, BITS), [X])


def test_far_logits_keep_their_loss_and_gradient_where_0_1_14_stopped_at_34_5():
    x = lp.Tensor([[50.0, -50.0]], requires_grad=True)
    loss = nn.cross_entropy_loss(x, np.array([[0.0, 1.0]]))
    loss.backward()
    assert loss.item() == 100.0  # 0.1.14: 34.54 (log clipped at 1e-15), gradient ~1e-29
    np.testing.assert_array_equal(np.asarray(x.grad), [[1.0, -1.0]])
    y = lp.Tensor([50.0, -50.0], requires_grad=True)
    loss = nn.binary_cross_entropy_loss(y, np.array([0.0, 1.0]), reduction="none")
    np.testing.assert_array_equal(loss.data, [50.0, 50.0])  # 0.1.14: 34.54 each, no gradient
    nn.binary_cross_entropy_loss(y, np.array([0.0, 1.0])).backward()
    np.testing.assert_array_equal(np.asarray(y.grad), [0.5, -0.5])


def test_the_0_1_14_losses_live_in_nn_and_in_losses():
    assert nn.mse_loss is lp.losses.mse_loss and nn.mse_loss.__module__ == "leanpass.nn"
    assert "cross_entropy_loss" in dir(nn)


# ----- initialisers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(5, 3), (3, 5), (4, 4), (6, 2, 3)])
def test_orthogonal_is_orthonormal_on_its_smaller_side(shape):
    q = nn.orthogonal(np.random.default_rng(0), shape, np.float64, gain=2.0).numpy().reshape(shape[0], -1)
    small = min(q.shape)
    gram = q.T @ q if q.shape[0] >= q.shape[1] else q @ q.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(small), atol=1e-12)
    with pytest.raises(ValueError, match="at least 2 axes"):
        nn.orthogonal(0, (3,))


def test_orthogonal_is_a_uniform_draw_signs_fixed_by_r():
    # Q of the QR of a standard normal matrix, each column's sign set so that R's diagonal is positive.
    a = np.random.default_rng(7).standard_normal((4, 3))
    q, r = np.linalg.qr(a)
    want = q * np.sign(np.diag(r))
    np.testing.assert_allclose(nn.orthogonal(7, (4, 3), np.float64).numpy(), want, rtol=1e-12)


def test_normal_kaiming_and_the_aliases():
    w = nn.normal(np.random.default_rng(0), (400, 500), np.float64, mean=1.0, std=0.02).numpy()
    assert abs(w.mean() - 1.0) < 1e-3 and abs(w.std() - 0.02) < 1e-3
    assert nn.kaiming_normal is nn.he_normal and nn.kaiming_uniform is nn.he_uniform
    assert nn.xavier_uniform is nn.glorot_uniform
    layer = nn.Linear(3, 2, rng=0, init=functools.partial(nn.normal, std=0.0))
    assert not layer.weight.numpy().any()
    assert nn.Linear(3, 2, rng=0, init="orthogonal").weight.shape == (3, 2)
    assert nn.Linear(3, 2, rng=0, init="kaiming_uniform").weight.shape == (3, 2)


def test_fan_in_uniform_bound():
    w = nn.fan_in_uniform(np.random.default_rng(0), (25, 1000), np.float64).numpy()
    assert np.abs(w).max() <= 0.2 and np.abs(w).max() > 0.199


# ----- a module written as in 0.1.14 / PyTorch (no dataclass decorator) ---------------------------------
class Net(nn.Module):
    def __init__(self, hidden: int = 16) -> None:
        super().__init__()
        self.fc1 = nn.Linear(2, hidden)
        self.fc2 = nn.Linear(hidden, 1)
        self.name = "net"  # (structure, not a parameter)
        self.blocks = [nn.Linear(1, 1), nn.Linear(1, 1)]

    def forward(self, x: Any) -> Any:
        return self.blocks[1](self.blocks[0](self.fc2(nn.relu(self.fc1(x)))))


def test_a_0_1_14_style_module_trains_in_both_styles():
    np.random.seed(1)
    net = Net()
    names = [n for n, _ in net.named_parameters()]
    assert names == ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias", "blocks.0.weight", "blocks.0.bias",
                     "blocks.1.weight", "blocks.1.bias"]
    x, target = lp.Tensor([[1.0, 2.0], [0.5, -1.0]]), np.array([[1.0], [0.0]])
    out = net(x)
    assert np.array_equal(out.data, net.forward(x).data)
    nn.mse_loss(out, target).backward()
    grads = lp.grad(lambda m: nn.mse_loss(m(x), target))(net)
    assert type(grads) is Net and grads.name == "net"
    for p, g in zip(net.parameters(), grads.parameters()):
        np.testing.assert_allclose(np.asarray(p.grad), np.asarray(g), rtol=1e-12, atol=1e-15)
    opt = optim.sgd(0.1)
    new = optim.apply_updates(net, opt.update(grads, opt.init(net), net)[0])
    assert type(new) is Net and new.name == "net" and new.fc1 is not net.fc1
    np.testing.assert_allclose(new.fc1.weight.data, net.fc1.weight.data - 0.1 * np.asarray(grads.fc1.weight))
    assert net.num_params == 2 * 16 + 16 + 16 + 1 + 4


def test_a_module_without_forward_or_call_says_so():
    class Empty(nn.Module):
        pass

    with pytest.raises(NotImplementedError, match="defines neither __call__ nor forward"):
        Empty()(1.0)
    with pytest.raises(NotImplementedError, match="defines neither __call__ nor forward"):
        Empty().forward(1.0)
    layer = nn.Linear(2, 1, rng=0)
    assert np.array_equal(layer.forward(np.ones((1, 2))).numpy(), layer(np.ones((1, 2))).numpy())


def test_a_0_1_14_style_module_saves_and_loads(tmp_path):
    net = Net(hidden=3)
    lp.save(tmp_path / "net.npz", net)
    for loaded in (lp.load(tmp_path / "net.npz"), lp.load(tmp_path / "net.npz", like=net)):
        assert type(loaded) is Net and loaded.name == "net"
        assert [n for n, _ in loaded.named_parameters()] == [n for n, _ in net.named_parameters()]
        assert np.array_equal(loaded(np.ones((2, 2))).data, net(np.ones((2, 2))).data)


def test_jit_refuses_draws_from_the_global_generator_it_would_replay():
    drop = nn.Dropout(0.5)
    with pytest.raises(TypeError, match="NumPy's global generator.*Pass a np.random.Generator as an argument"):
        lp.jit(lambda x: drop(x, training=True) * 1.0)(np.ones(8))
    with pytest.raises(TypeError, match="NumPy's global generator"):
        lp.jit(lambda x: x * np.random.random(8))(np.ones(8))
    jitted = lp.jit(lambda x, rng: drop(x, rng=rng) * 1.0)  # a generator argument: fresh masks at each call
    rng = np.random.default_rng(0)
    masks = [jitted(np.ones(16), rng) for _ in range(3)]
    assert not np.array_equal(masks[0], masks[1])
    assert lp.jit(lambda x: x * 2.0)(np.ones(2)).tolist() == [2.0, 2.0]
