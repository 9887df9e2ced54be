"""Checking gradients: VJPs against central finite differences, to any order.

``check_grads(f, args, order=2)`` picks random directions ``v`` for the inputs and ``u`` for
the output and compares ``u . (f(x + eps v) - f(x - eps v)) / (2 eps)`` with ``vjp(u) . v``,
in float64. For ``order=2`` it then checks the function ``x -> vjp(f, x)(u)`` the same way,
which exercises the differentiable (replayed) backward pass.

``check_op(op)`` checks an op's VJP, JVP, batching and jit over inputs that hypothesis draws (an
optional dependency: the ``test`` extra), from the strategies defined here (``shapes``,
``broadcastable_shapes``, ``float_dtypes``, ``arrays``, ``op_inputs``), which are yours for property
tests of your own (docs/writing-ops.md).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .core.tensor import Tensor
from .core.tree import tree_flatten
from .transforms.reverse_mode import vjp

__all__ = ["check_grads", "check_op", "shapes", "broadcastable_shapes", "float_dtypes", "arrays", "op_inputs"]


def _to_f64(x: Any) -> np.ndarray:
    return np.array(x._data if type(x) is Tensor else x, dtype=np.float64)


def _flat(out: Any) -> np.ndarray:
    leaves, _ = tree_flatten(out)
    return np.concatenate([np.ravel(_to_f64(leaf)) for leaf in leaves]) if leaves else np.zeros(0)


def check_grads(
    f: Callable[..., Any],
    args: Sequence[Any],
    order: int = 2,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
    seed: int = 0,
) -> None:
    """Raise ``AssertionError`` unless ``f``'s VJPs up to ``order`` match finite differences.

    ``args`` are arrays (or floats); every one is differentiated. ``f`` may return a Tensor or a
    pytree of Tensors.

    >>> import leanpass as lp
    >>> check_grads(lambda x, y: lp.sigmoid(x * y).sum(), [np.array([0.5, -1.0]), np.array(2.0)])
    """
    xs = [_to_f64(a) for a in args]
    rng = np.random.default_rng(seed)
    out, pull = vjp(f, *xs)
    out_leaves, out_def = tree_flatten(out)
    us = [rng.standard_normal(np.shape(_to_f64(o))) for o in out_leaves]
    u_tree = _unflatten_like(out_def, us)
    vs = [rng.standard_normal(x.shape) for x in xs]
    grads = pull(u_tree)
    for i, (g, x) in enumerate(zip(grads, xs)):
        if np.shape(_to_f64(g)) != x.shape:  # a wrong shape could hide in the broadcast product below
            raise AssertionError(
                f"check_grads: the gradient of argument {i} has shape {np.shape(_to_f64(g))}, but the "
                f"argument has shape {x.shape} (order {order} remaining)"
            )
    analytic = sum(float(np.sum(_to_f64(g) * v)) for g, v in zip(grads, vs))
    u_flat = np.concatenate([u.ravel() for u in us]) if us else np.zeros(0)
    plus = _flat(f(*[Tensor(x + eps * v) for x, v in zip(xs, vs)]))
    minus = _flat(f(*[Tensor(x - eps * v) for x, v in zip(xs, vs)]))
    numeric = float(np.dot(u_flat, (plus - minus) / (2 * eps)))
    if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
        raise AssertionError(
            f"check_grads: VJP disagrees with finite differences (order {order} remaining): "
            f"analytic {analytic!r} vs numeric {numeric!r}"
        )
    if order > 1:

        def pulled(*ys: Any) -> Any:
            return vjp(f, *ys)[1](u_tree)

        check_grads(pulled, xs, order - 1, eps, rtol, atol, seed + 1)


def _unflatten_like(treedef: Any, leaves: list[np.ndarray]) -> Any:
    from .core.tree import tree_unflatten

    return tree_unflatten(treedef, leaves)


# ----- sample inputs for the convolution ops (for tests that walk functional.OPS) ------------------------
def _conv_samples() -> dict[str, Callable[[], tuple[Any, ...]]]:
    """``{op name: () -> args}``: small float64 inputs for each op of ``functional.conv``, ``pooling``,
    ``padding`` and ``norms``, so a test can call ``functional.OPS[name](*args)`` under any transform.

    >>> from leanpass import functional as F
    >>> sorted(CONV_SAMPLES) == sorted(n for n in CONV_SAMPLES if n in F.OPS)
    True
    >>> F.OPS["conv2d"](*CONV_SAMPLES["conv2d"]())[0].shape
    (2, 4, 2, 1)
    """
    def r(*shape: int) -> np.ndarray:
        return np.random.default_rng(sum(shape)).standard_normal(shape)

    pads = ((1, 0), (0, 1))
    return {
        "conv2d": lambda: (r(2, 4, 5, 4), r(4, 2, 3, 3), r(4), (2, 1), pads, (1, 2), 2),
        "conv_transpose_input": lambda: (r(2, 4, 2, 1), r(4, 2, 3, 3), (5, 4), (2, 1), pads, (1, 2), 2),
        "conv2d_weight": lambda: (r(2, 4, 5, 4), r(2, 4, 2, 1), (4, 2, 3, 3), (2, 1), pads, (1, 2), 2),
        "conv_transpose2d": lambda: (r(2, 4, 3, 3), r(4, 1, 3, 2), r(2), 2, 1, 1, 1, 2),
        "conv1d": lambda: (r(2, 2, 7), r(3, 2, 3), r(3), 2, 1, 1, 1),
        "max_pool2d": lambda: (r(2, 3, 5, 4), 2, 1, 1, 1),
        "max_pool1d": lambda: (r(2, 3, 6), 2, None, 0, 1),
        "avg_pool2d": lambda: (r(2, 3, 5, 4), 3, 2, 1),
        "avg_pool1d": lambda: (r(2, 3, 6), 2, None, 0),
        "pad": lambda: (r(3, 4), ((1, 2), (2, 0)), "reflect", 0),
        "batch_norm": lambda: (r(4, 3, 2), r(3), r(3), 1, 1e-5),
        "group_norm": lambda: (r(2, 4, 3), 2, r(4), r(4), 1e-5),
        "layer_norm": lambda: (r(2, 3, 4), r(4), r(4), (4,), 1e-5),
    }


CONV_SAMPLES = _conv_samples()


# ----- property tests of ops: hypothesis strategies and check_op ---------------------------------------------
def _hypothesis() -> Any:
    """hypothesis and its NumPy strategies, or a clear error naming the optional extra."""
    try:
        import hypothesis
        import hypothesis.extra.numpy as hnp
        from hypothesis import strategies as st
    except ImportError as e:
        raise ImportError(
            "leanpass.testing's strategies and check_op draw inputs with hypothesis, which is an optional "
            "dependency: pip install hypothesis (or pip install -e '.[test]' in a clone). check_op also runs "
            "without it on inputs you give: check_op(op, examples=[(x,), ...])."
        ) from e
    return hypothesis, hnp, st


def shapes(min_dims: int = 0, max_dims: int = 3, min_side: int = 1, max_side: int = 4) -> Any:
    """A hypothesis strategy of array shapes (scalars ``()`` included when ``min_dims`` is 0).

    >>> from hypothesis import given
    >>> @given(shapes(max_dims=2))
    ... def test(shape):
    ...     assert len(shape) <= 2
    >>> test()
    """
    _, hnp, _ = _hypothesis()
    return hnp.array_shapes(min_dims=min_dims, max_dims=max_dims, min_side=min_side, max_side=max_side)


def broadcastable_shapes(num_shapes: int = 2, min_dims: int = 0, max_dims: int = 3, min_side: int = 1,
                         max_side: int = 4) -> Any:
    """A hypothesis strategy of ``num_shapes`` shapes that broadcast together (a tuple of shapes;
    sides of 1, missing leading axes and scalars included).

    >>> from hypothesis import given
    >>> @given(broadcastable_shapes(3))
    ... def test(shapes):
    ...     np.broadcast_shapes(*shapes)
    >>> test()
    """
    _, hnp, _ = _hypothesis()
    return hnp.mutually_broadcastable_shapes(num_shapes=num_shapes, min_dims=min_dims, max_dims=max_dims,
                                             min_side=min_side, max_side=max_side).map(lambda s: s.input_shapes)


def float_dtypes() -> Any:
    """A hypothesis strategy of LeanPass's float dtypes (float32 and float64).

    >>> from hypothesis import given
    >>> @given(float_dtypes())
    ... def test(dtype):
    ...     assert np.dtype(dtype).kind == "f"
    >>> test()
    """
    _, _, st = _hypothesis()
    return st.sampled_from([np.dtype(np.float32), np.dtype(np.float64)])


Domain = tuple[float, float]


def arrays(shape: Any, dtype: Any = np.float64, domain: Domain = (-3.0, 3.0), margin: float = 0.01,
           avoid: Sequence[float] = ()) -> Any:
    """A hypothesis strategy of arrays of ``shape`` (a shape or a strategy of shapes) and ``dtype``
    with finite values inside an op's domain: in ``[lo + margin, hi - margin]`` for ``domain=(lo,
    hi)``, and at least ``margin`` away from each point of ``avoid`` (a kink, a pole), so that finite
    differences of width below ``margin`` stay where the op is smooth.

    >>> from hypothesis import given
    >>> @given(arrays(shapes(), domain=(0.0, 5.0), avoid=(1.0,)))
    ... def test(x):
    ...     assert np.all(x >= 0.01) and np.all(np.abs(x - 1.0) >= 0.01)
    >>> test()
    """
    _, hnp, st = _hypothesis()
    lo, hi = float(domain[0]) + margin, float(domain[1]) - margin
    if not lo < hi:
        raise ValueError(f"arrays: the domain {domain} is empty with a margin of {margin}")
    for p in avoid:
        if not lo <= p <= hi:
            raise ValueError(f"arrays: the point {p} to avoid is outside the domain {domain}")
    elements = st.floats(lo, hi, allow_nan=False, allow_infinity=False)
    shape_strategy = shape if isinstance(shape, st.SearchStrategy) else st.just(tuple(shape))
    return shape_strategy.flatmap(lambda s: hnp.arrays(np.float64, s, elements=elements)).map(
        lambda x: _away(x, lo, hi, margin, avoid).astype(dtype))


def _away(x: np.ndarray, lo: float, hi: float, margin: float, avoid: Sequence[float]) -> np.ndarray:
    """``x`` (inside ``[lo, hi]``) moved at least ``margin`` off each point of ``avoid``, staying inside."""
    for p in sorted(avoid):
        near = np.abs(x - p) < margin
        x = np.where(near, np.where(((x >= p) & (p + margin <= hi)) | (p - margin < lo), p + margin, p - margin), x)
    return x


def _domains(domain: Domain | Sequence[Domain], nargs: int) -> list[Domain]:
    out = [tuple(domain)] * nargs if np.ndim(domain) == 1 else [tuple(d) for d in domain]  # type: ignore[arg-type]
    if len(out) != nargs:
        raise ValueError(f"{len(out)} domains for {nargs} inputs")
    return out  # type: ignore[return-value]


def op_inputs(nargs: int = 1, domain: Domain | Sequence[Domain] = (-3.0, 3.0), dtype: Any = np.float64,
              broadcast: bool = True, min_dims: int = 0, max_dims: int = 3, max_side: int = 4, margin: float = 0.01,
              avoid: Sequence[float] = ()) -> Any:
    """A hypothesis strategy of the inputs of an op of ``nargs`` arrays: a tuple of arrays whose shapes
    broadcast together (all one shape with ``broadcast=False``), each inside its ``domain`` (one
    ``(lo, hi)`` for all, or one per input). See ``arrays`` for ``margin`` and ``avoid``.

    >>> from hypothesis import given
    >>> @given(op_inputs(2, domain=[(0.0, 2.0), (-1.0, 1.0)]))
    ... def test(xs):
    ...     x, y = xs
    ...     assert np.all(x > 0) and np.broadcast_shapes(x.shape, y.shape) is not None
    >>> test()
    """
    _, _, st = _hypothesis()
    domains = _domains(domain, nargs)
    if broadcast:
        shaped = broadcastable_shapes(nargs, min_dims=min_dims, max_dims=max_dims, max_side=max_side)
    else:
        shaped = shapes(min_dims=min_dims, max_dims=max_dims, max_side=max_side).map(lambda s: (s,) * nargs)
    return shaped.flatmap(lambda ss: st.tuples(*(arrays(s, dtype, d, margin, avoid) for s, d in zip(ss, domains))))


def _resolve(op: Any) -> tuple[str, Callable[..., Any], Any]:
    """(name, a function of Tensors, the record or None) of an op given by name, record or function."""
    from .functional._registry import LAZY_MODULE, REGISTRY, Op, load_all

    if isinstance(op, str):
        if op not in REGISTRY and op in LAZY_MODULE:
            load_all()
        if op not in REGISTRY:
            from .plugin_registry import load_plugins

            load_plugins()
        if op not in REGISTRY:
            raise KeyError(f"check_op: no op {op!r} is registered")
        op = REGISTRY[op]
    if not isinstance(op, Op):
        rec = next((r for r in REGISTRY.values() if r.fn is op and not r.internal), None)
        if rec is None:  # a function of Tensors (lp.exp, lp.ops.mish, a lambda)
            return getattr(op, "__name__", repr(op)), op, None
        op = rec
    rec = op
    forward_only = getattr(rec.fn, "tensor_level", None)
    if forward_only is not None:
        return rec.name, forward_only, rec
    from .core.tensor import apply

    return rec.name, lambda *xs: apply(rec.fn, rec.name, *xs), rec


def _corners(nargs: int, domains: list[Domain], avoid: Sequence[float], margin: float = 0.01) -> list[list[Any]]:
    """Inputs of the shapes where rules go wrong most: a scalar, and (for several inputs) one input
    broadcast against another, both ways."""
    rng = np.random.default_rng(0)
    if nargs == 1:
        combos: list[list[tuple[int, ...]]] = [[()], [(2, 3)]]
    else:
        rest = nargs - 1
        combos = [[(2, 3), *[(3,)] * rest], [(), *[(2, 1)] * rest], [*[(1, 3)] * rest, (2, 1)]]
    return [[_away(rng.uniform(lo + margin, hi - margin, shape), lo + margin, hi - margin, margin, avoid)
             for shape, (lo, hi) in zip(shapes_, domains)] for shapes_ in combos]


def _arity(fn: Callable[..., Any]) -> int:
    import inspect

    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return 1
    kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    return max(1, sum(1 for p in params if p.kind in kinds and p.default is p.empty))


def check_op(
    op: Any,
    *,
    nargs: int | None = None,
    domain: Domain | Sequence[Domain] = (-3.0, 3.0),
    avoid: Sequence[float] = (),
    inputs: Any = None,
    examples: Sequence[Sequence[Any]] | None = None,
    max_examples: int = 20,
    order: int = 2,
    eps: float = 1e-6,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> None:
    """Check an op's VJP, JVP and batching against finite differences and each other, over many inputs.

    ``op`` is an op's name (``"exp"``, a plugin's ``"mish"``), its record, its function on arrays
    (``F.exp``) or a function of Tensors (``lp.ops.mish``, a lambda). For each input (float64) it
    checks, raising ``AssertionError`` with the op, the check and the input on the first failure:

    * ``vjp``: the VJP against central finite differences, to ``order`` (``check_grads``);
    * ``jvp``: the JVP against finite differences, and against the VJP transposed
      (``<u, J v>`` from ``jvp`` equals ``<J^T u, v>`` from ``vjp``, to rounding);
    * ``vmap``: ``vmap`` of the op and of its VJP against a loop over a batch of three examples
      (every input batched, and only the first), or the op's declared refusal;
    * ``jit``: ``jit`` of the op and of its VJP against eager, bit for bit.

    Inputs: ``examples`` (tuples of arrays), else ``max_examples`` drawn by hypothesis from ``inputs``
    (a strategy of tuples of arrays), else from ``op_inputs(nargs, domain, avoid=avoid)`` (``nargs``
    read from the op's signature): arrays of broadcasting shapes, scalars included.

    >>> check_op("exp", max_examples=5)
    >>> check_op(lambda x, y: lp.logaddexp(x, y) * y, domain=(-2, 2), max_examples=5)
    """
    name, f, rec = _resolve(op)
    if examples is None:
        hypothesis, _, _ = _hypothesis()
        if inputs is None:
            fn: Any = rec.fn if rec is not None else f
            n = nargs if nargs is not None else _arity(fn.forward if hasattr(fn, "tensor_level") else fn)
            inputs = op_inputs(n, domain, avoid=avoid)
            for xs in _corners(n, _domains(domain, n), avoid):  # (broadcasting and scalars, every time)
                _check_op_at(name, f, rec, xs, order, eps, rtol, atol)

        @hypothesis.settings(max_examples=max_examples, deadline=None, database=None,
                             suppress_health_check=list(hypothesis.HealthCheck))
        @hypothesis.given(inputs)
        def run(xs: Sequence[Any]) -> None:
            _check_op_at(name, f, rec, xs, order, eps, rtol, atol)

        run()
    else:
        for example in examples:
            _check_op_at(name, f, rec, example, order, eps, rtol, atol)


def _check_op_at(name: str, f: Callable[..., Any], rec: Any, args: Sequence[Any], order: int, eps: float,
                 rtol: float, atol: float) -> None:
    from .transforms.forward_mode import jvp
    from .transforms.jit.jitted import jit
    from .transforms.vmap.batching import vmap

    xs = [_to_f64(a) for a in args]
    where = "inputs of shapes " + ", ".join(str(x.shape) for x in xs)

    def fail(check: str, msg: str) -> AssertionError:
        return AssertionError(f"check_op({name!r}): {check} at {where}: {msg}")

    try:
        check_grads(f, xs, order=order, eps=eps, rtol=rtol, atol=atol)
    except AssertionError as e:
        raise fail("the VJP", str(e)) from None
    except Exception as e:
        raise fail("the VJP", f"differentiating the op raised {type(e).__name__}: {e}") from e
    rng = np.random.default_rng(0)
    out, pull = vjp(f, *xs)
    out = _to_f64(out)
    vs = [rng.standard_normal(x.shape) for x in xs]
    u = rng.standard_normal(out.shape)
    primal, tangent = jvp(f, tuple(xs), tuple(vs))
    tangent = _to_f64(tangent)
    if tangent.shape != out.shape:
        raise fail("the JVP", f"the tangent has shape {tangent.shape}, the output {out.shape}")
    plus = _to_f64(f(*[Tensor(x + eps * v) for x, v in zip(xs, vs)]))
    minus = _to_f64(f(*[Tensor(x - eps * v) for x, v in zip(xs, vs)]))
    numeric, analytic = float(np.sum(u * (plus - minus))) / (2 * eps), float(np.sum(u * tangent))
    if not np.isclose(analytic, numeric, rtol=rtol, atol=atol):
        raise fail("the JVP", f"disagrees with finite differences: {analytic!r} vs numeric {numeric!r}")
    transposed = sum(float(np.sum(_to_f64(g) * v)) for g, v in zip(pull(u), vs))
    if not np.isclose(analytic, transposed, rtol=1e-9, atol=1e-12):
        raise fail("the JVP", f"is not the VJP transposed: <u, J v> = {analytic!r} from jvp, <J^T u, v> = "
                              f"{transposed!r} from vjp")
    try:
        _check_batching(name, f, rec, xs, out, fail, vmap)
    except AssertionError:
        raise
    except Exception as e:
        raise fail("vmap", f"vmap of the op or of its VJP raised {type(e).__name__}: {e}") from e
    for what, g, at in (("the op", f, xs), ("its VJP", lambda *a: vjp(f, *a[:-1])[1](a[-1]), [*xs, u])):
        eager = g(*at)
        try:
            jitted = jit(g)(*at)
        except Exception as e:
            raise fail("jit", f"jit of {what} raised {type(e).__name__}: {e}") from e
        if not all(np.array_equal(_to_f64(a), _to_f64(b)) for a, b in zip(_leaves(eager), _leaves(jitted))):
            raise fail("jit", f"jit of {what} differs from eager")


def _leaves(out: Any) -> list[Any]:
    return tree_flatten(out)[0]


def _check_batching(name: str, f: Callable[..., Any], rec: Any, xs: list[np.ndarray], out: np.ndarray,
                    fail: Callable[[str, str], AssertionError], vmap: Any) -> None:
    batch = [[np.roll(x.ravel(), i).reshape(x.shape) for x in xs] for i in range(3)]  # (values in the domain)
    stacked = [np.stack([ex[k] for ex in batch]) for k in range(len(xs))]
    if rec is not None and rec.vmap != "numpy":
        try:
            vmap(f)(*stacked)
        except NotImplementedError as e:
            if rec.vmap in str(e):
                return
            raise fail("vmap", f"the op declares a refusal ({rec.vmap!r}) but vmap raised {e!r}") from None
        raise fail("vmap", f"the op declares a refusal ({rec.vmap!r}) but vmap computed")
    us = np.stack([np.random.default_rng(i).standard_normal(out.shape) for i in range(3)])

    def pulled(*a: Any) -> Any:
        return vjp(f, *a[:-1])[1](a[-1])

    for in_axes in ([0] * len(xs), [0] + [None] * (len(xs) - 1)) if len(xs) > 1 else ([0],):
        given = [s if ax == 0 else x for s, x, ax in zip(stacked, xs, in_axes)]
        loop = [[ex[k] if ax == 0 else xs[k] for k, ax in enumerate(in_axes)] for ex in batch]
        want = np.stack([_to_f64(f(*ex)) for ex in loop])
        got = _to_f64(vmap(f, in_axes=tuple(in_axes))(*given))
        if got.shape != want.shape or not np.allclose(got, want, rtol=1e-10, atol=1e-12):
            raise fail("vmap", f"vmap of the op (in_axes={tuple(in_axes)}) differs from a loop over the batch")
        got_g = vmap(pulled, in_axes=(*in_axes, 0))(*given, us)
        for k in range(len(xs)):
            want_k = np.stack([_to_f64(pulled(*ex, us[i])[k]) for i, ex in enumerate(loop)])
            got_k = _to_f64(got_g[k])
            if got_k.shape != want_k.shape or not np.allclose(got_k, want_k, rtol=1e-10, atol=1e-12):
                raise fail("vmap", f"vmap of its VJP (in_axes={tuple(in_axes)}) differs from a loop over the batch "
                                   f"for input {k}")


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
