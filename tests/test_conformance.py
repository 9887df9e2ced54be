"""The conformance matrix: every op, over its sample inputs, under every transform, in float64 and float32.

The rows are ``conformance_rows.ROWS`` (one per op, keyed by its name; an op without a row fails
here). For each sample of an op the cells are

=============== ====================================================================================
``grad``        the gradient of ``sum(w * op(x))``: against central differences (float64)
``grad_grad``   the gradient of ``grad . v`` (a Hessian-vector product): against differences of ``grad``
``jvp``         ``jvp(op)``: its value is eager's, its tangent against central differences
``jvp_grad``    ``jvp(grad)``: against differences of ``grad`` (forward over reverse)
``vmap``        ``vmap(op)`` over a batch: the per-example results stacked (every array argument batched,
                then only the first input; and a batch of no examples: each result's shape, with 0 in front)
``vmap_grad``   ``vmap(grad)``: the same
``vmap_jacrev`` ``vmap(jacrev(op))``: the same
``jit``         ``jit(op)``: eager's bits, at trace and at a replay with new values
``jit_grad``    ``jit(grad)``: the same
=============== ====================================================================================

in float64 (differences in float64: the derivative cells; to rounding: the vmap cells, whose loop
runs the same NumPy calls per example) and in float32 (every float result float32, the derivative
cells within float32's precision of the float64 cell at the same inputs, the vmap cells against the
float32 loop, the jit cells bit for bit). Directions and weights are zero where an input or the
output is infinite (differences are not defined there); there, the results are checked for NaN
(the rules' limits are finite). A cell a row declares inapplicable (``exempt``) must give the reason;
a transform an op's record refuses must raise a clear error naming the op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np
import pytest
from conformance_rows import CELLS, ROWS, samples_of

import leanpass as lp
from leanpass import Tensor
from leanpass import functional as F

N = 3  # examples in a vmap batch
EPS = 1e-6


def _ops() -> list[str]:
    """The names of the registered ops: every record (the families that load on first use loaded) but
    the internal ones of a transform."""
    len(F.OPS)  # (loads every family, whose records register as they load)
    return sorted(name for name, record in F.REGISTRY.items() if not record.internal)


def _record(name: str) -> Any:
    return F.REGISTRY.get(name)


def _refusal(name: str, cell: str) -> str | None:
    """The reason the op's record gives for refusing the transform of ``cell`` (None: no refusal): a string
    in its ``vmap`` field (other than ``"numpy"``) refuses the vmap cells, one in its ``jvp`` field the jvp cell."""
    record = _record(name)
    field = "vmap" if cell.startswith("vmap") else "jvp" if cell == "jvp" else None
    rule = getattr(record, field, None) if field else None
    if isinstance(rule, str) and rule != "numpy" and rule is not getattr(F, "TRANSPOSED", None):
        return rule
    return None


# ----- the rows: one per op, each with samples ---------------------------------------------------------------
def test_every_op_has_a_row_and_every_row_an_op() -> None:
    ops, rows = set(_ops()), set(ROWS)
    assert not ops - rows, f"ops without a row in tests/conformance_rows.py: {sorted(ops - rows)}"
    assert not rows - ops, f"rows naming no op: {sorted(rows - ops)}"
    for name, row in ROWS.items():
        assert samples_of(name), f"{name}: no sample inputs"
        assert (f"{name}/empty" in samples_of(name)) != bool(row.no_empty), f"{name}: an empty sample, or why not"
        for cell, reason in row.exempt.items():
            assert cell in CELLS and isinstance(reason, str) and len(reason) > 10, (name, cell, reason)


def test_the_matrix_meets_broadcasting_empty_arrays_and_infinities() -> None:
    kinds = {key.rsplit("/", 1)[-1] for name in ROWS for key in samples_of(name)}
    assert {"empty", "inf", "0d", "strided", "broadcast"} <= kinds
    broadcast = {name for name in ROWS for key, make in samples_of(name).items()
                 if len({np.shape(a) for a in make(np.random.default_rng(0)) if isinstance(a, np.ndarray)
                         and a.dtype.kind == "f"}) > 1}
    assert {"+", "*", "/", "**", "where", "maximum", "arctan2", "xlogy"} <= broadcast


# ----- one sample's functions ----------------------------------------------------------------------------------
def _value(x: Any) -> np.ndarray:
    return np.asarray(x._data if type(x) is Tensor else x)


def _f64(x: Any) -> np.ndarray:
    return np.asarray(_value(x), np.float64)


def _floats(args: tuple[Any, ...]) -> list[int]:
    return [i for i, a in enumerate(args) if isinstance(a, np.ndarray) and a.dtype.kind == "f"]


def _cast(args: tuple[Any, ...], dtype: Any) -> tuple[Any, ...]:
    return tuple(a.astype(dtype) if i in _floats(args) else a for i, a in enumerate(args))


def _axes(a: Any, inside: bool = False) -> Any:
    """vmap's axis for one argument: 0 for an array (a boolean mask inside an index is shared), else None."""
    if type(a) is tuple:
        return tuple(_axes(b, True) for b in a)
    return 0 if isinstance(a, np.ndarray) and not (inside and a.dtype == bool) else None


