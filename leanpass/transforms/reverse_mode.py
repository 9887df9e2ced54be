"""Function transforms in reverse mode: ``grad``, ``value_and_grad``, ``vjp`` (Jacobians: ``jacobians.py``).

Each call gives the differentiated arguments fresh input nodes carrying a mark of their
own (one per nesting level), runs the function, and pulls back through the one reverse pass.
An input that is already on a live graph (an outer transform's input, or a Tensor with
``requires_grad``) is linked to it through an ``identity`` node, so nested transforms compose
without perturbation confusion. Inside another transform the pass is replayed on Tensors
(``create_graph``) so the result can be differentiated again; at the top level it runs on raw
arrays.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core import tensor as _tensor
from ..core.engine import _depth, _level, _outside, _real_cotangent, check_outside, reverse_pass
from ..core.tensor import Tensor, _const, _grad_enabled, _grad_mask, _mask_get, _next_seq, _node
from ..core.tree import repeats, tree_flatten, tree_map, tree_unflatten
from ..functional import _lift
from ..functional.unary import _pass_through


def _fresh(x: Any, bit: int, where: str) -> Tensor:
    """A new input node for ``x`` carrying ``bit``; linked to ``x``'s graph when it has one."""
    if type(x) is Tensor:
        data = x._data
        if x._marks and x._marks & _mask_get():
            _check_float(data, where)
            if _tensor._forward_hook is not None:  # a jvp runs: the link passes x's tangent on
                return _tensor._forward_hook("identity", data, _pass_through, x._marks | bit, (x,))
            return _node(data, x._marks | bit, "identity", (x,), _pass_through)
    else:
        data = x.view() if isinstance(x, _lift.ARRAYS) and _lift.is_array(x) else _lift.asarray(x)
    dtype = getattr(data, "dtype", None)
    if dtype is None or dtype.kind != "f":
        _check_float(data, where)  # raises
    return _const(data, bit, _next_seq())


def _check_float(data: Any, where: str) -> None:
    dtype = getattr(data, "dtype", None)
    if dtype is None or dtype.kind != "f":
        raise TypeError(
            f"{where} needs floating-point inputs to differentiate, but got "
            f"{dtype if dtype is not None else type(data).__name__}. Pass floats "
            "(e.g. 3.0, not 3) or an array with dtype float64 / float32."
        )


def _output(t: Any, ct: Any, like: Any, linked: bool) -> Any:
    """A gradient in the form the user gave the input: Tensor for Tensor, array otherwise."""
    if linked:
        return ct if type(ct) is Tensor else _const(ct)
    data = t._data
    if not isinstance(ct, (np.ndarray, np.generic, float, int)):  # a stand-in of jit: no copies or flags
        arr = ct if ct.dtype == data.dtype else ct.astype(data.dtype)
        arr = arr if arr.shape == data.shape else np.broadcast_to(arr, data.shape)
        if type(like) is Tensor:
            return _const(arr)
        return arr[()] if arr.ndim == 0 and not _lift.is_array(like) else arr
    arr = ct if type(ct) is np.ndarray and ct.dtype is data.dtype else np.asarray(ct, dtype=data.dtype)
    if arr.shape != data.shape:
        arr = np.broadcast_to(arr, data.shape)
    if type(like) is Tensor:
        return _const(arr)
    if arr.flags.writeable:
        arr = arr.copy() if arr.base is not None else arr
        arr.flags.writeable = False
    return arr[()] if arr.ndim == 0 and not _lift.is_array(like) else arr


def _detach_tree(tree: Any) -> Any:
    if type(tree) is Tensor:  # the usual case: a loss
        return _const(tree._data)
    return tree_map(lambda x: _const(x._data) if type(x) is Tensor else x, tree)


_ONES: dict[Any, np.ndarray] = {}  # dtype -> a read-only 0-d 1


def _one(dtype: Any) -> np.ndarray:
    one = _ONES[dtype] = np.array(1, dtype)
    one.flags.writeable = False
    return one


