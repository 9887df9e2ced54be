"""The optimizers: ``sgd`` (with momentum, Nesterov, weight decay), ``adam`` and ``adamw``, each an
``Optimizer`` whose state (``_State``) holds the step count and per-parameter arrays.

>>> import numpy as np
>>> from leanpass import optim
>>> opt = optim.adam(0.1)
>>> updates, state = opt.update(np.array([2.0]), opt.init(np.array([0.0])))
>>> updates, state.step
(array([-0.1]), 1)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

from ..core.tensor import Tensor
from ..core.tree import leaf_paths, register_pytree, tree_flatten, tree_unflatten
from ..functional._lift import weak
from .schedules import Schedule
from .updates import Mask, Optimizer, _float, _mask_flags, _raw

__all__ = ["sgd", "adam", "adamw", "rmsprop", "adagrad"]

LearningRate = float | Schedule


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


def _check_shape(g: Any, slot: Any) -> None:
    """A gradient must have its parameter's shape: NumPy would broadcast one of another shape into the state."""
    if np.shape(g) != np.shape(slot):
        raise ValueError(f"a gradient of shape {np.shape(g)} for a parameter of shape {np.shape(slot)}")


def _shape_mismatch(where: str, grads: Any, state: _State, params: Any) -> ValueError | None:
    """The first leaf whose shape differs from the one the state was made for, as an error (or None)."""
    paths = leaf_paths(state.treedef)
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
          weight_decay: float = 1e-4, mask: Mask = None) -> Optimizer:
    """AdamW (Loshchilov & Hutter, 2019): Adam plus decoupled weight decay ``-lr * wd * param``.

    ``update`` needs ``params`` for the decay.

    >>> opt = adamw(0.1, weight_decay=0.5)
    >>> p = np.array([2.0])
    >>> updates, _ = opt.update(np.array([0.0]), opt.init(p), p)
    >>> updates  # no gradient: only the decay, -0.1 * 0.5 * 2
    array([-0.1])

    ``mask`` (as optax's) chooses the parameters that decay: a pytree of bools with the params'
    structure (or a prefix of it), or a function params -> such a pytree. The others get Adam's
    update alone. The usual choice decays the matrices but not the biases and norm scales:

    >>> opt = adamw(0.1, weight_decay=0.5, mask=lambda p: lp.tree_map(lambda x: x.ndim >= 2, p))
    >>> p = {"w": np.full((1, 1), 2.0), "b": np.array([2.0])}
    >>> updates, _ = opt.update({"w": np.ones((1, 1)), "b": np.ones(1)}, opt.init(p), p)
    >>> updates  # Adam's first step is -lr * sign(g); w also decays by -0.1 * 0.5 * 2
    {'w': array([[-0.2]]), 'b': array([-0.1])}
    """
    return _adam("adamw", learning_rate, b1, b2, eps, weight_decay, mask)


def _adam(name: str, learning_rate: LearningRate, b1: float, b2: float, eps: float, weight_decay: float,
          mask: Mask = None) -> Optimizer:
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
            if mask is None:
                ups = [u - weak(decay, p) * p for u, p in zip(ups, ps)]
            else:
                flags = _mask_flags(mask, params, state.treedef, f"{name}.update")
                ups = [u - weak(decay, p) * p if f else u for u, p, f in zip(ups, ps, flags)]
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


