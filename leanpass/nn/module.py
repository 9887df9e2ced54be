"""The base of ``leanpass.nn``'s modules: ``Module`` (a frozen dataclass registered as a pytree, its
flatten and unflatten written out once per class), ``param_count``, ``trainable`` and the helpers
the layers share (sizes, dtypes, inputs cast to a layer's dtype).

>>> import numpy as np
>>> from leanpass import nn
>>> nn.param_count({"w": lp.Tensor(np.zeros((3, 2))), "b": lp.Tensor(np.zeros(2))})
8
"""

from __future__ import annotations

import dataclasses
import functools
import math
import operator
import re
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..core.tensor import Tensor
from ..core.tree import _CACHE, leaf_paths, register_pytree, tree_flatten, tree_map
from ..data import _generator as _check_rng
from ..functional import _lift
from ..numpy import basics

DTypeLike = Any  # np.float32, np.float64, "float32", ...

__all__ = ["Module", "param_count", "trainable"]


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


def _global_rng() -> np.random.Generator:
    """A Generator drawing from NumPy's global state (the one ``np.random.seed`` sets and the
    ``np.random`` functions draw from), so that ``np.random.seed(n)`` repeats what it draws."""
    return np.random.Generator(np.random.get_bit_generator())  # type: ignore[attr-defined, unused-ignore]


def _source(rng: Any, dtype: DTypeLike | None, where: str) -> tuple[np.random.Generator, np.dtype[Any], bool]:
    """A layer's ``(generator, dtype, requires_grad)`` from its ``rng`` and ``dtype`` arguments.

    Given ``rng`` (a Generator or an int seed): that generator, float32 unless ``dtype`` says otherwise,
    and Tensors that do not require grad (the functional style differentiates with ``leanpass.grad``).
    Without ``rng`` (LeanPass 0.1.14's form, ``nn.Linear(4, 8)``): NumPy's global generator (the state
    of the ``np.random`` functions, so ``np.random.seed(n)`` repeats a run), float64 (0.1.14's only dtype)
    and parameters that require grad (``loss.backward()`` fills their ``.grad``).
    """
    if rng is None:
        return _global_rng(), _float_dtype(np.float64 if dtype is None else dtype, where), True
    return _check_rng(rng, where), _float_dtype(np.float32 if dtype is None else dtype, where), False


