"""``lp.jit`` against hand-written NumPy, measured in the same run.

    python benchmarks/bench_jit.py                   # all figures, NumPy's default BLAS threads
    python benchmarks/bench_jit.py --blas-threads 1  # one BLAS thread for every side
    python benchmarks/bench_jit.py --quick           # fewer repeats

Figures:
  1. the 784-256-128-10 MLP training step (batch 128, float32) and the 64-32-10 step (batch 32,
     float64) of bench_mlp.py: forward, cross-entropy, backward, SGD. Hand-written NumPy (bench_mlp's
     ``numpy_step``), eager LeanPass and the jitted step (with ``donate_argnums`` for the model and
     the optimizer state, and without) are timed a call or two at a time, in a random order each
     round, for hundreds of rounds, and compared by the ratio of their medians. Before timing, the
     jitted step's parameters and losses are checked bit for bit against eager LeanPass's.
  2. the 900-op chain of bench_engine.py (``y = relu(y * 0.999 + 0.001)`` 300 times on size-4
     arrays), forward and backward under ``jit(grad(f))``, against NumPy's forward alone.
  3. trace time: the first call of a fresh jitted function (tracing, optimising, compiling).
  4. peak memory (VmHWM) of 100 jitted steps of the large MLP against 100 NumPy steps, each side
     in a fresh process.
"""

from __future__ import annotations

import argparse
import gc
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_engine import X0, numpy_forward  # noqa: E402
from bench_mlp import LR, Data, _peak_rss, leanpass_setup, make_data, numpy_setup  # noqa: E402
from host_gauge import Gauge  # noqa: E402


def jit_setup(sizes: list[int], batch: int, dtype: Any, data: Data | None = None,
              donate: bool = True) -> tuple[Callable[[], float], Any, Any]:
    """The step of bench_mlp's ``leanpass_setup``, jitted; also returns its state and the jitted function."""
    import leanpass as lp
    from leanpass import losses, nn, optim

    params, x, y = data or make_data(sizes, batch, dtype)
    model = nn.MLP(sizes, rng=0, dtype=dtype)
    _, treedef = lp.tree_flatten(model)
    model = lp.tree_unflatten(treedef, [lp.Tensor(p.copy()) for p in params])
    opt = optim.sgd(LR)

    def loss_fn(m: Any, xb: np.ndarray, yb: np.ndarray) -> Any:
        return losses.cross_entropy(m(xb), yb)

    def train_step(m: Any, s: Any, xb: np.ndarray, yb: np.ndarray) -> Any:
        loss, grads = lp.value_and_grad(loss_fn)(m, xb, yb)
        updates, s = opt.update(grads, s, m)
        return optim.apply_updates(m, updates), s, loss

    jitted = lp.jit(train_step, donate_argnums=(0, 1) if donate else ())
    state = [model, opt.init(model)]

    def step() -> float:
        state[0], state[1], loss = jitted(state[0], state[1], x, y)
        return float(loss.item())

    return step, state, jitted


def check_bits(sizes: list[int], batch: int, dtype: Any, steps: int = 5) -> None:
    """The jitted step gives eager LeanPass's losses and parameters bit for bit."""
    import leanpass as lp

    data = make_data(sizes, batch, dtype)
    for donate in (True, False):
        eager, e_state = leanpass_setup(sizes, batch, dtype, data)
        jitted, j_state, _ = jit_setup(sizes, batch, dtype, data, donate)
        for i in range(steps):
            a, b = eager(), jitted()
            pa = [p._data for p in lp.tree_flatten(e_state[0])[0]]
            pb = [p._data for p in lp.tree_flatten(j_state[0])[0]]
            if a != b or not all(np.array_equal(u, v) for u, v in zip(pa, pb)):
                raise SystemExit(f"jit differs from eager at step {i} (donate={donate}): loss {a!r} vs {b!r}")


