"""Forward mode: ``jvp``, and the forward sweep that ``jacfwd`` pushes tangents with.

``jvp(f, primals, tangents)`` gives its inputs fresh nodes carrying the mark of this nesting
level, as ``vjp`` does, and runs ``f`` once: while it runs, each recorded op whose inputs carry a
tangent gets the tangent of its output at once, from its inputs' tangents, with the op's
forward-mode rule (``functional.JVPS``, beside each VJP). The recorders reach this through their
slow path (``tensor._forward_hook``, set only while a ``jvp`` runs), so ops outside a ``jvp`` pay
nothing for it. A node none of whose inputs has a tangent gets none: its tangent is zero. Only
this level's bit is followed, which keeps the tangents of nested transforms apart (no
perturbation confusion), as the reverse pass does.

At the top level the rules run on raw arrays. Inside another transform they run on the recorded
Tensors themselves, so the tangents are recorded too and can be differentiated again: ``grad``
of ``jvp``, ``jvp`` of ``grad`` (forward-over-reverse), ``jvp`` of ``jvp``.

``jacfwd`` needs one tangent per input direction: ``Sweep`` records ``f`` once, then pushes each
direction through the recorded nodes in creation order, with the same rules.

Every built-in op has a rule of its own, in its record (``functional.REGISTRY``; ``vmap``'s own
ops too). A record may declare ``jvp=TRANSPOSED`` instead, and an op of the user's, recorded with
``apply``, has no record: their tangents come from the VJP, by transposition; see ``transposed_vjp``.

With ``debug_nans`` on, a tangent is checked as it is made, as an output is: the first op whose
output or tangent holds a NaN raises, naming the op (``_check_tangent``). Off, it costs one test of
a module attribute per op.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Sequence
from contextvars import ContextVar
from typing import Any

import numpy as np

from .. import functional as F
from ..core import tensor as _tensor
from ..core.engine import _depth, _level, reverse_pass
from ..core.tensor import (
    _ABSENT,
    CustomVJP,
    Tensor,
    _Building,
    _const,
    _grad_enabled,
    _has_nan,
    _next_seq,
    _node,
    _shapes,
)
from ..core.tree import _first_difference, leaf_paths, tree_flatten, tree_unflatten
from ..functional import TRANSPOSED
from .reverse_mode import _Call, _split_aux


class Sweep:
    """The nodes between some inputs and ``roots`` that carry ``mask``, in creation order, to push
    tangents through, once per input direction (``jacfwd``).

    ``on_tensors`` runs the rules on the recorded Tensors (inside another transform), else on
    their raw arrays; ``level`` is the level of the transform that recorded the nodes.

    >>> import leanpass as lp
    >>> x = lp.Tensor([1.0, 2.0], requires_grad=True)  # mark 1
    >>> y = x * x
    >>> Sweep([y], 1, False, 0).push({x._seq: np.array([1.0, 0.5])})[y._seq]
    array([2., 2.])
    """

    def __init__(self, roots: Sequence[Any], mask: int, on_tensors: bool, level: int) -> None:
        self.level = level  # the level of the transform whose inputs these are
        # Each step holds what its node's rule needs, worked out once for all the pushes: the
        # node's key, its inputs' keys (0, which no tangent has, for a constant or an input this
        # sweep does not follow), the rule, the output and the inputs (raw arrays at the top
        # level), the output's shape, the keys whose last use it is: their tangents are
        # dropped then (the roots' are kept), so that the arrays of a long chain are reused
        # rather than all kept to the end; and the op's name (for debug_nans).
        steps: list[list[Any]] = []
        seen: set[int] = set()
        stack = [r for r in roots if type(r) is Tensor and r._marks & mask]
        while stack:  # (iterative: a graph may be a million nodes deep)
            node = stack.pop()
            s = node._seq
            if s in seen:
                continue
            seen.add(s)
            vjp = node._vjp
            if vjp is None:  # a leaf: an input of this sweep, or a constant of its level
                continue
            parents = node._parents
            keys = []
            for p in parents:
                if type(p) is Tensor and p._marks & mask:
                    keys.append(p._seq)
                    stack.append(p)
                else:
                    keys.append(0)
            if on_tensors:
                ans: Any = node
                inputs: tuple[Any, ...] = parents
            else:
                ans = node._data
                inputs = tuple([p._data if type(p) is Tensor else p for p in parents])
            rule = rule_of(node._op, vjp, parents, on_tensors)
            steps.append([s, tuple(keys), rule, ans, inputs, node._data.shape, [], node._op])
        steps.sort(key=_first)  # creation order: every node comes after its inputs
        last: dict[int, list[Any]] = {}  # key -> the step that uses it last
        for step in steps:
            for k in step[1]:
                last[k] = step
        for r in roots:
            if type(r) is Tensor:
                last.pop(r._seq, None)
        last.pop(0, None)
        for k, step in last.items():
            step[6].append(k)
        self.steps = steps

    def push(self, seeds: dict[int, Any]) -> dict[int, Any]:
        """The roots' tangents, by ``_seq``, from ``seeds`` (input ``_seq`` -> tangent); a root
        missing from the result has tangent zero."""
        tangents = dict(seeds)
        get = tangents.get
        pop = tangents.pop
        # A transform that a rule calls (an op of the user's may) takes a mark above this one's.
        level = _level.set(max(_level.get(), self.level + 1))
        try:
            self._push(tangents, get, pop)
        finally:
            _level.reset(level)
        return tangents

    def _push(self, tangents: dict[int, Any], get: Any, pop: Any) -> None:
        check = _tensor._debug_nans
        with _grad_enabled():  # (recorded inside another transform, even under its no_grad)
            for s, keys, rule, ans, inputs, shape, drops, name in self.steps:
                ts = tuple([get(k) for k in keys])
                for k in drops:
                    pop(k, None)
                for t in ts:
                    if t is not None:
                        break
                else:  # no tangent comes in
                    continue
                if s in tangents:  # a seeded input (linked to an outer graph)
                    continue
                t = _checked_rule(name, rule, ts, ans, inputs) if check else rule(ts, ans, *inputs)
                if t is None:
                    continue
                if getattr(t, "shape", None) != shape:  # a tangent of some inputs only may not span the output yet
                    t = np.broadcast_to(t, shape)
                tangents[s] = t


def _first(step: list[Any]) -> int:
    return int(step[0])


_JVPS = F.JVPS  # (the rules of the records, a derived view: one lookup on the hot path below)


def rule_of(name: str, vjp: Any, parents: tuple[Any, ...], on_tensors: bool) -> Callable[..., Any]:
    """The forward-mode rule of a node of op ``name`` with VJP ``vjp``: its record's, else (a record
    declaring ``jvp=TRANSPOSED``, or an op of the user's without a record) its VJP transposed."""
    if type(vjp) is CustomVJP:
        fn, rule = vjp.fn, TRANSPOSED
    else:
        rec = F.REGISTRY[name]
        fn, rule = rec.fn, rec.jvp
    if rule is TRANSPOSED:
        rule = functools.partial(_transposed_rule, fn, name, parents, on_tensors)
    return rule


