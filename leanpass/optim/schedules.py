"""Learning-rate schedules: functions ``step -> learning rate`` (any such callable works as one).

>>> from leanpass import optim
>>> opt = optim.sgd(optim.exponential_decay(0.1, 0.5, 10))
>>> [round(optim.exponential_decay(0.1, 0.5, 10)(step), 4) for step in (0, 10, 20)]
[0.1, 0.05, 0.025]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from .updates import _float

__all__ = ["Schedule", "constant_schedule", "cosine_decay", "exponential_decay", "warmup_cosine", "step_decay",
           "piecewise_constant_schedule"]

Schedule = Callable[[int], float]


def constant_schedule(value: float) -> Schedule:
    """``step -> value``.

    >>> constant_schedule(0.1)(100)
    0.1
    """
    return lambda step: value


def exponential_decay(init_value: float, decay_rate: float, decay_steps: int, staircase: bool = False) -> Schedule:
    """``init_value * decay_rate ** (step / decay_steps)``; with ``staircase`` the exponent is
    rounded down, so the rate drops by ``decay_rate`` every ``decay_steps`` steps (as optax's).

    >>> exponential_decay(1.0, 0.5, 10)(20)
    0.25
    >>> exponential_decay(1.0, 0.5, 10, staircase=True)(15)
    0.5
    """
    if not decay_steps > 0:
        raise ValueError(f"exponential_decay: decay_steps must be > 0, got {decay_steps}")
    if staircase:
        return lambda step: _float(init_value * decay_rate ** np.floor_divide(step, decay_steps))
    return lambda step: init_value * decay_rate ** (step / decay_steps)


def step_decay(init_value: float, step_size: int, gamma: float = 0.1) -> Schedule:
    """``init_value * gamma ** (step // step_size)``: the rate multiplied by ``gamma`` every
    ``step_size`` steps (PyTorch's ``StepLR``; ``exponential_decay(..., staircase=True)``).

    >>> s = step_decay(1.0, 30, gamma=0.1)
    >>> s(29), s(30), round(s(60), 10)
    (1.0, 0.1, 0.01)
    """
    if not step_size > 0:
        raise ValueError(f"step_decay: step_size must be > 0, got {step_size}")
    return exponential_decay(init_value, gamma, step_size, staircase=True)


def piecewise_constant_schedule(init_value: float, boundaries_and_scales: dict[int, float]) -> Schedule:
    """``init_value``, multiplied by ``scale`` once the step reaches each ``boundary`` (optax's).

    PyTorch's ``MultiStepLR(milestones=[30, 80], gamma=0.1)`` is
    ``piecewise_constant_schedule(lr, {30: 0.1, 80: 0.1})``.

    >>> s = piecewise_constant_schedule(1.0, {10: 0.5, 20: 0.1})
    >>> s(9), s(10), s(25)
    (1.0, 0.5, 0.05)
    """
    items = sorted((int(b), float(v)) for b, v in boundaries_and_scales.items())
    for b, v in items:
        if b < 0 or v < 0:
            raise ValueError(f"piecewise_constant_schedule: boundaries and scales must be >= 0, got {b}: {v}")

    def schedule(step: int) -> float:
        value: Any = init_value
        for boundary, scale in items:  # (np.where: a step count traced by lp.jit stays traced)
            value = value * np.where(np.greater_equal(step, boundary), scale, 1.0)
        return _float(value)

    return schedule


def cosine_decay(init_value: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Cosine from ``init_value`` down to ``alpha * init_value`` over ``decay_steps``, then flat.

    >>> s = cosine_decay(1.0, 100)
    >>> s(0), round(s(50), 6), s(100)
    (1.0, 0.5, 0.0)
    """

    def schedule(step: int) -> float:
        # (np.cos and np.minimum: math.cos's bits, and they take a step count traced by lp.jit)
        frac = np.minimum(step, decay_steps) / decay_steps
        return _float(init_value * ((1 - alpha) * 0.5 * (1 + np.cos(math.pi * frac)) + alpha))

    return schedule


def warmup_cosine(peak_value: float, warmup_steps: int, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Linear warm-up from 0 to ``peak_value`` over ``warmup_steps``, then ``cosine_decay``.

    >>> s = warmup_cosine(1.0, 10, 100)
    >>> s(0), s(5), s(10)
    (0.0, 0.5, 1.0)
    """
    decay = cosine_decay(peak_value, decay_steps, alpha)

    def schedule(step: int) -> float:
        if step < warmup_steps:
            return peak_value * step / warmup_steps
        return decay(step - warmup_steps)

    return schedule


# Their public home is ``leanpass.optim`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__[1:]:
    globals()[_name].__module__ = "leanpass.optim"
del _name
