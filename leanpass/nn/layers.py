"""The layers of ``leanpass.nn``: ``Linear``, ``MLP``, ``Sequential``, ``Embedding``, ``LayerNorm``,
``Dropout`` (and the function ``dropout``), and the activations a module can name.

>>> import numpy as np
>>> from leanpass import nn
>>> net = nn.Sequential(nn.Linear(4, 8, rng=0), nn.tanh, nn.LayerNorm(8), nn.Linear(8, 2, rng=1))
>>> net(np.ones((3, 4))).shape
(3, 2)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from ..core.tensor import ArrayLike, Tensor, _linear
from ..core.tree import register_pytree, set_child_names
from ..functional import _lift
from ..numpy import basics
from ..numpy.basics import gelu, leaky_relu, relu, sigmoid, softplus, tanh
from ..numpy.convolution import layer_norm
from .init import _initialiser, zeros
from .module import (
    DTypeLike,
    Module,
    _as_input,
    _dynamic_fields,
    _float_dtype,
    _global_rng,
    _leaf_dtype,
    _leaf_shape,
    _param,
    _set,
    _size,
    _source,
)

__all__ = ["Linear", "MLP", "Sequential", "Embedding", "LayerNorm", "Dropout", "dropout",
           "relu", "tanh", "sigmoid", "gelu", "gelu_exact", "leaky_relu", "softplus", "identity", "ACTIVATIONS"]


# ----- activations (plain functions) ------------------------------------------------------------
# The activations are the Tensor-level ops themselves (one definition, one docstring each).
def identity(x: ArrayLike) -> Any:
    """``x`` unchanged (a "linear" activation).

    >>> identity(Tensor([3.0]))
    Tensor([3.])
    """
    return x


def gelu_exact(x: ArrayLike) -> Tensor:
    """The exact GELU, ``x * Φ(x)``: ``lp.gelu(x, approximate="none")``, PyTorch's ``torch.nn.GELU()``
    (``"gelu"`` names the tanh approximation, ``lp.gelu``'s default).

    >>> gelu_exact(Tensor([1.0]))
    Tensor([0.84134475])
    """
    return gelu(x, approximate="none")


# The activations a module can name (and a checkpoint can store) by string.
ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    f.__name__: f for f in (relu, tanh, sigmoid, gelu, gelu_exact, leaky_relu, softplus, identity)
}


def _activation_name(activation: str | Callable[[Any], Any]) -> str:
    if isinstance(activation, str):
        if activation not in ACTIVATIONS:
            raise ValueError(
                f"unknown activation {activation!r}; choose one of {sorted(ACTIVATIONS)}, or use "
                "nn.Sequential to compose a function of your own."
            )
        return activation
    for name, fn in ACTIVATIONS.items():
        if fn is activation or getattr(basics, name, None) is activation:
            return name
    raise ValueError(
        f"activation {activation!r} is not one of nn.ACTIVATIONS ({sorted(ACTIVATIONS)}); pass its "
        "name, or put your function between layers of an nn.Sequential."
    )


# ----- layers --------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False, init=False, eq=False)
class Linear(Module):
    """``y = x @ weight + bias``; ``weight`` has shape ``(in_features, out_features)``.

    ``init`` names the weight initialiser (``"he"`` for relu nets, ``"glorot"`` for tanh); the
    bias starts at zero. NumPy inputs are cast to the layer's ``dtype``.

    ``rng`` may be omitted, as in LeanPass 0.1.14: the weights are then drawn from NumPy's global
    generator (``np.random.seed(n)`` repeats a run), in float64, from 0.1.14's (and PyTorch's)
    ``U(-1/sqrt(in_features), 1/sqrt(in_features))``, and they require grad, so ``loss.backward()``
    fills their ``.grad``. Given ``rng``: float32, ``init="he"``, for the functional style.

    >>> np.random.seed(0)
    >>> Linear(2, 3).weight.dtype, Linear(2, 3).weight.requires_grad
    (dtype('float64'), True)

    >>> layer = Linear(3, 2, rng=np.random.default_rng(0))
    >>> layer
    Linear(3 -> 2, dtype=float32)
    >>> layer(np.ones((4, 3))).shape
    (4, 2)
    """

    weight: Any
    bias: Any = None

    def __init__(self, in_features: int, out_features: int, *, rng: np.random.Generator | int | None = None,
                 bias: bool = True, init: str | Callable[..., Tensor] | None = None,
                 dtype: DTypeLike | None = None) -> None:
        gen, dt, rg = _source(rng, dtype, "Linear")
        fan_in, fan_out = _size(in_features, "in_features", "Linear"), _size(out_features, "out_features", "Linear")
        if init is None:
            init = "fan_in_uniform" if rng is None else "he"
        w = _initialiser(init)(gen, (fan_in, fan_out), dt)
        _set(self, weight=_param(w, rg), bias=_param(zeros(None, (fan_out,), dt), rg) if bias else None)

    @property
    def in_features(self) -> int:
        """The size of the input's last axis.

        >>> Linear(3, 2, rng=0).in_features
        3
        """
        return _leaf_shape(self.weight)[0]

    @property
    def out_features(self) -> int:
        """The size of the output's last axis.

        >>> Linear(3, 2, rng=0).out_features
        2
        """
        return _leaf_shape(self.weight)[1]

    def __call__(self, x: ArrayLike) -> Tensor:
        """Apply the layer to a batch ``(..., in_features)``."""
        w, b = self.weight, self.bias
        x = _as_input(x, w._data.dtype if type(w) is Tensor else w.dtype)
        try:
            if b is None:
                return basics.matmul(x, w)
            return _linear(x, w, b)  # one op: x @ w + b
        except ValueError as e:
            raise _width_error(self, x, self.in_features, e) from None

    def _summary(self) -> str:
        extra = "" if self.bias is not None else ", bias=False"
        return f"Linear({self.in_features} -> {self.out_features}{extra}, dtype={_leaf_dtype(self.weight)})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class MLP(Module):
    """A stack of ``Linear`` layers with an activation between them (none after the last).

    ``sizes`` lists the widths: ``[64, 128, 10]`` is 64 inputs, one hidden layer of 128 and 10
    outputs. ``activation`` is a name from ``nn.ACTIVATIONS`` (or one of those functions).
    ``rng`` may be omitted (LeanPass 0.1.14's ``nn.MLP([2, 16, 3])``): see ``Linear``; the layers are
    then initialised as in 0.1.14 whatever the activation (pass ``init=`` to choose).

    >>> mlp = MLP([2, 3, 1], rng=np.random.default_rng(0), activation="tanh", dtype=np.float64)
    >>> mlp.num_params, mlp(np.zeros((5, 2))).shape
    (13, (5, 1))
    """

    layers: tuple[Linear, ...]
    activation: str = "relu"
    _static: ClassVar[tuple[str, ...]] = ("activation",)

    def __init__(self, sizes: Sequence[int], *, rng: np.random.Generator | int | None = None,
                 activation: str | Callable[[Any], Any] = "relu", init: str | Callable[..., Tensor] | None = None,
                 dtype: DTypeLike | None = None) -> None:
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2:
            raise ValueError(f"MLP(sizes): give at least an input and an output size, e.g. [64, 10]; got {sizes}")
        if rng is not None:
            rng = _source(rng, dtype, "MLP")[0]  # (one generator for all the layers, from an int seed too)
        name = _activation_name(activation)
        if init is None and rng is not None:
            init = "he" if name in ("relu", "leaky_relu", "gelu", "gelu_exact") else "glorot"
        layers = tuple(Linear(a, b, rng=rng, init=init, dtype=dtype) for a, b in zip(sizes[:-1], sizes[1:]))
        _set(self, layers=layers, activation=name)

    def __call__(self, x: ArrayLike) -> Tensor:
        """Apply every layer, with the activation between them."""
        act = ACTIVATIONS[self.activation]
        h: Any = x
        last = len(self.layers) - 1
        for i, layer in enumerate(self.layers):
            h = layer(h)
            if i < last:
                h = act(h)
        return h

    def _summary(self) -> str:
        lines = [f"  ({i}): {layer._summary()}" for i, layer in enumerate(self.layers)]
        lines.append(f"  activation={self.activation}, parameters={self.num_params:,}")
        return "MLP(\n" + "\n".join(lines) + "\n)"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Sequential(Module):
    """Apply ``layers`` in order; a layer is a module or a plain function such as ``nn.relu``.

    Functions are structure (not parameters). ``rng`` (a generator, for ``Dropout``) is passed to
    the layers that take one; without it dropout is off (evaluation).

    >>> rng = np.random.default_rng(0)
    >>> net = Sequential(Linear(4, 8, rng=rng), relu, Dropout(0.5), Linear(8, 2, rng=rng))
    >>> net(np.ones((3, 4))).shape
    (3, 2)
    >>> net.num_params
    58
    """

    layers: tuple[Any, ...]

    def __init__(self, *layers: Any) -> None:
        if len(layers) == 1 and isinstance(layers[0], (list, tuple)):
            layers = tuple(layers[0])
        for i, layer in enumerate(layers):
            if not callable(layer):
                raise TypeError(f"Sequential: layer {i} ({type(layer).__name__}) is not callable; "
                                "pass modules or functions")
        _set(self, layers=tuple(layers))

    def _named_children(self) -> list[tuple[str, Any]]:
        return [(f"layers.{i}", layer) for i, layer in enumerate(self.layers) if isinstance(layer, Module)]

    def init_state(self) -> Any:
        """One state per layer (None for a layer without one), or None when no layer has state.

        >>> Sequential(Linear(2, 2, rng=0), relu).init_state() is None
        True
        """
        states = tuple(layer.init_state() if isinstance(layer, Module) else None for layer in self.layers)
        return None if all(s is None for s in states) else states

    def __call__(self, x: ArrayLike, state: Any = None, *, train: bool = False,
                 rng: np.random.Generator | None = None) -> Any:
        """Apply each layer; ``rng`` reaches the ``Dropout`` layers (and turns them on).

        With layers that have state (``BatchNorm``), pass the state from ``init_state()``: a
        training call ``net(x, state, train=True)`` returns ``(y, new_state)``, an evaluation
        call ``net(x, state)`` returns ``y``. Without such layers ``train=True`` returns ``(y, None)``.
        """
        h: Any = x
        if state is None:  # (a layer with state raises, naming the fix)
            for layer in self.layers:
                h = layer(h, rng=rng) if isinstance(layer, (Dropout, Sequential)) else layer(h)
            return (h, None) if train else h
        if not isinstance(state, tuple) or len(state) != len(self.layers):
            raise ValueError(f"Sequential: the state must be the tuple of {len(self.layers)} layer states that "
                             f"init_state() returns, got {type(state).__name__}")
        new = []
        for layer, s in zip(self.layers, state):
            if s is None:
                h = layer(h, rng=rng) if isinstance(layer, (Dropout, Sequential)) else layer(h)
            elif isinstance(layer, Sequential):
                h, s = layer(h, s, train=True, rng=rng) if train else (layer(h, s, rng=rng), s)
            elif train:
                h, s = layer(h, s, train=True)
            else:
                h = layer(h, s)
            new.append(s)
        return (h, tuple(new)) if train else h

    def _summary(self) -> str:
        lines = []
        for i, layer in enumerate(self.layers):
            text = layer._summary() if isinstance(layer, Module) else getattr(layer, "__name__", repr(layer))
            lines.append(f"  ({i}): " + text.replace("\n", "\n  "))
        lines.append(f"  parameters={self.num_params:,}")
        return "Sequential(\n" + "\n".join(lines) + "\n)"


def _flatten_sequential(obj: Sequential) -> tuple[list[Any], Any]:
    children = [layer for layer in obj.layers if isinstance(layer, Module)]
    meta = tuple(None if isinstance(layer, Module) else layer for layer in obj.layers)
    return children, meta


def _unflatten_sequential(meta: Any, children: list[Any]) -> Sequential:
    it = iter(children)
    obj = object.__new__(Sequential)
    obj.__dict__["layers"] = tuple(next(it) if m is None else m for m in meta)
    return obj


register_pytree(Sequential, _flatten_sequential, _unflatten_sequential)


def _child_names(cls: type, n: int) -> list[str] | None:
    """A module's children as error messages name them (``.weight``): see ``core.tree.set_child_names``."""
    if isinstance(cls, type) and issubclass(cls, Module) and cls is not Sequential and dataclasses.is_dataclass(cls):
        return [f".{name}" for name in _dynamic_fields(cls)]
    return None


set_child_names(_child_names)


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Embedding(Module):
    """A lookup table: row ``i`` of ``weight`` (shape ``(num_embeddings, dim)``) for index ``i``.

    Initialised ``N(0, 1)``. Gradients of repeated indices add up. Without ``rng`` the table is
    drawn from NumPy's global generator, in float64, and requires grad (see ``Linear``).

    >>> emb = Embedding(10, 4, rng=np.random.default_rng(0))
    >>> emb(np.array([[1, 2], [3, 3]])).shape
    (2, 2, 4)
    """

    weight: Any

    def __init__(self, num_embeddings: int, dim: int, *, rng: np.random.Generator | int | None = None,
                 dtype: DTypeLike | None = None) -> None:
        gen, dt, rg = _source(rng, dtype, "Embedding")
        shape = (_size(num_embeddings, "num_embeddings", "Embedding"), _size(dim, "dim", "Embedding"))
        _set(self, weight=Tensor(gen.standard_normal(shape), dtype=dt, requires_grad=rg))

    def __call__(self, indices: ArrayLike) -> Tensor:
        """The rows of ``weight`` at integer ``indices`` (any shape): shape ``indices.shape + (dim,)``."""
        idx = indices._data if type(indices) is Tensor else indices
        idx = idx if isinstance(idx, _lift.ARRAYS) else np.asarray(idx)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"Embedding: indices must be integers, got dtype {idx.dtype}; use labels.astype(int)")
        n = _leaf_shape(self.weight)[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"Embedding: indices must be in [0, {n}); got values from {idx.min()} to {idx.max()}")
        return basics.take(self.weight, idx, axis=0)

    def attend(self, x: ArrayLike) -> Tensor:
        """``x @ weight.T``: the table used as an output layer (as flax's ``Embed.attend``), for tied weights.

        A language model whose output layer is its token embedding calls ``embed(tokens)`` at the
        start and ``embed.attend(h)`` at the end: one parameter, used twice, whose gradient is the
        total of both uses (through ``leanpass.grad`` and ``.backward()`` alike). ``x`` has shape
        ``(..., dim)``; the result ``(..., num_embeddings)``, one score per row of the table.

        >>> emb = Embedding(5, 3, rng=0)
        >>> emb.attend(np.ones((2, 4, 3))).shape
        (2, 4, 5)
        """
        w = self.weight
        x = _as_input(x, w._data.dtype if type(w) is Tensor else w.dtype)
        shape = np.shape(x._data if type(x) is Tensor else x)
        d = _leaf_shape(w)[1]
        if shape[-1:] != (d,):
            raise _width_error(self, x, d, ValueError(f"attend: input of shape {shape}"))
        return basics.matmul(x, basics.transpose(w))

    def _summary(self) -> str:
        n, d = _leaf_shape(self.weight)
        return f"Embedding({n}, {d}, dtype={_leaf_dtype(self.weight)})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class LayerNorm(Module):
    """Normalise the last axis to mean 0 and variance 1, then scale by ``weight`` and shift by ``bias``.

    One op (``lp.layer_norm``), as ``torch.nn.LayerNorm(dim, eps, bias=...)``: ``bias=False`` leaves the
    shift out (``self.bias`` is None).

    >>> ln = LayerNorm(3)
    >>> y = ln(np.array([[1.0, 2.0, 3.0]]))
    >>> np.round(y.numpy(), 4)
    array([[-1.2247,  0.    ,  1.2247]], dtype=float32)
    >>> LayerNorm(3, bias=False)
    LayerNorm(3, eps=1e-05, bias=False, dtype=float32)
    """

    weight: Any
    bias: Any = None
    eps: float = 1e-5
    _static: ClassVar[tuple[str, ...]] = ("eps",)

    def __init__(self, dim: int, *, eps: float = 1e-5, bias: bool = True, dtype: DTypeLike = np.float32) -> None:
        dt = _float_dtype(dtype, "LayerNorm")
        n = _size(dim, "dim", "LayerNorm")
        _set(self, weight=Tensor(np.ones(n, dtype=dt)), bias=Tensor(np.zeros(n, dtype=dt)) if bias else None,
             eps=float(eps))

    def __call__(self, x: ArrayLike) -> Tensor:
        """Normalise ``x`` of shape ``(..., dim)`` over its last axis."""
        x = _as_input(x, self.weight.dtype)
        n = _leaf_shape(self.weight)[0]
        if np.shape(x)[-1:] != (n,):
            raise _width_error(self, x, n, ValueError("layer_norm: the last axis does not match")) from None
        return layer_norm(x, (n,), self.weight, self.bias, self.eps)

    def _summary(self) -> str:
        extra = "" if self.bias is not None else ", bias=False"
        return f"LayerNorm({_leaf_shape(self.weight)[0]}, eps={self.eps:g}{extra}, dtype={_leaf_dtype(self.weight)})"


