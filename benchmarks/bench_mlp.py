"""One MLP training step in LeanPass against the same step hand-written in NumPy, in the same run.

    python benchmarks/bench_mlp.py            # all figures (about a minute)
    python benchmarks/bench_mlp.py --quick    # fewer repeats

A step is: forward pass, softmax cross-entropy, backward pass, SGD update. The two sides are
timed alternately (so a slow patch of the machine hits both) and compared by the ratio of
their medians. Peak memory (``ru_maxrss``) is measured for each side in a fresh subprocess,
and the LeanPass loop's resident memory is sampled to show it stays flat over 2,000 steps.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_gauge import Gauge  # noqa: E402

LR = 0.01


def make_data(sizes: list[int], batch: int, dtype: Any,
              seed: int = 0) -> tuple[list[np.ndarray], np.ndarray, np.ndarray]:
    """He-initialised weights (w1, b1, w2, b2, ...), a batch of inputs and integer labels."""
    rng = np.random.default_rng(seed)
    params: list[np.ndarray] = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        params.append((rng.standard_normal((a, b)) * np.sqrt(2.0 / a)).astype(dtype))
        params.append(np.zeros(b, dtype=dtype))
    x = rng.standard_normal((batch, sizes[0])).astype(dtype)
    y = rng.integers(0, sizes[-1], batch)
    return params, x, y


# ----- the hand-written NumPy step ---------------------------------------------------------------
def numpy_step(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> float:
    """Forward, cross-entropy, backward and an in-place SGD update, written out by hand."""
    n_layers = len(params) // 2
    acts = [x]
    pre = []
    h = x
    for i in range(n_layers):
        z = h @ params[2 * i] + params[2 * i + 1]
        pre.append(z)
        h = np.maximum(z, 0) if i < n_layers - 1 else z
        acts.append(h)
    logits = h
    n = len(y)
    rows = np.arange(n)
    shifted = logits - logits.max(axis=1, keepdims=True)
    e = np.exp(shifted)
    s = e.sum(axis=1, keepdims=True)
    loss = float(np.mean(np.log(s[:, 0]) - shifted[rows, y]))
    d = e / s
    d[rows, y] -= 1
    d /= n
    for i in reversed(range(n_layers)):
        w = params[2 * i]
        gw = acts[i].T @ d
        gb = d.sum(axis=0)
        if i > 0:
            d = (d @ w.T) * (pre[i - 1] > 0)
        w -= LR * gw
        params[2 * i + 1] -= LR * gb
    return loss


# ----- the LeanPass step ----------------------------------------------------------------------------
Data = tuple[list[np.ndarray], np.ndarray, np.ndarray]


def leanpass_setup(sizes: list[int], batch: int, dtype: Any,
                   data: Data | None = None) -> tuple[Callable[[], float], Any]:
    """A closure running one LeanPass training step on an MLP with the same weights (and batch)."""
    import leanpass as lp
    from leanpass import losses, nn, optim

    params, x, y = data or make_data(sizes, batch, dtype)
    model = nn.MLP(sizes, rng=0, dtype=dtype)
    leaves, treedef = lp.tree_flatten(model)
    model = lp.tree_unflatten(treedef, [lp.Tensor(p.copy()) for p in params])

    def loss_fn(m: Any, xb: np.ndarray, yb: np.ndarray) -> Any:
        return losses.cross_entropy(m(xb), yb)

    value_and_grad = lp.value_and_grad(loss_fn)
    opt = optim.sgd(LR)
    state = [model, opt.init(model)]

    def step() -> float:
        m, s = state
        loss, grads = value_and_grad(m, x, y)
        updates, s = opt.update(grads, s, m)
        state[0], state[1] = optim.apply_updates(m, updates), s
        return float(loss.item())

    return step, state


def numpy_setup(sizes: list[int], batch: int, dtype: Any, data: Data | None = None) -> Callable[[], float]:
    params, x, y = data or make_data(sizes, batch, dtype)
    params = [p.copy() for p in params]  # (updated in place)
    return lambda: numpy_step(params, x, y)


def check_same_losses(sizes: list[int], batch: int, dtype: Any) -> None:
    """Both steps compute the same thing: the same losses over a few steps."""
    np_step = numpy_setup(sizes, batch, dtype)
    lp_step, _ = leanpass_setup(sizes, batch, dtype)
    a = [np_step() for _ in range(3)]
    b = [lp_step() for _ in range(3)]
    tol = 1e-4 if np.dtype(dtype) == np.float32 else 1e-10
    if not np.allclose(a, b, rtol=tol, atol=tol):
        raise SystemExit(f"the two steps disagree: numpy {a} vs leanpass {b}")


def time_pair(sizes: list[int], batch: int, dtype: Any, repeats: int, inner: int,
              gauge: Gauge | None = None) -> dict[str, float]:
    """Median time per step of each side, timed alternately, on the very same batch arrays
    (``gauge``, when given, is sampled every ten rounds)."""
    check_same_losses(sizes, batch, dtype)
    data = make_data(sizes, batch, dtype)
    np_step = numpy_setup(sizes, batch, dtype, data)
    lp_step, _ = leanpass_setup(sizes, batch, dtype, data)
    for _ in range(max(3, inner)):  # warm-up
        np_step()
        lp_step()
    t_np: list[float] = []
    t_lp: list[float] = []
    clock = time.perf_counter
    gc.collect()
    # The garbage collector stays on, as in a real training loop: anything the step leaves in
    # reference cycles is paid for here.
    for r in range(repeats):
        if gauge is not None and r % 10 == 0:
            gauge.sample()
        sides = [(np_step, t_np), (lp_step, t_lp)]
        if r % 2:
            sides.reverse()
        for fn, out in sides:
            t0 = clock()
            for _ in range(inner):
                fn()
            out.append((clock() - t0) / inner)
    np_med, lp_med = statistics.median(t_np), statistics.median(t_lp)
    return {"numpy_ms": np_med * 1e3, "leanpass_ms": lp_med * 1e3, "ratio": lp_med / np_med}


# ----- memory (each side in a fresh process) ----------------------------------------------------------
def _rss_now() -> int:
    """Current resident memory in bytes (Linux /proc), or 0 where unavailable."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except OSError:
        return 0