def _transposed_rule(fn: Callable[..., Any], name: str, parents: tuple[Any, ...], on_tensors: bool,
                     tangents: tuple[Any, ...], ans: Any, *inputs: Any) -> Any:
    return transposed_vjp(fn, name, parents, tangents, on_tensors)


def transposed_vjp(fn: Callable[..., Any], name: str, parents: tuple[Any, ...], tangents: tuple[Any, ...],
                   on_tensors: bool) -> Any:
    """The output's tangent of op ``fn`` (called ``name``) on ``parents``, from its VJP alone.

    ``vjp(g)`` is ``J^T g``, linear in ``g``, so ``sum_i <vjp(g)_i, t_i> = <g, J t>``, whose
    gradient in ``g`` is ``J t``, the tangent wanted. So the op and its VJP are replayed on a
    recorded cotangent ``g`` (its value does not matter: zeros), the products with the tangents are
    summed, and one reverse pass pulls back to ``g``. It costs a replay of the op and its VJP
    and a pass over what that records: a direct rule in ``functional.JVPS`` is cheaper, and is
    written for every built-in op. Inside another transform everything here is recorded too.

    >>> from leanpass import functional as F
    >>> transposed_vjp(F.exp, "exp", (np.array([0.0, 1.0]),), (np.array([2.0, 1.0]),), False)  # t * exp(x)
    array([2.        , 2.71828183])
    """
    marks = 0
    for v in (*parents, *tangents):
        if type(v) is Tensor:
            marks |= v._marks
    # A bit of its own, above those of every live graph and of everything here: the pass below
    # follows g's uses alone, and a transform called by the rule takes a bit above it.
    # A transform that the replayed VJP calls is recorded (it depends on g), as in a replayed pass.
    level = max(_level.get(), marks.bit_length())
    token = _level.set(level + 1)
    depth = _depth.set(_depth.get() + 1)
    unchecked = _tensor._unchecked.set(True)  # (the replay's values are not the program's: see _check_tangent)
    try:
        return _transposed(fn, name, parents, tangents, on_tensors, 2 << level)
    finally:
        _tensor._unchecked.reset(unchecked)
        _depth.reset(depth)
        _level.reset(token)


