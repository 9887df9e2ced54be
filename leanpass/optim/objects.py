"""The object-style optimizers of LeanPass 0.1 (and PyTorch): ``SGD`` and ``Adam``, which hold their
parameters and step them after ``loss.backward()``.

A parameter is a leaf Tensor made with ``requires_grad=True``; ``step()`` gives it a new array
(``p.data``), never writing into the old one, so a graph recorded before the step keeps the values
it saw. The update formulas are LeanPass 0.1's, operation for operation.

>>> import leanpass as lp
>>> from leanpass import optim
>>> w = lp.Tensor([1.0, -2.0], requires_grad=True)
>>> opt = optim.SGD([w], lr=0.1)
>>> opt.zero_grad()
>>> (w ** 2).sum().backward()
>>> opt.step()
>>> w
Tensor([ 0.8, -1.6], requires_grad=True)
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..core.tensor import Tensor, is_parameter, replace_data

__all__ = ["SGD", "Adam"]


def _parameters(params: Iterable[Any], where: str) -> list[Tensor]:
    """The parameters as a list (each Tensor once), checked to be leaves an optimizer can step."""
    if isinstance(params, Tensor):
        raise TypeError(f"{where}: params must be an iterable of Tensors (a list, or model.parameters()), "
                        "not a single Tensor: write [w]")
    out: list[Tensor] = []
    seen: set[int] = set()
    for i, p in enumerate(params):
        if type(p) is not Tensor:
            raise TypeError(f"{where}: parameter {i} is a {type(p).__name__}, not a Tensor. Pass Tensors made with "
                            "requires_grad=True (or model.parameters()).")
        if p._op != "leaf":
            raise ValueError(f"{where}: parameter {i} was computed (op {p._op!r}): an optimizer can only step leaf "
                             "Tensors, made with Tensor(..., requires_grad=True)")
        if id(p) not in seen:
            seen.add(id(p))
            out.append(p)
    return out


def _grad(p: Tensor) -> Any:
    """The gradient to step ``p`` with, as an array; None for a Tensor that takes no steps (not a parameter,
    or ``requires_grad=False``). A parameter without a gradient yet steps with zeros, as in LeanPass 0.1,
    whose parameters always held one."""
    if not is_parameter(p):
        return None
    g = p._grad
    if g is None:
        return np.zeros_like(p._data)
    if g.shape != p._data.shape:
        raise ValueError(f"step(): a parameter of shape {p._data.shape} has a .grad of shape {g.shape}")
    return g._data


def _set(p: Tensor, new: Any) -> None:
    """Give ``p`` the new array ``new`` (in ``p``'s dtype; a 0-d result, a NumPy scalar, as an array)."""
    if isinstance(new, np.generic):
        new = np.asarray(new)
    replace_data(p, new if new.dtype == p._data.dtype else new.astype(p._data.dtype))


class _Optimizer:
    """What SGD and Adam share: the parameter list and ``zero_grad``."""

    params: list[Tensor]

    def zero_grad(self, set_to_none: bool = False) -> None:
        """Set each parameter's ``.grad`` to zeros (as LeanPass 0.1 does), or to None with ``set_to_none=True``
        (as PyTorch does by default), so that the next ``backward()`` starts clean.

        >>> w = Tensor([1.0], requires_grad=True)
        >>> opt = SGD([w], lr=0.1)
        >>> opt.zero_grad(); w.grad
        Tensor([0.])
        """
        for p in self.params:
            if is_parameter(p):
                p.grad = None if set_to_none else np.zeros_like(p._data)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({len(self.params)} parameters, lr={self.lr!r})"

    lr: Any


class SGD(_Optimizer):
    """Stochastic gradient descent with optional momentum and L2 weight decay (LeanPass 0.1's, as PyTorch's
    without dampening): ``g = grad + weight_decay * p``; with momentum ``v = momentum * v + g``, the step is
    ``p = p - lr * v`` (else ``p - lr * g``).

    >>> w = Tensor([1.0], requires_grad=True)
    >>> opt = SGD([w], lr=0.1, momentum=0.9)
    >>> for _ in range(2):
    ...     w.grad = [1.0]
    ...     opt.step()
    >>> w  # 1 - 0.1 * 1, then - 0.1 * 1.9
    Tensor([0.71], requires_grad=True)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-2, momentum: float = 0.0,
                 weight_decay: float = 0.0) -> None:
        self.params = _parameters(params, "SGD")
        self.lr = lr
        self.momentum = float(momentum)
        self.weight_decay = float(weight_decay)
        self.v = [np.zeros_like(p._data) for p in self.params]  # the momentum buffers

    _lp_jit_state = ("v", "lr")  # (for lp.jit: the state a step reads and writes, see transforms/jit/cells.py)

    def step(self) -> None:
        """Give each parameter its new values (a new array)."""
        for i, p in enumerate(self.params):
            g = _grad(p)
            if g is None:
                continue
            if self.weight_decay:
                g = g + self.weight_decay * p._data
            if self.momentum:
                self.v[i] = self.momentum * self.v[i] + g
                update = self.v[i]
            else:
                update = g
            _set(p, p._data - self.lr * update)


class Adam(_Optimizer):
    """Adam with bias-corrected moments and optional L2 weight decay added to the gradient (LeanPass 0.1's):
    ``m = b1 m + (1 - b1) g``, ``v = b2 v + (1 - b2) g**2``, ``p = p - lr * m_hat / (sqrt(v_hat) + eps)`` with
    ``m_hat = m / (1 - b1**t)``, ``v_hat = v / (1 - b2**t)``.

    >>> w = Tensor([1.0], requires_grad=True)
    >>> opt = Adam([w], lr=0.1)
    >>> w.grad = [0.5]
    >>> opt.step()
    >>> w  # the first step is -lr * sign(g)
    Tensor([0.9], requires_grad=True)
    """

    def __init__(self, params: Iterable[Tensor], lr: float = 1e-3, betas: tuple[float, float] = (0.9, 0.999),
                 eps: float = 1e-8, weight_decay: float = 0.0) -> None:
        self.params = _parameters(params, "Adam")
        self.lr = lr
        self.b1, self.b2 = betas
        self.eps = eps
        self.weight_decay = float(weight_decay)
        self.m = [np.zeros_like(p._data) for p in self.params]
        self.v = [np.zeros_like(p._data) for p in self.params]
        self.t = 0

    _lp_jit_state = ("m", "v", "t", "lr")

    def step(self) -> None:
        """Give each parameter its new values (a new array)."""
        self.t += 1
        for i, p in enumerate(self.params):
            g = _grad(p)
            if g is None:
                continue
            if self.weight_decay:
                g = g + self.weight_decay * p._data
            self.m[i] = self.b1 * self.m[i] + (1 - self.b1) * g
            self.v[i] = self.b2 * self.v[i] + (1 - self.b2) * (g ** 2)
            m_hat = self.m[i] / (1 - self.b1 ** self.t)
            v_hat = self.v[i] / (1 - self.b2 ** self.t)
            _set(p, p._data - self.lr * m_hat / (np.sqrt(v_hat) + self.eps))


# Their public home is ``leanpass.optim`` (the name a checkpoint stores for a class, and its repr's module).
for _name in __all__:
    globals()[_name].__module__ = "leanpass.optim"
del _name
