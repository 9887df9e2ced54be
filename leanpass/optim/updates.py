"""Gradient transformations and their plumbing: ``Optimizer`` (the ``init`` / ``update`` pair),
``chain``, ``clip_by_global_norm`` and ``global_norm``, ``apply_updates`` (params + updates) and,
for the eager style, ``collect_grads``.

>>> import numpy as np
>>> from leanpass import optim
>>> clip = optim.clip_by_global_norm(1.0)
>>> updates, _ = clip.update({"w": np.array([0.0, 2.0])}, clip.init(None))
>>> optim.apply_updates({"w": np.array([1.0, 1.0])}, updates)
{'w': array([1., 2.])}
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..core.tensor import Tensor, _const
from ..core.tree import TreeDef, leaf_paths, register_pytree, repeats, tree_flatten, tree_num_leaves, tree_unflatten
from ..functional import _lift
from ..functional._lift import weak

__all__ = ["Optimizer", "chain", "masked", "clip_by_global_norm", "global_norm", "apply_updates", "collect_grads",
           "set_to_zero", "freeze", "ema", "incremental_update", "reduce_on_plateau"]


class Optimizer(NamedTuple):
    """A pair of pure functions: ``init(params) -> state`` and ``update(grads, state, params) -> (updates, state)``.

    >>> opt = sgd(0.5)
    >>> opt.update(np.array([2.0]), opt.init(np.array([0.0])))[0]
    array([-1.])
    """

    init: Callable[[Any], Any]
    update: Callable[..., tuple[Any, Any]]


# ----- helpers on pytrees of arrays ------------------------------------------------------------
def _raw(x: Any) -> Any:
    """The array inside a leaf: a Tensor's data, an array, or a Python number as an array."""
    if type(x) is Tensor:
        return x._data
    return x if isinstance(x, _lift.ARRAYS) else np.asarray(x)


def _float(v: Any) -> Any:
    """``float(v)``; under ``lp.jit`` a traced number stays traced (it keeps the conversion)."""
    to_float = getattr(v, "_lp_float", None)
    return float(v) if to_float is None else to_float()


# ----- applying, clipping, chaining -------------------------------------------------------------
def apply_updates(params: Any, updates: Any) -> Any:
    """New parameters ``params + updates``, leaf by leaf; the old ones are unchanged.

    A Tensor parameter gives a new Tensor of the same dtype (with ``requires_grad`` kept, for the
    eager style); an array gives an array. A Tensor at several places of ``params`` (tied weights)
    gives one new Tensor at those places; their updates must be the same (as the optimizers make
    them from the gradients ``grad`` and ``collect_grads`` give), else a ValueError.

    >>> apply_updates({"w": Tensor([1.0], dtype=np.float32)}, {"w": np.array([0.5], dtype=np.float32)})
    {'w': Tensor([1.5], dtype=float32)}
    """
    p_leaves, pdef = tree_flatten(params)
    u_leaves, udef = tree_flatten(updates)
    if pdef is not udef and pdef != udef:
        raise ValueError(
            "apply_updates: the updates do not have the structure of the params; pass the updates "
            "that opt.update returned for these params."
        )
    out: list[Any] = []
    tied: dict[int, int] | None = None  # a Tensor at several places: id -> its first place
    if repeats(p_leaves):
        tied = {}
    for p, u in zip(p_leaves, u_leaves):
        if tied is not None and type(p) is Tensor:
            j = tied.setdefault(id(p), len(out))
            if j < len(out):  # met before: its new Tensor again, for the same update
                _check_tied(u_leaves[j], u, pdef, j, len(out))
                out.append(out[j])
                continue
        data = p._data if type(p) is Tensor else _raw(p)
        u = u._data if type(u) is Tensor else u
        if type(u) is not np.ndarray or u.dtype is not data.dtype:  # (the usual case needs no getattr)
            dtype = getattr(u, "dtype", None)
            u = u if dtype is data.dtype or dtype == data.dtype else np.asarray(u).astype(data.dtype)
        if (u.shape if type(u) is np.ndarray else np.shape(u)) != data.shape:  # (NumPy would broadcast it)
            i = len(out)
            raise ValueError(
                f"apply_updates: the update at {leaf_paths(pdef)[i]} has shape {np.shape(u)}, but the parameter "
                f"has shape {np.shape(data)}. Pass updates that opt.update made from gradients of these params."
            )
        new = data + u
        if type(p) is Tensor:  # (its array is locked read-only when a user reads it: Tensor.data)
            out.append(Tensor(new, requires_grad=True) if p._marks else _const(new))
        elif isinstance(p, np.ndarray):
            out.append(new)
        else:
            out.append(type(p)(new) if isinstance(p, (int, float)) else new)
    return tree_unflatten(pdef, out)


