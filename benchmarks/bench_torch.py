"""LeanPass against PyTorch eager (CPU) on the issues' figures, in the same run.

    pip install torch            # not a LeanPass dependency; this script only compares
    python benchmarks/bench_torch.py

The issues give PyTorch's times on the development machine as reference points (the
100,000-op chain "under 0.5 s, PyTorch about 1 s"; the 900-op chain "PyTorch eager about 8x";
the MLP steps "PyTorch eager 1.34x" and "about 6x" NumPy). On a shared machine an absolute time
moves with the host's speed, so this script measures PyTorch beside LeanPass:

  1. the 100,000-multiplication chain, forward + backward, the two alternately (7 pairs):
     LeanPass's time over PyTorch's (the issue's target is half of PyTorch's second);
  2. the 900-op chain, as a ratio to NumPy's forward, each library interleaved with NumPy;
  3. the two MLP steps of bench_mlp.py, as ratios to its NumPy step, each library against
     NumPy in a random order of blocks. PyTorch is written as its users write it
     (``nn.Sequential``, ``CrossEntropyLoss``, ``optim.SGD``). Both run one thread here: with
     two each on a 2-core machine, PyTorch's and OpenBLAS's worker threads wait for work by
     spinning and slow each other's next call.

Each library is measured in a process of its own (the two alternate): ``import torch`` adds
about 145,000 objects for Python's garbage collector to walk, which slowed LeanPass's 100,000-op
chain from 0.34 s to 0.41-0.68 s when both shared a process.
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_engine  # noqa: E402
import bench_mlp  # noqa: E402
from host_gauge import Gauge  # noqa: E402

# torch is imported inside the functions that use it, so that LeanPass's own processes never load it.


def torch_chain(n: int) -> float:
    """Seconds for the forward and backward pass of ``n`` multiplications in PyTorch."""
    import torch

    x = torch.ones(2, dtype=torch.float64, requires_grad=True)
    start = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0000001
    y.sum().backward()
    return time.perf_counter() - start


def torch_900() -> Any:
    import torch

    x = torch.tensor(bench_engine.X0, requires_grad=True)
    y = x
    for _ in range(300):
        y = (y * 0.999 + 0.001).relu()
    y.sum().backward()
    return x.grad


def torch_step(sizes: list[int], data: bench_mlp.Data) -> Callable[[], float]:
    """One training step of the MLP in PyTorch, as its users write it, from the same weights."""
    import torch

    params, x, y = data
    dtype = torch.float32 if params[0].dtype == np.float32 else torch.float64
    layers: list[Any] = []
    for i in range(len(sizes) - 1):
        layer = torch.nn.Linear(sizes[i], sizes[i + 1], dtype=dtype)
        with torch.no_grad():  # (PyTorch keeps a weight as (out, in))
            layer.weight.copy_(torch.from_numpy(params[2 * i].T.copy()))
            layer.bias.copy_(torch.from_numpy(params[2 * i + 1]))
        layers += [layer, torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1])
    opt = torch.optim.SGD(model.parameters(), lr=bench_mlp.LR)
    loss_fn = torch.nn.CrossEntropyLoss()
    xb, yb = torch.from_numpy(x), torch.from_numpy(y)

    def step() -> float:
        opt.zero_grad()
        loss = loss_fn(model(xb), yb)
        loss.backward()
        opt.step()
        return float(loss.item())

    return step


def step_ratio(sizes: list[int], batch: int, dtype: Any, inner: int, side: str,
               rounds: int = 150) -> float:
    """Median step time of ``side`` over NumPy's, blocks of ``inner`` steps in a random order."""
    data = bench_mlp.make_data(sizes, batch, dtype)
    other = bench_mlp.leanpass_setup(sizes, batch, dtype, data)[0] if side == "leanpass" else torch_step(sizes, data)
    steps = {"numpy": bench_mlp.numpy_setup(sizes, batch, dtype, data), side: other}
    first = [step() for step in steps.values()]
    if not np.isclose(first[0], first[1], rtol=1e-4):
        raise SystemExit(f"the steps disagree: numpy {first[0]}, {side} {first[1]}")
    for _ in range(5):
        for step in steps.values():
            step()
    names = list(steps)
    times: dict[str, list[float]] = {name: [] for name in names}
    order = random.Random(0)
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            step = steps[name]
            start = time.perf_counter()
            for _ in range(inner):
                step()
            times[name].append((time.perf_counter() - start) / inner)
    return statistics.median(times[side]) / statistics.median(times["numpy"])


def worker(task: str, side: str) -> Any:
    """One measurement of ``side`` ("leanpass" or "torch") in this process (see the docstring)."""
    if task == "chain":
        runs = [sum(bench_engine.chain(100_000)) if side == "leanpass" else torch_chain(100_000) for _ in range(3)]
        return statistics.median(runs)
    if task == "900":
        fn = bench_engine.leanpass_backward if side == "leanpass" else torch_900
        m = bench_engine.interleaved({"numpy": bench_engine.numpy_forward, side: fn}, 200)
        return m[side] / m["numpy"]
    from leanpass.examples.digits import limit_blas_threads

    limit_blas_threads(1)
    if side == "torch":
        import torch

        torch.set_num_threads(1)
    return [step_ratio([784, 256, 128, 10], 128, np.float32, 3, side),
            step_ratio([64, 32, 10], 32, np.float64, 30, side)]


def measure(task: str, side: str) -> Any:
    out = subprocess.run([sys.executable, __file__, "--worker", task, side], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) == 4 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2], sys.argv[3])))
        return
    try:
        from importlib.metadata import version

        torch_version = version("torch")
    except ImportError:
        raise SystemExit("bench_torch.py compares with PyTorch: install it first (pip install torch)") from None
    gauge = Gauge()
    print(f"torch {torch_version}, numpy {np.__version__}, python {sys.version.split()[0]}")
    ours, theirs = [], []
    for _ in range(7):
        gauge.sample()
        ours.append(measure("chain", "leanpass"))
        theirs.append(measure("chain", "torch"))
    gauge.sample()
    a, b = statistics.median(ours), statistics.median(theirs)
    pairs = " ".join(f"{x / y:.2f}" for x, y in zip(ours, theirs))
    print(f"100,000-multiplication chain: leanpass {a:.3f} s, torch {b:.3f} s (medians of 7 processes, each the "
          f"median of 3 runs); leanpass / torch {a / b:.2f} (pair by pair: {pairs}; target: half of torch's time)")
    ours900, theirs900 = measure("900", "leanpass"), measure("900", "torch")
    print(f"900-op chain, forward + backward over NumPy's forward: leanpass {ours900:.2f}x, torch {theirs900:.2f}x")
    gauge.sample()
    ours_mlp, theirs_mlp = measure("mlp", "leanpass"), measure("mlp", "torch")
    for i, name in enumerate(["784-256-128-10", "64-32-10"]):
        print(f"{name} MLP step over NumPy's (one thread each): leanpass {ours_mlp[i]:.2f}x, "
              f"torch {theirs_mlp[i]:.2f}x")
    gauge.sample()
    print(gauge.report())


if __name__ == "__main__":
    main()
