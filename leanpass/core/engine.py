"""The one reverse pass, and ``Tensor.backward`` on top of it.

The pass walks the graph from its roots in reverse creation order (a max-heap on each node's
sequence number), so every node's cotangent is complete before its VJP runs. Leaves have no
VJP to wait for, so their cotangents are added up as they come; a run of nodes with a single
differentiated non-leaf input (a chain, or a layer stack whose other inputs are parameters)
skips the heap too. It visits only nodes whose marks have a bit of ``mask`` (the nodes that
depend on the inputs being differentiated), frees each cotangent as soon as it is passed on,
and never recurses.

First order, the VJPs run on raw arrays. With ``create_graph=True`` each node's rule is
replayed on its parent Tensors (``functional.OPS[node._op](*node._parents)``, or the function
an op recorded with ``apply`` keeps), so the pass itself is recorded and can be differentiated
again.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from heapq import heappop, heappush
from typing import Any

import numpy as np

from ..functional._registry import REGISTRY as _REGISTRY
from ..functional.unary import _pass_through
from . import tensor as _tensor
from .tensor import CustomVJP, Tensor, _const, _grad_enabled, check_version
from .tree import tree_flatten

# vmap's ``settle`` once vmap has been imported (``set_cotangent_hook``): it sums a per-example
# cotangent over the examples where it reaches an input that the examples share.
_batching: Any = None


def set_cotangent_hook(fn: Callable[[Any, Any, int], Any]) -> None:
    """``fn(cotangent, parent, mask)``, called on each cotangent that is not a plain ndarray as it reaches
    a parent (vmap's: a per-example cotangent meeting an input the examples share is summed there).

    >>> set_cotangent_hook(_batching)  # (unchanged; vmap sets its hook as it loads)
    """
    global _batching
    _batching = fn
# How many transformed functions (or recorded pull-backs) enclose the current code: inside
# one, a transform's results must stay differentiable for the outer one (a recorded pass).
_depth: ContextVar[int] = ContextVar("leanpass_transform_depth", default=0)
# How many marks are in use: by the enclosing transforms, and by the pull-back that is
# running (whose rules may call transforms of their own, e.g. a custom op's VJP). A new
# transform takes the next bit, so it never shares one with a graph that is still live.
_level: ContextVar[int] = ContextVar("leanpass_level", default=0)
# While the forward of an op of the user's (``apply``) runs inside transforms: the marks of
# their graphs (0 otherwise). See ``run_forward``.
_outside: ContextVar[int] = ContextVar("leanpass_outside_op", default=0)


def reverse_pass(
    roots: list[Tensor], seeds: list[Any], mask: int, create_graph: bool = False, start: int = 0
) -> dict[int, tuple[Tensor, Any]]:
    """Pull ``seeds`` back from ``roots``; return ``{t._seq: (t, cotangent)}`` for the inputs reached.

    The inputs are the leaves (nodes with no VJP) and a transform's inputs that are linked to
    an outer graph (``identity`` nodes whose parent is not differentiated by this pass, or was
    made before ``start``, when the transform's inputs were: a value that an earlier transform
    of the same nesting level returned carries that transform's mark, which is this one's).
    """
    nodes: dict[int, Tensor] = {}  # seq -> node waiting for its VJP
    grads: dict[int, Any] = {}  # seq -> its cotangent so far
    heap: list[int] = []  # -seq of each waiting node: pops the newest first
    for root, seed in zip(roots, seeds):
        s = root._seq
        if s in grads:
            grads[s] = grads[s] + seed
        else:
            nodes[s] = root
            grads[s] = seed
            heappush(heap, -s)
    leaves: dict[int, tuple[Tensor, Any]] = {}
    node: Any = None
    while node is not None or heap:
        if node is None:
            s = -heappop(heap)
            node = nodes.pop(s)
            g = grads.pop(s)
        vjp = node._vjp
        if vjp is None or (vjp is _pass_through and (not node._a._marks & mask or node._a._seq < start)):
            hit = leaves.get(node._seq)  # (a root that is a leaf may also be reached below)
            leaves[node._seq] = (node, g) if hit is None else (node, hit[1] + g)
            node = None
            continue
        cts = _replay(node, g, mask) if create_graph else vjp(g)
        if not heap and not create_graph:
            # The chain: while nothing else waits and a node has one input that is an op's output,
            # that input's cotangent is final and goes straight on to its VJP, without the heap
            # and the dicts (a loop of its own: fewer checks per node than the one around it; a
            # replayed pass, create_graph, takes the general one).
            while type(node._b) is not Tensor and not node._rest:
                p = node._a
                c = cts[0]
                if type(p) is not Tensor or c is None or not p._marks & mask:
                    break
                vjp = p._vjp
                if vjp is None or vjp is _pass_through:  # (a leaf, or a transform's input: below)
                    break
                if _batching is not None and type(c) is not np.ndarray:
                    c = _batching(c, p, mask)
                node = p
                cts = vjp(c)
        b = node._b
        parents = (node._a,) if type(b) is not Tensor and not node._rest else (node._a, b) + node._rest
        chain: Any = None
        for p, c in zip(parents, cts):
            if c is None or type(p) is not Tensor or not p._marks & mask:
                continue  # a constant, or an input this pass does not differentiate
            if _batching is not None and type(c) is not np.ndarray:  # (vmap is in use: per-example
                c = _batching(c, p, mask)  # cotangents, or a recorded pass's Tensors, meet shared inputs)
            if p._vjp is None:  # a leaf (a parameter): no VJP to wait for, so no heap either
                ps = p._seq
                hit = leaves.get(ps)
                leaves[ps] = (p, c) if hit is None else (p, hit[1] + c)
                continue
            if chain is None and not heap:  # (nothing waits, so p is not in grads either)
                chain = p
                chain_g = c
                continue
            ps = p._seq
            if ps in grads:
                grads[ps] = grads[ps] + c
            elif chain is p:
                chain_g = chain_g + c
            else:
                if chain is not None:  # a second input after all: back to the general scheme
                    nodes[chain._seq] = chain
                    grads[chain._seq] = chain_g
                    heappush(heap, -chain._seq)
                    chain = None
                nodes[ps] = p
                grads[ps] = c
                heappush(heap, -ps)
        node = chain
        if chain is not None:
            g = chain_g
    return leaves


def _replay(node: Tensor, g: Tensor, mask: int) -> Any:
    """Run ``node``'s rule again on its parent Tensors, so that the VJP itself is recorded."""
    vjp = node._vjp
    if type(vjp) is CustomVJP:
        rec, fn = None, vjp.fn
    else:
        rec = _REGISTRY[node._op]
        fn = rec.fn
    parents = node._parents
    for p in parents:  # a parameter given new values since the node was recorded: its values are not the graph's
        if type(p) is Tensor and p._vjp is None:
            check_version(p, node)
    token = _depth.set(_depth.get() + 1)  # a transform a rule calls is then recorded too
    _tensor.replay_enter()  # (debug_nans says "backward" for what is recorded here)
    try:
        with _grad_enabled():
            if rec is not None and rec.need:
                need = tuple(type(p) is Tensor and p._marks & mask != 0 for p in parents)
                _, replayed = fn(*parents, need=need)
            else:
                _, replayed = fn(*parents)
            return replayed(g)
    finally:
        _depth.reset(token)
        _tensor.replay_exit()


def backward(t: Tensor, cotangent: Any = None, create_graph: bool = False) -> None:
    """``Tensor.backward``: accumulate gradients into ``.grad`` of the leaves requiring grad."""
    if not t._marks:
        raise RuntimeError(
            "backward(): this Tensor does not require grad, so there is nothing to "
            "differentiate. None of the Tensors it was computed from has requires_grad=True "
            "(or it was computed under no_grad()); create inputs with "
            "Tensor(..., requires_grad=True)."
        )
    seed = _seed(t, cotangent)
    if create_graph:
        seed = _const(seed)
    for leaf, g in reverse_pass([t], [seed], -1, create_graph).values():
        if not create_graph:
            g = _const(_match(g, leaf))
        elif type(g) is not Tensor:
            g = _const(g)
        leaf.grad = g if leaf.grad is None else leaf.grad + g


def _seed(t: Tensor, cotangent: Any) -> Any:
    """The cotangent to start from: ones for a one-element Tensor, else the one given."""
    data = t._data
    if cotangent is None:
        if np.size(data) != 1:
            raise RuntimeError(
                f"backward() without a cotangent needs a one-element Tensor, but this one has "
                f"shape {np.shape(data)}. Reduce it first (t.sum().backward()) or pass a "
                f"cotangent of that shape: t.backward(np.ones({np.shape(data)}))."
            )
        return np.ones_like(data)
    # A copy: the gradient may be this very array (add passes it through), and it must not
    # change when the caller reuses their buffer, nor lock it read-only.
    raw = cotangent._data if type(cotangent) is Tensor else _real_cotangent(cotangent, "backward(cotangent)")
    g = np.array(raw, dtype=t.dtype)
    if np.shape(g) != np.shape(data):
        raise ValueError(
            f"backward(cotangent): the cotangent has shape {np.shape(g)} but the Tensor has "
            f"shape {np.shape(data)}; they must match."
        )
    return g


def _real_cotangent(value: Any, where: str) -> Any:
    """``value`` (not a Tensor) checked to be real numbers: a cotangent of None, strings or complex
    values would otherwise become NaN, parsed text or a dropped imaginary part."""
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        return value
    try:
        arr = np.asarray(value)
    except (TypeError, ValueError) as e:
        raise TypeError(f"{where}: the cotangent must be an array of real numbers; {e}") from None
    if arr.dtype.kind not in "biuf":
        raise TypeError(
            f"{where}: the cotangent must be real numbers (a float array shaped like the output), but it has "
            f"dtype {arr.dtype} ({type(value).__name__} {value!r:.60})."
        )
    return arr


def _match(g: Any, like: Tensor) -> Any:
    """A cotangent in ``like``'s dtype and shape (a broadcast view becomes a real array)."""
    dtype = like.dtype
    if np.shape(g) != like.shape:
        g = np.broadcast_to(g, like.shape)
    if type(g) is np.ndarray:  # (the usual case, first: no call)
        return g if g.dtype == dtype else g.astype(dtype)
    if getattr(type(g), "_lp_traced", False):  # (a stand-in of jit: np.asarray would read its value)
        return g if g.dtype == dtype else g.astype(dtype)
    return np.asarray(g, dtype=dtype)


def run_forward(fn: Any, name: str, raw: list[Any]) -> Any:
    """``fn(*raw)``: the forward of op ``name`` of the user's, recorded with ``apply``, on its inputs' arrays.

    Inside transforms (``grad(lambda a: apply(op, "op", a))``), a transform the forward calls (HIPS
    autograd's ``fixed_point`` pattern) is a fresh computation on those arrays: it runs as at the
    top level and gives arrays, whatever encloses the op. A forward that reaches a Tensor of the
    enclosing graphs (one it closes over) is refused, directly or through such a transform
    (``check_outside``): the op's VJP gives no gradient for it, so that part would be lost.
    """
    if not _depth.get():
        out, vjp = fn(*raw)
    else:
        depth = _depth.set(0)
        outside = _outside.set((2 << _level.get()) - 1)  # the marks of the graphs that enclose the op
        try:
            out, vjp = fn(*raw)
        finally:
            _outside.reset(outside)
            _depth.reset(depth)
    if type(out) is Tensor:  # (a transform's result, say: a constant unless it reaches those graphs)
        if out._marks & ((2 << _level.get()) - 1):
            raise TypeError(
                f"apply: the forward of op {name!r} returned a Tensor that depends on a Tensor being "
                "differentiated outside the op (closed over by the forward): the op's VJP gives no gradient "
                "for it, so that part would be lost. Pass it to apply as an argument, and return its "
                "cotangent from the VJP."
            )
        out = out._data
    return out, vjp


def check_outside(out: Any, where: str) -> None:
    """Refuse a transformed function's output ``out`` that depends on a graph outside the op of the
    user's whose forward calls the transform (see ``run_forward``)."""
    outside = _outside.get()
    for leaf in tree_flatten(out)[0]:
        if type(leaf) is Tensor and leaf._marks & outside:
            raise TypeError(
                f"{where} inside the forward of an op recorded with apply reached a Tensor being "
                "differentiated outside the op (closed over by the forward): the op's VJP gives no "
                "gradient for it, so that part would be lost. Pass it to apply as an argument, and "
                "return its cotangent from the VJP."
            )


_tensor.set_custom_forward(run_forward)
_tensor.set_backward(backward)
