"""Data-parallel training over MPI: throughput of 2 processes against 1, and the all-reduce's cost.

    python benchmarks/bench_distributed.py [--rounds 5] [--steps 40]

Trains the 784-256-128-10 MLP (float32, Adam, the functional style) at a global batch of 512:
one process takes the whole batch, two take 256 each and average their gradients with
``leanpass.distributed.all_reduce_mean``. Each run is its own ``mpiexec -n 1`` or ``-n 2`` job,
with one BLAS thread per process (set before NumPy loads); the runs alternate (1, 2, 2, 1,
1, 2, ...) so a change in the machine's load falls on both alike, and each line shows the
load average when its run started. Throughput is wall clock: global examples per second between
two barriers around the timed steps.

A third kind of run, two independent processes that each train on their half with no
all-reduce, shows what the machine gives two processes at that moment: on a loaded machine
that ceiling, not the all-reduce, bounds the 2-process figure.

Then, in the 2-process jobs, the all-reduce of the MLP's gradients (a model-shaped tree of six
arrays, 235,146 floats) against one bare mpi4py ``Allreduce`` of a float32 buffer of that size,
timed between barriers in a random order with random pauses between them (so that no kind of
call keeps one phase of the machine's periodic work); and the all-reduce's share of a training step on rank 0
(time inside ``all_reduce_mean``, waiting for the other rank included, over the step's time).
On a shared machine the medians carry the other jobs' load; the 10th percentiles of each run's
step and all-reduce times are printed beside them (the least disturbed steps and calls).
Needs the mpi extra: ``pip install -e ".[mpi]"`` in the clone (mpi4py and the MPICH wheel).
"""

from __future__ import annotations

import os

for _name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_name] = "1"  # before NumPy is imported: one BLAS thread per process

import argparse  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402

import numpy as np  # noqa: E402

GLOBAL_BATCH = 512
SIZES = [784, 256, 128, 10]


def worker(steps: int, reps: int, independent: bool = False) -> None:
    """One job's measurements (run under mpiexec); rank 0 prints them as one JSON line."""
    from mpi4py import MPI

    import leanpass as lp
    from leanpass import data, distributed, losses, nn, optim

    comm = MPI.COMM_WORLD
    rank, size = distributed.rank(), distributed.world_size()
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH * 4, SIZES[0])).astype(np.float32)
    y = rng.integers(0, SIZES[-1], size=len(x))
    model = distributed.broadcast(nn.MLP(SIZES, rng=1))
    opt = optim.adam(1e-3)
    state = opt.init(model)
    value_and_grad = lp.value_and_grad(lambda m, xb, yb: losses.cross_entropy(m(xb), yb))
    order = np.random.default_rng(2)

    def shards():
        while True:
            yield from data.batches(x, y, batch_size=GLOBAL_BATCH, rng=order, shard=(rank, size))

    feed = shards()
    reduce_seconds = 0.0

    def step() -> None:
        nonlocal model, state, reduce_seconds
        xb, yb = next(feed)
        _, grads = value_and_grad(model, xb, yb)
        if not independent:  # independent: each process its own model on its half (the machine's ceiling)
            t = time.perf_counter()
            grads = distributed.all_reduce_mean(grads)
            reduce_seconds += time.perf_counter() - t
        updates, state = opt.update(grads, state, model)
        model = optim.apply_updates(model, updates)

    for _ in range(5):
        step()
    reduce_seconds = 0.0
    comm.Barrier()
    start = time.perf_counter()
    ends = []
    for _ in range(steps):
        step()
        ends.append(time.perf_counter())
    comm.Barrier()
    seconds = time.perf_counter() - start
    durations = np.diff([start, *ends])
    result = {"size": size, "examples_per_s": steps * GLOBAL_BATCH / seconds, "step_ms": 1e3 * seconds / steps,
              "reduce_share": reduce_seconds / seconds, "p10_step_ms": 1e3 * float(np.percentile(durations, 10))}
    if size > 1 and not independent:  # the all-reduce alone, against a bare Allreduce of one buffer of the same size
        _, grads = value_and_grad(model, x[:8], y[:8])
        n = sum(leaf.size for leaf in lp.tree_flatten(grads)[0])
        bare = np.ones(n, dtype=np.float32)
        source = np.ones(n, dtype=np.float32)
        times: dict[str, list[float]] = {"ours": [], "bare": [], "after_work": []}
        order = np.random.default_rng(3)  # the same on every rank

        def timed(kind: str) -> None:
            comm.Barrier()
            if kind == "after_work":  # the bare call with a copy of that size between the barrier and the timer
                np.copyto(bare, source)
            t = time.perf_counter()
            if kind == "ours":
                distributed.all_reduce_mean(grads)
            else:
                comm.Allreduce(MPI.IN_PLACE, bare, op=MPI.SUM)
            times[kind].append(time.perf_counter() - t)

        for _ in range(reps):  # a random order and a random pause: no kind keeps one phase of the machine's ticks
            for kind in order.permutation(list(times)):
                time.sleep(order.uniform(0, 0.005))
                timed(str(kind))
        ours, theirs, after_work = times["ours"], times["bare"], times["after_work"]
        result.update(floats=n, ours_ms=1e3 * statistics.median(ours), bare_ms=1e3 * statistics.median(theirs),
                      ours_p10_ms=1e3 * float(np.percentile(ours, 10)),
                      bare_p10_ms=1e3 * float(np.percentile(theirs, 10)),
                      bare_after_work_ms=1e3 * statistics.median(after_work))
    if rank == 0:
        print(json.dumps(result), flush=True)