def _transposed(fn: Callable[..., Any], name: str, parents: tuple[Any, ...], tangents: tuple[Any, ...],
                on_tensors: bool, bit: int) -> Any:
    if on_tensors:
        inputs = parents
    else:  # constant Tensors, so that the replay records only what depends on g
        inputs = tuple([_const(p._data) if type(p) is Tensor else _const(p) if t is not None else p
                        for p, t in zip(parents, tangents)])
    rec = F.REGISTRY.get(name)
    if rec is not None and rec.need and fn is rec.fn:
        ans, vjp = fn(*inputs, need=tuple(t is not None for t in tangents))
    else:
        ans, vjp = fn(*inputs)
    data = ans._data if type(ans) is Tensor else ans
    g = _const(np.zeros(np.shape(data), np.result_type(data)), bit, _next_seq())
    h: Any = None
    for ct, t in zip(vjp(g), tangents):
        if t is not None and type(ct) is Tensor and ct._marks & bit:
            term = (ct * t).sum()
            h = term if h is None else h + term
    if h is None:  # the output does not depend on the inputs followed
        return None
    one = np.ones((), np.result_type(h._data))
    leaves = reverse_pass([h], [_const(one) if on_tensors else one], bit, on_tensors)
    hit = leaves.get(g._seq)
    return None if hit is None else hit[1]


def _check_tangent(name: str, t: Any, inputs: Sequence[Any], ts: Sequence[Any], inner: str = "") -> None:
    """With ``debug_nans`` on: raise ``FloatingPointError`` if the tangent ``t`` of op ``name``'s output holds a
    NaN (``inner``: what the rule's own recorded ops reported, where one of them raised first)."""
    if not inner and not _has_nan(t):
        return
    had = any(v is not None and _has_nan(v) for v in ts)
    raise FloatingPointError(
        f"debug_nans: op {name!r} made a NaN in the tangent of its output (forward mode), from inputs of "
        f"shapes ({_shapes(tuple(inputs))})"
        + (" and a tangent that already held a NaN (given to jvp, or from outside the recorded graph)" if had else
           ". Typical causes: a derivative that is infinite where the tangent is 0 (sqrt or log at 0), "
           "inf - inf, inf * 0.")
        + (f" (made by {inner} in its forward-mode rule)" if inner else "")
    )


def _checked_rule(name: str, rule: Callable[..., Any], ts: tuple[Any, ...], ans: Any, inputs: Sequence[Any]) -> Any:
    """``rule(ts, ans, *inputs)`` of op ``name`` with ``debug_nans`` on, where the rule's own ops may be recorded
    (inside another transform): a NaN they make is reported as the tangent of the op, as is a NaN in the tangent."""
    try:
        t = rule(ts, ans, *inputs)
    except FloatingPointError as e:
        if not str(e).startswith("debug_nans:"):
            raise
        _check_tangent(name, None, inputs, ts, str(e).removeprefix("debug_nans: ").split(" made a NaN")[0])
    if t is not None:
        _check_tangent(name, t, inputs, ts)
    return t


