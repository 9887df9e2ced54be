"""The digits task in the eager style: ``loss.backward()`` fills ``.grad``, as in PyTorch.

    python -m leanpass.examples.digits_eager    # saves the model to ~/.cache/leanpass/examples/digits_eager.npz

The same model, data and optimizer as ``leanpass.examples.digits``; only the way the gradient
is taken differs. The parameters are Tensors with ``requires_grad=True`` (``nn.trainable``);
after ``backward()``, ``optim.collect_grads`` reads their ``.grad`` into a gradient pytree for
the optimizer, and ``optim.apply_updates`` returns new parameters (with fresh, empty ``.grad``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from typing import Any

import numpy as np

import leanpass as lp
from leanpass import data, losses, nn, optim
from leanpass.datasets import load_digits
from leanpass.examples import default_output, output_dir
from leanpass.examples.digits import accuracy, check_common, limit_blas_threads, unwritable


def train(epochs: int = 40, seed: int = 0, hidden: int = 256, lr: float = 3e-3, batch_size: int = 32,
          verbose: bool = True, output: str | None = None) -> dict[str, Any]:
    """Train with ``.backward()``, save the model to ``output`` if given (``leanpass.save``), and
    return the model and its final test accuracy.

    >>> result = train(epochs=2, verbose=False)
    >>> result["test_acc"] > 0.8
    True
    """
    rng = np.random.default_rng(seed)
    x, y = load_digits()
    x_train, x_test, y_train, y_test = data.train_test_split(x, y, test_size=0.2, rng=rng, stratify=y)
    mean, std = x_train.mean(axis=0), x_train.std(axis=0) + np.float32(0.1)
    x_train, x_test = (x_train - mean) / std, (x_test - mean) / std
    model = nn.trainable(nn.Sequential(
        nn.Linear(64, hidden, rng=rng), nn.relu, nn.Dropout(0.2), nn.Linear(hidden, 10, rng=rng)))
    opt = optim.adam(optim.cosine_decay(lr, epochs * data.num_batches(len(x_train), batch_size), alpha=0.1))
    state = opt.init(model)
    start = time.perf_counter()
    test_acc = 0.0
    for epoch in range(1, epochs + 1):
        for xb, yb in data.batches(x_train, y_train, batch_size=batch_size, rng=rng):
            loss = losses.cross_entropy(model(xb, rng=rng), yb)
            loss.backward()                          # fills .grad of every parameter
            grads = optim.collect_grads(model)       # the .grad values, shaped like the model
            updates, state = opt.update(grads, state, model)
            model = optim.apply_updates(model, updates)  # new parameters, .grad empty again
        test_acc = accuracy(model, x_test, y_test)
        if verbose:
            print(f"epoch {epoch:3d}/{epochs}  last loss {loss.item():.4f}  test {test_acc:6.2%}  "
                  f"{time.perf_counter() - start:5.1f} s")
    if output:
        lp.save(output, model)
        if verbose:
            print(f"saved the model to {output}")
    return {"model": model, "test_acc": test_acc, "seconds": time.perf_counter() - start}


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """The command line: ``python -m leanpass.examples.digits_eager [--epochs N] [--seed S] [--output PATH]``.

    >>> result = main(["--epochs", "1", "--output", "", "--blas-threads", "0"])  # doctest: +ELLIPSIS
    epoch   1/1  last loss ... test ...%  ... s
    """
    parser = argparse.ArgumentParser(prog="python -m leanpass.examples.digits_eager",
                                     description="Train on the digits with loss.backward() (the eager style).")
    parser.add_argument("--epochs", type=int, default=40, help="passes over the training set (default 40)")
    parser.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    parser.add_argument("--blas-threads", type=int, default=1, metavar="N",
                        help="OpenBLAS threads (default 1; 0 leaves NumPy's default)")
    parser.add_argument("--output", default=None, metavar="PATH",
                        help=f"where to save the trained model (default digits_eager.npz in {output_dir()}, the "
                             f"folder $XDG_CACHE_HOME/leanpass/examples or ~/.cache/leanpass/examples; '' to skip)")
    args = parser.parse_args(argv)
    check_common(parser, args)
    output = args.output if args.output is not None else default_output("digits_eager.npz")
    problem = unwritable(output) if output else None  # ("" saves nothing)
    if problem:
        parser.error(f"--output {output}: {problem}")
    if args.blas_threads > 0:
        limit_blas_threads(args.blas_threads)
    return train(epochs=args.epochs, seed=args.seed, output=output or None)


if __name__ == "__main__":
    main()