def _peak_rss() -> int:
    """This process's peak resident memory in bytes.

    On Linux, VmHWM from /proc (ru_maxrss would include the parent's peak: a child started by
    fork or vfork inherits it across exec). Elsewhere, ru_maxrss.
    """
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, kilobytes on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale


def memory_child(side: str, steps: int) -> None:
    """Run ``steps`` steps of the large MLP and print peak RSS (and RSS samples) as JSON."""
    sizes, batch, dtype = [784, 256, 128, 10], 128, np.float32
    if side == "numpy":
        step = numpy_setup(sizes, batch, dtype)
    else:
        step, _ = leanpass_setup(sizes, batch, dtype)
    samples = []
    for i in range(steps):
        step()
        if (i + 1) % max(1, steps // 10) == 0:
            samples.append(_rss_now())
    print(json.dumps({"peak_rss_mb": _peak_rss() / 2**20, "rss_samples_mb": [s / 2**20 for s in samples]}))


def run_child(side: str, steps: int, blas_threads: int = 0) -> dict[str, Any]:
    out = subprocess.run([sys.executable, __file__, "--memory-child", side, "--steps", str(steps),
                          "--blas-threads", str(blas_threads)],
                         check=True, capture_output=True, text=True)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats (noisier)")
    parser.add_argument("--memory-child", choices=["numpy", "leanpass"], help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, default=100, help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help="print the figures as JSON too")
    parser.add_argument("--blas-threads", type=int, default=0, metavar="N",
                        help="set OpenBLAS to N threads for both sides (default 0: NumPy's default)")
    args = parser.parse_args(argv)
    if args.memory_child:
        if args.blas_threads > 0:
            from leanpass.examples.digits import limit_blas_threads

            limit_blas_threads(args.blas_threads)
        memory_child(args.memory_child, args.steps)
        return
    import leanpass  # noqa: F401  (import cost outside the timings)

    if args.blas_threads > 0:
        from leanpass.examples.digits import limit_blas_threads

        limit_blas_threads(args.blas_threads)

    reps = 15 if args.quick else 60
    env = {k: v for k, v in os.environ.items() if k.startswith("OPENBLAS") or k.endswith("NUM_THREADS")}
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, {os.cpu_count()} cpus, env {env or '{}'}")
    figures: dict[str, Any] = {}
    gauge = Gauge()
    large = time_pair([784, 256, 128, 10], 128, np.float32, repeats=reps, inner=5, gauge=gauge)
    figures["large"] = large
    print(f"784-256-128-10 MLP, batch 128, float32: numpy {large['numpy_ms']:.3f} ms/step, "
          f"leanpass {large['leanpass_ms']:.3f} ms/step, ratio {large['ratio']:.2f}x (target <= 1.10x)")
    small = time_pair([64, 32, 10], 32, np.float64, repeats=reps, inner=50, gauge=gauge)
    gauge.sample()
    figures["small"] = small
    print(f"64-32-10 MLP, batch 32, float64:        numpy {small['numpy_ms'] * 1e3:.1f} us/step, "
          f"leanpass {small['leanpass_ms'] * 1e3:.1f} us/step, ratio {small['ratio']:.2f}x (target <= 2.0x)")
    mem_np = run_child("numpy", 100, args.blas_threads)
    mem_lp = run_child("leanpass", 100, args.blas_threads)
    ratio = mem_lp["peak_rss_mb"] / mem_np["peak_rss_mb"]
    figures["memory"] = {"numpy_mb": mem_np["peak_rss_mb"], "leanpass_mb": mem_lp["peak_rss_mb"], "ratio": ratio}
    print(f"peak RSS, 100 steps of the large MLP: numpy {mem_np['peak_rss_mb']:.1f} MB, "
          f"leanpass {mem_lp['peak_rss_mb']:.1f} MB, ratio {ratio:.2f}x (target <= 1.25x)")
    long = run_child("leanpass", 2000, args.blas_threads)
    samples = long["rss_samples_mb"]
    growth = samples[-1] - samples[0]
    figures["flat"] = {"rss_mb_every_200_steps": samples, "growth_mb": growth}
    print(f"leanpass RSS every 200 of 2,000 steps (MB): {' '.join(f'{s:.1f}' for s in samples)} "
          f"(growth {growth:+.1f} MB from step 200 to 2,000)")
    print(gauge.report())
    figures["host_gauge_ms"] = [t * 1e3 for t in gauge.times]
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
