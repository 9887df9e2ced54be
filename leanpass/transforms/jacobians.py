"""Whole Jacobians and Hessians: ``jacrev`` (``jacobian``), ``jacfwd``, ``hessian``, and ``hvp``.

Both Jacobians have JAX's structure: for ``f(*args)`` differentiated in ``argnums``, the result is
the output's pytree with, at each output leaf, the differentiated argument's pytree (a tuple of
them for a tuple ``argnums``), each leaf an array of shape ``out.shape + in.shape``. One function,
``_assemble``, builds that structure for both modes.

``jacrev`` records ``f`` once and pulls back one unit cotangent per output element; ``jacfwd``
records ``f`` once and pushes one unit tangent per input element through the recorded nodes
(``forward.Sweep``). Pick ``jacfwd`` for few inputs and many outputs, ``jacrev`` for the reverse.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ..core.tensor import Tensor, _const
from ..core.tree import _first_difference, tree_flatten, tree_unflatten
from ..functional import _lift
from .forward_mode import Sweep, jvp
from .reverse_mode import _Call, _split_aux, grad

Argnums = int | tuple[int, ...]


def _data(x: Any) -> Any:
    return x._data if type(x) is Tensor else _as(x)


def _as(x: Any, dtype: Any = None) -> Any:
    """``np.asarray(x, dtype)``, kept recorded for a stand-in of jit (or vmap), which it would make a constant."""
    if isinstance(x, _lift.ARRAYS) and type(x) is not np.ndarray:
        return x if dtype is None or x.dtype == dtype else x.astype(dtype)
    return np.asarray(x, dtype)


def _assemble(tr: _Call, out_leaves: list[Any], out_def: Any, block: Callable[[int, int, int], Any]) -> Any:
    """The Jacobian's pytree: ``block(o, k, i)`` is the block of output leaf ``o`` and leaf ``i``
    of the ``k``-th differentiated argument, already of shape ``out.shape + in.shape``."""
    per_out = []
    for o in range(len(out_leaves)):
        per_arg = []
        for k, (leaves, treedef) in enumerate(tr.trees):
            per_arg.append(tree_unflatten(treedef, [block(o, k, i) for i in range(len(leaves))]))
        per_out.append(per_arg[0] if tr.single else tuple(per_arg))
    return tree_unflatten(out_def, per_out)


def _block(pieces: list[Any], axis: int, shape: tuple[int, ...], like: Any, dtype: Any, nested: bool) -> Any:
    """Stack ``pieces`` (rows or columns of one block) along ``axis`` into ``shape``, as a Tensor
    inside another transform or for a Tensor input ``like``, else as an array of ``dtype``."""
    if not pieces or math.prod(shape) == 0:
        out = np.zeros(shape, dtype)
        return _const(out) if nested or type(like) is Tensor else out
    if nested or any(type(p) is Tensor for p in pieces):
        from ..numpy.basics import stack

        # one piece (the gradient of a scalar: the inner half of a Hessian) is only reshaped
        t = (pieces[0] if type(pieces[0]) is Tensor else _const(pieces[0])) if len(pieces) == 1 else stack(
            pieces, axis=axis)
        t = t.reshape(shape)
        return t if nested else _const(t._data)
    out = np.stack([_as(p, dtype) for p in pieces], axis=axis).reshape(shape)
    return _const(out) if type(like) is Tensor else out


def _outputs(tr: _Call, has_aux: bool, where: str) -> tuple[Any, Any, list[Any], Any]:
    out, aux = _split_aux(tr.out, has_aux, where)
    out_leaves, out_def = tree_flatten(out)
    for o in out_leaves:
        if type(o) is not Tensor and not isinstance(o, (int, float, np.generic)) and not _lift.is_array(o):
            raise TypeError(
                f"{where}: f must return arrays, Tensors or pytrees of them, but an output is a "
                f"{type(o).__name__}."
            )
    return out, aux, out_leaves, out_def


def jacrev(f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f`` in arguments ``argnums``, by reverse mode: one pull-back per output element.

    Arguments and outputs may be pytrees; the result is the output's tree of the argument's tree
    (see the module docstring), each leaf of shape ``out.shape + in.shape``, an array (a Tensor
    for a Tensor argument). With ``has_aux=True``, ``f`` returns ``(output, aux)`` and the
    result is ``(jacobian, aux)``. ``jacobian`` is another name for it.

    >>> jacrev(lambda x: x * x)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    >>> jacrev(lambda p: p["a"] * p["b"])({"a": 2.0, "b": 3.0})
    {'a': array(3.), 'b': array(2.)}
    """

    return _jacrev(f, argnums, has_aux, "jacrev")