def _check_tied(before: Any, u: Any, pdef: Any, j: int, i: int) -> None:
    """For ``apply_updates``: the updates at places ``j`` and ``i`` of one Tensor must be the same."""
    if before is not u and not np.array_equal(_raw(before), _raw(u)):
        paths = leaf_paths(pdef)
        raise ValueError(
            f"apply_updates: the parameters at {paths[j]} and {paths[i]} are one Tensor (tied weights), but "
            "their updates differ, so they cannot stay one. Update them with the gradients leanpass.grad "
            "or optim.collect_grads gives (the same total at each place), or make them separate Tensors."
        )


def global_norm(tree: Any) -> float:
    """The L2 norm of all the leaves of ``tree`` taken together.

    >>> global_norm([np.array([3.0]), np.array([4.0])])
    5.0
    """
    leaves, _ = tree_flatten(tree)
    return _float(_norm([_raw(x) for x in leaves]))


def _norm(arrays: list[Any]) -> Any:
    """The global L2 norm as a float64 NumPy scalar: each square sum in float64, added in order."""
    total: Any = 0.0
    for a in arrays:
        total = total + np.vdot(a, a).astype(np.float64)
    return np.sqrt(total)


def clip_by_global_norm(max_norm: float) -> Optimizer:
    """A gradient transformation that rescales the gradients when their global norm exceeds ``max_norm``.

    Use it in front of an optimizer with ``chain``: ``chain(clip_by_global_norm(1.0), adam(1e-3))``.
    Given ``params``, a Tensor at several places of them (tied weights) counts once in the norm,
    as the one parameter it is.

    >>> clip = clip_by_global_norm(1.0)
    >>> clipped, _ = clip.update([np.array([3.0]), np.array([4.0])], clip.init(None))
    >>> clipped
    [array([0.6]), array([0.8])]
    """
    if not max_norm > 0:
        raise ValueError(f"clip_by_global_norm: max_norm must be > 0, got {max_norm}")

    def init(params: Any) -> tuple[()]:
        return ()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        leaves, treedef = tree_flatten(grads)
        arrays = [_raw(x) for x in leaves]
        norm = _norm(arrays if params is None else _once(arrays, params))
        if type(norm) is not np.float64:  # traced by lp.jit: no branch on the value (x * 1 is x)
            scale = np.minimum(np.float64(1.0), np.float64(max_norm) / norm)
            return tree_unflatten(treedef, [a * scale.astype(a.dtype) for a in arrays]), state
        if norm <= max_norm:
            return tree_unflatten(treedef, arrays), state
        scale = np.float64(max_norm) / norm
        return tree_unflatten(treedef, [a * scale.astype(a.dtype) for a in arrays]), state

    return Optimizer(init, update)


def _once(arrays: list[Any], params: Any) -> list[Any]:
    """``arrays`` (one per leaf of ``params``) without the places where a Tensor of ``params`` repeats."""
    p_leaves, _ = tree_flatten(params)
    if not repeats(p_leaves) or len(p_leaves) != len(arrays):
        return arrays
    seen: set[int] = set()
    out = []
    for a, p in zip(arrays, p_leaves):
        if type(p) is Tensor:
            if id(p) in seen:
                continue
            seen.add(id(p))
        out.append(a)
    return out


