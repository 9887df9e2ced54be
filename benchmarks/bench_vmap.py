"""Per-example gradients: ``lp.vmap(lp.grad(loss), in_axes=(None, 0, 0))`` beside PyTorch.

    python benchmarks/bench_vmap.py            # LeanPass and NumPy only
    pip install torch && python benchmarks/bench_vmap.py   # and torch.func (not a LeanPass dependency)

The network is a 64-32-10 float32 MLP (relu, softmax cross-entropy with integer labels), one
example's loss differentiated per example of a batch of 64. Each figure is measured beside the
same computation written out in NumPy by hand (the per-example weight gradients as outer
products), in a random order of blocks, one thread. PyTorch (``torch.func.vmap(torch.func.grad(loss))``)
runs in a process of its own, as in bench_torch.py; the processes alternate (each pair in
turn starting with the other library), and the ratio to PyTorch is printed pair by pair, both
time against time and as each library's time over the NumPy measured beside it.

Also printed: one ordinary ``lp.grad`` of the whole batch's mean loss (one gradient, not 64),
and 64 separate ``lp.grad`` calls, for scale.
"""

from __future__ import annotations

import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass

SIZES, BATCH = (64, 32, 10), 64


def make_data(batch: int = BATCH) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    d_in, d_hidden, d_out = SIZES
    params = {
        "w1": (rng.standard_normal((d_in, d_hidden)) / np.sqrt(d_in)).astype(np.float32),
        "b1": np.zeros(d_hidden, np.float32),
        "w2": (rng.standard_normal((d_hidden, d_out)) / np.sqrt(d_hidden)).astype(np.float32),
        "b2": np.zeros(d_out, np.float32),
    }
    xs = rng.standard_normal((batch, d_in)).astype(np.float32)
    ys = rng.integers(0, d_out, batch)
    return params, xs, ys


def numpy_per_example(params: dict[str, np.ndarray], xs: np.ndarray, ys: np.ndarray) -> dict[str, np.ndarray]:
    """The per-example gradients written out by hand: the weights' as outer products."""
    h_pre = xs @ params["w1"] + params["b1"]
    h = np.maximum(h_pre, 0)
    logits = h @ params["w2"] + params["b2"]
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    p = e / e.sum(axis=1, keepdims=True)
    p[np.arange(len(ys)), ys] -= 1  # d loss / d logits, per example
    dh = (p @ params["w2"].T) * (h_pre > 0)
    return {"w1": xs[:, :, None] * dh[:, None, :], "b1": dh, "w2": h[:, :, None] * p[:, None, :], "b2": p}


def leanpass_loss() -> Callable[..., Any]:
    import leanpass as lp

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = lp.relu(lp.linear(x, params["w1"], params["b1"]))
        return lp.losses.cross_entropy(lp.linear(h, params["w2"], params["b2"]), y)

    return loss


def leanpass_fns(data: Any) -> dict[str, Callable[[], Any]]:
    import leanpass as lp

    params, xs, ys = data
    loss = leanpass_loss()
    per_example = lp.vmap(lp.grad(loss), in_axes=(None, 0, 0))
    batch_grad = lp.grad(lambda p, x, y: lp.losses.cross_entropy(
        lp.linear(lp.relu(lp.linear(x, p["w1"], p["b1"])), p["w2"], p["b2"]), y))
    one = lp.grad(loss)
    got, want = per_example(params, xs, ys), numpy_per_example(params, xs, ys)
    for k in want:
        if not np.allclose(got[k], want[k], atol=1e-5):
            raise SystemExit(f"vmap(grad) disagrees with the hand-written gradients for {k}")
    return {
        "vmap(grad)": lambda: per_example(params, xs, ys),
        "grad of the batch": lambda: batch_grad(params, xs, ys),
        "64 grad calls": lambda: [one(params, xs[i], ys[i]) for i in range(len(ys))],
    }