class _Call:
    """One call of a transformed function: fresh inputs, the output, and how to pull back."""

    def __init__(self, f: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                 argnums: int | tuple[int, ...], where: str) -> None:
        nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
        for n in nums:
            if not -len(args) <= n < len(args):
                raise ValueError(f"{where}: argnums={argnums} but the function got {len(args)} arguments")
        depth = _depth.get()
        level = _level.get()
        self.level = level
        self.bit = 2 << level
        self.nested = depth > 0
        self.where = where
        bit = self.bit
        # Nodes made before the inputs cannot depend on them (one may carry this bit: see reverse_pass).
        self.start = _next_seq()
        self.trees = []
        self.inputs = []
        new_args = list(args)
        for n in nums:  # (loops, not comprehensions: no call of their own in Python 3.11)
            leaves, treedef = tree_flatten(args[n])
            ins = []
            for x in leaves:
                ins.append(_fresh(x, bit, where))
            self.trees.append((leaves, treedef))
            self.inputs.append(ins)
            new_args[n] = tree_unflatten(treedef, ins)
        every = leaves if len(nums) == 1 else [x for leaves, _ in self.trees for x in leaves]
        self.tied = len(every) > 1 and repeats(every)
        if self.tied:
            self._tie(nums, new_args)
        token = _depth.set(depth + 1)
        level_token = _level.set(level + 1)
        enabled = _grad_mask.set(-1)  # record inside f even under an outer no_grad()
        try:
            self.out = f(*new_args, **kwargs)
        finally:
            _grad_mask.reset(enabled)
            _level.reset(level_token)
            _depth.reset(token)
        if not self.nested and _outside.get():  # inside an op's forward (engine.run_forward)
            check_outside(self.out, where)
        self.single = isinstance(argnums, int)

    def _tie(self, nums: tuple[int, ...], new_args: list[Any]) -> None:
        """One Tensor object at several leaves (tied weights) is one variable: one input node for all
        its places, so each place gets the total gradient, as its one ``.grad`` does."""
        first: dict[int, Tensor] = {}
        for n, (leaves, treedef), ins in zip(nums, self.trees, self.inputs):
            for i, x in enumerate(leaves):
                if type(x) is Tensor:
                    ins[i] = first.setdefault(id(x), ins[i])
            new_args[n] = tree_unflatten(treedef, ins)

    def pull_back(self, roots: list[Any], seeds: list[Any]) -> Any:
        """Cotangents for each differentiated argument, in its own pytree structure."""
        live = [(r, s) for r, s in zip(roots, seeds) if type(r) is Tensor and r._marks & self.bit]
        # Recorded when the function ran inside another transform, or when the cotangents are
        # being differentiated themselves (a vjp_fn called inside grad, say).
        nested = self.nested
        if not nested:  # (a loop: the usual top-level call, a constant seed, makes no generator)
            for _, s in live:
                if type(s) is Tensor and s._marks:
                    nested = True
                    break
        if nested:  # a recorded pass, even under an outer no_grad(); the transforms its rules
            # call take marks above this one (on raw arrays they record nothing that could meet it)
            level_token = _level.set(max(_level.get(), self.level + 1))
            try:
                with _grad_enabled():
                    seeds_ = [s if type(s) is Tensor else _const(s) for _, s in live]
                    leaves = reverse_pass([r for r, _ in live], seeds_, self.bit, True, self.start)
            finally:
                _level.reset(level_token)
        else:  # raw arrays: nothing is recorded
            seeds_ = [s._data if type(s) is Tensor else s for _, s in live]
            leaves = reverse_pass([r for r, _ in live], seeds_, self.bit, False, self.start)
        results = []
        made: dict[int, Any] | None = {} if self.tied else None  # tied: one gradient, the same object at each place
        for (orig, treedef), ins in zip(self.trees, self.inputs):
            grads = []
            for x, t in zip(orig, ins):
                hit = leaves.get(t._seq)
                ct = hit[1] if hit is not None else np.zeros_like(t._data)
                grads.append(_output(t, ct, x, nested))
            if made is not None:
                grads = [made.setdefault(t._seq, g) for t, g in zip(ins, grads)]
            results.append(tree_unflatten(treedef, grads))
        return results[0] if self.single else tuple(results)

    def finish(self, tree: Any) -> Any:
        """What the caller gets of ``tree`` (an output or aux): detached at the top level."""
        return tree if self.nested else _detach_tree(tree)


def _split_aux(out: Any, has_aux: bool, where: str) -> tuple[Any, Any]:
    """``(value, aux)`` of a function's output; aux is None without ``has_aux``."""
    if not has_aux:
        return out, None
    if not (type(out) is tuple and len(out) == 2):
        raise TypeError(
            f"{where}(has_aux=True): the function must return a pair (value, aux), but it returned "
            f"{type(out).__name__}{' of length ' + str(len(out)) if isinstance(out, (tuple, list)) else ''}."
        )
    return out[0], out[1]