def _param(t: Tensor, requires_grad: bool) -> Tensor:
    """``t``, as a Tensor that requires grad when asked (the 0.1.14 form's parameters)."""
    return Tensor(t, requires_grad=True) if requires_grad else t


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

    >>> layer = trainable(lp.nn.Linear(2, 1, rng=np.random.default_rng(0)))
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

    A subclass written as in LeanPass 0.1.14 or PyTorch, without the dataclass decorator, works
    too: it sets its layers as attributes in ``__init__`` and defines ``forward`` (or
    ``__call__``). Its children are the attributes that hold Tensors, arrays or modules (also in
    lists, tuples and dicts), in the order they were set; the other attributes are structure.
    Such a module is not frozen: build a new one rather than reassigning its attributes once
    transforms have seen it.

    >>> class Net(Module):
    ...     def __init__(self):
    ...         self.hidden = Linear(2, 4, rng=0)
    ...         self.out = Linear(4, 1, rng=1)
    ...     def forward(self, x):
    ...         return self.out(relu(self.hidden(x)))
    >>> net = Net()
    >>> net(np.ones((3, 2))).shape, [name for name, _ in net.named_parameters()][:2]
    ((3, 1), ['hidden.weight', 'hidden.bias'])

    >>> lin = Linear(3, 2, rng=np.random.default_rng(0))
    >>> leaves, _ = lp.tree_flatten(lin)
    >>> [leaf.shape for leaf in leaves]
    [(3, 2), (2,)]
    """

    _static: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        register_pytree(cls, _flatten_module, functools.partial(_unflatten_module, cls), frozen=True)

    # what a subclass overrides: __call__, or forward (PyTorch's and 0.1.14's name)
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if type(self).forward is Module.forward:
            raise NotImplementedError(f"{type(self).__name__} defines neither __call__ nor forward")
        return self.forward(*args, **kwargs)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        """The module applied to its inputs: the same as calling it (``model.forward(x)`` is ``model(x)``)."""
        if type(self).__call__ is Module.__call__:
            raise NotImplementedError(f"{type(self).__name__} defines neither __call__ nor forward")
        return self(*args, **kwargs)

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

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Set ``.grad`` of each parameter of the module (each Tensor leaf with ``requires_grad=True``) to zeros,
        as LeanPass 0.1 does, or to None with ``set_to_none=True``, before the next ``backward()``.

        >>> lin = trainable(Linear(2, 1, rng=0))
        >>> lin(np.ones((1, 2))).sum().backward()
        >>> lin.zero_grad()
        >>> lin.bias.grad
        Tensor([0.], dtype=float32)
        """
        seen: set[int] = set()
        for p in tree_flatten(self)[0]:
            if type(p) is Tensor and p._marks & 1 and p._op == "leaf" and id(p) not in seen:
                seen.add(id(p))
                p.grad = None if set_to_none else np.zeros_like(p._data)

    def _summary(self) -> str:
        """One line describing this module (used by ``repr``)."""
        return type(self).__name__

    def __repr__(self) -> str:
        return self._summary()

    def __getstate__(self) -> dict[str, Any]:
        """The fields, for ``copy``, ``deepcopy`` and ``pickle`` (not the flatten that ``leanpass.tree`` remembers)."""
        state = self.__dict__
        return {k: v for k, v in state.items() if k != _CACHE} if _CACHE in state else state

    def _named_children(self) -> list[tuple[str, Any]]:
        """The children as ``(attribute name, value)`` pairs, in the order of the pytree."""
        d = self.__dict__
        names = _dynamic_fields(type(self)) if dataclasses.is_dataclass(self) else _plain_children(d)
        return [(name, d[name]) for name in names]

    def named_parameters(self) -> list[tuple[str, Tensor]]:
        """The parameter Tensors with their names, as ``(name, tensor)`` pairs.

        A name is the attribute path with dots, as in PyTorch: ``model.layers[0].weight`` is
        ``"layers.0.weight"``. The order is the order of ``leanpass.tree_flatten(model)`` (the
        order optimizers and checkpoints use): fields in their declared order, depth first. A
        Tensor held at several places (tied weights) is listed once, under its first name.

        >>> mlp = MLP([2, 3, 1], rng=0)
        >>> [(name, p.shape) for name, p in mlp.named_parameters()]
        [('layers.0.weight', (2, 3)), ('layers.0.bias', (3,)), ('layers.1.weight', (3, 1)), ('layers.1.bias', (1,))]
        """
        out: list[tuple[str, Tensor]] = []
        seen: set[int] = set()
        stack: list[tuple[str, Any]] = [("", self)]
        while stack:
            prefix, node = stack.pop()
            if type(node) is Tensor:
                if id(node) not in seen:
                    seen.add(id(node))
                    out.append((prefix, node))
                continue
            if isinstance(node, Module):
                children = node._named_children()
            elif isinstance(node, (list, tuple)):
                children = [(str(i), c) for i, c in enumerate(node)]
            elif isinstance(node, dict):
                children = [(str(k), c) for k, c in node.items()]
            else:  # another registered pytree: its leaves, named by their paths
                leaves, treedef = tree_flatten(node)
                children = [(_dotted(path), leaf) for path, leaf in zip(leaf_paths(treedef), leaves)
                            if type(leaf) is Tensor]
            stack.extend((f"{prefix}.{name}" if prefix else name, c) for name, c in reversed(children))
        return out

    def parameters(self) -> list[Tensor]:
        """The parameter Tensors the module holds (the same objects), in the order of ``named_parameters``.

        Ready for an optimizer object (``optim.SGD(model.parameters(), lr=0.1)``) or for reading:

        >>> layer = Linear(3, 2, rng=0)
        >>> [p.shape for p in layer.parameters()], layer.parameters()[0] is layer.weight
        ([(3, 2), (2,)], True)
        """
        return [p for _, p in self.named_parameters()]

    def train(self, mode: bool = True) -> Any:
        """Refused with a message: LeanPass modules are frozen and have no training mode.

        Training is chosen per call: ``Dropout`` is on when called with a generator
        (``drop(x, rng=gen)``) or ``training=True``, ``BatchNorm`` trains with
        ``bn(x, state, train=True)``, and ``Sequential`` passes ``rng=`` and ``train=`` on to its
        layers. Without them every module evaluates (``eval()`` returns the module itself).

        >>> Linear(2, 2, rng=0).train()
        Traceback (most recent call last):
        ...
        TypeError: Linear.train(): LeanPass modules have no training mode ...
        """
        if not mode:
            return self
        raise TypeError(
            f"{type(self).__name__}.train(): LeanPass modules have no training mode (they are frozen values). "
            "Turn training on per call instead: dropout with net(x, rng=np.random.default_rng(0)) or "
            "nn.Dropout(p)(x, training=True), batch norm with net(x, state, train=True). Without those "
            "arguments a module evaluates, so eval() is not needed."
        )

    def eval(self) -> Any:
        """The module itself: a LeanPass module evaluates unless a call asks to train (see ``train``).

        >>> lin = Linear(2, 2, rng=0)
        >>> lin.eval() is lin
        True
        """
        return self

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
    unflatten = namespace["unflatten"]
    # what it does, for builders that write it out inline (core.tree._statements: lp.jit's outputs)
    unflatten.cls = cls
    unflatten.fields = tuple((f, "meta", static.index(f)) if f in static else (f, "ch", names.index(f)) for f in fields)
    return unflatten


