"""Every op in ``functional.OPS`` under ``vmap``, ``vmap(grad)`` and ``vmap`` of a second derivative.

Each op's sample inputs (the tables the walks share: tests/op_samples.py, and those of other
modules' ops when present) are drawn for several examples and stacked; the
batched result must equal the per-example results stacked, in float64 to rounding error. Every
array argument is mapped (float inputs, and integer indices, labels and masks too), the others
(axes, shapes, subscripts) are shared.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

import numpy as np
import op_samples
import pytest

import leanpass as lp
from leanpass import functional as F

N = 3  # examples per batch


def _args(sample: Any) -> tuple[Any, ...]:
    """A sample's arguments (a table may give ``(args, positions of the differentiable ones)``)."""
    if type(sample) is tuple and len(sample) == 2 and type(sample[0]) is list and type(sample[1]) is list:
        return tuple(sample[0])
    return tuple(sample)


def _tables() -> dict[str, Callable[[int], tuple[Any, ...]]]:
    """key -> (seed -> one example's arguments), from every sample table of the test suite
    (each ``table[key](rng)`` gives the arguments; another generator, another example)."""
    tables = [op_samples.CORE_SAMPLES, op_samples.SAMPLES]
    for name in ("op_samples_linalg_special",):
        try:
            tables.append(importlib.import_module(name).SAMPLES)
        except ImportError:
            continue
    out: dict[str, Callable[[int], tuple[Any, ...]]] = {}
    for table in tables:
        for k, b in table.items():
            out.setdefault(k, lambda seed, b=b: _args(b(np.random.default_rng(seed))))
    return out


SAMPLES = _tables()


def op_of(key: str) -> str:
    return key if key in F.OPS else op_samples.op_of(key)


def _call(key: str) -> Any:
    name = op_of(key)
    fn = F.OPS[name]
    return lambda *args: lp.apply(fn, name, *args)


def _examples(key: str) -> list[tuple[Any, ...]]:
    return [SAMPLES[key](seed) for seed in range(N)]


def _stack(parts: list[Any], inside: bool = False) -> Any:
    """Stack one argument of each example: arrays (also inside an index tuple); others are shared."""
    first = parts[0]
    if isinstance(first, np.ndarray) and _axes(first, inside) == 0:
        return np.stack(parts)
    if type(first) is tuple:
        return tuple(_stack([p[i] for p in parts], True) for i in range(len(first)))
    return first


def _axes(a: Any, inside: bool = False) -> Any:
    """0 for an array argument, None for a shared one. A boolean mask inside an index is shared:
    batched, it would give each example its own number of elements (vmap refuses that)."""
    if type(a) is tuple:
        return tuple(_axes(b, True) for b in a)
    return 0 if isinstance(a, np.ndarray) and not (inside and a.dtype == bool) else None


def _stacked(examples: list[tuple[Any, ...]]) -> tuple[Any, ...]:
    return tuple(_stack([e[i] for e in examples]) for i in range(len(examples[0])))


def _in_axes(args: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(_axes(a) for a in args)


def _value(x: Any) -> np.ndarray:
    return np.asarray(x._data if isinstance(x, lp.Tensor) else x)


def _scalarised(key: str, weights: np.ndarray) -> Any:
    """The op's output dotted with fixed weights: a scalar function to differentiate."""
    call = _call(key)
    return lambda *args: lp.sum(call(*args) * weights.astype(_value(call(*_examples(key)[0])).dtype))


def test_every_op_has_a_sample() -> None:
    missing = sorted(set(F.OPS) - {op_of(k) for k in SAMPLES})
    assert not missing, f"ops without sample inputs (add them to tests/op_samples.py): {missing}"


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_vmap_of_every_op_equals_stacking(key: str) -> None:
    examples = _examples(key)
    call = _call(key)
    want = np.stack([_value(call(*e)) for e in examples])
    got = lp.vmap(call, in_axes=_in_axes(examples[0]))(*_stacked(examples))
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(_value(got), want, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_vmap_of_grad_of_every_op_equals_stacking(key: str) -> None:
    examples = _examples(key)
    floats = tuple(i for i, a in enumerate(examples[0]) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    out_shape = np.shape(_value(_call(key)(*examples[0])))
    f = _scalarised(key, np.random.default_rng(99).standard_normal(out_shape))
    g = lp.grad(f, argnums=floats)
    want = [g(*e) for e in examples]
    got = lp.vmap(g, in_axes=_in_axes(examples[0]))(*_stacked(examples))
    for k in range(len(floats)):
        np.testing.assert_allclose(got[k], np.stack([w[k] for w in want]), rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("key", sorted(SAMPLES))
def test_vmap_of_a_second_derivative_of_every_op_equals_stacking(key: str) -> None:
    examples = _examples(key)
    first = next(i for i, a in enumerate(examples[0]) if isinstance(a, np.ndarray) and a.dtype.kind == "f")
    out_shape = np.shape(_value(_call(key)(*examples[0])))
    f = _scalarised(key, np.random.default_rng(98).standard_normal(out_shape))
    v = np.random.default_rng(97).standard_normal(examples[0][first].shape)

    def hvp(*args: Any) -> Any:  # d/dx of (grad f . v): a Hessian-vector product, reverse over reverse
        return lp.grad(lambda *a: lp.sum(lp.grad(f, argnums=first)(*a) * v), argnums=first)(*args)

    want = np.stack([hvp(*e) for e in examples])
    got = lp.vmap(hvp, in_axes=_in_axes(examples[0]))(*_stacked(examples))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-11)
