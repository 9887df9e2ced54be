"""Metrics: ``accuracy`` and ``top_k_accuracy`` of predictions against labels, as Python floats
(also ``leanpass.metrics``). They read values only: no gradient, nothing recorded.

>>> import numpy as np
>>> import leanpass as lp
>>> logits = np.array([[2.0, 0.5, 0.1], [0.2, 0.3, 0.9], [1.0, 3.0, 0.0]])
>>> lp.metrics.accuracy(logits, np.array([0, 2, 0]))
0.6666666666666666
>>> lp.metrics.top_k_accuracy(logits, np.array([0, 2, 0]), k=2)
1.0
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..core.tensor import ArrayLike, Tensor

__all__ = ["accuracy", "top_k_accuracy"]


def _values(x: Any) -> np.ndarray:
    return np.asarray(x._data if type(x) is Tensor else x)


def accuracy(predictions: ArrayLike, labels: ArrayLike, threshold: float | None = None) -> float:
    """The fraction of examples whose predicted class is the label.

    - ``predictions`` of shape ``(..., classes)`` (logits or probabilities) with integer ``labels``
      of shape ``(...)``: the class with the largest score is the prediction (``argmax``; the first
      one on ties).
    - ``predictions`` and ``labels`` of the same shape ``(..., classes)`` without ``threshold``:
      one-hot (or probability) labels, compared by their ``argmax`` (LeanPass 0.1.14's targets).
    - the same shape with ``threshold``: binary predictions, ``predictions > threshold`` against
      ``labels`` in {0, 1} (``threshold=0.5`` for probabilities, ``0.0`` for logits).
    - integer predictions of the labels' shape: class predictions, compared as they are.

    >>> accuracy(np.array([[0.1, 0.9], [0.8, 0.2]]), np.array([[0.0, 1.0], [0.0, 1.0]]))
    0.5
    >>> accuracy(np.array([-2.0, 0.5, 3.0]), np.array([0, 1, 0]), threshold=0.0)
    0.6666666666666666
    """
    p, y = _values(predictions), _values(labels)
    if p.shape == y.shape:
        if threshold is not None:
            correct = (p > threshold) == (y > 0.5)
        elif p.dtype.kind in "iub" and y.dtype.kind in "iub":
            correct = p == y
        elif p.ndim >= 2 or (p.ndim == 1 and y.dtype.kind == "f"):
            if p.ndim < 2:
                raise ValueError(_SAME_SHAPE.format(shape=p.shape))
            correct = p.argmax(axis=-1) == y.argmax(axis=-1)
        else:
            raise ValueError(_SAME_SHAPE.format(shape=p.shape))
    elif p.shape[:-1] == y.shape and y.dtype.kind in "iu":
        if threshold is not None:
            raise ValueError("accuracy: threshold is for binary predictions of the labels' shape, not class scores")
        correct = p.argmax(axis=-1) == y
    else:
        raise ValueError(
            f"accuracy: predictions of shape {p.shape} and labels of shape {y.shape} do not fit: give class "
            "scores (n, classes) with integer labels (n,) or one-hot labels (n, classes), or binary scores and "
            "labels of one shape with threshold=."
        )
    return float(np.mean(correct)) if correct.size else float("nan")


_SAME_SHAPE = ("accuracy: predictions and labels of the same shape {shape} are ambiguous: pass threshold= for "
               "binary scores (0.5 for probabilities, 0.0 for logits), or give one-hot labels a class axis "
               "(shape (n, classes)).")


def top_k_accuracy(predictions: ArrayLike, labels: ArrayLike, k: int = 5) -> float:
    """The fraction of examples whose label is among the ``k`` highest-scoring classes.

    ``predictions`` has shape ``(..., classes)``; ``labels`` are integer classes of shape ``(...)``
    or one-hot of the predictions' shape. An example counts when fewer than ``k`` classes score
    strictly higher than its label (so ties count in the label's favour).

    >>> top_k_accuracy(np.array([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]]), np.array([2, 0]), k=2)
    0.0
    >>> top_k_accuracy(np.array([[0.5, 0.3, 0.2], [0.1, 0.2, 0.7]]), np.array([1, 1]), k=2)
    1.0
    """
    p, y = _values(predictions), _values(labels)
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ValueError(f"top_k_accuracy: k must be an int >= 1, got {k!r}")
    if p.shape == y.shape and p.ndim >= 1:
        y = y.argmax(axis=-1)
    if p.ndim < 1 or p.shape[:-1] != y.shape or y.dtype.kind not in "iu":
        raise ValueError(
            f"top_k_accuracy: give class scores (..., classes) and integer labels (...) or one-hot labels of the "
            f"scores' shape; got scores {p.shape} and labels {y.shape} of dtype {y.dtype}."
        )
    if y.size and (y.min() < 0 or y.max() >= p.shape[-1]):
        raise ValueError(f"top_k_accuracy: labels must be in [0, {p.shape[-1]}), got {y.min()} to {y.max()}")
    label_score = np.take_along_axis(p, y[..., None], axis=-1)
    higher = (p > label_score).sum(axis=-1)
    return float(np.mean(higher < k)) if y.size else float("nan")


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
