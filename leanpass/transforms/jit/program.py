"""From a recording to a replayable program: dead calls dropped, elementwise results written into
inputs that die there, Python floats made 0-d arrays once, the source written out (with the
checks that donated and written arguments alias as when traced), and the builder that turns the
program's outputs into the function's output.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from typing import Any

import numpy as np

from ...core import tree as _tree
from ...core.tensor import _ABSENT, Tensor, _Building, _next_seq
from .recording import TracedArray, _copy, _Instr, _Trace


class _GuardFailedError(Exception):
    """A guard of a replayed program did not hold: the function must be traced again."""



# ----- the compiled program --------------------------------------------------------------------
class _Program:
    """A replayable program for one signature, and how to rebuild the function's output."""

    __slots__ = ("run", "build", "source", "n_calls", "rng_inputs", "guards", "save_rng")

    def __init__(self, run: Callable[..., Any], build: Callable[[Any], Any], source: str, n_calls: int,
                 rng_inputs: list[int], guards: bool) -> None:
        self.run = run
        self.build = build
        self.source = source
        self.n_calls = n_calls
        self.rng_inputs = rng_inputs
        self.guards = guards
        self.save_rng = bool(rng_inputs) and guards  # draws made before a failing guard are undone


def _finish(tr: _Trace, out_leaves: list[Any], donate: set[int], input_vars: list[int | None],
            aliasing: Any = None) -> tuple[str, list[Any]]:
    """Optimise the recorded program and write its source; ``out_leaves`` become return expressions.

    A program that writes into its arguments (donated ones, or ``f``'s own in-place writes) first
    checks that they share memory as they did while tracing (``aliasing``, from ``_aliases``)."""
    out_srcs: list[str | None] = []
    out_vars: list[int] = []
    for leaf in out_leaves:
        if type(leaf) is TracedArray:
            if leaf._tr is not tr:
                tr._foreign(leaf)
            out_vars.append(leaf._id)
            out_srcs.append(f"v{leaf._id}")
        else:
            out_srcs.append(None)
    instrs = tr.instrs
    n = len(tr.values)
    storage = tr.storage
    input_set = {v for v in input_vars if v is not None}
    input_storage = {storage[v] for v in input_set}
    out_storage = {storage[v] for v in out_vars}
    # 1. dead code: walk backwards, keeping what an output, a guard or a kept write needs.
    live_vars = set(out_vars)
    live_storage = set(out_storage) | input_storage
    kept: list[_Instr] = []
    for ins in reversed(instrs):
        outs = ins.outs
        ids = () if outs is None else (outs if type(outs) is tuple else (outs,))
        needed = (ins.effect or ins.kind == "guard" or any(i in live_vars for i in ids)
                  or bool(ins.writes & live_storage))
        if not needed:
            continue
        kept.append(ins)
        for r in ins.reads:
            live_vars.add(r)
            live_storage.add(storage[r])
    kept.reverse()
    # 2. an elementwise result written into an input that dies at this call: an intermediate (or a
    #    donated argument, once every guard has held) that is a whole buffer of the result's shape
    #    and dtype, and that nothing (no view of it either) reads afterwards.
    last_read: dict[int, int] = {}  # storage -> index of the last instruction reading it
    for i, ins in enumerate(kept):
        for r in ins.reads:
            last_read[storage[r]] = i
    for v in out_vars:
        last_read[storage[v]] = len(kept)
    members: dict[int, list[int]] = {}
    for v in range(n):
        members.setdefault(storage[v], []).append(v)
    owner = {v: v for v in range(n) if storage[v] == v}  # storage -> the var that is all of it
    donated = {storage[v] for k, v in enumerate(input_vars) if v is not None and k in donate}
    last_guard = max((i for i, ins in enumerate(kept) if ins.kind == "guard" or ins.check), default=-1)
    writable_inputs = []
    for i, ins in enumerate(kept):
        u = ins.ufunc
        if u is None or ins.kwargs or type(ins.outs) is not int or u.nout != 1:
            continue
        w = ins.outs
        res = tr.values[w]
        if type(res) is not np.ndarray or not res.flags.c_contiguous or storage[w] != w:
            continue
        if res.size > _IN_PLACE_UP_TO.get(u, res.size):
            continue
        for r in ins.reads:
            sr = storage[r]
            v = tr.values[r]
            if owner.get(sr) != r or last_read.get(sr) != i or type(v) is not np.ndarray:
                continue
            if v.shape != res.shape or v.dtype != res.dtype or not v.flags.c_contiguous:
                continue
            if sr in input_storage:
                if sr not in donated or i <= last_guard:
                    continue
                writable_inputs.append(sr)
            elif not v.flags.writeable:
                continue
            ins.kwargs = {"out": f"v{r}"}
            for x in members.pop(w, [w]):  # the result (and any view of it) now lives in r's memory
                storage[x] = sr
                members[sr].append(x)
            last_read[sr] = last_read.get(w, i)
            owner[sr] = w
            break
    # 4. Python floats beside a float array: a 0-d array of its dtype, made once.
    zero_d: dict[tuple[str, Any], str] = {}
    for ins in kept:
        if ins.ufunc is None or len(ins.args) != 2:
            continue
        for pos in (0, 1):
            src = ins.args[pos]
            other = ins.args[1 - pos]
            if not other.startswith("v"):
                continue
            try:
                c = float(src)
            except ValueError:
                continue
            if "." not in src and "e" not in src:
                continue
            ov = tr.values[int(other[1:])]
            if type(ov) is np.ndarray and ov.dtype.kind == "f" and ov.ndim:
                name = zero_d.get((src, ov.dtype))
                if name is None:
                    arr = np.array(c, ov.dtype)
                    arr.flags.writeable = False
                    name = zero_d[src, ov.dtype] = f"k{len(tr.names)}"
                    tr.names[name] = arr
                ins.args = list(ins.args)
                ins.args[pos] = name
    # 5. the source. A variable's name is given to a new one as soon as it is dead, so that each
    #    array is freed when its last reader is done (NumPy's allocator hands it back warm), and
    #    the function has a few dozen locals rather than one per call.
    last_use: dict[int, int] = {}
    for i, ins in enumerate(kept):
        for r in ins.reads:
            last_use[r] = i
    for v in out_vars:
        last_use[v] = len(kept)
    free: list[str] = []
    names: dict[int, str] = {}
    count = 0

    def fresh() -> str:
        nonlocal count
        if free:
            return free.pop()
        count += 1
        return f"r{count}"

    param_names = []
    for k, iv in enumerate(input_vars):
        if iv is None:
            param_names.append(f"_{k}")
        else:
            names[iv] = fresh()
            param_names.append(names[iv])
    lines = []
    arrays = [v for v in input_vars if v is not None and type(tr.values[v]) is np.ndarray]
    written = {s for ins in kept for s in ins.writes} & input_storage
    changing = [v for k, v in enumerate(input_vars) if v in arrays and (k in donate or storage[v] in written)]
    if changing and len(arrays) > 1:  # arrays it writes into (or may, donated) must alias as when traced
        test = f"_aliases({', '.join(names[v] for v in arrays)}) != {aliasing!r}"
        if aliasing is None:  # first a quick test, true whenever they could share memory
            quick = [f"{names[v]}.base is not None" for v in changing]  # each owns its memory, so then ...
            for v in changing:  # ... only the same array, or a view of it, shares it
                key = (tr.values[v].shape, tr.values[v].dtype, tr.values[v].strides)
                quick += [f"{names[v]} is {names[u]}" for u in arrays[arrays.index(v) + 1:]
                          if (tr.values[u].shape, tr.values[u].dtype, tr.values[u].strides) == key]
            for u in arrays:
                if u not in changing:
                    bases = " or ".join(f"{names[u]}.base is {names[v]}" for v in changing)
                    quick.append(f"({names[u]}.base is not None and ({bases}))")
            test = f"({' or '.join(quick)}) and {test}"
        lines.append(f"    if {test}: raise _GF")
    lines += [f"    if not {names[r]}.flags.writeable: {names[r]} = _writable({names[r]})"
              for r in dict.fromkeys(writable_inputs)]  # a donated array written into: unlock it, or copy it
    for i, ins in enumerate(kept):
        text = _line(ins) + (f"\n    if {ins.check}: raise _GF" if ins.kind != "guard" and ins.check else "")
        local = {r: names[r] for r in ins.reads}
        for r in set(ins.reads):
            if last_use.get(r) == i and r not in out_vars:
                free.append(names.pop(r))
        outs = ins.outs
        for o in () if outs is None else (outs if type(outs) is tuple else (outs,)):
            local[o] = names[o] = fresh()
        text = _VAR.sub(functools.partial(_rename, local), text)
        if ins.err != tr.err:  # it ran inside an np.errstate block: so does its replay
            body = text.replace("\n", "\n    ").replace("    ", "        ", 1)
            text = f"    with _errstate(**{tr.name(dict(ins.err))}):\n" + body
        lines.append(text)
        for o in () if outs is None else (outs if type(outs) is tuple else (outs,)):
            if o not in last_use and o not in out_vars:  # never read: its name is free again
                free.append(names.pop(o))
    ret = ", ".join(names[int(s[1:])] if s is not None else "None" for s in out_srcs)
    comma = "," if len(out_srcs) == 1 else ""
    source = f"def _replay({', '.join(param_names)}):\n" + "\n".join(lines) + f"\n    return ({ret}{comma})\n"
    return source, kept


