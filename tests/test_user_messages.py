"""Small things users hit: formatting a Tensor, the names the docs promise, and error messages
that name what actually ran (the transform, the vmap argument, the SciPy function)."""

from __future__ import annotations

import builtins
import re
from pathlib import Path

import numpy as np
import pytest
import scipy.optimize
import scipy.special as sp
import scipy.stats as ss

import leanpass as lp
from leanpass import Tensor, losses, nn

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


# ----- f"{t:.3f}" -------------------------------------------------------------------------------------
def test_a_zero_d_tensor_formats_as_a_numpy_scalar_does() -> None:
    assert f"{Tensor(2.0) / 3:.3f}" == f"{np.float64(2.0) / 3:.3f}" == "0.667"
    assert f"{Tensor(np.float32(1.5)):>8.2f}" == f"{np.float32(1.5):>8.2f}"
    assert f"{Tensor(np.array(5)):03d}" == "005"
    assert f"{Tensor(1234.5):,.1f} {Tensor(0.25):.0%} {Tensor(3.0):e}" == "1,234.5 25% 3.000000e+00"
    w = Tensor(2.0, requires_grad=True)
    assert f"{w * 3:.2f}" == "6.00"
    shown = []
    lp.grad(lambda x: shown.append(f"{x:.1f}") or x * x)(3.0)  # logging inside grad: a string loses nothing
    assert shown == ["3.0"]


def test_formatting_without_a_spec_is_str_and_an_array_refuses_a_spec_as_numpy_does() -> None:
    t = Tensor([1.0, 2.0])
    assert f"{t}" == str(t) == repr(t)
    with pytest.raises(TypeError) as numpy_says:
        f"{np.array([1.0, 2.0]):.3f}"
    assert "unsupported format string" in str(numpy_says.value)
    for bad in (t, Tensor([1.5]), Tensor([[1.5]])):
        with pytest.raises(TypeError, match=r"unsupported format string passed to Tensor.__format__.*t\.item\(\)"):
            f"{bad:.3f}"


def test_a_traced_tensor_says_it_has_no_value_to_format() -> None:
    with pytest.raises(TypeError, match="traced by lp.jit or lp.vmap"):
        lp.vmap(lambda x: f"{x.sum():.2f}" and x)(Tensor(np.ones((3, 2))))


# ----- the documented names exist -----------------------------------------------------------------------
def test_checkpoint_error_is_exported() -> None:
    from leanpass.checkpoint import CheckpointError

    assert lp.CheckpointError is CheckpointError
    assert "CheckpointError" in lp.__all__
    with pytest.raises(lp.CheckpointError):
        lp.load(__file__)  # not a checkpoint


PYTORCH_NAMES = {("performance.md", "optim.SGD")}  # PyTorch's, in the comparison with it


def test_every_name_the_docs_use_is_exported() -> None:
    from leanpass import distributed

    modules = {name: getattr(lp, name) for name in ("nn", "optim", "losses", "data", "datasets", "linalg",
                                                    "special", "stats", "functional")}
    missing = []
    for path in DOCS:
        text = path.read_text()
        for module, name in re.findall(r"(?<![\w.])(lp|nn|optim|losses|data|datasets|linalg|special|stats|functional)"
                                       r"\.([A-Za-z_]\w*)", text):
            if name == "py" or (path.name, f"{module}.{name}") in PYTORCH_NAMES:  # (nn.py: a file)
                continue
            if not hasattr(lp if module == "lp" else modules[module], name):
                missing.append(f"{path.name}: {module}.{name}")
        for name in re.findall(r"`(?:lp\.)?([A-Z]\w*Error)`", text):  # errors users catch
            if not any(hasattr(where, name) for where in (builtins, lp, distributed)):
                missing.append(f"{path.name}: {name}")
    for name in lp.__all__:
        if not hasattr(lp, name):
            missing.append(f"lp.__all__: {name}")
    assert not missing, missing


# ----- the ConversionError names the transform that runs ------------------------------------------------
def bad(x):
    return x * float(x.sum())