def rmsprop(learning_rate: LearningRate, decay: float = 0.9, eps: float = 1e-8, initial_scale: float = 0.0,
            centered: bool = False, momentum: float = 0.0, nesterov: bool = False,
            eps_in_sqrt: bool = True) -> Optimizer:
    """RMSProp (Tieleman & Hinton, 2012), as optax's ``rmsprop``.

    ``nu = decay * nu + (1 - decay) * g**2`` (``nu`` starts at ``initial_scale``), and the update is
    ``-lr * g / sqrt(nu + eps)`` (``g / (sqrt(nu) + eps)`` with ``eps_in_sqrt=False``). ``centered``
    subtracts the square of the mean gradient ``mu = decay * mu + (1 - decay) * g`` from ``nu``.
    With ``momentum`` the updates go through a trace ``t = u + momentum * t`` (``u + momentum * t``
    with ``nesterov``). PyTorch's ``RMSprop(lr, alpha=a, eps=e, momentum=m)`` is
    ``rmsprop(lr, decay=a, eps=e, momentum=m, eps_in_sqrt=False)``.

    >>> opt = rmsprop(0.1, decay=0.5, eps=0.0)
    >>> updates, state = opt.update(np.array([2.0]), opt.init(np.array([0.0])))
    >>> updates  # nu = 0.5 * 4 = 2: -0.1 * 2 / sqrt(2)
    array([-0.14142136])
    """
    _check_lr(learning_rate, "rmsprop")
    if not 0.0 <= decay < 1.0:
        raise ValueError(f"rmsprop: decay must be in [0, 1), got {decay}")
    if not 0.0 <= momentum < 1.0:
        raise ValueError(f"rmsprop: momentum must be in [0, 1), got {momentum}")
    if nesterov and momentum == 0.0:
        raise ValueError("rmsprop: nesterov=True needs momentum > 0 (e.g. momentum=0.9)")

    def init(params: Any) -> _State:
        arrays, treedef = _flat_arrays(params)
        slots = [tuple(np.full_like(p, initial_scale) for p in arrays)]
        if centered:
            slots.append(tuple(np.zeros_like(p) for p in arrays))
        if momentum:
            slots.append(tuple(np.zeros_like(p) for p in arrays))
        return _state(0, tuple(slots), treedef)

    @_shapes_named("rmsprop.update")
    def update(grads: Any, state: _State, params: Any = None) -> tuple[Any, _State]:
        g = _arrays(grads, state.treedef, "rmsprop.update")
        lr = _lr_at(learning_rate, state.step)
        for gi, n in zip(g, state.slots[0]):
            _check_shape(gi, n)
        nu = tuple(weak(decay, n) * n + weak(1 - decay, gi) * (gi * gi) for n, gi in zip(state.slots[0], g))
        slots: list[tuple[Any, ...]] = [nu]
        denom: Any = nu
        if centered:
            mu = tuple(weak(decay, m) * m + weak(1 - decay, gi) * gi for m, gi in zip(state.slots[1], g))
            slots.append(mu)
            denom = [n - m * m for n, m in zip(nu, mu)]
        if eps_in_sqrt:
            ups = [gi / np.sqrt(d + weak(eps, d)) * weak(-lr, gi) for gi, d in zip(g, denom)]
        else:
            ups = [gi / (np.sqrt(d) + weak(eps, d)) * weak(-lr, gi) for gi, d in zip(g, denom)]
        if momentum:
            trace = tuple(u + weak(momentum, t) * t for u, t in zip(ups, state.slots[-1]))
            slots.append(trace)
            ups = [u + weak(momentum, t) * t for u, t in zip(ups, trace)] if nesterov else list(trace)
        return tree_unflatten(state.treedef, ups), _state(state.step + 1, tuple(slots), state.treedef)

    return Optimizer(init, update)


def adagrad(learning_rate: LearningRate, initial_accumulator_value: float = 0.1, eps: float = 1e-7) -> Optimizer:
    """Adagrad (Duchi et al., 2011), as optax's ``adagrad``.

    ``s = s + g**2`` (``s`` starts at ``initial_accumulator_value``), and the update is
    ``-lr * g / sqrt(s + eps)`` (0 where ``s`` is 0).

    >>> opt = adagrad(1.0, initial_accumulator_value=0.0, eps=0.0)
    >>> state = opt.init(np.array([0.0]))
    >>> u1, state = opt.update(np.array([3.0]), state)
    >>> u2, state = opt.update(np.array([4.0]), state)
    >>> u1, u2  # -3 / sqrt(9), -4 / sqrt(9 + 16)
    (array([-1.]), array([-0.8]))
    """
    _check_lr(learning_rate, "adagrad")
    if initial_accumulator_value < 0:
        raise ValueError(f"adagrad: initial_accumulator_value must be >= 0, got {initial_accumulator_value}")

    def init(params: Any) -> _State:
        arrays, treedef = _flat_arrays(params)
        return _state(0, (tuple(np.full_like(p, initial_accumulator_value) for p in arrays),), treedef)

    @_shapes_named("adagrad.update")
    def update(grads: Any, state: _State, params: Any = None) -> tuple[Any, _State]:
        g = _arrays(grads, state.treedef, "adagrad.update")
        lr = _lr_at(learning_rate, state.step)
        for gi, s in zip(g, state.slots[0]):
            _check_shape(gi, s)
        sums = tuple(s + gi * gi for s, gi in zip(state.slots[0], g))
        ups = [np.where(s > 0, gi / np.sqrt(np.where(s > 0, s, 1) + weak(eps, s)), 0) * weak(-lr, gi)
               for gi, s in zip(g, sums)]
        return tree_unflatten(state.treedef, ups), _state(state.step + 1, (sums,), state.treedef)

    return Optimizer(init, update)


# Their public home is ``leanpass.optim`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__ + ["_State"]:
    globals()[_name].__module__ = "leanpass.optim"
del _name
