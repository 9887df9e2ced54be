"""Loss functions: ``mse``, ``cross_entropy``, ``binary_cross_entropy_with_logits``, ``l1``,
``huber``, ``smooth_l1``, ``kl_div``, ``nll``, and LeanPass 0.1.14's ``mse_loss``,
``cross_entropy_loss`` and ``binary_cross_entropy_loss`` (also in ``leanpass.nn``).

Each takes Tensors or arrays and a ``reduction``: ``"mean"`` (the default), ``"sum"`` or
``"none"`` (one loss per example). The classification losses take logits (not
probabilities) and are written in their stable forms: no overflow and no ``nan`` gradient
for logits like +-1000.

>>> import numpy as np
>>> from leanpass import losses
>>> logits = np.array([[2.0, 0.0, -1.0], [0.0, 3.0, 0.0]])
>>> round(float(losses.cross_entropy(logits, np.array([0, 1])).item()), 4)
0.1324
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, apply
from ..functional import _lift
from ..numpy import arrays, basics

__all__ = ["mse", "cross_entropy", "binary_cross_entropy_with_logits", "l1", "huber", "smooth_l1", "kl_div", "nll",
           "mse_loss", "cross_entropy_loss", "binary_cross_entropy_loss"]

_REDUCTIONS = ("mean", "sum", "none")
_min = np.minimum.reduce  # an array's minimum without the Python wrapper of ndarray.min


def _check_reduction(reduction: str, where: str) -> None:
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{where}: reduction must be 'mean', 'sum' or 'none', got {reduction!r}")


def _reduce(loss: Any, reduction: str) -> Tensor:
    if reduction == "mean":
        return basics.mean(loss)
    if reduction == "sum":
        return basics.sum(loss)
    return loss if type(loss) is Tensor else Tensor(loss)


def _raw(x: Any) -> Any:
    return x._data if type(x) is Tensor else x if isinstance(x, _lift.ARRAYS) else np.asarray(x)


def _as_float(x: ArrayLike) -> Any:
    """Tensors pass through; anything else becomes an array (ints become float64)."""
    if type(x) is Tensor:
        return x
    arr = x if isinstance(x, _lift.ARRAYS) else np.asarray(x)
    return arr if arr.dtype.kind == "f" else arr.astype(np.float64)


def _like(target: ArrayLike, pred: Any, where: str) -> Any:
    """A target as an array in the prediction's dtype (a Tensor target is kept: it may be differentiated)."""
    if type(target) is Tensor:
        return target
    arr = target if isinstance(target, _lift.ARRAYS) else np.asarray(target)
    dtype = _raw(pred).dtype
    return arr if arr.dtype == dtype else arr.astype(dtype)


def _same_shape(a: Any, b: Any, what_a: str, what_b: str) -> None:
    """A clear error when a loss's two inputs differ in shape (no silent broadcasting)."""
    sa, sb = np.shape(_raw(a)), np.shape(_raw(b))
    if sa != sb:
        raise ValueError(
            f"{what_a} has shape {sa} but {what_b} has shape {sb}; they must match "
            "(reshape one, e.g. target.reshape(-1, 1))."
        )


def mse(pred: ArrayLike, target: ArrayLike, reduction: str = "mean") -> Tensor:
    """Mean squared error ``(pred - target) ** 2``, reduced by ``reduction``.

    Shapes must match exactly (no silent broadcasting of a ``(n,)`` target against ``(n, 1)``
    predictions).

    >>> mse(Tensor([1.0, 2.0]), np.array([0.0, 0.0]))
    Tensor(2.5)
    >>> mse(Tensor([1.0, 2.0]), np.array([0.0, 0.0]), reduction="none")
    Tensor([1., 4.])
    """
    _check_reduction(reduction, "mse")
    pred = _as_float(pred)
    target = _like(target, pred, "mse")
    _same_shape(pred, target, "mse: pred", "target")
    diff = basics.subtract(pred, target)
    return _reduce(diff * diff, reduction)


