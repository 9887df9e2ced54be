"""Ops of your own and of plugin packages, registered by name and called as ``lp.ops.<name>``.

An op registered here is a record in the same table as LeanPass's own ops
(``leanpass.functional.REGISTRY``), declared the same way: its function ``fn(*arrays) -> (output,
vjp)`` and its forward-mode rule ``jvp=`` (or ``TRANSPOSED``, to let forward mode transpose the
VJP). It then works under every transform (``grad``, ``jvp``, ``vmap``, ``jit``, the Jacobians):

>>> import numpy as np, leanpass as lp
>>> from leanpass.plugin_registry import register_op, unregister_op
>>> def cube(x):
...     return x ** 3, lambda g: (3 * x ** 2 * g,)
>>> _ = register_op("doc_cube", cube, jvp=lambda ts, ans, x: 3 * x ** 2 * ts[0])
>>> lp.grad(lambda x: lp.ops.doc_cube(x).sum())(np.array([1.0, 2.0]))
array([ 3., 12.])
>>> _ = unregister_op("doc_cube")

Without ``jvp=``, ``fn`` is a forward function only (``fn(*inputs) -> output``, LeanPass 0.1's
form). It runs on the Tensors it is given, so one written with NumPy functions and operators that
LeanPass dispatches, or with LeanPass's functions, is differentiated as it is; one that turns its
inputs into plain arrays raises a clear error when it is differentiated.

Packages provide ops through the entry-point group ``leanpass.ops``: each entry point names a module
that registers its ops as it is imported. They load on the first use of ``lp.ops`` or ``get_op``.
"""

from __future__ import annotations

import inspect
import sys
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from .core.tensor import ConversionError, Tensor, apply
from .core.tree import tree_flatten
from .functional._registry import BATCHED, LAZY_MODULE, REGISTRY, TRANSPOSED, Op, forget
from .functional._registry import op as _record

__all__ = ["register_op", "op", "get_op", "unregister_op", "load_plugins", "registered_ops", "TRANSPOSED"]

_REGISTRY = REGISTRY
"""(LeanPass 0.1's name: the one table of op records, ``leanpass.functional.REGISTRY``.)"""

GROUP = "leanpass.ops"
"""The entry-point group through which packages provide ops."""

_loaded: set[tuple[str, str, str]] = set()  # the entry points loaded: (package, name, value)
_broken: dict[str, str] = {}  # package -> why its entry point failed to load
_discovered = False


def _builtin(name: str) -> bool:
    """Whether ``name`` is one of LeanPass's own ops (registered by a module of LeanPass other than these two)."""
    rec = REGISTRY.get(name)
    return name in LAZY_MODULE or (rec is not None and rec.module.startswith("leanpass.")
                                   and rec.module not in ("leanpass.plugin_registry", "leanpass.ops"))


def register_op(name: str, fn: Callable[..., Any], *, jvp: Any = None, vmap: str = BATCHED, need: bool = False,
                keeps: tuple[str, ...] = ()) -> Callable[..., Any]:
    """Register op ``name``; returns ``fn`` as it is. It is then called as ``lp.ops.<name>(...)``.

    With ``jvp=`` (a forward-mode rule ``rule(tangents, ans, *inputs)``, or ``TRANSPOSED``) the op
    is a record like LeanPass's own: ``fn(*arrays) -> (output, vjp)`` with ``vjp(g)`` one cotangent
    per input, ``vmap`` ``"numpy"`` (batched by the NumPy functions it calls) or the message of a
    refusal, ``need`` and ``keeps`` as in ``leanpass.functional.op``. Without ``jvp=``, ``fn`` is a
    forward function ``fn(*inputs) -> output`` (see the module's docstring).

    A name is an identifier that no other module has registered and that is not one of LeanPass's
    own ops; registering a name again from the same module (a reloaded module, a notebook cell run
    again) replaces the op.

    >>> import numpy as np, leanpass as lp
    >>> def softsign(x):
    ...     d = 1 + np.abs(x)
    ...     return x / d, lambda g: (g / d ** 2,)
    >>> _ = register_op("doc_softsign", softsign, jvp=TRANSPOSED)
    >>> lp.ops.doc_softsign(np.array([1.0, -3.0]))
    Tensor([ 0.5 , -0.75])
    >>> register_op("exp", softsign, jvp=TRANSPOSED)
    Traceback (most recent call last):
    ...
    ValueError: register_op: 'exp' is one of LeanPass's own ops (lp.exp): give yours a name of its own
    >>> _ = unregister_op("doc_softsign")
    """
    if not isinstance(name, str) or not name.isidentifier():
        raise ValueError(f"register_op: the name of an op is a Python identifier (it is called as lp.ops.<name>), "
                         f"not {name!r}")
    if not callable(fn):
        raise TypeError(f"register_op({name!r}, fn): fn must be a function, not {type(fn).__name__}")
    if _builtin(name):
        raise ValueError(f"register_op: {name!r} is one of LeanPass's own ops (lp.{name}): give yours a name of "
                         "its own")
    module = getattr(fn, "__module__", None) or sys._getframe(1).f_globals.get("__name__", "?")
    old = REGISTRY.get(name)
    if old is not None:
        if old.module != module:
            raise ValueError(f"register_op: op {name!r} is registered already, by {old.module}; {module} cannot "
                             f"register another op under that name (give it a name of its own, or unregister_op "
                             f"{name!r} first)")
        forget(name)
    if jvp is None:
        if vmap != BATCHED or need or keeps:
            raise TypeError(f"register_op({name!r}): vmap=, need= and keeps= describe an op given with its VJP; "
                            "give jvp= too (a forward-mode rule, or TRANSPOSED), with fn returning (output, vjp)")
        forward_only = _ForwardOnly(name, fn, module)
        _record(name, forward_only, jvp=forward_only.no_jvp, module=module)
    else:
        _record(name, fn, jvp=jvp, vmap=vmap, need=need, keeps=keeps, module=module)
    return fn


