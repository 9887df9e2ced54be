"""Data-parallel training over MPI (mpi4py): every process holds the model, computes gradients
on its shard of each global batch, and ``all_reduce_mean`` averages them.

Start the same script on N processes with ``mpiexec -n N python train.py``. Without mpi4py,
or in a process started on its own, ``rank()`` is 0 and ``world_size()`` is 1 and every
function here returns its input's values, so one script runs anywhere. Install the ``mpi`` extra
(``pip install mpi4py mpich``: mpi4py and an MPI). ``import leanpass`` never imports this
module or mpi4py.

Every function is collective: each process must call it, in the same order, with a tree of the
same structure, shapes and dtypes. A tree that differs raises ``ValueError`` on every process,
naming the ranks and the first leaf that differs. A process that waits in a collective for
longer than ``timeout()`` seconds (300 by default; ``LEANPASS_MPI_TIMEOUT`` or
``set_timeout``) prints what it was waiting in and aborts the whole job: a rank that stopped,
hung or is running other code ends the run instead of hanging it. In a job of several
processes an uncaught exception on any rank aborts the job too (MPI would otherwise leave the
others waiting).

>>> import numpy as np
>>> from leanpass import distributed
>>> distributed.rank(), distributed.world_size()  # one process
(0, 1)
>>> distributed.all_reduce_mean({"w": np.array([1.0, 2.0])})
{'w': array([1., 2.])}
"""

from __future__ import annotations

import os
import sys
import threading
import time
import zlib
from typing import Any

import numpy as np

from .checkpoint import _class_name
from .core.tensor import Tensor, _const, _next_seq
from .core.tree import TreeDef, child_names, repeats, tree_flatten, tree_unflatten

__all__ = ["is_available", "rank", "world_size", "all_reduce_mean", "broadcast", "check_in_sync", "barrier",
           "timeout", "set_timeout", "OutOfSyncError", "MPI_MISSING"]

DEFAULT_TIMEOUT = 300.0

MPI_MISSING = ('leanpass.distributed needs mpi4py and an MPI library to run on several processes: '
               'pip install mpi4py mpich (the MPICH wheel brings mpiexec; in a clone of LeanPass: '
               'pip install -e ".[mpi]").')


class OutOfSyncError(RuntimeError):
    """The replicas' values differ across processes (raised by ``check_in_sync`` on every rank).

    >>> issubclass(OutOfSyncError, RuntimeError)
    True
    """


