"""The convolutional modules, BatchNorm's state (training, evaluation, gradients, optimizers,
checkpoints), cross-entropy's label smoothing, and the CNN main job."""

from __future__ import annotations

import io

import numpy as np
import pytest

import leanpass as lp
from leanpass import losses, nn, optim
from leanpass.examples import digits
from leanpass.testing import check_grads


def test_conv_modules_compute_their_functions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 6, 6)).astype(np.float32)
    conv = nn.Conv2d(4, 6, (3, 2), stride=(2, 1), padding=1, groups=2, rng=rng)
    assert conv.weight.shape == (6, 2, 3, 2) and conv.bias.shape == (6,)
    want = lp.conv2d(x, conv.weight, conv.bias, stride=(2, 1), padding=1, groups=2)
    np.testing.assert_array_equal(conv(x).numpy(), want.numpy())
    assert conv(x).dtype == np.float32 and conv(x.astype(np.float64)).dtype == np.float32
    fan_in = 2 * 3 * 2
    assert abs(float(np.std(nn.Conv2d(64, 64, 3, rng=0).weight.numpy())) - np.sqrt(2 / (64 * 9))) < 0.003
    assert nn.Conv2d(4, 6, 3, bias=False, rng=0).bias is None and fan_in == 12
    up = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1, groups=2, rng=rng)
    assert up.weight.shape == (4, 3, 3, 3)
    np.testing.assert_array_equal(up(x).numpy(), lp.conv_transpose2d(x, up.weight, up.bias, stride=2, padding=1,
                                                                      output_padding=1, groups=2).numpy())
    c1 = nn.Conv1d(4, 2, 3, padding="same", rng=rng)
    assert c1(x[:, :, 0]).shape == (2, 2, 6)
    assert nn.MaxPool2d(2)(x).shape == (2, 4, 3, 3) and nn.AvgPool2d(3, 1, 1)(x).shape == x.shape
    assert nn.Flatten()(x).shape == (2, 144) and nn.Flatten(2)(x).shape == (2, 4, 36)
    gn = nn.GroupNorm(2, 4)
    np.testing.assert_allclose(gn(x).numpy(), lp.group_norm(x, 2, gn.weight, gn.bias).numpy())
    with pytest.raises(ValueError, match="groups=3"):
        nn.Conv2d(4, 6, 3, groups=3, rng=0)


def test_modules_are_pytrees_with_static_settings():
    conv = nn.Conv2d(2, 3, 3, stride=2, padding="same" if False else 1, rng=0)
    leaves, treedef = lp.tree_flatten(conv)
    assert [leaf.shape for leaf in leaves] == [(3, 2, 3, 3), (3,)]
    rebuilt = lp.tree_unflatten(treedef, leaves)
    assert rebuilt.stride == 2 and rebuilt.padding == 1
    grads = lp.grad(lambda m: m(np.ones((1, 2, 5, 5))).sum())(conv)
    assert type(grads) is nn.Conv2d and grads.weight.shape == (3, 2, 3, 3)
    assert "Conv2d(2 -> 3, kernel_size=(3, 3), stride=2, padding=1" in repr(conv)


def test_batch_norm_trains_with_batch_statistics_and_evaluates_with_running_ones():
    rng = np.random.default_rng(1)
    bn = nn.BatchNorm(3, momentum=0.25, dtype=np.float64)
    state = bn.init_state()
    x = rng.standard_normal((8, 3, 2, 2)) * 2 + 5
    y, new = bn(x, state, train=True)
    np.testing.assert_allclose(y.numpy(), lp.batch_norm(x, bn.weight, bn.bias).numpy())
    n = 8 * 2 * 2
    np.testing.assert_allclose(new["mean"], 0.75 * 0 + 0.25 * x.mean(axis=(0, 2, 3)))
    np.testing.assert_allclose(new["var"], 0.75 * 1 + 0.25 * x.var(axis=(0, 2, 3)) * n / (n - 1))
    assert state["mean"].tolist() == [0, 0, 0]  # the old state is unchanged
    evaluated = bn(x, new).numpy()
    want = (x - new["mean"].reshape(1, 3, 1, 1)) / np.sqrt(new["var"].reshape(1, 3, 1, 1) + 1e-5)
    np.testing.assert_allclose(evaluated, want)
    with pytest.raises(ValueError, match="init_state"):
        bn(x)
    with pytest.raises(ValueError, match="channels"):
        bn(np.ones((2, 4)), state)
    # (N, C) inputs and a channel axis of your choice
    flat = nn.BatchNorm(4, axis=-1)
    y2, s2 = flat(np.ones((5, 4)), flat.init_state(), train=True)
    assert y2.shape == (5, 4) and s2["mean"].dtype == np.float32