def chain(*transforms: Optimizer) -> Optimizer:
    """Run gradient transformations one after another (e.g. clipping, then Adam).

    >>> opt = chain(clip_by_global_norm(1.0), sgd(1.0))
    >>> updates, _ = opt.update(np.array([10.0]), opt.init(np.array([0.0])), np.array([0.0]))
    >>> updates
    array([-1.])
    """

    takes_extra = [_takes_extra(t.update) for t in transforms]

    def init(params: Any) -> tuple[Any, ...]:
        return tuple(t.init(params) for t in transforms)

    def update(grads: Any, state: tuple[Any, ...], params: Any = None, **extra: Any) -> tuple[Any, tuple[Any, ...]]:
        new_states = []
        for t, s, takes in zip(transforms, state, takes_extra):
            grads, s = t.update(grads, s, params, **extra) if extra and takes else t.update(grads, s, params)
            new_states.append(s)
        return grads, tuple(new_states)

    return Optimizer(init, update)


def _takes_extra(update: Callable[..., Any]) -> bool:
    """Whether an ``update`` takes keyword arguments beyond ``(grads, state, params)`` (``value=``, as
    ``reduce_on_plateau``'s): ``chain`` passes them on to those only."""
    try:
        params = inspect.signature(update).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.KEYWORD_ONLY, p.VAR_KEYWORD) for p in params)


# ----- freezing, averages ------------------------------------------------------------------------
def _like_leaf(x: Any, value: Any) -> Any:
    """``value`` (an array) as the kind of leaf ``x`` is: a constant Tensor for a Tensor, else the array."""
    return _const(value) if type(x) is Tensor else value


def set_to_zero() -> Optimizer:
    """A transformation whose updates are all zero (optax's ``set_to_zero``): nothing moves.

    >>> opt = set_to_zero()
    >>> opt.update({"w": np.array([1.0, 2.0])}, opt.init(None))[0]
    {'w': array([0., 0.])}
    """

    def init(params: Any) -> tuple[()]:
        return ()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        leaves, treedef = tree_flatten(grads)
        return tree_unflatten(treedef, [np.zeros_like(_raw(g)) for g in leaves]), state

    return Optimizer(init, update)


def freeze(mask: Any) -> Optimizer:
    """Freeze some parameters: their updates become zero, the others pass unchanged.

    ``mask`` has the parameters' structure (or a prefix of it) with ``True`` at the frozen leaves (for a
    model, build it with ``lp.tree_map``), or is a function ``params -> mask``; read as ``optim.masked``
    reads its mask. Put it last in a ``chain``, after
    the optimizer (and its weight decay), so that nothing reaches the frozen parameters. (To run an
    optimizer on some parameters only, use ``optim.masked``.)

    >>> import leanpass as lp
    >>> from leanpass.optim import sgd
    >>> params = {"w": np.array([1.0]), "b": np.array([1.0])}
    >>> opt = chain(sgd(0.1), freeze({"w": False, "b": True}))
    >>> updates, _ = opt.update({"w": np.array([1.0]), "b": np.array([1.0])}, opt.init(params), params)
    >>> updates
    {'w': array([-0.1]), 'b': array([0.])}
    >>> frozen_biases = freeze(lambda p: lp.tree_map(lambda x: x.ndim == 1, p))
    """

    def init(params: Any) -> tuple[()]:
        return ()

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        leaves, treedef = tree_flatten(grads)
        flags = _mask_flags(mask, grads if params is None else params, treedef, "freeze")
        out = [np.zeros_like(_raw(g)) if f else g for g, f in zip(leaves, flags)]
        return tree_unflatten(treedef, out), state

    return Optimizer(init, update)


class EmaState(NamedTuple):
    """``ema``'s state: the number of averaged values and the (biased) average."""

    steps: int
    ema: Any


