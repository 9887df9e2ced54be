"""Optimizers as pairs of pure functions, in the style of optax.

An optimizer has ``init(params) -> state`` and ``update(grads, state, params) -> (updates,
state)``; ``apply_updates(params, updates)`` returns new parameters. Nothing is changed in
place: the old parameters and the old state stay valid. ``params`` and ``grads`` are pytrees of
the same structure (a model, a dict of Tensors, ...); updates and state hold NumPy arrays.

Functional style:

>>> import numpy as np
>>> import leanpass as lp
>>> from leanpass import optim
>>> params = {"w": lp.Tensor([1.0, -2.0])}
>>> opt = optim.sgd(0.1)
>>> state = opt.init(params)
>>> grads = lp.grad(lambda p: (p["w"] ** 2).sum())(params)
>>> updates, state = opt.update(grads, state, params)
>>> optim.apply_updates(params, updates)
{'w': Tensor([ 0.8, -1.6])}

Eager style (``.backward()`` leaves gradients in ``.grad``): read them with ``collect_grads``.

>>> w = lp.Tensor([1.0, -2.0], requires_grad=True)
>>> (w ** 2).sum().backward()
>>> updates, state = opt.update(optim.collect_grads([w]), opt.init([w]), [w])
>>> optim.apply_updates([w], updates)
[Tensor([ 0.8, -1.6], requires_grad=True)]

Object style (LeanPass 0.1's and PyTorch's): ``SGD`` and ``Adam`` hold the parameters and give them
new values at each ``step()``.

>>> opt = optim.SGD([w], lr=0.1)
>>> opt.step()
>>> w
Tensor([ 0.8, -1.6], requires_grad=True)
"""

from .aliases import LearningRate as LearningRate
from .aliases import _State as _State  # (pickle and checkpoints name an optimizer's state leanpass.optim._State)
from .aliases import adagrad, adam, adamw, rmsprop, sgd
from .objects import SGD, Adam
from .schedules import Schedule as Schedule
from .schedules import (
    constant_schedule,
    cosine_decay,
    exponential_decay,
    piecewise_constant_schedule,
    step_decay,
    warmup_cosine,
)
from .updates import EmaState as EmaState
from .updates import (
    Optimizer,
    apply_updates,
    chain,
    clip_by_global_norm,
    collect_grads,
    ema,
    freeze,
    global_norm,
    incremental_update,
    masked,
    reduce_on_plateau,
    set_to_zero,
)
from .updates import _PlateauState as _PlateauState  # (checkpoints name the states leanpass.optim.*)

__all__ = [
    "Optimizer", "sgd", "adam", "adamw", "apply_updates", "clip_by_global_norm", "global_norm",
    "collect_grads", "chain", "masked", "constant_schedule", "cosine_decay", "exponential_decay", "warmup_cosine",
    "rmsprop", "adagrad", "step_decay", "piecewise_constant_schedule", "reduce_on_plateau",
    "set_to_zero", "freeze", "ema", "EmaState", "incremental_update", "SGD", "Adam",
]


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
