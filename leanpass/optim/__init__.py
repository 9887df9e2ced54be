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
"""

from .aliases import LearningRate as LearningRate
from .aliases import _State as _State  # (pickle and checkpoints name an optimizer's state leanpass.optim._State)
from .aliases import adam, adamw, sgd
from .schedules import Schedule as Schedule
from .schedules import constant_schedule, cosine_decay, exponential_decay, warmup_cosine
from .updates import Optimizer, apply_updates, chain, clip_by_global_norm, collect_grads, global_norm, masked

__all__ = [
    "Optimizer", "sgd", "adam", "adamw", "apply_updates", "clip_by_global_norm", "global_norm",
    "collect_grads", "chain", "masked", "constant_schedule", "cosine_decay", "exponential_decay", "warmup_cosine",
]
