"""Optimizers as pairs of pure functions, in the style of optax (defined in ``aliases``)."""

from .aliases import *  # noqa: F403
from .aliases import LearningRate, Schedule, __all__, _leaf_paths, _State  # noqa: F401

for _name in [*__all__, "_State"]:
    globals()[_name].__module__ = "leanpass.optim"
del _name
