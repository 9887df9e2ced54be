"""One record per op: everything the transforms need to know about an op, declared in one place.

Each op's module declares it in one statement right under its rules::

    op("exp", exp, jvp=_exp_jvp, keeps=("ans",), numpy=(np.exp,))

and the tables the rest of LeanPass reads are derived from the records as they register:
``OPS`` (name -> function), ``JVPS`` (name -> forward-mode rule) and ``TAKES_NEED`` (the names
whose function takes ``need=``). The ops of the families that load on first use (``LAZY``, the
one list written by hand, checked by the tests against the records) register when their module
loads; ``OPS`` loads them before it answers for a name it does not hold yet, or lists its ops.

>>> from leanpass import functional as F
>>> rec = F.REGISTRY["exp"]
>>> rec.fn is F.exp, rec.need, rec.keeps, rec.vmap
(True, False, ('ans',), 'numpy')
>>> F.REGISTRY["@"].jvp is F.JVPS["@"]
True
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


class _Transposed:
    __slots__ = ()

    def __repr__(self) -> str:
        return "TRANSPOSED"


TRANSPOSED: Any = _Transposed()
"""``jvp=TRANSPOSED``: the op has no forward-mode rule of its own, and ``jvp`` transposes its VJP
(one replay of the op and its VJP per use: correct, slower than a rule)."""

BATCHED = "numpy"
"""``vmap="numpy"`` (the default): the op is batched by the batching rules of the NumPy functions it
calls. Any other string is a refusal: ``vmap`` of the op raises it as its error (``lp.apply`` checks
it as it records the op on a batched input, so an op that refuses is recorded through ``apply``)."""


class Op:
    """The record of an op (made by ``op``; read-only).

    ``name``: the ``_op`` name a Tensor carries; ``fn``: forward and VJP, ``fn(*inputs) -> (ans,
    vjp)``; ``jvp``: the forward-mode rule ``rule(tangents, ans, *inputs)``, or ``TRANSPOSED``;
    ``need``: ``fn`` takes ``need=`` (which inputs' cotangents to compute); ``keeps``: what the VJP
    keeps alive (``fn``'s parameter names, ``"ans"``, ``"work"`` for arrays of its own, ``"shape"``
    and such for metadata); ``numpy``: NumPy functions of the same meaning; ``vmap``: ``"numpy"``,
    or the message of a refusal; ``module``: where it is declared; ``internal``: an op of a
    transform's own, kept out of ``OPS``.

    >>> from leanpass import functional as F
    >>> F.REGISTRY["sum"].keeps
    ('shape',)
    """

    __slots__ = ("name", "fn", "jvp", "need", "keeps", "numpy", "vmap", "module", "internal")
    name: str
    fn: Callable[..., Any]
    jvp: Any
    need: bool
    keeps: tuple[str, ...]
    numpy: tuple[Callable[..., Any], ...]
    vmap: str
    module: str
    internal: bool

    def __init__(self, name: str, fn: Callable[..., Any], jvp: Any, need: bool, keeps: tuple[str, ...],
                 numpy: tuple[Callable[..., Any], ...], vmap: str, module: str, internal: bool) -> None:
        for field, value in zip(Op.__slots__, (name, fn, jvp, need, keeps, numpy, vmap, module, internal)):
            object.__setattr__(self, field, value)

    def __setattr__(self, field: str, value: Any) -> None:
        raise AttributeError(f"the record of op {self.name!r} is read-only (it cannot set {field!r})")

    def __delattr__(self, field: str) -> None:
        raise AttributeError(f"the record of op {self.name!r} is read-only (it cannot delete {field!r})")

    def __repr__(self) -> str:
        return f"<op {self.name!r} of {self.module}>"


# The families of ops that load on first use: module (in leanpass.functional) -> its ops' names.
# (The one table of names written by hand; tests check it against the records.)
LAZY: dict[str, tuple[str, ...]] = {
    "conv": ("conv1d", "conv2d", "conv2d_weight", "conv_transpose2d", "conv_transpose_input"),
    "pooling": ("avg_pool1d", "avg_pool2d", "max_pool1d", "max_pool2d"),
    "padding": ("pad",),
    "attention": ("scaled_dot_product_attention",),
    "norms": ("batch_norm", "group_norm", "layer_norm"),
    "linalg": ("cholesky", "cofactor", "det", "eigh", "inv", "lstsq", "norm", "pinv", "qr", "slogdet", "solve", "svd"),
    "special": ("betaln", "digamma", "erfinv", "gammaln", "log_ndtr", "logit", "ndtr", "polygamma", "xlog1py",
                "xlogy", "i0e", "i1e"),
}
LAZY_MODULE = {name: module for module, names in LAZY.items() for name in names}
_PACKAGE = __name__.rpartition(".")[0]


def load_all() -> None:
    """Load every family of ops that loads on first use (their ops register)."""
    for module in LAZY:
        importlib.import_module(f"{_PACKAGE}.{module}")


class _Table(dict[str, Any]):
    """The op table: a dict whose lookups of held names stay dict's own (the reverse pass's); a missing
    name, or a walk over the table, first loads the ops that load on first use."""

    def __missing__(self, name: str) -> Any:
        if name not in LAZY_MODULE:
            raise KeyError(name)
        load_all()
        return dict.__getitem__(self, name)

    def __iter__(self) -> Any:
        load_all()
        return dict.__iter__(self)

    def __len__(self) -> int:
        load_all()
        return dict.__len__(self)

    def __contains__(self, name: object) -> bool:
        return dict.__contains__(self, name) or name in LAZY_MODULE

    def keys(self) -> Any:
        load_all()
        return dict.keys(self)

    def values(self) -> Any:
        load_all()
        return dict.values(self)

    def items(self) -> Any:
        load_all()
        return dict.items(self)


class _Rules(_Table):
    """A table of rules for some of the ops (``JVPS``): as ``_Table``, but a name that loads on first
    use is in it only if its module, once loaded, gives it a rule."""

    def __contains__(self, name: object) -> bool:
        if not dict.__contains__(self, name) and name in LAZY_MODULE:
            load_all()
        return dict.__contains__(self, name)


class _Names(set[str]):
    """A set of op names (``TAKES_NEED``): as ``_Rules``, a name that loads on first use is in it only if
    its record, once loaded, puts it there; a walk over the set loads them all first."""

    def __contains__(self, name: object) -> bool:
        if not set.__contains__(self, name) and name in LAZY_MODULE:
            load_all()
        return set.__contains__(self, name)

    def __iter__(self) -> Any:
        load_all()
        return set.__iter__(self)

    def __len__(self) -> int:
        load_all()
        return set.__len__(self)


REGISTRY: dict[str, Op] = {}
"""Every op's record by name (the ops of the families that load on first use once loaded)."""
OPS: dict[str, Callable[..., Any]] = _Table()
JVPS: dict[str, Callable[..., Any]] = _Rules()
TAKES_NEED: set[str] = _Names()