def _dotted(path: str) -> str:
    """A pytree path as a dotted name: ``.layers[0].weight`` -> ``layers.0.weight``, ``['w']`` -> ``w``."""
    return re.sub(r"\[['\"]?([^'\"\]]*)['\"]?\]", r".\1", path).lstrip(".")


def _dynamic_fields(cls: type) -> tuple[str, ...]:
    return _spec(cls)[0]


def _getter(names: tuple[str, ...]) -> _Getter:
    """``d -> tuple(d[n] for n in names)``, in C where it can be (``itemgetter`` of one name gives a bare value)."""
    if len(names) == 1:
        name = names[0]
        return lambda d: (d[name],)
    return operator.itemgetter(*names) if names else lambda d: ()


def _flatten_module(obj: Any) -> tuple[Any, tuple[Any, ...]]:
    spec = _SPECS.get(type(obj))
    if spec is None:
        if not dataclasses.is_dataclass(obj):  # a module written as in 0.1.14 / PyTorch
            _register_plain(type(obj))
            return _flatten_plain(obj)
        spec = _spec(type(obj))
    d = obj.__dict__
    return spec[1](d), spec[2](d)


def _unflatten_module(cls: type, meta: Any, children: list[Any]) -> Any:
    """A module class's unflatten until its first use, when ``_spec`` registers the written-out one."""
    if not dataclasses.is_dataclass(cls):
        _register_plain(cls)
        return _unflatten_plain(cls, meta, children)
    return _spec(cls)[3](meta, children)


# ----- modules that are not dataclasses (0.1.14's and PyTorch's way of writing one) -------------------------
def _holds_arrays(v: Any) -> bool:
    """Whether an attribute's value is a child of the pytree: it holds a Tensor, an array or a module."""
    if type(v) is Tensor or isinstance(v, (np.ndarray, Module)):
        return True
    if isinstance(v, (list, tuple, dict)) and v:
        leaves, _ = tree_flatten(v)
        return any(type(x) is Tensor or isinstance(x, np.ndarray) for x in leaves)
    return False


def _plain_children(d: dict[str, Any]) -> tuple[str, ...]:
    return tuple(k for k, v in d.items() if k != _CACHE and _holds_arrays(v))


def _flatten_plain(obj: Any) -> tuple[list[Any], tuple[Any, ...]]:
    d = obj.__dict__
    names = _plain_children(d)
    static = tuple((k, v) for k, v in d.items() if k != _CACHE and k not in names)
    return [d[k] for k in names], (names, static, tuple(k for k in d if k != _CACHE))


def _unflatten_plain(cls: type, meta: tuple[Any, ...], children: list[Any]) -> Any:
    names, static, order = meta
    values = dict(static)
    values.update(zip(names, children))
    obj: Any = object.__new__(cls)
    obj.__dict__.update((k, values[k]) for k in order)
    return obj


def _register_plain(cls: type) -> None:
    register_pytree(cls, _flatten_plain, functools.partial(_unflatten_plain, cls))  # (not frozen: no memo)


def _set(obj: Any, **values: Any) -> None:
    """Fill a frozen dataclass's fields from its own ``__init__``."""
    obj.__dict__.update(values)


def _as_input(x: Any, dtype: Any) -> Any:
    """The input in the layer's dtype: arrays and lists are cast; a Tensor of another dtype gets a
    recorded ``astype`` (so float64 data never silently turns a float32 model's output float64)."""
    if type(x) is Tensor:
        return x if x._data.dtype == dtype else basics.astype(x, dtype)
    if type(x) is np.ndarray and x.dtype == dtype:  # the usual batch: no np.asarray call
        return x
    arr = x if isinstance(x, _lift.ARRAYS) else np.asarray(x)
    return arr if arr.dtype == dtype else arr.astype(dtype)


# Their public home is ``leanpass.nn`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__:
    _obj = globals()[_name]
    if getattr(_obj, "__module__", None) == __name__:
        _obj.__module__ = "leanpass.nn"
del _name, _obj
