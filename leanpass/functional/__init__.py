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
from .linalg import cholesky, det, eigh, inv, lstsq, norm, pinv, qr, slogdet, solve, svd
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
from .special import betaln, digamma, erfinv, gammaln, log_ndtr, logit, ndtr, polygamma, xlog1py, xlogy
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

OPS: dict[str, Callable[..., Any]] = {
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
    # linear algebra (linalg.py)
    **{f.__name__: f for f in (cholesky, det, eigh, inv, lstsq, norm, pinv, qr, slogdet, solve, svd)},
    # special functions (special.py)
    **{f.__name__: f for f in (betaln, digamma, erfinv, gammaln, log_ndtr, logit, ndtr, polygamma, xlog1py, xlogy)},
}

# NumPy's elementwise functions, made from the table ``elementwise.ELEMENTWISE`` (log1p, arctan2, ...).
from .elementwise import *  # noqa: E402, F403 - log1p, arctan2, erf, ... (their names are in elementwise.__all__)

OPS.update(_elementwise.OPS)
from .scans import cumprod, cumsum, prod  # noqa: E402

OPS.update({"prod": prod, "cumsum": cumsum, "cumprod": cumprod})

# Forward-mode rules, each beside its op's VJP: op name -> ``rule(tangents, ans, *inputs)`` (see
# ``_tangent.py``). An op without one gets its rule from its VJP, transposed (leanpass/forward.py).
# The ops of the ELEMENTWISE table get theirs from its derivatives (``t * d(x, ans)``); ``**``,
# prod and cumprod none: their VJPs (the limits of ``x ** y`` at 0 and inf; exact at zeros) are
# transposed.
JVPS: dict[str, Callable[..., Any]] = {
    **_binary.JVPS, **_unary.JVPS, **_reductions.JVPS, **_shapes.JVPS, **_losses.JVPS,
    **{name: from_derivatives(ds, name in _elementwise._QUIET) for name, (_, ds) in _elementwise.ELEMENTWISE.items()},
    "cumsum": of_first(cumsum),
}

# Ops whose signature takes ``need=``: which inputs' cotangents to compute.
TAKES_NEED = frozenset({"+", "-", "*", "/", "**", "@", "linear", "maximum", "minimum", "logaddexp", "where", "einsum"})
TAKES_NEED = TAKES_NEED | _elementwise.BINARY
TAKES_NEED |= {"solve"}

__all__ = sorted(["OPS", "JVPS", "TAKES_NEED", "ELEMENTWISE", "einsum_subscripts", "unbroadcast",
                  *(f.__name__ for f in OPS.values())])