def cross_entropy(logits: ArrayLike, labels: ArrayLike, reduction: str = "mean",
                  label_smoothing: float = 0.0, ignore_index: int | None = None) -> Tensor:
    """Softmax cross-entropy of ``logits`` (shape ``(..., classes)``) against ``labels``.

    ``labels`` are either integer class indices (shape ``logits.shape[:-1]``) or probabilities
    over the classes (the shape of ``logits``, each row summing to 1). The loss of one example
    is ``-sum(p * log_softmax(logits))``, which for an index label ``k`` is
    ``logsumexp(logits) - logits[k]``.

    >>> logits = Tensor([[1000.0, -1000.0], [0.0, 0.0]])
    >>> cross_entropy(logits, np.array([0, 1]), reduction="none")
    Tensor([0.        , 0.69314718])
    >>> cross_entropy(logits, np.array([[1.0, 0.0], [0.5, 0.5]]), reduction="sum")
    Tensor(0.69314718)

    ``label_smoothing`` ``ε`` (as in PyTorch) mixes the targets with the uniform distribution:
    ``(1 - ε) * target + ε / classes``, so the loss is ``(1 - ε)`` times the plain one plus ``ε``
    times the mean of ``-log_softmax(logits)`` over the classes.

    >>> cross_entropy(Tensor([[0.0, 1000.0]]), np.array([1]), label_smoothing=0.2)
    Tensor(100.)

    ``ignore_index`` (as in PyTorch; for example ``-1`` for padding) skips the examples whose
    integer label equals it: they add nothing to the loss nor to the gradient, ``"mean"``
    averages over the other examples only, and ``"none"`` gives them a loss of 0. With every
    label ignored the mean is ``nan`` (0 / 0, as in PyTorch) and the gradient is zero.

    >>> cross_entropy(Tensor([[0.0, 0.0], [5.0, -5.0]]), np.array([1, -1]), ignore_index=-1)
    Tensor(0.69314718)
    """
    if reduction not in _REDUCTIONS:
        _check_reduction(reduction, "cross_entropy")
    if ignore_index is not None:
        return _ignoring(logits, labels, reduction, label_smoothing, ignore_index)
    if label_smoothing:
        if not 0.0 <= label_smoothing <= 1.0:
            raise ValueError(f"cross_entropy: label_smoothing must be in [0, 1], got {label_smoothing}")
        eps = float(label_smoothing)
        hard = cross_entropy(logits, labels, reduction)
        if type(logits) is not Tensor:
            logits = _as_float(logits)
        uniform = _reduce(basics.logsumexp(logits, axis=-1) - basics.mean(logits, axis=-1), reduction)
        return hard * (1.0 - eps) + uniform * eps
    if type(logits) is not Tensor:
        logits = _as_float(logits)
    data = logits._data if type(logits) is Tensor else logits
    shape = data.shape if type(data) is np.ndarray else np.shape(data)
    if len(shape) < 1:
        raise ValueError("cross_entropy: logits need a class axis (shape (n, classes) or (classes,))")
    lab = labels if isinstance(labels, _lift.ARRAYS) else labels._data if type(labels) is Tensor else np.asarray(labels)
    if lab.dtype.kind in "iu":
        if lab.shape != shape[:-1]:
            raise ValueError(
                f"cross_entropy: integer labels must have shape {shape[:-1]} (logits {shape} minus the "
                f"class axis), got {lab.shape}."
            )
        classes = shape[-1]
        if lab.size and _min(lab, axis=None) < 0:  # (too large an index makes the op raise IndexError)
            raise _label_range_error(lab, classes)
        flat = logits if len(shape) == 2 else basics.reshape(logits, (-1, classes))
        try:
            loss = apply(F.cross_entropy, "cross_entropy", flat, lab if lab.ndim == 1 else lab.reshape(-1), reduction)
        except IndexError:
            raise _label_range_error(lab, classes) from None
        if reduction == "none" and len(shape) != 2:
            loss = basics.reshape(loss, shape[:-1])
        return loss
    if lab.dtype.kind == "f" or type(labels) is Tensor:
        if lab.shape != shape:
            raise ValueError(
                f"cross_entropy: probability labels must have the logits' shape {shape}, got {lab.shape}. "
                "For class indices pass an integer array of shape logits.shape[:-1]."
            )
        target = _like(labels, logits, "cross_entropy")
        per_example = -basics.sum(target * basics.log_softmax(logits, axis=-1), axis=-1)
        return _reduce(per_example, reduction)
    raise TypeError(
        f"cross_entropy: labels must be integer class indices or float probabilities, got dtype {lab.dtype}."
    )


def _label_range_error(lab: np.ndarray, classes: int) -> ValueError:
    return ValueError(
        f"cross_entropy: labels must be class indices in [0, {classes}), got values from {lab.min()} to {lab.max()}"
        " (to skip the examples labelled, say, -1, pass ignore_index=-1)."
    )