def _stack(parts: list[Any], axes: Any) -> Any:
    if type(axes) is tuple:
        return tuple(_stack([p[i] for p in parts], ax) for i, ax in enumerate(axes))
    return np.stack(parts) if axes == 0 else parts[0]


def _gapped(a: np.ndarray) -> np.ndarray:
    return np.repeat(a, 2, axis=-1)[..., ::2] if a.ndim else a


def _no_examples(args: Any, axes: Any) -> Any:
    """A batch of none of ``args``: each mapped array with a new axis of size 0 in front."""
    if type(axes) is tuple:
        return tuple(_no_examples(a, ax) for a, ax in zip(args, axes))
    return np.empty((0, *args.shape), args.dtype) if axes == 0 else args


class Sample:
    """One sample of one op in one dtype: the functions every cell differentiates, and the shared work."""

    def __init__(self, name: str, make: Callable[[np.random.Generator], tuple[Any, ...]], dtype: Any,
                 strided: bool = False) -> None:
        self.name, self.dtype = name, dtype
        # float inputs rounded to float32 values, so that the float64 cell is the float32 cell's reference
        self.examples = [_cast(_cast(make(np.random.default_rng(seed)), np.float32), dtype)
                         for seed in range(N + 1)]
        if strided:  # the same values in views with gaps between elements (no fast path for contiguous arrays)
            self.examples = [tuple(_gapped(a) if i in _floats(e) else a for i, a in enumerate(e))
                             for e in self.examples]
        self.args = self.examples[0]
        self.diff = _floats(self.args)
        self.argnums = tuple(range(len(self.diff)))
        self.xs = [self.args[i] for i in self.diff]
        out = self.call(*self.args)
        self.out = _value(out)
        rng = np.random.default_rng(1234)
        finite_out = np.isfinite(self.out) if self.out.dtype.kind == "f" else np.ones(self.out.shape, bool)
        self.w = (rng.standard_normal(self.out.shape) * finite_out).astype(self.out.dtype)
        self.vs = [(rng.standard_normal(x.shape) * np.isfinite(x)).astype(dtype) for x in self.xs]
        self.finite_out = finite_out

    def call(self, *args: Any) -> Any:
        return lp.apply(F.OPS[self.name], self.name, *args)

    def full(self, xs: Any, args: tuple[Any, ...] | None = None) -> list[Any]:
        full = list(self.args if args is None else args)
        for i, x in zip(self.diff, xs):
            full[i] = x
        return full

    def f(self, *xs: Any) -> Any:
        """The op of its float inputs, the other arguments constants."""
        return self.call(*self.full(xs))

    def weighted(self, out: Any) -> Any:
        """``sum(w * out)``, leaving out the infinite entries of the output (``0 * inf`` is NaN)."""
        if not np.all(self.finite_out):
            out = lp.where(self.finite_out, out, 0.0)
        return (out * self.w).sum()

    def loss(self, *xs: Any) -> Any:
        return self.weighted(self.f(*xs))

    def loss_all(self, *args: Any) -> Any:
        """The loss of all arguments (vmap maps integer and boolean arrays too)."""
        return self.weighted(self.call(*args))

    def grad(self, *xs: Any) -> Any:
        return lp.grad(self.loss, argnums=self.argnums)(*xs)

    def hvp(self, *xs: Any) -> Any:
        vs = self.vs
        return lp.grad(lambda *ys: sum((g * v).sum() for g, v in zip(self.grad(*ys), vs)), argnums=self.argnums)(*xs)

    def shifted(self, sign: float) -> list[Any]:
        return [Tensor(x.astype(np.float64) + sign * EPS * v.astype(np.float64)) for x, v in zip(self.xs, self.vs)]


