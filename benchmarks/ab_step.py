"""Compare variants of LeanPass's code on the large MLP step, in one process, in a random order.

    python benchmarks/ab_step.py               # relu's VJP: today's rule against g * sign(ans)
    python benchmarks/ab_step.py --same        # the same rule twice: how far apart equal code measures

A variant is a function that installs some code (usually by assigning a module attribute).
One model and one batch serve every variant: before each block of steps the variant's code is
installed, and each round runs the blocks (and a NumPy block, for the ratio) in a random order.
A fixed or alternating order is not enough: a block that follows a block of itself finds its
arrays still in the caches, which moved two copies of the same code 1%-3% apart, more than most
of the effects worth measuring (see docs/performance.md, "Measuring a change").
"""

from __future__ import annotations

import argparse
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


def compare(variants: dict[str, Callable[[], None]], rounds: int = 300, inner: int = 3,
            seed: int = 0) -> dict[str, float]:
    """Median step time of each variant over NumPy's, on the 784-256-128-10 MLP (float32, batch 128)."""
    sizes, batch, dtype = [784, 256, 128, 10], 128, np.float32
    data = bench_mlp.make_data(sizes, batch, dtype)
    numpy_step = bench_mlp.numpy_setup(sizes, batch, dtype, data)
    leanpass_step, _ = bench_mlp.leanpass_setup(sizes, batch, dtype, data)
    names = ["numpy", *variants]
    times: dict[str, list[float]] = {name: [] for name in names}
    for _ in range(10):  # warm-up
        numpy_step()
        leanpass_step()
    order = random.Random(seed)
    for _ in range(rounds):
        order.shuffle(names)
        for name in names:
            if name == "numpy":
                step = numpy_step
            else:
                variants[name]()
                step = leanpass_step
            start = time.perf_counter()
            for _ in range(inner):
                step()
            times[name].append((time.perf_counter() - start) / inner)
    base = statistics.median(times["numpy"])
    return {name: statistics.median(times[name]) / base for name in variants}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--same", action="store_true", help="compare today's rule with itself")
    parser.add_argument("--rounds", type=int, default=300)
    args = parser.parse_args(argv)
    from leanpass.functional import unary

    today = unary._relu_vjp

    def product(ans: Any, g: Any) -> tuple[Any]:  # the rule before: a third array for the product
        return (g * np.sign(ans),)

    def install(rule: Callable[..., tuple[Any]]) -> Callable[[], None]:
        def put() -> None:
            unary._relu_vjp = rule

        return put

    other = today if args.same else product
    ratios = compare({"today": install(today), "other": install(other)}, args.rounds)
    label = "the same rule again" if args.same else "g * sign(ans)"
    print(f"relu's VJP, large MLP step over NumPy's: today {ratios['today']:.3f}x, {label} {ratios['other']:.3f}x")
    unary._relu_vjp = today


if __name__ == "__main__":
    main()
