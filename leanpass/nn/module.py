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
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from ..core.tensor import Tensor
from ..core.tree import _CACHE, register_pytree, tree_flatten, tree_map
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
