"""Where the large MLP step's time goes: LeanPass's step in parts, beside its own array work.

    python benchmarks/step_parts.py

Three steps of the 784-256-128-10 MLP (float32, batch 128) run on one batch, in blocks of
three in a random order (see ab_step.py for why the order must be random):

  numpy     bench_mlp.py's hand-written step (the 1.0 everything is divided by);
  leanpass  bench_mlp.py's LeanPass step, timed in four parts: the forward pass (with
            value_and_grad's set-up of fresh input nodes), the backward pass (with the
            model-shaped gradients), ``opt.update`` and ``apply_updates``;
  written   the very array operations LeanPass runs, in the same order, written out in NumPy
            without the engine, timed in the same four parts.

The script first checks that ``written`` computes LeanPass's new parameters bit for bit, so it
cannot drift from the engine unnoticed. What ``leanpass`` costs beyond ``written`` in a part
is the Python that the part runs.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_mlp  # noqa: E402

import leanpass as lp  # noqa: E402
from leanpass import losses, optim  # noqa: E402
from leanpass.transforms.reverse_mode import _Call, _one  # noqa: E402  (value_and_grad's two halves)

PARTS = ("forward", "backward", "update", "apply")


def leanpass_parts(model: Any, x: np.ndarray, y: np.ndarray) -> tuple[Callable[[], list[float]], list[Any]]:
    """A LeanPass training step that returns the seconds each part took (and its state)."""
    def loss_fn(m: Any, xb: np.ndarray, yb: np.ndarray) -> Any:
        return losses.cross_entropy(m(xb), yb)

    opt = optim.sgd(bench_mlp.LR)
    state = [model, opt.init(model)]
    seed = _one(lp.tree_flatten(model)[0][0].dtype)  # (a scalar loss's seed, as value_and_grad keeps it)
    clock = time.perf_counter

    def step() -> list[float]:
        m, s = state
        t0 = clock()
        traced = _Call(loss_fn, (m, x, y), {}, 0, "grad")
        t1 = clock()
        grads = traced.pull_back([traced.out], [seed])
        t2 = clock()
        updates, s = opt.update(grads, s, m)
        t3 = clock()
        state[0], state[1] = optim.apply_updates(m, updates), s
        t4 = clock()
        return [t1 - t0, t2 - t1, t3 - t2, t4 - t3]

    return step, state


def written_parts(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> tuple[Callable[[], list[float]],
                                                                                    list[np.ndarray]]:
    """LeanPass's array operations for one step, in NumPy: ``linear`` (the bias added into the
    product), relu against a 0-d zero, ``cross_entropy``'s raw path, the VJPs, ``sgd`` and
    ``apply_updates``. Returns the step (the seconds per part) and the live parameter list."""
    p = [a.copy() for a in params]
    dtype = p[0].dtype
    zero, one, neg = np.zeros((), dtype), np.ones((), dtype), -bench_mlp.LR
    clock = time.perf_counter

    def step() -> list[float]:
        t0 = clock()
        w1, b1, w2, b2, w3, b3 = p
        z1 = x @ w1
        z1 += b1
        h1 = np.maximum(z1, zero)
        z2 = h1 @ w2
        z2 += b2
        h2 = np.maximum(z2, zero)
        logits = h2 @ w3
        logits += b3
        n = logits.shape[0]
        rows = np.arange(n)
        shifted = logits - np.maximum.reduce(logits, axis=-1, keepdims=True)
        e = np.exp(shifted)
        s = np.add.reduce(e, axis=-1, keepdims=True)
        per_row = np.log(s).reshape(n) - shifted[rows, y]
        float(np.add.reduce(per_row) / n)
        t1 = clock()
        g = e / s
        g[rows, y] -= 1
        g *= one / n
        g2 = np.sign(h2)
        g2 *= g @ w3.T
        grads3 = (h2.T @ g, np.add.reduce(g, 0))
        g1 = np.sign(h1)
        g1 *= g2 @ w2.T
        grads2 = (h1.T @ g2, np.add.reduce(g2, 0))
        grads1 = (x.T @ g1, np.add.reduce(g1, 0))
        grads = [*grads1, *grads2, *grads3]
        t2 = clock()
        updates = [gi * neg for gi in grads]
        t3 = clock()
        p[:] = [pi + u for pi, u in zip(p, updates)]
        t4 = clock()
        return [t1 - t0, t2 - t1, t3 - t2, t4 - t3]

    return step, p


def main() -> None:
    sizes, batch, dtype = [784, 256, 128, 10], 128, np.float32
    params, x, y = data = bench_mlp.make_data(sizes, batch, dtype)
    numpy_step = bench_mlp.numpy_setup(sizes, batch, dtype, data)
    _, base_state = bench_mlp.leanpass_setup(sizes, batch, dtype, data)
    ours, state = leanpass_parts(base_state[0], x, y)
    written, written_params = written_parts(params, x, y)
    for _ in range(3):
        ours()
        written()
    leaves = [t.numpy() for t in lp.tree_flatten(state[0])[0]]
    if not all(np.array_equal(a, b) for a, b in zip(leaves, written_params)):
        raise SystemExit("the written-out step no longer computes LeanPass's parameters: update it")

    def whole() -> list[float]:
        start = time.perf_counter()
        numpy_step()
        return [time.perf_counter() - start]

    sides: dict[str, Callable[[], list[float]]] = {"numpy": whole, "leanpass": ours, "written": written}
    times: dict[str, list[list[float]]] = {name: [] for name in sides}
    for _ in range(10):
        for fn in sides.values():
            fn()
    names = list(sides)
    order = random.Random(0)
    for _ in range(300):
        order.shuffle(names)
        for name in names:
            for _ in range(3):
                times[name].append(sides[name]())
    base = statistics.median(t[0] for t in times["numpy"])
    print(f"784-256-128-10 MLP step, float32, batch 128: numpy {base * 1e3:.3f} ms (median of {len(times['numpy'])})")
    for name in ("leanpass", "written"):
        parts = [statistics.median(t[i] for t in times[name]) / base for i in range(len(PARTS))]
        total = statistics.median(sum(t) for t in times[name]) / base
        shown = ", ".join(f"{part} {100 * v:.1f}%" for part, v in zip(PARTS, parts))
        print(f"  {name:8s} {total:.3f}x numpy's step: {shown}")


if __name__ == "__main__":
    main()
