"""NumPy's functions on Tensors against NumPy itself, measured in the same run.

    python benchmarks/bench_ops.py           # both tables
    python benchmarks/bench_ops.py --quick   # fewer repeats
    python benchmarks/bench_ops.py --only einsum   # just the first table

1. Attention-shaped einsum, ``"bhqd,bhkd->bhqk"`` on (8, 8, 64, 64) inputs: ``lp.einsum``'s forward
   (no gradient wanted) and forward + backward, beside NumPy's ``np.einsum(..., optimize=True)``
   (its BLAS path) and NumPy's plain ``np.einsum`` (one C loop; what the op ran before it cached
   np.einsum_path's contraction order). Forward + backward is compared with NumPy computing the
   same three einsums (the product and both cotangents) with optimize=True.
2. Per op, the first-order overhead: recording the op and running its backward pass
   (``y = op(x); y.backward(g)`` on a leaf) over NumPy's own forward (``np.<name>(x)``), for 10-element and
   100,000-element inputs, with exp, tanh, sin, sum and max (hand-written rules) as the yardstick.

Medians of interleaved repeats; the machine is shared, so ratios matter more than times.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import leanpass as lp  # noqa: E402
from leanpass import Tensor  # noqa: E402


def best_of(fn: Callable[[], Any], number: int, repeats: int) -> list[float]:
    """Seconds per call, for each of ``repeats`` batches of ``number`` calls."""
    out = []
    for _ in range(repeats):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        out.append((time.perf_counter() - t) / number)
    return out


def interleaved(fns: dict[str, Callable[[], Any]], number: int, repeats: int) -> dict[str, float]:
    """The median seconds per call of each function, measured in alternation."""
    times: dict[str, list[float]] = {k: [] for k in fns}
    for _ in range(repeats):
        for k, f in fns.items():
            times[k] += best_of(f, number, 1)
    return {k: statistics.median(v) for k, v in times.items()}


def attention_einsum(repeats: int) -> None:
    rng = np.random.default_rng(0)
    q, k = rng.standard_normal((8, 8, 64, 64)), rng.standard_normal((8, 8, 64, 64))
    g = rng.standard_normal((8, 8, 64, 64))
    s = "bhqd,bhkd->bhqk"
    qt, kt = Tensor(q, requires_grad=True), Tensor(k, requires_grad=True)
    lp.einsum(s, qt, kt)  # (the first call chooses and caches the path)

    def lp_both() -> None:
        lp.einsum(s, qt, kt).backward(g)

    def np_both() -> None:
        np.einsum(s, q, k, optimize=True)
        np.einsum("bhqk,bhkd->bhqd", g, k, optimize=True)
        np.einsum("bhqk,bhqd->bhkd", g, q, optimize=True)

    t = interleaved({
        "lp": lambda: lp.einsum(s, Tensor(q), Tensor(k)),
        "np optimize=True": lambda: np.einsum(s, q, k, optimize=True),
        "np plain": lambda: np.einsum(s, q, k),
        "lp fwd+bwd": lp_both,
        "np fwd+bwd": np_both,
    }, 2, repeats)
    print(f'einsum "{s}" on (8, 8, 64, 64): medians of {repeats}')
    print(f"  lp.einsum forward        {t['lp'] * 1e3:7.2f} ms  = {t['lp'] / t['np optimize=True']:.2f}x "
          "np.einsum(optimize=True)")
    print(f"  np.einsum(optimize=True) {t['np optimize=True'] * 1e3:7.2f} ms")
    print(f"  np.einsum (plain)        {t['np plain'] * 1e3:7.2f} ms  = "
          f"{t['np plain'] / t['np optimize=True']:.2f}x np.einsum(optimize=True)")
    print(f"  lp forward + backward    {t['lp fwd+bwd'] * 1e3:7.2f} ms  = "
          f"{t['lp fwd+bwd'] / t['np fwd+bwd']:.2f}x NumPy's three einsums with optimize=True")


def square(seed: int, n: int) -> np.ndarray:
    return np.random.default_rng(seed).uniform(0.2, 0.9, n)


# name -> (LeanPass function of one Tensor, NumPy's forward on the array); inputs in (0.2, 0.9)
OPS: dict[str, tuple[Callable[[Any], Any], Callable[[Any], Any]]] = {
    # ops with hand-written rules, the yardstick
    "exp": (lp.exp, np.exp),
    "tanh": (lp.tanh, np.tanh),
    "sin": (lp.sin, np.sin),
    "sum": (lp.sum, np.sum),
    "max": (lp.max, np.max),
    # the elementwise table
    "log1p": (lp.log1p, np.log1p),
    "expm1": (lp.expm1, np.expm1),
    "tan": (lp.tan, np.tan),
    "arcsin": (lp.arcsin, np.arcsin),
    "sinh": (lp.sinh, np.sinh),
    "cbrt": (lp.cbrt, np.cbrt),
    "sinc": (lp.sinc, np.sinc),
    "floor": (lp.floor, np.floor),
    "arctan2": (lambda t: lp.arctan2(t, t), lambda x: np.arctan2(x, x)),
    "hypot": (lambda t: lp.hypot(t, t), lambda x: np.hypot(x, x)),
    "fmax": (lambda t: lp.fmax(t, 0.5), lambda x: np.fmax(x, 0.5)),
    "remainder": (lambda t: lp.remainder(t, 0.3), lambda x: np.remainder(x, 0.3)),
    # reductions and scans
    "prod": (lp.prod, np.prod),
    "cumsum": (lp.cumsum, np.cumsum),
    "cumprod": (lp.cumprod, np.cumprod),
    "sort": (lp.sort, np.sort),
    "median": (lp.median, np.median),
    "diff": (lp.diff, np.diff),
    # arranging and products
    "flip": (lp.flip, np.flip),
    "roll": (lambda t: lp.roll(t, 3), lambda x: np.roll(x, 3)),
    "tile": (lambda t: lp.tile(t, 2), lambda x: np.tile(x, 2)),
    "outer": (lambda t: lp.outer(t[:10], t[:10]), lambda x: np.outer(x[:10], x[:10])),
    "dot": (lambda t: lp.dot(t, t), lambda x: np.dot(x, x)),
}


def per_op(repeats: int) -> None:
    print(f"\nper-op first-order overhead: (record + backward) / NumPy forward, the median ratio of {repeats} "
          "back-to-back pairs (and LeanPass's time)")
    print(f"  {'op':<10} {'10 elements':>22} {'100,000 elements':>24}")
    for name, (lp_fn, np_fn) in OPS.items():
        cells = []
        for n, number in ((10, 3000), (100_000, 20)):
            x = square(1, n)
            leaf = Tensor(x, requires_grad=True)
            g = np.ones(np.shape(lp_fn(leaf)._data))

            def recorded(leaf: Tensor = leaf, g: np.ndarray = g, lp_fn: Any = lp_fn) -> None:
                leaf.grad = None
                lp_fn(leaf).backward(g)

            ratios, times = [], []
            for _ in range(repeats):
                t_np = best_of(lambda x=x, np_fn=np_fn: np_fn(x), number, 1)[0]
                t_lp = best_of(recorded, number, 1)[0]
                ratios.append(t_lp / t_np)
                times.append(t_lp)
            cells.append(f"{statistics.median(ratios):6.1f}x {statistics.median(times) * 1e6:9.1f} us")
        print(f"  {name:<10} {cells[0]:>22} {cells[1]:>24}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--only", choices=("einsum", "ops"), help="just one of the two tables")
    args = parser.parse_args()
    if args.only != "ops":
        attention_einsum(5 if args.quick else 11)
    if args.only != "einsum":
        per_op(3 if args.quick else 7)


if __name__ == "__main__":
    main()
