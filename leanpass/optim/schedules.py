"""Learning-rate schedules: functions ``step -> learning rate`` (any such callable works as one).

>>> from leanpass import optim
>>> opt = optim.sgd(optim.exponential_decay(0.1, 0.5, 10))
>>> [round(optim.exponential_decay(0.1, 0.5, 10)(step), 4) for step in (0, 10, 20)]
[0.1, 0.05, 0.025]
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from .updates import _float

__all__ = ["Schedule", "constant_schedule", "cosine_decay", "exponential_decay", "warmup_cosine"]

Schedule = Callable[[int], float]


def constant_schedule(value: float) -> Schedule:
    """``step -> value``.

    >>> constant_schedule(0.1)(100)
    0.1
    """
    return lambda step: value


def exponential_decay(init_value: float, decay_rate: float, decay_steps: int) -> Schedule:
    """``init_value * decay_rate ** (step / decay_steps)``.

    >>> exponential_decay(1.0, 0.5, 10)(20)
    0.25
    """
    return lambda step: init_value * decay_rate ** (step / decay_steps)


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
