"""Neural-network modules: frozen dataclasses that are pytrees of ``Tensor`` parameters.

A module is a value. ``leanpass.grad(loss_fn)(model)`` returns a gradient with the model's
own shape (a ``Linear`` of gradients), an optimizer update returns a new model, and nothing
is ever changed in place. Every initialiser takes an ``np.random.Generator`` (or an int seed), so
the same seed gives the same model, bit for bit; without one (``nn.MLP([4, 8, 3])``, LeanPass
0.1.14's form) it draws from NumPy's global generator, so ``np.random.seed(n)`` repeats a run.

>>> import numpy as np
>>> from leanpass import nn
>>> model = nn.MLP([4, 8, 3], rng=np.random.default_rng(0))
>>> model
MLP(
  (0): Linear(4 -> 8, dtype=float32)
  (1): Linear(8 -> 3, dtype=float32)
  activation=relu, parameters=67
)
>>> model(np.ones((2, 4))).shape
(2, 3)
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..numpy.attention import scaled_dot_product_attention
from .init import (
    fan_in_uniform,
    glorot_normal,
    glorot_uniform,
    he_normal,
    he_uniform,
    kaiming_normal,
    kaiming_uniform,
    normal,
    orthogonal,
    xavier_normal,
    xavier_uniform,
    zeros,
)
from .layers import (
    ACTIVATIONS,
    MLP,
    Dropout,
    Embedding,
    LayerNorm,
    Linear,
    Sequential,
    dropout,
    gelu,
    gelu_exact,
    identity,
    leaky_relu,
    relu,
    sigmoid,
    softplus,
    tanh,
)
from .module import Module, param_count, trainable

__all__ = [
    "Module", "Linear", "MLP", "Sequential", "Embedding", "LayerNorm", "Dropout",
    "relu", "tanh", "sigmoid", "gelu", "gelu_exact", "leaky_relu", "softplus", "identity", "ACTIVATIONS",
    "he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "xavier_normal", "xavier_uniform",
    "zeros", "param_count", "trainable", "dropout", "scaled_dot_product_attention",
    "kaiming_normal", "kaiming_uniform", "normal", "orthogonal", "fan_in_uniform",
    "mse_loss", "cross_entropy_loss", "binary_cross_entropy_loss", "losses", "metrics",
    "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "Flatten", "GroupNorm", "BatchNorm",
    "CausalSelfAttention",
]


# doctest finds these classes here (their __module__), but their methods only in the module whose
# globals they have (layers.py, module.py): the methods' examples are listed here, to run as the classes' do.
__test__ = {f"{cls.__name__}.{name}": f for cls in (Module, Linear, MLP, Sequential, Embedding, LayerNorm, Dropout)
            for name, f in vars(cls).items() if type(f) is type(identity) and ">>>" in (f.__doc__ or "")}

# ----- convolutional layers and normalisation (in a module of their own, loaded on first use) -------
_CONV_LAYERS = ("Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "Flatten", "GroupNorm", "BatchNorm")


# LeanPass 0.1.14's loss functions (their home is leanpass.losses, loaded on first use)
_LOSSES = ("mse_loss", "cross_entropy_loss", "binary_cross_entropy_loss")


def __getattr__(name: str) -> Any:
    if name in _CONV_LAYERS:
        from . import conv as conv_layers

        return getattr(conv_layers, name)
    if name == "CausalSelfAttention":
        from .attention import CausalSelfAttention

        return CausalSelfAttention
    if name in _LOSSES:
        from . import losses

        return getattr(losses, name)
    if name in ("losses", "metrics"):  # (submodules, loaded on first use)
        import importlib

        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module 'leanpass.nn' has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names (``__all__``: the convolutional layers too, without loading them) and the dunders."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


if TYPE_CHECKING:
    from .attention import CausalSelfAttention
    from .conv import AvgPool2d, BatchNorm, Conv1d, Conv2d, ConvTranspose2d, Flatten, GroupNorm, MaxPool2d
    from .losses import binary_cross_entropy_loss, cross_entropy_loss, mse_loss