def _ignoring(logits: ArrayLike, labels: ArrayLike, reduction: str, label_smoothing: float,
              ignore_index: int) -> Tensor:
    """``cross_entropy`` with ``ignore_index``: the per-example losses with the ignored ones zeroed,
    then added up, or averaged over the examples kept."""
    if isinstance(ignore_index, (bool, np.bool_)) or not isinstance(ignore_index, (int, np.integer)):
        raise TypeError(f"cross_entropy: ignore_index must be an int (a label value), got {ignore_index!r}")
    lab = _raw(labels)
    if lab.dtype.kind not in "iu":
        raise TypeError(
            f"cross_entropy: ignore_index applies to integer class labels, got labels of dtype {lab.dtype}; "
            "for probability labels give the examples to skip a weight of zero instead."
        )
    keep = lab != ignore_index
    per = cross_entropy(logits, np.where(keep, lab, 0), "none", label_smoothing)
    dtype = per._data.dtype
    per = per * keep.astype(dtype)
    if reduction == "none":
        return per
    total = basics.sum(per)
    if reduction == "sum":
        return total
    count = np.add.reduce(keep, axis=None)
    # 0 / 0 is nan, as in PyTorch; written as a nan added to total / 1, so that the gradient is zero
    # (not nan) and no division by zero warns.
    nan_if_none = np.where(count == 0, np.nan, 0.0).astype(dtype)
    return total / np.maximum(count, 1).astype(dtype) + nan_if_none