# np.sign is far slower writing into its own input above a few thousand elements (4x at 32,768,
# measured), faster on tiny arrays (no allocation)
_IN_PLACE_UP_TO = {np.sign: 1024}
_VAR = re.compile(r"\bv(\d+)\b")


def _line(ins: _Instr) -> str:
    if ins.kind == "guard":
        return f"    if {ins.check}: raise _GF"
    outs = ins.outs
    target = "" if outs is None else (f"v{outs} = " if type(outs) is int else
                                      (", ".join(f"v{o}" for o in outs) + ("," if len(outs) == 1 else "") + " = "
                                       if outs else "_ = "))
    if ins.kind == "getitem":
        return f"    {target}{ins.callee}[{ins.args[0]}]"
    if ins.kind == "setitem":
        return f"    {ins.callee}[{ins.args[0]}] = {ins.args[1]}"
    kwargs = ins.kwargs
    out = kwargs.get("out")
    if out is not None and len(kwargs) == 1 and ins.nin and len(ins.args) == ins.nin:
        # a ufunc's out= given positionally: no keyword parsing at each call
        return f"    {target}{ins.callee}({', '.join(ins.args)}, {out[1:-2] if out.endswith(',)') else out})"
    args = list(ins.args) + [f"{k}={v}" for k, v in kwargs.items()]
    return f"    {target}{ins.callee}({', '.join(args)})"