def value_and_grad(
    f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False
) -> Callable[..., Any]:
    """Like ``grad``, but the transformed function returns ``(value, gradient)``.

    With ``has_aux=True``, ``f`` returns ``(value, aux)`` and the result is ``((value, aux), gradient)``.

    >>> loss, g = value_and_grad(lambda w: (w * w).sum())(np.array([1.0, 2.0]))
    >>> float(loss.item()), g
    (5.0, array([2., 4.]))
    """

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        tr = _Call(f, args, kwargs, argnums, "grad")
        out, aux = _split_aux(tr.out, has_aux, "grad")
        if type(out) is not Tensor:
            if not isinstance(out, (int, float, np.ndarray, np.generic)):
                raise TypeError(
                    f"grad: the function must return a scalar Tensor, but returned "
                    f"{type(out).__name__}."
                )
            out = _const(np.asarray(out))
        data = out._data if isinstance(out._data, _lift.ARRAYS) else np.asarray(out._data)
        if data.dtype.kind != "f":
            what = " (a comparison or a test such as np.allclose has no gradient)" if data.dtype.kind == "b" else ""
            raise TypeError(
                f"grad: the function must return a floating-point scalar, but it returned a value of "
                f"dtype {data.dtype}{what}. Return the float quantity to differentiate (e.g. a loss)."
            )
        if data.size != 1:
            raise TypeError(
                f"grad: gradient is only defined for functions with a scalar output. Output "
                f"had shape {out.shape}. Reduce it (e.g. .sum() or .mean()), or use "
                "leanpass.vjp(f, x) to pull back a cotangent of that shape."
            )
        # a scalar loss is 0-d: its seed is a shared read-only 1 (a rule never writes into its g)
        seed = _ONES.get(data.dtype) if data.ndim == 0 else np.ones(data.shape, data.dtype)
        if seed is None:
            seed = _one(data.dtype)
        g = tr.pull_back([out], [seed])
        value = tr.finish(out)
        return ((value, tr.finish(aux)), g) if has_aux else (value, g)

    return wrapped


def grad(f: Callable[..., Any], argnums: int | tuple[int, ...] = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The gradient of a scalar-valued ``f`` with respect to argument(s) ``argnums``.

    Arguments may be pytrees (dict / list / tuple nests) of Tensors, arrays or floats; the
    gradient comes back in the same structure, a Tensor for a Tensor and an array otherwise.
    One Tensor at several places of the differentiated arguments (tied weights) is one variable:
    each place gets the total gradient, as its ``.grad`` does after ``backward()``.
    ``grad`` composes: ``grad(grad(f))`` is the second derivative.

    >>> grad(lambda x: x ** 3)(2.0)
    np.float64(12.0)
    >>> grad(grad(lambda x: x ** 3))(2.0)
    np.float64(12.0)
    >>> grad(lambda x: grad(lambda y: x * y)(x))(3.0)
    np.float64(1.0)
    """
    vg = value_and_grad(f, argnums, has_aux)

    @functools.wraps(f)
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        (value_or_pair, g) = vg(*args, **kwargs)
        return (g, value_or_pair[1]) if has_aux else g

    return wrapped


def vjp(f: Callable[..., Any], *primals: Any, has_aux: bool = False) -> Any:
    """Run ``f(*primals)`` and return ``(output, vjp_fn)``; ``vjp_fn(cotangent)`` pulls back.

    ``vjp_fn`` takes a cotangent shaped like the output (a pytree for a pytree output) and
    returns a tuple with one gradient per primal. It may be called many times.

    >>> out, pull = vjp(lambda x: x * 2.0, np.array([1.0, 2.0]))
    >>> pull(np.array([1.0, 10.0]))
    (array([ 2., 20.]),)
    """
    tr = _Call(f, primals, {}, tuple(range(len(primals))), "vjp")
    out, aux = _split_aux(tr.out, has_aux, "vjp")
    out_leaves, out_def = tree_flatten(out)

    def vjp_fn(cotangent: Any) -> Any:
        # (an array output takes its cotangent as one array: a nested list is its values)
        ct_leaves, ct_def = ([cotangent], out_def) if out_def.kind is None else tree_flatten(cotangent)
        if ct_def != out_def:
            raise ValueError(
                "vjp_fn: the cotangent must have the structure of the output "
                f"({out_def}), got {ct_def}"
            )
        seeds = []
        for o, c in zip(out_leaves, ct_leaves):
            # A copy (a Tensor is immutable already): a gradient may be this very array.
            c_arr: Any
            if type(c) is Tensor:
                c_arr = c
            elif isinstance(c, _lift.ARRAYS) and type(c) is not np.ndarray:  # a stand-in of jit
                c_arr = c.astype(o.dtype if type(o) is Tensor else np.result_type(o))
            else:
                c_arr = np.array(_real_cotangent(c, "vjp_fn"), dtype=np.result_type(o))
            if np.shape(c_arr) != np.shape(o):
                raise ValueError(
                    f"vjp_fn: cotangent shape {np.shape(c_arr)} does not match the output "
                    f"shape {np.shape(o)}"
                )
            seeds.append(c_arr)
        return tr.pull_back(out_leaves, seeds)

    result = tr.finish(out)
    return (result, vjp_fn, tr.finish(aux)) if has_aux else (result, vjp_fn)