register_pytree(EmaState, lambda s: ((s.steps, s.ema), None), lambda meta, ch: EmaState(*ch))


def ema(decay: float, debias: bool = True) -> Optimizer:
    """An exponential moving average of the values it is given (optax's ``ema``).

    ``update(x, state)`` returns the new average ``a = decay * a + (1 - decay) * x`` (starting from
    zeros), divided by ``1 - decay ** count`` when ``debias``. Given the parameters after each
    step, it keeps their average (PyTorch's ``AveragedModel`` with an EMA), for evaluation:
    ``avg, ema_state = averager.update(params, ema_state)``. Tensors give constant Tensors.

    >>> averager = ema(0.5)
    >>> state = averager.init(np.array([0.0]))
    >>> a1, state = averager.update(np.array([2.0]), state)
    >>> a2, state = averager.update(np.array([4.0]), state)
    >>> a1, a2  # (1 / 0.5, (0.5 * 1 + 2) / 0.75)
    (array([2.]), array([3.33333333]))
    """
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"ema: decay must be in [0, 1), got {decay}")

    def init(params: Any) -> EmaState:
        leaves, treedef = tree_flatten(params)
        return EmaState(0, tree_unflatten(treedef, [np.zeros_like(_raw(x)) for x in leaves]))

    def update(updates: Any, state: EmaState, params: Any = None) -> tuple[Any, EmaState]:
        leaves, treedef = tree_flatten(updates)
        old, _ = tree_flatten(state.ema)
        if len(old) != len(leaves):
            raise ValueError(f"ema: the values have {len(leaves)} leaves, the state was made for {len(old)}; "
                             "pass values of the structure given to init")
        count = state.steps + 1
        new = [weak(decay, a) * a + weak(1 - decay, a) * _raw(x) for a, x in zip(old, leaves)]
        c = 1.0 - decay**count
        out = [a / weak(c, a) for a in new] if debias else new
        return (tree_unflatten(treedef, [_like_leaf(x, o) for x, o in zip(leaves, out)]),
                EmaState(count, tree_unflatten(treedef, new)))

    return Optimizer(init, update)


# ----- masks ------------------------------------------------------------------------------------------
Mask = Any  # a pytree of bools (the params' structure, or a prefix of it) or a function params -> such a pytree


def masked(inner: Optimizer, mask: Mask) -> Optimizer:
    """Apply ``inner`` to the leaves where ``mask`` is True; pass the others through untouched (as optax's).

    ``mask`` is a pytree of bools with the structure of the params (or a prefix of it: one bool
    for a whole sub-tree), or a function that makes one from the params (``init``) or from the
    gradients (``update``), which have the params' structure. ``inner`` sees (and keeps state
    for) only the selected leaves, as one list; the others' updates are their gradients as given.

    >>> params = {"w": np.ones((2, 2)), "b": np.ones(2)}
    >>> opt = masked(sgd(0.5), lambda p: {k: v.ndim == 2 for k, v in p.items()})
    >>> grads = {"w": np.full((2, 2), 2.0), "b": np.full(2, 2.0)}
    >>> updates, _ = opt.update(grads, opt.init(params), params)
    >>> updates["w"][0], updates["b"]          # w through sgd, b untouched
    (array([-1., -1.]), array([2., 2.]))
    """
    if not isinstance(inner, Optimizer):
        raise TypeError(f"masked: inner must be an Optimizer (e.g. optim.adam(1e-3)), got {type(inner).__name__}")

    def init(params: Any) -> Any:
        leaves, treedef = tree_flatten(params)
        flags = _mask_flags(mask, params, treedef, "masked")
        return inner.init([x for x, f in zip(leaves, flags) if f])

    def update(grads: Any, state: Any, params: Any = None) -> tuple[Any, Any]:
        leaves, treedef = tree_flatten(grads)
        flags = _mask_flags(mask, grads, treedef, "masked")
        chosen = None if params is None else [p for p, f in zip(tree_flatten(params)[0], flags) if f]
        ups, state = inner.update([g for g, f in zip(leaves, flags) if f], state, chosen)
        it = iter(ups)
        return tree_unflatten(treedef, [next(it) if f else g for g, f in zip(leaves, flags)]), state

    return Optimizer(init, update)


