"""Optimizers as pairs of pure functions, in the style of optax.

An optimizer has ``init(params) -> state`` and ``update(grads, state, params) -> (updates,
state)``; ``apply_updates(params, updates)`` returns new parameters. Nothing is changed in
place: the old parameters and the old state stay valid. ``params`` and ``grads`` are pytrees of
the same structure (a model, a dict of Tensors, ...); updates and state hold NumPy arrays.

Functional style:

>>> import numpy as np
>>> import leanpass as lp
>>> from leanpass import optim
>>> params = {"w": lp.Tensor([1.0, -2.0])}
>>> opt = optim.sgd(0.1)
>>> state = opt.init(params)
>>> grads = lp.grad(lambda p: (p["w"] ** 2).sum())(params)
>>> updates, state = opt.update(grads, state, params)
>>> optim.apply_updates(params, updates)
{'w': Tensor([ 0.8, -1.6])}

Eager style (``.backward()`` leaves gradients in ``.grad``): read them with ``collect_grads``.

>>> w = lp.Tensor([1.0, -2.0], requires_grad=True)
>>> (w ** 2).sum().backward()
>>> updates, state = opt.update(optim.collect_grads([w]), opt.init([w]), [w])
>>> optim.apply_updates([w], updates)
[Tensor([ 0.8, -1.6], requires_grad=True)]
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..core.tensor import Tensor, _const
from ..core.tree import register_pytree, repeats, tree_flatten, tree_unflatten
from ..functional import _lift
from ..functional._lift import weak

__all__ = [
    "Optimizer", "sgd", "adam", "adamw", "apply_updates", "clip_by_global_norm", "global_norm",
    "collect_grads", "chain", "constant_schedule", "cosine_decay", "exponential_decay", "warmup_cosine",
]

Schedule = Callable[[int], float]
LearningRate = float | Schedule


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
    return x if isinstance(x, _lift.RAW) else np.asarray(x)


def _float(v: Any) -> Any:
    """``float(v)``; under ``lp.jit`` a traced number stays traced (it keeps the conversion)."""
    to_float = getattr(v, "_lp_float", None)
    return float(v) if to_float is None else to_float()


def _flat_arrays(tree: Any) -> tuple[list[Any], Any]:
    """The leaves of ``tree`` as arrays, and its structure."""
    leaves, treedef = tree_flatten(tree)
    return [x._data if type(x) is Tensor else _raw(x) for x in leaves], treedef  # Tensors inline: no call


def _same(treedef: Any, other: Any, what: str, kind: str) -> None:
    if treedef is not other and treedef != other:  # a remembered treedef is the very same object
        raise ValueError(
            f"{what}: the {kind} do not have the structure of the parameters the state was made for. Pass grads "
            "computed for these params (leanpass.grad(loss_fn)(params) has the params' structure), "
            "and a state from opt.init(params)."
        )


def _lr_at(lr: LearningRate, step: int) -> float:
    """The learning rate as a Python float (a float, or a schedule called with the step count)."""
    return _float(lr(step)) if callable(lr) else float(lr)


def _check_lr(lr: LearningRate, where: str) -> None:
    if not callable(lr) and not (isinstance(lr, (int, float, np.floating)) and lr >= 0):
        raise ValueError(f"{where}: learning_rate must be a number >= 0 or a schedule (step -> float), got {lr!r}")


def _arrays(tree: Any, state_def: Any, where: str, kind: str = "gradients") -> list[Any]:
    """The leaves of ``tree`` (``kind``: the gradients or the params) as arrays, checked to have the
    state's structure."""
    arrays, treedef = _flat_arrays(tree)
    _same(state_def, treedef, where, kind)
    return arrays


class _State(NamedTuple):
    """Optimizer state: the step count and per-parameter arrays, flat (with the structure kept)."""

    step: int
    slots: tuple[tuple[Any, ...], ...]
    treedef: Any


def _state(step: int, slots: tuple[tuple[Any, ...], ...], treedef: Any) -> _State:
    """``_State(step, slots, treedef)``, made in C (a NamedTuple's own ``__new__`` is Python)."""
    return tuple.__new__(_State, (step, slots, treedef))


# A state is a pytree of its step and slots; the parameters' structure is its metadata (so that
# ``leanpass.save`` can store it and a loaded state has the same structure as a fresh one).
register_pytree(_State, lambda s: ((s.step, s.slots), s.treedef), lambda meta, ch: _state(ch[0], ch[1], meta))


