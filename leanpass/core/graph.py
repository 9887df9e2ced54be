"""The recorded graph as LeanPass 0.1 showed it: ``Tensor.visualize()`` (text), ``visualize_dot()``
(Graphviz), ``grad_check()`` (the reverse pass against finite differences) and ``zero_grad_all()``.

The nodes are the Tensors the graph records, found from a result by a walk (depth first, inputs
in order, each node once), and the constant operands of ``+ - * / @`` (numbers and arrays), shown
as leaves, as LeanPass 0.1 showed them.

>>> import leanpass as lp
>>> w = lp.Tensor([1.0, 2.0], requires_grad=True, name="w")
>>> print(len((w * 2).visualize().splitlines()))  # the product, w, the 2 and two edges
5
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..functional._registry import LAZY_MODULE as _LAZY_MODULE
from ..functional._registry import REGISTRY as _REGISTRY
from ..functional._registry import load_all
from .engine import reverse_pass
from .tensor import CustomVJP, Tensor

_ARITHMETIC = ("+", "-", "*", "/", "@")  # ops whose constant operands 0.1 drew as leaves


class _Constant:
    """A constant operand of an op, drawn as a leaf (one per place it is used)."""

    __slots__ = ("value",)
    _op = "leaf"
    name = None

    def __init__(self, value: Any) -> None:
        self.value = value

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(np.shape(self.value))


def _inputs(v: Any) -> list[Any]:
    """The nodes ``v`` was made from: its Tensor parents (and the constant operands of arithmetic)."""
    if type(v) is not Tensor or v._op == "leaf":
        return []
    arithmetic = v._op in _ARITHMETIC
    return [p if type(p) is Tensor else _Constant(p) for p in v._parents if type(p) is Tensor or arithmetic]


def walk(t: Tensor) -> tuple[list[Any], list[tuple[Any, Any]]]:
    """The nodes of ``t``'s graph in depth-first order (``t`` first) and the edges ``(input, node)``, one
    per use, without recursion.

    >>> x = Tensor([1.0], requires_grad=True)
    >>> nodes, edges = walk(x * x)
    >>> len(nodes), len(edges)
    (2, 2)
    """
    nodes = [t]
    edges: list[tuple[Any, Any]] = []
    seen = {id(t)}
    stack = [(t, iter(_inputs(t)))]
    while stack:
        v, rest = stack[-1]
        child = next(rest, None)
        if child is None:
            stack.pop()
            continue
        edges.append((child, v))
        if id(child) not in seen:
            seen.add(id(child))
            nodes.append(child)
            stack.append((child, iter(_inputs(child))))
    return nodes, edges


def _label(v: Any) -> str:
    return v._op or "leaf"


def visualize(t: Tensor) -> str:
    """``Tensor.visualize``: a line per node, then a line per edge.

    >>> x = Tensor([1.0, 2.0], requires_grad=True)
    >>> print(visualize(x.relu()).replace(str(id(x)), "x").split("\\n")[1])
    Node x: leaf shape=(2,)
    """
    nodes, edges = walk(t)
    lines = [f"Node {id(v)}: {_label(v)}{f' ({v.name})' if v.name else ''} shape={v.shape}" for v in nodes]
    lines += [f"Edge {id(a)} -> {id(b)}" for a, b in edges]
    return "\n".join(lines)


def visualize_dot(t: Tensor) -> str:
    """``Tensor.visualize_dot``: the graph in Graphviz's DOT language.

    >>> print(visualize_dot(Tensor([1.0])))  # doctest: +ELLIPSIS
    digraph computation_graph {
      rankdir=LR;
      node [shape=box, style=filled, fillcolor=lightgray];
      n... [label="leaf", shape=ellipse];
    }
    """
    nodes, edges = walk(t)
    lines = ["digraph computation_graph {", "  rankdir=LR;", "  node [shape=box, style=filled, fillcolor=lightgray];"]
    for v in nodes:
        label = _label(v) + (f"\\n{v.name}" if v.name else "")
        label = label.replace('"', '\\"')
        lines.append(f'  n{id(v)} [label="{label}", shape={"ellipse" if not _inputs(v) else "box"}];')
    lines += [f"  n{id(a)} -> n{id(b)};" for a, b in edges]
    lines.append("}")
    return "\n".join(lines)


def evaluate(t: Tensor, values: dict[int, Any]) -> Any:
    """The value of ``t`` computed again from its graph's leaves, with ``values`` (``id(leaf) -> array``)
    in place of some of them: each op's function run on arrays, in the order the ops were recorded.

    >>> x = Tensor([1.0, 2.0], requires_grad=True)
    >>> evaluate((x * x).sum(), {id(x): np.array([3.0, 4.0])})
    np.float64(25.0)
    """
    nodes = sorted((v for v in walk(t)[0] if type(v) is Tensor), key=lambda v: v._seq)  # creation order
    out: dict[int, Any] = {}
    for v in nodes:
        if v._op == "leaf":
            out[id(v)] = values.get(id(v), v._data)
            continue
        parents = v._parents
        raw = [out[id(p)] if type(p) is Tensor else p for p in parents]
        if type(v._vjp) is CustomVJP:
            out[id(v)] = v._vjp.fn(*raw)[0]
            continue
        rec = _REGISTRY.get(v._op)
        if rec is None and v._op in _LAZY_MODULE:
            load_all()
            rec = _REGISTRY.get(v._op)
        if rec is None:
            raise NotImplementedError(f"grad_check: op {v._op!r} has no function to compute it again")
        need = tuple(type(p) is Tensor for p in parents)
        out[id(v)] = (rec.fn(*raw, need=need) if rec.need else rec.fn(*raw))[0]
    return out[id(t)]


def grad_check(t: Tensor, eps: float = 1e-6, tol: float = 1e-4) -> list[tuple[Tensor, float, Any, Any]]:
    """``Tensor.grad_check``: ``(leaf, max abs difference, analytic, numeric)`` for each leaf that requires
    grad whose gradient of ``t.sum()`` differs from central differences by more than ``tol``.

    >>> x = Tensor([0.5, -1.0], requires_grad=True)
    >>> x.tanh().grad_check()
    []
    """
    if not t._marks:
        raise ValueError("grad_check requires the output tensor to require gradients")
    seed = np.ones_like(t._data)
    analytic = {id(leaf): g for leaf, g in reverse_pass([t], [seed], -1).values()}
    errors = []
    for leaf in walk(t)[0]:
        if type(leaf) is not Tensor or leaf._op != "leaf" or not leaf._marks & 1:
            continue
        base = np.asarray(leaf._data)
        numeric = np.zeros(base.shape, dtype=np.float64)
        for idx in np.ndindex(base.shape):
            step = np.zeros(base.shape, dtype=base.dtype)
            step[idx] = eps
            plus = np.sum(evaluate(t, {id(leaf): base + step}))
            minus = np.sum(evaluate(t, {id(leaf): base - step}))
            numeric[idx] = (plus - minus) / (2 * eps)
        g = analytic.get(id(leaf))
        g = np.zeros(base.shape) if g is None else np.broadcast_to(np.asarray(g), base.shape)
        diff = float(np.max(np.abs(g - numeric), initial=0.0))
        if diff > tol:
            errors.append((leaf, diff, np.array(g), numeric))
    return errors


def zero_grad_all(t: Tensor) -> None:
    """``Tensor.zero_grad_all``: ``.grad`` set to zeros on each Tensor of ``t``'s graph that requires grad.

    >>> x = Tensor([1.0], requires_grad=True)
    >>> zero_grad_all(x * 3); x.grad
    Tensor([0.])
    """
    for v in walk(t)[0]:
        if type(v) is Tensor and v._marks & 1:
            v.grad = np.zeros(np.shape(v._data), dtype=v.dtype)


