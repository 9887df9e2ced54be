"""Convolutions: LeanPass against PyTorch eager (CPU), a plain im2col, MyGrad and HIPS autograd.

    pip install torch            # not LeanPass dependencies; this script only compares
    pip install --target /tmp/peers mygrad autograd   # optional: the NumPy-based peers
    python benchmarks/bench_conv.py [--rounds 7] [--peers /tmp/peers] [--only step|LAYER]

Measured, forward + backward (input and weight gradients) of ``conv2d`` through each library's
public NCHW API, float32, one thread for every library:

  1. the study's four layers (docs/performance.md): 64->64 channels on (32, 64, 16, 16), a
     digits CNN's layers 1->16 on (64, 1, 8, 8) and 16->32 on (64, 16, 4, 4), and a stride-2
     layer 32->64 on (32, 32, 16, 16); all 3x3 with padding 1;
  2. one training step (forward, cross-entropy, backward, SGD) of the digits CNN
     (``leanpass.examples.digits.cnn``: two conv + batch norm + relu + max-pool blocks and a linear
     layer) at batch 64, with its batch-norm statistics updated, and the same network in PyTorch.

Each library runs in a process of its own, and the processes alternate (``--rounds`` times);
``--only`` keeps the digits step (``step``) or the layers whose name contains the given text;
every figure is the median over rounds of each round's median CPU time (MyGrad and autograd,
which take minutes a round, run in the first round only). LeanPass and the plain
im2col run twice: as they are, and with glibc told to keep freed memory for reuse
(``leanpass.examples.digits.keep_freed_memory``, which the CNN example turns on): by default each
new array over 128 KiB starts with page faults, which PyTorch's caching allocator avoids. "plain im2col" is the
textbook version (``np.pad``, ``sliding_window_view``, a transposing copy to (N*Ho*Wo, C*kh*kw),
one GEMM forward, one for the weight gradient, col2im by adding each kernel tap's slice).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

os.environ["OPENBLAS_NUM_THREADS"] = "1"  # before NumPy loads: one BLAS thread
os.environ["OMP_NUM_THREADS"] = "1"
os.environ["MKL_NUM_THREADS"] = "1"

import numpy as np  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LAYERS = {  # name: (x shape, out channels, stride)
    "64->64 32x16x16": ((32, 64, 16, 16), 64, 1),
    "1->16 64x8x8": ((64, 1, 8, 8), 16, 1),
    "16->32 64x4x4": ((64, 16, 4, 4), 32, 1),
    "32->64 32x16x16 s2": ((32, 32, 16, 16), 64, 2),
}


def _timer(fn: Callable[[], Any], seconds: float = 0.25, reps: int = 7) -> float:
    """The median over ``reps`` of the mean CPU time of ``fn`` over a batch of calls lasting about ``seconds``.

    CPU time of the process (every library runs one thread), so that other jobs on a shared
    machine stretch the wall clock but not the figure.
    """
    fn()
    t = time.process_time()
    fn()
    once = max(time.process_time() - t, 1e-6)
    inner = max(1, int(seconds / reps / once))
    times = []
    for _ in range(reps):
        t = time.process_time()
        for _ in range(inner):
            fn()
        times.append((time.process_time() - t) / inner)
    return statistics.median(times)


def _data(shape: tuple[int, ...], cout: int, stride: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    x = rng.standard_normal(shape).astype(np.float32)
    w = (rng.standard_normal((cout, shape[1], 3, 3)) * 0.1).astype(np.float32)
    ho = (shape[2] + 2 - 3) // stride + 1
    g = rng.standard_normal((shape[0], cout, ho, ho)).astype(np.float32)
    return x, w, g


# ----- each library's forward + backward ------------------------------------------------------------------
def leanpass_layer(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> Callable[[], Any]:
    sys.path.insert(0, ROOT)
    import leanpass as lp

    def run() -> Any:
        xt, wt = lp.Tensor(x, requires_grad=True), lp.Tensor(w, requires_grad=True)
        lp.conv2d(xt, wt, stride=stride, padding=1).backward(g)
        return xt.grad, wt.grad

    return run


def plain_im2col_layer(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> Callable[[], Any]:
    def run() -> Any:
        n, c, h, wd = x.shape
        o = w.shape[0]
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
        win = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))[:, :, ::stride, ::stride]
        ho, wo = win.shape[2], win.shape[3]
        cols = win.transpose(0, 2, 3, 1, 4, 5).reshape(n * ho * wo, c * 9)
        wm = w.reshape(o, c * 9)
        y = (cols @ wm.T).reshape(n, ho, wo, o).transpose(0, 3, 1, 2)
        gm = g.transpose(0, 2, 3, 1).reshape(n * ho * wo, o)
        dw = (gm.T @ cols).reshape(w.shape)
        dcols = (gm @ wm).reshape(n, ho, wo, c, 3, 3)
        dxp = np.zeros_like(xp)
        for a in range(3):
            for b in range(3):
                dxp[:, :, a:a + stride * ho:stride, b:b + stride * wo:stride] += dcols[..., a, b].transpose(0, 3, 1, 2)
        return y, dw, dxp[:, :, 1:-1, 1:-1]

    return run


def torch_layer(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> Callable[[], Any]:
    import torch

    torch.set_num_threads(1)
    xs, ws, gs = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(g)

    def run() -> Any:
        xt, wt = xs.clone().requires_grad_(), ws.clone().requires_grad_()
        torch.nn.functional.conv2d(xt, wt, stride=stride, padding=1).backward(gs)
        return xt.grad, wt.grad

    return run


def mygrad_layer(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> Callable[[], Any]:
    import mygrad as mg
    from mygrad.nnet.layers import conv_nd

    def run() -> Any:
        xt, wt = mg.Tensor(x), mg.Tensor(w)
        conv_nd(xt, wt, stride=stride, padding=1).backward(g)
        return xt.grad, wt.grad

    return run


def autograd_layer(x: np.ndarray, w: np.ndarray, g: np.ndarray, stride: int) -> Callable[[], Any]:
    import autograd
    import autograd.numpy as anp
    from autograd.scipy.signal import convolve

    if stride != 1:
        raise NotImplementedError("autograd's convolve has no stride")

    def f(x: Any, w: Any) -> Any:  # autograd's convnet example: convolve over the spatial axes
        xp = anp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), mode="constant")
        return convolve(xp, w, axes=([2, 3], [2, 3]), dot_axes=([1], [1]), mode="valid")

    def run() -> Any:
        pull, _ = autograd.make_vjp(f, argnum=(0, 1))(x, w)  # (make_vjp returns the vjp first)
        return pull(g)

    return run


# ----- the digits CNN step ------------------------------------------------------------------------------------
def _digits_batch() -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(0)
    return rng.standard_normal((64, 1, 8, 8)).astype(np.float32), rng.integers(0, 10, 64)


def leanpass_step() -> Callable[[], Any]:
    sys.path.insert(0, ROOT)
    import leanpass as lp
    from leanpass import losses, optim
    from leanpass.examples.digits import cnn

    x, y = _digits_batch()
    box = [cnn(np.random.default_rng(0), dropout=0.0)]
    box.append(box[0].init_state())  # the batch norms' running statistics
    opt = optim.sgd(0.01)
    state = [opt.init(box[0])]

    def loss_fn(model: Any, bn_state: Any) -> Any:
        logits, bn_state = model(x, bn_state, train=True)
        return losses.cross_entropy(logits, y), bn_state

    value_and_grad = lp.value_and_grad(loss_fn, has_aux=True)

    def step() -> Any:
        (loss, box[1]), grads = value_and_grad(box[0], box[1])
        updates, state[0] = opt.update(grads, state[0], box[0])
        box[0] = optim.apply_updates(box[0], updates)
        return loss

    return step


def torch_step() -> Callable[[], Any]:
    import torch
    from torch import nn

    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(32, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Flatten(), nn.Dropout(0.0), nn.Linear(256, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    xn, yn = _digits_batch()
    x, y = torch.from_numpy(xn), torch.from_numpy(yn)

    def step() -> Any:
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        return loss

    return step


LIBRARIES: dict[str, Callable[..., Callable[[], Any]]] = {
    "leanpass": leanpass_layer, "plain im2col": plain_im2col_layer, "pytorch": torch_layer,
    "mygrad": mygrad_layer, "autograd": autograd_layer,
}
COLUMNS = ["leanpass", "+malloc leanpass", "plain im2col", "+malloc plain im2col", "pytorch", "mygrad", "autograd"]
PROCESS_OF = {"leanpass": "numpy", "plain im2col": "numpy", "pytorch": "torch", "mygrad": "peers", "autograd": "peers"}


ONLY = os.environ.get("BENCH_CONV_ONLY", "")  # set from --only, for the worker processes too


def worker(group: str) -> dict[str, float | None]:
    """Every figure for the libraries of one process group: {"library|layer": seconds}."""
    out: dict[str, float | None] = {}
    prefix = ""
    if group == "numpy+malloc":  # the same NumPy code, with glibc keeping freed blocks (see keep_freed_memory)
        sys.path.insert(0, ROOT)
        from leanpass.examples.digits import keep_freed_memory

        if not keep_freed_memory():
            return out
        group, prefix = "numpy", "+malloc "
    for lib, make in LIBRARIES.items():
        if PROCESS_OF[lib] != group:
            continue
        for name, (shape, cout, stride) in LAYERS.items():
            if ONLY and ONLY not in name:
                continue
            try:
                out[f"{prefix}{lib}|{name}"] = _timer(make(*_data(shape, cout, stride), stride))
            except Exception:  # noqa: BLE001 - a peer that cannot run a layer is left out of its row
                out[f"{prefix}{lib}|{name}"] = None
    if ONLY and ONLY != "step":
        return out
    if group == "numpy":
        out[f"{prefix}leanpass|digits step"] = _timer(leanpass_step(), 0.5)
    if group == "torch":
        out["pytorch|digits step"] = _timer(torch_step(), 0.5)
    return out


def _run(group: str, peers: str | None) -> dict[str, float | None]:
    env = dict(os.environ)
    if group == "peers" and peers:
        env["PYTHONPATH"] = peers
    done = subprocess.run([sys.executable, __file__, "--worker", group], check=True, capture_output=True, text=True,
                          env=env)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--worker":
        print(json.dumps(worker(sys.argv[2])))
        return
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 7
    peers = sys.argv[sys.argv.index("--peers") + 1] if "--peers" in sys.argv else None
    if "--only" in sys.argv:
        os.environ["BENCH_CONV_ONLY"] = sys.argv[sys.argv.index("--only") + 1]
    groups = ["numpy", "numpy+malloc", "torch"] + (["peers"] if peers else [])
    samples: dict[str, list[float]] = {}
    for r in range(rounds):
        for group in (groups if r % 2 == 0 else groups[::-1]):
            if group == "peers" and r > 0:  # the NumPy peers take minutes a round: measured once
                continue
            try:
                result = _run(group, peers)
            except subprocess.CalledProcessError as err:
                print(f"{group} failed: {err.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
                continue
            for key, value in result.items():
                if value is not None:
                    samples.setdefault(key, []).append(value)
    med = {k: statistics.median(v) for k, v in samples.items()}
    print(f"conv2d forward + backward (dX and dW), float32, one thread; medians of {rounds} interleaved rounds (ms)")
    libs = [lib for lib in COLUMNS if any(k.startswith(lib + "|") for k in med)]
    print(f"{'layer':20s}" + "".join(f"{lib:>21s}" for lib in libs) + f"{'LeanPass/PyTorch':>18s}{'+malloc':>9s}")
    nan = float("nan")
    for name in LAYERS:
        if not any(k.endswith("|" + name) for k in med):
            continue
        cells = "".join(f"{med[f'{lib}|{name}'] * 1e3:21.3f}" if f"{lib}|{name}" in med else f"{'-':>21s}"
                        for lib in libs)
        torch_ = med.get(f"pytorch|{name}", nan)
        ratio, ratio_m = med.get(f"leanpass|{name}", nan) / torch_, med.get(f"+malloc leanpass|{name}", nan) / torch_
        print(f"{name:20s}{cells}{ratio:17.2f}x{ratio_m:8.2f}x")
    torch_ = med.get("pytorch|digits step", nan)
    for label in ("leanpass", "+malloc leanpass"):
        if f"{label}|digits step" not in med:
            continue
        lean = med.get(f"{label}|digits step", nan)
        print(f"digits CNN training step, batch 64: {label:16s} {lean * 1e3:7.2f} ms, PyTorch {torch_ * 1e3:6.2f} ms, "
              f"{lean / torch_:.2f}x")


if __name__ == "__main__":
    main()