def _width_error(module: Module, x: Any, width: int, err: ValueError) -> ValueError:
    """A shape error inside ``module``, in the module's words (the NumPy message kept at the end)."""
    shape = np.shape(x._data if type(x) is Tensor else x)
    if shape[-1:] == (width,):
        return err
    return ValueError(
        f"{module._summary()}: the input has shape {shape}, but this layer takes inputs of shape (..., {width}) "
        f"(last axis {width}, not {shape[-1] if shape else 'a scalar'}). Check the layer widths, or reshape the "
        "input (x.reshape(len(x), -1) flattens each example)."
    )


def dropout(x: ArrayLike, rate: float, rng: np.random.Generator | None) -> Any:
    """Zero each element with probability ``rate`` and scale the rest by ``1 / (1 - rate)``.

    With ``rng=None`` (evaluation) ``x`` is returned unchanged. The mask is drawn from ``rng``, so
    the same generator state gives the same mask. An int seed is refused: it would give the same
    mask on every call (make one generator, as one PRNG key in JAX, and pass it each time).

    >>> dropout(Tensor([1.0, 1.0]), 0.5, None)
    Tensor([1., 1.])
    >>> dropout(Tensor(np.ones(6)), 0.5, np.random.default_rng(0)).numpy()
    array([2., 0., 0., 0., 2., 2.])
    """
    if not 0.0 <= rate < 1.0:
        raise ValueError(f"dropout: rate must be in [0, 1), got {rate}")
    if rng is None or rate == 0.0:
        return x
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            f"dropout: rng must be a np.random.Generator, got {type(rng).__name__}. A seed would draw the "
            "same mask on every call; make the generator once, rng = np.random.default_rng(0), and pass it "
            "to each call (it advances, so each call gets a fresh mask)."
        )
    gen = rng
    data = x._data if type(x) is Tensor else x if isinstance(x, _lift.ARRAYS) else np.asarray(x)
    dtype = data.dtype if data.dtype.kind == "f" else np.dtype(np.float64)
    keep = (gen.random(np.shape(data)) >= rate).astype(dtype) * dtype.type(1.0 / (1.0 - rate))
    return x * keep


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Dropout(Module):
    """Dropout as a layer: on when called with a generator (``rng=``), off without one (evaluation).

    >>> drop = Dropout(0.5)
    >>> drop(Tensor(np.ones(4)))            # evaluation: unchanged
    Tensor([1., 1., 1., 1.])
    >>> drop(Tensor(np.ones(4)), rng=np.random.default_rng(1)).numpy()
    array([2., 2., 0., 2.])

    LeanPass 0.1.14's (and PyTorch's) form works too: ``Dropout(p=0.5)(x, training=True)`` draws
    the mask from NumPy's global generator (``np.random.seed(n)`` repeats it), and
    ``training=False`` turns dropout off. Unlike 0.1.14, a call with neither ``training`` nor
    ``rng`` evaluates (no dropout), as it always has in this version.

    >>> np.random.seed(0)
    >>> Dropout(p=0.5)(Tensor(np.ones(4)), training=True).numpy()
    array([2., 2., 2., 2.])
    """

    rate: float = 0.5
    _static: ClassVar[tuple[str, ...]] = ("rate",)

    def __init__(self, rate: float = 0.5, *, p: float | None = None) -> None:
        if p is not None:  # (PyTorch's and 0.1.14's name)
            rate = p
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        _set(self, rate=float(rate))

    def __call__(self, x: ArrayLike, training: bool | None = None, *, rng: np.random.Generator | None = None) -> Any:
        """Apply dropout with a generator or ``training=True`` (training); return ``x`` unchanged otherwise.

        ``training=True`` without ``rng`` draws from NumPy's global generator; ``training=False``
        is evaluation even when ``rng`` is given.
        """
        if training is None:
            return dropout(x, self.rate, rng)
        if not training:
            return x
        return dropout(x, self.rate, _global_rng() if rng is None else rng)

    def _summary(self) -> str:
        return f"Dropout({self.rate:g})"


# Their public home is ``leanpass.nn`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", None) == __name__:
        _obj.__module__ = "leanpass.nn"
del _name, _obj