def op(name: str, fn: Callable[..., Any], *, jvp: Any, need: bool = False, keeps: tuple[str, ...] = (),
       numpy: tuple[Callable[..., Any], ...] = (), vmap: str = BATCHED, module: str | None = None,
       internal: bool = False) -> Op:
    """Register op ``name``: its function ``fn`` (``fn(*inputs) -> (ans, vjp)``) and its rules.

    ``jvp`` is required: the forward-mode rule ``rule(tangents, ans, *inputs)``, or ``TRANSPOSED``
    to declare that forward mode transposes the VJP. ``internal`` keeps the op out of ``OPS``,
    ``JVPS`` and ``TAKES_NEED`` (an op of a transform's own). Returns the record; ``fn`` is left as it is.

    >>> import numpy as np
    >>> def twice(x):
    ...     return 2 * x, lambda g: (2 * g,)
    >>> rec = op("doc_twice", twice, jvp=lambda ts, ans, x: 2 * ts[0], numpy=(), internal=True)
    >>> REGISTRY["doc_twice"] is rec, "doc_twice" in OPS
    (True, False)
    >>> del REGISTRY["doc_twice"]
    """
    if name in REGISTRY:
        raise ValueError(f"op {name!r} is registered already (by {REGISTRY[name].module}): give the op a name "
                         "of its own")
    if jvp is not TRANSPOSED and not callable(jvp):
        raise TypeError(f"op {name!r}: jvp must be a rule rule(tangents, ans, *inputs) or TRANSPOSED, not {jvp!r}")
    if not isinstance(vmap, str):
        raise TypeError(f"op {name!r}: vmap must be 'numpy' or the message of a refusal, not {vmap!r}")
    if module is None:
        module = sys._getframe(1).f_globals["__name__"]
    rec = Op(name, fn, jvp, need, (keeps,) if isinstance(keeps, str) else tuple(keeps), tuple(numpy),
             BATCHED if vmap == BATCHED else vmap, module, internal)
    REGISTRY[name] = rec
    if not internal:
        dict.__setitem__(OPS, name, fn)
        if jvp is not TRANSPOSED:
            dict.__setitem__(JVPS, name, jvp)
        if need:
            TAKES_NEED.add(name)
    return rec


def forget(name: str) -> Op:
    """Unregister op ``name`` from the records and every table derived from them; returns its record.

    >>> rec = op("doc_gone", lambda x: (x, lambda g: (g,)), jvp=TRANSPOSED)
    >>> forget("doc_gone") is rec, "doc_gone" in OPS
    (True, False)
    """
    rec = REGISTRY.pop(name)
    dict.pop(OPS, name, None)
    dict.pop(JVPS, name, None)
    TAKES_NEED.discard(name)
    return rec


def refuse_batched(rec: Op, raw: Any) -> None:
    """Raise ``rec``'s declared refusal of ``vmap`` if one of the inputs ``raw`` is batched."""
    for r in raw:
        for v in (r if type(r) in (list, tuple) else (r,)):
            if getattr(type(v), "_lp_batched", False):
                raise NotImplementedError(f"vmap: op {rec.name!r} cannot be batched: {rec.vmap}")
