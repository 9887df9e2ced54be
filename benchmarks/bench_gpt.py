"""A GPT training step (nanoGPT's model) in LeanPass, eager and ``lp.jit``, beside PyTorch eager and JAX jit.

    pip install torch jax        # not LeanPass dependencies; each is measured when it imports
    python benchmarks/bench_gpt.py [--rounds 10] [--torch-sdpa] [--no-memory] [--no-check]

The step: float32, 4 layers, 4 heads, n_embd 128, block 64, batch 16, vocabulary 65 (the model of
``leanpass.examples.charlm``: LayerNorm, causal self-attention, LayerNorm, MLP with the exact GELU,
tied output layer), forward, backward, clipping to a global norm of 1 and AdamW with weight decay on
the matrices only. Every library runs one thread. PyTorch is written as nanoGPT writes it (its
manual attention, which on CPU is faster than ``F.scaled_dot_product_attention``; ``--torch-sdpa``
takes the latter), JAX as one ``jax.jit`` of the whole step (AdamW written out: no optax needed).

1. **Time**: CPU time (``time.process_time``) per step, in rounds; each round runs every side for a
   block of 2 steps in a shuffled order, and reports each side's time over PyTorch's in that round.
   The figures are the medians of those ratios (the machine is shared: only ratios are compared).
2. **Memory**: the peak resident memory of one step above the memory before it (``VmHWM`` minus
   ``VmRSS``, the peak reset through ``/proc/self/clear_refs`` after two warm-up steps), each side in
   a fresh process with ``MALLOC_MMAP_THRESHOLD_=65536`` (so that freed arrays leave the resident set).
3. **Correctness** (needs torch): 20 AdamW steps in float64 from the same weights and batches, the
   losses of LeanPass's three doors (``lp.value_and_grad``, ``.backward()``, ``lp.jit``) against
   PyTorch's, and jit against eager bit for bit.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false intra_op_parallelism_threads=1")

import argparse  # noqa: E402
import gc  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import random  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass

import leanpass as lp  # noqa: E402
from leanpass import nn, optim  # noqa: E402
from leanpass.examples.charlm import GPT, loss_fn  # noqa: E402

N_LAYER, N_HEAD, N_EMBD, BLOCK, BATCH, VOCAB = 4, 4, 128, 64, 16, 65
LR, BETAS, EPS, WD = 1e-3, (0.9, 0.95), 1e-8, 0.1

Step = Callable[[], float]  # one training step; returns the loss


def batch(seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    x = rng.integers(0, VOCAB, (BATCH, BLOCK + 1))
    return x[:, :-1].copy(), x[:, 1:].copy()


def make_model(dtype: Any) -> GPT:
    return GPT.create(VOCAB, block_size=BLOCK, n_layer=N_LAYER, n_head=N_HEAD, n_embd=N_EMBD, rng=0, dtype=dtype)


def is_matrix(tree: Any) -> Any:
    return lp.tree_map(lambda w: w.ndim >= 2, tree)


def lp_optimizer() -> optim.Optimizer:
    return optim.chain(optim.clip_by_global_norm(1.0),
                       optim.adamw(LR, b1=BETAS[0], b2=BETAS[1], eps=EPS, weight_decay=WD, mask=is_matrix))


# ----- LeanPass ------------------------------------------------------------------------------------------
def lp_side(kind: str, dtype: Any = np.float32, batches: Callable[[int], Any] = batch) -> Step:
    """A step of LeanPass: ``kind`` is "eager" (lp.value_and_grad), "jit", or "backward" (the .backward() door)."""
    opt = lp_optimizer()
    model: Any = make_model(dtype)
    if kind == "backward":
        model = nn.trainable(model)
    box = {"model": model, "state": opt.init(model), "i": 0}

    def step_fn(model: Any, state: Any, x: np.ndarray, y: np.ndarray) -> Any:
        loss, grads = lp.value_and_grad(loss_fn)(model, x, y)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    fn = lp.jit(step_fn) if kind == "jit" else step_fn

    def step() -> float:
        x, y = batches(box["i"])
        box["i"] += 1
        if kind == "backward":
            m = box["model"]
            loss = loss_fn(m, x, y)
            loss.backward()
            updates, box["state"] = opt.update(optim.collect_grads(m), box["state"], m)
            box["model"] = optim.apply_updates(m, updates)
            return loss.item()
        box["model"], box["state"], loss = fn(box["model"], box["state"], x, y)
        return loss.item()

    return step


# ----- PyTorch ---------------------------------------------------------------------------------------------
def torch_side(dtype: Any = np.float32, sdpa: bool = False, batches: Callable[[int], Any] = batch,
               exact_clip: bool = False) -> Step:
    """nanoGPT's model and training step in PyTorch, from the same weights as ``make_model``.

    ``exact_clip`` clips as LeanPass does (scale ``1 / norm`` when ``norm > 1``) instead of
    ``clip_grad_norm_`` (scale ``1 / (norm + 1e-6)``), for the float64 comparison."""
    import torch
    import torch.nn as tnn
    import torch.nn.functional as F

    torch.set_num_threads(1)
    tdtype = torch.float32 if dtype == np.float32 else torch.float64

    def tensor(a: Any) -> Any:
        return torch.tensor(np.array(a), dtype=tdtype)

    def linear(layer: nn.Linear) -> Any:
        out = tnn.Linear(layer.in_features, layer.out_features, bias=layer.bias is not None, dtype=tdtype)
        with torch.no_grad():
            out.weight.copy_(tensor(layer.weight.numpy().T))  # LeanPass (in, out), PyTorch (out, in)
            if layer.bias is not None:
                out.bias.copy_(tensor(layer.bias.numpy()))
        return out

    def layer_norm(ln: nn.LayerNorm) -> Any:
        out = tnn.LayerNorm(ln.weight.shape[0], eps=ln.eps, dtype=tdtype)
        with torch.no_grad():
            out.weight.copy_(tensor(ln.weight.numpy()))
            out.bias.copy_(tensor(ln.bias.numpy()))
        return out

    class Attention(tnn.Module):
        def __init__(self, a: Any) -> None:
            super().__init__()
            self.c_attn, self.c_proj, self.n_head = linear(a.c_attn), linear(a.c_proj), a.n_head
            self.register_buffer("bias", torch.tril(torch.ones(BLOCK, BLOCK)).view(1, 1, BLOCK, BLOCK))

        def forward(self, x: Any) -> Any:
            b, t, c = x.size()
            q, k, v = self.c_attn(x).split(c, dim=2)
            k = k.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            q = q.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            v = v.view(b, t, self.n_head, c // self.n_head).transpose(1, 2)
            if sdpa:
                y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
                att = att.masked_fill(self.bias[:, :, :t, :t] == 0, float("-inf"))
                y = F.softmax(att, dim=-1) @ v
            return self.c_proj(y.transpose(1, 2).contiguous().view(b, t, c))

    class Block(tnn.Module):
        def __init__(self, blk: Any) -> None:
            super().__init__()
            self.ln_1, self.attn, self.ln_2 = layer_norm(blk.ln_1), Attention(blk.attn), layer_norm(blk.ln_2)
            self.c_fc, self.gelu, self.c_proj = linear(blk.c_fc), tnn.GELU(), linear(blk.c_proj)

        def forward(self, x: Any) -> Any:
            x = x + self.attn(self.ln_1(x))
            return x + self.c_proj(self.gelu(self.c_fc(self.ln_2(x))))

    class TorchGPT(tnn.Module):
        def __init__(self, m: GPT) -> None:
            super().__init__()
            self.wte = tnn.Embedding(VOCAB, N_EMBD, dtype=tdtype)
            self.wpe = tnn.Embedding(BLOCK, N_EMBD, dtype=tdtype)
            with torch.no_grad():
                self.wte.weight.copy_(tensor(m.wte.weight.numpy()))
                self.wpe.weight.copy_(tensor(m.wpe.weight.numpy()))
            self.h = tnn.ModuleList([Block(b) for b in m.blocks])
            self.ln_f = layer_norm(m.ln_f)
            self.lm_head = tnn.Linear(N_EMBD, VOCAB, bias=False, dtype=tdtype)
            self.lm_head.weight = self.wte.weight  # tied

        def forward(self, idx: Any, targets: Any) -> Any:
            pos = torch.arange(idx.size(1))
            x = self.wte(idx) + self.wpe(pos)
            for block in self.h:
                x = block(x)
            logits = self.lm_head(self.ln_f(x))
            return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))

    model = TorchGPT(make_model(dtype))
    params = list(model.parameters())  # (the tied matrix once)
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": WD}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=LR, betas=BETAS, eps=EPS)
    box = {"i": 0}

    def step() -> float:
        x, y = batches(box["i"])
        box["i"] += 1
        loss = model(torch.from_numpy(x), torch.from_numpy(y))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        if exact_clip:
            with torch.no_grad():
                norm = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in params))
                if norm > 1.0:
                    for p in params:
                        p.grad.mul_((1.0 / norm).to(p.grad.dtype))
        else:
            tnn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()

    return step


# ----- JAX ---------------------------------------------------------------------------------------------------
def jax_side() -> Step:
    """The same model and step in JAX, one ``jax.jit`` for forward, backward, clipping and AdamW."""
    import jax
    import jax.numpy as jnp

    m = make_model(np.float32)

    def arrays(layer: Any) -> Any:
        return {k: jnp.asarray(v.numpy()) for k, v in (("w", layer.weight), ("b", layer.bias)) if v is not None}

    params = {"wte": jnp.asarray(m.wte.weight.numpy()), "wpe": jnp.asarray(m.wpe.weight.numpy()),
              "ln_f": arrays(m.ln_f),
              "blocks": [{"ln_1": arrays(b.ln_1), "c_attn": arrays(b.attn.c_attn), "a_proj": arrays(b.attn.c_proj),
                          "ln_2": arrays(b.ln_2), "c_fc": arrays(b.c_fc), "c_proj": arrays(b.c_proj)}
                         for b in m.blocks]}
    causal = jnp.tril(jnp.ones((BLOCK, BLOCK), bool))

    def ln(p: Any, x: Any) -> Any:
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) * jax.lax.rsqrt(var + 1e-5) * p["w"] + p["b"]

    def dense(p: Any, x: Any) -> Any:
        return x @ p["w"] + p["b"]

    def loss(params: Any, x: Any, y: Any) -> Any:
        h = params["wte"][x] + params["wpe"][jnp.arange(BLOCK)]
        b, t, c = h.shape
        hs = c // N_HEAD
        for blk in params["blocks"]:
            qkv = dense(blk["c_attn"], ln(blk["ln_1"], h)).reshape(b, t, 3, N_HEAD, hs)
            q, k, v = (qkv[:, :, i].transpose(0, 2, 1, 3) for i in range(3))
            att = jnp.where(causal, q @ k.transpose(0, 1, 3, 2) / math.sqrt(hs), -jnp.inf)
            a = (jax.nn.softmax(att, -1) @ v).transpose(0, 2, 1, 3).reshape(b, t, c)
            h = h + dense(blk["a_proj"], a)
            h = h + dense(blk["c_proj"], jax.nn.gelu(dense(blk["c_fc"], ln(blk["ln_2"], h)), approximate=False))
        logits = ln(params["ln_f"], h) @ params["wte"].T
        logp = jax.nn.log_softmax(logits, -1)
        return -jnp.take_along_axis(logp, y[..., None], -1).mean()

    def train_step(params: Any, m1: Any, m2: Any, t: Any, x: Any, y: Any) -> Any:
        value, g = jax.value_and_grad(loss)(params, x, y)
        leaves = jax.tree_util.tree_leaves(g)
        norm = jnp.sqrt(sum(jnp.sum(a.astype(jnp.float32) ** 2) for a in leaves))
        scale = jnp.minimum(1.0, 1.0 / norm)
        g = jax.tree_util.tree_map(lambda a: a * scale, g)
        m1 = jax.tree_util.tree_map(lambda m, a: BETAS[0] * m + (1 - BETAS[0]) * a, m1, g)
        m2 = jax.tree_util.tree_map(lambda v, a: BETAS[1] * v + (1 - BETAS[1]) * a * a, m2, g)
        c1, c2 = 1 - BETAS[0] ** t, 1 - BETAS[1] ** t

        def update(p: Any, m: Any, v: Any) -> Any:
            new = p - LR * (m / c1) / (jnp.sqrt(v / c2) + EPS)
            return new - LR * WD * p if p.ndim >= 2 else new

        params = jax.tree_util.tree_map(update, params, m1, m2)
        return params, m1, m2, value

    jitted = jax.jit(train_step)
    zeros = jax.tree_util.tree_map(jnp.zeros_like, params)
    box: dict[str, Any] = {"p": params, "m1": zeros, "m2": zeros, "i": 0}

    def step() -> float:
        x, y = batch(box["i"])
        box["i"] += 1
        box["p"], box["m1"], box["m2"], value = jitted(box["p"], box["m1"], box["m2"], float(box["i"]), x, y)
        return float(value)

    return step


# ----- the three measurements ------------------------------------------------------------------------------------
def available(name: str) -> bool:
    try:
        __import__(name)
    except ImportError:
        return False
    return True


def build(side: str, sdpa: bool = False) -> Step:
    if side == "torch":
        return torch_side(sdpa=sdpa)
    if side == "jax":
        return jax_side()
    return lp_side(side.split("_")[1])


def timing(sides: list[str], rounds: int, sdpa: bool) -> dict[str, list[float]]:
    steps = {s: build(s, sdpa) for s in sides}
    for s in sides:  # warm up: traces, compilations, first-touch of the memory
        for _ in range(3):
            steps[s]()
    ratios: dict[str, list[float]] = {s: [] for s in sides if s != "torch"}
    per_step: dict[str, list[float]] = {s: [] for s in sides}
    for r in range(rounds):
        order = sides[:]
        random.Random(r).shuffle(order)
        took = {}
        for s in order:
            start = time.process_time()
            for _ in range(2):
                steps[s]()
            took[s] = (time.process_time() - start) / 2
            per_step[s].append(took[s])
        for s in ratios:
            ratios[s].append(took[s] / took["torch"])
        line = "  ".join(f"{s} {took[s] / took['torch']:.2f}" for s in ratios)
        print(f"round {r + 1:2d}: torch {took['torch'] * 1e3:6.1f} ms  {line}", flush=True)
    return {"ratios": ratios, "per_step": per_step}  # type: ignore[return-value]


def memory_child(side: str, sdpa: bool) -> None:
    step = build(side, sdpa)
    for _ in range(2):
        step()
    gc.collect()
    before = _status("VmRSS")
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # reset VmHWM to the current resident size
    step()
    print(json.dumps({"peak_above": _status("VmHWM") - before}))


def _status(field: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) / 1024  # MiB
    raise RuntimeError(field)


def memory(sides: list[str], sdpa: bool, runs: int = 3) -> dict[str, float]:
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}
    out: dict[str, float] = {}
    for side in sides:
        peaks = []
        for _ in range(runs):
            args = [sys.executable, os.path.abspath(__file__), "--memory-child", side]
            args += ["--torch-sdpa"] if sdpa else []
            res = subprocess.run(args, env=env, capture_output=True, text=True, check=True)
            peaks.append(json.loads(res.stdout.strip().splitlines()[-1])["peak_above"])
        out[side] = statistics.median(peaks)
    return out


def check(steps: int = 20) -> dict[str, float]:
    """Float64 losses of LeanPass's three doors against PyTorch over ``steps`` AdamW steps."""
    def batches(i: int) -> Any:
        return batch(1000 + i)

    losses = {"torch": [], "eager": [], "backward": [], "jit": []}  # type: dict[str, list[float]]
    sides: dict[str, Step] = {"torch": torch_side(np.float64, batches=batches, exact_clip=True)}
    for kind in ("eager", "backward", "jit"):
        sides[kind] = lp_side(kind, np.float64, batches=batches)
    for _ in range(steps):
        for name, step in sides.items():
            losses[name].append(step())
    ref = np.array(losses["torch"])
    result = {f"{k} vs torch": float(np.abs(np.array(v) - ref).max()) for k, v in losses.items() if k != "torch"}
    result["jit == eager, bit for bit"] = float(losses["jit"] == losses["eager"])
    result["first loss"] = losses["torch"][0]
    result["last loss"] = losses["torch"][-1]
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--torch-sdpa", action="store_true", help="PyTorch with F.scaled_dot_product_attention")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--no-check", action="store_true")
    parser.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.memory_child:
        memory_child(args.memory_child, args.torch_sdpa)
        return
    if not available("torch"):
        raise SystemExit("bench_gpt.py compares against PyTorch: pip install torch")
    sides = ["torch", "lp_eager", "lp_jit"] + (["jax"] if available("jax") else [])
    print(f"GPT step: float32, {N_LAYER} layers, {N_HEAD} heads, n_embd {N_EMBD}, block {BLOCK}, batch {BATCH}, "
          f"vocab {VOCAB}; one thread; CPU time; PyTorch attention: {'F.sdpa' if args.torch_sdpa else 'manual'}")
    if not args.no_check:
        print("float64, 20 AdamW steps:", json.dumps(check(), indent=1))
    res = timing(sides, args.rounds, args.torch_sdpa)
    torch_ms = statistics.median(res["per_step"]["torch"]) * 1e3
    print(f"\nstep time over PyTorch eager's (median of {args.rounds} rounds; torch {torch_ms:.1f} ms per step):")
    for s, r in res["ratios"].items():
        print(f"  {s:9s} {statistics.median(r):.2f}x  (rounds {min(r):.2f}-{max(r):.2f})")
    if not args.no_memory:
        mem = memory(sides, args.torch_sdpa)
        print(f"\npeak memory of one step above the memory before it (median of 3 fresh processes; "
              f"torch {mem['torch']:.1f} MiB):")
        for s in sides[1:]:
            print(f"  {s:9s} {mem[s] / mem['torch']:.2f}x  ({mem[s]:.1f} MiB)")


if __name__ == "__main__":
    main()
