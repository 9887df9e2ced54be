"""LeanPass's operations as pure functions on arrays: ``op(*inputs) -> (output, vjp)``.

``vjp(g)`` maps the cotangent of the output to one cotangent per input (``None`` for an input
that has none, such as a parameter like ``axis``). Call them on NumPy arrays to test a rule or
to build an op of your own; the Tensor layer (``leanpass.exp``, ``t + u``, ...) records them.

>>> import numpy as np
>>> from leanpass import functional as F
>>> ans, vjp = F.mul(np.array([1.0, 2.0]), np.array([3.0, 4.0]))
>>> ans
array([3., 8.])
>>> vjp(np.ones(2))
(array([3., 4.]), array([1., 2.]))

Each op is declared once, in a record (``REGISTRY[name]``, an ``Op``, made by ``op(...)`` right
under the op's rules): its function, its forward-mode rule, whether it takes ``need=``, what its VJP
keeps alive, the NumPy functions of the same meaning, and how ``vmap`` batches it. ``OPS`` maps every
``_op`` name a Tensor can carry to its function; ``OPS``, ``JVPS`` and ``TAKES_NEED`` are derived from the records.

>>> REGISTRY["exp"].fn is OPS["exp"] is exp, "@" in TAKES_NEED, JVPS["exp"] is REGISTRY["exp"].jvp
(True, True, True)
"""

# ruff: noqa: F401 - the package re-exports its modules' ops by name (their names are in __all__, made below)
from __future__ import annotations

from typing import Any

from . import _registry
from ._broadcast import unbroadcast as unbroadcast
from ._registry import JVPS as JVPS
from ._registry import OPS as OPS
from ._registry import REGISTRY as REGISTRY
from ._registry import TAKES_NEED as TAKES_NEED
from ._registry import TRANSPOSED as TRANSPOSED
from ._registry import Op as Op
from ._registry import op as op
from .binary import add, div, linear, logaddexp, matmul, maximum, minimum, mul, power, sub
from .losses import cross_entropy
from .reductions import log_softmax, logsumexp, max, mean, min, softmax, std, sum, var
from .shapes import (
    astype,
    broadcast_to,
    concatenate,
    einsum,
    expand_dims,
    getitem,
    reshape,
    squeeze,
    stack,
    swapaxes,
    transpose,
    unindex,
    where,
)
from .shapes import (
    einsum_subscripts as einsum_subscripts,
)
from .unary import (
    abs,
    clip,
    cos,
    exp,
    gelu,
    identity,
    leaky_relu,
    log,
    neg,
    relu,
    sigmoid,
    sin,
    softplus,
    sqrt,
    square,
    tanh,
)

# Every op declares itself in one record (``op(...)``, right under its rules; see ``_registry.py``):
# ``REGISTRY`` holds them, and ``OPS`` (name -> function), ``JVPS`` (name -> forward-mode rule; an op
# declared ``jvp=TRANSPOSED`` has none, and ``jvp`` transposes its VJP) and ``TAKES_NEED`` (the ops
# whose function takes ``need=``: which inputs' cotangents to compute) are views derived from them.
# The ops of the modules in ``_LAZY_OPS`` load on first use, so that ``import leanpass`` stays cheap:
# they register as their module loads, and OPS loads them before it answers for a name it does not
# hold yet, or lists its ops.
_LAZY_OPS = _registry.LAZY
_LAZY_MODULE = _registry.LAZY_MODULE


def __getattr__(name: str) -> Any:
    """``functional.conv2d`` and the other ops that load on first use."""
    module = _LAZY_MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


# NumPy's elementwise functions, one line each in ``elementwise.py`` (log1p, arctan2, ...).
from .elementwise import *  # noqa: E402, F403 - log1p, arctan2, erf, ... (their names are in elementwise.__all__)
from .scans import cumprod, cumsum, prod  # noqa: E402

__all__ = sorted(["OPS", "JVPS", "TAKES_NEED", "REGISTRY", "Op", "op", "TRANSPOSED", "ELEMENTWISE",
                  "einsum_subscripts", "unbroadcast", *(f.__name__ for f in dict.values(OPS)), *_LAZY_MODULE])


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
