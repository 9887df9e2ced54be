"""The object-style step under ``jit``: parameters (leaf Tensors with ``requires_grad=True``) and
optimizer states that the function reaches outside its arguments (its closure, its globals, the
attributes of the objects there) are inputs of the program, and what the function writes into
them (``loss.backward()`` into ``.grad``, ``opt.step()`` into ``.data`` and the optimizer's
buffers) are outputs, written back after each replay.

While a trace runs, each such cell holds a stand-in; at its end each gets its real value back. An
optimizer says which of its attributes are state by a class attribute ``_lp_jit_state`` (names of
attributes holding a list of arrays, or a number). Whether a parameter's ``.grad`` is None is a
guard: a replay that finds it otherwise traces again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...core.tensor import Tensor, _const, replace_data
from .program import _GuardFailedError
from .recording import TracedArray, _Trace

_NUMBER = (int, float)


class _Cell:
    """One place the function reads and may write: a parameter's data or grad, an item of a state list,
    or a number attribute."""

    __slots__ = ("kind", "obj", "key", "var", "before")

    def __init__(self, kind: str, obj: Any, key: Any, var: TracedArray | None, before: Any) -> None:
        self.kind, self.obj, self.key, self.var, self.before = kind, obj, key, var, before

    def get(self) -> Any:
        kind, obj = self.kind, self.obj
        if kind == "data":
            return obj._data
        if kind == "grad":
            return obj._grad
        if kind == "item":
            return obj[self.key]
        return getattr(obj, self.key)

    def set(self, value: Any) -> None:
        kind, obj = self.kind, self.obj
        if kind == "data":
            replace_data(obj, value)
        elif kind == "grad":
            object.__setattr__(obj, "_grad", value)
        elif kind == "item":
            obj[self.key] = value
        else:
            setattr(obj, self.key, value)

    def put(self, value: Any) -> None:
        """Set the stand-in or the real value while tracing (no version counted, no hook)."""
        if self.kind == "data":
            object.__setattr__(self.obj, "_data", value)
        else:
            self.set(value)


def _written(c: _Cell, value: Any) -> Any:
    """What a step's write of ``value`` into cell ``c`` stores: a read-only array, a constant Tensor for a
    ``.grad``, a number of the type the attribute held."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    if c.kind == "grad":
        return _const(value)
    if c.kind == "attr" and type(c.before) in _NUMBER:
        return type(c.before)(value)
    return value


class Cells:
    """The cells of one trace: stand-ins in at the start, outputs and real values out at the end."""

    def __init__(self, tr: _Trace, slots: list[Tensor], holders: list[Any]) -> None:
        self.cells: list[_Cell] = []
        self.tracked: set[int] = set()
        for t in slots:
            if id(t) in self.tracked or type(t._data) is not np.ndarray:
                continue
            self.tracked.add(id(t))
            self._add(tr, "data", t, None, t._data)
            g = t._grad
            self._add(tr, "grad", t, None, g)
        for h in holders:
            for name in type(h)._lp_jit_state:
                value = getattr(h, name, None)
                if type(value) is list:
                    for i, a in enumerate(value):
                        if type(a) is np.ndarray:
                            self._add(tr, "item", value, i, a)
                elif type(value) in _NUMBER:
                    self._add(tr, "attr", h, name, value)

    def _add(self, tr: _Trace, kind: str, obj: Any, key: Any, value: Any) -> None:
        if kind == "grad":
            var = None if value is None or type(value._data) is not np.ndarray else tr.new_var(value._data)
            cell = _Cell(kind, obj, key, var, value)
            if var is not None:
                cell.put(_const(var))
        else:
            var = tr.new_var(value)
            cell = _Cell(kind, obj, key, var, value)
            cell.put(var)
        self.cells.append(cell)

    @property
    def inputs(self) -> list[int]:
        """The var ids of the program's extra parameters, in order."""
        return [c.var._id for c in self.cells if c.var is not None]

    def restore(self) -> None:
        """After a trace that raised: every cell back to its value before."""
        for c in self.cells:
            c.put(c.before)

    def finish(self, tr: _Trace) -> tuple[list[Any], Callable[..., Any]]:
        """After the trace: the extra outputs (stand-ins), and ``wrap(run, n_user) -> run`` that feeds the
        cells to a program and writes its extra outputs back. Each cell gets its real value now."""
        outs: list[TracedArray] = []
        writes: list[tuple[_Cell, Any]] = []  # (cell, index into outs, or ("const", value))
        for c in self.cells:
            now = c.get()
            raw = now._data if c.kind == "grad" and type(now) is Tensor else now
            if c.var is not None and raw is c.var:
                c.put(c.before)  # unchanged
                continue
            if type(raw) is TracedArray and raw._tr is tr:
                writes.append((c, len(outs)))
                outs.append(raw)
                c.put(_written(c, tr.values[raw._id]))
            else:  # a constant written (zeros, None): the same at every replay
                writes.append((c, ("const", now)))
        getters = [c.get for c in self.cells if c.var is not None]
        grads = [c for c in self.cells if c.kind == "grad"]
        numbers = [(c, type(c.before)) for c in self.cells if c.kind == "attr"]

        def wrap(run: Callable[..., Any], n_user: int) -> Callable[..., Any]:
            def replay(*raw: Any) -> Any:
                for c in grads:  # whether .grad is None is part of the program
                    if (c.obj._grad is None) != (c.var is None):
                        raise _GuardFailedError
                for c, kind in numbers:
                    if type(c.get()) is not kind:
                        raise _GuardFailedError
                extra = [g() for g in getters]
                extra = [x._data if type(x) is Tensor else x for x in extra]
                out = run(*raw, *extra)
                for c, where in writes:
                    if type(where) is tuple:
                        c.set(where[1])
                        continue
                    c.set(_written(c, out[n_user + where]))
                return out[:n_user]

            return replay

        return outs, wrap
