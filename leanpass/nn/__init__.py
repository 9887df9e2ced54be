"""Neural-network modules: frozen dataclasses that are pytrees of ``Tensor`` parameters.

A module is a value. ``leanpass.grad(loss_fn)(model)`` returns a gradient with the model's
own shape (a ``Linear`` of gradients), an optimizer update returns a new model, and nothing
is ever changed in place. Every initialiser takes an explicit ``np.random.Generator``, so the
same seed gives the same model, bit for bit.

>>> import numpy as np
>>> from leanpass import nn
>>> model = nn.MLP([4, 8, 3], rng=np.random.default_rng(0))
>>> model
MLP(
  (0): Linear(4 -> 8, dtype=float32)
  (1): Linear(8 -> 3, dtype=float32)
  activation=relu, parameters=67
)
>>> model(np.ones((2, 4))).shape
(2, 3)
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np

from ..core.tensor import ArrayLike, Tensor, _linear
from ..core.tree import _CACHE, register_pytree, set_child_names, tree_flatten, tree_map
from ..data import _generator as _check_rng
from ..functional import _lift
from ..numpy import basics as ops

DTypeLike = Any  # np.float32, np.float64, "float32", ...

__all__ = [
    "Module", "Linear", "MLP", "Sequential", "Embedding", "LayerNorm", "Dropout",
    "relu", "tanh", "sigmoid", "gelu", "leaky_relu", "softplus", "identity", "ACTIVATIONS",
    "he_normal", "he_uniform", "glorot_normal", "glorot_uniform", "xavier_normal", "xavier_uniform",
    "zeros", "param_count", "trainable", "dropout",
    "Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "Flatten", "GroupNorm", "BatchNorm",
]


# ----- activations (plain functions) ------------------------------------------------------------
# The activations are the Tensor-level ops themselves (one definition, one docstring each).
from ..numpy.basics import gelu, leaky_relu, relu, sigmoid, softplus, tanh  # noqa: E402


def identity(x: ArrayLike) -> Any:
    """``x`` unchanged (a "linear" activation).

    >>> identity(Tensor([3.0]))
    Tensor([3.])
    """
    return x


# The activations a module can name (and a checkpoint can store) by string.
ACTIVATIONS: dict[str, Callable[[Any], Any]] = {
    f.__name__: f for f in (relu, tanh, sigmoid, gelu, leaky_relu, softplus, identity)
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
        if fn is activation or getattr(ops, name, None) is activation:
            return name
    raise ValueError(
        f"activation {activation!r} is not one of nn.ACTIVATIONS ({sorted(ACTIVATIONS)}); pass its "
        "name, or put your function between layers of an nn.Sequential."
    )


# ----- initialisers ------------------------------------------------------------------------------
def _fans(shape: tuple[int, ...]) -> tuple[int, int]:
    """``(fan_in, fan_out)``, each at least 1 (a shape with a 0 holds no numbers to scale)."""
    if len(shape) < 2:
        n = max(shape[0] if shape else 1, 1)
        return n, n
    receptive = math.prod(shape[:-2])
    return max(shape[-2] * receptive, 1), max(shape[-1] * receptive, 1)


def _size(v: Any, name: str, where: str, low: int = 0) -> int:
    """A layer's size argument as an int of at least ``low`` (0 builds an empty layer, as in PyTorch)."""
    try:
        n = operator.index(v)
    except TypeError:
        raise TypeError(f"{where}: {name} must be an int, got {v!r}") from None
    if n < low:
        raise ValueError(f"{where}: {name} must be >= {low}, got {n}")
    return n


def _float_dtype(dtype: DTypeLike, where: str) -> np.dtype[Any]:
    dt = np.dtype(dtype)
    if dt not in (np.float32, np.float64):
        raise TypeError(f"{where}: dtype must be float32 or float64, got {dt}.")
    return dt


