"""LeanPass: a lean automatic-differentiation library on NumPy.

>>> import leanpass as lp
>>> x = lp.Tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> (x * x).sum().backward()
>>> x.grad
Tensor([2., 4., 6.])
>>> lp.grad(lambda w: (w ** 2).sum())(np.array([1.0, 2.0]))
array([2., 4.])
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from . import functional
from .core import tensor as _tensor
from .core.tensor import ConversionError, Tensor, apply, no_grad, stop_gradient
from .core.tree import register_pytree, tree_flatten, tree_map, tree_unflatten
from .numpy import dispatch as _numpy_dispatch  # noqa: F401 (installs NumPy dispatch on Tensor)
from .numpy.arrays import *  # noqa: F403 - NumPy's array-arranging functions (vstack, tile, diagonal, ...)
from .numpy.arrays import __all__ as _arrays_all
from .numpy.basics import (
    abs,
    add,
    astype,
    broadcast_to,
    clip,
    concatenate,
    cos,
    divide,
    einsum,
    exp,
    expand_dims,
    flatten,
    gelu,
    leaky_relu,
    linear,
    log,
    log_softmax,
    logaddexp,
    logsumexp,
    matmul,
    max,
    maximum,
    mean,
    min,
    minimum,
    multiply,
    negative,
    permute,
    power,
    relu,
    reshape,
    sigmoid,
    sin,
    softmax,
    softplus,
    split,
    sqrt,
    square,
    squeeze,
    stack,
    std,
    subtract,
    sum,
    swapaxes,
    take,
    tanh,
    transpose,
    var,
    where,
)
from .numpy.math import *  # noqa: F403 - NumPy's math (log1p, arctan2, erf, prod, cumsum, sort, median, ...)
from .numpy.math import __all__ as _math_all
from .numpy.products import *  # noqa: F403 - NumPy's products (dot, tensordot, kron, cross, ...)
from .numpy.products import __all__ as _contract_all
from .transforms.reverse_mode import grad, value_and_grad, vjp

__version__ = "0.1.0"

__all__ = [
    "Tensor", "ConversionError", "apply", "no_grad", "stop_gradient", "functional", "grad", "value_and_grad",
    "vjp", "jacobian",
    "hessian", "hvp", "tree_flatten", "tree_unflatten", "tree_map", "register_pytree",
    "abs", "add", "astype", "broadcast_to", "clip", "concatenate", "cos", "divide", "einsum",
    "exp", "expand_dims", "flatten", "gelu", "leaky_relu", "linear", "log", "log_softmax", "logaddexp",
    "logsumexp", "matmul", "max", "maximum", "mean", "min", "minimum", "multiply", "negative",
    "permute", "power", "relu", "reshape", "sigmoid", "sin", "softmax", "softplus",
    "split", "sqrt", "square", "squeeze", "stack", "std", "subtract", "sum", "swapaxes", "take",
    "tanh", "transpose", "var", "where",
]
__all__ += ["conv1d", "conv2d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d",
            "pad", "batch_norm", "group_norm", "layer_norm", "scaled_dot_product_attention"]
__all__ += [*_math_all, *_contract_all, *_arrays_all]
__all__ += ["jvp", "jacfwd", "jacrev"]
del np


def _graph_tools() -> Any:
    """leanpass.core.graph (Tensor.visualize, grad_check, ...), loaded the first time a Tensor asks."""
    from .core import graph

    return graph


_tensor.set_graph_tools(_graph_tools)


# Everything past differentiation (nn, optim, losses, data, checkpoints, transforms beyond grad, the
# SciPy-style functions, convolutions) loads on first use, so that `import leanpass` stays cheap for
# code that only differentiates. Name -> the module that defines it.
_LAZY = {"nn": "nn", "optim": "optim", "losses": "nn.losses", "metrics": "nn.metrics", "data": "data",
         "datasets": "datasets", "progress": "tools.progress_bar",
         "save": "checkpoint", "load": "checkpoint", "CheckpointError": "checkpoint",
         "linalg": "numpy.linalg", "special": "scipy.special", "stats": "scipy.stats",
         "vmap": "transforms.vmap.batching", "jit": "transforms.jit.jitted", "jvp": "transforms.forward_mode",
         **{name: "transforms.jacobians" for name in ("jacfwd", "jacrev", "jacobian", "hessian", "hvp")},
         **{name: "numpy.convolution" for name in ("conv1d", "conv2d", "conv_transpose2d", "max_pool1d",
                                                   "max_pool2d", "avg_pool1d", "avg_pool2d", "pad", "batch_norm",
                                                   "group_norm", "layer_norm")},
         "scaled_dot_product_attention": "numpy.attention",
         "to_dot": "tools.graph", "draw_graph": "tools.graph", "debug_nans": "tools.debug",
         "ops": "ops", "plugin_registry": "plugin_registry"}

if TYPE_CHECKING:
    from . import data, datasets, nn, ops, optim, plugin_registry
    from .checkpoint import CheckpointError, load, save
    from .nn import losses, metrics
    from .numpy import linalg
    from .numpy.attention import scaled_dot_product_attention
    from .numpy.convolution import (
        avg_pool1d,
        avg_pool2d,
        batch_norm,
        conv1d,
        conv2d,
        conv_transpose2d,
        group_norm,
        layer_norm,
        max_pool1d,
        max_pool2d,
        pad,
    )
    from .scipy import special, stats
    from .tools.debug import debug_nans
    from .tools.graph import draw_graph, to_dot
    from .tools.progress_bar import progress
    from .transforms.forward_mode import jvp
    from .transforms.jacobians import hessian, hvp, jacfwd, jacobian, jacrev
    from .transforms.jit.jitted import jit
    from .transforms.vmap.batching import vmap


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'leanpass' has no attribute {name!r}")
    import importlib

    loaded = importlib.import_module(f".{module}", __name__)
    value = loaded if module.rpartition(".")[2] == name else getattr(loaded, name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    """The public names, the lazily loaded ones too (without loading them), and the module's dunders."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})


__all__ += ["nn", "optim", "losses", "data", "datasets", "save", "load", "CheckpointError"]
__all__ += ["vmap"]
__all__ += ["linalg", "special", "stats"]
__all__ += ["jit"]
__all__ += ["to_dot", "draw_graph", "debug_nans"]
__all__ += ["ops", "plugin_registry"]
__all__ += ["metrics", "progress"]