def time_sides(sides: dict[str, Callable[[], Any]], rounds: int, inner: int, gauge: Gauge) -> dict[str, float]:
    """Median seconds per call of each side. Each round runs every side for ``inner`` calls, in a
    random order (a side that follows itself finds its arrays in the caches: see performance.md,
    "Measuring a change"), so a slow patch of the shared machine falls on all sides alike."""
    for fn in sides.values():
        for _ in range(3):
            fn()
    times: dict[str, list[float]] = {k: [] for k in sides}
    names = list(sides)
    order = random.Random(0)
    clock = time.perf_counter
    gc.collect()
    for r in range(rounds):
        if r % max(1, rounds // 10) == 0:
            gauge.sample()
        order.shuffle(names)
        for name in names:
            fn = sides[name]
            t0 = clock()
            for _ in range(inner):
                fn()
            times[name].append((clock() - t0) / inner)
    return {k: statistics.median(v) for k, v in times.items()}


def mlp_figures(sizes: list[int], batch: int, dtype: Any, rounds: int, inner: int, gauge: Gauge) -> dict[str, Any]:
    check_bits(sizes, batch, dtype)
    data = make_data(sizes, batch, dtype)
    eager, _ = leanpass_setup(sizes, batch, dtype, data)
    donated, _, _ = jit_setup(sizes, batch, dtype, data, donate=True)
    plain, _, _ = jit_setup(sizes, batch, dtype, data, donate=False)
    med = time_sides({"numpy": numpy_setup(sizes, batch, dtype, data), "eager": eager, "jit": plain,
                      "jit_donate": donated}, rounds, inner, gauge)
    return {"ms": {k: v * 1e3 for k, v in med.items()},
            "ratio": {k: med[k] / med["numpy"] for k in ("eager", "jit", "jit_donate")}}


def trace_ms(sizes: list[int], batch: int, dtype: Any, runs: int = 5) -> float:
    """Median time of the first call of a freshly jitted training step (trace, optimise, compile)."""
    data = make_data(sizes, batch, dtype)
    times = []
    for _ in range(runs):
        step, _, _ = jit_setup(sizes, batch, dtype, data)
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1e3


def chain_figures(rounds: int, gauge: Gauge) -> dict[str, float]:
    import leanpass as lp

    def f(x: Any) -> Any:
        y = x
        for _ in range(300):
            y = (y * 0.999 + 0.001).relu()
        return y.sum()

    eager = lp.grad(f)
    jitted = lp.jit(lp.grad(f))
    if not np.array_equal(jitted(X0), eager(X0)) or not np.array_equal(jitted(X0 + 1), eager(X0 + 1)):
        raise SystemExit("the jitted chain's gradient differs from eager")
    t0 = time.perf_counter()
    lp.jit(lp.grad(f))(X0)
    trace = time.perf_counter() - t0
    med = time_sides({"numpy_forward": numpy_forward, "jit": lambda: jitted(X0)}, rounds, 1, gauge)
    return {"us": {k: v * 1e6 for k, v in med.items()}, "jit_ratio": med["jit"] / med["numpy_forward"],
            "trace_ms": trace * 1e3}


def memory_child(side: str, steps: int) -> None:
    sizes, batch, dtype = [784, 256, 128, 10], 128, np.float32
    if side == "numpy":
        step = numpy_setup(sizes, batch, dtype)
    else:
        step = jit_setup(sizes, batch, dtype, donate=side == "jit_donate")[0]
    for _ in range(steps):
        step()
    print(json.dumps({"peak_rss_mb": _peak_rss() / 2**20}))


def run_child(side: str, steps: int, blas_threads: int) -> float:
    out = subprocess.run([sys.executable, __file__, "--memory-child", side, "--steps", str(steps),
                          "--blas-threads", str(blas_threads)], check=True, capture_output=True, text=True)
    return float(json.loads(out.stdout.strip().splitlines()[-1])["peak_rss_mb"])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    parser.add_argument("--blas-threads", type=int, default=0, metavar="N",
                        help="set OpenBLAS to N threads for every side (default 0: NumPy's default)")
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--memory-child", choices=["numpy", "jit", "jit_donate"], help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.blas_threads > 0:
        import leanpass  # noqa: F401
        from leanpass.examples.digits import limit_blas_threads

        limit_blas_threads(args.blas_threads)
    if args.memory_child:
        memory_child(args.memory_child, args.steps)
        return
    scale = 4 if args.quick else 1
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"BLAS threads {args.blas_threads or 'default'}")
    gauge = Gauge()
    figures: dict[str, Any] = {}
    for label, sizes, batch, dtype, rounds, inner in (("large", [784, 256, 128, 10], 128, np.float32, 400, 1),
                                                       ("small", [64, 32, 10], 32, np.float64, 2000, 2)):
        fig = mlp_figures(sizes, batch, dtype, rounds // scale, inner, gauge)
        fig["trace_ms"] = trace_ms(sizes, batch, dtype)
        figures[label] = fig
        ms, r = fig["ms"], fig["ratio"]
        print(f"{'-'.join(map(str, sizes))} MLP, batch {batch}, {np.dtype(dtype).name}: "
              f"numpy {ms['numpy'] * 1e3:.1f} us, "
              f"eager {r['eager']:.3f}x, jit {r['jit']:.3f}x, jit with donation {r['jit_donate']:.3f}x "
              f"(target <= 1.00x); trace {fig['trace_ms']:.1f} ms (target < 50 ms); bits equal to eager")
    chain = chain_figures(800 // scale, gauge)
    figures["chain"] = chain
    print(f"900-op chain, forward + backward: numpy forward {chain['us']['numpy_forward']:.1f} us, "
          f"jit {chain['jit_ratio']:.3f}x (target <= 1.2x; eager: bench_engine.py); "
          f"trace {chain['trace_ms']:.1f} ms")
    mem = {side: run_child(side, 100, args.blas_threads) for side in ("numpy", "jit", "jit_donate")}
    figures["memory_mb"] = mem
    print(f"peak RSS, 100 steps of the large MLP: numpy {mem['numpy']:.1f} MB, jit {mem['jit']:.1f} MB "
          f"({mem['jit'] / mem['numpy']:.2f}x), jit with donation {mem['jit_donate']:.1f} MB "
          f"({mem['jit_donate'] / mem['numpy']:.2f}x) (target <= 1.25x)")
    gauge.sample()
    print(gauge.report())
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