def _shapes_named(where: str) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """An ``update`` whose shape errors name the parameter (``.layers[0].weight``), not only NumPy's shapes."""

    def wrap(update: Callable[..., Any]) -> Callable[..., Any]:
        def checked(grads: Any, state: _State, params: Any = None) -> tuple[Any, _State]:
            try:
                return update(grads, state, params)
            except ValueError as e:
                raise _shape_mismatch(where, grads, state, params) or e from None

        checked.__doc__ = update.__doc__
        return checked

    return wrap


def _leaf_paths(treedef: Any) -> list[str]:
    """The paths of a tree's leaves, in order (``.layers[0].weight``, ``['w']``), for error messages."""
    from ..checkpoint import _child_names

    paths: list[str] = []
    stack = [(treedef, "")]
    while stack:
        td, path = stack.pop()
        if td.kind is None:
            paths.append(path or "<root>")
            continue
        names = ([f"[{k!r}]" for k in td.meta] if td.kind is dict else _child_names(td.kind, len(td.children)))
        stack.extend(reversed([(c, path + n) for c, n in zip(td.children, names)]))
    return paths


def _check_shape(g: Any, slot: Any) -> None:
    """A gradient must have its parameter's shape: NumPy would broadcast one of another shape into the state."""
    if np.shape(g) != np.shape(slot):
        raise ValueError(f"a gradient of shape {np.shape(g)} for a parameter of shape {np.shape(slot)}")


def _shape_mismatch(where: str, grads: Any, state: _State, params: Any) -> ValueError | None:
    """The first leaf whose shape differs from the one the state was made for, as an error (or None)."""
    paths = _leaf_paths(state.treedef)
    made_for = state.slots[0] if state.slots else None
    for kind, tree in (("gradient", grads), ("parameter", params)):
        if tree is None:
            continue
        arrays, _ = _flat_arrays(tree)
        refs = made_for if made_for is not None else _flat_arrays(params)[0] if params is not None else arrays
        for path, a, ref in zip(paths, arrays, refs):
            if np.shape(a) != np.shape(ref):
                return ValueError(
                    f"{where}: the {kind} at {path} has shape {np.shape(a)}, but the state was made for a "
                    f"parameter of shape {np.shape(ref)} there. Pass the gradients of the params the state was "
                    "made for, or start a new state for a new model: state = opt.init(params)."
                )
    return None


# ----- the optimizers ---------------------------------------------------------------------------
def sgd(learning_rate: LearningRate, momentum: float = 0.0, nesterov: bool = False,
        weight_decay: float = 0.0) -> Optimizer:
    """Stochastic gradient descent, optionally with (Nesterov) momentum and L2 weight decay.

    With momentum ``m``: ``v = m * v + g`` and the update is ``-lr * v`` (``-lr * (g + m * v)``
    with Nesterov). ``learning_rate`` may be a schedule: a function of the step (0, 1, ...).

    >>> opt = sgd(0.1, momentum=0.9)
    >>> params = np.array([1.0])
    >>> state = opt.init(params)
    >>> u1, state = opt.update(np.array([1.0]), state, params)
    >>> u2, state = opt.update(np.array([1.0]), state, params)
    >>> u1, u2
    (array([-0.1]), array([-0.19]))
    """
    _check_lr(learning_rate, "sgd")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"sgd: momentum must be in [0, 1), got {momentum}")
    if nesterov and momentum == 0.0:
        raise ValueError("sgd: nesterov=True needs momentum > 0 (e.g. momentum=0.9)")

    def init(params: Any) -> _State:
        arrays, treedef = _flat_arrays(params)
        slots = (tuple(np.zeros_like(p) for p in arrays),) if momentum else ()
        return _state(0, slots, treedef)

    @_shapes_named("sgd.update")
    def update(grads: Any, state: _State, params: Any = None) -> tuple[Any, _State]:
        g = _arrays(grads, state.treedef, "sgd.update")
        lr = _lr_at(learning_rate, state.step)
        if weight_decay:
            if params is None:
                raise ValueError("sgd.update: weight_decay needs params: opt.update(grads, state, params)")
            g = [gi + weak(weight_decay, p) * p
                 for gi, p in zip(g, _arrays(params, state.treedef, "sgd.update", "params"))]
        if not momentum:
            neg = -lr
            return (tree_unflatten(state.treedef, [gi * weak(neg, gi) for gi in g]),
                    _state(state.step + 1, (), state.treedef))
        for v, gi in zip(state.slots[0], g):
            _check_shape(gi, v)
        velocity = tuple(weak(momentum, v) * v + gi for v, gi in zip(state.slots[0], g))
        if nesterov:
            ups = [(gi + weak(momentum, v) * v) * weak(-lr, v) for gi, v in zip(g, velocity)]
        else:
            ups = [v * weak(-lr, v) for v in velocity]
        return tree_unflatten(state.treedef, ups), _state(state.step + 1, (velocity,), state.treedef)

    return Optimizer(init, update)


