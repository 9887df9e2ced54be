"""``jit`` and the jitted function: the cache of programs per signature, tracing on a miss (with
the checks on donated, aliased and tied arguments and on random generators the function reaches
from outside), replaying on a hit, and the warnings when a function traces too often.
"""

from __future__ import annotations

import functools
import inspect
import pickle
import threading
import types
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core import tensor as _tensor_module
from ...core import tree as _tree
from ...core.engine import _depth
from ...core.tensor import Tensor, _const, _next_seq, is_parameter
from .cells import Cells
from .program import (
    _aliases,
    _finish,
    _GuardFailedError,
    _output_builder,
    _Program,
    _same,
    _same_array,
    _writable,
)
from .recording import _NUMBERS, TracedArray, _copy, _Trace, _TracedGenerator
from .signature import _checker, _difference, _leaf_key, _leaf_names, _tie, _UnderVmapError

__all__ = ["jit", "Jitted"]

_MAX_TRACES = 8  # per signature: beyond this, value-dependent control flow changes too often
_MAX_PROGRAMS = 4  # programs kept per signature (one per outcome of its guards), newest first
_CACHE_SIZE = 64  # signatures a jitted function keeps programs for, by default (the least recently used goes)
_RETRACE_WARNING = 8  # traces for new signatures after which jit warns, once per function


# ----- the jitted function ---------------------------------------------------------------------
_local = threading.local()


def _closure_generators(f: Any, depth: int = 0) -> list[str]:
    """Names of np.random.Generator objects that ``f`` reads from its closure, globals or defaults."""
    found: list[str] = []
    if depth > 2:
        return found
    if isinstance(f, functools.partial):
        for v in (*f.args, *(f.keywords or {}).values()):
            if isinstance(v, np.random.Generator):
                found.append("a functools.partial argument")
        return found + _closure_generators(f.func, depth + 1)
    if isinstance(f, types.MethodType):
        f = f.__func__
    code = getattr(f, "__code__", None)
    if code is None:
        return found
    candidates: list[tuple[str, Any]] = []
    for name, cell in zip(code.co_freevars, f.__closure__ or ()):
        try:
            candidates.append((name, cell.cell_contents))
        except ValueError:
            pass
    g = getattr(f, "__globals__", {})
    for name in code.co_names:
        if name in g:
            candidates.append((name, g[name]))
    for v in (f.__defaults__ or ()):
        candidates.append(("a default argument", v))
    for name, v in candidates:
        if isinstance(v, np.random.Generator):
            found.append(name)
        elif isinstance(v, types.FunctionType) and v is not f and v.__module__ == getattr(f, "__module__", None):
            found += _closure_generators(v, depth + 1)
    return found


_WALK = 2000  # objects visited at most, looking for generators the function can reach