def load() -> str:
    with open("/proc/loadavg") as f:
        return " ".join(f.read().split()[:3])


def launch(n: int, steps: int, reps: int, independent: bool = False) -> dict[str, float]:
    here = Path(sys.executable).parent / "mpiexec"
    mpiexec = str(here) if here.exists() else shutil.which("mpiexec")
    if mpiexec is None:
        raise SystemExit('mpiexec not found: pip install -e ".[mpi]" (mpi4py and the MPICH wheel)')
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(root), os.environ.get("PYTHONPATH")])))
    cmd = [mpiexec, "-launcher", "fork", "-n", str(n), sys.executable, __file__, "--worker",
           "--steps", str(steps), "--reps", str(reps), *(["--independent"] if independent else [])]
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    if proc.returncode:
        raise SystemExit(f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="runs of each (default 5)")
    parser.add_argument("--steps", type=int, default=40, help="timed steps per run (default 40)")
    parser.add_argument("--reps", type=int, default=200, help="all-reduces timed per 2-process run (default 200)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--independent", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args.steps, args.reps, args.independent)
        return
    print(f"MLP {'-'.join(map(str, SIZES))}, float32, global batch {GLOBAL_BATCH}, {args.steps} steps a run, "
          f"one BLAS thread per process, {os.cpu_count()} cores")
    runs: dict[int, list[dict[str, float]]] = {1: [], 2: [], 0: []}  # 0: two independent processes
    for i in range(args.rounds):
        for n in ((1, 2, 0) if i % 2 == 0 else (0, 2, 1)):
            before = load()
            r = launch(n or 2, args.steps, args.reps, independent=n == 0)
            runs[n].append(r)
            extra = ""
            if n == 0:
                extra = "  (two independent processes, no all-reduce: what the machine gives two processes now)"
            if n == 2:
                extra = (f"  all-reduce {100 * r['reduce_share']:4.1f}% of the step; alone {r['ours_ms']:.3f} ms "
                         f"vs bare Allreduce {r['bare_ms']:.3f} ms ({r['ours_ms'] / r['bare_ms']:.2f}x; fastest tenth "
                         f"{r['ours_p10_ms']:.3f} vs {r['bare_p10_ms']:.3f} ms)")
            print(f"round {i + 1}  {n or 2} process{'es' if n != 1 else '  '}  {r['examples_per_s']:8.0f} examples/s  "
                  f"step {r['step_ms']:6.2f} ms{extra}   [load avg {before}]", flush=True)

    def med(n: int, key: str) -> float:
        return statistics.median(r[key] for r in runs[n])

    one, two = med(1, "examples_per_s"), med(2, "examples_per_s")
    pairs = [b["examples_per_s"] / a["examples_per_s"] for a, b in zip(runs[1], runs[2])]
    print(f"medians: 1 process {one:.0f} examples/s, 2 processes {two:.0f} examples/s: {two / one:.2f}x "
          f"(median of the rounds' own ratios {statistics.median(pairs):.2f}x; target >= 1.6x)")
    fast1, fast2 = med(1, "p10_step_ms"), med(2, "p10_step_ms")
    print(f"  the same from the 10th percentile of each run's step times (the least disturbed steps): "
          f"{fast1:.2f} ms vs {fast2:.2f} ms a step: {fast1 / fast2:.2f}x")
    ceiling = med(0, "examples_per_s")
    print(f"  two independent processes (no all-reduce) reached {ceiling:.0f} examples/s: {ceiling / one:.2f}x one "
          "process, the most two processes could get from the machine in these runs")
    print(f"all-reduce share of a 2-process step: {100 * med(2, 'reduce_share'):.1f}% (median)")
    ratio = statistics.median(r["ours_ms"] / r["bare_ms"] for r in runs[2])
    print(f"all-reduce of the MLP's gradients ({int(runs[2][0]['floats']):,} floats): {med(2, 'ours_ms'):.3f} ms vs "
          f"a bare Allreduce of one buffer {med(2, 'bare_ms'):.3f} ms: {ratio:.2f}x (median; target <= 1.5x)")
    print(f"  the bare Allreduce timed after an untimed copy of the same size between the barrier and the call: "
          f"{med(2, 'bare_after_work_ms'):.3f} ms (median; a control: work before the call, as the packing is)")
    p10 = statistics.median(r["ours_p10_ms"] / r["bare_p10_ms"] for r in runs[2])
    print(f"  the same at the 10th percentile of each run's times (the least disturbed calls): "
          f"{med(2, 'ours_p10_ms'):.3f} ms vs {med(2, 'bare_p10_ms'):.3f} ms: {p10:.2f}x")
    print(f"load average now: {load()}")


if __name__ == "__main__":
    main()