def _close(got: Any, want: Any, rtol: float, what: str) -> None:
    got, want = _f64(got), _f64(want)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    finite = want[np.isfinite(want)]
    scale = max(1.0, float(np.max(np.abs(finite), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale, equal_nan=True, err_msg=what)


def _same(a: Any, b: Any, what: str) -> None:
    la, lb = lp.tree_flatten(a)[0], lp.tree_flatten(b)[0]
    assert len(la) == len(lb), what
    for x, y in zip(la, lb):
        x, y = _value(x), _value(y)
        assert x.dtype == y.dtype and x.shape == y.shape, f"{what}: {x.dtype}{x.shape} vs {y.dtype}{y.shape}"
        if not np.array_equal(x, y, equal_nan=True):
            bad = np.flatnonzero(~((x == y) | (np.isnan(x) & np.isnan(y))))[:3]
            raise AssertionError(f"{what}: not bit for bit at {bad}: {x.ravel()[bad]} vs {y.ravel()[bad]}")


def _dtype_kept(result: Any, dtype: Any, what: str) -> None:
    for leaf in lp.tree_flatten(result)[0]:
        value = _value(leaf)
        assert value.dtype.kind != "f" or value.dtype == dtype, f"{what}: {value.dtype}, want {np.dtype(dtype)}"


def _tuple(g: Any) -> tuple[Any, ...]:
    return g if type(g) is tuple else (g,)


# ----- the cells -------------------------------------------------------------------------------------------------
@contextmanager
def _cell(name: str) -> Iterator[None]:
    """Name the cell in any failure inside it."""
    try:
        yield
    except Exception as e:  # noqa: BLE001 (a failure of any kind is this cell's)
        raise AssertionError(f"cell {name}: {type(e).__name__}: {e}") from e


def _derivative_cells(s: Sample, cells: set[str]) -> dict[str, Any]:
    """grad, grad_grad, jvp, jvp_grad: their results, checked against differences in float64."""
    res: dict[str, Any] = {}
    single = s.out.dtype == np.float32 and s.dtype == np.float64  # (an op that casts to float32)
    fd_rtol = 1e-3 if single else 1e-5
    eps = 1e-3 if single else EPS
    plus, minus = s.shifted(eps / EPS), s.shifted(-eps / EPS)
    if cells & {"grad", "grad_grad", "jvp_grad"}:
        with _cell("grad"):
            res["grad"] = g = _tuple(s.grad(*s.xs))
            for gi, x in zip(g, s.xs):
                assert _value(gi).shape == x.shape, f"shape {_value(gi).shape}, want {x.shape}"
            if s.dtype == np.float64 and "grad" in cells:
                numeric = (_f64(s.loss(*plus)) - _f64(s.loss(*minus))) / (2 * eps)
                analytic = sum(float(np.sum(_f64(gi) * v)) for gi, v in zip(g, s.vs))
                _close(analytic, numeric, fd_rtol, "grad . v against differences of the loss")
            if s.dtype == np.float64:
                dg = [(_f64(a) - _f64(b)) / (2 * eps) for a, b in zip(_tuple(s.grad(*plus)), _tuple(s.grad(*minus)))]
    if "grad_grad" in cells:
        with _cell("grad_grad"):
            res["grad_grad"] = h = _tuple(s.hvp(*s.xs))
            if s.dtype == np.float64:  # grad (grad . v) = H v = the change of grad along v
                for hi, d in zip(h, dg):
                    _close(hi, d, fd_rtol * 10, "grad of grad . v against differences of grad")
    if "jvp" in cells:
        with _cell("jvp"):
            out, t = lp.jvp(s.f, s.xs, s.vs)
            _same(out, s.out, "jvp's value against eager")
            assert _value(t).shape == s.out.shape, f"tangent shape {_value(t).shape}, want {s.out.shape}"
            res["jvp"] = t
            if s.dtype == np.float64:
                with np.errstate(invalid="ignore"):  # (inf - inf where the output is infinite: left out below)
                    d = (_f64(s.f(*plus)) - _f64(s.f(*minus))) / (2 * eps)
                _close(np.where(s.finite_out, _f64(t), 0.0), np.where(s.finite_out, d, 0.0), fd_rtol,
                       "jvp against differences of the op")
    if "jvp_grad" in cells:
        with _cell("jvp_grad"):
            res["jvp_grad"] = jg = _tuple(lp.jvp(s.grad, s.xs, s.vs)[1])
            if s.dtype == np.float64:
                for a, d in zip(jg, dg):
                    _close(a, d, fd_rtol * 10, "jvp of grad against differences of grad")
    return res


def _vmap_cells(s: Sample, cells: set[str]) -> None:
    """vmap, vmap_grad, vmap_jacrev: equal to the per-example results stacked. Twice: every array argument
    batched, and only the first float input (the others shared: batched meets unbatched in every rule)."""
    rtol = 1e-12 if s.dtype == np.float64 else 1e-5
    fns: dict[str, Callable[..., Any]] = {
        "vmap": s.call,
        "vmap_grad": lp.grad(s.loss_all, argnums=tuple(s.diff)),
        "vmap_jacrev": lp.jacrev(s.call, argnums=tuple(s.diff)),
    }
    first = s.diff[0]
    every = (s.examples[:N], tuple(_axes(a) for a in s.args))
    one = ([tuple(e[i] if i == first else a for i, a in enumerate(s.args)) for e in s.examples[:N]],
           tuple(0 if i == first else None for i in range(len(s.args))))
    for cell in ("vmap", "vmap_grad", "vmap_jacrev"):
        if cell not in cells:
            continue
        with _cell(f"{cell} (a batch of no examples)"):  # each result: shape (0, *its shape), its dtype
            axes = every[1]
            got = lp.vmap(fns[cell], in_axes=axes)(*_no_examples(s.args, axes))
            want = lp.tree_flatten(fns[cell](*s.args))[0]
            for g, w in zip(lp.tree_flatten(got)[0], want, strict=True):
                g, w = _value(g), _value(w)
                assert g.shape == (0, *w.shape) and g.dtype == w.dtype, f"{g.dtype}{g.shape}, want {w.dtype}{w.shape}"
        for batched, (examples, axes) in (("every array", every), ("the first input", one)):
            with _cell(f"{cell} (batched: {batched})"):
                fn = fns[cell]
                batch = tuple(_stack([e[i] for e in examples], ax) for i, ax in enumerate(axes))
                got = lp.vmap(fn, in_axes=axes)(*batch)
                loop = [fn(*e) for e in examples]
                gl, wl = lp.tree_flatten(got)[0], [lp.tree_flatten(w)[0] for w in loop]
                assert len(gl) == len(wl[0]), f"{len(gl)} results, want {len(wl[0])}"
                for k, leaf in enumerate(gl):
                    want = np.stack([_value(w[k]) for w in wl])
                    assert _value(leaf).dtype == want.dtype, f"dtype {_value(leaf).dtype}, want {want.dtype}"
                    _close(leaf, want, rtol, "against the loop over the batch")


def _jit_cells(s: Sample, cells: set[str]) -> None:
    """jit, jit_grad: eager's bits at the trace and at a replay with the next example's values."""
    again = [s.examples[N][i] for i in s.diff]
    for cell, fn in (("jit", s.f), ("jit_grad", lambda *xs: s.grad(*xs))):
        if cell not in cells:
            continue
        with _cell(cell):
            jitted = lp.jit(fn)
            _same(jitted(*s.xs), fn(*s.xs), "at its trace against eager")
            _same(jitted(*again), fn(*again), "at a replay against eager")
            assert jitted.trace_count == 1, f"traced {jitted.trace_count} times (a value left the trace)"


def _refused(name: str, s: Sample, cell: str, reason: str) -> None:
    try:
        (_vmap_cells if cell.startswith("vmap") else _derivative_cells)(s, {cell})
    except AssertionError as e:
        assert name in str(e), f"{cell}: the refusal does not name the op {name!r}: {e}"
        return
    raise AssertionError(f"{cell}: the record refuses it ({reason}), but it computed")


def _run(name: str, key: str, make: Callable[..., tuple[Any, ...]], dtype: Any, ref: dict[str, Any] | None,
         cells: set[str], rtol32: float) -> dict[str, Any]:
    s = Sample(name, make, dtype, strided=key.endswith("/strided"))
    for cell in sorted(cells):
        reason = _refusal(name, cell)
        if reason is not None:
            _refused(name, s, cell, reason)
            cells = cells - {cell}
    res = {"value": s.out, **_derivative_cells(s, cells)}
    _vmap_cells(s, cells)
    _jit_cells(s, cells)
    if dtype == np.float32:
        _dtype_kept(s.out, np.float32, "the op's value")
        for cell, got in res.items():
            with _cell(cell):
                _dtype_kept(got, np.float32, "dtype")
            assert ref is not None
            for a, b in zip(lp.tree_flatten(got)[0], lp.tree_flatten(ref[cell])[0]):
                with _cell(cell):
                    _close(a, b, rtol32, "float32 against float64 at the same inputs")
    if any(np.isinf(x).any() for x in s.xs) or not np.all(s.finite_out):
        for cell, got in res.items():  # at infinities, the rules' limits: no NaN the op's value does not have
            for leaf in lp.tree_flatten(got)[0]:
                assert not np.isnan(_f64(leaf)).any() or np.isnan(_f64(s.out)).any(), f"{cell}: NaN at {key}"
    return res


CASES = [(name, key) for name in sorted(ROWS) for key in sorted(samples_of(name))]


@pytest.mark.parametrize(("name", "key"), CASES, ids=[k for _, k in CASES])
def test_conformance(name: str, key: str) -> None:
    row = ROWS[name]
    make = samples_of(name)[key]
    exempt = set(row.exempt) | set(row.exempt_samples.get(key, {}))
    cells = set(CELLS) - exempt
    failures = []
    ref: dict[str, Any] | None = None
    for dtype in (np.float64, np.float32):
        try:
            res = _run(name, key, make, dtype, ref, cells, row.rtol32)
        except Exception as e:  # noqa: BLE001 (report the op, sample and dtype of any failure)
            failures.append(f"{key} [{np.dtype(dtype).name}]: {type(e).__name__}: {e}")
            break
        ref = res
    assert not failures, "\n".join(failures)


def test_a_transform_a_record_refuses_must_raise_naming_the_op(monkeypatch: pytest.MonkeyPatch) -> None:
    # The matrix's own check of a refusal: computing anyway fails it, a clear error naming the op passes.
    make = samples_of("sin")["sin"]
    for field, transform in (("vmap", "vmap"), ("jvp", "jvp")):
        record = type("Op", (), {field: "sin cannot do this (for this test)"})()
        with monkeypatch.context() as m:
            m.setattr(F, "REGISTRY", {"sin": record}, raising=False)
            with pytest.raises(AssertionError, match="the record refuses it"):
                _run("sin", "sin", make, np.float64, None, set(CELLS), 1e-4)

            def refuse(*args: Any, **kwargs: Any) -> Any:
                raise ValueError("the op 'sin' cannot do this")

            m.setattr(lp, transform, refuse)
            _run("sin", "sin", make, np.float64, None, set(CELLS) - {"jvp_grad"}, 1e-4)