def adam(learning_rate: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8) -> Optimizer:
    """Adam (Kingma & Ba, 2015), with bias correction.

    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g^2``, update
    ``-lr * m_hat / (sqrt(v_hat) + eps)`` with ``m_hat = m / (1 - b1^t)``, ``v_hat = v / (1 - b2^t)``.

    >>> opt = adam(0.1)
    >>> state = opt.init(np.array([1.0]))
    >>> updates, state = opt.update(np.array([0.5]), state)
    >>> updates  # the first step is -lr * sign(g)
    array([-0.1])
    """
    return _adam("adam", learning_rate, b1, b2, eps, 0.0)


def adamw(learning_rate: LearningRate = 1e-3, b1: float = 0.9, b2: float = 0.999, eps: float = 1e-8,
          weight_decay: float = 1e-4) -> Optimizer:
    """AdamW (Loshchilov & Hutter, 2019): Adam plus decoupled weight decay ``-lr * wd * param``.

    ``update`` needs ``params`` for the decay.

    >>> opt = adamw(0.1, weight_decay=0.5)
    >>> p = np.array([2.0])
    >>> updates, _ = opt.update(np.array([0.0]), opt.init(p), p)
    >>> updates  # no gradient: only the decay, -0.1 * 0.5 * 2
    array([-0.1])
    """
    return _adam("adamw", learning_rate, b1, b2, eps, weight_decay)


def _adam(name: str, learning_rate: LearningRate, b1: float, b2: float, eps: float, weight_decay: float) -> Optimizer:
    _check_lr(learning_rate, name)
    for label, b in (("b1", b1), ("b2", b2)):
        if not 0.0 <= b < 1.0:
            raise ValueError(f"{name}: {label} must be in [0, 1), got {b}")

    def init(params: Any) -> _State:
        arrays, treedef = _flat_arrays(params)
        return _state(0, (tuple(np.zeros_like(p) for p in arrays), tuple(np.zeros_like(p) for p in arrays)), treedef)

    @_shapes_named(f"{name}.update")
    def update(grads: Any, state: _State, params: Any = None) -> tuple[Any, _State]:
        g = _arrays(grads, state.treedef, f"{name}.update")
        t = state.step + 1
        lr = _lr_at(learning_rate, state.step)
        c1 = 1.0 - b1**t
        c2 = 1.0 - b2**t
        step_size = lr / c1
        root_c2 = _float(np.sqrt(c2))  # (math.sqrt's bits; np.sqrt also takes a traced step count)
        moments = [_adam_leaf(m, v, gi, b1, b2, step_size, root_c2, eps)
                   for m, v, gi in zip(state.slots[0], state.slots[1], g)]
        mu = tuple(mo[0] for mo in moments)
        nu = tuple(mo[1] for mo in moments)
        ups = [mo[2] for mo in moments]
        if weight_decay:
            if params is None:
                raise ValueError(f"{name}.update: weight decay needs params: opt.update(grads, state, params)")
            decay = lr * weight_decay
            ps = _arrays(params, state.treedef, f"{name}.update", "params")
            ups = [u - weak(decay, p) * p for u, p in zip(ups, ps)]
        return tree_unflatten(state.treedef, ups), _state(t, (mu, nu), state.treedef)

    return Optimizer(init, update)


