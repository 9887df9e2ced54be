"""Train an MLP or a CNN on the bundled 8x8 handwritten digits, in the functional style (``leanpass.grad``).

    python -m leanpass.examples.digits                  # a few seconds; about 97.5% test accuracy
    python -m leanpass.examples.digits --model cnn      # a small CNN; about 99% test accuracy
    python -m leanpass.examples.digits --help
    python -m leanpass.examples.digits --plot digits.png   # needs matplotlib (pip install matplotlib)
    mpiexec -n 2 python -m leanpass.examples.digits --distributed   # data-parallel (pip install mpi4py mpich)
    python -m leanpass.examples.digits --no-jit         # the same training, each step run op by op

The training step (forward, backward, Adam update) is compiled with ``leanpass.jit``: traced
once, then replayed as straight NumPy, with the same results as without it, bit for bit.
Each epoch shows the training loss, the train and test accuracy and the elapsed time, on one
updating line in a terminal (plain lines when the output is a file or a pipe). The trained model
is saved with ``leanpass.save`` and loaded back to check the round trip: to ``--output``, by default
``digits_mlp.npz`` (``digits_cnn.npz``) in ``~/.cache/leanpass/examples`` (``$XDG_CACHE_HOME/leanpass/examples``).

With ``--distributed`` under ``mpiexec -n N`` every process trains the same model on its share
of each batch (``--batch-size`` is the global batch) and the gradients are averaged with
``leanpass.distributed.all_reduce_mean``; rank 0 alone prints and saves the model.
"""

from __future__ import annotations

import argparse
import io
import math
import os
import sys
import tempfile
import time
from collections.abc import Sequence
from typing import Any, TextIO

import numpy as np

import leanpass as lp
from leanpass import data, losses, nn, optim
from leanpass.datasets import load_digits
from leanpass.examples import default_output, output_dir


def accuracy(model: Any, x: np.ndarray, y: np.ndarray, state: Any = None) -> float:
    """The fraction of ``x`` that ``model`` classifies as ``y`` (no graph is recorded).

    ``state`` is the model's state (``BatchNorm``'s running statistics), if it has one.

    >>> model = nn.Sequential(nn.Linear(64, 10, rng=0))
    >>> 0.0 <= accuracy(model, np.zeros((4, 64)), np.zeros(4, dtype=int)) <= 1.0
    True
    """
    with lp.no_grad():
        logits = model(x) if state is None else model(x, state)
    return float(np.mean(np.argmax(logits.numpy(), axis=1) == y))


def loss_fn(model: Any, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator | None = None,
            label_smoothing: float = 0.0) -> lp.Tensor:
    """Mean softmax cross-entropy of the model's logits on a batch (``rng`` turns dropout on).

    >>> model = nn.Sequential(nn.Linear(64, 10, rng=0, init="zeros"))
    >>> float(loss_fn(model, np.zeros((2, 64)), np.array([0, 1])).item())
    2.3025851249694824
    """
    return losses.cross_entropy(model(xb, rng=rng), yb, label_smoothing=label_smoothing)


def stateful_loss_fn(model: Any, state: Any, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator | None = None,
                     label_smoothing: float = 0.0) -> tuple[lp.Tensor, Any]:
    """``loss_fn`` for a model with state: ``(loss, new_state)``, for ``value_and_grad(..., has_aux=True)``.

    >>> model = nn.Sequential(nn.BatchNorm(64), nn.Linear(64, 10, rng=0, init="zeros"))
    >>> loss, state = stateful_loss_fn(model, model.init_state(), np.ones((2, 64)), np.array([0, 1]))
    >>> round(float(loss.item()), 4), state[0]["mean"][:2]
    (2.3026, array([0.1, 0.1], dtype=float32))
    """
    logits, state = model(xb, state, train=True, rng=rng)
    return losses.cross_entropy(logits, yb, label_smoothing=label_smoothing), state


