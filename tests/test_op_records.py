"""The op records (``functional.REGISTRY``): one per op, and the tables derived from them.

Every op of ``functional.OPS`` has a record; ``OPS``, ``JVPS`` and ``TAKES_NEED`` agree with the
records; the hand-written manifest of the families that load on first use names exactly their
records; ``need`` matches each function's signature; what a record says its VJP keeps alive
(``keeps``) is what the VJP really references, over every op's samples; a record cannot be
registered twice or changed; and a declared refusal (``vmap``) raises a clear error.
"""

from __future__ import annotations

import functools
import inspect
import subprocess
import sys
import types
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from op_samples import every_sample, op_of

import leanpass as lp
from conftest import forget_ops
from leanpass import functional as F
from leanpass.core.tensor import CustomVJP
from leanpass.functional import _registry
from leanpass.testing import check_grads
from leanpass.transforms.vmap import batching  # noqa: F401 (vmap's own ops register as it loads)

F.OPS.keys()  # (the families that load on first use register as they load: load them all)
RECORDS = {name: rec for name, rec in F.REGISTRY.items() if not rec.internal}
SAMPLE_KEYS: dict[str, list[str]] = {}
for _key in every_sample():
    SAMPLE_KEYS.setdefault(op_of(_key), []).append(_key)


# ----- the derived tables ------------------------------------------------------------------------------
def test_every_op_has_a_record_and_ops_is_their_functions() -> None:
    assert set(F.OPS) == set(RECORDS)
    for name, rec in RECORDS.items():
        assert rec.name == name and F.OPS[name] is rec.fn, name


def test_jvps_and_takes_need_are_derived_from_the_records() -> None:
    assert dict(F.JVPS.items()) == {n: r.jvp for n, r in RECORDS.items() if r.jvp is not F.TRANSPOSED}
    assert F.TAKES_NEED == {n for n, r in RECORDS.items() if r.need}
    internal = {n for n, r in F.REGISTRY.items() if r.internal}
    assert {"vmap_batch", "vmap_unbatch", "vmap_sum", "vmap_spread"} <= internal
    assert not internal & (set(F.OPS) | set(F.JVPS) | F.TAKES_NEED)


def test_the_lazy_manifest_matches_the_records() -> None:
    for module, names in F._LAZY_OPS.items():
        mine = {n for n, r in RECORDS.items() if r.module == f"leanpass.functional.{module}"}
        assert mine == set(names), module
    assert all(r.module.startswith("leanpass.functional.") for r in RECORDS.values())