def _held_generators(f: Any, statics: list[tuple[int, Any]], leaves: list[Any],
                     slots: list[Any] | None = None) -> list[tuple[str, Any, bytes]]:
    """``(name, generator, state)`` of each NumPy generator ``f`` can reach that is not an argument.
    Given ``slots``, the parameters (leaf Tensors requiring grad) and optimizers (objects with
    ``_lp_jit_state``) found on the way are appended to it.

    The walk follows a bound method's object, a callable object's attributes, closures, the globals
    a function names, defaults, ``functools.partial`` arguments, static arguments, containers and
    the attributes of the objects found there (a few levels deep). A generator whose state changes
    while ``f`` is traced drew numbers that the program would replay.
    """
    todo: list[tuple[str, Any, int]] = [(f"static argument {i}", a, 1) for i, a in statics]
    if isinstance(f, types.MethodType):
        todo += [("", f.__func__, 0), ("self", f.__self__, 1)]
    elif isinstance(f, (types.FunctionType, functools.partial, Jitted)):
        todo.append(("", f, 0))
    else:
        todo.append(("self", f, 1))  # a callable object (a module): its attributes
    arguments = {id(x.bit_generator) for x in leaves if isinstance(x, np.random.Generator)}
    found: list[tuple[str, Any, bytes]] = []
    seen: set[int] = set()
    while todo and len(seen) < _WALK:
        name, x, depth = todo.pop()
        if id(x) in seen:
            continue
        seen.add(id(x))
        if slots is not None and (is_parameter(x) or hasattr(type(x), "_lp_jit_state")):
            slots.append(x)
        if isinstance(x, (np.random.Generator, np.random.RandomState)):
            if id(getattr(x, "bit_generator", getattr(x, "_bit_generator", None))) not in arguments:
                found.append((name, x, _rng_state(x)))
            continue
        if depth > 4 or isinstance(x, _OPAQUE):
            continue
        try:
            children = _children(x)
        except Exception:  # noqa: BLE001 - (an object whose attributes cannot be read: not followed)
            continue
        for sub, child in children:
            todo.append((sub if not name or sub[:1] not in ".[" else name + sub, child, depth + 1))
    glob = np.random.get_bit_generator()  # type: ignore[attr-defined, unused-ignore]
    if id(glob) not in arguments:  # NumPy's global generator (what np.random.seed sets) is never an argument
        found.append(("NumPy's global generator (np.random, or nn's layers and Dropout(training=True) without rng=)",
                      np.random.Generator(glob), _rng_state(np.random.Generator(glob))))
    return found


_OPAQUE = (str, bytes, int, float, bool, complex, type(None), np.ndarray, np.generic, np.dtype, Tensor, TracedArray,
           types.ModuleType, type, types.BuiltinFunctionType, types.CodeType, _tree.TreeDef)


def _children(x: Any) -> list[tuple[str, Any]]:
    """What ``x`` holds, named as seen from its holder (``.w``, ``[0]``) or as a variable of a function."""
    if isinstance(x, types.FunctionType):
        if (x.__module__ or "").split(".")[0] in ("numpy", "leanpass"):
            return []
        code = x.__code__
        out: list[tuple[str, Any]] = []
        for name, cell in zip(code.co_freevars, x.__closure__ or ()):
            try:
                out.append((name, cell.cell_contents))
            except ValueError:  # (an empty cell)
                pass
        codes = [code]
        for c in codes:
            codes += [k for k in c.co_consts if isinstance(k, types.CodeType)]  # nested functions' names too
            out += [(n, x.__globals__[n]) for n in c.co_names if n in x.__globals__]
        return out + [("a default argument", v) for v in (x.__defaults__ or ())]
    if isinstance(x, types.MethodType):
        return [(".__self__", x.__self__), ("", x.__func__)]
    if isinstance(x, functools.partial):
        return [("", x.func)] + [("a functools.partial argument", v) for v in (*x.args, *x.keywords.values())]
    if isinstance(x, Jitted):
        return [("", x.f)]
    if type(x) is dict:
        return [(f"[{k!r}]", v) for k, v in list(x.items())[:_WALK]]
    if isinstance(x, (list, tuple, set, frozenset)):
        return [(f"[{i}]", v) for i, v in enumerate(list(x)[:_WALK])]
    attrs = getattr(x, "__dict__", None)
    out = [(f".{k}", v) for k, v in attrs.items()] if type(attrs) is dict else []
    for cls in type(x).__mro__:
        for slot in getattr(cls, "__slots__", ()):
            if isinstance(slot, str) and hasattr(x, slot):
                out.append((f".{slot}", getattr(x, slot)))
    return out


def _rng_state(g: Any) -> bytes:
    state = g.bit_generator.state if isinstance(g, np.random.Generator) else g.get_state(legacy=False)
    return pickle.dumps(state)