# ----- the world: mpi4py's COMM_WORLD, or one process without it ----------------------------------
class _World:
    """The communicator, this process's rank and the size, and the watchdog that bounds each wait."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.rank = 0 if comm is None else comm.Get_rank()
        self.size = 1 if comm is None else comm.Get_size()
        self.mpi: Any = None
        self.watchdog: _Watchdog | None = None
        if comm is not None:
            from mpi4py import MPI

            self.mpi = MPI
            if self.size > 1:
                self.watchdog = _Watchdog(comm, self.rank, self.size)
                _abort_on_uncaught_exception(comm)


_WORLD: _World | None = None
_TIMEOUT: list[float | None] = []  # set_timeout's value, once called


def _launched_size() -> int:
    """How many processes the launcher says it started (MPICH's or Open MPI's variables), else 1."""
    for name in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        try:
            return int(os.environ[name])
        except (KeyError, ValueError):
            continue
    return 1


def _world() -> _World:
    global _WORLD
    if _WORLD is None:
        launched = _launched_size()
        try:
            from mpi4py import MPI
        except ImportError as e:  # not installed, or its MPI library cannot be loaded
            if launched > 1:  # each process would train alone, silently
                raise RuntimeError(
                    f"leanpass.distributed: this process is one of {launched} that mpiexec started, but mpi4py "
                    f"cannot be imported ({e}). {MPI_MISSING}"
                ) from None
            _WORLD = _World(None)
        else:
            world = _World(MPI.COMM_WORLD)
            if world.size == 1 and launched > 1:
                raise RuntimeError(
                    f"leanpass.distributed: mpiexec started {launched} processes, but MPI says this one is alone: "
                    "mpi4py was built for another MPI library than this mpiexec's. Use the mpiexec that belongs "
                    "to mpi4py's MPI (with pip install mpi4py mpich: the one installed beside python)."
                )
            _WORLD = world
    return _WORLD


def is_available() -> bool:
    """True when mpi4py (and so MPI) can be imported: ``pip install mpi4py mpich`` brings it.

    >>> isinstance(is_available(), bool)
    True
    """
    return _world().comm is not None


def rank() -> int:
    """This process's number, 0 to ``world_size() - 1`` (0 without mpi4py or on one process).

    >>> rank()
    0
    """
    return _world().rank


def world_size() -> int:
    """How many processes take part (1 without mpi4py or when started without ``mpiexec``).

    >>> world_size()
    1
    """
    return _world().size


def timeout() -> float | None:
    """Seconds a process waits in one collective before it aborts the job (None: no limit).

    300 by default; the environment variable ``LEANPASS_MPI_TIMEOUT`` (seconds, or ``none``)
    or ``set_timeout`` changes it.

    >>> timeout() is None or timeout() > 0
    True
    """
    if _TIMEOUT:
        return _TIMEOUT[0]
    text = os.environ.get("LEANPASS_MPI_TIMEOUT", "").strip()
    if not text:
        return DEFAULT_TIMEOUT
    if text.lower() in ("none", "inf", "0"):
        return None
    try:
        value = float(text)
    except ValueError:
        raise ValueError(
            f"LEANPASS_MPI_TIMEOUT={text!r} is not a number of seconds; set it to e.g. 600, or to none for no limit"
        ) from None
    return value if value > 0 else None


def set_timeout(seconds: float | None) -> None:
    """Set how long a collective may wait for the other processes (None: wait for ever).

    It must be set alike on every rank; it applies from the next call on.

    >>> set_timeout(120.0); timeout()
    120.0
    >>> set_timeout(DEFAULT_TIMEOUT)
    """
    if seconds is not None and (isinstance(seconds, bool) or not isinstance(seconds, (int, float))
                                or not seconds > 0):
        raise ValueError(f"set_timeout: give a positive number of seconds or None, got {seconds!r}")
    _TIMEOUT[:] = [None if seconds is None else float(seconds)]


class _Watchdog:
    """One daemon thread that aborts the job when one collective call has waited past the timeout.

    Arming and disarming are two attribute writes each (no clock, no thread or timer per call):
    ``calls`` is odd while a call is armed and changes with every call. The thread looks at it
    ten times a second and fires when it has seen the same armed call for longer than
    ``timeout()`` (so a timeout fires at most about 0.1 s late). mpi4py releases the GIL while
    it waits in MPI, so the thread runs while the main thread is blocked.
    """

    def __init__(self, comm: Any, rank: int, size: int) -> None:
        self.comm, self.rank, self.size = comm, rank, size
        self.calls = 0
        self.what = ""
        self.limit = 0.0
        timeout()  # a bad LEANPASS_MPI_TIMEOUT is an error here, in the main thread
        threading.Thread(target=self._watch, name="leanpass-mpi-watchdog", daemon=True).start()

    def arm(self, what: str) -> None:
        self.what = what
        self.calls += 1

    def disarm(self) -> None:
        self.calls += 1

    def _watch(self) -> None:
        seen, since = 0, 0.0
        while True:
            calls, now = self.calls, time.monotonic()
            if not calls & 1:  # between calls
                seen = calls
            elif calls != seen:  # a new call since the last look
                seen, since = calls, now
            else:
                try:
                    limit = timeout()
                except ValueError:  # the environment changed to a bad value: keep the default
                    limit = DEFAULT_TIMEOUT
                if limit is not None and now - since > limit:
                    self.limit = limit
                    self._fire()
            time.sleep(0.1)

    def _fire(self) -> None:
        sys.stderr.write(
            f"leanpass.distributed: rank {self.rank} of {self.size} waited more than {self.limit:g} s in "
            f"{self.what} for the other ranks. One of them has stopped, hung, or is running different code "
            "(every rank must make the same collective calls in the same order). Aborting the job. "
            "A longer limit: LEANPASS_MPI_TIMEOUT=seconds or leanpass.distributed.set_timeout(seconds).\n"
        )
        _abort(self.comm, 3)


_FORWARD = 0.5  # seconds for mpiexec to pass a message on before MPI_Abort ends every process


def _abort(comm: Any, code: int) -> None:
    """End every process of the job with exit ``code``, once the message written to stderr is on its way."""
    sys.stderr.flush()
    time.sleep(_FORWARD)
    try:
        comm.Abort(code)
    finally:
        os._exit(code)


def _abort_on_uncaught_exception(comm: Any) -> None:
    """Make an uncaught exception end the whole job (as ``python -m mpi4py`` does), not hang it."""
    previous = sys.excepthook

    def hook(kind: Any, value: Any, tb: Any) -> None:
        previous(kind, value, tb)
        sys.stderr.flush()
        sys.stdout.flush()
        time.sleep(_FORWARD)
        comm.Abort(1)

    sys.excepthook = hook


class _Collective:
    """``with _Collective(world, "all_reduce_mean"):`` bounds the MPI calls inside by the timeout."""

    __slots__ = ("wd", "what")

    def __init__(self, world: _World, what: str) -> None:
        self.wd, self.what = world.watchdog, what

    def __enter__(self) -> None:
        if self.wd is not None:
            self.wd.arm(self.what)

    def __exit__(self, *exc: Any) -> None:
        if self.wd is not None:
            self.wd.disarm()


def _world_for(comm: Any) -> _World:
    if comm is None:
        return _world()
    world = _world()
    if comm is world.comm:
        return world
    other = _World.__new__(_World)
    other.comm, other.rank, other.size = comm, comm.Get_rank(), comm.Get_size()
    other.mpi, other.watchdog = world.mpi, world.watchdog
    if other.mpi is None:
        from mpi4py import MPI

        other.mpi = MPI
    return other


# ----- leaves and the layout of a tree ----------------------------------------------------------------
def _leaf_array(x: Any, where: str, treedef: TreeDef, i: int) -> np.ndarray:
    """The raw values of leaf ``i`` (a Tensor's own array, never a copy)."""
    if type(x) is Tensor:
        if x._marks > 1 or (x._marks == 1 and x._op != "leaf"):
            raise TypeError(
                f"{where}: the leaf {_layout(treedef)[1][i]} is a Tensor that is being differentiated; {where} is not "
                "differentiable. Call it on the gradients (the result of lp.grad, or optim.collect_grads "
                "after .backward()), outside the function being differentiated."
            )
        x = x._data
        if not isinstance(x, (np.ndarray, np.generic)):
            raise TypeError(
                f"{where}: the leaf {_layout(treedef)[1][i]} holds a {type(x).__name__}, not a NumPy array: "
                f"{where} is being traced (by lp.jit, say), and it cannot be. Call it between the jitted "
                "functions, on their results: the jitted gradient, then all_reduce_mean, then the jitted update."
            )
    if isinstance(x, np.ndarray):
        return x
    if isinstance(x, (bool, int, float, np.generic)):
        return np.asarray(x)
    raise TypeError(
        f"{where}: the leaf {_layout(treedef)[1][i]} is a {type(x).__name__}; the leaves must be arrays, "
        "Tensors or numbers."
    )


def _rebuild(like: Any, values: np.ndarray) -> Any:
    """``values`` as a leaf of the kind ``like`` was (a Tensor keeps requires_grad)."""
    if type(like) is Tensor:
        values.flags.writeable = False
        return _const(values, 1, _next_seq()) if like._marks else _const(values)
    if isinstance(like, np.ndarray):
        return values
    if isinstance(like, np.generic):
        return values[()]
    return type(like)(values[()])  # a Python number stays one


_LAYOUTS: dict[Any, tuple[str, list[str]]] = {}


def _layout(treedef: TreeDef) -> tuple[str, list[str]]:
    """A description of the structure that is equal on every process for equal structures (no
    ids, no hashes that vary by process), and each leaf's path (``[0].weight``) for messages."""
    try:
        hit = _LAYOUTS.get(treedef)
    except TypeError:  # metadata that cannot be hashed
        hit = None
    if hit is not None:
        return hit
    paths: list[str] = []
    text = _describe(treedef, "", paths)
    result = (text, paths)
    try:
        if len(_LAYOUTS) > 256:
            _LAYOUTS.clear()
        _LAYOUTS[treedef] = result
    except TypeError:
        pass
    return result


def _describe(td: TreeDef, path: str, paths: list[str]) -> str:
    kind, meta, kids = td
    if kind is None:
        paths.append(path or "<root>")
        return "*"
    if kind is dict:
        names = [f"[{k!r}]" for k in meta]
    elif kind in (list, tuple, type(None)):
        names = [f"[{i}]" for i in range(len(kids))]
    else:
        names = child_names(kind, len(kids))
    inner = ",".join(_describe(c, path + n, paths) for c, n in zip(kids, names))
    name = kind.__name__ if kind in (dict, list, tuple, type(None)) else _class_name(kind)
    return f"{name}{_stable(meta)}({inner})"


def _stable(meta: Any) -> str:
    """Metadata in words that do not change from one process to the next."""
    if meta is None or isinstance(meta, (bool, int, float, str)):
        return repr(meta)
    if isinstance(meta, (tuple, list)):
        return "(" + ",".join(_stable(m) for m in meta) + ")"
    if callable(meta):
        return getattr(meta, "__qualname__", type(meta).__name__)
    return type(meta).__name__


class _Plan:
    """What one layout needs, worked out once and kept: the leaves' paths, a checksum of the
    layout (structure, shapes, dtypes), and for each dtype where each leaf sits in its buffer."""

    __slots__ = ("layout", "paths", "signature", "groups", "checks", "means")

    def __init__(self, treedef: TreeDef, specs: tuple[tuple[Any, np.dtype], ...], where: str,
                 floats_only: bool) -> None:
        self.layout, self.paths = _layout(treedef)
        for (_, dtype), path in zip(specs, self.paths):
            if dtype.kind not in ("f" if floats_only else "biuf"):
                raise TypeError(
                    f"{where}: the leaf {path} has dtype {dtype}; "
                    + ("only floating-point leaves can be averaged (gradients are)." if floats_only
                       else "the leaves must hold numbers.")
                )
        text = ";".join(f"{dtype.str}{shape}" for shape, dtype in specs)
        self.signature = zlib.crc32(f"{self.layout}|{text}".encode())
        by_dtype: dict[np.dtype, list[int]] = {}
        for i, (_, dtype) in enumerate(specs):
            by_dtype.setdefault(dtype, []).append(i)
        # per dtype: (dtype, buffer length, [(leaf index, start, stop, shape), ...])
        self.groups: list[tuple[np.dtype, int, list[tuple[int, int, int, Any]]]] = []
        for dtype, idx in by_dtype.items():
            places, start = [], 0
            for i in idx:
                shape = specs[i][0]
                stop = start + int(np.prod(shape, dtype=np.int64))
                places.append((i, start, stop, shape))
                start = stop
            self.groups.append((dtype, start, places))
        self.checks: dict[str, np.ndarray] = {}  # per collective's name: the pair _agree sends
        self.means: dict[int, tuple[int | None, list[tuple[Any, int, Any, np.ndarray, Any]]]] = {}

    def check_pair(self, what: str) -> np.ndarray:
        """A fresh copy of ``[sig, -sig]`` for this layout in the call ``what`` (worked out once)."""
        pair = self.checks.get(what)
        if pair is None:
            sig = zlib.crc32(what.encode(), self.signature)
            pair = self.checks[what] = np.array([sig, -sig], dtype=np.int64)
        return pair.copy()

    def mean_groups(self, size: int) -> tuple[int | None, list[tuple[Any, int, Any, np.ndarray, Any]]]:
        """For all_reduce_mean on ``size`` ranks: the layout's checksum (None if the check cannot
        travel in the data), and per dtype (dtype, length, places, the numbers that carry the
        check at the end of the buffer, the sums they must have after the all-reduce).

        The 32-bit checksum is cut into chunks ``c`` of ``b`` bits, and each rank sends ``v = c + 1``
        and ``v * v``. Every sum is an integer small enough to be exact in the dtype, so the sums
        are ``size * v`` and ``size * v * v`` exactly when every rank sent the same ``v`` (the sum
        of squares exceeds ``(sum v)^2 / size`` otherwise), and they are not when a rank's values
        were added to other numbers or not at all (v >= 1). A dtype too short to hold them exactly
        (float16 on hundreds of ranks) sends none, and every call is then checked on its own.
        """
        hit = self.means.get(size)
        if hit is None:
            sig = int(self.check_pair("all_reduce_mean")[0])
            # integers up to 2**(nmant + 1) are exact in a dtype: chunks of b bits with size * (2**b)**2 below it
            bits = [(np.finfo(dtype).nmant + 1 - (size - 1).bit_length()) // 2 for dtype, _, _ in self.groups]
            fits = min(bits, default=0) >= 4
            groups = []
            for (dtype, length, places), b in zip(self.groups, bits):
                values = []
                for k in range(0, 32, b) if fits else ():
                    v = ((sig >> k) & ((1 << b) - 1)) + 1
                    values += [v, v * v]
                sums = [float(size * v) for v in values] if fits else None
                groups.append((dtype, length, places, np.array(values, dtype=dtype), sums))
            hit = self.means[size] = (sig if fits else None, groups)
        return hit


# (id of a treedef, floats only) -> (that treedef, the leaves' (shape, dtype)s, its plan). A model's
# gradients come back each step with the same treedef object (tree_unflatten keeps frozen modules'),
# so the lookup is one identity test and one comparison of shapes.
_PLANS: dict[tuple[int, bool], tuple[TreeDef, Any, _Plan]] = {}


class _Flat:
    """A tree taken apart: its leaves, their arrays, the structure and its plan."""

    __slots__ = ("leaves", "arrays", "treedef", "plan")

    def __init__(self, tree: Any, where: str, floats_only: bool) -> None:
        self.leaves, self.treedef = tree_flatten(tree)
        arrays = []
        for i, x in enumerate(self.leaves):  # the usual leaves first: a gradient Tensor, an array
            if type(x) is Tensor and not x._marks and type(x._data) is np.ndarray:
                arrays.append(x._data)
            elif type(x) is np.ndarray:
                arrays.append(x)
            else:
                arrays.append(_leaf_array(x, where, self.treedef, i))
        self.arrays = arrays
        specs = tuple([(a.shape, a.dtype) for a in arrays])
        key = (id(self.treedef), floats_only)
        hit = _PLANS.get(key)
        if hit is not None and hit[0] is self.treedef and hit[1] == specs:
            self.plan = hit[2]
            return
        self.plan = _Plan(self.treedef, specs, where, floats_only)
        if len(_PLANS) >= 256:
            _PLANS.clear()
        _PLANS[key] = (self.treedef, specs, self.plan)  # holds the treedef: its id stays its own

    def rebuild(self, arrays: list[Any]) -> Any:
        built = []
        for x, a in zip(self.leaves, arrays):
            if type(x) is Tensor and not x._marks:  # (a gradient: _rebuild's first case, inline)
                a.flags.writeable = False
                built.append(_const(a))
            else:
                built.append(_rebuild(x, a))
        if repeats(self.leaves):  # a Tensor at several leaves (tied): one again
            first: dict[int, int] = {}
            for i, x in enumerate(self.leaves):
                if type(x) is Tensor:
                    built[i] = built[first.setdefault(id(x), i)]
        return tree_unflatten(self.treedef, built)


# The checksums of the layouts that every rank has passed to all_reduce_mean on COMM_WORLD, each
# checked once by _agree. It changes at the same calls on every rank of a correct program (only
# when a check succeeds everywhere, and cleared when one fails), so all ranks agree on it.
_VERIFIED: set[int] = set()


def _agree(world: _World, flat: _Flat, what: str) -> None:
    """One small all-reduce (MAX of the layout's checksum and of its negation) that tells whether
    every rank is in the same call with the same layout; if not, raise ValueError on every rank,
    naming the ranks and the first leaf that differs."""
    mpi = world.mpi
    pair = flat.plan.check_pair(what)
    world.comm.Allreduce(mpi.IN_PLACE, pair, op=mpi.MAX)
    high, low = pair.tolist()
    if high == -low and high == flat.plan.checks[what][0]:
        return
    _disagree(world, flat, what)


def _abort_out_of_step(world: _World, error: str) -> None:
    """MPI failed in an all-reduce whose layout was not checked by a call of its own (it had been
    checked before): the ranks are out of step. MPI leaves the communicator unusable: end the job."""
    sys.stderr.write(
        f"leanpass.distributed: rank {world.rank} of {world.size}: MPI failed in all_reduce_mean ({error}). The ranks "
        "are out of step: they passed trees of different sizes, or are not making the same calls in the same order "
        "(one rank took a step more than another, say). Every rank must make the same calls in the same order, "
        "each with a tree of the same structure, shapes and dtypes. Aborting the job.\n"
    )
    _abort(world.comm, 4)


def _disagree(world: _World, flat: _Flat, what: str) -> None:
    """The ranks' layouts differ: gather them and raise ValueError naming the first difference."""
    _VERIFIED.clear()
    plan = flat.plan
    mine = (what, plan.layout, plan.paths, [(a.shape, a.dtype.str) for a in flat.arrays])
    every = world.comm.allgather(mine)
    raise ValueError(_mismatch(every))


def _count(n: int) -> str:
    return f"{n} leaf" if n == 1 else f"{n} leaves"


def _mismatch(every: list[tuple[str, str, list[str], list[tuple[Any, str]]]]) -> str:
    """The message for trees (or calls) that differ across ranks; ``every[r]`` is rank r's view."""
    what0, layout0, paths0, specs0 = every[0]
    odd = [r for r, e in enumerate(every) if e[0] != what0 or e[1] != layout0 or e[3] != specs0]
    r = odd[0]
    what, layout, paths, specs = every[r]
    head = f"the ranks' trees do not match: ranks {odd} differ from rank 0"
    fix = ("Every rank must make the same calls in the same order, each with a tree of the same "
           "structure, shapes and dtypes (build the model the same way on every rank).")
    if what != what0:
        return f"{head}: rank 0 called {what0} but rank {r} called {what}. {fix}"
    if layout != layout0:
        detail = "the containers differ"
        if len(paths) != len(paths0):
            detail = f"rank 0's tree has {_count(len(paths0))}, rank {r}'s has {_count(len(paths))}"
        for i in range(max(len(paths), len(paths0))):
            p = paths0[i] if i < len(paths0) else None
            q = paths[i] if i < len(paths) else None
            if p != q:
                if p is None:
                    detail += f"; rank {r} also has the leaf {q}"
                elif q is None:
                    detail += f"; rank 0 also has the leaf {p}"
                else:
                    detail += f"; leaf {i} is {p} on rank 0 but {q} on rank {r}"
                break
        return f"{what0}: {head} ({detail}). {fix}"
    for p, a, b in zip(paths0, specs0, specs):
        if a != b:
            return (f"{what0}: {head}: the leaf {p} has shape {tuple(a[0])} and dtype {np.dtype(a[1])} on rank 0 "
                    f"but shape {tuple(b[0])} and dtype {np.dtype(b[1])} on rank {r}. {fix}")
    return f"{what0}: {head}. {fix}"  # pragma: no cover - a checksum collision of different layouts


# ----- the collectives ---------------------------------------------------------------------------------
def all_reduce_mean(tree: Any, *, comm: Any = None) -> Any:
    """The mean over all processes of a pytree of gradients, in the same structure.

    The leaves of each dtype travel in one contiguous buffer with one ``Allreduce`` (not one
    call per leaf). The first call with a layout (structure, shapes, dtypes) checks that every
    rank passed the same one with a small all-reduce of its own; later calls with that layout
    carry the check at the end of the data buffer, so a training step makes one call per dtype
    and a layout that differs still raises ``ValueError`` on every rank. A model-shaped gradient
    (``lp.grad`` of a model, ``optim.collect_grads``) comes back model-shaped; arrays come back
    as arrays, Tensors as Tensors, numbers as numbers. At world size 1 the tree is returned as
    it is. ``comm`` is an mpi4py communicator (default ``COMM_WORLD``; the check travels with the
    data on ``COMM_WORLD`` only). Nothing passed in is changed.

    >>> import leanpass as lp
    >>> grads = {"w": np.array([0.5, -1.0]), "b": lp.Tensor(2.0)}
    >>> all_reduce_mean(grads)
    {'w': array([ 0.5, -1. ]), 'b': Tensor(2.)}
    """
    world = _world_for(comm)
    flat = _Flat(tree, "all_reduce_mean", floats_only=True)
    if world.size == 1:
        return tree
    mpi, arrays, plan = world.mpi, flat.arrays, flat.plan
    scale = 1.0 / world.size  # a multiply is faster than a divide (and exact for 2, 4, 8, ... ranks)
    out: list[Any] = [None] * len(arrays)
    sig, groups = plan.mean_groups(world.size)
    watchdog = world.watchdog  # (_Collective's work, inline: this is every step's call)
    if watchdog is not None:
        watchdog.arm("all_reduce_mean")
    try:
        # A layout seen for the first time is checked by one small all-reduce of its own. After
        # that, the check travels inside the data: the same call on every rank in a correct program
        # (so no extra meeting per step), and a different layout of the same size shows in the sums.
        on_world = world is _WORLD
        checked = sig is None or not on_world or sig not in _VERIFIED
        if checked:
            _agree(world, flat, "all_reduce_mean")
            if sig is not None and on_world:
                if len(_VERIFIED) > 4096:
                    _VERIFIED.clear()  # (at the same call on every rank)
                _VERIFIED.add(sig)
        for dtype, length, places, tail, sums in groups:
            buffer = np.empty(length + len(tail), dtype=dtype)
            for i, start, stop, shape in places:  # each rank adds x / size: the sum is the mean
                out[i] = np.multiply(arrays[i], scale, out=buffer[start:stop].reshape(shape))  # a view: the result
            end = buffer[length:]
            end[...] = tail
            try:
                world.comm.Allreduce(mpi.IN_PLACE, buffer, op=mpi.SUM)  # in place: the views in ``out`` hold the mean
            except mpi.Exception as e:  # (buffers of different sizes, unchecked: the calls are out of step)
                if checked:
                    raise
                _abort_out_of_step(world, str(e).split(",")[0])
            if sums is not None and end.tolist() != sums:
                _disagree(world, flat, "all_reduce_mean")
    finally:
        if watchdog is not None:
            watchdog.disarm()
    return flat.rebuild(out)


def broadcast(tree: Any, root: int = 0, *, comm: Any = None) -> Any:
    """Rank ``root``'s values of ``tree`` on every process (the initial parameters, a checkpoint
    loaded on one rank, an optimizer state).

    Every rank passes a tree of the same structure, shapes and dtypes (build the model on every
    rank; ``root`` may have loaded its values from a file); each gets back a new tree of that
    structure holding ``root``'s values, one ``Bcast`` per dtype. Tensors that require grad
    still do. At world size 1 the tree is returned as it is.

    >>> broadcast([np.arange(3.0), 7])
    [array([0., 1., 2.]), 7]
    """
    world = _world_for(comm)
    if isinstance(root, bool) or not isinstance(root, (int, np.integer)) or not 0 <= root < world.size:
        raise ValueError(f"broadcast: root must be a rank from 0 to {world.size - 1}, got {root!r}")
    flat = _Flat(tree, "broadcast", floats_only=False)
    if world.size == 1:
        return tree
    out: list[Any] = [None] * len(flat.arrays)
    with _Collective(world, f"broadcast(root={root})"):
        _agree(world, flat, f"broadcast(root={root})")
        for dtype, length, places in flat.plan.groups:
            buffer = np.empty(length, dtype=dtype)
            if world.rank == root:
                for i, start, stop, _ in places:
                    buffer[start:stop] = flat.arrays[i].reshape(-1)
            world.comm.Bcast(buffer, root=int(root))
            for i, start, stop, shape in places:
                out[i] = buffer[start:stop].reshape(shape)
    return flat.rebuild(out)


def check_in_sync(tree: Any, *, comm: Any = None) -> None:
    """Raise ``OutOfSyncError`` on every rank if any leaf of ``tree`` differs in any bit across
    processes (replicas that drifted apart), naming the leaves and the ranks; else return None.

    It sends one checksum per leaf (CRC-32 of its bytes), so it costs one pass over the values
    and one small all-reduce: cheap enough to run every epoch, or every step while debugging.

    >>> check_in_sync({"w": np.ones(3)})  # one process: always in sync
    """
    world = _world_for(comm)
    flat = _Flat(tree, "check_in_sync", floats_only=False)
    if world.size == 1:
        return
    mpi = world.mpi
    sums = np.array([zlib.crc32(np.ascontiguousarray(a).data) for a in flat.arrays],
                    dtype=np.int64)
    with _Collective(world, "check_in_sync"):
        _agree(world, flat, "check_in_sync")
        both = np.concatenate([sums, -sums])
        world.comm.Allreduce(mpi.IN_PLACE, both, op=mpi.MAX)
        n = len(sums)
        drifted = np.flatnonzero(both[:n] != -both[n:])
        if not len(drifted):
            return
        every = world.comm.allgather(sums)
    details = []
    for i in drifted[:3]:
        odd = [r for r in range(world.size) if every[r][i] != every[0][i]]
        details.append(f"{flat.plan.paths[i]} differs on ranks {odd} from rank 0")
    more = f" (and {len(drifted) - 3} more)" if len(drifted) > 3 else ""
    raise OutOfSyncError(
        f"check_in_sync: the replicas have drifted apart in {len(drifted)} of {n} leaves: "
        f"{'; '.join(details)}{more}. Broadcast the parameters from rank 0 after building the model "
        "(distributed.broadcast), average every gradient with all_reduce_mean before the update, and "
        "give every rank the same optimizer and schedule."
    )


def barrier(*, comm: Any = None) -> None:
    """Wait until every process has reached this point (bounded by ``timeout()`` like the rest).

    >>> barrier()
    """
    world = _world_for(comm)
    if world.size == 1:
        return
    with _Collective(world, "barrier"):
        world.comm.Barrier()


def __dir__() -> list[str]:
    """The public names (``__all__``) and the module's dunders; not the helpers it imports."""
    return sorted({*__all__, *(name for name in globals() if name.startswith("__"))})