def incremental_update(new: Any, old: Any, step_size: float) -> Any:
    """``step_size * new + (1 - step_size) * old``, leaf by leaf (optax's ``incremental_update``):
    one step of a moving average, e.g. of a target network's or an averaged model's parameters.

    ``avg = incremental_update(params, avg, 1 - decay)`` after each step keeps an exponential
    moving average (not debiased). The result has ``new``'s structure and kind of leaves.

    >>> incremental_update({"w": np.array([1.0])}, {"w": np.array([3.0])}, 0.25)
    {'w': array([2.5])}
    """
    leaves, treedef = tree_flatten(new)
    old_leaves, odef = tree_flatten(old)
    if len(old_leaves) != len(leaves):
        raise ValueError("incremental_update: new and old must have the same structure")
    out = []
    for x, y in zip(leaves, old_leaves):
        a, b = _raw(x), _raw(y)
        out.append(_like_leaf(x, a * weak(step_size, a) + b * weak(1 - step_size, a)))
    return tree_unflatten(treedef, out)


class _PlateauState(NamedTuple):
    """``reduce_on_plateau``'s state: the scale, the best value, counts, and the values being averaged."""

    scale: float
    best_value: float
    plateau_count: int
    cooldown_count: int
    accumulated: int
    avg_value: float


register_pytree(_PlateauState, lambda s: (tuple(s), None), lambda meta, ch: _PlateauState(*ch))


def reduce_on_plateau(factor: float = 0.1, patience: int = 10, rtol: float = 1e-4, atol: float = 0.0,
                      cooldown: int = 0, accumulation_size: int = 1, min_scale: float = 0.0) -> Optimizer:
    """Scale the updates down by ``factor`` when a loss stops improving (optax's ``contrib.reduce_on_plateau``,
    PyTorch's ``ReduceLROnPlateau``): a transformation to ``chain`` after the optimizer.

    Its ``update(updates, state, params=None, *, value)`` takes the loss as ``value``. Every
    ``accumulation_size`` calls it averages the values it saw; an average below
    ``(1 - rtol) * best - atol`` is an improvement. After ``patience`` averages in a row without
    one, the scale is multiplied by ``factor`` (not below ``min_scale``) and the next ``cooldown``
    averages are not counted. The updates are multiplied by the current scale. It decides in
    Python on the loss's value: keep its update outside ``lp.jit``.

    >>> from leanpass.optim import sgd
    >>> opt = chain(sgd(1.0), reduce_on_plateau(factor=0.5, patience=2))
    >>> p = np.array([0.0])
    >>> state = opt.init(p)
    >>> for loss in [1.0, 1.0, 1.0]:
    ...     updates, state = opt.update(np.array([1.0]), state, p, value=loss)
    >>> updates  # 1.0, then two averages without improvement: the scale halves
    array([-0.5])
    """
    if not 0.0 < factor < 1.0:
        raise ValueError(f"reduce_on_plateau: factor must be in (0, 1), got {factor}")
    if rtol < 0.0 or atol < 0.0 or rtol > 1.0 or (rtol == 0.0 and atol == 0.0):
        raise ValueError(f"reduce_on_plateau: need 0 <= rtol <= 1, atol >= 0 and one of them > 0; got rtol={rtol}, "
                         f"atol={atol}")
    if patience < 0 or cooldown < 0 or accumulation_size < 1:
        raise ValueError("reduce_on_plateau: patience and cooldown must be >= 0 and accumulation_size >= 1")

    def init(params: Any) -> _PlateauState:
        return _PlateauState(1.0, float("inf"), 0, 0, 0, 0.0)

    def update(updates: Any, state: _PlateauState, params: Any = None, *, value: Any = None) -> tuple[Any, Any]:
        if value is None:
            raise TypeError("reduce_on_plateau: pass the loss to update: opt.update(grads, state, params, value=loss)")
        count = state.accumulated + 1
        avg = (state.accumulated * state.avg_value + float(_raw(value))) / count
        state = state._replace(accumulated=count, avg_value=avg)
        if count == accumulation_size:
            state = _plateau_step(state)
        scale = state.scale
        if scale != 1.0:
            leaves, treedef = tree_flatten(updates)
            updates = tree_unflatten(treedef, [_raw(u) * np.asarray(scale, dtype=_raw(u).dtype) for u in leaves])
        return updates, state

    def _plateau_step(state: _PlateauState) -> _PlateauState:
        improved = state.avg_value < (1 - rtol) * state.best_value - atol
        best = state.avg_value if improved else state.best_value
        plateau = 0 if improved else state.plateau_count + 1
        scale, cool = state.scale, state.cooldown_count
        if cool > 0:  # in cooldown: count down, ignore the plateau
            plateau, cool = 0, cool - 1
        elif plateau == patience:
            plateau, cool = 0, cooldown
            scale = max(scale * factor, min_scale)
        else:
            cool = 0
        return _PlateauState(scale, best, plateau, cool, 0, 0.0)

    return Optimizer(init, update)