class Jitted:
    """A function compiled by ``jit``: call it like the function. ``trace_count`` counts its traces."""

    def __init__(self, f: Callable[..., Any], static_argnums: tuple[int, ...], donate_argnums: tuple[int, ...],
                 strict: bool, cache_size: int = _CACHE_SIZE) -> None:
        functools.update_wrapper(self, f, updated=())  # (name, doc; none of f's own attributes)
        self.f = f
        self.static_argnums = static_argnums
        self.donate_argnums = donate_argnums
        self.strict = strict
        self.cache_size = cache_size
        self.where = f"jit({getattr(f, '__name__', type(f).__name__)})"
        # signature -> [programs (newest first), trace count, checker, when it was last used,
        #               whether two Tensor arguments are alike (then they may be one: see __call__)]
        self._cache: dict[Any, list[Any]] = {}
        self._lock = threading.Lock()
        self.trace_count = 0
        self._signatures = 0  # traces for a signature not in the cache
        self._uses = 0  # calls that found their signature in the cache, or traced it
        # positional arguments a call must have for static_argnums and donate_argnums
        self._nargs = max([i + 1 if i >= 0 else -i for i in static_argnums + donate_argnums], default=0)
        self._eager: set[Any] = set()
        self._fast: Any = None  # (checker, program) of the last signature replayed
        names = _closure_generators(f)
        if names:
            raise TypeError(
                f"{self.where}: the function uses a np.random.Generator from outside "
                f"({', '.join(sorted(set(names)))}). "
                "Under jit its numbers would be drawn once, when the function is traced, and the same numbers "
                "replayed at every call. Pass the generator as an argument instead: each call then draws new "
                "numbers, the ones the function would draw without jit"
            )

    def __repr__(self) -> str:
        return f"<jitted {getattr(self.f, '__qualname__', self.f)!r}>"

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        fast = self._fast
        if fast is not None and not _depth.get() and not _tensor_module._debug_nans:  # the last signature's check
            raw = fast[0](args, kwargs)
            if raw is not None:
                prog = fast[1]
                states = [raw[i].bit_generator.state for i in prog.rng_inputs] if prog.save_rng else None
                try:
                    return prog.build(prog.run(*raw))
                except Exception:  # noqa: BLE001 - a failed guard or an error: the general path below
                    if states:
                        for i, st in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = st
        if _depth.get() or getattr(_local, "trace", None) is not None or _tensor_module._debug_nans:
            # inside grad/vjp (its ops join that graph), another jit's trace, or debug_nans (it checks each op)
            return self.f(*args, **kwargs)
        if len(args) < self._nargs:
            for name, nums in (("static_argnums", self.static_argnums), ("donate_argnums", self.donate_argnums)):
                for i in nums:
                    if not -len(args) <= i < len(args):
                        raise ValueError(
                            f"{self.where}: {name}={nums!r}, but the function was called with {len(args)} "
                            f"positional argument{'s' if len(args) != 1 else ''}: pass argument {i} by position"
                        )
        statics: list[tuple[int, Any]] = []
        dynamic: list[Any] = []
        for i, a in enumerate(args):
            if i in self.static_argnums or (i - len(args)) in self.static_argnums:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError(
                        f"{self.where}: static argument {i} must be hashable, got {type(a).__name__}"
                    ) from None
                if getattr(a, "_lp_batched", False):
                    return self.f(*args, **kwargs)  # under vmap: f itself, batched by vmap
                statics.append((i, a))
                dynamic.append(None)
            else:
                dynamic.append(a)
        leaves, spec = _tree.tree_flatten((tuple(dynamic), kwargs))
        try:
            leaf_keys = [_leaf_key(x, self.where) for x in leaves]
        except _UnderVmapError:
            return self.f(*args, **kwargs)  # batched arguments: f itself, batched by vmap
        key = (spec, tuple(statics), tuple(leaf_keys))
        entry = self._cache.get(key)
        # A Tensor at several places (tied weights) has a signature of its own. Only Tensors alike (the
        # same shape, dtype, ...) can be one object: a signature without them needs no look.
        if (entry is None or entry[4]) and _tree.repeats(leaves) and _tie(leaves, leaf_keys):
            key = (spec, key[1], tuple(leaf_keys))
            entry = self._cache.get(key)
        if key in self._eager:
            return self.f(*args, **kwargs)
        if entry is not None:
            self._uses += 1
            entry[3] = self._uses
            raw = [x._data if type(x) is Tensor else x for x in leaves]
            for prog in entry[0]:
                states = [raw[i].bit_generator.state for i in prog.rng_inputs] if prog.save_rng else None
                try:
                    outs = prog.run(*raw)
                except _GuardFailedError:
                    if states:
                        for i, s in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = s
                    continue
                except Exception:  # noqa: BLE001 - traced again below, which raises it as f does
                    if states:
                        for i, s in zip(prog.rng_inputs, states):
                            raw[i].bit_generator.state = s
                    break
                self._fast = (entry[2], prog) if entry[2] is not None else None
                return prog.build(outs)
        return self._trace(args, kwargs, statics, leaves, key)

    def _trace(self, args: tuple[Any, ...], kwargs: dict[str, Any], statics: list[tuple[int, Any]], leaves: list[Any],
               key: Any) -> Any:
        entry = self._cache.get(key)
        if entry is not None and entry[1] >= _MAX_TRACES:
            warnings.warn(
                f"{self.where}: Python control flow on traced values changed at {_MAX_TRACES} calls with this "
                "argument signature; it now runs without jit for these arguments. Use NumPy operations "
                "(np.where) for value-dependent choices, or strict=True to find where they are",
                RuntimeWarning, stacklevel=3)
            self._eager.add(key)
            return self.f(*args, **kwargs)
        donate: set[int] = set()
        if self.donate_argnums:
            counts = []
            for i, a in enumerate(args):
                counts.append(0 if i in dict(statics) else len(_tree.tree_flatten(a)[0]))
            start = 0
            for i, c in enumerate(counts):
                if i in self.donate_argnums or (i - len(args)) in self.donate_argnums:
                    donate.update(range(start, start + c))
                start += c
        # a Tensor at several leaves (tied weights): one input, at its first place
        tied = {k: lk[1] for k, lk in enumerate(key[2]) if type(lk) is tuple and lk[0] == "tied"}
        for k, j in tied.items():
            if (k in donate) != (j in donate):
                names = _leaf_names(args, kwargs, statics)
                raise ValueError(
                    f"{self.where}: {names[j]} and {names[k]} are one Tensor (tied weights), and donate_argnums "
                    "donates only one of them: a donated array is overwritten by the call, so no other argument "
                    "may use it. Donate every argument that holds the Tensor, or none of them"
                )
        # arguments that share memory (one array in two leaves, or views of one array)
        arrays = [k for k, x in enumerate(leaves)
                  if type(x._data if type(x) is Tensor else x) is np.ndarray and k not in tied]
        aliasing = _aliases(*[leaves[k]._data if type(leaves[k]) is Tensor else leaves[k] for k in arrays])
        for i, j in aliasing or ():
            if arrays[i] in donate or arrays[j] in donate:
                names = _leaf_names(args, kwargs, statics)
                raise ValueError(
                    f"{self.where}: {names[arrays[i]]} and {names[arrays[j]]} share memory (one array in two "
                    "places, or views of one array), and donate_argnums donates one of them: a donated array "
                    "is overwritten by the call, so no other argument may use it. Pass a copy (np.copy) to one "
                    "of them, or leave that argument out of donate_argnums"
                )
        tr = _Trace(self.strict, self.where)
        tr.start = _next_seq()  # (a parameter made after this is the function's own: see _slot_write)
        # stand-ins for every array, Tensor array, number and generator of the arguments
        new_leaves: list[Any] = []
        input_vars: list[int | None] = []
        rng_inputs = []
        input_storage: set[int] = set()
        tr._inputs_storage = input_storage
        for k, x in enumerate(leaves):
            t = type(x)
            if k in tied:  # the stand-in of its first place: f sees the tie, as without jit
                new_leaves.append(new_leaves[tied[k]])
                input_vars.append(None)
            elif t is Tensor:
                d = x._data
                var = tr.new_var(d)
                nt = _const(var, x._marks, _next_seq())
                if x._marks == 1:
                    tr.origins[id(nt)] = x
                new_leaves.append(nt)
                input_vars.append(var._id)
            elif t is np.ndarray or t in _NUMBERS or isinstance(x, np.generic):
                var = tr.new_var(x)
                new_leaves.append(var)
                input_vars.append(var._id)
            elif isinstance(x, np.random.Generator):
                vid = len(tr.values)
                tr.values.append(x)
                tr.storage.append(vid)
                new_leaves.append(_TracedGenerator(x, tr, vid))
                input_vars.append(vid)
                rng_inputs.append(k)
            else:
                new_leaves.append(x)
                input_vars.append(None)
        for i, j in aliasing or ():  # the program's analysis sees them as one buffer
            tr.storage[input_vars[arrays[j]]] = tr.storage[input_vars[arrays[i]]]
        for v in input_vars:
            if v is not None:
                input_storage.add(tr.storage[v])
        # (frozen modules by tree_unflatten: they remember their flatten, as the caller's did)
        dynamic_args, new_kwargs = _tree._builder(key[0], remember=True)[1](new_leaves)
        new_args = list(dynamic_args)
        for i, a in statics:
            new_args[i] = a
        reached: list[Any] = []
        held = _held_generators(self.f, statics, leaves, reached)
        # parameters and optimizer states reached from outside the arguments: inputs, and what f writes
        # into them outputs written back (the object-style step: loss.backward(); opt.step())
        cells = tr.cells = Cells(tr, [x for x in reached if type(x) is Tensor],
                                 [x for x in reached if type(x) is not Tensor])
        _tensor_module.set_slot_hook(_slot_write)
        previous = getattr(_local, "trace", None)
        _local.trace = tr
        done = False
        try:
            out = self.f(*new_args, **new_kwargs)
            out_leaves, out_spec = _tree.tree_flatten(out)
            epoch = _tree._epoch  # (the registry the walk saw: its modules' flatten may register their class)
            kinds, returned = self._outputs(tr, out_leaves)
            done = True
        except _UnderVmapError:  # it returned values batched by an enclosing vmap (from its closure)
            kinds = None
        finally:
            _local.trace = previous
            tr.active = False
            if not done:
                cells.restore()
        for name, gen, state in held:
            if _rng_state(gen) != state:
                raise TypeError(
                    f"{self.where}: the function drew random numbers from {name}, which is not an argument of the "
                    "jitted function. Under jit those numbers would be drawn once, when the function is traced, "
                    "and the same numbers replayed at every call. Pass a np.random.Generator as an argument "
                    "instead (for example step(model, x, rng) calling model(x, rng=rng)): each call then draws "
                    "new numbers, the ones the function draws without jit"
                )
        if kinds is None:
            self._eager.add(key)
            return self.f(*args, **kwargs)
        extra, wrap = cells.finish(tr)
        source, kept = _finish(tr, returned + extra, donate, [*input_vars, *cells.inputs], aliasing)
        namespace = dict(tr.names)
        namespace["_GF"] = _GuardFailedError
        namespace["_same"] = _same
        namespace["_same_array"] = _same_array
        namespace["_writable"] = _writable
        namespace["_aliases"] = _aliases
        namespace["_errstate"] = np.errstate
        exec(compile(source, f"<{self.where}>", "exec"), namespace)  # noqa: S102 - our own program
        guards = any(ins.kind == "guard" or ins.check for ins in kept)
        run = wrap(namespace["_replay"], len(returned)) if cells.cells else namespace["_replay"]
        prog = _Program(run, _output_builder(kinds, out_spec, epoch), source, len(kept), rng_inputs,
                        guards or bool(cells.cells))
        cause = None
        with self._lock:
            self.trace_count += 1
            self._uses += 1
            entry = self._cache.get(key)
            if entry is None:  # a new signature
                self._signatures += 1
                if self._signatures == _RETRACE_WARNING:
                    last = max(self._cache.items(), key=lambda item: item[1][3], default=(None,))[0]
                    cause = _difference(last, key, args, kwargs, statics)
                while len(self._cache) >= self.cache_size:  # the least recently used signature goes
                    old = min(self._cache.items(), key=lambda item: item[1][3])[0]
                    del self._cache[old]
                    self._eager.discard(old)
                alike = [k for k in key[2] if type(k) is tuple and k[0] is Tensor]
                entry = self._cache[key] = [[], 0, _checker(key, len(args)), 0, len(set(alike)) < len(alike)]
            entry[3] = self._uses
            entry[0].insert(0, prog)
            del entry[0][_MAX_PROGRAMS:]
            entry[1] += 1
            self._fast = (entry[2], prog) if entry[2] is not None else None
        if cause is not None:
            warnings.warn(
                f"{self.where} has traced for {_RETRACE_WARNING} different argument signatures ({cause}). Each new "
                "shape, dtype, structure or static argument value traces the function again, which costs far more "
                "than a replay. Keep shapes fixed (pad or bucket the batches), and pass changing values as array "
                "or number arguments rather than static_argnums",
                RuntimeWarning, stacklevel=3)
        values = [tr.values[leaf._id] if type(leaf) is TracedArray else None for leaf in returned]
        return prog.build(values)

    def _outputs(self, tr: _Trace, out_leaves: list[Any]) -> tuple[list[Any], list[Any]]:
        """How to rebuild each output leaf, and the value the program returns for it."""
        kinds: list[Any] = []
        returned: list[Any] = []
        first: dict[int, int] = {}  # a Tensor returned at several places (tied weights): id -> first place
        for leaf in out_leaves:
            t = type(leaf)
            if getattr(leaf._data if t is Tensor else leaf, "_lp_batched", False):
                raise _UnderVmapError
            if t is Tensor:
                j = first.setdefault(id(leaf), len(kinds))
                if j < len(kinds):  # one object again, as without jit
                    kinds.append(("same", j))
                    returned.append(None)
                    continue
                d = leaf._data
                if leaf._op != "leaf" and leaf._marks == 1 and tr.stepped:
                    leaf = _const(leaf._data)  # an object-style step's loss: its value (its graph was used inside)
                elif leaf._op != "leaf" and leaf._marks:
                    raise TypeError(
                        f"{self.where}: the function returned a Tensor that is part of a graph being "
                        "differentiated (requires_grad); jit cannot hand back a graph. Compute gradients "
                        "inside the function (lp.grad / lp.value_and_grad) and return them, or return "
                        "t.detach()"
                    )
                if type(d) is TracedArray:
                    ro = type(d._v) is np.ndarray and not d._v.flags.writeable
                    kinds.append(("tensor", leaf._marks, ro))
                    returned.append(d)
                else:
                    kinds.append(("const", leaf))
                    returned.append(None)
            elif t is TracedArray:
                v = leaf._v
                kinds.append(("array", type(v) is np.ndarray and not v.flags.writeable))
                returned.append(leaf)
            elif isinstance(leaf, _TracedGenerator):
                raise TypeError(f"{self.where}: returning a generator argument from a jitted function is not supported")
            else:
                if isinstance(leaf, np.ndarray) and leaf.flags.writeable:
                    kinds.append(("copy", _copy(leaf)))
                else:
                    kinds.append(("const", leaf))
                returned.append(None)
        return kinds, returned


