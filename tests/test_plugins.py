"""Plugin ops (``leanpass.plugin_registry``, ``lp.ops.<name>``): LeanPass 0.1's registry API, ops
registered with their VJP in the record form of LeanPass's own ops and working under every transform,
forward-only ops (differentiable when built from dispatched NumPy calls, a clear error when not),
name clashes, and packages that provide ops through the ``leanpass.ops`` entry-point group."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import leanpass as lp
from conftest import forget_ops
from leanpass import functional as F
from leanpass import plugin_registry as pr
from leanpass.plugin_registry import TRANSPOSED, get_op, op, register_op, unregister_op
from leanpass.testing import check_grads

X0 = np.array([0.5, -1.0, 2.0])


@pytest.fixture(autouse=True)
def _clean_registry(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test starts with no plugin loaded and forgets the ops it registered."""
    before = set(F.REGISTRY)
    monkeypatch.setattr(pr, "_discovered", False)
    monkeypatch.setattr(pr, "_loaded", set())
    monkeypatch.setattr(pr, "_broken", {})
    modules = set(sys.modules)
    yield
    forget_ops(set(F.REGISTRY) - before)
    for name in set(sys.modules) - modules:
        if name.startswith("lp_test_"):
            del sys.modules[name]


def _softsign(x: Any) -> tuple[Any, Any]:
    d = 1.0 + np.abs(x)
    return x / d, lambda g: (g / (d * d),)


def _softsign_jvp(ts: Any, ans: Any, x: Any) -> Any:
    return ts[0] / (1.0 + np.abs(x)) ** 2


def _softsign_grad(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.abs(x)) ** 2


def _mish(x: Any) -> Any:  # (a forward-only plugin as LeanPass 0.1 had them: NumPy calls only)
    return x * np.tanh(np.log1p(np.exp(x)))


def _mish_grad(x: np.ndarray) -> np.ndarray:
    sp = np.log1p(np.exp(x))
    return np.tanh(sp) + x * (1 - np.tanh(sp) ** 2) / (1 + np.exp(-x))


# ----- LeanPass 0.1's registry API ----------------------------------------------------------------------
def test_the_registry_api_of_leanpass_0_1() -> None:
    from leanpass.plugin_registry import _REGISTRY  # (leanpass-plugins imports it)

    assert _REGISTRY is F.REGISTRY  # one registry: the op records
    assert register_op("lp_mish", _mish) is _mish
    decorated = op("lp_mish2")(_mish)
    assert decorated is _mish
    out = get_op("lp_mish")(X0)
    assert type(out) is np.ndarray and np.array_equal(out, _mish(X0))  # arrays in, arrays out
    assert np.array_equal(lp.ops.lp_mish2(X0), _mish(X0))
    assert F.REGISTRY["lp_mish"].module == __name__ and "lp_mish" in F.OPS
    assert {"lp_mish", "lp_mish2"} <= set(dir(lp.ops)) and set(pr.registered_ops()) >= {"lp_mish", "lp_mish2"}
    with pytest.raises(KeyError, match="'lp_nothing' is not registered"):
        get_op("lp_nothing")
    with pytest.raises(AttributeError, match="'lp_nothing' is not registered.*lp_mish"):
        lp.ops.lp_nothing  # noqa: B018


def test_a_forward_only_op_built_from_dispatched_numpy_calls_is_differentiated_under_every_transform() -> None:
    register_op("lp_mish", _mish)
    mish = lp.ops.lp_mish
    t = lp.Tensor(X0, requires_grad=True)
    mish(t).sum().backward()
    np.testing.assert_allclose(t.grad.numpy(), _mish_grad(X0), rtol=1e-12)
    loss = lambda x: mish(x).sum()  # noqa: E731
    np.testing.assert_allclose(lp.grad(loss)(X0), _mish_grad(X0), rtol=1e-12)
    np.testing.assert_allclose(lp.jvp(mish, (X0,), (np.ones(3),))[1].numpy(), _mish_grad(X0), rtol=1e-12)
    xs = np.stack([X0, X0 + 1.0, -X0])
    np.testing.assert_allclose(lp.vmap(lp.grad(loss))(xs), np.stack([_mish_grad(x) for x in xs]), rtol=1e-12)
    assert np.array_equal(lp.jit(lp.grad(loss))(X0), lp.grad(loss)(X0))
    check_grads(mish, [X0], order=2)