def he_normal(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) normal: ``N(0, 2 / fan_in)``, for layers followed by ``relu``.

    ``shape`` is ``(fan_in, fan_out)`` for a weight matrix used as ``x @ w``.

    >>> w = he_normal(np.random.default_rng(0), (64, 32))
    >>> w.shape, w.dtype
    ((64, 32), dtype('float32'))
    """
    rng = _check_rng(rng, "he_normal")
    fan_in, _ = _fans(shape)
    dt = _float_dtype(dtype, "he_normal")
    return Tensor(rng.standard_normal(shape) * math.sqrt(2.0 / fan_in), dtype=dt)


def he_uniform(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """He (Kaiming) uniform: ``U(-a, a)`` with ``a = sqrt(6 / fan_in)``.

    >>> float(abs(he_uniform(0, (6, 3))).max().item()) <= 1.0
    True
    """
    rng = _check_rng(rng, "he_uniform")
    fan_in, _ = _fans(shape)
    a = math.sqrt(6.0 / fan_in)
    return Tensor(rng.uniform(-a, a, shape), dtype=_float_dtype(dtype, "he_uniform"))


def glorot_normal(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) normal: ``N(0, 2 / (fan_in + fan_out))``, for tanh / sigmoid layers.

    >>> glorot_normal(0, (3, 5), np.float64).dtype
    dtype('float64')
    """
    rng = _check_rng(rng, "glorot_normal")
    fan_in, fan_out = _fans(shape)
    std = math.sqrt(2.0 / (fan_in + fan_out))
    return Tensor(rng.standard_normal(shape) * std, dtype=_float_dtype(dtype, "glorot_normal"))