class Progress:
    """Print one line per epoch: rewritten in place in a terminal, appended otherwise.

    >>> import io
    >>> out = io.StringIO()
    >>> p = Progress(out)
    >>> p.show("epoch 1")
    >>> p.done()
    >>> out.getvalue()
    'epoch 1\\n'
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.width = 0

    def show(self, text: str) -> None:
        """Show ``text`` as the current progress line."""
        if self.tty:
            pad = max(0, self.width - len(text))
            self.stream.write("\r" + text + " " * pad)
            self.width = len(text)
        else:
            self.stream.write(text + "\n")
        self.stream.flush()

    def done(self) -> None:
        """End the updating line (a newline in a terminal)."""
        if self.tty and self.width:
            self.stream.write("\n")
            self.stream.flush()
        self.width = 0


def limit_blas_threads(n: int) -> bool:
    """Ask the OpenBLAS inside NumPy to use ``n`` threads; True if it could be done.

    The matrices here are tiny (a batch of 32 by 256), so extra BLAS threads only add
    synchronisation, and on a busy machine they fight other processes for the cores. This
    finds the loaded OpenBLAS (as ``threadpoolctl`` does) and calls its thread setter.

    >>> import os
    >>> isinstance(limit_blas_threads(os.cpu_count() or 1), bool)
    True
    """
    import ctypes

    try:
        with open("/proc/self/maps") as maps:
            paths = {line.split()[-1] for line in maps if "openblas" in line.lower() and ".so" in line}
    except OSError:
        return False
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for name in ("scipy_openblas_set_num_threads64_", "openblas_set_num_threads64_", "openblas_set_num_threads"):
            setter = getattr(lib, name, None)
            if setter is not None:
                setter(int(n))
                return True
    return False


def keep_freed_memory(limit: int = 32 * 1024 * 1024) -> bool:
    """Ask glibc's ``malloc`` to keep freed blocks up to ``limit`` bytes for reuse; True if it could be done.

    By default glibc maps every block over 128 KiB fresh from the kernel and returns it on ``free``,
    so each new array of a convolutional layer's size (a batch of 64 at 32 channels of 8x8 is
    512 KiB) starts with a page fault per 4 KiB: on a busy machine those faults took half of a CNN
    training step. Raising the mapping and trim thresholds (``mallopt``) lets the process reuse
    the memory it freed, as PyTorch's caching allocator does. It costs a resident size that stays
    at its peak. Linux with glibc only; elsewhere nothing changes.

    >>> isinstance(keep_freed_memory(), bool)
    True
    """
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
    except OSError:
        return False
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is None:
        return False
    m_trim_threshold, m_mmap_threshold = -1, -3  # glibc's malloc.h
    return bool(mallopt(m_mmap_threshold, int(limit))) and bool(mallopt(m_trim_threshold, 4 * int(limit)))


def have_matplotlib() -> bool:
    """True when matplotlib can be imported (the optional ``plot`` extra).

    >>> isinstance(have_matplotlib(), bool)
    True
    """
    try:
        import matplotlib  # type: ignore[import-not-found, unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


PLOT_MISSING = ("--plot needs matplotlib, which is not installed: pip install matplotlib (LeanPass's \"plot\" "
                "extra). Training without a plot.")


def write_plot(path: str, history: dict[str, list[float]]) -> None:
    """Write the loss and accuracy curves in ``history`` to a PNG at ``path`` (needs matplotlib).

    >>> import os, tempfile
    >>> path = os.path.join(tempfile.mkdtemp(), "curves.png")
    >>> if have_matplotlib():
    ...     write_plot(path, {"loss": [1.0, 0.5], "train_acc": [0.5, 0.9], "test_acc": [0.5, 0.8]})
    >>> os.path.exists(path) == have_matplotlib()
    True
    """
    import matplotlib  # type: ignore[import-not-found, unused-ignore]

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt  # type: ignore[import-not-found, unused-ignore]

    epochs = np.arange(1, len(history["loss"]) + 1)
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9, 3.5))
    ax_loss.plot(epochs, history["loss"])
    ax_loss.set(xlabel="epoch", ylabel="training loss", yscale="log", title="loss")
    ax_acc.plot(epochs, history["train_acc"], label="train")
    ax_acc.plot(epochs, history["test_acc"], label="test")
    ax_acc.set(xlabel="epoch", ylabel="accuracy", title="accuracy")
    ax_acc.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def cnn(rng: np.random.Generator, dropout: float = 0.3) -> nn.Sequential:
    """The small CNN for (N, 1, 8, 8) digits: two 3x3 convolutions, each with batch norm and 2x2 max pooling,
    then a linear layer. It has state (the batch norms' running statistics): see ``init_state()``.

    >>> cnn(np.random.default_rng(0)).num_params
    21578
    """
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1, rng=rng), nn.BatchNorm(32), nn.relu, nn.MaxPool2d(2),   # (N, 32, 4, 4)
        nn.Conv2d(32, 64, 3, padding=1, rng=rng), nn.BatchNorm(64), nn.relu, nn.MaxPool2d(2),  # (N, 64, 2, 2)
        nn.Flatten(), nn.Dropout(dropout), nn.Linear(256, 10, rng=rng),
    )


def train(epochs: int | None = None, seed: int = 0, hidden: Sequence[int] = (256,), lr: float = 3e-3,
          batch_size: int | None = None, dropout: float | None = None, output: str | None = None,
          plot: str | None = None, stream: TextIO | None = None, model: str = "mlp",
          label_smoothing: float | None = None, distributed: bool = False,
          jit: bool = True) -> dict[str, Any]:
    """Train, report progress, save the model to ``output`` if given; return the final figures and the history.

    ``model`` is ``"mlp"`` (an MLP on the 64 pixels) or ``"cnn"`` (``cnn()`` on 1x8x8 images).
    ``epochs``, ``batch_size``, ``dropout`` and ``label_smoothing`` default to 40, 32, 0.2, 0 for the MLP
    and 30, 64, 0.3, 0.1 for the CNN. The CNN's checkpoint holds ``{"model": ..., "state": ...}``.

    ``distributed=True`` trains data-parallel over the processes ``mpiexec`` started (see
    ``leanpass.distributed``): ``batch_size`` is then the global batch, and only rank 0 prints,
    plots and saves (each rank keeps the batch-norm statistics of its own shard). ``jit=True``
    compiles the MLP's training step with ``leanpass.jit`` (without ``distributed``, whose gradients
    are averaged over the processes between the backward pass and the update); the CNN runs op by op.

    >>> import io
    >>> result = train(epochs=2, output=None, stream=io.StringIO())
    >>> sorted(result)
    ['history', 'model', 'seconds', 'state', 'test_acc', 'train_acc']
    """
    if model not in ("mlp", "cnn"):
        raise ValueError(f"train: model must be 'mlp' or 'cnn', got {model!r}")
    is_cnn = model == "cnn"
    epochs = epochs if epochs is not None else 30 if is_cnn else 40
    label_smoothing = label_smoothing if label_smoothing is not None else 0.1 if is_cnn else 0.0
    batch_size = batch_size if batch_size is not None else 64 if is_cnn else 32
    dropout = dropout if dropout is not None else 0.3 if is_cnn else 0.2
    out = stream if stream is not None else sys.stdout
    rank, size, shard = 0, 1, None
    if distributed:
        from leanpass import distributed as dist

        rank, size = dist.rank(), dist.world_size()
        shard = (rank, size)
        if rank != 0:  # rank 0 alone reports, plots and saves
            out, output, plot = io.StringIO(), None, None
    if plot and not have_matplotlib():
        print(PLOT_MISSING, file=sys.stderr)
        plot = None
    rng = np.random.default_rng(seed)
    x, y = load_digits()  # float32 pixels in [0, 1], shape (1797, 64); labels 0..9
    x_train, x_test, y_train, y_test = data.train_test_split(x, y, test_size=0.2, rng=rng, stratify=y)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + np.float32(0.1)  # standardise with training statistics
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    if is_cnn:  # images (N, 1, 8, 8)
        x_train, x_test = x_train.reshape(-1, 1, 8, 8), x_test.reshape(-1, 1, 8, 8)
        net = cnn(rng, dropout)
    else:
        widths = [64, *hidden]
        layers: list[Any] = []
        for a, b in zip(widths[:-1], widths[1:]):
            layers += [nn.Linear(a, b, rng=rng), nn.relu, nn.Dropout(dropout)]
        net = nn.Sequential(*layers, nn.Linear(widths[-1], 10, rng=rng))
    steps = epochs * data.num_batches(len(x_train), batch_size, shard=shard)
    opt = optim.adam(optim.cosine_decay(lr, steps, alpha=0.1))
    state = opt.init(net)
    net_state = net.init_state()  # the CNN's BatchNorm statistics (None for the MLP)
    value_and_grad = lp.value_and_grad(loss_fn) if net_state is None else lp.value_and_grad(stateful_loss_fn,
                                                                                            has_aux=True)
    drop_rng = rng  # the batches' order comes from rng: the same on every rank; dropout from drop_rng
    print(f"digits: {len(x_train)} training and {len(x_test)} test images; {model} {net.num_params:,} parameters",
          file=out)
    if distributed:
        net = dist.broadcast(net)  # the same start on every rank (here it already is: the same seed)
        drop_rng = np.random.default_rng([seed, 1 + rank])  # each rank its own dropout masks
        print(f"data-parallel on {size} process{'es' if size > 1 else ''}: global batch {batch_size}, "
              f"{batch_size // size} per process", file=out)

    def step(model: Any, state: Any, xb: np.ndarray, yb: np.ndarray, rng: np.random.Generator) -> Any:
        loss, grads = value_and_grad(model, xb, yb, rng, label_smoothing)
        updates, state = opt.update(grads, state, model)
        return optim.apply_updates(model, updates), state, loss

    # jit: one trace per batch shape (the last batch is smaller), then replays; the model and the
    # optimizer state are donated, so the update is written into their arrays.
    compiled = lp.jit(step, donate_argnums=(0, 1)) if jit and not distributed and net_state is None else None
    history: dict[str, list[float]] = {"loss": [], "train_acc": [], "test_acc": []}
    progress = Progress(out)
    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        total, count = 0.0, 0
        for xb, yb in data.batches(x_train, y_train, batch_size=batch_size, rng=rng, shard=shard):
            if compiled is not None:
                net, state, loss = compiled(net, state, xb, yb, drop_rng)
                total += loss.item() * len(yb)
                count += len(yb)
                continue
            if net_state is None:  # an rng: dropout is on while training
                loss, grads = value_and_grad(net, xb, yb, drop_rng, label_smoothing)
            else:
                (loss, net_state), grads = value_and_grad(net, net_state, xb, yb, drop_rng, label_smoothing)
            if distributed:
                grads = dist.all_reduce_mean(grads)  # every rank now holds the global batch's gradient
            updates, state = opt.update(grads, state, net)
            net = optim.apply_updates(net, updates)
            total += loss.item() * len(yb)
            count += len(yb)
        if distributed:
            total, count = dist.all_reduce_mean([total, float(count)])  # the ratio is the global mean
            dist.check_in_sync(net)  # one checksum per parameter: raises if the replicas drifted apart
        history["loss"].append(total / count)
        history["train_acc"].append(accuracy(net, x_train, y_train, net_state))
        history["test_acc"].append(accuracy(net, x_test, y_test, net_state))
        progress.show(f"epoch {epoch:3d}/{epochs}  loss {history['loss'][-1]:.4f}  "
                      f"train {history['train_acc'][-1]:6.2%}  test {history['test_acc'][-1]:6.2%}  "
                      f"{time.perf_counter() - start:5.1f} s")
    progress.done()
    seconds = time.perf_counter() - start
    test_acc = history["test_acc"][-1]
    print(f"done in {seconds:.1f} s: test accuracy {test_acc:.2%} on {len(x_test)} held-out images", file=out)
    if output:
        saved = net if net_state is None else {"model": net, "state": net_state}
        lp.save(output, saved)
        back = lp.load(output, like=saved)
        reloaded = accuracy(back, x_test, y_test) if net_state is None else accuracy(back["model"], x_test, y_test,
                                                                                      back["state"])
        print(f"saved the model to {output} (reloaded: test accuracy {reloaded:.2%})", file=out)
    if plot:
        write_plot(plot, history)
        print(f"wrote the plot to {plot}", file=out)
    return {"model": net, "state": net_state, "history": history, "train_acc": history["train_acc"][-1],
            "test_acc": test_acc,
            "seconds": seconds}


MAX_PARAMS = 50_000_000  # a 200 MB float32 model: far beyond what 1,437 training images call for


def check_common(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Refuse ``--epochs`` below 1 and a negative ``--seed``, as argparse refuses a bad option (exit 2).

    >>> parser = argparse.ArgumentParser(prog="demo")
    >>> check_common(parser, argparse.Namespace(epochs=3, seed=0))  # fine: nothing happens
    """
    if args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0 (NumPy seeds are non-negative), got {args.seed}")