def test_import_registers_no_family_that_loads_on_first_use() -> None:
    code = (
        "import sys, leanpass as lp\n"
        "from leanpass import functional as F\n"
        "print(sorted({r.module for r in F.REGISTRY.values() if r.module.rpartition('.')[2] in F._LAZY_OPS}))\n"
        "print('conv2d' in F.TAKES_NEED, 'conv2d' in F.JVPS, 'leanpass.functional.conv' in sys.modules)\n"
        "try:\n"
        "    lp.apply(lambda t: (t, lambda g: (g,)), 'conv2d', lp.Tensor([1.0], requires_grad=True))\n"
        "except ValueError as e:\n"
        "    print('refused' if 'built-in op' in str(e) else e, F.REGISTRY['conv2d'].fn is F.OPS['conv2d'])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    # (TAKES_NEED, JVPS and apply load the family to answer for one of its names)
    assert out.split("\n")[:3] == ["[]", "True True True", "refused True"]


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_need_matches_the_functions_signature(name: str) -> None:
    rec = RECORDS[name]
    assert ("need" in inspect.signature(rec.fn).parameters) == rec.need


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_the_fields_are_well_formed(name: str) -> None:
    rec = RECORDS[name]
    assert rec.jvp is F.TRANSPOSED or callable(rec.jvp)
    assert rec.vmap == "numpy"  # (no built-in op refuses vmap)
    assert isinstance(rec.keeps, tuple) and all(isinstance(k, str) for k in rec.keeps)
    assert all(isinstance(f, np.ufunc) or f.__module__.startswith("numpy") for f in rec.numpy), rec.numpy


UFUNC_OPS = sorted((name, f.__name__) for name, rec in RECORDS.items() for f in rec.numpy if isinstance(f, np.ufunc))


@pytest.mark.parametrize(("name", "ufunc"), UFUNC_OPS)
def test_each_ufunc_of_a_record_dispatches_to_its_op(name: str, ufunc: str) -> None:
    args = every_sample()[SAMPLE_KEYS[name][0]](np.random.default_rng(0))
    f = getattr(np, ufunc)
    out = f(*(lp.Tensor(a, requires_grad=True) for a in args[:f.nin]))
    assert type(out) is lp.Tensor and out._op == name
    np.testing.assert_allclose(out.detach().numpy(), f(*args[:f.nin]))


# ----- registering -------------------------------------------------------------------------------------
def _twice(x: Any) -> tuple[Any, Any]:
    return 2 * x, lambda g: (2 * g,)


@pytest.fixture
def scratch_names() -> Any:
    """Names registered by a test, unregistered after it (from every table)."""
    names: list[str] = []
    yield names
    forget_ops(names)


def test_registering_a_name_twice_raises() -> None:
    before = dict(F.REGISTRY)
    with pytest.raises(ValueError, match="'exp' is registered already"):
        F.op("exp", _twice, jvp=F.TRANSPOSED)
    assert F.REGISTRY == before and F.OPS["exp"] is F.exp


def test_a_record_needs_a_jvp_and_is_read_only(scratch_names: list[str]) -> None:
    with pytest.raises(TypeError):
        F.op("test_no_jvp", _twice)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="jvp must be a rule"):
        F.op("test_no_jvp", _twice, jvp=None)
    assert "test_no_jvp" not in F.REGISTRY
    with pytest.raises(AttributeError, match="read-only"):
        F.REGISTRY["exp"].jvp = F.TRANSPOSED
    with pytest.raises(AttributeError, match="read-only"):
        del F.REGISTRY["exp"].fn
    assert F.REGISTRY["exp"].jvp is F.JVPS["exp"]


def test_a_registered_op_joins_the_tables_and_apply_takes_it(scratch_names: list[str]) -> None:
    scratch_names.append("test_twice")
    rec = F.op("test_twice", _twice, jvp=F.TRANSPOSED, keeps=())
    assert rec.module == __name__ and F.OPS["test_twice"] is _twice and "test_twice" not in F.JVPS
    x = np.array([1.0, 3.0])
    y = lp.apply(_twice, "test_twice", lp.Tensor(x, requires_grad=True))
    assert y._op == "test_twice" and type(y._vjp) is not CustomVJP
    with pytest.raises(ValueError, match="name of an op registered by test_op_records, whose function is another"):
        lp.apply(lambda t: (t, lambda g: (g,)), "test_twice", x)
    # jvp=TRANSPOSED: forward mode transposes the VJP (2 t), and a replayed backward pass takes the record's fn
    _, t = lp.jvp(lambda a: lp.apply(_twice, "test_twice", a), (x,), (np.array([1.0, -1.0]),))
    np.testing.assert_allclose(t, [2.0, -2.0])
    check_grads(lambda a: lp.apply(_twice, "test_twice", a) ** 2, [x], order=2)


def test_a_declared_vmap_refusal_raises_naming_the_op(scratch_names: list[str]) -> None:
    scratch_names.append("test_unbatched")
    F.op("test_unbatched", _twice, jvp=lambda ts, ans, x: 2 * ts[0], vmap="it has no batching rule (a test op)",
         internal=True)

    def f(a: Any) -> Any:
        return lp.apply(_twice, "test_unbatched", a).sum()

    x = np.ones((3, 2))
    assert float(f(lp.Tensor(x))) == 12.0  # eager: the refusal is vmap's only
    np.testing.assert_allclose(lp.grad(f)(x), 2 * x)
    with pytest.raises(NotImplementedError, match="vmap: op 'test_unbatched' cannot be batched: it has no batching"):
        lp.vmap(f)(x)
    with pytest.raises(NotImplementedError, match="test_unbatched"):
        lp.vmap(lp.grad(f))(x)