def _adam_leaf(m: Any, v: Any, g: Any, b1: float, b2: float, step_size: Any, root_c2: Any,
               eps: float) -> tuple[Any, Any, Any]:
    """One leaf's new moments and update: ``b1 m + (1 - b1) g``, ``b2 v + (1 - b2) g^2`` and
    ``m * -step_size / (sqrt(v) / root_c2 + eps)``."""
    if (type(g) is np.ndarray and type(m) is np.ndarray and type(v) is np.ndarray and g.dtype == m.dtype == v.dtype
            and g.shape == m.shape == v.shape and g.ndim and type(step_size) is float and type(root_c2) is float):
        # The same operations in the same order into four new arrays instead of twelve: each fresh array
        # of a large layer costs its page faults, most of Adam's time.
        mu = np.multiply(m, b1)
        tmp = np.multiply(g, 1 - b1)
        np.add(mu, tmp, out=mu)
        nu = np.multiply(v, b2)
        np.multiply(g, g, out=tmp)
        np.multiply(tmp, 1 - b2, out=tmp)
        np.add(nu, tmp, out=nu)
        np.sqrt(nu, out=tmp)
        np.divide(tmp, root_c2, out=tmp)
        np.add(tmp, eps, out=tmp)
        up = np.multiply(mu, -step_size)
        return mu, nu, np.divide(up, tmp, out=up)
    _check_shape(g, m)  # (the general path: traced or 0-d values; constants weak, so float32 stays float32)
    mu = weak(b1, m) * m + weak(1 - b1, g) * g
    nu = weak(b2, v) * v + weak(1 - b2, g) * (g * g)
    return mu, nu, mu * weak(-step_size, mu) / (np.sqrt(nu) / weak(root_c2, nu) + weak(eps, nu))


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
                f"apply_updates: the update at {_leaf_paths(pdef)[i]} has shape {np.shape(u)}, but the parameter "
                f"has shape {np.shape(data)}. Pass updates that opt.update made from gradients of these params."
            )
        new = data + u
        if type(p) is Tensor:  # (its array is locked read-only when a user reads it: Tensor.data)
            out.append(Tensor(new, requires_grad=True) if p._trace else _const(new))
        elif isinstance(p, np.ndarray):
            out.append(new)
        else:
            out.append(type(p)(new) if isinstance(p, (int, float)) else new)
    return tree_unflatten(pdef, out)


def _check_tied(before: Any, u: Any, pdef: Any, j: int, i: int) -> None:
    """For ``apply_updates``: the updates at places ``j`` and ``i`` of one Tensor must be the same."""
    if before is not u and not np.array_equal(_raw(before), _raw(u)):
        paths = _leaf_paths(pdef)
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

    def init(params: Any) -> tuple[Any, ...]:
        return tuple(t.init(params) for t in transforms)

    def update(grads: Any, state: tuple[Any, ...], params: Any = None) -> tuple[Any, tuple[Any, ...]]:
        new_states = []
        for t, s in zip(transforms, state):
            grads, s = t.update(grads, s, params)
            new_states.append(s)
        return grads, tuple(new_states)

    return Optimizer(init, update)


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


# ----- learning-rate schedules (any callable step -> float works) ----------------------------------
def constant_schedule(value: float) -> Schedule:
    """``step -> value``.

    >>> constant_schedule(0.1)(100)
    0.1
    """
    return lambda step: value


def exponential_decay(init_value: float, decay_rate: float, decay_steps: int) -> Schedule:
    """``init_value * decay_rate ** (step / decay_steps)``.

    >>> exponential_decay(1.0, 0.5, 10)(20)
    0.25
    """
    return lambda step: init_value * decay_rate ** (step / decay_steps)


def cosine_decay(init_value: float, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Cosine from ``init_value`` down to ``alpha * init_value`` over ``decay_steps``, then flat.

    >>> s = cosine_decay(1.0, 100)
    >>> s(0), round(s(50), 6), s(100)
    (1.0, 0.5, 0.0)
    """

    def schedule(step: int) -> float:
        # (np.cos and np.minimum: math.cos's bits, and they take a step count traced by lp.jit)
        frac = np.minimum(step, decay_steps) / decay_steps
        return _float(init_value * ((1 - alpha) * 0.5 * (1 + np.cos(math.pi * frac)) + alpha))

    return schedule


def warmup_cosine(peak_value: float, warmup_steps: int, decay_steps: int, alpha: float = 0.0) -> Schedule:
    """Linear warm-up from 0 to ``peak_value`` over ``warmup_steps``, then ``cosine_decay``.

    >>> s = warmup_cosine(1.0, 10, 100)
    >>> s(0), s(5), s(10)
    (0.0, 0.5, 1.0)
    """
    decay = cosine_decay(peak_value, decay_steps, alpha)

    def schedule(step: int) -> float:
        if step < warmup_steps:
            return peak_value * step / warmup_steps
        return decay(step - warmup_steps)

    return schedule
