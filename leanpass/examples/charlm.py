"""Train a small GPT, character by character, on the Python source of Python's own standard library.

    python -m leanpass.examples.charlm                # validation loss about 1.46 in 3 to 4 minutes of CPU time
    python -m leanpass.examples.charlm --quick        # a tiny model for a few seconds: checks that it all runs
    python -m leanpass.examples.charlm --no-jit       # the same training, each step run op by op
    python -m leanpass.examples.charlm --help

The text needs no download: it is every ``.py`` file directly inside the standard library's
directory of the Python running the example (``sysconfig.get_paths()["stdlib"]``, no
sub-directories), in the order of their names, read as UTF-8 and joined. Characters other than
printable ASCII and the newline are dropped, so the vocabulary is at most 96 characters. The
first 90% of the characters train the model and the last 10% measure the validation loss.

The model is nanoGPT's (Andrej Karpathy's ``model.py``): token and position embeddings, blocks
of LayerNorm, causal self-attention, LayerNorm and an MLP with the exact GELU, each with a
residual connection, a final LayerNorm and an output layer tied to the token embedding
(``nn.Embedding.attend``). It trains with AdamW (weight decay on the matrices only, through
``mask=``), a warm-up and cosine learning-rate schedule and gradients clipped to a global norm
of 1. The training step is compiled with ``leanpass.jit`` (``--no-jit`` runs it op by op, with
the same numbers). Progress shows the training loss and, every ``--eval-every`` steps, the
validation loss; at the end the model writes some Python of its own (``generate``, with a
temperature and top-k), is saved with ``leanpass.save`` and loaded back to check the round trip.

The checkpoint goes to ``--output``, by default ``charlm.npz`` in the examples' folder of the
user's cache (``leanpass.examples.output_dir()``: ``~/.cache/leanpass/examples``, or
``$XDG_CACHE_HOME/leanpass/examples``).
"""

from __future__ import annotations

import argparse
import math
import sys
import sysconfig
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import numpy as np

import leanpass as lp
from leanpass import losses, nn, optim
from leanpass.examples import default_output, output_dir
from leanpass.examples.digits import Progress, keep_freed_memory, limit_blas_threads, unwritable

# ----- the text ----------------------------------------------------------------------------------------
KEPT = "\n" + "".join(chr(c) for c in range(32, 127))  # the characters kept: newline and printable ASCII


def source_files(limit: int | None = None) -> list[Path]:
    """The ``.py`` files directly inside this Python's standard library directory, sorted by name.

    >>> files = source_files()
    >>> len(files) > 50 and all(f.suffix == ".py" for f in files) and files == sorted(files)
    True
    """
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = sorted(p for p in stdlib.glob("*.py") if p.is_file())
    if not files:
        raise FileNotFoundError(f"charlm: no .py files in the standard library directory {stdlib}")
    return files[:limit]


def load_text(max_chars: int | None = None) -> tuple[str, int]:
    """The files of ``source_files()`` joined, with only the characters of ``KEPT`` (at most
    ``max_chars``), and how many files that took.

    >>> text, files = load_text(max_chars=1000)
    >>> len(text), set(text) <= set(KEPT), files
    (1000, True, 1)
    """
    keep = set(KEPT)
    parts: list[str] = []
    total = 0
    for path in source_files():
        text = path.read_text(encoding="utf-8", errors="ignore")
        text = "".join(ch for ch in text if ch in keep) if not set(text) <= keep else text
        parts.append(text)
        total += len(text)
        if max_chars is not None and total >= max_chars:
            break
    return "".join(parts)[:max_chars], len(parts)


def encode(text: str, vocab: str) -> np.ndarray:
    """The characters of ``text`` as indices into ``vocab`` (a uint8 array).

    >>> encode("ba", "ab")
    array([1, 0], dtype=uint8)
    """
    table = np.zeros(128, dtype=np.uint8)
    table[[ord(c) for c in vocab]] = np.arange(len(vocab))
    return table[np.frombuffer(text.encode("ascii"), dtype=np.uint8)]


def decode(indices: Any, vocab: str) -> str:
    """The text of ``indices`` into ``vocab``.

    >>> decode([1, 0], "ab")
    'ba'
    """
    return "".join(vocab[int(i)] for i in indices)