def _slot_write(t: Tensor, what: str, value: Any) -> None:
    """The hook that sees a parameter's ``.data`` or ``.grad`` replaced (``what``). While this thread traces,
    the parameter must be one of the trace's cells, or the function's own: an argument's stand-in, or a
    parameter made inside the function. Otherwise its values would be constants of the program, or a
    step would reach the caller's parameter and the function's stand-in for it, each half the story."""
    tr = getattr(_local, "trace", None)
    if tr is None or not tr.active:
        return
    tr.stepped = True
    tracked = tr.cells.tracked
    if id(t) in tracked:
        return
    origin = tr.origins.get(id(t))
    if origin is None and t._seq > tr.start or origin is not None and id(origin) not in tracked:
        return
    if origin is not None:
        whose = (f"a parameter of shape {t.shape} passed as an argument, which an object the function closes "
                 "over (an optimizer) also holds: inside the function the argument is a new Tensor, so a step "
                 "would miss one or the other")
    else:
        whose = (f"a parameter of shape {t.shape} that jit did not find outside the function's arguments (its "
                 "values would be constants of the program)")
    raise TypeError(
        f"{tr.where}: the function gives a new .{what} to {whose}. An object-style step (loss.backward(); "
        "opt.step()) under jit reads the model and the optimizer from the function's closure or globals (or the "
        "attributes of an object it is a method of): pass only the data as arguments, e.g. step(x, y). Or write "
        "the step functionally (lp.value_and_grad, opt.update, optim.apply_updates), see docs/jit.md"
    )


