"""Engine overhead against hand-written NumPy, measured in the same run.

    python benchmarks/bench_engine.py            # all figures
    python benchmarks/bench_engine.py --quick    # fewer repeats
    python benchmarks/bench_engine.py --chain-runs 30 --skip-million   # the 100,000-op chain 30 times

Figures (issue 2):
  1. 300 x ``y = relu(y * 0.999 + 0.001)`` on size-4 arrays (900 ops), forward + backward,
     as a ratio to the same NumPy forward computation without gradients (target <= 4x).
  2. a chain of 100,000 multiplications, forward + backward (target < 0.5 s; the median of 7
     runs, with the fastest and slowest), and one of 1,000,000 (bench_torch.py measures the
     100,000-op chain beside PyTorch's, whose time the issue gives as the reference).
  3. what ``import leanpass`` adds to ``import numpy`` (target < 20 ms).
  4. (last) a table over every op in ``functional.OPS`` (issue 14): the op's forward with
     recording plus its backward pass, as a ratio to NumPy's forward of the same values, on
     inputs of about 10 and 100,000 elements (op_inputs.py builds them). ``--ops`` prints only
     the table, ``--skip-ops`` leaves it out.

The machine is shared and noisy, so the two sides are interleaved and medians are quoted. A
host gauge (host_gauge.py, a fixed Python loop) is timed between the measurements: its median
over its fastest says how much the host was slowed during the run.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import leanpass as lp  # noqa: E402
from leanpass import Tensor  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parent))
from host_gauge import Gauge  # noqa: E402

X0 = np.random.default_rng(0).random(4)


def numpy_forward() -> np.ndarray:
    y = X0
    for _ in range(300):
        y = np.maximum(y * 0.999 + 0.001, 0.0)
    return y


def leanpass_backward() -> Tensor | None:
    x = Tensor(X0, requires_grad=True)
    y = x
    for _ in range(300):
        y = (y * 0.999 + 0.001).relu()
    y.sum().backward()
    return x.grad


def leanpass_grad() -> np.ndarray:
    def f(x: Tensor) -> Tensor:
        y = x
        for _ in range(300):
            y = (y * 0.999 + 0.001).relu()
        return y.sum()

    return lp.grad(f)(X0)


def interleaved(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Median seconds of each function, the functions run in turn ``repeats`` times."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - start)
    return {k: statistics.median(v) for k, v in times.items()}


def chain(n: int) -> tuple[float, float]:
    """Seconds for the forward and the backward pass of ``n`` multiplications."""
    x = Tensor(np.ones(2), requires_grad=True)
    start = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0000001
    mid = time.perf_counter()
    y.sum().backward()
    end = time.perf_counter()
    if x.grad is None or not np.allclose(x.grad.numpy(), 1.0000001**n):
        raise RuntimeError("chain gradient is wrong")
    return mid - start, end - mid


def import_cost(repeats: int) -> float:
    """Median seconds ``import leanpass`` takes in a fresh interpreter that has imported NumPy."""
    # As a user has it: bytecode cached (pip compiles it at install), so let Python write it.
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    code = "import time, numpy; t = time.perf_counter(); import leanpass; print(time.perf_counter() - t)"

    def run() -> float:
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                             cwd=Path(__file__).resolve().parent.parent, env=env)
        return float(out.stdout)

    run()  # writes the bytecode cache once
    return statistics.median(run() for _ in range(repeats))


def op_table(repeats: int) -> None:
    """Per op: (forward with recording + backward) / NumPy's forward, at about 10 and 100,000 elements.

    The inputs are Tensors made once (as parameters are); each run records the op on them and
    runs ``.backward`` with a cotangent of ones made once.
    """
    from op_inputs import inputs

    from leanpass import functional as F

    print("per-op overhead: forward with recording + backward, over NumPy's forward (medians)")
    print(f"  {'op':<14}{'10 elements':>24}{'100,000 elements':>28}")
    for name in F.OPS:
        build = inputs(name)
        if build is None:
            print(f"  {name:<14}{'(no sample input in op_inputs.py)':>52}")
            continue
        cells = []
        for n, reps in ((10, repeats), (100_000, max(5, repeats // 10))):
            args, diff, forward = build(n)
            op = F.OPS[name]
            ins = [Tensor(a, requires_grad=True) if i in diff else a for i, a in enumerate(args)]
            leaves = [ins[i] for i in diff]
            first = lp.apply(op, name, *ins)
            ones = np.ones(first.shape, first.dtype)

            def recorded(ins: list = ins, leaves: list = leaves, op: object = op, ones: object = ones,
                         name: str = name) -> None:
                for leaf in leaves:
                    leaf.grad = None
                lp.apply(op, name, *ins).backward(ones)

            m = interleaved({"numpy": forward, "leanpass": recorded}, reps)
            cells.append(f"{m['numpy'] * 1e6:9.1f} us {m['leanpass'] / m['numpy']:7.1f}x")
        print(f"  {name:<14}{cells[0]:>24}{cells[1]:>28}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--skip-million", action="store_true", help="skip the 1,000,000-op chain")
    parser.add_argument("--chain-runs", type=int, default=0, metavar="N",
                        help="run the 100,000-op chain N times (default 7, 3 with --quick)")
    parser.add_argument("--ops", action="store_true", help="print only the per-op table")
    parser.add_argument("--skip-ops", action="store_true", help="leave out the per-op table")
    args = parser.parse_args()
    repeats = 40 if args.quick else 200
    if args.ops:
        op_table(repeats)
        return
    gauge = Gauge()

    gauge.sample()
    m = interleaved({"numpy": numpy_forward, "backward": leanpass_backward, "grad": leanpass_grad}, repeats)
    print(f"900-op chain of size-4 arrays (median of {repeats} runs)")
    print(f"  numpy forward            {m['numpy'] * 1e3:8.3f} ms")
    print(f"  leanpass fwd + backward  {m['backward'] * 1e3:8.3f} ms   ratio {m['backward'] / m['numpy']:.2f}x")
    print(f"  leanpass grad(f)         {m['grad'] * 1e3:8.3f} ms   ratio {m['grad'] / m['numpy']:.2f}x")

    gauge.sample()
    runs = []
    for _ in range(args.chain_runs or (3 if args.quick else 7)):
        runs.append(chain(100_000))
        gauge.sample()
    totals = sorted(f + b for f, b in runs)
    fwd, bwd = sorted(runs, key=sum)[len(runs) // 2]  # the median run
    print(f"100,000-multiplication chain, median of {len(runs)} runs: forward {fwd:.3f} s + backward "
          f"{bwd:.3f} s = {fwd + bwd:.3f} s (fastest {totals[0]:.3f} s, slowest {totals[-1]:.3f} s)")
    if not args.skip_million:
        fwd, bwd = chain(1_000_000)
        print(f"1,000,000-multiplication chain: forward {fwd:.2f} s + backward {bwd:.2f} s = {fwd + bwd:.2f} s")
        gauge.sample()

    cost = import_cost(7 if args.quick else 21)
    print(f"import leanpass adds {cost * 1e3:.1f} ms to import numpy (median)")
    gauge.sample()
    print(gauge.report())
    if not args.skip_ops:
        op_table(repeats)


if __name__ == "__main__":
    main()
