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

``OPS`` is the one VJP table: every ``_op`` name a Tensor can carry, mapped to its function.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from . import binary as _binary
from . import elementwise as _elementwise
from . import losses as _losses
from . import reductions as _reductions
from . import shapes as _shapes
from . import unary as _unary
from ._broadcast import unbroadcast as unbroadcast
from ._tangent import from_derivatives, of_first
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

# The ops of these modules load on first use, so that ``import leanpass`` stays cheap: a module adds
# its ops to OPS when it loads (``_loaded``), and OPS loads them all before it answers for a name it
# does not hold yet, or lists its ops.
_LAZY_OPS: dict[str, tuple[str, ...]] = {
    "conv": ("conv1d", "conv2d", "conv2d_weight", "conv_transpose2d", "conv_transpose_input"),
    "pooling": ("avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"),
    "padding": ("pad",),
    "norms": ("batch_norm", "group_norm"),
    "linalg": ("cholesky", "cofactor", "det", "eigh", "inv", "lstsq", "norm", "pinv", "qr", "slogdet", "solve", "svd"),
    "special": ("betaln", "digamma", "erfinv", "gammaln", "log_ndtr", "logit", "ndtr", "polygamma", "xlog1py",
                "xlogy", "i0e", "i1e"),
}
_LAZY_MODULE = {name: module for module, names in _LAZY_OPS.items() for name in names}


def _load_all() -> None:
    import importlib

    for module in _LAZY_OPS:
        importlib.import_module(f"{__name__}.{module}")


class _Table(dict[str, Any]):
    """The op table: a dict whose lookups of held names stay dict's own (the reverse pass's); a missing
    name, or a walk over the table, first loads the ops that load on first use."""

    def __missing__(self, name: str) -> Any:
        if name not in _LAZY_MODULE:
            raise KeyError(name)
        _load_all()
        return dict.__getitem__(self, name)

    def __iter__(self) -> Any:
        _load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        _load_all()
        return dict.__len__(self)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in _LAZY_MODULE

    def keys(self) -> Any:
        _load_all()
        return dict.keys(self)

    def values(self) -> Any:
        _load_all()
        return dict.values(self)

    def items(self) -> Any:
        _load_all()
        return dict.items(self)


class _Rules(_Table):
    """A table of rules for some of the ops (``JVPS``): as ``_Table``, but a name that loads on first
    use is in it only if its module, once loaded, gives it a rule."""

    def __contains__(self, name: object) -> bool:
        if not dict.__contains__(self, name) and name in _LAZY_MODULE:
            _load_all()
        return dict.__contains__(self, name)


def _loaded(module: str, namespace: dict[str, Any]) -> None:
    """Called by a module of ``_LAZY_OPS`` as it finishes loading: its ops join the table."""
    for name in _LAZY_OPS[module.rpartition(".")[2]]:
        dict.__setitem__(OPS, name, namespace[name])


def __getattr__(name: str) -> Any:
    """``functional.conv2d`` and the other ops that load on first use."""
    module = _LAZY_MODULE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(f"{__name__}.{module}"), name)


OPS: dict[str, Callable[..., Any]] = _Table({
    "+": add,
    "-": sub,
    "*": mul,
    "/": div,
    "**": power,
    "@": matmul,
    "neg": neg,
    "cross_entropy": cross_entropy,
    **{
        f.__name__: f
        for f in (
            abs, astype, broadcast_to, clip, concatenate, cos, einsum, exp, expand_dims, gelu,
            getitem, identity, leaky_relu, linear, log, log_softmax, logaddexp, logsumexp, max, maximum,
            mean, min, minimum, relu, reshape, sigmoid, sin, softmax, softplus, sqrt, square,
            squeeze, stack, std, sum, swapaxes, tanh, transpose, unindex, var, where,
        )
    },
})

# NumPy's elementwise functions, made from the table ``elementwise.ELEMENTWISE`` (log1p, arctan2, ...).
from .elementwise import *  # noqa: E402, F403 - log1p, arctan2, erf, ... (their names are in elementwise.__all__)

OPS.update(_elementwise.OPS)
from . import scans as _scans  # noqa: E402
from .scans import cumprod, cumsum, prod  # noqa: E402

OPS.update({"prod": prod, "cumsum": cumsum, "cumprod": cumprod})

# Forward-mode rules, each beside its op's VJP: op name -> ``rule(tangents, ans, *inputs)`` (see
# ``_tangent.py``). Every built-in op has one (those of the modules that load on first use join as
# the module loads); the ops of the ELEMENTWISE table get theirs from its derivatives
# (``t * d(x, ans)``). An op of the user's, recorded with ``apply``, has none: its VJP is transposed
# (leanpass/forward.py).
JVPS: dict[str, Callable[..., Any]] = _Rules({
    **_binary.JVPS, **_unary.JVPS, **_reductions.JVPS, **_shapes.JVPS, **_losses.JVPS,
    **{name: from_derivatives(ds, name in _elementwise._QUIET) for name, (_, ds) in _elementwise.ELEMENTWISE.items()},
    **_scans.JVPS,
    "cumsum": of_first(cumsum),
})  # (the ops that load on first use add theirs as they load: functional/linalg.py)

# Ops whose signature takes ``need=``: which inputs' cotangents to compute.
TAKES_NEED = frozenset({"+", "-", "*", "/", "**", "@", "linear", "maximum", "minimum", "logaddexp", "where", "einsum"})
TAKES_NEED = TAKES_NEED | _elementwise.BINARY
TAKES_NEED |= {"solve"}
TAKES_NEED |= {"conv1d", "conv2d", "conv2d_weight", "conv_transpose2d", "conv_transpose_input"}

__all__ = sorted(["OPS", "JVPS", "TAKES_NEED", "ELEMENTWISE", "einsum_subscripts", "unbroadcast",
                  *(f.__name__ for f in dict.values(OPS)), *_LAZY_MODULE])