def get_batch(data: np.ndarray, block_size: int, batch_size: int,
              rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """``batch_size`` random windows of ``data``: inputs ``(B, T)`` and the next characters as targets.

    >>> x, y = get_batch(np.arange(10), 4, 2, np.random.default_rng(0))
    >>> x.shape, bool((y == x + 1).all())
    ((2, 4), True)
    """
    starts = rng.integers(0, len(data) - block_size, batch_size)
    idx = starts[:, None] + np.arange(block_size)
    return data[idx].astype(np.int64), data[idx + 1].astype(np.int64)


# ----- the model -----------------------------------------------------------------------------------
def _normal(std: float) -> Any:
    """An initialiser ``(rng, shape, dtype) -> Tensor`` drawing from N(0, std^2), as nanoGPT's."""
    def init(rng: np.random.Generator, shape: tuple[int, ...], dtype: Any) -> lp.Tensor:
        return lp.Tensor((rng.standard_normal(shape) * std).astype(dtype))
    return init


@dataclass(frozen=True, repr=False, eq=False)
class Block(nn.Module):
    """``x + attn(ln_1(x))``, then ``x + mlp(ln_2(x))``, the MLP 4x wide with the exact GELU."""

    ln_1: nn.LayerNorm
    attn: nn.CausalSelfAttention  # c_attn (C -> 3C: queries, keys, values), causal attention, c_proj
    ln_2: nn.LayerNorm
    c_fc: nn.Linear
    c_proj: nn.Linear

    def __call__(self, x: Any) -> Any:
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(lp.gelu(self.c_fc(self.ln_2(x)), approximate="none"))  # the exact GELU


@dataclass(frozen=True, repr=False, eq=False)
class GPT(nn.Module):
    """nanoGPT's model: next-character logits for every position of a batch of windows ``(B, T)``."""

    wte: nn.Embedding  # token embedding, also the output layer (tied: wte.attend)
    wpe: nn.Embedding  # position embedding
    blocks: tuple[Block, ...]
    ln_f: nn.LayerNorm

    @classmethod
    def create(cls, vocab_size: int, *, block_size: int = 64, n_layer: int = 4, n_head: int = 4,
               n_embd: int = 128, rng: np.random.Generator | int = 0, dtype: Any = np.float32) -> GPT:
        """A new model, initialised as nanoGPT's: N(0, 0.02^2) weights, the residual projections
        scaled down by ``sqrt(2 * n_layer)``, zero biases and LayerNorms at the identity.

        >>> model = GPT.create(65, block_size=16, n_layer=2, n_head=2, n_embd=32)
        >>> model(np.zeros((3, 16), dtype=np.int64)).shape, model.block_size
        ((3, 16, 65), 16)
        >>> model
        GPT(vocab 65, 2 layers x 2 heads, n_embd 32, block 16, 28,064 parameters)
        """
        if n_embd % n_head:
            raise ValueError(f"GPT: n_embd ({n_embd}) must be a multiple of n_head ({n_head})")
        rng = np.random.default_rng(rng)
        w, proj = _normal(0.02), _normal(0.02 / math.sqrt(2 * n_layer))

        def linear(a: int, b: int, init: Any) -> nn.Linear:
            return nn.Linear(a, b, rng=rng, init=init, dtype=dtype)

        def embedding(n: int) -> nn.Embedding:
            table = nn.Embedding(n, n_embd, rng=rng, dtype=dtype)
            return table.replace(weight=w(rng, (n, n_embd), dtype))

        def attention() -> nn.CausalSelfAttention:
            attn = nn.CausalSelfAttention(n_embd, n_head, rng=rng, init=w, dtype=dtype)
            return attn.replace(c_proj=linear(n_embd, n_embd, proj))

        blocks = tuple(
            Block(ln_1=nn.LayerNorm(n_embd, dtype=dtype), attn=attention(), ln_2=nn.LayerNorm(n_embd, dtype=dtype),
                  c_fc=linear(n_embd, 4 * n_embd, w), c_proj=linear(4 * n_embd, n_embd, proj))
            for _ in range(n_layer))
        return cls(wte=embedding(vocab_size), wpe=embedding(block_size), blocks=blocks,
                   ln_f=nn.LayerNorm(n_embd, dtype=dtype))

    @property
    def block_size(self) -> int:
        """The longest window the model reads (the rows of its position embedding)."""
        return int(self.wpe.weight.shape[0])

    def __call__(self, idx: Any) -> Any:
        t = np.shape(idx)[-1]
        if t > self.block_size:
            raise ValueError(f"GPT: a window of {t} characters, but the block size is {self.block_size}")
        x = self.wte(idx) + self.wpe(np.arange(t))
        for block in self.blocks:
            x = block(x)
        return self.wte.attend(self.ln_f(x))  # the output layer is the token embedding, transposed

    def _summary(self) -> str:
        vocab, n_embd = self.wte.weight.shape
        heads = self.blocks[0].attn.n_head if self.blocks else 0
        return (f"GPT(vocab {vocab}, {len(self.blocks)} layers x {heads} heads, n_embd {n_embd}, "
                f"block {self.block_size}, {nn.param_count(self):,} parameters)")


def loss_fn(model: GPT, x: np.ndarray, y: np.ndarray) -> lp.Tensor:
    """Mean cross-entropy of the next character at every position.

    >>> model = GPT.create(10, block_size=4, n_layer=1, n_head=1, n_embd=8)
    >>> 2.0 < loss_fn(model, np.zeros((2, 4), np.int64), np.ones((2, 4), np.int64)).item() < 2.5
    True
    """
    return losses.cross_entropy(model(x), y)


def generate(model: GPT, idx: np.ndarray, max_new_tokens: int, *, temperature: float = 1.0,
             top_k: int | None = None, rng: np.random.Generator) -> np.ndarray:
    """Extend each row of ``idx`` ``(B, T)`` by ``max_new_tokens`` characters drawn from the model.

    Each step reads the last ``block_size`` characters, divides the last position's logits by
    ``temperature`` (lower: more likely characters), keeps the ``top_k`` largest (if given) and
    draws the next character from their softmax.

    >>> model = GPT.create(5, block_size=4, n_layer=1, n_head=1, n_embd=8)
    >>> generate(model, np.zeros((2, 1), np.int64), 6, top_k=2, rng=np.random.default_rng(0)).shape
    (2, 7)
    """
    if not temperature > 0:
        raise ValueError(f"generate: temperature must be > 0, got {temperature}")
    with lp.no_grad():
        for _ in range(max_new_tokens):
            logits = model(idx[:, -model.block_size:])[:, -1, :].numpy().astype(np.float64) / temperature
            if top_k is not None and top_k < logits.shape[-1]:
                kth = lp.topk(logits, top_k)[0][:, -1:]  # the k-th largest of each row
                logits = np.where(logits < kth, -np.inf, logits)
            p = np.exp(logits - logits.max(axis=-1, keepdims=True))
            p /= p.sum(axis=-1, keepdims=True)
            nxt = np.array([[rng.choice(p.shape[-1], p=row)] for row in p])
            idx = np.concatenate([idx, nxt], axis=1)
    return idx


def estimate_loss(model: GPT, data: np.ndarray, block_size: int, batch_size: int, batches: int,
                  loss: Any = loss_fn) -> float:
    """The mean loss over ``batches`` fixed windows of ``data`` (the same windows at every call).

    >>> model = GPT.create(4, block_size=4, n_layer=1, n_head=1, n_embd=8)
    >>> round(estimate_loss(model, np.arange(40) % 4, 4, 2, 3), 1)
    1.4
    """
    rng = np.random.default_rng(1234)  # fixed: every evaluation reads the same windows
    with lp.no_grad():
        return float(np.mean([loss(model, *get_batch(data, block_size, batch_size, rng)).item()
                              for _ in range(batches)]))


# ----- training --------------------------------------------------------------------------------------
@dataclass
class Config:
    """The model's size and the training's settings (the defaults are the full run)."""

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    block_size: int = 64
    batch_size: int = 32
    steps: int = 1500
    lr: float = 2e-3
    min_lr: float = 2e-4
    warmup: int = 100
    weight_decay: float = 0.1
    eval_every: int = 250
    eval_batches: int = 20
    max_chars: int | None = None
    sample_chars: int = 400


QUICK = dict(n_layer=2, n_head=2, n_embd=32, block_size=32, batch_size=8, steps=40, warmup=5, lr=3e-3,
             min_lr=3e-4, eval_every=20, eval_batches=4, max_chars=200_000, sample_chars=80)


def train(config: Config | None = None, *, seed: int = 0, jit: bool = True, output: str | None = None,
          temperature: float = 0.8, top_k: int | None = 10, stream: TextIO | None = None) -> dict[str, Any]:
    """Train a GPT on the standard library's source; report progress, sample, save and reload.

    Returns the model, the vocabulary, the validation loss (``val_loss``) and the loss history.

    >>> import io
    >>> cfg = Config(**{**QUICK, "steps": 4, "eval_every": 2, "sample_chars": 10})
    >>> result = train(cfg, stream=io.StringIO())
    >>> result["val_loss"] < 5.0, len(result["history"]["val"])
    (True, 2)
    """
    cfg = config or Config()
    out = stream if stream is not None else sys.stdout
    text, files = load_text(cfg.max_chars)
    vocab = "".join(sorted(set(text)))
    data = encode(text, vocab)
    split = int(0.9 * len(data))
    train_data, val_data = data[:split], data[split:]
    rng = np.random.default_rng(seed)
    model = GPT.create(len(vocab), block_size=cfg.block_size, n_layer=cfg.n_layer, n_head=cfg.n_head,
                       n_embd=cfg.n_embd, rng=rng)
    decay_steps = max(cfg.steps - cfg.warmup, 1)
    schedule = optim.warmup_cosine(cfg.lr, cfg.warmup, decay_steps, alpha=cfg.min_lr / cfg.lr)
    is_matrix = lambda p: lp.tree_map(lambda w: w.ndim >= 2, p)  # noqa: E731  (decay the matrices only)
    opt = optim.chain(optim.clip_by_global_norm(1.0),
                      optim.adamw(schedule, b1=0.9, b2=0.99, weight_decay=cfg.weight_decay, mask=is_matrix))
    state = opt.init(model)

    def step(model: GPT, state: Any, x: np.ndarray, y: np.ndarray) -> tuple[GPT, Any, lp.Tensor]:
        loss, grads = lp.value_and_grad(loss_fn)(model, x, y)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    train_step = lp.jit(step) if jit else step
    print(f"charlm: {len(text):,} characters of Python from {files} standard-library files "
          f"({len(train_data):,} train, {len(val_data):,} validation), vocabulary {len(vocab)}; "
          f"GPT {cfg.n_layer} layers x {cfg.n_head} heads, n_embd {cfg.n_embd}, block {cfg.block_size}: "
          f"{nn.param_count(model):,} parameters; {'jit' if jit else 'eager'}", file=out)
    progress = Progress(out)
    history: dict[str, list[float]] = {"loss": [], "val": [], "val_step": []}
    start, cpu0 = time.perf_counter(), time.process_time()
    val = float("nan")
    for i in range(1, cfg.steps + 1):
        x, y = get_batch(train_data, cfg.block_size, cfg.batch_size, rng)
        model, state, loss = train_step(model, state, x, y)
        history["loss"].append(loss.item())
        if i % cfg.eval_every == 0 or i == cfg.steps:
            val = estimate_loss(model, val_data, cfg.block_size, cfg.batch_size, cfg.eval_batches)
            history["val"].append(val)
            history["val_step"].append(i)
            progress.show(f"step {i:5d}/{cfg.steps}  loss {np.mean(history['loss'][-cfg.eval_every:]):.3f}  "
                          f"val loss {val:.3f}  {time.process_time() - cpu0:6.1f} s CPU")
            progress.done()
        elif progress.tty and i % 10 == 0:
            progress.show(f"step {i:5d}/{cfg.steps}  loss {np.mean(history['loss'][-10:]):.3f}")
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - start
    print(f"done: validation loss {val:.3f} after {cfg.steps} steps in {cpu:.1f} s of CPU time "
          f"({wall:.1f} s wall)", file=out)
    prompt = encode("def ", vocab)[None].astype(np.int64)
    sample = generate(model, prompt, cfg.sample_chars, temperature=temperature, top_k=top_k,
                      rng=np.random.default_rng(seed))
    print(f"--- a sample (temperature {temperature:g}, top-k {top_k}) ---\n{decode(sample[0], vocab)}\n---",
          file=out)
    if output:
        saved = {"model": model, "vocab": np.frombuffer(vocab.encode("ascii"), dtype=np.uint8)}
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        lp.save(output, saved)
        back = lp.load(output, like=saved)
        back_vocab = bytes(back["vocab"]).decode("ascii")
        reloaded = estimate_loss(back["model"], encode(decode(val_data, vocab), back_vocab), cfg.block_size,
                                 cfg.batch_size, cfg.eval_batches)
        print(f"saved the model to {output} (reloaded: validation loss {reloaded:.3f})", file=out)
    return {"model": model, "vocab": vocab, "val_loss": val, "history": history, "cpu_seconds": cpu}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The command line: ``python -m leanpass.examples.charlm [options]``.

    >>> result = main(["--quick", "--steps", "2", "--eval-every", "1", "--output", ""])  # doctest: +ELLIPSIS
    charlm: 200,000 characters of Python ...
    step     1/2  loss ...
    step     2/2  loss ...
    done: validation loss ...
    ...
    >>> result["val_loss"] < 5.0
    True
    """
    cfg = Config()
    parser = argparse.ArgumentParser(
        prog="python -m leanpass.examples.charlm",
        description="Train a small GPT (nanoGPT's model) on the characters of the Python standard library's "
                    "source files, read at run time, then sample from it.",
    )
    parser.add_argument("--quick", action="store_true",
                        help="a tiny model on 200,000 characters for 40 steps: a few seconds, to check it runs")
    parser.add_argument("--steps", type=int, default=None, help=f"training steps (default {cfg.steps})")
    parser.add_argument("--batch-size", type=int, default=None, help=f"windows per step (default {cfg.batch_size})")
    parser.add_argument("--block-size", type=int, default=None,
                        help=f"characters per window (default {cfg.block_size})")
    parser.add_argument("--n-layer", type=int, default=None, help=f"transformer blocks (default {cfg.n_layer})")
    parser.add_argument("--n-head", type=int, default=None, help=f"attention heads (default {cfg.n_head})")
    parser.add_argument("--n-embd", type=int, default=None, help=f"embedding width (default {cfg.n_embd})")
    parser.add_argument("--lr", type=float, default=None,
                        help=f"peak learning rate of AdamW, after a warm-up, then a cosine decay (default {cfg.lr:g})")
    parser.add_argument("--eval-every", type=int, default=None,
                        help=f"steps between validation losses (default {cfg.eval_every})")
    parser.add_argument("--seed", type=int, default=0, help="seed for the weights, batches and sample (default 0)")
    parser.add_argument("--temperature", type=float, default=0.8,
                        help="sampling temperature: lower is more conservative (default 0.8)")
    parser.add_argument("--top-k", type=int, default=10,
                        help="sample among the k likeliest characters (default 10; 0 for all)")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                        help="compile the training step with leanpass.jit (default; the same results, faster)")
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help="OpenBLAS threads (default 1: the products here are small, and extra threads mostly "
                             "wait for each other; 0 leaves NumPy's default)")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help=f"where to save the trained model (default {output_dir() / 'charlm.npz'}; '' to skip)")
    args = parser.parse_args(argv)
    fields = {"steps": args.steps, "batch_size": args.batch_size, "block_size": args.block_size,
              "n_layer": args.n_layer, "n_head": args.n_head, "n_embd": args.n_embd, "lr": args.lr,
              "eval_every": args.eval_every}
    for name, value in fields.items():
        if value is not None and not value > 0:
            parser.error(f"--{name.replace('_', '-')} must be positive, got {value}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0, got {args.seed}")
    if not args.temperature > 0 or args.top_k < 0:
        parser.error("--temperature must be positive and --top-k at least 0")
    settings = {**(QUICK if args.quick else {}), **{k: v for k, v in fields.items() if v is not None}}
    config = Config(**settings)
    if config.n_embd % config.n_head:
        parser.error(f"--n-embd ({config.n_embd}) must be a multiple of --n-head ({config.n_head})")
    if config.lr < config.min_lr:
        config.min_lr = config.lr
    config.warmup = min(config.warmup, max(config.steps // 10, 1))
    output = default_output("charlm.npz") if args.output is None else args.output
    if output:
        Path(output).parent.mkdir(parents=True, exist_ok=True)
        problem = unwritable(output)
        if problem:
            parser.error(f"--output {output}: {problem}")
    if args.blas_threads > 0:
        limit_blas_threads(args.blas_threads)
    keep_freed_memory()
    return train(config, seed=args.seed, jit=args.jit, output=output or None, temperature=args.temperature,
                 top_k=args.top_k or None)


__all__ = ["GPT", "Block", "Config", "train", "main", "generate", "loss_fn", "load_text"]

if __name__ == "__main__":
    main()
