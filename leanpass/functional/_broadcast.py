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
    shape = getattr(x, "shape", ())
    gshape = g.shape
    if gshape == shape:
        return g
    lead = len(gshape) - len(shape)
    axes = tuple(range(lead)) + tuple(
        i + lead for i, n in enumerate(shape) if n == 1 and gshape[i + lead] != 1
    )
    if axes:
        g = g.sum(axis=axes)
    return g.reshape(shape) if g.shape != shape else g