def binary_cross_entropy_with_logits(logits: ArrayLike, targets: ArrayLike, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of ``sigmoid(logits)`` against ``targets`` in [0, 1], computed from the logits.

    Per element ``softplus(x) - x * y`` (= ``-y log sigmoid(x) - (1 - y) log(1 - sigmoid(x))``),
    exact and finite for any ``x``; its gradient is ``sigmoid(x) - y``.

    >>> binary_cross_entropy_with_logits(Tensor([1000.0, -1000.0, 0.0]), np.array([1.0, 0.0, 1.0]), "none")
    Tensor([0.        , 0.        , 0.69314718])
    """
    _check_reduction(reduction, "binary_cross_entropy_with_logits")
    logits = _as_float(logits)
    target = _like(targets, logits, "binary_cross_entropy_with_logits")
    _same_shape(logits, target, "binary_cross_entropy_with_logits: logits", "targets")
    return _reduce(basics.softplus(logits) - logits * target, reduction)


# ----- more losses, with PyTorch's meaning ----------------------------------------------------------
def _diff(pred: ArrayLike, target: ArrayLike, where: str, reduction: str) -> Any:
    _check_reduction(reduction, where)
    pred = _as_float(pred)
    target = _like(target, pred, where)
    _same_shape(pred, target, f"{where}: pred", "target")
    return basics.subtract(pred, target)


def l1(pred: ArrayLike, target: ArrayLike, reduction: str = "mean") -> Tensor:
    """Mean absolute error ``|pred - target|`` (PyTorch's ``l1_loss``); its gradient at 0 is 0.

    >>> l1(Tensor([1.0, -2.0]), np.array([0.0, 0.0]))
    Tensor(1.5)
    """
    return _reduce(basics.abs(_diff(pred, target, "l1", reduction)), reduction)


def huber(pred: ArrayLike, target: ArrayLike, reduction: str = "mean", delta: float = 1.0) -> Tensor:
    """Huber loss (PyTorch's ``huber_loss``): ``0.5 d**2`` where ``|d| <= delta``, else
    ``delta * (|d| - 0.5 * delta)``, with ``d = pred - target``.

    >>> huber(Tensor([0.5, 3.0]), np.array([0.0, 0.0]), reduction="none")
    Tensor([0.125, 2.5  ])
    """
    if not delta > 0:
        raise ValueError(f"huber: delta must be > 0, got {delta}")
    a = basics.abs(_diff(pred, target, "huber", reduction))
    quad = basics.minimum(a, float(delta))  # |d| up to delta: the quadratic part
    return _reduce(quad * quad * 0.5 + (a - quad) * float(delta), reduction)


def smooth_l1(pred: ArrayLike, target: ArrayLike, reduction: str = "mean", beta: float = 1.0) -> Tensor:
    """Smooth L1 loss (PyTorch's ``smooth_l1_loss``): ``0.5 d**2 / beta`` where ``|d| < beta``, else
    ``|d| - 0.5 * beta``. It is ``huber(delta=beta) / beta``; ``beta=0`` is ``l1``.

    >>> smooth_l1(Tensor([0.5, 3.0]), np.array([0.0, 0.0]), reduction="none")
    Tensor([0.125, 2.5  ])
    """
    if beta < 0:
        raise ValueError(f"smooth_l1: beta must be >= 0, got {beta}")
    if beta == 0:
        return l1(pred, target, reduction)
    a = basics.abs(_diff(pred, target, "smooth_l1", reduction))
    quad = basics.minimum(a, float(beta))
    return _reduce(quad * quad * (0.5 / beta) + (a - quad), reduction)


def kl_div(log_pred: ArrayLike, target: ArrayLike, reduction: str = "mean", log_target: bool = False) -> Tensor:
    """Kullback-Leibler divergence with PyTorch's ``kl_div`` convention: ``log_pred`` holds
    log-probabilities, ``target`` probabilities (log-probabilities with ``log_target=True``).

    Per element ``target * (log(target) - log_pred)``, 0 where ``target`` is 0. ``reduction``:
    ``"mean"`` averages over every element (PyTorch's default, which is not the KL divergence),
    ``"batchmean"`` sums and divides by the batch size (the first axis): the KL divergence per
    example, as in the maths. Also ``"sum"`` and ``"none"``.

    >>> logq = np.log(np.array([[0.5, 0.5]]))
    >>> kl_div(Tensor(logq), np.array([[1.0, 0.0]]), reduction="batchmean")  # log 2
    Tensor(0.69314718)
    """
    if reduction not in (*_REDUCTIONS, "batchmean"):
        raise ValueError(f"kl_div: reduction must be 'mean', 'batchmean', 'sum' or 'none', got {reduction!r}")
    log_pred = _as_float(log_pred)
    target = _like(target, log_pred, "kl_div")
    _same_shape(log_pred, target, "kl_div: log_pred", "target")
    if log_target:
        loss = basics.exp(target) * (target - log_pred)
    else:
        positive = _raw(target) > 0
        safe = basics.where(positive, target, 1.0)  # (log(0) never computed: no nan in the gradient)
        loss = basics.where(positive, target * (basics.log(safe) - log_pred), 0.0)
    if reduction == "batchmean":
        shape = np.shape(_raw(log_pred))
        return basics.sum(loss) / float(shape[0] if shape else 1)
    return _reduce(loss, reduction)


def nll(log_probs: ArrayLike, labels: ArrayLike, reduction: str = "mean") -> Tensor:
    """Negative log-likelihood ``-log_probs[..., label]`` (PyTorch's ``nll_loss``), for log-probabilities
    (``log_softmax``'s output) and integer labels; the class axis is the last, as in ``cross_entropy``.

    ``nll(log_softmax(logits), labels)`` is ``cross_entropy(logits, labels)``.

    >>> nll(Tensor(np.log([[0.25, 0.75], [0.5, 0.5]])), np.array([1, 0]), reduction="none")
    Tensor([0.28768207, 0.69314718])
    """
    _check_reduction(reduction, "nll")
    log_probs = _as_float(log_probs)
    shape = np.shape(_raw(log_probs))
    lab = _raw(labels)
    if len(shape) < 1:
        raise ValueError("nll: log_probs need a class axis (shape (n, classes) or (classes,))")
    if lab.dtype.kind not in "iu" or lab.shape != shape[:-1]:
        raise ValueError(
            f"nll: labels must be integer class indices of shape {shape[:-1]} (log_probs {shape} minus the "
            f"class axis), got dtype {lab.dtype} and shape {lab.shape}."
        )
    classes = shape[-1]
    if lab.size and (lab.min() < 0 or lab.max() >= classes):
        raise _label_range_error(lab, classes)
    flat = basics.reshape(log_probs, (-1, classes))
    picked = -flat[np.arange(lab.size), lab.reshape(-1)]
    return _reduce(basics.reshape(picked, shape[:-1]) if reduction == "none" else picked, reduction)


# ----- LeanPass 0.1.14's loss names (also in leanpass.nn) --------------------------------------------
def _to_shape_of(pred: Any, target: ArrayLike, where: str) -> Any:
    """``target`` broadcast to ``pred``'s shape, when that is how it broadcasts; else a clear error.

    A target that would widen the result, as ``(n,)`` against predictions ``(n, 1)`` (an ``(n, n)``
    table of every prediction against every target), is refused: 0.1.14 averaged that table.
    """
    target = _like(target, pred, where)
    ps, ts = np.shape(_raw(pred)), np.shape(_raw(target))
    if ps == ts:
        return target
    try:
        ok = np.broadcast_shapes(ps, ts) == ps
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"{where}: the predictions have shape {ps} but the targets {ts}; they must match (or the targets "
            "broadcast to the predictions' shape). For predictions (n, 1) and targets (n,) use "
            "targets.reshape(-1, 1): broadcasting them would compare every prediction with every target."
        )
    return basics.broadcast_to(target, ps) if type(target) is Tensor else np.broadcast_to(target, ps)


def mse_loss(prediction: ArrayLike, target: ArrayLike, reduction: str = "mean") -> Tensor:
    """Mean squared error, as LeanPass 0.1.14's (and PyTorch's) ``mse_loss``: ``mse`` with targets
    that may broadcast to the predictions' shape (a scalar, a row).

    >>> mse_loss(Tensor([[1.0, 2.0]]), 0.0)
    Tensor(2.5)
    """
    pred = _as_float(prediction)
    return mse(pred, _to_shape_of(pred, target, "mse_loss"), reduction)


def cross_entropy_loss(prediction: ArrayLike, target: ArrayLike, axis: int = -1, reduction: str = "mean") -> Tensor:
    """Softmax cross-entropy of logits against one-hot (or probability) targets of the same shape, as
    LeanPass 0.1.14's ``cross_entropy_loss``: ``-sum(target * log_softmax(prediction), axis)``,
    averaged over the examples.

    Integer class indices (shape ``prediction.shape`` without ``axis``) work too. Computed from
    ``log_softmax``: 0.1.14 took the log of a softmax clipped at 1e-15, so a wrong class with a
    logit more than about 34.5 below the best stopped at a loss of 34.5 with no gradient; here the
    loss keeps growing and the gradient stays ``softmax - target``.

    >>> cross_entropy_loss(Tensor([[2.0, 0.0, -1.0]]), np.array([[1.0, 0.0, 0.0]]))
    Tensor(0.16984602)
    """
    _check_reduction(reduction, "cross_entropy_loss")
    pred = _as_float(prediction)
    shape = np.shape(_raw(pred))
    if not shape:
        raise ValueError("cross_entropy_loss: the predictions need a class axis (shape (n, classes))")
    lab = _raw(target)
    ax = axis % len(shape)
    if lab.dtype.kind in "iu" and lab.shape == shape[:ax] + shape[ax + 1:]:  # class indices
        logits = pred if ax == len(shape) - 1 else arrays.moveaxis(pred, ax, -1)
        return cross_entropy(logits, lab, reduction)
    target = _to_shape_of(pred, target if lab.dtype.kind == "f" or type(target) is Tensor
                          else lab.astype(_raw(pred).dtype), "cross_entropy_loss")
    per_example = -basics.sum(target * basics.log_softmax(pred, axis=ax), axis=ax)
    return _reduce(per_example, reduction)


def binary_cross_entropy_loss(prediction: ArrayLike, target: ArrayLike, reduction: str = "mean") -> Tensor:
    """Binary cross-entropy of logits against labels in [0, 1], as LeanPass 0.1.14's
    ``binary_cross_entropy_loss`` (which takes logits and applies the sigmoid itself).

    Computed stably (``binary_cross_entropy_with_logits``): 0.1.14 clipped the sigmoid's log at
    1e-15, so a logit beyond about +-34.5 on the wrong side gave a loss stuck at 34.5 and no
    gradient; here the loss is exact and its gradient ``sigmoid(x) - y``.

    >>> binary_cross_entropy_loss(Tensor([0.0, 50.0]), np.array([1.0, 0.0]), reduction="none")
    Tensor([ 0.69314718, 50.        ])
    """
    pred = _as_float(prediction)
    return binary_cross_entropy_with_logits(pred, _to_shape_of(pred, target, "binary_cross_entropy_loss"), reduction)


# The 0.1.14 names' public home is ``leanpass.nn`` (where 0.1.14 had them).
for _f in (mse_loss, cross_entropy_loss, binary_cross_entropy_loss):
    _f.__module__ = "leanpass.nn"
del _f


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