def unwritable(path: str) -> str | None:
    """Why a checkpoint cannot be written at ``path`` (None when it can), checked before training.

    >>> unwritable("/no/such/dir/model.npz")
    "the directory '/no/such/dir' does not exist"
    """
    target = os.path.abspath(path)
    directory = os.path.dirname(target)
    if os.path.isdir(target):
        return "is a directory; give a file name, e.g. --output model.npz"
    if not os.path.isdir(directory):
        return f"the directory {directory!r} does not exist"
    try:  # (a real attempt: permission bits say nothing to root, nor about read-only file systems)
        fd, probe = tempfile.mkstemp(prefix=".leanpass-probe.", dir=directory)
    except OSError as e:
        return f"cannot write in {directory!r} ({e.strerror})"
    os.close(fd)
    os.unlink(probe)
    return None


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The command line: ``python -m leanpass.examples.digits [options]``.

    >>> result = main(["--epochs", "1", "--output", "", "--blas-threads", "0"])  # doctest: +ELLIPSIS
    digits: 1438 training and 359 test images; mlp 19,210 parameters
    epoch   1/1  loss 0.7... s
    done in ... s: test accuracy ...% on 359 held-out images
    >>> result["test_acc"] > 0.8
    True
    """
    parser = argparse.ArgumentParser(
        prog="python -m leanpass.examples.digits",
        description="Train an MLP or a CNN on the bundled 8x8 handwritten digits (UCI, 1,797 images) with LeanPass.",
    )
    parser.add_argument("--model", choices=("mlp", "cnn"), default="mlp",
                        help="mlp: an MLP on the 64 pixels; cnn: a small convolutional network (default mlp)")
    parser.add_argument("--epochs", type=int, default=None,
                        help="passes over the training set (default 40 for the MLP, 30 for the CNN)")
    parser.add_argument("--seed", type=int, default=0,
                        help="seed for the split, the weights and the batches (default 0)")
    parser.add_argument("--hidden", type=int, nargs="+", default=[256], metavar="N",
                        help="hidden layer width(s), e.g. --hidden 256 128 (default 256)")
    parser.add_argument("--lr", type=float, default=3e-3, help="Adam's peak learning rate (default 3e-3)")
    parser.add_argument("--dropout", type=float, default=None,
                        help="dropout rate after each hidden layer (default 0.2; the CNN's before its last layer, 0.3)")
    parser.add_argument("--label-smoothing", type=float, default=None,
                        help="cross-entropy label smoothing (default 0 for the MLP, 0.1 for the CNN)")
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help="OpenBLAS threads (default 1: faster for these small matrices; 0 leaves NumPy's default)")
    parser.add_argument("--batch-size", type=int, default=None, help="mini-batch size (default 32; 64 for the CNN)")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help=f"where to save the trained model (default digits_mlp.npz or digits_cnn.npz in "
                             f"{output_dir()}, the folder $XDG_CACHE_HOME/leanpass/examples or "
                             f"~/.cache/leanpass/examples; '' to skip)")
    parser.add_argument("--plot", metavar="PATH", help="write loss/accuracy curves to this PNG (needs matplotlib)")
    parser.add_argument("--jit", action=argparse.BooleanOptionalAction, default=True,
                        help="compile the training step with leanpass.jit (default; the same results, faster; "
                             "not with --distributed)")
    parser.add_argument("--distributed", action="store_true",
                        help="train data-parallel over the processes of mpiexec -n N (needs mpi4py and an MPI: "
                             "pip install mpi4py mpich); --batch-size is the global batch")
    args = parser.parse_args(argv)
    if args.epochs is not None and args.epochs < 1:
        parser.error(f"--epochs must be at least 1, got {args.epochs}")
    if args.seed < 0:
        parser.error(f"--seed must be >= 0 (NumPy seeds are non-negative), got {args.seed}")
    if ((args.batch_size is not None and args.batch_size < 1) or any(h < 1 for h in args.hidden)
            or not (math.isfinite(args.lr) and args.lr > 0)):
        parser.error("--batch-size, --hidden and --lr must be positive (and --lr finite)")
    if args.model == "mlp":
        widths = [64, *args.hidden, 10]
        params = sum((a + 1) * b for a, b in zip(widths[:-1], widths[1:]))
        if params > MAX_PARAMS:
            parser.error(f"--hidden {' '.join(map(str, args.hidden))} makes a model of {params:,} parameters "
                         f"({params * 4 / 2**30:.1f} GiB of float32 weights); this example allows up to {MAX_PARAMS:,}")
    if args.dropout is not None and not 0 <= args.dropout < 1:
        parser.error("--dropout must be in [0, 1)")
    if args.label_smoothing is not None and not 0 <= args.label_smoothing <= 1:
        parser.error("--label-smoothing must be in [0, 1]")
    output = args.output if args.output is not None else default_output(f"digits_{args.model}.npz")
    problem = unwritable(output) if output else None  # ("" saves nothing)
    if problem:
        parser.error(f"--output {output}: {problem}")
    if args.batch_size is None:
        args.batch_size = 64 if args.model == "cnn" else 32
    if args.distributed:
        from leanpass import distributed as dist

        if not dist.is_available():
            parser.exit(2, f"--distributed: {dist.MPI_MISSING} Then run: "
                           "mpiexec -n 2 python -m leanpass.examples.digits --distributed\n")
        if args.batch_size % dist.world_size():
            if dist.rank() != 0:  # one message, from rank 0; every rank stops
                raise SystemExit(2)
            parser.error(f"--batch-size {args.batch_size} is the global batch: it must be divisible by the "
                         f"{dist.world_size()} processes")
        if dist.world_size() == 1:
            print("--distributed: one process (start several with mpiexec -n N); training as usual",
                  file=sys.stderr)
    if args.blas_threads > 0:
        limit_blas_threads(args.blas_threads)
    if args.model == "cnn":
        keep_freed_memory()
    return train(epochs=args.epochs, seed=args.seed, hidden=args.hidden, lr=args.lr, batch_size=args.batch_size,
                 dropout=args.dropout, output=output or None, plot=args.plot, model=args.model,
                 label_smoothing=args.label_smoothing, distributed=args.distributed, jit=args.jit)


if __name__ == "__main__":
    main()
