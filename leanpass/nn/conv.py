"""Convolutional layers and normalisation for ``leanpass.nn``: frozen dataclasses like the other modules.

``Conv1d``, ``Conv2d``, ``ConvTranspose2d``, ``MaxPool2d``, ``AvgPool2d``, ``Flatten``,
``GroupNorm`` and ``BatchNorm``. Layouts and arguments are PyTorch's (``(N, C, H, W)`` inputs).

``BatchNorm`` keeps running statistics for evaluation. They are not part of the model: they live
in a *state*, a pytree of its own that ``model.init_state()`` builds (``None`` for a module with
no state). A training call takes the state and returns the output with the new state,
``y, state = model(x, state, train=True)``; evaluation reads it, ``y = model(x, state)``. So
gradients and optimizers only ever see the model's parameters, the statistics travel out of a
loss function as ``value_and_grad(..., has_aux=True)``'s aux, and a checkpoint saves both:
``lp.save(path, {"model": model, "state": state})``. ``nn.Sequential`` threads the state
through its layers.

>>> import numpy as np
>>> from leanpass import nn
>>> rng = np.random.default_rng(0)
>>> net = nn.Sequential(nn.Conv2d(1, 4, 3, padding=1, rng=rng), nn.BatchNorm(4), nn.relu,
...                     nn.MaxPool2d(2), nn.Flatten(), nn.Linear(16, 3, rng=rng))
>>> state = net.init_state()
>>> y, state = net(np.ones((2, 1, 4, 4)), state, train=True)
>>> y.shape, net(np.ones((2, 1, 4, 4)), state).shape
((2, 3), (2, 3))
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.tensor import ArrayLike, Tensor
from ..functional.norms import batch_statistics
from ..numpy import basics
from ..numpy import convolution as conv
from .module import DTypeLike, Module, _as_input, _float_dtype, _leaf_dtype, _leaf_shape, _set, _size, _source

__all__ = ["Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "Flatten", "GroupNorm", "BatchNorm"]


def _he(rng: np.random.Generator, shape: tuple[int, ...], fan_in: int, dt: np.dtype[Any], rg: bool = False) -> Tensor:
    """He normal ``N(0, 2 / fan_in)``, with the fan-in of a convolution's kernel (``rg``: requires grad)."""
    w = rng.standard_normal(shape) * math.sqrt(2.0 / max(fan_in, 1))  # (max: an empty weight)
    return Tensor(w, dtype=dt, requires_grad=rg)


def _ints(v: Any, n: int) -> Any:
    """An int, a tuple of ``n`` ints, or a padding string, as a value a checkpoint can store."""
    if isinstance(v, str) or isinstance(v, (int, np.integer)):
        return v if isinstance(v, str) else int(v)
    return tuple(int(p) for p in v) if len(v) == n else v


def _channels(where: str, in_channels: Any, out_channels: Any, groups: Any) -> tuple[int, int, int]:
    """``(in, out, groups)`` as ints: channels >= 0 (0 builds an empty weight, as in PyTorch), groups dividing both."""
    cin, cout = _size(in_channels, "in_channels", where), _size(out_channels, "out_channels", where)
    groups = _size(groups, "groups", where, 1)
    if cin % groups or cout % groups:
        raise ValueError(f"{where}: groups={groups} must divide in_channels ({cin}) and out_channels ({cout})")
    return cin, cout, groups


