"""What a newcomer tries on day one gets a clear word: the data helpers, the CLIs, PyTorch habits."""

from __future__ import annotations

import subprocess
import sys
import warnings

import numpy as np
import pytest

import leanpass as lp
from leanpass import data, nn, optim
from leanpass.examples import digits, digits_eager


# ----- data helpers ------------------------------------------------------------------------------------
def test_num_batches_refuses_a_batch_size_of_zero():
    with pytest.raises(ValueError, match="batch_size must be a positive int, got 0"):
        data.num_batches(10, 0)
    with pytest.raises(ValueError, match="n .* must be an int >= 0"):
        data.num_batches(-1, 3)
    assert data.num_batches(0, 3) == 0


def test_a_negative_int_seed_is_a_clear_value_error():
    with pytest.raises(ValueError, match="int seed must be >= 0, got -1"):
        list(data.batches(np.arange(4), batch_size=2, rng=-1))
    with pytest.raises(ValueError, match="int seed must be >= 0"):
        nn.Linear(2, 2, rng=-3)


def test_a_stratified_split_refuses_a_class_of_one_and_nan_labels():
    x = np.arange(10)
    y = np.array([0, 0, 0, 0, 1, 1, 1, 1, 1, 2])
    with pytest.raises(ValueError, match="class 2 of stratify has only 1 example"):
        data.train_test_split(x, test_size=0.3, rng=0, stratify=y)
    with pytest.raises(ValueError, match="NaN labels .*rows \\[3\\]"):
        data.train_test_split(x, test_size=0.3, rng=0, stratify=np.array([0, 0, 1, np.nan, 1, 0, 1, 0, 1, 0]))
    with pytest.raises(ValueError, match="no class gets an example in the test part"):
        data.train_test_split(np.arange(20), test_size=1, rng=0, stratify=np.repeat([0, 1], 10))
    train, test = data.train_test_split(x, test_size=0.4, rng=0, stratify=np.repeat([0, 1], 5))
    assert len(test) == 4 and sorted(np.concatenate([train, test]).tolist()) == list(range(10))


# ----- the command lines -----------------------------------------------------------------------------------
@pytest.mark.parametrize("args, words", [
    (["--seed", "-1"], "--seed must be >= 0"),
    (["--lr", "inf"], "--lr must be positive"),
    (["--lr", "nan"], "--lr must be positive"),
    (["--hidden", "100000000"], "7,500,000,010 parameters"),
    (["--epochs", "0"], "--epochs must be at least 1"),
    (["--output", "/no/such/dir/m.npz"], "does not exist"),
])
def test_digits_refuses_bad_options_before_training(args, words, capsys):
    with pytest.raises(SystemExit) as stop:
        digits.main(args)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert words in err and "Traceback" not in err


def test_an_output_path_that_cannot_be_written_is_refused_up_front(tmp_path, capsys):
    with pytest.raises(SystemExit):
        digits.main(["--output", str(tmp_path)])
    assert "is a directory" in capsys.readouterr().err
    assert digits.unwritable(str(tmp_path / "ok.npz")) is None
    assert list(tmp_path.iterdir()) == []  # the probe file is gone


@pytest.mark.parametrize("epochs", ["0", "-1"])
def test_digits_eager_refuses_no_epochs(epochs, capsys):
    with pytest.raises(SystemExit) as stop:
        digits_eager.main(["--epochs", epochs])
    assert stop.value.code == 2 and "--epochs must be at least 1" in capsys.readouterr().err


def test_the_cli_exit_code_is_2_from_a_shell():
    run = subprocess.run([sys.executable, "-m", "leanpass.examples.digits", "--lr", "inf"], capture_output=True,
                         text=True, timeout=60)
    assert run.returncode == 2 and "error: --batch-size, --hidden and --lr" in run.stderr
    assert "Traceback" not in run.stderr


# ----- dropout ------------------------------------------------------------------------------------------------
def test_dropout_refuses_an_int_seed_at_call_time():
    layer = nn.Dropout(0.5)
    x = lp.Tensor(np.ones(100))
    with pytest.raises(TypeError, match="np.random.Generator.*same mask on every call"):
        layer(x, rng=0)
    with pytest.raises(TypeError, match="np.random.Generator"):
        nn.Sequential(nn.Dropout(0.5))(x, rng=3)
    rng = np.random.default_rng(0)
    a, b = layer(x, rng=rng).numpy(), layer(x, rng=rng).numpy()
    assert not np.array_equal(a, b)  # a generator advances: a fresh mask each call


