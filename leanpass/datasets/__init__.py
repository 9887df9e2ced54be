"""Small real data sets shipped inside the package (they load offline, with NumPy only).

``load_digits()``: the 8x8 handwritten digits (1,797 samples, 10 classes) from the UCI
Machine Learning Repository, E. Alpaydin and C. Kaynak, CC BY 4.0 (see DIGITS_LICENSE.txt
beside this file).

>>> from leanpass.datasets import load_digits
>>> x, y = load_digits()
>>> x.shape, x.dtype, y.shape, y.dtype
((1797, 64), dtype('float32'), (1797,), dtype('int64'))
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["load_digits", "DIGITS_PATH"]

DIGITS_PATH = Path(__file__).resolve().parent / "digits.npz"


def load_digits(dtype: Any = np.float32, flatten: bool = True, scale: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """The 8x8 handwritten digits: ``(images, labels)``, 1,797 samples of the digits 0..9.

    ``images`` are the pixel counts 0..16, divided by 16 into [0, 1] when ``scale`` (the default),
    as ``dtype``; shape ``(1797, 64)`` when ``flatten``, else ``(1797, 8, 8)``. With
    ``dtype=np.uint8`` (and ``scale=False``) you get the raw stored values. ``labels`` are int64.
    The arrays are new on every call: yours to change.

    Source: UCI ML repository, "Optical Recognition of Handwritten Digits", E. Alpaydin and
    C. Kaynak (1998), CC BY 4.0.

    >>> x, y = load_digits(flatten=False)
    >>> x.shape, float(x.max()), np.bincount(y)[:3].tolist()
    ((1797, 8, 8), 1.0, [178, 182, 177])
    """
    dt = np.dtype(dtype)
    if scale and dt.kind != "f":
        raise ValueError(f"load_digits: scale=True needs a float dtype, got {dt}; pass scale=False for raw counts")
    try:
        with np.load(DIGITS_PATH, allow_pickle=False) as f:
            images, labels = f["images"], f["labels"]
    except FileNotFoundError:
        raise FileNotFoundError(
            f"load_digits: the data file {DIGITS_PATH} is missing from this installation. Reinstall "
            "LeanPass (pip install --force-reinstall on its wheel, or pip install -e . in a clone of it), or "
            "regenerate the file in a clone with python scripts/make_digits.py."
        ) from None
    if images.shape != (1797, 8, 8) or labels.shape != (1797,):
        raise ValueError(f"load_digits: {DIGITS_PATH} is damaged (shapes {images.shape}, {labels.shape})")
    x = images.astype(dt)
    if scale:
        x /= dt.type(16)
    if flatten:
        x = x.reshape(len(x), 64)
    return x, labels.astype(np.int64)


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
