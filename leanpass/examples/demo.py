"""Fit a tiny tanh network to a sine wave with ``leanpass.grad`` and plain gradient descent.

Run it with ``python -m leanpass.examples.demo``; it prints the loss as it falls.
"""

from __future__ import annotations

import time

import numpy as np

import leanpass as lp


def loss_fn(params: dict[str, lp.Tensor], x: np.ndarray, y: np.ndarray) -> lp.Tensor:
    """Mean squared error of a 1-32-1 tanh network."""
    hidden = lp.tanh(x @ params["w1"] + params["b1"])
    pred = hidden @ params["w2"] + params["b2"]
    return ((pred - y) ** 2).mean()


def main(steps: int = 2000, lr: float = 0.05, seed: int = 0) -> float:
    """Train and return the final loss.

    >>> final = main(steps=300)  # doctest: +ELLIPSIS
    step    0  loss 1.16647 ...
    >>> final < 0.05
    True
    """
    rng = np.random.default_rng(seed)
    x = np.linspace(-np.pi, np.pi, 128).reshape(-1, 1)
    y = np.sin(x)
    params = {
        "w1": lp.Tensor(rng.standard_normal((1, 32))),
        "b1": lp.Tensor(np.zeros(32)),
        "w2": lp.Tensor(rng.standard_normal((32, 1)) / np.sqrt(32)),
        "b2": lp.Tensor(np.zeros(1)),
    }
    value_and_grad = lp.value_and_grad(loss_fn)
    start = time.perf_counter()
    loss = lp.Tensor(np.inf)
    for step in range(steps):
        loss, grads = value_and_grad(params, x, y)
        params = lp.tree_map(lambda p, g: lp.Tensor(p.data - lr * g.data), params, grads)
        if step % 250 == 0 or step == steps - 1:
            print(f"step {step:4d}  loss {loss.item():.5f}  ({time.perf_counter() - start:.2f} s)")
    return loss.item()


if __name__ == "__main__":
    main()
