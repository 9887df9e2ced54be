"""Inputs of about ``n`` elements for every op in ``functional.OPS``, and NumPy's own forward of each.

``INPUTS[name](n)`` returns ``(args, diff, forward)``: the op's arguments (raw arrays and
parameters, in ``functional.OPS[name]``'s order), the positions of the differentiable ones, and a
function of no arguments that computes the same values in plain NumPy (what a user would write
without gradients). ``bench_engine.py --ops`` times the op against that forward.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

Built = tuple[list[Any], list[int], Callable[[], Any]]
rng = np.random.default_rng(0)


def _x(n: int, lo: float = 0.5, hi: float = 2.0) -> np.ndarray:
    return rng.uniform(lo, hi, n)


def _matrix(n: int) -> np.ndarray:
    """About n elements of well-conditioned 3 x 3 matrices: one for n = 10, a stack of them beyond
    (a stack is what a batched model has; one large matrix would time LAPACK, not LeanPass)."""
    shape = (3, 3) if n < 18 else (n // 9, 3, 3)
    return rng.standard_normal(shape) + 3 * np.eye(3)


def _spd(n: int) -> np.ndarray:
    a = _matrix(n)
    return a @ np.swapaxes(a, -1, -2)


def _rows(n: int) -> np.ndarray:
    """About n elements as rows of 10 (n >= 10)."""
    return rng.standard_normal((max(1, n // 10), 10))


def _unary(fn: Callable[[np.ndarray], Any], lo: float = 0.5, hi: float = 2.0) -> Callable[[int], Built]:
    def build(n: int) -> Built:
        x = _x(n, lo, hi)
        return [x], [0], lambda: fn(x)

    return build


def _binary(fn: Callable[[np.ndarray, np.ndarray], Any]) -> Callable[[int], Built]:
    def build(n: int) -> Built:
        x, y = _x(n), _x(n)
        return [x, y], [0, 1], lambda: fn(x, y)

    return build


def _reduction(fn: Callable[..., Any], *params: Any, **keywords: Any) -> Callable[[int], Built]:
    """A reduction over the last axis of rows of 10: the op takes ``params``, NumPy ``keywords``."""
    def build(n: int) -> Built:
        x = _rows(n)
        return [x, *params], [0], lambda: fn(x, **keywords)

    return build


def _special(name: str, lo: float = 0.5, hi: float = 2.0, *params: Any) -> Callable[[int], Built]:
    """An op with no NumPy function: its forward is the op's own NumPy code on arrays."""
    def build(n: int) -> Built:
        from leanpass import functional as F

        x = _x(n, lo, hi)
        op = F.OPS[name]
        return [x, *params], [0], lambda: op(x, *params)[0]

    return build


def _eager_linear(n: int) -> Built:
    x, w, b = _rows(n), rng.standard_normal((10, 10)), rng.standard_normal(10)
    return [x, w, b], [0, 1, 2], lambda: x @ w + b


