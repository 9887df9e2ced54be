"""Convolutions, pooling, padding and normalisation as functions on Tensors (``leanpass.conv2d``, ...).

Each records one ``functional`` op (see ``leanpass.functional.conv``); arguments may be Tensors,
NumPy arrays or Python numbers. Layouts and defaults are PyTorch's ``torch.nn.functional``'s.

>>> import numpy as np
>>> import leanpass as lp
>>> x = lp.Tensor(np.ones((1, 1, 4, 4)), requires_grad=True)
>>> y = lp.max_pool2d(lp.relu(lp.conv2d(x, np.ones((2, 1, 3, 3)), padding="same")), 2)
>>> y.shape, y._op
((1, 2, 2, 2), 'max_pool2d')
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .. import functional as F
from ..core.tensor import ArrayLike, Tensor, apply

IntOrPair = int | tuple[int, int]


def _arr(x: Any) -> Any:
    """Lists become arrays; Tensors, arrays and numbers pass through."""
    return np.asarray(x) if isinstance(x, (list, tuple)) else x


def conv1d(x: ArrayLike, w: ArrayLike, b: ArrayLike | None = None, *, stride: int = 1, padding: int | str = 0,
           dilation: int = 1, groups: int = 1) -> Tensor:
    """1-D convolution: ``x`` ``(N, C_in, L)``, ``w`` ``(C_out, C_in / groups, K)``, ``b`` ``(C_out,)`` or None.

    >>> conv1d(Tensor([[[1.0, 2.0, 3.0]]]), np.ones((1, 1, 2)))
    Tensor([[[3., 5.]]])
    """
    return apply(F.conv1d, "conv1d", _arr(x), _arr(w), _arr(b), stride, padding, dilation, groups)


def conv2d(x: ArrayLike, w: ArrayLike, b: ArrayLike | None = None, *, stride: IntOrPair = 1,
           padding: IntOrPair | str = 0, dilation: IntOrPair = 1, groups: int = 1) -> Tensor:
    """2-D convolution: ``x`` ``(N, C_in, H, W)``, ``w`` ``(C_out, C_in / groups, kH, kW)``, ``b`` ``(C_out,)`` or None.

    ``stride``, ``padding`` and ``dilation`` are an int or a pair; ``padding`` may also be
    ``"same"`` (stride 1) or ``"valid"``. ``groups == C_in`` is a depthwise convolution.

    >>> conv2d(Tensor(np.ones((1, 1, 3, 3))), np.ones((1, 1, 2, 2))).shape
    (1, 1, 2, 2)
    """
    return apply(F.conv2d, "conv2d", _arr(x), _arr(w), _arr(b), stride, padding, dilation, groups)


def conv_transpose2d(x: ArrayLike, w: ArrayLike, b: ArrayLike | None = None, *, stride: IntOrPair = 1,
                     padding: IntOrPair = 0, output_padding: IntOrPair = 0, dilation: IntOrPair = 1,
                     groups: int = 1) -> Tensor:
    """Transposed 2-D convolution: ``x`` ``(N, C_in, H, W)``, ``w`` ``(C_in, C_out / groups, kH, kW)``, as PyTorch's.

    >>> conv_transpose2d(Tensor(np.ones((1, 1, 2, 2))), np.ones((1, 3, 3, 3)), stride=2, padding=1,
    ...                  output_padding=1).shape
    (1, 3, 4, 4)
    """
    return apply(F.conv_transpose2d, "conv_transpose2d", _arr(x), _arr(w), _arr(b), stride, padding,
                 output_padding, dilation, groups)


def max_pool1d(x: ArrayLike, kernel_size: int, stride: int | None = None, padding: int = 0,
               dilation: int = 1) -> Tensor:
    """The maximum over windows of the last axis of ``x`` ``(N, C, L)``; ``stride`` defaults to ``kernel_size``.

    >>> max_pool1d(Tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2)
    Tensor([[[3., 5.]]])
    """
    return apply(F.max_pool1d, "max_pool1d", _arr(x), kernel_size, stride, padding, dilation)


def max_pool2d(x: ArrayLike, kernel_size: IntOrPair, stride: IntOrPair | None = None, padding: IntOrPair = 0,
               dilation: IntOrPair = 1) -> Tensor:
    """The maximum of each window of ``x`` ``(N, C, H, W)``; on ties the gradient goes to the first maximum.

    >>> max_pool2d(Tensor(np.arange(16.0).reshape(1, 1, 4, 4)), 2)
    Tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """
    return apply(F.max_pool2d, "max_pool2d", _arr(x), kernel_size, stride, padding, dilation)


def avg_pool1d(x: ArrayLike, kernel_size: int, stride: int | None = None, padding: int = 0) -> Tensor:
    """The mean over windows of the last axis of ``x`` ``(N, C, L)`` (padding counts as zeros).

    >>> avg_pool1d(Tensor([[[1.0, 3.0, 2.0, 5.0]]]), 2)
    Tensor([[[2. , 3.5]]])
    """
    return apply(F.avg_pool1d, "avg_pool1d", _arr(x), kernel_size, stride, padding)


def avg_pool2d(x: ArrayLike, kernel_size: IntOrPair, stride: IntOrPair | None = None,
               padding: IntOrPair = 0) -> Tensor:
    """The mean of each window of ``x`` ``(N, C, H, W)``, padding counted as zeros (PyTorch's default).

    >>> avg_pool2d(Tensor(np.ones((1, 1, 2, 2))), 2, padding=1)
    Tensor([[[[0.25, 0.25],
              [0.25, 0.25]]]])
    """
    return apply(F.avg_pool2d, "avg_pool2d", _arr(x), kernel_size, stride, padding)


def pad(x: ArrayLike, pad_width: Any, mode: str = "constant", constant_values: float = 0) -> Tensor:
    """``np.pad`` as a recorded op, in mode ``constant``, ``edge``, ``reflect``, ``symmetric`` or ``wrap``.

    ``np.pad(t, ...)`` on a Tensor records the same op.

    >>> pad(Tensor([1.0, 2.0]), (1, 2), mode="edge")
    Tensor([1., 1., 2., 2., 2.])
    """
    return apply(F.pad, "pad", _arr(x), pad_width, mode, constant_values)


def batch_norm(x: ArrayLike, weight: ArrayLike | None = None, bias: ArrayLike | None = None, *, axis: int = 1,
               eps: float = 1e-5) -> Tensor:
    """Normalise with the batch's mean and biased variance over every axis but ``axis``, then scale and shift.

    What ``torch.nn.functional.batch_norm(x, ..., training=True)`` computes; ``nn.BatchNorm`` adds
    the running statistics used for evaluation.

    >>> batch_norm(Tensor([[1.0], [3.0]]), eps=0.0)
    Tensor([[-1.],
            [ 1.]])
    """
    return apply(F.batch_norm, "batch_norm", _arr(x), _arr(weight), _arr(bias), axis, eps)


def group_norm(x: ArrayLike, num_groups: int, weight: ArrayLike | None = None, bias: ArrayLike | None = None,
               eps: float = 1e-5) -> Tensor:
    """Normalise each example of ``x`` ``(N, C, ...)`` over groups of ``C / num_groups`` channels.

    >>> group_norm(Tensor([[[1.0], [3.0]]]), 1, eps=0.0)
    Tensor([[[-1.],
             [ 1.]]])
    """
    return apply(F.group_norm, "group_norm", _arr(x), num_groups, _arr(weight), _arr(bias), eps)


def layer_norm(x: ArrayLike, normalized_shape: int | tuple[int, ...], weight: ArrayLike | None = None,
               bias: ArrayLike | None = None, eps: float = 1e-5) -> Tensor:
    """Normalise over the last axes ``normalized_shape`` to mean 0 and (biased) variance 1, then scale by
    ``weight`` and shift by ``bias`` (each of ``normalized_shape``, or None), as
    ``torch.nn.functional.layer_norm``.

    One op, which keeps each row's mean and ``1/σ`` (besides ``x``) for its backward pass.

    >>> layer_norm(Tensor([[1.0, 2.0, 3.0]]), 3, eps=0.0).round(4)
    Tensor([[-1.2247,  0.    ,  1.2247]])
    """
    shape = (normalized_shape,) if isinstance(normalized_shape, (int, np.integer)) else normalized_shape
    try:
        if isinstance(shape, str):
            raise TypeError
        shape = tuple(int(n) for n in shape)
    except TypeError:
        raise TypeError(f"layer_norm: normalized_shape must be an int or a tuple of ints (the last axes of the "
                        f"input), got {normalized_shape!r}") from None
    return apply(F.layer_norm, "layer_norm", _arr(x), _arr(weight), _arr(bias), shape, float(eps))


__all__ = ["conv1d", "conv2d", "conv_transpose2d", "max_pool1d", "max_pool2d", "avg_pool1d", "avg_pool2d", "pad",
           "batch_norm", "group_norm", "layer_norm"]