def torch_fns(data: Any) -> dict[str, Callable[[], Any]]:
    import torch
    from torch.func import grad, vmap

    torch.set_num_threads(1)
    params, xs, ys = data
    tp = {k: torch.tensor(v) for k, v in params.items()}
    txs, tys = torch.tensor(xs), torch.tensor(ys)

    def loss(p: Any, x: Any, y: Any) -> Any:
        h = torch.relu(x @ p["w1"] + p["b1"])
        return torch.nn.functional.cross_entropy((h @ p["w2"] + p["b2"])[None], y[None])

    per_example = vmap(grad(loss), in_dims=(None, 0, 0))
    got, want = per_example(tp, txs, tys), numpy_per_example(params, xs, ys)
    for k in want:
        if not np.allclose(got[k].numpy(), want[k], atol=1e-5):
            raise SystemExit(f"torch.func disagrees with the hand-written gradients for {k}")
    return {"torch.func vmap(grad)": lambda: per_example(tp, txs, tys)}


def worker(side: str, rounds: int, inner: int) -> dict[str, float]:
    """Median seconds of each function of ``side`` and of NumPy's, blocks in a random order."""
    from leanpass.examples.digits import limit_blas_threads

    limit_blas_threads(1)
    data = make_data()
    fns = leanpass_fns(data) if side == "leanpass" else torch_fns(data)
    fns["numpy"] = lambda: numpy_per_example(*data)
    names = list(fns)
    for fn in fns.values():
        for _ in range(5):
            fn()
    times: dict[str, list[float]] = {n: [] for n in names}
    order = random.Random(0)
    for _ in range(rounds):
        order.shuffle(names)
        for n in names:
            fn = fns[n]
            reps = 1 if n == "64 grad calls" else inner
            start = time.perf_counter()
            for _ in range(reps):
                fn()
            times[n].append((time.perf_counter() - start) / reps)
    return {n: statistics.median(t) for n, t in times.items()}


def measure(side: str, rounds: int, inner: int) -> dict[str, float]:
    out = subprocess.run([sys.executable, __file__, "--worker", side, str(rounds), str(inner)],
                         check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def main() -> None:
    if len(sys.argv) == 5 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]))))
        return
    try:
        import importlib.util

        has_torch = importlib.util.find_spec("torch") is not None
    except ImportError:
        has_torch = False
    pairs = int(os.environ.get("BENCH_PAIRS", "9"))
    ours, theirs = [], []
    for i in range(pairs):  # (which goes first alternates)
        first, second = ("leanpass", "torch") if i % 2 == 0 else ("torch", "leanpass")
        for side in (first, second):
            if side == "leanpass":
                ours.append(measure("leanpass", 30, 10))
            elif has_torch:
                theirs.append(measure("torch", 30, 10))
    us = {k: statistics.median(m[k] for m in ours) * 1e6 for k in ours[0]}
    over_np = {k: statistics.median(m[k] / m["numpy"] for m in ours) for k in ours[0]}
    print(f"per-example gradients, {'-'.join(map(str, SIZES))} float32 MLP, batch {BATCH}, one thread "
          f"(medians of {pairs} processes, each the median of 30 blocks)")
    for k in ours[0]:
        print(f"  leanpass {k:<20} {us[k]:8.0f} us   {over_np[k]:5.2f}x hand-written NumPy")
    if theirs:
        t_np = [m["torch.func vmap(grad)"] / m["numpy"] for m in theirs]
        t_us = statistics.median(m["torch.func vmap(grad)"] for m in theirs) * 1e6
        print(f"  torch.func vmap(grad)         {t_us:8.0f} us   {statistics.median(t_np):5.2f}x hand-written NumPy")
        # Two readings of the same runs: the times of neighbouring processes, and each library's
        # time over the NumPy measured beside it (which cancels the host's speed when NumPy's
        # time moves with it; on a crowded host neither is steady, so both are printed).
        direct = [o["vmap(grad)"] / t["torch.func vmap(grad)"] for o, t in zip(ours, theirs)]
        via_numpy = [o["vmap(grad)"] / o["numpy"] / t for o, t in zip(ours, t_np)]
        for name, r in (("time against time", direct), ("each over its NumPy", via_numpy)):
            print(f"  lp.vmap(lp.grad) / torch.func vmap(grad), {name}: median {statistics.median(r):.2f}x "
                  f"(pair by pair: {' '.join(f'{x:.2f}' for x in r)}; target <= 0.5x)")
        print(f"  hand-written NumPy / torch.func: {statistics.median(1 / t for t in t_np):.2f}x")
    else:
        print("  (torch is not installed: pip install torch to compare with torch.func)")


if __name__ == "__main__":
    main()