def test_gradients_and_optimizers_never_touch_the_statistics():
    rng = np.random.default_rng(2)
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, rng=rng), nn.BatchNorm(2), nn.relu, nn.Flatten(),
                          nn.Linear(8, 3, rng=rng))
    state = model.init_state()
    assert state[0] is None and set(state[1]) == {"mean", "var"}
    x, y = rng.standard_normal((4, 1, 2, 2)), np.array([0, 1, 2, 0])

    def loss_fn(model, state):
        logits, state = model(x, state, train=True)
        return losses.cross_entropy(logits, y), state

    (loss, new_state), grads = lp.value_and_grad(loss_fn, has_aux=True)(model, state)
    assert [g.shape for g in lp.tree_flatten(grads)[0]] == [p.shape for p in lp.tree_flatten(model)[0]]
    assert not np.allclose(new_state[1]["mean"], 0)
    opt = optim.adamw(1e-2, weight_decay=0.5)
    updates, _ = opt.update(grads, opt.init(model), model)
    model2 = optim.apply_updates(model, updates)
    assert lp.tree_flatten(model2)[1] == lp.tree_flatten(model)[1]
    # A second-order gradient through the train-mode network works too.
    hv = lp.grad(lambda m: lp.tree_flatten(lp.grad(lambda m: loss_fn(m, state)[0])(m))[0][0].sum())(model)
    assert np.all(np.isfinite(lp.tree_flatten(hv)[0][0].numpy()))


def test_batch_norm_eval_output_is_differentiable_to_second_order():
    bn = nn.BatchNorm(2, dtype=np.float64)
    state = {"mean": np.array([0.5, -1.0]), "var": np.array([2.0, 0.5])}
    x = np.random.default_rng(3).standard_normal((3, 2))
    check_grads(lambda x: bn(x, state), [x], order=2)
    check_grads(lambda x: bn(x, state, train=True)[0], [x], order=2)


def test_sequential_without_state_and_bad_state():
    net = nn.Sequential(nn.Linear(2, 2, rng=0), nn.relu)
    assert net.init_state() is None
    y, s = net(np.ones((1, 2)), train=True)
    assert s is None and y.shape == (1, 2)
    bn_net = nn.Sequential(nn.BatchNorm(2))
    with pytest.raises(ValueError, match="init_state"):
        bn_net(np.ones((3, 2)))
    with pytest.raises(ValueError, match="tuple of 1"):
        bn_net(np.ones((3, 2)), {"mean": 0})
    nested = nn.Sequential(nn.Sequential(nn.BatchNorm(2)), nn.relu)
    st = nested.init_state()
    y, st2 = nested(np.arange(6.0).reshape(3, 2), st, train=True)
    assert st2[0][0]["mean"].tolist() != [0, 0] and nested(np.ones((3, 2)), st2).shape == (3, 2)


def test_checkpoint_of_a_model_with_batch_norm(tmp_path):
    rng = np.random.default_rng(4)
    model = nn.Sequential(nn.Conv2d(1, 3, 3, rng=rng), nn.BatchNorm(3), nn.relu, nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(3, 2, rng=rng))
    x = rng.standard_normal((6, 1, 4, 4)).astype(np.float32)
    _, state = model(x, model.init_state(), train=True)
    path = tmp_path / "cnn.npz"
    lp.save(path, {"model": model, "state": state})
    fresh = nn.Sequential(nn.Conv2d(1, 3, 3, rng=9), nn.BatchNorm(3), nn.relu, nn.MaxPool2d(2), nn.Flatten(),
                          nn.Linear(3, 2, rng=9))
    back = lp.load(path, like={"model": fresh, "state": fresh.init_state()})
    np.testing.assert_array_equal(back["state"][1]["var"], state[1]["var"])
    np.testing.assert_array_equal(back["model"](x, back["state"]).numpy(), model(x, state).numpy())
    plain = lp.load(path)
    assert plain["model"].layers[3].kernel_size == 2
    np.testing.assert_array_equal(plain["model"](x, plain["state"]).numpy(), model(x, state).numpy())


def test_label_smoothing_matches_smoothed_probability_targets():
    rng = np.random.default_rng(5)
    logits = rng.standard_normal((4, 5))
    labels = np.array([0, 3, 4, 1])
    eps = 0.2
    targets = np.full((4, 5), eps / 5)
    targets[np.arange(4), labels] += 1 - eps
    logp = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    for reduction, want in (("mean", -(targets * logp).sum(1).mean()), ("sum", -(targets * logp).sum()),
                            ("none", -(targets * logp).sum(1))):
        got = losses.cross_entropy(logits, labels, reduction, label_smoothing=eps).numpy()
        np.testing.assert_allclose(got, want)
    soft = losses.cross_entropy(logits, targets, label_smoothing=eps).item()
    np.testing.assert_allclose(soft, -(((1 - eps) * targets + eps / 5) * logp).sum(1).mean())
    check_grads(lambda z: losses.cross_entropy(z, labels, label_smoothing=eps), [logits], order=2)
    with pytest.raises(ValueError, match="label_smoothing"):
        losses.cross_entropy(logits, labels, label_smoothing=1.5)


def test_cnn_main_job_smoke_run_reports_and_saves(tmp_path):
    digits.limit_blas_threads(1)  # as the command line does: tiny matrices, a busy machine
    out = io.StringIO()
    ckpt = tmp_path / "cnn.npz"
    result = digits.train(model="cnn", epochs=1, output=str(ckpt), stream=out)
    text = out.getvalue()
    assert "cnn 21,578 parameters" in text and f"saved the model to {ckpt}" in text
    assert len([ln for ln in text.splitlines() if ln.startswith("epoch")]) == 1
    assert result["test_acc"] > 0.85
    fresh = digits.cnn(np.random.default_rng(1))
    restored = lp.load(ckpt, like={"model": fresh, "state": fresh.init_state()})
    images = digits.load_digits()[0][:20].reshape(-1, 1, 8, 8)
    np.testing.assert_array_equal(restored["model"](images, restored["state"]).numpy(),
                                  result["model"](images, result["state"]).numpy())