def _cross_entropy(n: int) -> Built:
    x = _rows(n)
    labels = rng.integers(0, 10, len(x))

    def forward() -> Any:
        shifted = x - x.max(axis=1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        return -logp[np.arange(len(x)), labels].mean()

    return [x, labels, "mean"], [0], forward


def _unindex(n: int) -> Built:
    g = _x(n // 2)
    index = slice(0, n, 2)

    def forward() -> Any:
        out = np.zeros(n)
        out[index] = g
        return out

    return [g, index, (n,)], [0], forward


def _solve(n: int) -> Built:
    a = _matrix(n)
    b = rng.standard_normal(a.shape[:-1] + (1,))
    return [a, b], [0, 1], lambda: np.linalg.solve(a, b)


def _lstsq(n: int) -> Built:  # NumPy's lstsq takes one matrix: 2k x k of about n elements
    k = max(2, round(math.sqrt(n / 2)))
    a, b = rng.standard_normal((2 * k, k)), rng.standard_normal(2 * k)
    return [a, b, None], [0, 1], lambda: np.linalg.lstsq(a, b, rcond=None)[0]


def _tall(fn: Callable[[np.ndarray], Any]) -> Callable[[int], Built]:
    def build(n: int) -> Built:  # 4 x 2 matrices: one for n = 10, a stack of them beyond
        a = rng.standard_normal((4, 2) if n < 16 else (n // 8, 4, 2))
        return [a], [0], lambda: fn(a)

    return build


def _einsum(n: int) -> Built:
    a, b = _rows(n), rng.standard_normal((10, 10))
    return ["ij,jk->ik", a, b], [1, 2], lambda: np.einsum("ij,jk->ik", a, b)


def _joined(fn: Callable[..., Any]) -> Callable[[int], Built]:
    def build(n: int) -> Built:
        x, y = _x(n // 2), _x(n // 2)
        return [0, x, y], [1, 2], lambda: fn([x, y], axis=0)

    return build


def _where(n: int) -> Built:
    x, y = _x(n), _x(n)
    cond = x > 1.2
    return [cond, x, y], [1, 2], lambda: np.where(cond, x, y)


def _shaped(fn: Callable[[np.ndarray], Any], *params: Any, rows: bool = True) -> Callable[[int], Built]:
    def build(n: int) -> Built:
        x = _rows(n) if rows else _x(n)
        return [x, *params], [0], lambda: fn(x)

    return build


def _betaln(n: int) -> Built:
    from leanpass import functional as F

    a, b = _x(n), _x(n)
    return [a, b], [0, 1], lambda: F.OPS["betaln"](a, b)[0]


def _numpy_math(name: str) -> Callable[[int], Built] | None:
    """NumPy's elementwise functions (``functional.ELEMENTWISE``), on inputs from their domains as
    tests/op_samples.py draws them; NumPy's function of the same name is the forward."""
    import sys
    from pathlib import Path

    from leanpass import functional as F

    entry = getattr(F, "ELEMENTWISE", {}).get(name)
    if entry is None:
        return None
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
    from op_samples import DOMAINS, pair

    params = {"round": (0,), "nan_to_num": (True, 0.0, None, None)}.get(name, ())
    fn = getattr(np, name)

    def build(n: int) -> Built:
        if len(entry[1]) == 2:
            x, y = pair(name, rng, (n,))
            return [x, y], [0, 1], lambda: fn(x, y)
        x = DOMAINS[name](rng, (n,))
        return [x, *params], [0], lambda: fn(x, *params)

    return build


INPUTS: dict[str, Callable[[int], Built]] = {
    "+": _binary(np.add), "-": _binary(np.subtract), "*": _binary(np.multiply), "/": _binary(np.divide),
    "**": _binary(np.power),
    "@": lambda n: (lambda a, b: ([a, b], [0, 1], lambda: a @ b))(_rows(n), rng.standard_normal((10, 10))),
    "neg": _unary(np.negative), "abs": _unary(np.abs), "exp": _unary(np.exp), "log": _unary(np.log),
    "sqrt": _unary(np.sqrt), "square": _unary(np.square), "sin": _unary(np.sin), "cos": _unary(np.cos),
    "tanh": _unary(np.tanh), "relu": _unary(lambda x: np.maximum(x, 0.0), -1.0, 1.0),
    "sigmoid": _unary(lambda x: 1 / (1 + np.exp(-x)), -3.0, 3.0),
    "softplus": _unary(lambda x: np.logaddexp(0, x), -3.0, 3.0),
    "gelu": _unary(lambda x: 0.5 * x * (1 + np.tanh(0.7978845608 * (x + 0.044715 * x ** 3)))),
    "leaky_relu": lambda n: (lambda x: ([x, 0.01], [0], lambda: np.where(x > 0, x, 0.01 * x)))(_x(n, -1, 1)),
    "clip": lambda n: (lambda x: ([x, 0.8, 1.5], [0], lambda: np.clip(x, 0.8, 1.5)))(_x(n)),
    "identity": _unary(lambda x: x),
    "maximum": _binary(np.maximum), "minimum": _binary(np.minimum), "logaddexp": _binary(np.logaddexp),
    "linear": _eager_linear, "cross_entropy": _cross_entropy,
    "sum": _reduction(np.sum, 1, False, axis=1), "mean": _reduction(np.mean, 1, False, axis=1),
    "max": _reduction(np.max, 1, False, axis=1), "min": _reduction(np.min, 1, False, axis=1),
    "var": _reduction(np.var, 1, 0, False, axis=1), "std": _reduction(np.std, 1, 0, False, axis=1),
    "logsumexp": _reduction(lambda x: np.log(np.exp(x - x.max(1, keepdims=True)).sum(1)) + x.max(1), 1, False),
    "softmax": _reduction(lambda x: np.exp(x) / np.exp(x).sum(1, keepdims=True), 1),
    "log_softmax": _reduction(lambda x: x - np.log(np.exp(x).sum(1, keepdims=True)), 1),
    "reshape": _shaped(lambda x: x.reshape(-1), (-1,)), "transpose": _shaped(np.transpose, None),
    "swapaxes": _shaped(lambda x: np.swapaxes(x, 0, 1), 0, 1), "expand_dims": _shaped(lambda x: x[None], 0),
    "squeeze": lambda n: (lambda x: ([x, None], [0], lambda: np.squeeze(x)))(_rows(n)[None]),
    "broadcast_to": lambda n: (lambda x: ([x, (2, *x.shape)], [0], lambda: np.broadcast_to(x, (2, *x.shape))))(
        _rows(n)),
    "astype": _shaped(lambda x: x.astype(np.float32), np.dtype(np.float32)),
    "getitem": _shaped(lambda x: x[::2], slice(None, None, 2), rows=False), "unindex": _unindex,
    "concatenate": _joined(np.concatenate), "stack": _joined(np.stack), "where": _where, "einsum": _einsum,
    # linear algebra: square matrices of about n elements
    "inv": lambda n: (lambda a: ([a], [0], lambda: np.linalg.inv(a)))(_matrix(n)),
    "det": lambda n: (lambda a: ([a], [0], lambda: np.linalg.det(a)))(_matrix(n)),
    "cofactor": lambda n: (lambda a: ([a], [0], lambda: np.linalg.det(a)[..., None, None]
                                      * np.swapaxes(np.linalg.inv(a), -1, -2)))(_matrix(n)),
    "slogdet": lambda n: (lambda a: ([a], [0], lambda: np.linalg.slogdet(a)))(_matrix(n)),
    "solve": _solve,
    "cholesky": lambda n: (lambda a: ([a], [0], lambda: np.linalg.cholesky(a)))(_spd(n)),
    "eigh": lambda n: (lambda a: ([a, "L"], [0], lambda: np.linalg.eigh(a)))(_spd(n)),
    "svd": _tall(lambda a: np.linalg.svd(a, full_matrices=False)), "qr": _tall(np.linalg.qr),
    "pinv": lambda n: (lambda a: ([a, None], [0], lambda: np.linalg.pinv(a)))(_tall(lambda a: a)(n)[0][0]),
    "lstsq": _lstsq,
    "norm": lambda n: (lambda x: ([x, 2, None, False], [0], lambda: np.linalg.norm(x)))(_x(n)),
    # special functions (NumPy has none: their forward is the op's own NumPy code)
    "gammaln": _special("gammaln"), "digamma": _special("digamma"), "polygamma": _special("polygamma", 0.5, 2.0, 1),
    "erf": _special("erf", -2.0, 2.0), "erfc": _special("erfc", -2.0, 2.0), "erfinv": _special("erfinv", -0.9, 0.9),
    "ndtr": _special("ndtr", -3.0, 3.0), "log_ndtr": _special("log_ndtr", -3.0, 3.0),
    "logit": _special("logit", 0.1, 0.9),
    "xlogy": lambda n: (lambda x, y: ([x, y], [0, 1], lambda: x * np.log(y)))(_x(n), _x(n)),
    "xlog1py": lambda n: (lambda x, y: ([x, y], [0, 1], lambda: x * np.log1p(y)))(_x(n), _x(n)),
    "betaln": _betaln,
    "i0e": _special("i0e", -3.0, 3.0), "i1e": _special("i1e", -3.0, 3.0),
    # products and scans over rows of 10
    "prod": lambda n: (lambda x: ([x, 1, False], [0], lambda: np.prod(x, axis=1)))(_rows(n) * 0.1 + 1),
    "cumsum": lambda n: (lambda x: ([x, 1], [0], lambda: np.cumsum(x, axis=1)))(_rows(n)),
    "cumprod": lambda n: (lambda x: ([x, 1], [0], lambda: np.cumprod(x, axis=1)))(_rows(n) * 0.1 + 1),
}


def inputs(name: str) -> Callable[[int], Built] | None:
    """The input builder of op ``name``, or None when there is none."""
    return INPUTS.get(name) or _numpy_math(name)