def _kernel(where: str, kernel_size: Any) -> tuple[int, int]:
    """An int or a pair as ``(kH, kW)``, each at least 1."""
    pair = (kernel_size, kernel_size) if isinstance(kernel_size, (int, np.integer)) else tuple(kernel_size)
    if len(pair) != 2:
        raise ValueError(f"{where}: kernel_size must be an int or a pair of ints, got {kernel_size!r}")
    kh, kw = (_size(k, "kernel_size", where, 1) for k in pair)
    return kh, kw


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Conv2d(Module):
    """A 2-D convolution layer: ``weight`` ``(out_channels, in_channels / groups, kH, kW)``, ``bias`` ``(out,)``.

    The weight starts He-normal (``N(0, 2 / fan_in)``, for relu nets), the bias at zero.

    >>> layer = Conv2d(3, 8, 3, padding=1, rng=np.random.default_rng(0))
    >>> layer
    Conv2d(3 -> 8, kernel_size=(3, 3), padding=1, dtype=float32)
    >>> layer(np.ones((2, 3, 5, 5))).shape
    (2, 8, 5, 5)
    """

    weight: Any
    bias: Any = None
    stride: Any = 1
    padding: Any = 0
    dilation: Any = 1
    groups: int = 1
    _static: ClassVar[tuple[str, ...]] = ("stride", "padding", "dilation", "groups")

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int], stride: Any = 1,
                 padding: Any = 0, dilation: Any = 1, groups: int = 1, bias: bool = True, *,
                 rng: np.random.Generator | int | None = None, dtype: DTypeLike | None = None) -> None:
        rng, dt, rg = _source(rng, dtype, "Conv2d")
        cin, cout, groups = _channels("Conv2d", in_channels, out_channels, groups)
        kh, kw = _kernel("Conv2d", kernel_size)
        w = _he(rng, (cout, cin // groups, kh, kw), cin // groups * kh * kw, dt, rg)
        b = Tensor(np.zeros(cout, dtype=dt), requires_grad=rg) if bias else None
        _set(self, weight=w, bias=b, stride=_ints(stride, 2),
             padding=_ints(padding, 2), dilation=_ints(dilation, 2), groups=groups)

    def __call__(self, x: ArrayLike) -> Tensor:
        """Convolve a batch ``(N, in_channels, H, W)``."""
        x = _as_input(x, self.weight._data.dtype if type(self.weight) is Tensor else self.weight.dtype)
        return conv.conv2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                           dilation=self.dilation, groups=self.groups)

    def _summary(self) -> str:
        o, cg, kh, kw = _leaf_shape(self.weight)
        extra = "".join(f", {name}={getattr(self, name)!r}" for name, default in
                        (("stride", 1), ("padding", 0), ("dilation", 1), ("groups", 1))
                        if getattr(self, name) != default)
        extra += "" if self.bias is not None else ", bias=False"
        return (f"{type(self).__name__}({cg * self.groups} -> {o}, kernel_size={(kh, kw)}{extra}, "
                f"dtype={_leaf_dtype(self.weight)})")


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Conv1d(Module):
    """A 1-D convolution layer: ``weight`` ``(out_channels, in_channels / groups, K)``, inputs ``(N, C, L)``.

    >>> Conv1d(2, 4, 3, padding="same", rng=0)(np.ones((1, 2, 7))).shape
    (1, 4, 7)
    """

    weight: Any
    bias: Any = None
    stride: int = 1
    padding: Any = 0
    dilation: int = 1
    groups: int = 1
    _static: ClassVar[tuple[str, ...]] = ("stride", "padding", "dilation", "groups")

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int, stride: int = 1, padding: Any = 0,
                 dilation: int = 1, groups: int = 1, bias: bool = True, *,
                 rng: np.random.Generator | int | None = None, dtype: DTypeLike | None = None) -> None:
        rng, dt, rg = _source(rng, dtype, "Conv1d")
        cin, cout, groups = _channels("Conv1d", in_channels, out_channels, groups)
        k = _size(kernel_size, "kernel_size", "Conv1d", 1)
        w = _he(rng, (cout, cin // groups, k), cin // groups * k, dt, rg)
        b = Tensor(np.zeros(cout, dtype=dt), requires_grad=rg) if bias else None
        _set(self, weight=w, bias=b, stride=int(stride),
             padding=_ints(padding, 2), dilation=int(dilation), groups=groups)

    def __call__(self, x: ArrayLike) -> Tensor:
        """Convolve a batch ``(N, in_channels, L)``."""
        x = _as_input(x, self.weight._data.dtype if type(self.weight) is Tensor else self.weight.dtype)
        return conv.conv1d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                           dilation=self.dilation, groups=self.groups)

    def _summary(self) -> str:
        o, cg, k = _leaf_shape(self.weight)
        return f"Conv1d({cg * self.groups} -> {o}, kernel_size={k}, dtype={_leaf_dtype(self.weight)})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class ConvTranspose2d(Module):
    """A transposed 2-D convolution layer: ``weight`` ``(in_channels, out_channels / groups, kH, kW)``, as PyTorch's.

    >>> up = ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1, rng=0)
    >>> up(np.ones((1, 4, 5, 5))).shape
    (1, 2, 10, 10)
    """

    weight: Any
    bias: Any = None
    stride: Any = 1
    padding: Any = 0
    output_padding: Any = 0
    dilation: Any = 1
    groups: int = 1
    _static: ClassVar[tuple[str, ...]] = ("stride", "padding", "output_padding", "dilation", "groups")

    def __init__(self, in_channels: int, out_channels: int, kernel_size: int | tuple[int, int], stride: Any = 1,
                 padding: Any = 0, output_padding: Any = 0, groups: int = 1, bias: bool = True, dilation: Any = 1,
                 *, rng: np.random.Generator | int | None = None, dtype: DTypeLike | None = None) -> None:
        rng, dt, rg = _source(rng, dtype, "ConvTranspose2d")
        cin, cout, groups = _channels("ConvTranspose2d", in_channels, out_channels, groups)
        kh, kw = _kernel("ConvTranspose2d", kernel_size)
        w = _he(rng, (cin, cout // groups, kh, kw), cout // groups * kh * kw, dt, rg)
        b = Tensor(np.zeros(cout, dtype=dt), requires_grad=rg) if bias else None
        _set(self, weight=w, bias=b, stride=_ints(stride, 2),
             padding=_ints(padding, 2), output_padding=_ints(output_padding, 2), dilation=_ints(dilation, 2),
             groups=groups)

    def __call__(self, x: ArrayLike) -> Tensor:
        """Apply to a batch ``(N, in_channels, H, W)``."""
        x = _as_input(x, self.weight._data.dtype if type(self.weight) is Tensor else self.weight.dtype)
        return conv.conv_transpose2d(x, self.weight, self.bias, stride=self.stride, padding=self.padding,
                                     output_padding=self.output_padding, dilation=self.dilation, groups=self.groups)

    def _summary(self) -> str:
        ci, cog, kh, kw = _leaf_shape(self.weight)
        return (f"ConvTranspose2d({ci} -> {cog * self.groups}, kernel_size={(kh, kw)}, stride={self.stride!r}, "
                f"dtype={_leaf_dtype(self.weight)})")


@dataclass(frozen=True, repr=False, init=False, eq=False)
class MaxPool2d(Module):
    """Max pooling as a layer (no parameters); ``stride`` defaults to ``kernel_size``.

    >>> MaxPool2d(2)(np.arange(16.0).reshape(1, 1, 4, 4))
    Tensor([[[[ 5.,  7.],
              [13., 15.]]]])
    """

    kernel_size: Any
    stride: Any = None
    padding: Any = 0
    dilation: Any = 1
    _static: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding", "dilation")

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1) -> None:
        _set(self, kernel_size=_ints(kernel_size, 2), stride=None if stride is None else _ints(stride, 2),
             padding=_ints(padding, 2), dilation=_ints(dilation, 2))

    def __call__(self, x: ArrayLike) -> Tensor:
        """Pool a batch ``(N, C, H, W)``."""
        return conv.max_pool2d(x, self.kernel_size, self.stride, self.padding, self.dilation)

    def _summary(self) -> str:
        return f"MaxPool2d({self.kernel_size!r}, stride={self.stride!r})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class AvgPool2d(Module):
    """Average pooling as a layer (padding counted as zeros, as PyTorch's default).

    >>> AvgPool2d(2)(np.arange(16.0).reshape(1, 1, 4, 4)).shape
    (1, 1, 2, 2)
    """

    kernel_size: Any
    stride: Any = None
    padding: Any = 0
    _static: ClassVar[tuple[str, ...]] = ("kernel_size", "stride", "padding")

    def __init__(self, kernel_size: Any, stride: Any = None, padding: Any = 0) -> None:
        _set(self, kernel_size=_ints(kernel_size, 2), stride=None if stride is None else _ints(stride, 2),
             padding=_ints(padding, 2))

    def __call__(self, x: ArrayLike) -> Tensor:
        """Pool a batch ``(N, C, H, W)``."""
        return conv.avg_pool2d(x, self.kernel_size, self.stride, self.padding)

    def _summary(self) -> str:
        return f"AvgPool2d({self.kernel_size!r}, stride={self.stride!r})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Flatten(Module):
    """Flatten axes ``start_dim`` .. ``end_dim`` into one (by default all but the batch axis).

    >>> Flatten()(np.ones((2, 3, 4, 4))).shape
    (2, 48)
    """

    start_dim: int = 1
    end_dim: int = -1
    _static: ClassVar[tuple[str, ...]] = ("start_dim", "end_dim")

    def __init__(self, start_dim: int = 1, end_dim: int = -1) -> None:
        _set(self, start_dim=int(start_dim), end_dim=int(end_dim))

    def __call__(self, x: ArrayLike) -> Tensor:
        """``x`` with the axes flattened."""
        shape = np.shape(x._data if type(x) is Tensor else x)
        a, b = basics._axis(self.start_dim, len(shape), "Flatten"), basics._axis(self.end_dim, len(shape), "Flatten")
        if a > b:
            raise ValueError(f"Flatten: start_dim {self.start_dim} comes after end_dim {self.end_dim} "
                             f"for an input of shape {shape}")
        return basics.reshape(x, shape[:a] + (-1,) + shape[b + 1:])

    def _summary(self) -> str:
        return f"Flatten({self.start_dim}, {self.end_dim})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class GroupNorm(Module):
    """Group normalisation over ``num_groups`` groups of channels, then a per-channel scale and shift.

    >>> GroupNorm(2, 4)(np.arange(8.0).reshape(1, 4, 2)).shape
    (1, 4, 2)
    """

    weight: Any
    bias: Any
    num_groups: int = 1
    eps: float = 1e-5
    _static: ClassVar[tuple[str, ...]] = ("num_groups", "eps")

    def __init__(self, num_groups: int, num_channels: int, eps: float = 1e-5, affine: bool = True, *,
                 dtype: DTypeLike = np.float32) -> None:
        dt = _float_dtype(dtype, "GroupNorm")
        c = _size(num_channels, "num_channels", "GroupNorm")
        if num_groups < 1 or c % num_groups:
            raise ValueError(f"GroupNorm: num_groups={num_groups} must divide num_channels ({c})")
        _set(self, weight=Tensor(np.ones(c, dtype=dt)) if affine else None,
             bias=Tensor(np.zeros(c, dtype=dt)) if affine else None, num_groups=int(num_groups), eps=float(eps))

    def __call__(self, x: ArrayLike) -> Tensor:
        """Normalise a batch ``(N, C, ...)``."""
        if self.weight is not None:
            x = _as_input(x, self.weight._data.dtype if type(self.weight) is Tensor else self.weight.dtype)
        return conv.group_norm(x, self.num_groups, self.weight, self.bias, self.eps)

    def _summary(self) -> str:
        return f"GroupNorm({self.num_groups}, eps={self.eps:g})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class BatchNorm(Module):
    """Batch normalisation over every axis but ``axis`` (the channels), for ``(N, C)`` and ``(N, C, H, W)`` inputs.

    Training (``train=True``) normalises with the batch's mean and biased variance and returns
    ``(y, new_state)``, the state's running statistics moved towards the batch's:
    ``running = (1 - momentum) * running + momentum * batch`` (the variance unbiased, as in
    PyTorch). Evaluation normalises with the running statistics and returns ``y``. The state is
    ``{"mean": ..., "var": ...}`` from ``init_state()``; the module itself holds only ``weight``
    and ``bias``, so gradients and optimizers never reach the statistics.

    >>> bn = BatchNorm(2)
    >>> state = bn.init_state()
    >>> x = np.array([[1.0, 10.0], [3.0, 30.0]])
    >>> y, state = bn(x, state, train=True)
    >>> np.round(y.numpy(), 3)
    array([[-1., -1.],
           [ 1.,  1.]], dtype=float32)
    >>> state["mean"], state["var"]
    (array([0.2, 2. ], dtype=float32), array([ 1.1, 20.9], dtype=float32))
    >>> bn(x, state).shape
    (2, 2)
    """

    weight: Any
    bias: Any
    num_features: int = 0
    eps: float = 1e-5
    momentum: float = 0.1
    axis: int = 1
    _static: ClassVar[tuple[str, ...]] = ("num_features", "eps", "momentum", "axis")

    def __init__(self, num_features: int, eps: float = 1e-5, momentum: float = 0.1, affine: bool = True, *,
                 axis: int = 1, dtype: DTypeLike = np.float32) -> None:
        dt = _float_dtype(dtype, "BatchNorm")
        c = _size(num_features, "num_features", "BatchNorm")
        if not 0.0 <= momentum <= 1.0:
            raise ValueError(f"BatchNorm: momentum must be in [0, 1], got {momentum}")
        _set(self, weight=Tensor(np.ones(c, dtype=dt)) if affine else None,
             bias=Tensor(np.zeros(c, dtype=dt)) if affine else None, num_features=c, eps=float(eps),
             momentum=float(momentum), axis=int(axis))

    def _dtype(self) -> Any:
        w = self.weight
        return np.float32 if w is None else w._data.dtype if type(w) is Tensor else w.dtype

    def init_state(self) -> dict[str, np.ndarray]:
        """The running statistics before training: mean 0 and variance 1 per channel.

        >>> BatchNorm(2).init_state()
        {'mean': array([0., 0.], dtype=float32), 'var': array([1., 1.], dtype=float32)}
        """
        c = self.num_features
        return {"mean": np.zeros(c, dtype=self._dtype()), "var": np.ones(c, dtype=self._dtype())}

    def __call__(self, x: ArrayLike, state: Any = None, *, train: bool = False) -> Any:
        """``(y, new_state)`` with the batch's statistics when ``train``, else ``y`` with the state's."""
        if state is None or not isinstance(state, dict) or set(state) != {"mean", "var"}:
            raise ValueError(
                "BatchNorm needs its state: y, state = model(x, state, train=True) to train, y = model(x, state) "
                f"to evaluate, with state = model.init_state(); got {type(state).__name__}"
            )
        x = _as_input(x, self._dtype())
        data = x._data if type(x) is Tensor else x
        ndim = np.ndim(data)
        axis = self.axis % ndim if ndim else 0
        c = np.shape(data)[axis] if ndim > axis else 0
        if c != self.num_features:
            raise ValueError(f"BatchNorm({self.num_features}): the input has {c} channels on axis {self.axis} "
                             f"(shape {np.shape(data)})")
        for key in ("mean", "var"):
            if np.shape(state[key]) != (c,):
                raise ValueError(f"BatchNorm({c}): the state's running {key} should have shape ({c},), got "
                                 f"{np.shape(state[key])}; is it another layer's state? Build it with init_state()")
        if train:
            y = conv.batch_norm(x, self.weight, self.bias, axis=axis, eps=self.eps)
            count = math.prod(np.shape(data)) // max(c, 1)
            if count == 0:  # an empty batch says nothing about the statistics: they stay (as in PyTorch)
                return y, {"mean": state["mean"], "var": state["var"]}
            mean, var = batch_statistics(data, axis)
            var = var * (count / max(count - 1, 1))
            m = self.momentum
            new = {"mean": (1 - m) * state["mean"] + m * mean, "var": (1 - m) * state["var"] + m * var}
            return y, {k: v.astype(self._dtype(), copy=False) for k, v in new.items()}
        shape = tuple(c if a == axis else 1 for a in range(ndim))
        inv = 1.0 / np.sqrt(state["var"] + self.eps)
        scale = inv if self.weight is None else basics.multiply(self.weight, inv)
        shift = -state["mean"] * scale
        if self.bias is not None:
            shift = shift + self.bias
        return x * basics.reshape(scale, shape) + basics.reshape(shift, shape)

    def _summary(self) -> str:
        return f"BatchNorm({self.num_features}, eps={self.eps:g}, momentum={self.momentum:g}, axis={self.axis})"


# Their public home is ``leanpass.nn`` (the name a checkpoint stores for them, and their repr's module).
for _layer in (Conv2d, Conv1d, ConvTranspose2d, MaxPool2d, AvgPool2d, Flatten, GroupNorm, BatchNorm):
    _layer.__module__ = "leanpass.nn"
del _layer

# doctest finds these classes only in their __module__ (leanpass.nn, which loads them on first use):
# their examples (and their methods') run from here.
__test__ = {cls.__name__: cls for cls in (Conv2d, Conv1d, ConvTranspose2d, MaxPool2d, AvgPool2d, Flatten, GroupNorm,
                                          BatchNorm)}