def test_a_forward_only_op_on_plain_arrays_runs_and_raises_a_clear_error_when_differentiated() -> None:
    @op("lp_plain_square")
    def plain_square(x: Any) -> Any:
        return np.asarray(x) ** 2  # a plain NumPy function: LeanPass cannot follow it

    sq = lp.ops.lp_plain_square
    assert np.array_equal(sq(X0), X0 ** 2)
    assert np.array_equal(sq(lp.Tensor(X0)).numpy(), X0 ** 2)  # not differentiated: it runs
    y = sq(lp.Tensor(X0, requires_grad=True))
    assert y.op == "lp_plain_square" and np.array_equal(y.detach().numpy(), X0 ** 2)
    wanted = rf"op 'lp_plain_square' \(registered by {__name__}\) cannot be differentiated.*register_op\("
    with pytest.raises(TypeError, match=wanted):
        y.sum().backward()
    with pytest.raises(TypeError, match=wanted):
        lp.grad(lambda x: sq(x).sum())(X0)
    with pytest.raises(TypeError, match=wanted):
        lp.jvp(sq, (X0,), (np.ones(3),))
    with pytest.raises(TypeError, match="vmap of op 'lp_plain_square'.*forward function only"):
        lp.vmap(sq)(np.stack([X0, X0]))


def test_a_forward_only_op_that_returns_a_vjp_is_told_to_give_jvp() -> None:
    register_op("lp_pair", _softsign)
    with pytest.raises(TypeError, match=r"'lp_pair' returned \(output, vjp\).*jvp="):
        lp.ops.lp_pair(lp.Tensor(X0, requires_grad=True))


# ----- ops given with their VJP, in the record form of LeanPass's own ops -----------------------------------
def test_an_op_with_its_vjp_is_a_record_and_works_under_every_transform() -> None:
    calls = []

    def jvp_rule(ts: Any, ans: Any, x: Any) -> Any:
        calls.append(1)
        return _softsign_jvp(ts, ans, x)

    register_op("lp_softsign", _softsign, jvp=jvp_rule, keeps=("x",))
    rec = F.REGISTRY["lp_softsign"]
    assert rec.fn is _softsign and rec.jvp is jvp_rule and F.JVPS["lp_softsign"] is jvp_rule and rec.keeps == ("x",)
    s = lp.ops.lp_softsign
    assert s.__name__ == "lp_softsign" and s.__wrapped__ is _softsign
    y = s(lp.Tensor(X0, requires_grad=True))
    assert y.op == "lp_softsign"
    loss = lambda x: s(x).sum()  # noqa: E731
    np.testing.assert_allclose(lp.grad(loss)(X0), _softsign_grad(X0), rtol=1e-14)
    # grad of grad: -2 sign(x) / (1 + |x|)^3, through the VJP replayed on Tensors
    np.testing.assert_allclose(lp.grad(lp.grad(lambda x: s(x)))(2.0), -2 / 27, rtol=1e-14)
    tangent = lp.jvp(s, (X0,), (np.ones(3),))[1]
    assert calls and np.allclose(tangent.numpy(), _softsign_grad(X0), rtol=1e-14)
    xs = np.stack([X0, 2 * X0, -X0])
    assert np.array_equal(lp.vmap(s)(xs).numpy(), np.stack([s(x).numpy() for x in xs]))
    np.testing.assert_allclose(lp.vmap(lp.grad(loss))(xs), np.stack([_softsign_grad(x) for x in xs]), rtol=1e-14)
    assert np.array_equal(lp.jit(s)(X0).numpy(), s(X0).numpy())
    assert np.array_equal(lp.jit(lp.grad(loss))(X0), lp.grad(loss)(X0))
    check_grads(s, [X0], order=2)


