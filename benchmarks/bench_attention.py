"""``lp.scaled_dot_product_attention`` forward + backward against PyTorch, in the same run.

    python benchmarks/bench_attention.py [--rounds 9] [--dtype float32]

Batch 16, 4 heads, head dim 32, causal, sequence lengths 64, 128 and 256; one BLAS / torch thread,
CPU time (``time.process_time``). Each round times a block of steps of each side in a shuffled
order; the figures are medians over the rounds of LeanPass's time over PyTorch's. PyTorch runs
``F.scaled_dot_product_attention`` on its math path (``sdpa_kernel(SDPBackend.MATH)``) and, as a
second column, the manual attention users write (``softmax(q @ k.T * scale + mask) @ v``, nanoGPT's
path without flash). Without torch installed only LeanPass's milliseconds are printed.

Then ``nn.CausalSelfAttention`` (n_embd 128, 4 heads, T 64, batch 16: nanoGPT's attention at the
size of the GPT benchmark) forward + backward against nanoGPT's module in PyTorch (math path).
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

B, H, E = 16, 4, 32


def leanpass_step(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray) -> Callable[[], None]:
    def step() -> None:
        tq, tk, tv = (lp.Tensor(a, requires_grad=True) for a in (q, k, v))
        lp.scaled_dot_product_attention(tq, tk, tv, is_causal=True).backward(g)

    return step


def torch_steps(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray) -> dict[str, Callable[[], None]]:
    try:
        import torch
    except ImportError:
        return {}
    import torch.nn.functional as tf
    from torch.nn.attention import SDPBackend, sdpa_kernel

    torch.set_num_threads(1)
    tq, tk, tv, tg = (torch.from_numpy(a) for a in (q, k, v, g))
    n = q.shape[-2]
    causal = torch.ones(n, n, dtype=torch.bool).tril()

    def math() -> None:
        a, b, c = (t.clone().requires_grad_() for t in (tq, tk, tv))
        with sdpa_kernel(SDPBackend.MATH):
            tf.scaled_dot_product_attention(a, b, c, is_causal=True).backward(tg)

    def manual() -> None:
        a, b, c = (t.clone().requires_grad_() for t in (tq, tk, tv))
        att = (a @ b.transpose(-2, -1)) * (1.0 / E ** 0.5)
        att = att.masked_fill(~causal, float("-inf"))
        (torch.softmax(att, dim=-1) @ c).backward(tg)

    return {"torch math": math, "torch manual": manual}


def check(q: np.ndarray, k: np.ndarray, v: np.ndarray, g: np.ndarray) -> float:
    """The largest difference of LeanPass's output and gradients from PyTorch's math path (float64)."""
    import torch
    import torch.nn.functional as tf

    args = [a.astype(np.float64) for a in (q, k, v)]
    ts = [torch.tensor(a, requires_grad=True) for a in args]
    y = tf.scaled_dot_product_attention(ts[0], ts[1], ts[2], is_causal=True)
    y.backward(torch.tensor(g, dtype=torch.float64))
    ours = lp.vjp(lambda a, b, c: lp.scaled_dot_product_attention(a, b, c, is_causal=True), *args)
    out, pull = ours
    grads = pull(g.astype(np.float64))
    diffs = [np.abs(np.asarray(out) - y.detach().numpy()).max()]
    diffs += [np.abs(np.asarray(a) - t.grad.numpy()).max() for a, t in zip(grads, ts) if t.grad is not None]
    return float(max(diffs))


def module_sides() -> dict[str, Callable[[], None]]:
    """nn.CausalSelfAttention's forward + backward (input and parameters differentiated), and nanoGPT's in torch."""
    b, t, c, h = 16, 64, 128, 4
    rng = np.random.default_rng(1)
    x, g = (rng.standard_normal((b, t, c)).astype(np.float32) for _ in range(2))
    attn = lp.nn.CausalSelfAttention(c, h, rng=0)

    def ours() -> None:
        lp.nn.trainable(attn)(lp.Tensor(x, requires_grad=True)).backward(g)

    sides = {"leanpass": ours}
    try:
        import torch
    except ImportError:
        return sides
    import torch.nn.functional as tf
    from torch.nn.attention import SDPBackend, sdpa_kernel

    c_attn, c_proj = torch.nn.Linear(c, 3 * c), torch.nn.Linear(c, c)
    tx, tg = torch.from_numpy(x), torch.from_numpy(g)

    def theirs() -> None:
        c_attn.zero_grad()
        c_proj.zero_grad()
        xx = tx.clone().requires_grad_()
        q, k, v = (a.view(b, t, h, c // h).transpose(1, 2) for a in c_attn(xx).split(c, dim=2))
        with sdpa_kernel(SDPBackend.MATH):
            y = tf.scaled_dot_product_attention(q, k, v, is_causal=True)
        c_proj(y.transpose(1, 2).contiguous().view(b, t, c)).backward(tg)

    sides["torch math"] = theirs
    return sides


def seconds(fn: Callable[[], None], reps: int) -> float:
    start = time.process_time()
    for _ in range(reps):
        fn()
    return (time.process_time() - start) / reps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--dtype", default="float32")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print(f"batch {B}, {H} heads, head dim {E}, causal, {args.dtype}, one thread; CPU ms per forward+backward")
    for n in (64, 128, 256):
        q, k, v, g = (rng.standard_normal((B, H, n, E)).astype(args.dtype) for _ in range(4))
        sides = {"leanpass": leanpass_step(q, k, v, g), **torch_steps(q, k, v, g)}
        reps = max(2, int(2e6 / (B * H * n * n)))
        for fn in sides.values():  # (warm-up)
            fn()
        times: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.rounds):
            order = list(sides)
            random.shuffle(order)
            for name in order:
                times[name].append(seconds(sides[name], reps))
        line = f"L = S = {n:3d}: leanpass {1e3 * statistics.median(times['leanpass']):7.2f} ms"
        for name in sides:
            if name != "leanpass":
                ratios = [a / b for a, b in zip(times["leanpass"], times[name])]
                line += (f" | {name} {1e3 * statistics.median(times[name]):7.2f} ms, leanpass / {name} "
                         f"{statistics.median(ratios):.2f}x")
        if len(sides) > 1:
            line += f" | max |diff| float64 {check(q, k, v, g):.1e}"
        print(line, flush=True)
    sides = module_sides()
    times = {name: [] for name in sides}
    for fn in sides.values():
        fn()
    for _ in range(args.rounds):
        order = list(sides)
        random.shuffle(order)
        for name in order:
            times[name].append(seconds(sides[name], 5))
    ms = 1e3 * statistics.median(times["leanpass"])
    line = f"nn.CausalSelfAttention(128, 4), batch 16, T 64: leanpass {ms:.2f} ms"
    if "torch math" in times:
        ratios = [a / b for a, b in zip(times["leanpass"], times["torch math"])]
        line += (f" | nanoGPT's module, torch math {1e3 * statistics.median(times['torch math']):.2f} ms, "
                 f"leanpass / torch {statistics.median(ratios):.2f}x")
    print(line)
    if len(sides) == 1:
        print("(torch is not installed: no PyTorch columns)")


if __name__ == "__main__":
    main()
