"""The fused ops of a GPT training step against PyTorch eager (CPU), in one run, one BLAS thread.

    pip install torch            # not a LeanPass dependency; this script only compares
    python benchmarks/bench_gpt_ops.py [--rounds 9]

Sizes are those of a small GPT's step (batch 16, block 64, n_embd 128, MLP width 512):
``erf``/``erfc`` on 524,288 values (forward), the exact GELU on (16, 64, 512) and ``layer_norm`` on
(16, 64, 128) (forward and backward through ``.backward()``), and a linear layer on a 3-D input
(16, 64, 128) -> 512 (forward and backward: input, weight and bias gradients). Each case runs
LeanPass and PyTorch (and hand-written NumPy where it has the op) alternately, a few calls per block,
blocks in a shuffled order; the figures are medians over the rounds of CPU time per call
(``time.process_time``) and of the per-round ratio to PyTorch.
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import time
from collections.abc import Callable

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass

import leanpass as lp  # noqa: E402


def _per_call(fn: Callable[[], object], calls: int) -> float:
    start = time.process_time()
    for _ in range(calls):
        fn()
    return (time.process_time() - start) / calls


def _cases(dtype: type) -> dict[str, dict[str, Callable[[], object]]]:
    import torch

    rng = np.random.default_rng(0)
    flat = rng.standard_normal(16 * 64 * 512).astype(dtype)
    t_flat = torch.from_numpy(flat)
    cases: dict[str, dict[str, Callable[[], object]]] = {
        "erf": {"leanpass": lambda: lp.erf(flat), "torch": lambda: torch.erf(t_flat)},
        "erfc": {"leanpass": lambda: lp.erfc(flat), "torch": lambda: torch.erfc(t_flat)},
    }

    h = flat.reshape(16, 64, 512)
    gh = rng.standard_normal(h.shape).astype(dtype)
    t_gh = torch.from_numpy(gh)

    def lp_gelu() -> None:
        t = lp.Tensor(h, requires_grad=True)
        lp.gelu(t, approximate="none").backward(gh)

    def torch_gelu() -> None:
        t = torch.from_numpy(h).requires_grad_()
        torch.nn.functional.gelu(t).backward(t_gh)

    cases["gelu exact fwd+bwd"] = {"leanpass": lp_gelu, "torch": torch_gelu}

    x = rng.standard_normal((16, 64, 128)).astype(dtype)
    gx = rng.standard_normal(x.shape).astype(dtype)
    w, b = (1 + 0.1 * rng.standard_normal(128)).astype(dtype), (0.1 * rng.standard_normal(128)).astype(dtype)
    lw, lb = lp.Tensor(w, requires_grad=True), lp.Tensor(b, requires_grad=True)
    tw, tb = torch.from_numpy(w).requires_grad_(), torch.from_numpy(b).requires_grad_()
    t_gx = torch.from_numpy(gx)

    def lp_ln() -> None:
        t = lp.Tensor(x, requires_grad=True)
        lp.layer_norm(t, 128, lw, lb).backward(gx)

    def torch_ln() -> None:
        t = torch.from_numpy(x).requires_grad_()
        torch.nn.functional.layer_norm(t, (128,), tw, tb).backward(t_gx)

    def numpy_ln() -> None:  # the same forward and backward, written by hand
        rows = x.reshape(-1, 128)
        mean = rows.mean(axis=1, keepdims=True)
        c = rows - mean
        rstd = 1 / np.sqrt((c * c).mean(axis=1, keepdims=True) + 1e-5)
        xhat = c * rstd
        _ = xhat * w + b
        g = gx.reshape(-1, 128)
        _ = (g * xhat).sum(0), g.sum(0)
        gh_ = g * w
        _ = (gh_ - gh_.mean(1, keepdims=True) - xhat * (gh_ * xhat).mean(1, keepdims=True)) * rstd

    cases["layer_norm fwd+bwd"] = {"leanpass": lp_ln, "torch": torch_ln, "numpy": numpy_ln}

    w2 = (rng.standard_normal((128, 512)) / 11).astype(dtype)
    b2 = np.zeros(512, dtype)
    gy = rng.standard_normal((16, 64, 512)).astype(dtype)
    lw2, lb2 = lp.Tensor(w2, requires_grad=True), lp.Tensor(b2, requires_grad=True)
    tw2 = torch.from_numpy(np.ascontiguousarray(w2.T)).requires_grad_()  # (PyTorch's (out, in) layout)
    tb2 = torch.from_numpy(b2).requires_grad_()
    t_gy = torch.from_numpy(gy)

    def lp_linear() -> None:
        t = lp.Tensor(x, requires_grad=True)
        lp.linear(t, lw2, lb2).backward(gy)

    def torch_linear() -> None:
        t = torch.from_numpy(x).requires_grad_()
        torch.nn.functional.linear(t, tw2, tb2).backward(t_gy)

    def numpy_linear() -> None:
        x2, g2 = x.reshape(-1, 128), gy.reshape(-1, 512)
        _ = x2 @ w2 + b2
        _ = g2 @ w2.T, x2.T @ g2, g2.sum(0)

    cases["linear 3-D fwd+bwd"] = {"leanpass": lp_linear, "torch": torch_linear, "numpy": numpy_linear}
    return cases


def main() -> None:
    import torch

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"numpy {np.__version__}, torch {torch.__version__}, one thread, CPU time per call (medians of "
          f"{args.rounds} rounds)")
    for dtype in (np.float32, np.float64):
        cases = _cases(dtype)
        for name, sides in cases.items():
            for fn in sides.values():  # (warm up: first-touch pages, caches)
                fn()
            times: dict[str, list[float]] = {side: [] for side in sides}
            ratios: dict[str, list[float]] = {side: [] for side in sides if side != "torch"}
            for _ in range(args.rounds):
                order = list(sides)
                random.shuffle(order)
                now = {side: _per_call(sides[side], args.calls) for side in order}
                for side, t in now.items():
                    times[side].append(t)
                    if side != "torch":
                        ratios[side].append(t / now["torch"])
            parts = [f"torch {statistics.median(times['torch']) * 1e3:.3f} ms"]
            for side in ratios:
                parts.append(f"{side} {statistics.median(times[side]) * 1e3:.3f} ms = "
                             f"{statistics.median(ratios[side]):.2f}x torch")
            print(f"{np.dtype(dtype).name:8s} {name:20s} " + ", ".join(parts), flush=True)


if __name__ == "__main__":
    main()