def test_an_op_declared_transposed_and_one_with_keyword_inputs() -> None:
    def scaled(x: Any, scale: float = 2.0) -> tuple[Any, Any]:
        return scale * x * x, lambda g: (2 * scale * x * g, None)

    register_op("lp_scaled", scaled, jvp=TRANSPOSED)
    assert "lp_scaled" not in F.JVPS
    np.testing.assert_allclose(lp.jvp(lambda x: lp.ops.lp_scaled(x, scale=3.0), (X0,), (np.ones(3),))[1].numpy(),
                               6 * X0)
    np.testing.assert_allclose(lp.grad(lambda x: lp.ops.lp_scaled(x).sum())(X0), 4 * X0)


def test_an_op_that_refuses_vmap_says_so_and_binary_ops_unbroadcast() -> None:
    def outer_sum(x: Any, y: Any) -> tuple[Any, Any]:
        return x + y, lambda g: (lp.functional.unbroadcast(g, x), lp.functional.unbroadcast(g, y))

    register_op("lp_add", outer_sum, jvp=lambda ts, ans, x, y: ts[0] + ts[1], vmap="it keeps no batch axis")
    with pytest.raises(NotImplementedError, match="'lp_add' cannot be batched: it keeps no batch axis"):
        lp.vmap(lambda x: lp.ops.lp_add(x, 1.0))(np.ones((2, 3)))
    gx, gy = lp.grad(lambda x, y: lp.ops.lp_add(x, y).sum(), argnums=(0, 1))(np.ones((2, 3)), np.ones(3))
    assert gx.shape == (2, 3) and np.array_equal(gy, [2.0, 2.0, 2.0])


# ----- names ------------------------------------------------------------------------------------------------
def test_names_that_clash_are_refused_with_the_owner_named() -> None:
    with pytest.raises(ValueError, match="'exp' is one of LeanPass's own ops"):
        register_op("exp", _mish)
    with pytest.raises(ValueError, match="'conv2d' is one of LeanPass's own ops"):  # (a family not loaded yet)
        register_op("conv2d", _softsign, jvp=TRANSPOSED)
    with pytest.raises(ValueError, match="Python identifier"):
        register_op("my op", _mish)
    with pytest.raises(TypeError, match="fn must be a function"):
        register_op("lp_none", None)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="give jvp= too"):
        register_op("lp_vm", _mish, vmap="no")

    def other(x: Any) -> Any:
        return x

    other.__module__ = "another_plugin"
    register_op("lp_mine", _mish)
    with pytest.raises(ValueError, match=f"'lp_mine' is registered already, by {__name__}; another_plugin"):
        register_op("lp_mine", other)
    register_op("lp_mine", lambda x: 3 * x)  # the same module again (a reload): replaced
    assert lp.ops.lp_mine(1.0) == 3.0
    assert unregister_op("lp_mine").name == "lp_mine" and "lp_mine" not in F.REGISTRY
    with pytest.raises(ValueError, match="own ops, which stay"):
        unregister_op("exp")
    with pytest.raises(AttributeError, match="'exp' is one of LeanPass's own ops: call lp.exp"):
        lp.ops.exp  # noqa: B018


# ----- packages: the entry-point group leanpass.ops -------------------------------------------------------------
def _package(root: Path, dist: str, entry: str, modules: dict[str, str]) -> Path:
    """A package installed in ``root`` (its modules and a dist-info with the entry points ``entry``)."""
    info = root / f"{dist.replace('-', '_')}-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(f"[leanpass.ops]\n{entry}\n")
    for name, source in modules.items():
        (root / f"{name}.py").write_text(textwrap.dedent(source))
    return root


GOOD = """
    import numpy as np
    from leanpass.plugin_registry import register_op, TRANSPOSED

    def cube(x):
        return x ** 3, lambda g: (3 * x ** 2 * g,)

    register_op("lp_test_cube", cube, jvp=lambda ts, ans, x: 3 * x ** 2 * ts[0])
"""