def _rename(names: dict[int, str], m: re.Match[str]) -> str:
    return names[int(m.group(1))]


def _writable(a: np.ndarray) -> np.ndarray:
    """A donated array made writable in place when it owns its memory, else a copy of it."""
    try:
        a.flags.writeable = True
        return a
    except ValueError:
        return a.copy()


def _same(a: Any, b: Any) -> bool:
    return a == b or (a != a and b != b)  # (nan matches nan)


def _same_array(a: Any, b: np.ndarray) -> bool:
    if np.shape(a) != b.shape or np.result_type(a) != b.dtype:
        return False
    return bool(np.array_equal(a, b, equal_nan=b.dtype.kind == "f"))


def _owner(a: np.ndarray) -> Any:
    """The object whose memory ``a`` lives in: the array at the end of its chain of bases, or a buffer."""
    b = a.base
    while isinstance(b, np.ndarray):
        a, b = b, b.base
    return a if b is None else b


def _aliases(*arrays: np.ndarray) -> Any:
    """None when no two of ``arrays`` share memory, else the pairs ``(i, j)`` of those that do."""
    owners: dict[int, int] = {}
    for i, a in enumerate(arrays):  # (at most one check per array when nothing is shared)
        if owners.setdefault(id(a if a.base is None else _owner(a)), i) != i:
            break
    else:
        return None
    groups: dict[int, list[int]] = {}
    pairs = []
    for i, a in enumerate(arrays):
        members = groups.setdefault(id(_owner(a)), [])
        pairs += [(j, i) for j in members if np.shares_memory(arrays[j], a)]
        members.append(i)
    return tuple(pairs) or None