# ----- cotangents and values ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("bad", [[None, None], ["1.0", "2.0"], np.array([1 + 2j, 1.0]), [object(), 1.0]])
def test_a_cotangent_must_be_real_numbers(bad):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (NumPy's ComplexWarning would otherwise be the only sign)
        x = lp.Tensor([1.0, 2.0], requires_grad=True)
        with pytest.raises(TypeError, match="backward\\(cotangent\\): the cotangent must be real numbers"):
            (x * 2.0).backward(bad)
        assert x.grad is None
        _, pull = lp.vjp(lambda v: v * 2.0, np.array([1.0, 2.0]))
        with pytest.raises(TypeError, match="vjp_fn: the cotangent must be real numbers"):
            pull(bad)


def test_a_vjp_of_an_array_output_takes_a_nested_list_cotangent():
    _, pull = lp.vjp(lambda v: v * 2.0, np.array([1.0, 2.0]))
    np.testing.assert_array_equal(pull([1.0, 3.0])[0], [2.0, 6.0])
    x = lp.Tensor([1.0, 2.0], requires_grad=True)
    (x * 2.0).backward([1, 3])  # integers are real numbers too
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 6.0])


def test_integer_to_negative_power_says_so():
    with pytest.raises(ValueError, match="Integers to negative integer powers are not allowed. Use floats") as e:
        lp.Tensor([2]) ** -1
    assert "broadcast" not in str(e.value)
    with pytest.raises(ValueError, match="do not broadcast"):
        lp.Tensor([1.0, 2.0]) * lp.Tensor([1.0, 2.0, 3.0])
    assert (lp.Tensor([2.0]) ** -1).tolist() == [0.5]


# ----- PyTorch habits -------------------------------------------------------------------------------------------------
def test_updating_a_parameter_in_place_under_no_grad_works_as_in_pytorch():
    w = lp.Tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    lr = 0.1
    held = w
    before = w.data
    with lp.no_grad():
        w -= lr * w.grad
    assert w is held and w.requires_grad and w.version == 1
    np.testing.assert_allclose(w.data, [0.8, 1.6])
    assert before.tolist() == [1.0, 2.0]  # a new array: the old one is not written
    for op, want in (("+=", [2.8, 3.6]), ("*=", [5.6, 7.2]), ("/=", [2.8, 3.6])):
        with lp.no_grad():
            exec(f"w {op} 2.0", {}, {"w": w})
        np.testing.assert_allclose(w.data, want)
    assert w.version == 4
    w2 = optim.apply_updates(w, -lr * w.grad)  # the functional way still works
    assert w2 is not w and w2.requires_grad and w2.grad is None
    c = lp.Tensor([1.0])
    with lp.no_grad():
        c -= 1.0  # a constant: rebinding is all anyone means
    assert c.tolist() == [0.0]
    p = lp.Tensor([1.0], requires_grad=True)
    q = p
    q -= 1.0  # outside no_grad: rebinds to a recorded result, as before (p is not changed)
    assert q is not p and q.op == "-" and p.tolist() == [1.0]


def test_dim_is_answered_with_axis():
    t = lp.Tensor(np.arange(6.0).reshape(2, 3))
    with pytest.raises(TypeError, match="leanpass.softmax\\(dim=-1\\): LeanPass uses NumPy's name for it, axis="):
        lp.softmax(t, dim=-1)
    with pytest.raises(TypeError, match="t.sum\\(dim=0\\).*axis=0"):
        t.sum(dim=0)
    for call in (lambda: t.mean(dim=1), lambda: t.max(dim=1), lambda: lp.concatenate([t, t], dim=0),
                 lambda: t.argmax(dim=1), lambda: lp.logsumexp(t, dim=1)):
        with pytest.raises(TypeError, match="axis="):
            call()
    np.testing.assert_array_equal(t.sum(axis=0).numpy(), [3.0, 5.0, 7.0])


def test_pytorch_spellings_name_the_numpy_one():
    t = lp.Tensor(np.zeros((2, 3, 4)))
    assert t.size == 24 and isinstance(t.size, int)
    with pytest.raises(TypeError, match="t.size is NumPy's number of elements \\(24\\).*Use t.shape"):
        t.size()
    with pytest.raises(TypeError, match="t.view\\(...\\) is PyTorch's spelling; LeanPass uses NumPy's: t.reshape"):
        t.view(2, 12)
    with pytest.raises(TypeError, match="t.ndim"):
        t.dim()
    with pytest.raises(ValueError, match="t.swapaxes\\(1, 2\\)"):
        t.transpose(1, 2)
    assert t.swapaxes(1, 2).shape == (2, 4, 3) == t.mT.shape
    with pytest.raises(AttributeError, match="^'Tensor' object has no attribute 'no_such_thing'$"):
        t.no_such_thing  # noqa: B018