class _Frame:
    """One running ``jvp``: its mark, and where the tangents of the nodes its function makes go.

    At the top level (``on_tensors`` false) a node's tangent, a raw array, is kept on the node
    itself (``_tangent``), so that it lives as long as the node; a node that only this jvp
    follows is not even linked to its inputs (nothing will pull back through it), so the values
    of a long chain are freed as they are in a plain call. Inside another transform the
    tangents are Tensors, kept in ``tangents`` by ``_seq`` until the jvp returns.
    """

    __slots__ = ("bit", "on_tensors", "tangents", "start")

    def __init__(self, bit: int, on_tensors: bool) -> None:
        self.bit = bit
        self.on_tensors = on_tensors
        self.tangents: dict[int, Any] = {}
        # Nodes made before this jvp began are not its own: a tangent one holds is another's.
        self.start = _next_seq()

    def seed(self, x: Tensor, t: Any) -> None:
        if self.on_tensors:
            self.tangents[x._seq] = t
        else:
            object.__setattr__(x, "_tangent", t)

    def tangent(self, x: Any) -> Any:
        """The tangent of ``x`` (None: zero)."""
        if type(x) is not Tensor or not x._marks & self.bit:
            return None
        if self.on_tensors:
            return self.tangents.get(x._seq)
        return getattr(x, "_tangent", None) if x._seq > self.start else None


# The jvps running in this thread or task, outermost first (only the first can be a top-level one).
_frames: ContextVar[tuple[_Frame, ...]] = ContextVar("leanpass_jvp_frames", default=())
_running = 0  # how many jvps run, in all threads: the recorders' hook is set while there are any
_running_lock = threading.Lock()


def _start(frame: _Frame) -> Any:
    """Give ``frame`` the tangents of the nodes recorded from now until ``_stop``."""
    global _running
    token = _frames.set((*_frames.get(), frame))
    with _running_lock:
        _running += 1
        _tensor.take_slow_path()  # the recorders take their slow path (which calls the hook) from now on
        _tensor.set_forward_hook(_record)
    return token


def _stop(token: Any) -> None:
    global _running
    _frames.reset(token)
    with _running_lock:
        _running -= 1
        if not _running:
            _tensor.set_forward_hook(None)


def _record(name: str, out: Any, vjp: Any, marks: int, parents: tuple[Any, ...]) -> Tensor:
    """The recorders' hook while a jvp runs: the node of op ``name``, with its tangent for each
    running jvp whose inputs it depends on."""
    frames = _frames.get()
    if frames:
        top = frames[0]
        if marks == top.bit and not top.on_tensors:  # only this top-level jvp follows the node: no links
            node: Any = _Building()
            node._data = out
            node._grad = None
            node._marks = marks
            node._op = name
            node._a = node._b = _ABSENT
            node._rest = ()
            node._vjp = None
            node._tangent = _raw_tangent(top, name, vjp, out, parents)
            node._seq = _next_seq()
            node.__class__ = Tensor
            return node
    node = _node(out, marks, name, parents, vjp)
    # The outer jvps first: a rule that runs on Tensors (an inner jvp's) records ops whose own
    # tangents the outer jvps need, from this node's.
    for i, frame in enumerate(frames):
        if marks & frame.bit:
            if frame.on_tensors:
                _recorded_tangent(frame, node, vjp, parents, frames[:i])
            else:
                object.__setattr__(node, "_tangent", _raw_tangent(frame, name, vjp, out, parents))
    return node