def jacobian(f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """``jacrev`` under the name ``jacobian``: the Jacobian, in reverse mode, with JAX's structure.

    >>> j = jacobian(lambda p: p["w"] * p["b"])({"w": np.array([1.0, 2.0]), "b": 3.0})
    >>> j["w"], j["b"]
    (array([[3., 0.],
           [0., 3.]]), array([1., 2.]))
    """
    return _jacrev(f, argnums, has_aux, "jacobian")


def _jacrev(f: Callable[..., Any], argnums: Argnums, has_aux: bool, where: str) -> Callable[..., Any]:
    @functools.wraps(f)
    def jac(*args: Any, **kwargs: Any) -> Any:
        tr = _Call(f, args, kwargs, argnums, where)
        out, aux, out_leaves, out_def = _outputs(tr, has_aux, where)
        rows: list[list[list[list[Any]]]] = []  # [output leaf][argument][leaf] -> rows
        for o in out_leaves:
            data = _data(o)
            dtype = data.dtype if data.dtype.kind == "f" else np.float64
            per: list[list[list[Any]]] = [[[] for _ in leaves] for leaves, _ in tr.trees]
            unit = np.zeros(data.size, dtype)
            for j in range(data.size):
                unit[j] = 1
                pulled = tr.pull_back([o], [unit.reshape(data.shape).copy()])
                unit[j] = 0
                for k, tree in enumerate((pulled,) if tr.single else pulled):
                    for i, leaf in enumerate(tree_flatten(tree)[0]):
                        per[k][i].append(leaf)
            rows.append(per)

        def block(o: int, k: int, i: int) -> Any:
            x = tr.inputs[k][i]
            shape = np.shape(_data(out_leaves[o])) + x._data.shape
            return _block(rows[o][k][i], 0, shape, tr.trees[k][0][i], x._data.dtype, tr.nested)

        result = _assemble(tr, out_leaves, out_def, block)
        return (result, tr.finish(aux)) if has_aux else result

    return jac



def jacfwd(f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Jacobian of ``f`` in arguments ``argnums``, by forward mode: one tangent pushed per input element.

    ``f`` runs once; each input direction is then pushed through the recorded operations. The
    result has ``jacrev``'s structure and values (see there).

    >>> jacfwd(lambda x: x * x)(np.array([1.0, 2.0]))
    array([[2., 0.],
           [0., 4.]])
    >>> jacfwd(lambda x, y: x * y, argnums=(0, 1))(2.0, 3.0)
    (array(3.), array(2.))
    """
    return _jacfwd(f, argnums, has_aux, "jacfwd")


def _jacfwd(f: Callable[..., Any], argnums: Argnums, has_aux: bool, where: str) -> Callable[..., Any]:
    @functools.wraps(f)
    def jac(*args: Any, **kwargs: Any) -> Any:
        tr = _Call(f, args, kwargs, argnums, where)
        out, aux, out_leaves, out_def = _outputs(tr, has_aux, where)
        sweep = Sweep(out_leaves, tr.bit, tr.nested, tr.level)
        cols: dict[tuple[int, int], list[Any]] = {}  # (argument, leaf) -> [column per element] per output
        pushed_for: dict[int, list[list[Any]]] = {}  # a tied input (one node in several places): pushed once
        for k, ins in enumerate(tr.inputs):
            for i, x in enumerate(ins):
                if x._seq in pushed_for:
                    cols[k, i] = pushed_for[x._seq]
                    continue
                data = x._data
                per_out: list[list[Any]] = [[] for _ in out_leaves]
                unit = np.zeros(data.size, data.dtype)
                for j in range(data.size):
                    unit[j] = 1
                    pushed = sweep.push({x._seq: unit.reshape(data.shape).copy()})
                    unit[j] = 0
                    for o, leaf in enumerate(out_leaves):
                        t = pushed.get(leaf._seq) if type(leaf) is Tensor else None
                        per_out[o].append(np.zeros(np.shape(_data(leaf)), data.dtype) if t is None else t)
                cols[k, i] = pushed_for[x._seq] = per_out

        def block(o: int, k: int, i: int) -> Any:
            x = tr.inputs[k][i]
            out_shape = np.shape(_data(out_leaves[o]))
            pieces = cols[k, i][o]
            b = _block(pieces, len(out_shape), out_shape + (x._data.size,), tr.trees[k][0][i], x._data.dtype,
                       tr.nested)
            return b.reshape(out_shape + x._data.shape)

        result = _assemble(tr, out_leaves, out_def, block)
        return (result, tr.finish(aux)) if has_aux else result

    return jac


def hessian(f: Callable[..., Any], argnums: Argnums = 0, has_aux: bool = False) -> Callable[..., Any]:
    """The Hessian of a scalar ``f``: ``jacfwd(jacrev(f))``, with its structure over pytrees.

    For one array argument it has shape ``x.shape + x.shape``; for a dict of parameters it is a
    dict of dicts, ``h[a][b]`` of shape ``p[a].shape + p[b].shape``.

    >>> hessian(lambda x: (x ** 3).sum())(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    >>> h = hessian(lambda p: p["x"] ** 2 * p["y"])({"x": 1.0, "y": 2.0})
    >>> float(h["x"]["x"]), float(h["x"]["y"]), float(h["y"]["y"])
    (4.0, 2.0, 0.0)
    """
    return _jacfwd(_jacrev(f, argnums, has_aux, "hessian"), argnums, has_aux, "hessian")


def hvp(f: Callable[..., Any]) -> Callable[[Any, Any], Any]:
    """Hessian-vector product ``H(x) @ v`` of a scalar ``f``, without forming the Hessian.

    It is forward over reverse: the ``jvp`` of ``grad(f)`` at ``x`` in the direction ``v``.
    ``x`` may be a pytree; ``v`` has its structure and shapes (and is cast to its dtypes); the
    result has the form of ``grad(f)(x)``. A (nested) list of numbers is one array, as in NumPy.

    >>> hvp(lambda x: (x ** 3).sum())(np.array([1.0, 2.0]), np.array([1.0, 1.0]))
    array([ 6., 12.])
    """

    def product(x: Any, v: Any) -> Any:
        if isinstance(x, (list, tuple)) and all(type(leaf) in (int, float) for leaf in tree_flatten(x)[0]):
            x = np.asarray(x, dtype=np.float64)
        x_leaves, x_def = tree_flatten(x)
        v_leaves, v_def = ([v], x_def) if x_def.kind is None else tree_flatten(v)  # x one array: v too
        if v_def != x_def:
            raise ValueError(f"hvp: v must have the structure of x ({_first_difference(x_def, v_def)})")
        vs: list[Any] = []
        for a, b in zip(x_leaves, v_leaves):
            if type(b) is Tensor and b._marks:  # differentiated by an outer transform: kept as it is
                vs.append(b)
                continue
            data = _data(a)
            vb = _as(_data(b), dtype=data.dtype if data.dtype.kind == "f" else None)  # x's dtype
            if vb.shape != data.shape:
                raise ValueError(f"hvp: v must have the shape of x, {data.shape}, but has shape {vb.shape}")
            vs.append(vb)
        _, tangent = jvp(grad(f), (x,), (tree_unflatten(x_def, vs),))
        return _like(tangent, x)

    return product


def _like(tangent: Any, x: Any) -> Any:
    """A tangent of ``grad(f)`` in the form of the gradient: arrays for arrays, Tensors for Tensors."""
    t_leaves, t_def = tree_flatten(tangent)
    x_leaves = tree_flatten(x)[0]
    out: list[Any] = []
    for t, leaf in zip(t_leaves, x_leaves):
        if type(t) is Tensor and t._marks:  # inside another transform
            out.append(t)
        elif type(leaf) is Tensor:
            out.append(t if type(t) is Tensor else _const(t))
        else:
            out.append(_data(t))
    return tree_unflatten(t_def, out)