@pytest.mark.parametrize(("run", "named"), [
    (lambda: lp.grad(lambda x: bad(x).sum())(np.ones(2)), "inside grad"),
    (lambda: lp.value_and_grad(lambda x: bad(x).sum())(np.ones(2)), "inside grad"),
    (lambda: lp.vjp(bad, np.ones(2)), "inside vjp"),
    (lambda: lp.jvp(bad, (np.ones(2),), (np.ones(2),)), "inside jvp"),
    (lambda: lp.jacfwd(bad)(np.ones(2)), "inside jacfwd"),
    (lambda: lp.jacrev(bad)(np.ones(2)), "inside jacrev"),
    (lambda: lp.jacobian(bad)(np.ones(2)), "inside jacobian"),
    (lambda: lp.hessian(lambda x: bad(x).sum())(np.ones(2)), "inside hessian"),
    (lambda: lp.hvp(lambda x: bad(x).sum())(np.ones(2), np.ones(2)), "inside hvp"),
    (lambda: lp.vmap(lp.grad(lambda x: bad(x).sum()))(np.ones((3, 2))), "inside grad, inside vmap"),
    (lambda: lp.grad(lambda x: lp.vmap(bad)(x).sum())(np.ones((3, 2))), "inside vmap, inside grad"),
    (lambda: lp.grad(lambda y: lp.jvp(lambda x: bad(x * y).sum(), (np.ones(2),), (np.ones(2),))[1])(1.0),
     "inside jvp, inside grad"),
])
def test_the_conversion_error_names_the_transform_running(run, named) -> None:
    with pytest.raises(lp.ConversionError, match=rf"float\(t\): this Tensor is being differentiated \({named}\)"):
        run()


def test_a_tensor_that_escaped_its_transform_is_still_refused() -> None:
    leaked = []
    lp.grad(lambda x: leaked.append(x) or (x * x).sum())(np.ones(2))
    with pytest.raises(lp.ConversionError, match=r"differentiated \(by a transform such as grad"):
        float(leaked[0].sum())


# ----- vmap of arguments of different sizes suggests in_axes -------------------------------------------------
def test_a_forgotten_in_axes_names_the_arguments_and_suggests_none_for_the_shared_one() -> None:
    model = nn.MLP([5, 16, 3], rng=0)
    xs, ys = np.ones((8, 5), np.float32), np.zeros(8, int)

    def loss(m, x, y):
        return losses.cross_entropy(m(x[None]), y[None])

    with pytest.raises(ValueError) as err:
        lp.vmap(lp.grad(loss))(model, xs, ys)
    message = str(err.value)
    assert "args[0].layers[0].weight has size 5 along axis 0" in message
    assert "args[1] has size 8 along axis 0; args[2] has size 8 along axis 0" in message
    suggested = re.search(r"in_axes=(\(.*?\)) maps only the arguments of batch size 8", message)
    assert suggested and suggested.group(1) == "(None, 0, 0)", message
    per_example = lp.vmap(lp.grad(loss), in_axes=eval(suggested.group(1)))(model, xs, ys)  # noqa: S307 - it works
    assert per_example.layers[0].weight.shape == (8, 5, 16)


def test_the_suggestion_keeps_the_axes_given_and_leaves_keywords_mapped() -> None:
    # two arguments that disagree: no majority, so the suggestion is for the later one's batch size
    with pytest.raises(ValueError, match=r"same for every example .*: for a batch of size 5, in_axes=\(None, 1\)\."):
        lp.vmap(lambda p, x: x.T @ p["w"], in_axes=({"w": 0}, 1))({"w": np.ones((3, 4))}, np.ones((3, 5)))
    with pytest.raises(ValueError, match=r"in_axes=\(None, 0, 1\) maps only the arguments of batch size 5\.$"):
        lp.vmap(lambda p, x, y: x.T @ p["w"] + y, in_axes=(0, 0, 1))({"w": np.ones((3, 4))}, np.ones((5, 3)),
                                                                     np.ones((4, 5)))
    with pytest.raises(ValueError, match=r"in_axes=\(None,\)\. Keyword arguments are always mapped over their axis 0"):
        lp.vmap(lambda p, x: x @ p["w"])({"w": np.ones((3, 4))}, x=np.ones((5, 3)))
    with pytest.raises(ValueError, match=r"Keyword arguments are always mapped over their axis 0"):
        lp.vmap(lambda x, w: x @ w)(np.ones((5, 3)), w=np.ones((3, 4)))


# ----- SciPy inside an objective passed to SciPy ---------------------------------------------------------
@pytest.mark.parametrize(("inner", "named", "ours"), [
    (lambda m: -ss.norm.logpdf(np.array([0.5, 1.0]), m, 1.0).sum(), "scipy.stats.norm.logpdf", "lp.stats.norm.logpdf"),
    (lambda x: sp.logsumexp(x), "scipy.special.logsumexp", "lp.special.logsumexp"),
])
def test_scipy_called_inside_a_minimize_objective_is_named(inner, named, ours) -> None:
    def objective(x):
        value, grad = lp.value_and_grad(inner)(x)
        return float(value), grad

    with pytest.raises(lp.ConversionError) as err:
        scipy.optimize.minimize(objective, np.array([0.0, 1.0]), jac=True)
    message = str(err.value)
    assert message.startswith(f"np.asarray(t): {named} is not differentiable in LeanPass"), message
    assert f"use {ours}" in message and "minimize" not in message