def _raw_tangent(frame: _Frame, name: str, vjp: Any, out: Any, parents: tuple[Any, ...]) -> Any:
    """The tangent (a raw array, or None) of the output ``out`` of op ``name`` on ``parents``,
    for the top-level jvp ``frame``. (The hot path of ``jvp``: the lookups are written out.)"""
    bit = frame.bit
    start = frame.start
    if len(parents) == 2:  # (most ops: written out)
        x, y = parents
        tx = ty = None
        if type(x) is Tensor:
            if x._marks & bit and x._seq > start:
                tx = getattr(x, "_tangent", None)
            x = x._data
        if type(y) is Tensor:
            if y._marks & bit and y._seq > start:
                ty = getattr(y, "_tangent", None)
            y = y._data
        if tx is None and ty is None:  # no tangent comes in
            return None
        ts: Any = (tx, ty)
        inputs: Any = (x, y)
    else:
        ts = []
        inputs = []
        found = False
        for p in parents:
            if type(p) is Tensor:
                inputs.append(p._data)
                if p._marks & bit and p._seq > start:
                    t = getattr(p, "_tangent", None)
                    if t is not None:
                        found = True
                    ts.append(t)
                    continue
            else:
                inputs.append(p)
            ts.append(None)
        if not found:
            return None
        ts = tuple(ts)
    rule = _JVPS.get(name) if type(vjp) is not CustomVJP else None
    if rule is None:
        rule = rule_of(name, vjp, parents, False)
    t = rule(ts, out, *inputs)
    if t is not None and getattr(t, "shape", None) != out.shape:  # (the tangent of some inputs only)
        t = np.broadcast_to(t, out.shape)
    if _tensor._debug_nans and t is not None:
        _check_tangent(name, t, inputs, ts)
    return t


def _recorded_tangent(frame: _Frame, node: Tensor, vjp: Any, parents: tuple[Any, ...],
                      outer: tuple[_Frame, ...]) -> None:
    """Keep in ``frame`` the tangent (a Tensor) of ``node``, computed by recorded ops."""
    ts = tuple([frame.tangent(p) for p in parents])
    for t in ts:
        if t is not None:
            break
    else:
        return
    # The rule's own ops are recorded for the transforms around this jvp: the hooks of this
    # jvp and of those inside it must not take them for ops of the function.
    token = _frames.set(outer)
    try:
        rule = rule_of(node._op, vjp, parents, True)
        t = _checked_rule(node._op, rule, ts, node, parents) if _tensor._debug_nans else rule(ts, node, *parents)
        if t is not None and t.shape != node.shape:
            t = np.broadcast_to(t, node.shape)
    finally:
        _frames.reset(token)
    if t is not None:
        frame.tangents[node._seq] = t


def _tangent_seed(primal: Tensor, tangent: Any, arg: int, nested: bool) -> Any:
    """A tangent checked against its primal's shape and dtype (a Python number or list takes the
    primal's dtype), and copied, so that the caller's array is never shared or changed. A Tensor
    stays one inside another transform (it may be what that transform differentiates)."""
    pdata = primal._data
    where = f"jvp: the tangent of primals[{arg}]"
    if type(tangent) is Tensor:
        t = tangent if nested else np.array(tangent._data)
        dtype, shape = tangent.dtype, tangent.shape
    elif isinstance(tangent, (np.ndarray, np.generic)):
        t = np.array(tangent)
        dtype, shape = t.dtype, t.shape
    elif hasattr(tangent, "shape") and hasattr(tangent, "dtype"):  # an array stand-in (vmap's): immutable
        t = tangent
        dtype, shape = tangent.dtype, tangent.shape
    else:
        try:
            t = np.array(tangent, dtype=pdata.dtype)
        except (TypeError, ValueError) as e:
            raise TypeError(
                f"{where} must be an array, a Tensor or a number, not {type(tangent).__name__} ({e})"
            ) from None
        dtype, shape = t.dtype, t.shape
    if shape != pdata.shape:
        raise ValueError(
            f"{where} has shape {shape} but the primal has shape {pdata.shape}; a tangent must have "
            "its primal's shape (it is a direction to move the primal in)."
        )
    if dtype != pdata.dtype:
        raise TypeError(
            f"{where} has dtype {dtype} but the primal has dtype {pdata.dtype}; they must match "
            f"(cast the tangent, e.g. t.astype(np.{pdata.dtype}))."
        )
    return t


def _check_tied(first: tuple[Any, int, int], then: tuple[Any, int, int], primals: Sequence[Any]) -> None:
    """The tangents given for one Tensor at several places of the primals (``(tangent, argument,
    leaf)`` each) must be the same: a tied Tensor is one variable, moved in one direction."""
    if first[0] is then[0]:
        return
    a, b = (t._data if type(t) is Tensor else t for t in (first[0], then[0]))
    try:  # (tangents being differentiated must be one object: each would have a derivative of its own)
        same = not any(type(t) is Tensor and t._marks for t in (first[0], then[0])) and bool(np.array_equal(a, b))
    except (TypeError, ValueError):  # values not known here (a stand-in of vmap or jit)
        same = False
    if not same:
        where = [f"primals[{i}]{leaf_paths(tree_flatten(primals[i])[1])[j].replace('<root>', '')}"
                 for _, i, j in (first, then)]
        raise ValueError(
            f"jvp: {where[0]} and {where[1]} are the same Tensor (tied weights: one variable), but the "
            "tangents given for them differ. Give it the same tangent at each place (the same object, for a "
            "tangent that is itself being differentiated), or make the places separate Tensors to move them "
            "independently."
        )