def _output_builder(kinds: list[Any], out_spec: Any, epoch: Any) -> Callable[[Any], Any]:
    """``program outputs -> the function's output``: Tensors rebuilt around the replayed arrays, the
    output's structure (``out_spec``, walked at ``epoch``) written out in the same function."""
    lines = []
    names: dict[str, Any] = {"BU": _Building, "AB": _ABSENT, "T": Tensor, "S": _next_seq, "_copy": _copy}
    for i, k in enumerate(kinds):
        if k[0] == "tensor":
            _, trace, ro = k
            if ro:
                lines.append(f"    o{i}.flags.writeable = False")
            t = f"L{i}"  # _const(o, trace, S()) written out: one call fewer per Tensor (~1% of a small step)
            lines.append(f"    {t} = BU(); {t}._data = o{i}; {t}._marks = {trace}; {t}._op = 'leaf'; "
                         f"{t}._a = {t}._b = AB; {t}._rest = (); {t}._vjp = None; {t}._seq = {'S()' if trace else 0}; "
                         f"{t}._grad = None; {t}.__class__ = T")
        elif k[0] == "array":
            if k[1]:
                lines.append(f"    if o{i}.__class__ is _nd: o{i}.flags.writeable = False")
            lines.append(f"    L{i} = o{i}")
        elif k[0] == "copy":
            names[f"K{i}"] = k[1]
            lines.append(f"    L{i} = _copy(K{i})")
        elif k[0] == "same":
            lines.append(f"    L{i} = L{k[1]}")
        else:
            names[f"K{i}"] = k[1]
            lines.append(f"    L{i} = K{i}")
    names["_nd"] = np.ndarray
    if kinds:
        lines.insert(0, f"    {''.join(f'o{i}, ' for i in range(len(kinds)))}= o")
    head = "def build(o):\n" + "\n".join(lines)
    # Each leaf is a leaf of the walk at ``epoch`` (a Tensor, a constant of the trace, or what the program
    # returns for a traced array: an array or a number, unless such a type has been registered a container)
    code = None
    if not any(issubclass(k, (np.ndarray, np.generic, int, float, complex)) for k in _tree._REGISTRY):
        try:
            stmts, expr = _tree._statements(out_spec, names, "L{}", epoch)
            code = compile(f"{head}\n{''.join(f'    {x}{chr(10)}' for x in stmts)}    return {expr}\n",
                           "<leanpass jit output>", "exec")
        except (RecursionError, SyntaxError, MemoryError):  # too deep to write out
            pass
    if code is None:
        names["B"] = _tree._builder(out_spec, remember=True)[1]
        code = compile(f"{head}\n    return B([{', '.join(f'L{i}' for i in range(len(kinds)))}])\n",
                       "<leanpass jit output>", "exec")
    exec(code, names)  # noqa: S102
    build: Callable[[Any], Any] = names["build"]
    return build
