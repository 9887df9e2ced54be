"""Padding with ``np.pad``'s semantics: ``pad(x, pad_width, mode, constant_values)``. Returns ``(ans, vjp)``.

Constant padding's cotangent is the cotangent's middle. The other modes copy entries of ``x`` into
the border, so each entry's cotangent adds up the places it was copied to: ``np.pad`` applied to
the positions ``0 .. n-1`` of each axis says which entry every padded position holds, and the
cotangent is scattered back along each axis with ``unindex`` (a recorded op, so the rule
differentiates again). The op is linear in ``x``: its forward-mode rule pads the tangent the same
way, with zeros for the constant border (``constant_values`` is a parameter, not an input).

>>> ans, vjp = pad(np.array([1.0, 2.0, 3.0]), 2, "reflect")
>>> ans
array([3., 2., 1., 2., 3., 2., 1.])
>>> vjp(np.ones(7))[0]
array([2., 3., 2.])
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _lift
from ._registry import op
from .shapes import scatter

MODES = ("constant", "edge", "reflect", "symmetric", "wrap")


def pad_widths(pad_width: Any, ndim: int, shape: tuple[int, ...], where: str = "pad") -> tuple[tuple[int, int], ...]:
    """``pad_width`` in any of ``np.pad``'s forms as one ``(before, after)`` pair per axis, checked."""
    arr = np.asarray(pad_width)
    if arr.dtype.kind not in "iu" or arr.ndim > 2:
        raise ValueError(
            f"{where}: pad_width must be ints (n, (before, after), or one pair per axis), got {pad_width!r}")
    try:
        widths = np.broadcast_to(arr, (ndim, 2))
    except ValueError:
        raise ValueError(
            f"{where}: pad_width {pad_width!r} does not fit an input of shape {shape}: give one int, one "
            f"(before, after) pair, or {ndim} pairs"
        ) from None
    if (widths < 0).any():
        raise ValueError(f"{where}: pad_width must not be negative, got {pad_width!r} for an input of shape {shape}")
    return tuple((int(a), int(b)) for a, b in widths)


def pad(x: Any, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> tuple[Any, Any]:
    """Pad ``x`` as ``np.pad`` does, in mode ``constant``, ``edge``, ``reflect``, ``symmetric`` or ``wrap``.

    >>> pad(np.array([[1.0, 2.0]]), ((0, 0), (1, 2)), "wrap")[0]
    array([[2., 1., 2., 1., 2.]])
    """
    if mode not in MODES:
        raise ValueError(f"pad: mode must be one of {MODES}, got {mode!r}")
    shape = tuple(np.shape(x))
    widths = pad_widths(pad_width, len(shape), shape)
    if mode == "constant":
        if not np.isscalar(constant_values) and np.ndim(constant_values) != 0:
            raise ValueError("pad: constant_values must be one number here")
        ans = np.pad(x, widths, mode="constant", constant_values=constant_values)
        middle = tuple(slice(a, a + n) for (a, _), n in zip(widths, shape))
        return ans, lambda g: (g[middle], None, None, None)
    for (a, b), n in zip(widths, shape):
        if (a or b) and n == 0:
            raise ValueError(f"pad: mode {mode!r} cannot pad an empty axis (input shape {shape})")
        if mode == "reflect" and (a or b) and n == 1:
            raise ValueError(f"pad: mode 'reflect' needs at least 2 entries on a padded axis (input shape {shape})")
    ans = np.pad(x, widths, mode=mode)  # type: ignore[call-overload]  # (mode is checked above)
    sources = [np.pad(np.arange(n), w, mode=mode) if w != (0, 0) else None  # type: ignore[call-overload]
               for w, n in zip(widths, shape)]

    def vjp(g: Any) -> tuple[Any, ...]:
        out_shape = list(np.shape(g))
        for axis in reversed(range(len(shape))):
            src = sources[axis]
            if src is None:
                continue
            out_shape[axis] = shape[axis]
            index = (slice(None),) * axis + (src,)
            g = scatter(g, index, tuple(out_shape))
        return g, None, None, None

    return ans, vjp


def _pad_jvp(ts: tuple[Any, ...], ans: Any, x: Any, pad_width: Any, mode: str = "constant",
             constant_values: float = 0) -> Any:
    t = ts[0]
    if _lift.is_tensor(t):  # (inside another transform: recorded)
        return _lift.apply(pad, "pad", t, pad_width, mode)  # type: ignore[misc]
    return pad(t, pad_width, mode)[0]


op("pad", pad, jvp=_pad_jvp, keeps=("work",), numpy=(np.pad,))