# ----- keeps: what the VJP references ------------------------------------------------------------------
def _referents(obj: Any, depth: int, out: list[Any], seen: set[int]) -> list[Any]:
    """The arrays ``obj`` keeps alive, through partials, bound methods, closure cells and containers."""
    if id(obj) in seen:
        return out
    seen.add(id(obj))
    if isinstance(obj, (np.ndarray, np.generic)):
        out.append(obj)
    elif depth == 0:
        pass
    elif isinstance(obj, functools.partial):
        for o in (obj.func, *obj.args, *obj.keywords.values()):
            _referents(o, depth - 1, out, seen)
    elif isinstance(obj, types.MethodType):
        _referents(obj.__self__, depth - 1, out, seen)
        _referents(obj.__func__, depth - 1, out, seen)
    elif isinstance(obj, types.FunctionType):
        for cell in obj.__closure__ or ():
            try:
                _referents(cell.cell_contents, depth - 1, out, seen)
            except ValueError:  # (an empty cell)
                pass
    elif isinstance(obj, (tuple, list)):
        for o in obj:
            _referents(o, depth - 1, out, seen)
    elif isinstance(obj, dict):
        for o in obj.values():
            _referents(o, depth - 1, out, seen)
    return out


def _root(a: Any) -> Any:
    while isinstance(a, np.ndarray) and a.base is not None:
        a = a.base
    return a


def _parameters(fn: Callable[..., Any], n: int) -> list[str]:
    names: list[str] = []
    for p in inspect.signature(fn).parameters.values():
        if p.kind is p.VAR_POSITIONAL:
            names += [p.name] * (n - len(names))
            break
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            names.append(p.name)
    return names[:n]


def kept(rec: _registry.Op, args: tuple[Any, ...]) -> tuple[set[str], set[str]]:
    """What ``rec``'s VJP keeps alive on ``args`` (the names of ``fn``'s parameters, ``"ans"``, ``"work"``
    for an array of its own; a view counts as its base), and the names of the inputs that are arrays."""
    names = _parameters(rec.fn, len(args))
    if rec.need:
        ans, vjp = rec.fn(*args, need=tuple(isinstance(a, np.ndarray) for a in args))
    else:
        ans, vjp = rec.fn(*args)
    inputs = [(name, v) for name, a in zip(names, args) for v in (a if isinstance(a, (list, tuple)) else (a,))]
    roles = set()
    for a in _referents(vjp, 8, [], set()):
        role = "ans" if a is ans else next((name for name, v in inputs if a is v), None)
        role = role or next((name for name, v in inputs if isinstance(v, np.ndarray) and _root(a) is _root(v)), None)
        if role is None and isinstance(ans, np.ndarray) and _root(a) is _root(ans):
            role = "ans"
        roles.add(role or "work")
    return roles, {name for name, v in inputs if isinstance(v, np.ndarray)}


@pytest.mark.parametrize("name", sorted(RECORDS))
def test_keeps_is_what_the_vjp_references(name: str) -> None:
    rec = RECORDS[name]
    assert name in SAMPLE_KEYS, f"{name}: no samples (tests/op_samples*.py)"
    found: set[str] = set()
    arrays: set[str] = set()
    for key in SAMPLE_KEYS[name]:
        for seed in range(3):
            roles, inputs = kept(rec, every_sample()[key](np.random.default_rng(seed)))
            assert roles <= set(rec.keeps), f"{key}: the VJP keeps {sorted(roles - set(rec.keeps))} undeclared"
            found |= roles
            arrays |= inputs
    checked = {k for k in rec.keeps if k in arrays or k in ("ans", "work")}
    assert checked <= found, f"{name}: keeps declares {sorted(checked - found)}, which no sample's VJP references"


def test_the_keeps_check_sees_through_partials_closures_and_views() -> None:
    def fn(x: Any, y: Any) -> tuple[Any, Any]:
        ans = x * y
        view = x[1:]
        return ans, functools.partial(lambda a, b, g: (g * a, g), np.ones(3) + y, (view,))

    rec = _registry.Op("t", fn, F.TRANSPOSED, False, ("y",), (), "numpy", __name__, True)
    roles, inputs = kept(rec, (np.arange(3.0), np.ones(3)))
    assert roles == {"x", "work"} and inputs == {"x", "y"}
