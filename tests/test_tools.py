"""lp.to_dot / lp.draw_graph, and lp.debug_nans."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

import leanpass as lp
from leanpass import nn


# ----- to_dot / draw_graph ------------------------------------------------------------------------------
def _nodes(dot):
    return dict(re.findall(r'^  (n\d+) \[label="([^"]*)"', dot, flags=re.M))


def _edges(dot):
    return re.findall(r"^  (n\d+) -> (n\d+);", dot, flags=re.M)


def test_to_dot_shows_ops_leaves_parameters_and_constants():
    w = lp.Tensor(np.ones((3, 2)), requires_grad=True)
    x = np.ones((4, 3))
    loss = lp.relu(x @ w).sum()
    dot = lp.to_dot(loss, names={"w": w})
    nodes = _nodes(dot)
    assert sorted(nodes.values()) == sorted(["sum\\n()", "relu\\n(4, 2)", "@\\n(4, 2)", "constant\\n(4, 3)",
                                             "w\\n(3, 2)"])
    by_label = {v: k for k, v in nodes.items()}
    assert (by_label["w\\n(3, 2)"], by_label["@\\n(4, 2)"]) in _edges(dot)
    assert (by_label["@\\n(4, 2)"], by_label["relu\\n(4, 2)"]) in _edges(dot)
    assert len(_edges(dot)) == 4
    assert re.search(r'label="w\\n\(3, 2\)", shape=ellipse, style=filled', dot)  # a parameter is filled
    assert "constant" not in lp.to_dot(loss, constants=False)
    unnamed = _nodes(lp.to_dot(loss))
    assert "leaf\\n(3, 2)" in unnamed.values()


def test_to_dot_of_a_model_and_of_a_shared_input():
    model = nn.trainable(nn.MLP([3, 4, 2], rng=0))
    leaves, _ = lp.tree_flatten(model)
    dot = lp.to_dot(model(np.ones((5, 3))).sum(), names=dict(zip(["w0", "b0", "w1", "b1"], leaves)))
    assert {"w0\\n(3, 4)", "b0\\n(4,)", "w1\\n(4, 2)", "b1\\n(2,)", "linear\\n(5, 4)"} <= set(_nodes(dot).values())
    x = lp.Tensor(2.0, requires_grad=True)
    dot = lp.to_dot(x * x)
    assert len(_nodes(dot)) == 2 and len(_edges(dot)) == 2  # one leaf, two arrows into '*'
    with pytest.raises(TypeError, match="expected a Tensor"):
        lp.to_dot(np.ones(2))


CHAIN = 200_000  # 200 times Python's recursion limit; benchmarks/bench_graph.py draws 1,000,000


def test_to_dot_handles_a_long_chain_without_recursion():
    x = lp.Tensor(1.0, requires_grad=True)
    y = x
    for _ in range(CHAIN):
        y = -y
    dot = lp.to_dot(y)
    assert dot.count(" -> ") == CHAIN and dot.count("shape=box") == CHAIN
    assert dot.endswith("}\n")


def test_draw_graph_renders_or_says_what_to_install(tmp_path):
    x = lp.Tensor([1.0, 2.0], requires_grad=True)
    path = tmp_path / "graph.svg"
    try:
        import graphviz  # noqa: F401
    except ImportError:
        have_package = False
    else:
        have_package = True
    if have_package and shutil.which("dot"):
        lp.draw_graph((x * 2.0).exp().sum(), path)
        svg = path.read_text()
        assert "<svg" in svg and ">exp<" in svg and ">sum<" in svg
    else:
        with pytest.raises(RuntimeError, match="graphviz"):
            lp.draw_graph((x * 2.0).sum(), path)
        assert not path.exists()
    with pytest.raises(ValueError, match="suffix"):
        lp.draw_graph(x * 2.0, tmp_path / "graph")


def test_draw_graph_without_the_package_gives_the_install_line(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "graphviz", None)  # as if not installed
    with pytest.raises(RuntimeError, match="pip install graphviz"):
        lp.draw_graph(lp.Tensor([1.0], requires_grad=True) * 2.0, tmp_path / "g.svg")


# ----- debug_nans ----------------------------------------------------------------------------------------
# (NumPy warns "invalid value encountered" as it makes the NaN; these tests look at what follows.)
pytestmark_nan = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")


@pytestmark_nan
def test_debug_nans_names_the_forward_op_and_its_input_shapes():
    x = lp.Tensor([[1.0, -1.0]], requires_grad=True)
    with lp.debug_nans():
        y = lp.exp(x)  # fine
        with pytest.raises(FloatingPointError, match=r"op 'log' made a NaN in the forward pass, from inputs "
                                                     r"of shapes \(\(1, 2\)\)"):
            lp.log(x * 1.0)
        with pytest.raises(FloatingPointError, match=r"op '\*' made a NaN in the forward pass, from inputs of "
                                                     r"shapes \(\(1, 2\), \(\)\)"):
            x * np.float64("inf") * 0.0
        with pytest.raises(FloatingPointError, match="'-'"):
            (x * np.inf) - (x * np.inf)
    assert np.isnan(lp.log(x).data).any()  # off again after the block
    assert y.requires_grad


@pytestmark_nan
def test_debug_nans_names_the_backward_op():
    norm = lambda v: lp.sqrt((v * v).sum())  # noqa: E731
    with lp.debug_nans():
        with pytest.raises(FloatingPointError, match=r"the VJP of op '\*' made a NaN in the backward pass .*"
                                                     r"shapes \(\(2,\), \(2,\)\).*held an inf"):
            lp.grad(norm)(np.zeros(2))
        x = lp.Tensor(np.zeros(2), requires_grad=True)
        loss = norm(x)
    with pytest.raises(FloatingPointError, match="VJP of op"):
        loss.backward()  # recorded inside the block: checked when it runs
    assert x.grad is None
    assert np.isnan(lp.grad(norm)(np.zeros(2))).all()  # off: the NaN comes back silently, as before


@pytestmark_nan
def test_debug_nans_in_a_second_order_pass():
    x = lp.Tensor(np.zeros(2), requires_grad=True)
    with lp.debug_nans():
        with pytest.raises(FloatingPointError, match="backward pass"):
            lp.sqrt((x * x).sum()).backward(create_graph=True)


@pytestmark_nan
def test_debug_nans_leaves_good_computations_and_no_grad_alone():
    w = lp.Tensor([1.0, 2.0], requires_grad=True)
    with lp.debug_nans():
        loss = (lp.tanh(w) * 3.0).sum()
        loss.backward()
        with lp.no_grad():
            c = lp.log(w - 5.0)  # not being differentiated: no_grad still means no graph
        assert not c.requires_grad
    np.testing.assert_allclose(w.grad.numpy(), 3.0 * (1 - np.tanh([1.0, 2.0]) ** 2))


def test_the_environment_variable_switches_it_on_for_a_run():
    code = ("import leanpass as lp\n"
            "x = lp.Tensor([-1.0], requires_grad=True)\n"
            "try:\n    lp.sqrt(x)\nexcept FloatingPointError as e:\n    print('caught', e)\n")
    env = dict(os.environ, LEANPASS_DEBUG_NANS="1")
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60,
                         cwd=os.path.dirname(os.path.dirname(os.path.abspath(lp.__file__))))
    assert "caught debug_nans: op 'sqrt' made a NaN in the forward pass" in run.stdout, run.stderr
    env["LEANPASS_DEBUG_NANS"] = "0"
    run = subprocess.run([sys.executable, "-W", "ignore", "-c", code], capture_output=True, text=True, env=env,
                         timeout=60, cwd=os.path.dirname(os.path.dirname(os.path.abspath(lp.__file__))))
    assert run.returncode == 0 and "caught" not in run.stdout
