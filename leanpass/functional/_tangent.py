"""What the forward-mode rules share. A rule is ``rule(tangents, ans, *inputs) -> tangent``.

``inputs`` are the op's inputs as it was called (parameters such as ``axis`` included) and
``ans`` its output; ``tangents`` holds one tangent per input, ``None`` for an input without one
(a constant, a parameter, or an input the forward pass does not follow). The rule returns the
output's tangent: the Jacobian-vector product. It never sees all-``None`` tangents, and may
return a tangent that still has to be broadcast to the output's shape (``x + y`` with only
``x`` followed): ``leanpass.forward`` broadcasts it, in one place.

Like the VJPs, the rules use NumPy's functions and operators only, so that the same code runs on
Tensors (and is recorded) when the forward pass is itself differentiated.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np

from ._lift import as_dtype_of

_NO_CONTEXT = contextlib.nullcontext()


def total(*terms: Any) -> Any:
    """The sum of the terms that are not ``None`` (``None`` when all are): a product rule's parts.

    >>> total(None, 2.0, None, 3.0), total(None)
    (5.0, None)
    """
    out = None
    for t in terms:
        if t is not None:
            out = t if out is None else out + t
    return out


def of_first(op: Callable[..., Any]) -> Callable[..., Any]:
    """The rule of an op linear in its first input (a reshape, a sum, ``x[index]``): the op itself,
    applied to that input's tangent with the same parameters.

    >>> import numpy as np
    >>> from leanpass.functional import reshape
    >>> of_first(reshape)((np.arange(4.0), None), None, np.zeros(4), (2, 2))
    array([[0., 1.],
           [2., 3.]])
    """

    def rule(tangents: tuple[Any, ...], ans: Any, x: Any, *params: Any) -> Any:
        return op(tangents[0], *params)[0]

    rule.__name__ = f"{op.__name__}_jvp"
    rule.__doc__ = f"Forward-mode rule of ``{op.__name__}``: ``{op.__name__}`` of the tangent (the op is linear)."
    return rule


def from_derivatives(derivatives: tuple[Callable[..., Any], ...], quiet: bool = False) -> Callable[..., Any]:
    """The rule of an elementwise op declared by its derivatives, as in ``ELEMENTWISE``:
    ``d(x, ans)`` for one input (``t * d``), ``(dx(x, y, ans), dy(x, y, ans))`` for two (``tx * dx +
    ty * dy``): the same derivatives that make its VJP (``g * d``). ``quiet`` silences NumPy's
    warnings where the inputs leave the domain, as the op does.

    >>> import numpy as np
    >>> rule = from_derivatives((lambda x, ans: 2 * x,))  # x ** 2
    >>> rule((np.array([1.0, 0.5]),), None, np.array([3.0, 4.0]))
    array([6., 4.])
    """
    if len(derivatives) == 1:
        d = derivatives[0]

        def unary(tangents: tuple[Any, ...], ans: Any, x: Any, *params: Any) -> Any:
            with np.errstate(divide="ignore", invalid="ignore") if quiet else _NO_CONTEXT:
                return tangents[0] * d(x, ans)

        return unary
    dx, dy = derivatives

    def binary(tangents: tuple[Any, ...], ans: Any, x: Any, y: Any) -> Any:
        tx, ty = tangents
        x, y = as_dtype_of(x, y), as_dtype_of(y, x)  # (a Python number as the op takes it: see elementwise.py)
        with np.errstate(divide="ignore", invalid="ignore") if quiet else _NO_CONTEXT:
            return total(None if tx is None else tx * dx(x, y, ans), None if ty is None else ty * dy(x, y, ans))

    return binary
