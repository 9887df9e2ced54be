"""Fit a noisy sine wave with an ``nn.MLP``, showing the everyday conveniences: a progress bar
(``lp.progress``, tqdm's when installed), RMSProp with a step-decay schedule, the Huber loss, an
exponential moving average of the parameters for evaluation, and ``named_parameters``.

    python -m leanpass.examples.regression             # a few seconds
    pip install tqdm                    # for tqdm's bar (a plain one otherwise)
"""

from __future__ import annotations

import sys
from typing import IO, Any

import numpy as np

import leanpass as lp
from leanpass import losses, nn, optim


def train(steps: int = 600, seed: int = 0, stream: IO[str] | None = None,
          use_tqdm: bool | None = None) -> dict[str, Any]:
    """Train and return the model, its average and their test errors.

    >>> import io
    >>> result = train(steps=200, stream=io.StringIO(), use_tqdm=False)
    >>> result["ema_mse"] < 0.05
    True
    """
    out = sys.stdout if stream is None else stream
    rng = np.random.default_rng(seed)
    x = rng.uniform(-np.pi, np.pi, (256, 1))
    y = np.sin(x) + 0.1 * rng.standard_normal(x.shape)
    x_test = np.linspace(-np.pi, np.pi, 101).reshape(-1, 1)
    y_test = np.sin(x_test)

    model = nn.MLP([1, 32, 32, 1], rng=rng, activation="tanh", dtype=np.float64)
    opt = optim.rmsprop(optim.step_decay(1e-2, step_size=max(steps // 3, 1), gamma=0.3))
    averager = optim.ema(0.98)
    state, ema_state = opt.init(model), averager.init(model)

    def loss_fn(m: Any, xb: np.ndarray, yb: np.ndarray) -> Any:
        return losses.huber(m(xb), yb, delta=0.5)

    value_and_grad = lp.jit(lp.value_and_grad(loss_fn))
    bar = lp.progress(range(steps), desc="fitting", file=out, use_tqdm=use_tqdm)
    for step in bar:
        batch = rng.integers(0, len(x), 32)
        loss, grads = value_and_grad(model, x[batch], y[batch])
        updates, state = opt.update(grads, state, model)
        model = optim.apply_updates(model, updates)
        averaged, ema_state = averager.update(model, ema_state)
        if step % 50 == 0:
            bar.set_postfix(loss=loss.item())

    mse = losses.mse(model(x_test), y_test).item()
    ema_mse = losses.mse(averaged(x_test), y_test).item()
    print(f"test mse: model {mse:.4f}, its moving average {ema_mse:.4f}", file=out)
    for name, p in model.named_parameters():
        print(f"  {name:16s} {str(p.shape):8s} |mean| {float(np.abs(p.numpy()).mean()):.3f}", file=out)
    return {"model": model, "averaged": averaged, "mse": mse, "ema_mse": ema_mse}


if __name__ == "__main__":
    train()