def _mask_flags(mask: Mask, tree: Any, treedef: TreeDef, where: str) -> list[bool]:
    """One bool per leaf of ``tree`` (of structure ``treedef``): ``mask`` (or ``mask(tree)``) read
    as a pytree of bools with that structure, or a prefix of it."""
    m = mask(tree) if callable(mask) else mask
    m_leaves, m_def = tree_flatten(m)
    flags: list[bool] = []
    it = iter(m_leaves)

    def walk(md: TreeDef, td: TreeDef) -> None:
        if md.kind is None:  # a bool for the whole sub-tree
            flag = next(it)
            if not isinstance(flag, (bool, np.bool_)):
                raise TypeError(f"{where}: the mask's leaves must be bools (True: this leaf is included), "
                                f"got a {type(flag).__name__}")
            flags.extend([bool(flag)] * tree_num_leaves(td))
            return
        if md.kind is not td.kind or md.meta != td.meta or len(md.children) != len(td.children):
            raise ValueError(
                f"{where}: the mask does not have the structure of the params (the structure of the parameters, "
                "or a prefix of it). Make it from them, e.g. "
                "mask=lambda p: leanpass.tree_map(lambda x: x.ndim >= 2, p)."
            )
        for a, b in zip(md.children, td.children):
            walk(a, b)

    walk(m_def, treedef)
    return flags


# ----- the eager style ---------------------------------------------------------------------------
def collect_grads(params: Any) -> Any:
    """The ``.grad`` of each Tensor leaf of ``params`` (after ``loss.backward()``), as arrays.

    A leaf with no gradient yet (not reached by the loss) gives zeros. The result has the
    structure of ``params``, ready for ``opt.update(grads, state, params)``.

    >>> w = Tensor([1.0, 2.0], requires_grad=True)
    >>> (w * 3.0).sum().backward()
    >>> collect_grads({"w": w, "unused": Tensor([0.0], requires_grad=True)})
    {'w': array([3., 3.]), 'unused': array([0.])}
    """
    leaves, treedef = tree_flatten(params)
    out = []
    for i, x in enumerate(leaves):
        if type(x) is not Tensor:
            raise TypeError(
                f"collect_grads: leaf {i} is a {type(x).__name__}, not a Tensor. The eager style needs "
                "Tensor parameters with requires_grad=True (see leanpass.nn.trainable)."
            )
        g = x.grad
        out.append(np.zeros_like(x._data) if g is None else g._data)
    return tree_unflatten(treedef, out)


# Their public home is ``leanpass.optim`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__ + ["EmaState", "_PlateauState"]:
    globals()[_name].__module__ = "leanpass.optim"
del _name
