"""``debug_nans()``: stop at the first op that makes a NaN, in the forward pass or in a backward pass.

>>> import leanpass as lp
>>> x = lp.Tensor([4.0, -1.0], requires_grad=True)
>>> with lp.debug_nans():
...     y = lp.sqrt(x)  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
FloatingPointError: debug_nans: op 'sqrt' made a NaN in the forward pass, from inputs of shapes ((2,))...
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from ..core import tensor as _tensor

__all__ = ["debug_nans"]


@contextmanager
def debug_nans() -> Iterator[None]:
    """Raise ``FloatingPointError`` at the first op whose output (or VJP's cotangent) holds a NaN.

    The message names the op (its ``op`` name), whether it was the forward or the backward pass,
    and the shapes of the op's inputs. It checks every op recorded for a differentiation (an op
    on a Tensor with ``requires_grad=True``, or anything inside ``grad``, ``vjp`` ...), and the
    VJP of each of them when a backward pass runs, including one run after the block has ended.
    In forward mode (``jvp``, ``jacfwd``, ``hessian``, ``hvp``) it checks each op's tangent as well,
    as the op runs: the first op whose output or tangent holds a NaN raises.
    Set the environment variable ``LEANPASS_DEBUG_NANS=1`` to switch it on for a whole run.
    It applies to every thread while a block is open; off, it costs nothing.

    >>> import numpy as np, leanpass as lp
    >>> norm = lambda x: lp.sqrt((x * x).sum())  # at 0, sqrt's VJP gives inf, and then inf * 0
    >>> with np.errstate(invalid="ignore"):
    ...     lp.grad(norm)(np.zeros(2))  # NaN, silently
    array([nan, nan])
    >>> with lp.debug_nans(), np.errstate(invalid="ignore"):
    ...     lp.grad(norm)(np.zeros(2))  # doctest: +ELLIPSIS
    Traceback (most recent call last):
      ...
    FloatingPointError: debug_nans: the VJP of op '*' made a NaN in the backward pass ...
    """
    _tensor.debug_nans_enter()
    try:
        yield
    finally:
        _tensor.debug_nans_exit()