def test_a_package_provides_ops_through_an_entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(_package(tmp_path, "lp-test-good", "cubes = lp_test_good", {"lp_test_good": GOOD})))
    assert "lp_test_cube" not in F.REGISTRY
    assert lp.ops.lp_test_cube(2.0).item() == 8.0  # (found on this first use)
    assert F.REGISTRY["lp_test_cube"].module == "lp_test_good"
    assert lp.grad(lambda x: lp.ops.lp_test_cube(x))(2.0) == 12.0
    pr.load_plugins()  # (again: nothing is loaded twice)
    assert ("lp-test-good", "cubes", "lp_test_good") in pr._loaded


def test_a_broken_plugin_is_named_in_a_warning_and_in_the_error_for_its_op(tmp_path: Path,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    root = _package(tmp_path / "a", "lp-test-broken", "broken = lp_test_broken",
                    {"lp_test_broken": "import numpy as np\nraise ImportError('needs lp_test_missing')\n"})
    clash = _package(tmp_path / "b", "lp-test-clash", "clash = lp_test_clash",
                     {"lp_test_clash": "from leanpass.plugin_registry import register_op\n"
                                       "register_op('exp', lambda x: x)\n"})
    absent = _package(tmp_path / "c", "lp-test-absent", "gone = lp_test_no_such_module", {})
    for path in (root, clash, absent):
        monkeypatch.syspath_prepend(str(path))
    with pytest.warns(RuntimeWarning) as caught:
        with pytest.raises(AttributeError) as err:
            lp.ops.lp_test_nothing  # noqa: B018
    said = "\n".join(str(w.message) for w in caught)
    assert "'lp-test-broken' failed to load" in said and "needs lp_test_missing" in said
    assert "'lp-test-clash' failed to load" in said and "'exp' is one of LeanPass's own ops" in said
    assert "'lp-test-absent' failed to load" in said and "lp_test_no_such_module" in said
    assert "The plugin package 'lp-test-broken' failed to load" in str(err.value)


def test_plugins_load_on_first_use_not_at_import(tmp_path: Path) -> None:
    root = _package(tmp_path, "lp-test-good", "cubes = lp_test_good", {"lp_test_good": GOOD})
    code = ("import sys, leanpass as lp\n"
            "print(any(m in sys.modules for m in ('leanpass.plugin_registry', 'leanpass.ops', 'lp_test_good')))\n"
            "print(lp.ops.lp_test_cube(3.0).item(), 'lp_test_good' in sys.modules)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(lp.__file__).parents[1]), str(root)])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "27.0", "True"]


def test_load_plugins_finds_a_package_installed_while_the_program_runs(tmp_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(AttributeError, match="'lp_test_cube' is not registered"):
        lp.ops.lp_test_cube  # noqa: B018
    _package(tmp_path, "lp-test-good", "cubes = lp_test_good", {"lp_test_good": GOOD})  # (installed now)
    pr.load_plugins()
    assert lp.ops.lp_test_cube(2.0).item() == 8.0


def test_an_op_that_takes_need_computes_only_the_cotangents_asked_for() -> None:
    asked = []

    def mul(x: Any, y: Any, need: tuple[bool, bool] = (True, True)) -> tuple[Any, Any]:
        asked.append(need)
        unb = lp.functional.unbroadcast
        return x * y, lambda g: (unb(g * y, x) if need[0] else None, unb(g * x, y) if need[1] else None)

    register_op("lp_mul", mul, jvp=lambda ts, ans, x, y: ts[0] * y + x * ts[1], need=True)
    assert "lp_mul" in F.TAKES_NEED
    assert np.array_equal(lp.grad(lambda x: lp.ops.lp_mul(x, 3.0).sum())(np.ones(2)), [3.0, 3.0])
    assert asked[-1] == (True, False)
    np.testing.assert_array_equal(lp.hessian(lambda x: lp.ops.lp_mul(x, x).sum())(np.ones(2)), 2 * np.eye(2))
    np.testing.assert_array_equal(lp.jacfwd(lambda x: lp.ops.lp_mul(x, x))(np.array([1.0, 2.0])),
                                  np.diag([2.0, 4.0]))
