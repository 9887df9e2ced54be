"""The one broadcasting helper: sum a cotangent back to the shape of the input it belongs to."""

from __future__ import annotations

from typing import Any


def unbroadcast(g: Any, x: Any) -> Any:
    """Sum ``g`` over the axes NumPy broadcasting added or stretched, so it gets ``x``'s shape.

    ``x`` is the input (an array, a Tensor or a Python number); ``g`` an array or a Tensor.

    >>> import numpy as np
    >>> unbroadcast(np.ones((2, 3)), np.zeros((1, 3)))
    array([[2., 2., 2.]])
    >>> float(unbroadcast(np.ones((2, 3)), 5.0))
    6.0
    """
    # The common case first, and cheaply: this runs once per input of every arithmetic VJP.
    shape = x.shape if hasattr(x, "shape") else ()
    if g.shape == shape:
        return g
    gshape = g.shape
    lead = len(gshape) - len(shape)
    axes = list(range(lead))  # the axes broadcasting added in front
    for i, n in enumerate(shape):  # and those it stretched from 1 (no generator: no closure cells)
        if n == 1 and gshape[lead + i] != 1:
            axes.append(lead + i)
    if axes:
        g = g.sum(axis=tuple(axes))
    return g.reshape(shape) if g.shape != shape else g