def _output_tangent(out: Any, t: Any, nested: bool) -> Any:
    """The tangent of one output leaf, in the output's form: a Tensor for a Tensor."""
    if t is None:
        data = out._data if type(out) is Tensor else np.asarray(out)
        t = np.zeros(np.shape(data), np.result_type(data) if np.result_type(data).kind == "f" else np.float64)
    if nested or type(out) is Tensor:
        return t if type(t) is Tensor else _const(t)
    return t


def jvp(f: Callable[..., Any], primals: Sequence[Any], tangents: Sequence[Any], has_aux: bool = False) -> Any:
    """Forward mode: ``f(*primals)`` and its Jacobian times ``tangents``, ``(primals_out, tangents_out)``.

    ``primals`` is a tuple (or list) of ``f``'s arguments, each a pytree of arrays, Tensors or
    floats; ``tangents`` has the same structure, each leaf a direction of its primal's shape and
    dtype. ``tangents_out`` has the output's structure. One call runs ``f`` once and pushes the
    tangents forward beside it; ``jvp`` composes with ``grad`` both ways and with itself. With
    ``has_aux=True``, ``f`` returns ``(output, aux)`` and the result is ``(out, tangent_out, aux)``.

    >>> y, dy = jvp(lambda x: x ** 3, (np.array([1.0, 2.0]),), (np.array([1.0, 0.5]),))
    >>> y, dy
    (Tensor([1., 8.]), Tensor([3., 6.]))
    """
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)):
        raise TypeError(
            "jvp(f, primals, tangents): primals and tangents must be tuples (or lists) of f's "
            f"arguments, e.g. jvp(f, (x,), (v,)); got {type(primals).__name__} and {type(tangents).__name__}."
        )
    if len(primals) != len(tangents):
        raise ValueError(
            f"jvp: {len(primals)} primals but {len(tangents)} tangents; give one tangent per argument."
        )
    t_leaves = []
    for i, (p, t) in enumerate(zip(primals, tangents)):
        leaves, t_def = tree_flatten(t)
        p_def = tree_flatten(p)[1]
        if p_def != t_def:
            raise ValueError(
                f"jvp: the tangent of primals[{i}] has a different structure from the primal "
                f"({_first_difference(p_def, t_def)}); a tangent must be a tree like its primal."
            )
        t_leaves.append(leaves)
    nested = _depth.get() > 0
    frame = _Frame(2 << _level.get(), nested)  # (the bit _Call gives the inputs)

    def run(*args: Any) -> Any:  # f on the fresh inputs, with their tangents pushed alongside
        seeded: dict[int, tuple[Any, int, int]] = {}  # a tied input (one Tensor in several places): one tangent
        for i, (arg, leaves) in enumerate(zip(args, t_leaves)):
            for j, (x, leaf) in enumerate(zip(tree_flatten(arg)[0], leaves)):
                if x._seq in seeded:
                    _check_tied(seeded[x._seq], (leaf, i, j), primals)
                    continue
                seeded[x._seq] = (leaf, i, j)
                frame.seed(x, _tangent_seed(x, leaf, i, nested))
        token = _start(frame)
        try:
            return f(*args)
        finally:
            _stop(token)

    tr = _Call(run, tuple(primals), {}, tuple(range(len(primals))), "jvp")
    out, aux = _split_aux(tr.out, has_aux, "jvp")
    out_leaves, out_def = tree_flatten(out)
    t_out = [_output_tangent(o, frame.tangent(o), nested) for o in out_leaves]
    result = (tr.finish(out), tree_unflatten(out_def, t_out))
    return (*result, tr.finish(aux)) if has_aux else result
