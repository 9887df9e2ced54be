"""Layers of size zero and the holes of batch normalisation.

A layer with 0 input or output channels (or features) builds as in PyTorch, with an empty weight, and
computes what its sums give (the bias, or an empty output); a kernel of size 0 or a negative size is a
ValueError naming it. Batch norm refuses to train on one value per channel (as PyTorch), an empty batch
leaves the running statistics as they were (as PyTorch), and a running state of another size raises.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn
from leanpass.core.tensor import Tensor


# ----- zero-size layers ------------------------------------------------------------------------------------
@pytest.mark.parametrize("make, shapes", [
    (lambda: nn.Conv2d(0, 4, 3, rng=0), [(4, 0, 3, 3), (4,)]),
    (lambda: nn.Conv2d(3, 0, 3, rng=0), [(0, 3, 3, 3), (0,)]),
    (lambda: nn.Conv2d(0, 0, (3, 2), rng=0), [(0, 0, 3, 2), (0,)]),
    (lambda: nn.Conv1d(0, 4, 3, rng=0), [(4, 0, 3), (4,)]),
    (lambda: nn.ConvTranspose2d(0, 4, 3, rng=0), [(0, 4, 3, 3), (4,)]),
    (lambda: nn.ConvTranspose2d(4, 0, 3, rng=0), [(4, 0, 3, 3), (0,)]),
    (lambda: nn.Linear(0, 4, rng=0), [(0, 4), (4,)]),
    (lambda: nn.Linear(4, 0, rng=0, init="glorot"), [(4, 0), (0,)]),
    (lambda: nn.Embedding(0, 4, rng=0), [(0, 4)]),
    (lambda: nn.Embedding(4, 0, rng=0), [(4, 0)]),
    (lambda: nn.BatchNorm(0), [(0,), (0,)]),
    (lambda: nn.GroupNorm(1, 0), [(0,), (0,)]),
    (lambda: nn.LayerNorm(0), [(0,), (0,)]),
])
def test_zero_size_layers_build_with_empty_weights(make, shapes):
    layer = make()
    leaves, _ = lp.tree_flatten(layer)
    assert [leaf.shape for leaf in leaves] == shapes


@pytest.mark.parametrize("init", [nn.he_normal, nn.he_uniform, nn.glorot_normal, nn.glorot_uniform])
@pytest.mark.parametrize("shape", [(0, 4), (4, 0), (0, 0), (0,), (2, 0, 3, 3)])
def test_initialisers_give_empty_tensors_for_empty_shapes(init, shape):
    assert init(0, shape).shape == shape


def test_zero_size_layers_compute_what_their_sums_give():
    bias = Tensor(np.arange(4.0, dtype=np.float32))
    linear = nn.Linear(0, 4, rng=0).replace(bias=bias)
    np.testing.assert_array_equal(linear(np.zeros((2, 0))).numpy(), np.tile(np.arange(4.0), (2, 1)))
    conv = nn.Conv2d(0, 4, 3, rng=0).replace(bias=bias)
    per_channel = bias.numpy()[:, None, None]
    np.testing.assert_array_equal(conv(np.zeros((2, 0, 5, 5))).numpy(), np.broadcast_to(per_channel, (2, 4, 3, 3)))
    up = nn.ConvTranspose2d(0, 4, 3, rng=0).replace(bias=bias)
    np.testing.assert_array_equal(up(np.zeros((1, 0, 2, 2))).numpy(), np.broadcast_to(per_channel, (1, 4, 4, 4)))
    assert nn.Conv2d(3, 0, 3, rng=0)(np.ones((2, 3, 5, 5))).shape == (2, 0, 3, 3)
    assert nn.Conv1d(0, 4, 3, rng=0)(np.zeros((2, 0, 5))).shape == (2, 4, 3)
    assert nn.ConvTranspose2d(4, 0, 3, rng=0)(np.ones((1, 4, 2, 2))).shape == (1, 0, 4, 4)
    assert nn.Embedding(0, 4, rng=0)(np.zeros(0, int)).shape == (0, 4)
    assert nn.MLP([3, 0, 2], rng=0)(np.ones((5, 3))).shape == (5, 2)
    grads = lp.grad(lambda m: m(np.zeros((2, 0, 5, 5))).sum())(conv)  # each bias entry adds to 2 * 3 * 3 outputs
    np.testing.assert_array_equal(grads.bias, np.full(4, 18.0))
    assert grads.weight.shape == (4, 0, 3, 3)


_EMPTY = [p for p in itertools.product([0, 2], [0, 2], [0, 2], [1, 2], [1, 2])
          if 0 in p[:3] and p[1] % p[4] == p[2] % p[4] == 0]  # (n, c, o, stride, groups) with some size 0


@pytest.mark.parametrize("n, c, o, stride, groups", _EMPTY)
def test_convolutions_of_empty_batches_and_channels(n, c, o, stride, groups):
    """Forward and gradients of every convolution with some size 0: shapes, the bias where the sum is empty,
    zeros elsewhere, and no warnings (0 / 0, the mean of nothing)."""
    rng = np.random.default_rng(n + c + o)
    x, w, b = rng.standard_normal((n, c, 5, 5)), rng.standard_normal((o, c // groups, 3, 3)), rng.standard_normal(o)
    wt, bt = rng.standard_normal((c, o // groups, 3, 3)), rng.standard_normal(o)
    calls = [
        (lambda x, w, b: lp.conv2d(x, w, b, stride=stride, padding=1, groups=groups), (x, w, b)),
        (lambda x, w, b: lp.conv_transpose2d(x, w, b, stride=stride, padding=1, groups=groups), (x, wt, bt)),
        (lambda x, w, b: lp.conv1d(x[:, :, 0], w[:, :, 0], b, stride=stride, padding=1, groups=groups), (x, w, b)),
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f, args in calls:
            y = f(*args).numpy()
            if c == 0:
                np.testing.assert_array_equal(y, np.broadcast_to(args[2].reshape((-1,) + (1,) * (y.ndim - 2)), y.shape))
            grads = lp.grad(lambda *a, f=f: (f(*a) ** 2).sum(), argnums=(0, 1, 2))(*args)
            assert [g.shape for g in grads] == [a.shape for a in args]
            if c == 0 or n == 0:
                assert not np.any(grads[1])  # no products to differentiate


@pytest.mark.parametrize("make, words", [
    (lambda: nn.Conv2d(3, 4, 0, rng=0), "Conv2d: kernel_size must be >= 1, got 0"),
    (lambda: nn.Conv2d(3, 4, (3, 0), rng=0), "Conv2d: kernel_size must be >= 1, got 0"),
    (lambda: nn.Conv1d(3, 4, 0, rng=0), "Conv1d: kernel_size must be >= 1, got 0"),
    (lambda: nn.ConvTranspose2d(4, 3, 0, rng=0), "ConvTranspose2d: kernel_size must be >= 1, got 0"),
    (lambda: nn.Conv2d(-1, 4, 3, rng=0), "Conv2d: in_channels must be >= 0, got -1"),
    (lambda: nn.ConvTranspose2d(4, -2, 3, rng=0), "ConvTranspose2d: out_channels must be >= 0, got -2"),
    (lambda: nn.Conv2d(4, 4, 3, groups=0, rng=0), "Conv2d: groups must be >= 1, got 0"),
    (lambda: nn.Linear(-1, 4, rng=0), "Linear: in_features must be >= 0, got -1"),
    (lambda: nn.Embedding(-3, 4, rng=0), "Embedding: num_embeddings must be >= 0, got -3"),
    (lambda: nn.BatchNorm(-1), "BatchNorm: num_features must be >= 0, got -1"),
    (lambda: nn.GroupNorm(1, -4), "GroupNorm: num_channels must be >= 0, got -4"),
    (lambda: nn.LayerNorm(-1), "LayerNorm: dim must be >= 0, got -1"),
    (lambda: nn.MLP([3, -1, 2], rng=0), "Linear: out_features must be >= 0, got -1"),
    # the functional forms: a kernel with no taps gave zeros (conv2d) or an output of the wrong size
    (lambda: lp.conv2d(np.ones((1, 3, 5, 5)), np.ones((4, 3, 0, 0))), "conv2d: the kernel must be at least 1x1"),
    (lambda: lp.conv_transpose2d(np.ones((1, 4, 5, 5)), np.ones((4, 3, 0, 3))),
     "conv_transpose2d: the kernel must be at least 1x1"),
    (lambda: lp.conv1d(np.ones((1, 2, 5)), np.ones((3, 2, 0))), "conv1d: the kernel must have at least 1 tap"),
])
def test_sizes_a_layer_cannot_have_raise_value_errors_naming_them(make, words):
    with pytest.raises(ValueError, match=words.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_a_size_that_is_not_an_int_raises_a_type_error():
    with pytest.raises(TypeError, match="Linear: in_features must be an int, got 3.5"):
        nn.Linear(3.5, 2, rng=0)
    assert nn.Linear(np.int64(3), 2, rng=0).in_features == 3


# ----- batch norm ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("shape", [(1, 4), (1, 4, 1, 1), (1, 4, 1)])
def test_batch_norm_refuses_to_train_on_one_value_per_channel(shape):
    x = np.random.default_rng(0).standard_normal(shape)
    bn = nn.BatchNorm(4)
    with pytest.raises(ValueError, match="more than 1 value per channel"):
        bn(x, bn.init_state(), train=True)
    with pytest.raises(ValueError, match=r"batch_norm: expected more than 1 value per channel.*\(1, 4"):
        lp.batch_norm(x)
    assert bn(x, bn.init_state()).shape == shape  # evaluation uses the running statistics: fine
    assert bn(np.ones((1, 4, 2)), bn.init_state(), train=True)[0].shape == (1, 4, 2)  # two values per channel


@pytest.mark.parametrize("shape", [(0, 4), (0, 4, 3, 3), (2, 4, 0, 3)])
def test_an_empty_batch_leaves_the_running_statistics_as_they_were(shape):
    rng = np.random.default_rng(1)
    bn = nn.BatchNorm(4)
    warm = (8, 4) if len(shape) == 2 else (8, 4, 3, 3)
    _, state = bn(rng.standard_normal(warm), bn.init_state(), train=True)  # statistics that are not the initial ones
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y, after = bn(np.zeros(shape), state, train=True)
    assert y.shape == shape
    for key in ("mean", "var"):
        np.testing.assert_array_equal(after[key], state[key])
    x = rng.standard_normal((3, 4))
    assert np.all(np.isfinite(bn(x, after).numpy()))


def test_batch_norm_of_an_empty_batch_has_zero_gradients():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert lp.batch_norm(np.zeros((0, 4)), np.ones(4), np.zeros(4)).shape == (0, 4)
        gw, gb = lp.grad(lambda w, b: (lp.batch_norm(np.zeros((0, 4, 2)), w, b) ** 2).sum(), argnums=(0, 1))(
            np.ones(4), np.zeros(4))
    np.testing.assert_array_equal(gw, np.zeros(4))
    np.testing.assert_array_equal(gb, np.zeros(4))


@pytest.mark.parametrize("train", [False, True])
def test_a_running_state_of_another_size_raises(train):
    bn4 = nn.BatchNorm(4)
    x = np.random.default_rng(2).standard_normal((3, 4))
    with pytest.raises(ValueError, match=r"BatchNorm\(4\): the state's running mean should have shape \(4,\), got "
                                         r"\(1,\)"):
        bn4(x, nn.BatchNorm(1).init_state(), train=train)
    state = bn4.init_state()
    with pytest.raises(ValueError, match=r"running var should have shape \(4,\), got \(4, 1\)"):
        bn4(x, {"mean": state["mean"], "var": state["var"][:, None]}, train=train)


def test_group_norm_of_empty_batches_and_groups():
    rng = np.random.default_rng(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for shape in ((0, 4, 3), (2, 4, 0), (0, 4)):
            assert lp.group_norm(np.zeros(shape), 2).shape == shape
            gw, gb = lp.grad(lambda w, b, shape=shape: (lp.group_norm(np.zeros(shape), 2, w, b) ** 2).sum(),
                             argnums=(0, 1))(
                np.ones(4), np.zeros(4))
            np.testing.assert_array_equal(gw, np.zeros(4))
            np.testing.assert_array_equal(gb, np.zeros(4))
        assert nn.GroupNorm(2, 0)(np.zeros((3, 0, 2))).shape == (3, 0, 2)
    # one value per group normalises to 0, then the shift: as PyTorch's group_norm (no error)
    np.testing.assert_array_equal(lp.group_norm(rng.standard_normal((2, 4)), 4, None, np.arange(4.0)).numpy(),
                                  np.tile(np.arange(4.0), (2, 1)))


@pytest.mark.parametrize("shape", [(0, 4, 3), (2, 4, 0), (0, 4)])
def test_forward_mode_of_norms_on_empty_inputs(shape):
    # jvp of batch_norm and group_norm (their own forward-mode rules) on no values: empty tangents, no 0 / 0
    w, b = np.ones(4), np.zeros(4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for f in (lambda x, w, b: lp.batch_norm(x, w, b), lambda x, w, b: lp.group_norm(x, 2, w, b)):
            out, t = lp.jvp(f, (np.zeros(shape), w, b), (np.ones(shape), np.ones(4), np.ones(4)))
            assert out.shape == t.shape == shape
