"""Shape, indexing and joining operations. Each returns ``(ans, vjp)``.

Ops that join several arrays take their parameters first and the arrays after
(``concatenate(axis, *xs)``), so that a node's inputs are one flat tuple; their ``vjp`` returns
``None`` for each parameter, then one cotangent per array.

Most of these ops are linear in their input, so their forward-mode rule (in their records) is
the op itself applied to the tangent; the others' rules ``_<op>_jvp`` follow the op (see
``_tangent.py``).
"""

from __future__ import annotations

import math
import string
from collections.abc import Callable
from typing import Any

import numpy as np

from . import _lift
from ._broadcast import unbroadcast
from ._lift import NUMPY1, weak
from ._registry import op
from ._tangent import of_first, total

Tangents = tuple[Any, ...]  # a forward-mode rule's tangents, one per input (see _tangent.py)


def reshape(x: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Reshape (one entry may be -1). The cotangent is reshaped back.

    >>> reshape(np.arange(6.0), (2, -1))[0].shape
    (2, 3)
    """
    xshape = np.shape(x)
    return np.reshape(x, shape), lambda g: (g.reshape(xshape),)


op("reshape", reshape, jvp=of_first(reshape), keeps=("shape",), numpy=(np.reshape,))


def transpose(x: Any, axes: tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """Permute axes (reverse them when ``axes`` is None). The cotangent gets the inverse permutation.

    >>> transpose(np.zeros((2, 3, 4)), (1, 2, 0))[0].shape
    (3, 4, 2)
    """
    inverse = None if axes is None else tuple(np.argsort([a % np.ndim(x) for a in axes]))
    return np.transpose(x, axes), lambda g: (np.transpose(g, inverse),)


op("transpose", transpose, jvp=of_first(transpose), keeps=("work",), numpy=(np.transpose,))


def swapaxes(x: Any, axis1: int, axis2: int) -> tuple[Any, Any]:
    """Swap two axes. The cotangent swaps them back.

    >>> swapaxes(np.zeros((2, 3)), 0, 1)[0].shape
    (3, 2)
    """
    return np.swapaxes(x, axis1, axis2), lambda g: (np.swapaxes(g, axis1, axis2),)


op("swapaxes", swapaxes, jvp=of_first(swapaxes), numpy=(np.swapaxes,))


def expand_dims(x: Any, axis: int | tuple[int, ...]) -> tuple[Any, Any]:
    """Insert size-1 axes. The cotangent is reshaped back.

    >>> expand_dims(np.zeros(3), 0)[0].shape
    (1, 3)
    """
    xshape = np.shape(x)
    return np.expand_dims(x, axis), lambda g: (g.reshape(xshape),)


op("expand_dims", expand_dims, jvp=of_first(expand_dims), numpy=(np.expand_dims,))


def squeeze(x: Any, axis: int | tuple[int, ...] | None = None) -> tuple[Any, Any]:
    """Remove size-1 axes (all of them, or those in ``axis``). The cotangent is reshaped back.

    >>> squeeze(np.zeros((1, 3, 1)))[0].shape
    (3,)
    """
    xshape = np.shape(x)
    return np.squeeze(x, axis), lambda g: (g.reshape(xshape),)


op("squeeze", squeeze, jvp=of_first(squeeze), keeps=("shape",), numpy=(np.squeeze,))


def broadcast_to(x: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Broadcast to ``shape``. The cotangent is summed back over the broadcast axes.

    >>> broadcast_to(np.ones(3), (2, 3))[1](np.ones((2, 3)))
    (array([2., 2., 2.]),)
    """
    return np.broadcast_to(x, shape), lambda g: (unbroadcast(g, x),)


op("broadcast_to", broadcast_to, jvp=of_first(broadcast_to), keeps=("x",), numpy=(np.broadcast_to,))


def astype(x: Any, dtype: Any) -> tuple[Any, Any]:
    """Cast to ``dtype``. The cotangent is cast back to the input's dtype.

    >>> astype(np.ones(2), np.float32)[0].dtype
    dtype('float32')
    """
    if np.dtype(dtype).kind not in "biuf":
        raise TypeError(f"astype: cannot cast to {np.dtype(dtype)}; LeanPass differentiates real numbers only")
    a = x if hasattr(x, "astype") else np.asarray(x)  # (a Tensor, in a replayed pass, records its own astype)
    xdtype = a.dtype
    return a.astype(dtype), lambda g: (g.astype(xdtype),)


op("astype", astype, jvp=of_first(astype), keeps=("dtype",))


def getitem(x: Any, index: Any) -> tuple[Any, Any]:
    """``x[index]`` with NumPy indexing (ints, slices, None, ..., integer arrays, boolean masks).

    The cotangent is scattered back into zeros of the input's shape, adding up repeated indices.

    >>> getitem(np.array([1.0, 2.0]), [0, 0, 1])[1](np.ones(3))
    (array([2., 1.]),)
    """
    xshape = np.shape(x)
    return _lift.index(x, index), lambda g: (scatter(g, index, xshape),)


op("getitem", getitem, jvp=of_first(getitem), keeps=("index", "shape"))


def unindex(g: Any, index: Any, shape: tuple[int, ...]) -> tuple[Any, Any]:
    """Scatter-add ``g`` into zeros of ``shape`` at ``index``: the transpose of ``getitem``.

    >>> unindex(np.ones(3), [0, 0, 1], (2,))[0]
    array([2., 1.])
    """
    if _lift.is_tensor(g):  # replayed by a differentiable backward pass: record the scatter as one op
        return scatter(g, index, shape), lambda h: (_lift.index(h, index), None, None)
    basic = _is_basic(index)
    out = None if basic else _one_hot_rows(g, index, shape)
    if out is None:
        # (zeros_like dispatches, so under jit the zeros and the writes into them are traced too)
        out = np.zeros(shape, dtype=g.dtype) if type(g) is np.ndarray else np.zeros_like(g, shape=shape)
        if _lift.spread_target is not None:  # (vmap: a batched index needs a batched target)
            out = _lift.spread_target(index, out, True)
        if basic:
            out[index] = g  # no index can repeat: plain assignment is the scatter
        else:
            np.add.at(out, index, g)
    return out, lambda h: (_lift.index(h, index), None, None)


_ONE_HOT_ROWS = 256  # (a one-hot product beats np.add.at, 8 ns per added value, up to about this many rows)


def _one_hot_rows(g: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """The scatter of ``g`` into the rows of an array of ``shape`` picked by one integer array ``index`` (an
    embedding's gradient), as one product ``onehot(index).T @ g``; None where that does not apply: many rows,
    or arrays other than plain ones and jit's (whose replay then makes the same choice)."""
    idx = index[0] if type(index) is tuple and len(index) == 1 else index
    v = shape[0] if shape else 0
    if not (0 < v <= _ONE_HOT_ROWS and _plain_or_traced(idx) and idx.dtype.kind in "iu" and _plain_or_traced(g)
            and g.dtype.kind == "f" and tuple(g.shape) == tuple(idx.shape) + tuple(shape[1:])):
        return None
    n = int(idx.size)
    hot = np.equal(np.reshape(np.remainder(idx, v), (n, 1)), np.arange(v)).astype(g.dtype)
    return np.reshape(hot.T @ np.reshape(g, (n, math.prod(shape[1:]))), shape)


def _plain_or_traced(a: Any) -> bool:
    t = type(a)
    return t is np.ndarray or (getattr(t, "_lp_traced", False) and not getattr(t, "_lp_batched", False))


op("unindex", unindex, jvp=of_first(unindex), keeps=("index",))


def scatter(g: Any, index: Any, shape: tuple[int, ...]) -> Any:
    """``unindex``'s output alone: on arrays the scatter itself, on Tensors (a differentiable backward
    pass) recorded as the op ``"unindex"``.

    >>> scatter(np.array([1.0, 2.0]), [1, 1], (3,))
    array([0., 3., 0.])
    """
    if _lift.is_tensor(g):
        return _lift.apply(unindex, "unindex", g, index, shape)  # type: ignore[misc]
    return unindex(g, index, shape)[0]


def _is_basic(index: Any) -> bool:
    """True for an index of ints, slices, None and Ellipsis only (no arrays, lists or masks)."""
    parts = index if isinstance(index, tuple) else (index,)
    return all(p is None or p is Ellipsis or isinstance(p, (int, np.integer, slice)) for p in parts)


def concatenate(axis: int, *xs: Any) -> tuple[Any, Any]:
    """Join arrays along an existing ``axis``. Each input gets its slice of the cotangent.

    >>> ans, vjp = concatenate(0, np.ones(2), np.zeros(1))
    >>> vjp(np.array([1.0, 2.0, 3.0]))
    (None, array([1., 2.]), array([3.]))
    """
    ans = np.concatenate(xs, axis=axis)
    ends = np.cumsum([np.shape(x)[axis] for x in xs])
    lead = (slice(None),) * (axis % ans.ndim)

    def vjp(g: Any) -> tuple[Any, ...]:
        starts = [0, *ends[:-1]]
        return (None, *(g[lead + (slice(int(a), int(b)),)] for a, b in zip(starts, ends)))

    return ans, vjp


def _concatenate_jvp(ts: Tangents, ans: Any, axis: int, *xs: Any) -> Any:
    return concatenate(axis, *_filled(ts[1:], xs))[0]


op("concatenate", concatenate, jvp=_concatenate_jvp, keeps=("work",), numpy=(np.concatenate,))


def _filled(ts: Tangents, xs: tuple[Any, ...]) -> list[Any]:
    """The tangents of a join's inputs, zeros for an input without one."""
    return [np.zeros_like(x) if t is None else t for t, x in zip(ts, xs)]


def stack(axis: int, *xs: Any) -> tuple[Any, Any]:
    """Join arrays along a new ``axis``. Each input gets its slice of the cotangent.

    >>> stack(0, np.ones(2), np.zeros(2))[0].shape
    (2, 2)
    """
    ans = np.stack(xs, axis=axis)
    lead = (slice(None),) * (axis % ans.ndim)
    return ans, lambda g: (None, *(g[lead + (i,)] for i in range(len(xs))))


def _stack_jvp(ts: Tangents, ans: Any, axis: int, *xs: Any) -> Any:
    return stack(axis, *_filled(ts[1:], xs))[0]


op("stack", stack, jvp=_stack_jvp, keeps=("xs",), numpy=(np.stack,))


def where(cond: Any, x: Any, y: Any, need: tuple[bool, ...] = (False, True, True)) -> tuple[Any, Any]:
    """``x`` where ``cond`` else ``y``. The cotangent flows only to the selected input.

    So ``where(x > 0, log(x), 0)`` has a finite gradient at negative ``x``.

    >>> where(np.array([True, False]), np.ones(2), np.zeros(2))[1](np.ones(2))
    (None, array([1., 0.]), array([0., 1.]))
    """

    def vjp(g: Any) -> tuple[Any, Any, Any]:
        zero = weak(0, g)
        return (
            None,
            unbroadcast(np.where(cond, g, zero), x) if need[1] else None,
            unbroadcast(np.where(cond, zero, g), y) if need[2] else None,
        )

    return np.where(cond, x, y), vjp


def _where_jvp(ts: Tangents, ans: Any, cond: Any, x: Any, y: Any) -> Any:
    _, tx, ty = ts
    zero = weak(0, ty if tx is None else tx)
    return np.where(cond, zero if tx is None else tx, zero if ty is None else ty)


def einsum(subscripts: str, *xs: Any, need: tuple[bool, ...] | None = None) -> tuple[Any, Any]:
    """Einstein summation, as ``np.einsum``: ``"bqd,bkd->bqk"``, ``"...ij,...jk->...ik"``, ``"ij,jk"``,
    and a letter repeated within one input for its diagonal (``"ii->i"``, ``"ii"`` for the trace).

    Each input's cotangent is itself an einsum of ``g`` with the other inputs; then axes the
    input had as size 1 (broadcast by the others) are summed back, axes the einsum could not
    fill (letters summed away inside this input alone, or 1 in all the others) are broadcast,
    and a repeated letter's cotangent is put back on its diagonal (times an identity matrix).
    Every einsum, forward and backward, runs by the contraction order ``np.einsum_path`` picks,
    chosen once per subscripts and shapes (BLAS for the large contractions).

    ``need`` (one flag per input, the subscripts first) skips the cotangents nobody wants.

    >>> ans, vjp = einsum("ij,jk->ik", np.ones((2, 3)), np.ones((3, 4)))
    >>> ans.shape, vjp(np.ones((2, 4)))[2].shape
    ((2, 4), (3, 4))
    >>> einsum("ii", np.array([[1.0, 2.0], [3.0, 4.0]]))[1](np.array(1.0))[1]
    array([[1., 0.],
           [0., 1.]])
    """
    ins, out = _parse_einsum(subscripts, [np.ndim(x) for x in xs])
    ans = _contract(ins, out, xs)

    def vjp(g: Any) -> tuple[Any, ...]:
        cts: list[Any] = [None]
        for i, (sub, x) in enumerate(zip(ins, xs)):
            if need is not None and not need[i + 1]:
                cts.append(None)
                continue
            others = [s for j, s in enumerate(ins) if j != i]
            target = "".join(dict.fromkeys(c for c in sub if c in set(out).union(*others)))
            ct = _contract([out, *others], target, [g, *(y for j, y in enumerate(xs) if j != i)])
            size = dict(zip(sub, np.shape(x)))
            stretched = tuple(k for k, c in enumerate(target) if size[c] == 1 and ct.shape[k] != 1)
            if stretched:  # size-1 axes of x that broadcasting stretched: sum them back
                ct = np.sum(ct, axis=stretched, keepdims=True)
            ct = _on_diagonals(ct, target, sub, size)
            if ct.shape != np.shape(x):  # ... broadcast back, as are axes only the others had as 1
                ct = np.broadcast_to(ct, np.shape(x))
            cts.append(ct)
        return tuple(cts)

    return ans, vjp


def _einsum_jvp(ts: Tangents, ans: Any, subscripts: str, *xs: Any) -> Any:
    """Multilinear: one einsum per input with a tangent, that input replaced by its tangent."""
    terms = []
    for i, t in enumerate(ts[1:]):
        if t is not None:
            terms.append(einsum(subscripts, *xs[:i], t, *xs[i + 1:])[0])
    return total(*terms)


op("einsum", einsum, jvp=_einsum_jvp, need=True, keeps=("xs",), numpy=(np.einsum,))


def _on_diagonals(ct: Any, target: str, sub: str, size: dict[str, int]) -> Any:
    """``ct`` (axes ``target``) laid out on the axes of ``sub``: size 1 for letters ``target`` lacks,
    and a letter's second and later places in ``sub`` filled by its diagonal (times identities)."""
    first = {c: sub.index(c) for c in sub}
    if target == sub:
        return ct
    order = sorted(target, key=first.__getitem__)
    if list(target) != order:
        ct = np.transpose(ct, tuple(target.index(c) for c in order))
    shape = tuple(ct.shape[order.index(c)] if c in target and first[c] == k else 1 for k, c in enumerate(sub))
    ct = ct.reshape(shape)
    for k, c in enumerate(sub):
        if first[c] != k and size[c] > 1:  # a repeat: keep only where index k equals index first[c]
            eye_shape = tuple(size[c] if j in (k, first[c]) else 1 for j in range(len(sub)))
            ct = ct * np.eye(size[c], dtype=bool).reshape(eye_shape)
    return ct


# (subscripts, shapes) -> the ``optimize=`` argument of np.einsum: a path from np.einsum_path for a
# large contraction, else False (a given path costs ~15 us of parsing a call: more than small ones take).
_PATHS: dict[tuple[str, tuple[tuple[int, ...], ...]], Any] = {}
_PATH_WORTH = 1 << 15  # letters' sizes multiplied: below this, NumPy's plain einsum is quicker


def _contract(ins: list[str], out: str, xs: Any) -> Any:
    spec = f"{','.join(ins)}->{out}"
    shapes = tuple(np.shape(x) for x in xs)
    key = (spec, shapes)
    optimize = _PATHS.get(key)
    if optimize is None:
        sizes: dict[str, int] = {}
        for sub, shape in zip(ins, shapes):
            for c, n in zip(sub, shape):
                sizes[c] = max(sizes.get(c, 1), n)
        optimize = False
        if len(xs) > 1 and math.prod(sizes.values()) >= _PATH_WORTH:
            optimize = np.einsum_path(spec, *(np.broadcast_to(0.0, s) for s in shapes), optimize="greedy")[0]
        if len(_PATHS) >= 1024:
            _PATHS.clear()
        _PATHS[key] = optimize
    return np.einsum(spec, *xs, optimize=optimize)


def einsum_subscripts(args: tuple[Any, ...]) -> tuple[str, tuple[Any, ...]]:
    """NumPy's sublist form ``(x, [0, 1], y, [1, 2], [0, 2])`` as ``("ab,bc->ac", (x, y))``;
    ``(subscripts, *operands)`` passes through.

    >>> einsum_subscripts((np.ones((2, 3)), [0, 1], [1, 0]))[0]
    'ab->ba'
    """
    if isinstance(args[0], str):
        return args[0], args[1:]
    operands, subs = args[0::2], list(args[1::2])
    out = None
    if len(args) % 2:  # an odd count: the last sublist is the output's
        operands, out = operands[:-1], operands[-1]

    def spell(sub: Any) -> str:
        try:
            return "".join("..." if s is Ellipsis else string.ascii_letters[s] for s in sub)
        except (TypeError, IndexError):
            raise ValueError(
                f"einsum: a sublist holds integers in [0, 52) and Ellipsis, got {sub!r}"
            ) from None

    text = ",".join(spell(s) for s in subs)
    return (text if out is None else f"{text}->{spell(out)}"), tuple(operands)


def _parse_einsum(subscripts: str, ndims: list[int]) -> tuple[list[str], str]:
    """Split ``subscripts``, spell out ``...`` with unused letters, and check them.

    Without ``->`` the output is NumPy's implicit one: ``...``, then the letters used once, sorted.
    """
    text = subscripts.replace(" ", "")
    lhs, arrow, out = text.partition("->")
    ins = lhs.split(",")
    if len(ins) != len(ndims):
        raise ValueError(f"einsum: {subscripts!r} names {len(ins)} inputs but {len(ndims)} were given")
    if not arrow:
        letters = lhs.replace("...", "").replace(",", "")
        out = ("..." if "..." in lhs else "") + "".join(sorted(c for c in set(letters) if letters.count(c) == 1))
    free = [c for c in string.ascii_letters if c not in text]
    n_ell = max((nd - len(s.replace("...", "")) for s, nd in zip(ins, ndims) if "..." in s), default=0)
    ell = "".join(free[:n_ell])
    spelled = []
    for s, nd in zip(ins, ndims):
        if "..." in s:
            k = nd - len(s.replace("...", ""))
            s = s.replace("...", ell[n_ell - k:] if k > 0 else "")
        if len(s) != nd:
            raise ValueError(f"einsum: subscripts {s!r} do not match an input with {nd} axes")
        spelled.append(s)
    out = out.replace("...", ell)
    if len(set(out)) != len(out) or not set(out) <= set("".join(spelled)):
        raise ValueError(
            f"einsum: the output subscripts {out!r} of {subscripts!r} must name each letter once, and "
            "only letters of the inputs"
        )
    return spelled, out


def _weak_where(op: Callable[..., Any]) -> Callable[..., Any]:
    """``where`` with a Python number among ``x`` and ``y`` taken in the other's dtype (see ``_lift.weak``)."""

    def weak_where(cond: Any, x: Any, y: Any, need: tuple[bool, ...] = (False, True, True)) -> tuple[Any, Any]:
        return op(cond, weak(x, y), weak(y, x), need)

    weak_where.__name__, weak_where.__doc__ = op.__name__, op.__doc__
    return weak_where


if NUMPY1:  # a 0-d array meets a Python number in float64 there; on NumPy 2 in its own dtype
    where = _weak_where(where)
op("where", where, jvp=_where_jvp, need=True, keeps=("cond", "x", "y"), numpy=(np.where,))  # (after NumPy 1.x's)