def glorot_uniform(rng: np.random.Generator | int, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """Glorot (Xavier) uniform: ``U(-a, a)`` with ``a = sqrt(6 / (fan_in + fan_out))``.

    >>> float(abs(glorot_uniform(0, (3, 3))).max().item()) <= 1.0
    True
    """
    rng = _check_rng(rng, "glorot_uniform")
    fan_in, fan_out = _fans(shape)
    a = math.sqrt(6.0 / (fan_in + fan_out))
    return Tensor(rng.uniform(-a, a, shape), dtype=_float_dtype(dtype, "glorot_uniform"))


xavier_normal = glorot_normal
xavier_uniform = glorot_uniform


def zeros(rng: np.random.Generator | int | None, shape: tuple[int, ...], dtype: DTypeLike = np.float32) -> Tensor:
    """All zeros (``rng`` is accepted for a uniform signature and ignored).

    >>> zeros(None, (2,))
    Tensor([0., 0.], dtype=float32)
    """
    return Tensor(np.zeros(shape, dtype=_float_dtype(dtype, "zeros")))


_INITS: dict[str, Callable[..., Tensor]] = {
    "he": he_normal, "he_normal": he_normal, "he_uniform": he_uniform,
    "glorot": glorot_uniform, "glorot_uniform": glorot_uniform, "glorot_normal": glorot_normal,
    "xavier": glorot_uniform, "xavier_uniform": glorot_uniform, "xavier_normal": glorot_normal,
    "zeros": zeros,
}


def _initialiser(init: str | Callable[..., Tensor]) -> Callable[..., Tensor]:
    if callable(init):
        return init
    if init not in _INITS:
        raise ValueError(f"unknown initialiser {init!r}; choose one of {sorted(_INITS)} or pass a function")
    return _INITS[init]


# ----- the module base ---------------------------------------------------------------------------
def _leaf_shape(x: Any) -> tuple[int, ...]:
    return tuple(np.shape(x._data if type(x) is Tensor else x))


def _leaf_dtype(x: Any) -> str:
    return str(x.dtype) if hasattr(x, "dtype") else type(x).__name__


def param_count(tree: Any) -> int:
    """The number of scalar parameters in a pytree (a model, a dict of Tensors, ...).

    A Tensor at several places (tied weights) is one parameter, counted once.

    >>> w = Tensor(np.zeros((3, 2)))
    >>> param_count({"w": w, "b": Tensor(np.zeros(2))}), param_count({"enc": w, "dec": w})
    (8, 6)
    """
    leaves, _ = tree_flatten(tree)
    seen: set[int] = set()
    total = 0
    for x in leaves:
        if type(x) is Tensor:
            if id(x) in seen:
                continue
            seen.add(id(x))
        total += math.prod(_leaf_shape(x))
    return int(total)


def trainable(tree: Any, requires_grad: bool = True) -> Any:
    """A copy of ``tree`` whose Tensor leaves have ``requires_grad`` set, for ``.backward()``.

    The functional style (``leanpass.grad``) does not need this; the eager style does.

    >>> layer = trainable(Linear(2, 1, rng=np.random.default_rng(0)))
    >>> layer.weight.requires_grad
    True
    """

    def mark(x: Any) -> Any:
        if type(x) is Tensor or isinstance(x, np.ndarray):
            return Tensor(x, requires_grad=requires_grad)
        return x

    return tree_map(mark, tree)


class Module:
    """Base of the modules: a frozen dataclass registered as a pytree.

    Subclasses are decorated with ``@dataclass(frozen=True, repr=False)``; fields listed in
    ``_static`` are structure (sizes, names), every other field is a child of the pytree
    (Tensors, sub-modules, tuples of them). A subclass of your own is registered by
    ``Module.register(cls)`` (done automatically on subclassing).

    >>> lin = Linear(3, 2, rng=np.random.default_rng(0))
    >>> leaves, _ = lp.tree_flatten(lin)
    >>> [leaf.shape for leaf in leaves]
    [(3, 2), (2,)]
    """

    _static: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_pytree(cls, _flatten_module, functools.partial(_unflatten_module, cls), frozen=True)

    # what a subclass overrides
    def __call__(self, *args: Any, **kwargs: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__} does not define __call__")

    def init_state(self) -> Any:
        """The module's state before training (``BatchNorm``'s running statistics), or None if it has none.

        A module with state is called as ``y, state = m(x, state, train=True)`` to train and
        ``y = m(x, state)`` to evaluate.

        >>> Linear(2, 2, rng=0).init_state() is None
        True
        """
        return None

    @property
    def num_params(self) -> int:
        """The number of scalar parameters (see ``param_count``).

        >>> Linear(3, 2, rng=0).num_params
        8
        """
        return param_count(self)

    def _summary(self) -> str:
        """One line describing this module (used by ``repr``)."""
        return type(self).__name__

    def __repr__(self) -> str:
        return self._summary()

    def __getstate__(self) -> dict[str, Any]:
        """The fields, for ``copy``, ``deepcopy`` and ``pickle`` (not the flatten that ``leanpass.tree`` remembers)."""
        state = self.__dict__
        return {k: v for k, v in state.items() if k != _CACHE} if _CACHE in state else state

    def replace(self, **changes: Any) -> Any:
        """A copy with some fields replaced (the original is unchanged).

        >>> lin = Linear(2, 2, rng=np.random.default_rng(0))
        >>> lin.replace(bias=None).bias is None
        True
        """
        new = object.__new__(type(self))
        new.__dict__.update(self.__getstate__())
        for name, value in changes.items():
            if name not in new.__dict__:
                raise AttributeError(f"{type(self).__name__} has no field {name!r}")
            new.__dict__[name] = value
        return new


_Getter = Callable[[dict[str, Any]], tuple[Any, ...]]  # an instance's ``__dict__`` -> some of its values
_Unflatten = Callable[[Any, list[Any]], Any]
# class -> (its child (non-static) field names in order, a getter of their values, a getter of the
# static fields' values, its unflatten). Filled on first use: the fields are only known once the
# dataclass decorator has run, after ``__init_subclass__``.
_SPECS: dict[type, tuple[tuple[str, ...], _Getter, _Getter, _Unflatten]] = {}


def _spec(cls: type) -> tuple[tuple[str, ...], _Getter, _Getter, _Unflatten]:
    spec = _SPECS.get(cls)
    if spec is None:
        static = cls._static  # type: ignore[attr-defined]
        fields = tuple(f.name for f in dataclasses.fields(cls))
        names = tuple(n for n in fields if n not in static)
        unflatten = _unflattener(cls, fields, names, static)
        spec = _SPECS[cls] = (names, _getter(names), _getter(static), unflatten)
        register_pytree(cls, _flatten_module, unflatten, frozen=True)  # replaces _unflatten_module
    return spec


def _unflattener(cls: type, fields: tuple[str, ...], names: tuple[str, ...], static: tuple[str, ...]) -> _Unflatten:
    """``(meta, children) -> instance`` of ``cls``, written out once for its fields, as ``dataclasses``
    writes ``__init__``: ``o = new(cls); d = o.__dict__; d["weight"] = ch[0]; ...; return o``.
    It builds a module in half the time of a loop over the fields (an SGD step builds a dozen)."""
    body = "".join(
        f"    d[{f!r}] = {f'meta[{static.index(f)}]' if f in static else f'ch[{names.index(f)}]'}\n" for f in fields
    )
    namespace: dict[str, Any] = {"new": object.__new__, "cls": cls}
    exec(f"def unflatten(meta, ch):\n    o = new(cls)\n    d = o.__dict__\n{body}    return o\n", namespace)  # noqa: S102
    return namespace["unflatten"]


def _dynamic_fields(cls: type) -> tuple[str, ...]:
    return _spec(cls)[0]


def _child_names(cls: type, n: int) -> list[str] | None:
    """A module's children as error messages name them (``.weight``): see ``core.tree.set_child_names``."""
    if isinstance(cls, type) and issubclass(cls, Module) and cls is not Sequential:
        return [f".{name}" for name in _dynamic_fields(cls)]
    return None


set_child_names(_child_names)


def _getter(names: tuple[str, ...]) -> _Getter:
    """``d -> tuple(d[n] for n in names)``, in C where it can be (``itemgetter`` of one name gives a bare value)."""
    if len(names) == 1:
        name = names[0]
        return lambda d: (d[name],)
    return operator.itemgetter(*names) if names else lambda d: ()


def _flatten_module(obj: Any) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    _, children, meta, _ = _SPECS.get(type(obj)) or _spec(type(obj))
    d = obj.__dict__
    return children(d), meta(d)


def _unflatten_module(cls: type, meta: Any, children: list[Any]) -> Any:
    """A module class's unflatten until its first use, when ``_spec`` registers the written-out one."""
    return _spec(cls)[3](meta, children)


def _set(obj: Any, **values: Any) -> None:
    """Fill a frozen dataclass's fields from its own ``__init__``."""
    obj.__dict__.update(values)


def _as_input(x: Any, dtype: Any) -> Any:
    """The input in the layer's dtype: arrays and lists are cast; a Tensor of another dtype gets a
    recorded ``astype`` (so float64 data never silently turns a float32 model's output float64)."""
    if type(x) is Tensor:
        return x if x._data.dtype == dtype else ops.astype(x, dtype)
    if type(x) is np.ndarray and x.dtype == dtype:  # the usual batch: no np.asarray call
        return x
    arr = x if isinstance(x, _lift.RAW) else np.asarray(x)
    return arr if arr.dtype == dtype else arr.astype(dtype)


# ----- layers --------------------------------------------------------------------------------------
@dataclass(frozen=True, repr=False, init=False, eq=False)
class Linear(Module):
    """``y = x @ weight + bias``; ``weight`` has shape ``(in_features, out_features)``.

    ``init`` names the weight initialiser (``"he"`` for relu nets, ``"glorot"`` for tanh); the
    bias starts at zero. NumPy inputs are cast to the layer's ``dtype``.

    >>> layer = Linear(3, 2, rng=np.random.default_rng(0))
    >>> layer
    Linear(3 -> 2, dtype=float32)
    >>> layer(np.ones((4, 3))).shape
    (4, 2)
    """

    weight: Any
    bias: Any = None

    def __init__(self, in_features: int, out_features: int, *, rng: np.random.Generator | int,
                 bias: bool = True, init: str | Callable[..., Tensor] = "he",
                 dtype: DTypeLike = np.float32) -> None:
        rng = _check_rng(rng, "Linear")
        dt = _float_dtype(dtype, "Linear")
        fan_in, fan_out = _size(in_features, "in_features", "Linear"), _size(out_features, "out_features", "Linear")
        w = _initialiser(init)(rng, (fan_in, fan_out), dt)
        _set(self, weight=w, bias=zeros(None, (fan_out,), dt) if bias else None)

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
                return ops.matmul(x, w)
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

    >>> mlp = MLP([2, 3, 1], rng=np.random.default_rng(0), activation="tanh", dtype=np.float64)
    >>> mlp.num_params, mlp(np.zeros((5, 2))).shape
    (13, (5, 1))
    """

    layers: tuple[Linear, ...]
    activation: str = "relu"
    _static: ClassVar[tuple[str, ...]] = ("activation",)

    def __init__(self, sizes: Sequence[int], *, rng: np.random.Generator | int,
                 activation: str | Callable[[Any], Any] = "relu", init: str | Callable[..., Tensor] | None = None,
                 dtype: DTypeLike = np.float32) -> None:
        sizes = [int(s) for s in sizes]
        if len(sizes) < 2:
            raise ValueError(f"MLP(sizes): give at least an input and an output size, e.g. [64, 10]; got {sizes}")
        rng = _check_rng(rng, "MLP")
        name = _activation_name(activation)
        if init is None:
            init = "he" if name in ("relu", "leaky_relu", "gelu") else "glorot"
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


@dataclass(frozen=True, repr=False, init=False, eq=False)
class Embedding(Module):
    """A lookup table: row ``i`` of ``weight`` (shape ``(num_embeddings, dim)``) for index ``i``.

    Initialised ``N(0, 1)``. Gradients of repeated indices add up.

    >>> emb = Embedding(10, 4, rng=np.random.default_rng(0))
    >>> emb(np.array([[1, 2], [3, 3]])).shape
    (2, 2, 4)
    """

    weight: Any

    def __init__(self, num_embeddings: int, dim: int, *, rng: np.random.Generator | int,
                 dtype: DTypeLike = np.float32) -> None:
        rng = _check_rng(rng, "Embedding")
        dt = _float_dtype(dtype, "Embedding")
        shape = (_size(num_embeddings, "num_embeddings", "Embedding"), _size(dim, "dim", "Embedding"))
        _set(self, weight=Tensor(rng.standard_normal(shape), dtype=dt))

    def __call__(self, indices: ArrayLike) -> Tensor:
        """The rows of ``weight`` at integer ``indices`` (any shape): shape ``indices.shape + (dim,)``."""
        idx = indices._data if type(indices) is Tensor else indices
        idx = idx if isinstance(idx, _lift.RAW) else np.asarray(idx)
        if idx.dtype.kind not in "iu":
            raise TypeError(f"Embedding: indices must be integers, got dtype {idx.dtype}; use labels.astype(int)")
        n = _leaf_shape(self.weight)[0]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            raise IndexError(f"Embedding: indices must be in [0, {n}); got values from {idx.min()} to {idx.max()}")
        return ops.take(self.weight, idx, axis=0)

    def _summary(self) -> str:
        n, d = _leaf_shape(self.weight)
        return f"Embedding({n}, {d}, dtype={_leaf_dtype(self.weight)})"


@dataclass(frozen=True, repr=False, init=False, eq=False)
class LayerNorm(Module):
    """Normalise the last axis to mean 0 and variance 1, then scale by ``weight`` and shift by ``bias``.

    >>> ln = LayerNorm(3)
    >>> y = ln(np.array([[1.0, 2.0, 3.0]]))
    >>> np.round(y.numpy(), 4)
    array([[-1.2247,  0.    ,  1.2247]], dtype=float32)
    """

    weight: Any
    bias: Any
    eps: float = 1e-5
    _static: ClassVar[tuple[str, ...]] = ("eps",)

    def __init__(self, dim: int, *, eps: float = 1e-5, dtype: DTypeLike = np.float32) -> None:
        dt = _float_dtype(dtype, "LayerNorm")
        n = _size(dim, "dim", "LayerNorm")
        _set(self, weight=Tensor(np.ones(n, dtype=dt)), bias=Tensor(np.zeros(n, dtype=dt)), eps=float(eps))

    def __call__(self, x: ArrayLike) -> Tensor:
        """Normalise ``x`` of shape ``(..., dim)`` over its last axis."""
        x = _as_input(x, self.weight.dtype)
        mu = ops.mean(x, axis=-1, keepdims=True)
        var = ops.var(x, axis=-1, keepdims=True)
        try:
            return (x - mu) / ops.sqrt(var + self.eps) * self.weight + self.bias
        except ValueError as e:
            raise _width_error(self, x, _leaf_shape(self.weight)[0], e) from None

    def _summary(self) -> str:
        return f"LayerNorm({_leaf_shape(self.weight)[0]}, eps={self.eps:g}, dtype={_leaf_dtype(self.weight)})"


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
    data = x._data if type(x) is Tensor else x if isinstance(x, _lift.RAW) else np.asarray(x)
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
    """

    rate: float = 0.5
    _static: ClassVar[tuple[str, ...]] = ("rate",)

    def __init__(self, rate: float = 0.5) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        _set(self, rate=float(rate))

    def __call__(self, x: ArrayLike, *, rng: np.random.Generator | None = None) -> Any:
        """Apply dropout with a generator (training); return ``x`` unchanged without one."""
        return dropout(x, self.rate, rng)

    def _summary(self) -> str:
        return f"Dropout({self.rate:g})"




# ----- convolutional layers and normalisation (in a module of their own, loaded on first use) -------
_CONV_LAYERS = ("Conv1d", "Conv2d", "ConvTranspose2d", "MaxPool2d", "AvgPool2d", "Flatten", "GroupNorm", "BatchNorm")


def __getattr__(name: str) -> Any:
    if name in _CONV_LAYERS:
        from . import conv as conv_layers

        return getattr(conv_layers, name)
    raise AttributeError(f"module 'leanpass.nn' has no attribute {name!r}")


if TYPE_CHECKING:
    from .conv import AvgPool2d, BatchNorm, Conv1d, Conv2d, ConvTranspose2d, Flatten, GroupNorm, MaxPool2d