def test_the_tensor_methods_numpy_and_pytorch_users_expect():
    a = np.array([[1.0, 5.0, 2.0], [7.0, 0.0, 3.0]])
    t = lp.Tensor(a)
    np.testing.assert_array_equal(t.argmax(axis=1), a.argmax(axis=1))
    np.testing.assert_array_equal(t.argmin(axis=0), a.argmin(axis=0))
    assert t.argmax() == 3 and t.argmax(axis=1, keepdims=True).shape == (2, 1)
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.mT.numpy(), a.T)
    np.testing.assert_allclose(t.softmax(axis=0).numpy(), np.exp(a) / np.exp(a).sum(axis=0))
    np.testing.assert_allclose(t.log_softmax(axis=1).numpy(),
                               a - np.log(np.exp(a).sum(axis=1, keepdims=True)))
    np.testing.assert_array_equal(t.clip(1.0, 4.0).numpy(), a.clip(1.0, 4.0))
    assert t.astype(np.float32).dtype == np.float32 and t.tolist() == a.tolist()
    for name in ("max", "min", "var", "std"):
        np.testing.assert_allclose(getattr(t, name)(axis=1, keepdims=True).numpy(),
                                   getattr(a, name)(axis=1, keepdims=True))
    with pytest.raises(ValueError, match="at least 2 axes"):
        lp.Tensor([1.0]).mT  # noqa: B018
    # the differentiable ones differentiate
    from leanpass.testing import check_grads

    check_grads(lambda x: x.softmax(axis=0) * np.arange(6.0).reshape(2, 3), (a,))
    check_grads(lambda x: x.mT.log_softmax(axis=-1), (a,))


def test_op_is_public_and_read_only():
    x = lp.Tensor([1.0], requires_grad=True)
    y = (x * 2.0).exp()
    assert (x.op, y.op, y._a.op) == ("leaf", "exp", "*")
    with pytest.raises(AttributeError):
        y.op = "log"


def test_modules_and_optimizers_name_the_layer_or_the_parameter():
    with pytest.raises(ValueError, match="LayerNorm\\(5.*input has shape \\(2, 4\\).*\\(\\.\\.\\., 5\\)"):
        nn.LayerNorm(5)(np.ones((2, 4)))
    with pytest.raises(ValueError, match="Linear\\(5 -> 3.*last axis 5, not 4"):
        nn.Linear(5, 3, rng=0)(np.ones((2, 4)))
    model, other = nn.MLP([4, 8, 3], rng=0), nn.MLP([4, 9, 3], rng=0)
    for opt in (optim.adam(), optim.adamw(), optim.sgd(0.1, momentum=0.9)):
        state = opt.init(model)
        with pytest.raises(ValueError, match="gradient at .layers\\[0\\].weight has shape \\(4, 9\\).*\\(4, 8\\)"):
            opt.update(lp.tree_map(np.ones_like, other), state, other)
    state = optim.adam().init({"a": np.zeros(2), "b": np.zeros(3)})
    with pytest.raises(ValueError, match="gradient at \\['b'\\] has shape \\(4,\\)"):
        optim.adam().update({"a": np.zeros(2), "b": np.zeros(4)}, state)


# ----- what the graph keeps of a caller's arrays (docs/autodiff.md: used by reference) ------------------------
def test_an_ndarray_operand_is_used_by_reference_and_a_tensor_copies():
    w = lp.Tensor([1.0, 1.0], requires_grad=True)
    batch = np.array([2.0, 3.0])
    loss = (w * batch).sum()
    batch[:] = [20.0, 30.0]  # written before backward(): the documented by-reference behaviour
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [20.0, 30.0])
    w.grad = None
    held = np.array([2.0, 3.0])
    loss = (w * lp.Tensor(held)).sum()  # Tensor(...) copies: the caller's array is free to change
    held[:] = 0.0
    loss.backward()
    np.testing.assert_array_equal(w.grad.numpy(), [2.0, 3.0])
    primal = np.array([2.0, 3.0])
    _, pull = lp.vjp(lambda v: v * v, primal)
    primal[:] = [20.0, 30.0]  # a vjp primal is held by reference too
    np.testing.assert_array_equal(pull(np.ones(2))[0], [40.0, 60.0])
    x = np.arange(6.0)
    first = next(iter(data.batches(x, batch_size=3)))[0]
    assert not np.shares_memory(first, x)  # batches are fresh arrays