def jit(f: Callable[..., Any] | None = None, *, static_argnums: int | tuple[int, ...] = (),
        donate_argnums: int | tuple[int, ...] = (), strict: bool = False, cache_size: int = _CACHE_SIZE) -> Any:
    """Compile ``f``: trace it once per argument signature, then replay the recorded NumPy calls.

    The signature is the arguments' pytree structure, each array's (and Tensor's) shape and
    dtype, the type of each Python number, and the values of the ``static_argnums`` arguments;
    a new signature traces again. Results equal ``f``'s bit for bit. Python control flow on a
    traced value (``if loss > 1``, ``float(x)``) is re-checked at every call and traced again
    when it changes; ``strict=True`` raises instead. ``donate_argnums`` names arguments whose
    arrays the caller gives up: the new values are written into them. Python side effects
    (``print``, appending to a list) happen only while tracing. Programs are kept for the
    ``cache_size`` most recently used signatures.

    >>> import numpy as np
    >>> import leanpass as lp
    >>> @lp.jit
    ... def step(w, x):
    ...     return w - 0.1 * lp.grad(lambda w: ((x @ w) ** 2).sum())(w)
    >>> w = np.array([1.0, -1.0])
    >>> x = np.array([[1.0, 2.0]])
    >>> step(w, x)
    array([ 1.2, -0.6])
    >>> step(w, x).tolist() == (w - 0.1 * lp.grad(lambda w: ((x @ w) ** 2).sum())(w)).tolist()
    True
    """
    if f is None:
        return functools.partial(jit, static_argnums=static_argnums, donate_argnums=donate_argnums, strict=strict,
                                 cache_size=cache_size)
    if not callable(f):
        raise TypeError(f"jit: expected a function, got {type(f).__name__}")
    statics = (static_argnums,) if isinstance(static_argnums, int) else tuple(static_argnums)
    donates = (donate_argnums,) if isinstance(donate_argnums, int) else tuple(donate_argnums)
    for name, nums in (("static_argnums", statics), ("donate_argnums", donates)):
        if not all(isinstance(n, int) for n in nums):
            raise TypeError(f"jit: {name} must be an int or a tuple of ints, got {nums!r}")
    if set(statics) & set(donates):
        raise ValueError("jit: an argument cannot be both static and donated")
    if type(cache_size) is not int or cache_size < 1:
        raise ValueError(f"jit: cache_size must be an int >= 1, got {cache_size!r}")
    try:
        params = list(inspect.signature(f).parameters.values())
    except (TypeError, ValueError):  # (no signature to check against: checked at each call)
        params = []
    if params and all(p.kind is not p.VAR_POSITIONAL for p in params):
        n = sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params)
        for name, nums in (("static_argnums", statics), ("donate_argnums", donates)):
            for i in nums:
                if not -n <= i < n:
                    raise ValueError(
                        f"jit: {name}={nums!r} names argument {i}, but "
                        f"{getattr(f, '__name__', type(f).__name__)} takes {n} positional argument{'s' * (n != 1)}"
                    )
    return Jitted(f, statics, donates, strict, cache_size)