def op(name: str, *, jvp: Any = None, vmap: str = BATCHED, need: bool = False,
       keeps: tuple[str, ...] = ()) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorator form of ``register_op``: ``@op(name, jvp=...)`` above ``fn``.

    >>> import numpy as np, leanpass as lp
    >>> @op("doc_square", jvp=lambda ts, ans, x: 2 * x * ts[0])
    ... def square(x):
    ...     return x * x, lambda g: (2 * x * g,)
    >>> lp.jvp(lp.ops.doc_square, (np.array(3.0),), (np.array(1.0),))[1]
    Tensor(6.)
    >>> _ = unregister_op("doc_square")
    """
    def decorator(fn: Callable[..., Any]) -> Callable[..., Any]:
        return register_op(name, fn, jvp=jvp, vmap=vmap, need=need, keeps=keeps)

    return decorator


def unregister_op(name: str) -> Op:
    """Remove op ``name`` registered with ``register_op`` (not one of LeanPass's own); returns its record.

    >>> _ = register_op("doc_times2", lambda x: 2 * x)
    >>> unregister_op("doc_times2").name
    'doc_times2'
    """
    if _builtin(name):
        raise ValueError(f"unregister_op: {name!r} is one of LeanPass's own ops, which stay registered")
    if name not in REGISTRY:
        raise KeyError(f"unregister_op: no op {name!r} is registered")
    return forget(name)


def registered_ops() -> dict[str, Op]:
    """The records of the ops registered by plugins and by ``register_op`` (plugins loaded first).

    >>> _ = register_op("doc_half", lambda x: x / 2)
    >>> registered_ops()["doc_half"].module == __name__
    True
    >>> _ = unregister_op("doc_half")
    """
    _discover()
    return {name: rec for name, rec in REGISTRY.items() if not rec.internal and not _builtin(name)}


def get_op(name: str) -> Callable[..., Any]:
    """The op ``name`` as a function of Tensors, arrays and numbers (what ``lp.ops.<name>`` gives).

    The first call loads the plugins (entry-point group ``leanpass.ops``). Raises ``KeyError`` for a
    name no plugin and no ``register_op`` has registered.

    >>> import numpy as np
    >>> _ = register_op("doc_double", lambda x: 2 * x)
    >>> get_op("doc_double")(np.array([1.0, 2.0]))
    array([2., 4.])
    >>> _ = unregister_op("doc_double")
    """
    _discover()
    rec = REGISTRY.get(name)
    if rec is None or _builtin(name) or rec.internal:
        raise KeyError(_not_found(name))
    if type(rec.fn) is _ForwardOnly:
        return rec.fn.tensor_level
    fn = rec.fn

    def call(*args: Any, **kwargs: Any) -> Any:
        if kwargs:  # (apply takes the inputs by position)
            bound = inspect.signature(fn).bind(*args, **kwargs)
            bound.apply_defaults()
            args = bound.args
        # (a Python float as a NumPy one: the output of arithmetic on it is then an array scalar)
        return apply(fn, name, *[np.float64(a) if type(a) is float else a for a in args])

    call.__name__ = call.__qualname__ = name
    call.__doc__ = fn.__doc__
    call.__wrapped__ = fn  # type: ignore[attr-defined]
    return call


def _not_found(name: str) -> str:
    if _builtin(name):
        return (f"{name!r} is one of LeanPass's own ops: call lp.{name} (lp.ops holds the ops of plugins and of "
                "register_op)")
    known = sorted(n for n, r in REGISTRY.items() if not r.internal and not _builtin(n))
    msg = (f"op {name!r} is not registered. Did you install its plugin (a package with a {GROUP!r} entry point), "
           f"or import the module that registers it? Registered: {', '.join(known) or 'none'}.")
    for package, why in _broken.items():
        msg += f" The plugin package {package!r} failed to load: {why}."
    return msg


def load_plugins() -> None:
    """Load every package's entry points of group ``leanpass.ops`` not loaded yet (the first use of
    ``lp.ops`` or ``get_op`` does it; call it again to load a plugin installed since). A plugin
    that fails to load is named in a warning (and in the error for an op it would have given).

    >>> load_plugins()
    """
    global _discovered
    _discovered = True
    from importlib.metadata import entry_points  # (here: importlib.metadata costs import time)

    for ep in entry_points(group=GROUP):
        dist = getattr(ep, "dist", None)
        package = getattr(dist, "name", None) or ep.value.partition(":")[0].partition(".")[0]
        key = (package, ep.name, ep.value)
        if key in _loaded:
            continue
        _loaded.add(key)
        try:
            ep.load()
        except Exception as e:  # (any error of a plugin's module is the plugin's: named, never dropped)
            why = f"{type(e).__name__}: {e}"
            _broken[package] = f"entry point {ep.name} = {ep.value!r}: {why}"
            warnings.warn(f"LeanPass plugin package {package!r} failed to load (its {GROUP!r} entry point "
                          f"{ep.name} = {ep.value!r}): {why}. Its ops are not registered.", RuntimeWarning,
                          stacklevel=3)
        else:
            _broken.pop(package, None)


def _discover() -> None:
    if not _discovered:
        load_plugins()


def _value(a: Any) -> Any:
    return a._data if type(a) is Tensor else a


class _ForwardOnly:
    """The record's function of an op registered as a forward function only (LeanPass 0.1's form).

    On arrays it returns the forward's output and a VJP that explains why there is no gradient;
    ``tensor_level`` is what ``lp.ops.<name>`` calls.
    """

    __slots__ = ("name", "forward", "module", "tensor_level")

    def __init__(self, name: str, forward: Callable[..., Any], module: str) -> None:
        self.name = name
        self.forward = forward
        self.module = module
        self.tensor_level = self._tensor_level()

    def __call__(self, *raw: Any) -> tuple[Any, Callable[[Any], Any]]:
        out = self.forward(*raw)
        if type(out) is tuple and len(out) == 2 and callable(out[1]):
            raise TypeError(f"op {self.name!r} returned (output, vjp), but it was registered as a forward function "
                            f"only: register it with jvp= (a forward-mode rule, or TRANSPOSED) to give its VJP")
        return out, self._no_vjp

    def _no_vjp(self, g: Any) -> Any:
        raise self.error()

    def no_jvp(self, ts: Any, ans: Any, *inputs: Any) -> Any:
        raise self.error()

    def error(self) -> TypeError:
        return TypeError(
            f"op {self.name!r} (registered by {self.module}) cannot be differentiated: it was registered as a "
            "forward function only, and it computes on plain NumPy arrays, where LeanPass cannot follow it. "
            f"Give it its VJP: register_op({self.name!r}, fn, jvp=...) with fn(*arrays) returning (output, vjp) "
            "(jvp= a forward-mode rule, or TRANSPOSED); or write its forward with NumPy functions and operators "
            "that LeanPass dispatches on Tensors (np.exp, np.tanh, *, ...) or with LeanPass's functions. "
            "See 'Writing your own op' in LeanPass's docs."
        )

    def _tensor_level(self) -> Callable[..., Any]:
        forward, name = self.forward, self.name

        def call(*args: Any, **kwargs: Any) -> Any:
            try:
                if not any(type(a) is Tensor for a in args):
                    return forward(*args, **kwargs)  # arrays in, arrays out (as LeanPass 0.1 did)
                try:
                    out = forward(*args, **kwargs)
                except ConversionError:  # it turned a Tensor being differentiated into an array
                    out = None
                leaves = tree_flatten(out)[0] if out is not None else []
                if leaves and all(type(leaf) is Tensor for leaf in leaves):
                    return out
                if kwargs:
                    raise TypeError(f"op {name!r} computes on plain arrays, so give its inputs by position")
                return apply(self, name, *args)  # recorded, with the VJP that says how to give one
            except TypeError as e:
                if not any(getattr(type(_value(a)), "_lp_batched", False) for a in args):
                    raise
                raise TypeError(f"vmap of op {name!r}: it was registered as a forward function only, and it computes "
                                "on plain NumPy arrays, which vmap cannot batch. Give it its VJP (register_op with "
                                f"jvp=), or write it with NumPy functions and operators. ({e})") from e

        call.__name__ = call.__qualname__ = name
        call.__doc__ = forward.__doc__
        call.__wrapped__ = forward  # type: ignore[attr-defined]
        return call


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
