"""Jobs that tests/test_distributed.py runs under ``mpiexec -n 2`` (and alone, for the reference).

    python tests/mpi_jobs.py JOB OUT_DIR [MODE]

Each job writes what it saw to files in OUT_DIR (one per rank); the tests read them and assert.
Importing this module does nothing (pytest's doctest collection imports it).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import leanpass as lp
from leanpass import data, distributed, losses, nn, optim

STEPS = 20  # 10 global batches of 16 per epoch, 2 epochs


def problem() -> tuple[np.ndarray, np.ndarray]:
    """160 examples of 10 features in 3 classes, float64."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(160, 10))
    y = (x[:, 0] + x[:, 1] > 0).astype(int) + (x[:, 2] > 0.5)
    return x, y


def flat(model: Any) -> np.ndarray:
    return np.concatenate([leaf._data.ravel() for leaf in lp.tree_flatten(model)[0]])


def train(out: Path) -> None:
    """Train the same MLP in both styles; save the parameters after every step."""
    r, n = distributed.rank(), distributed.world_size()
    x, y = problem()
    histories = {}
    for style in ("functional", "eager"):
        model = nn.MLP([10, 16, 3], rng=1, dtype=np.float64)
        if style == "eager":
            model = nn.trainable(model)
        model = distributed.broadcast(model)
        opt = optim.adam(1e-2)
        state = opt.init(model)
        value_and_grad = lp.value_and_grad(lambda m, xb, yb: losses.cross_entropy(m(xb), yb))
        order = np.random.default_rng(2)  # the same on every rank: the same global batches
        history = []
        for _ in range(2):
            for xb, yb in data.batches(x, y, batch_size=16, rng=order, shard=(r, n)):
                if style == "functional":
                    _, grads = value_and_grad(model, xb, yb)
                else:
                    losses.cross_entropy(model(xb), yb).backward()
                    grads = optim.collect_grads(model)
                grads = distributed.all_reduce_mean(grads)
                updates, state = opt.update(grads, state, model)
                model = optim.apply_updates(model, updates)
                history.append(flat(model))
        assert len(history) == STEPS, len(history)
        if style == "eager":
            assert all(leaf.requires_grad for leaf in lp.tree_flatten(model)[0])
        histories[style] = np.stack(history)
    np.savez(out / f"train_{n}procs_rank{r}.npz", **histories)


class Counting:
    """COMM_WORLD, recording the all-reduce calls and their sizes."""

    def __init__(self, comm: Any) -> None:
        self.comm, self.calls = comm, []

    def Allreduce(self, sendbuf: Any, recvbuf: Any, op: Any) -> None:  # noqa: N802 (mpi4py's name)
        self.calls.append(["Allreduce", int(recvbuf.size), str(recvbuf.dtype)])
        self.comm.Allreduce(sendbuf, recvbuf, op=op)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.comm, name)


def values(tree: Any) -> list[Any]:
    """The leaves' values as lists (a Tensor's array read directly)."""
    return [np.asarray(x._data if isinstance(x, lp.Tensor) else x).tolist() for x in lp.tree_flatten(tree)[0]]


def error_text(f: Any) -> str:
    try:
        f()
    except (ValueError, distributed.OutOfSyncError) as e:
        return f"{type(e).__name__}: {e}"
    return "no error"


def checks(out: Path) -> None:
    """Broadcast, the mean and its calls, the sync check, mismatched trees, sharding."""
    from mpi4py import MPI

    r, n = distributed.rank(), distributed.world_size()
    facts: dict[str, Any] = {"rank": r, "size": n}

    mine = {"w": np.full((2, 3), float(r)), "b": lp.Tensor(np.arange(3.0) + r, requires_grad=True),
            "step": 5 + r, "h": np.float32(r)}
    got = distributed.broadcast(mine, root=1)
    facts["broadcast"] = {"w": got["w"].tolist(), "b": got["b"]._data.tolist(),
                          "b_requires_grad": got["b"].requires_grad,
                          "step": got["step"], "step_type": type(got["step"]).__name__, "h": float(got["h"]),
                          "h_type": type(got["h"]).__name__, "mine_w_after": mine["w"].tolist()}

    grads = {"a": np.full(3, float(r)), "b": np.full((2, 2), 10.0 * r, dtype=np.float32),
             "c": [np.full(4, 2.0 * r + 1.0), lp.Tensor(np.float32(r))]}
    world = distributed._world()
    counting = Counting(world.comm)
    world.comm = counting  # COMM_WORLD, counted
    try:
        mean = distributed.all_reduce_mean(grads)
        first, counting.calls = counting.calls, []
        again = distributed.all_reduce_mean(grads)
        facts["calls_again"], counting.calls = counting.calls, []
        for _ in range(2):  # float16: the check in the data in 5-bit chunks (its integers are exact up to 2048)
            half = distributed.all_reduce_mean({"h": np.full(3, r, dtype=np.float16)})
        facts["calls_float16"], facts["mean_float16"] = counting.calls, half["h"].tolist()
    finally:
        world.comm = counting.comm
    facts["again_equal"] = values(again) == values(mean)
    other = Counting(MPI.COMM_WORLD)  # another communicator object than COMM_WORLD's: checked every call
    distributed.all_reduce_mean(grads, comm=other)
    distributed.all_reduce_mean(grads, comm=other)
    facts["calls_other_comm"] = other.calls
    facts["mean"] = {"a": mean["a"].tolist(), "b": mean["b"].tolist(), "b_dtype": str(mean["b"].dtype),
                     "c0": mean["c"][0].tolist(), "c1": float(mean["c"][1].item()),
                     "c1_type": type(mean["c"][1]).__name__, "calls": first,
                     "grads_a_after": grads["a"].tolist()}

    model = nn.MLP([4, 5, 2], rng=0, dtype=np.float64)
    xb = np.random.default_rng(10 + r).normal(size=(6, 4))  # each rank its own data
    g = lp.grad(lambda m: losses.cross_entropy(m(xb), np.array([0, 1, 0, 1, 1, 0])))(model)
    avg = distributed.all_reduce_mean(g)
    by_hand = [np.mean(MPI.COMM_WORLD.allgather(leaf._data), axis=0) for leaf in lp.tree_flatten(g)[0]]
    facts["model_grad"] = {"type": type(avg).__name__,
                           "leaf_types": sorted({type(leaf).__name__ for leaf in lp.tree_flatten(avg)[0]}),
                           "err": max(float(np.max(np.abs(a._data - b)))
                                      for a, b in zip(lp.tree_flatten(avg)[0], by_hand))}

    w = lp.Tensor(np.full(3, float(r)), requires_grad=True)  # tied weights: one Tensor at two places
    tied = distributed.broadcast({"a": w, "b": w}, root=1)
    tied_grads = distributed.all_reduce_mean(lp.grad(lambda p: (p["a"] * p["b"] * (r + 1)).sum())({"a": w, "b": w}))
    facts["tied"] = {"broadcast_one": tied["a"] is tied["b"], "broadcast": tied["a"]._data.tolist(),
                     "mean_one": tied_grads["a"] is tied_grads["b"], "mean": tied_grads["b"]._data.tolist()}

    facts["in_sync"] = error_text(lambda: distributed.check_in_sync(model))
    drifted = model
    if r == 1:  # one bit off in one parameter on rank 1
        bias = model.layers[1].bias._data.copy()
        bias[0] = np.nextafter(bias[0], np.inf)
        drifted = model.replace(layers=(model.layers[0], model.layers[1].replace(bias=lp.Tensor(bias))))
    facts["drifted"] = error_text(lambda: distributed.check_in_sync(drifted))

    facts["shape_mismatch"] = error_text(lambda: distributed.all_reduce_mean({"w": np.zeros(3 + r)}))
    facts["structure_mismatch"] = error_text(
        lambda: distributed.all_reduce_mean({"w": np.zeros(3)} if r == 0 else {"w": np.zeros(3), "v": np.zeros(1)}))
    facts["call_mismatch"] = error_text(
        lambda: (distributed.all_reduce_mean if r == 0 else distributed.broadcast)({"w": np.zeros(3)}))
    facts["model_mismatch"] = error_text(
        lambda: distributed.broadcast(nn.MLP([4, 5 + r, 2], rng=0, dtype=np.float64)))
    for w in ((2, 3), (3, 2)):  # both layouts checked on every rank: from now on the check is in the data
        distributed.all_reduce_mean({"w": np.zeros(w)})
    facts["checked_shape_mismatch"] = error_text(
        lambda: distributed.all_reduce_mean({"w": np.zeros((2, 3) if r == 0 else (3, 2))}))
    for key in ("p", "q"):
        distributed.all_reduce_mean({key: np.zeros(3)})
    facts["checked_structure_mismatch"] = error_text(lambda: distributed.all_reduce_mean({"pq"[r]: np.zeros(3)}))
    facts["after_errors"] = distributed.all_reduce_mean([float(r)])[0]  # still in step

    parts = [b.tolist() for (b,) in data.batches(np.arange(21), batch_size=8, rng=3, shard=(r, n))]
    facts["shards"] = MPI.COMM_WORLD.allgather(parts)
    distributed.barrier()
    (out / f"checks_rank{r}.json").write_text(json.dumps(facts))


def means(out: Path) -> None:
    """Means of different values on each rank, small and large, float64 and float32: every rank
    must get the same bits (whatever algorithm MPI picks for the size and the number of ranks)."""
    r, n = distributed.rank(), distributed.world_size()
    rng = np.random.default_rng(r)
    drifted, worst = 0, 0.0
    for size in (1, 1000, 200_000):
        for _ in range(2):
            tree = {"a": rng.normal(size=size), "b": [rng.normal(size=(size, 2)).astype(np.float32)]}
            mean = distributed.all_reduce_mean(tree)
            try:
                distributed.check_in_sync(mean)
            except distributed.OutOfSyncError:
                drifted += 1
            if size <= 1000:
                from mpi4py import MPI

                by_hand = np.mean(MPI.COMM_WORLD.allgather(tree["a"]), axis=0)
                worst = max(worst, float(np.max(np.abs(mean["a"] - by_hand))))
    (out / f"means_rank{r}_of{n}.json").write_text(json.dumps({"drifted": drifted, "worst": worst}))


def fail(out: Path, mode: str) -> None:
    """Train a few steps, then let rank 1 fail in the way ``mode`` says."""
    r = distributed.rank()
    model = nn.MLP([4, 8 if mode != "mismatch" or r == 0 else 9, 2], rng=0)
    x = np.ones((4, 4), dtype=np.float32)
    grad = lp.grad(lambda m: losses.cross_entropy(m(x), np.array([0, 1, 0, 1])))
    for step in range(50):
        if step == 3 and r == 1:
            if mode == "kill":
                os.kill(os.getpid(), 9)
            if mode == "leave":  # rank 1 stops early and exits normally: rank 0 waits for it
                sys.exit(0)
            if mode == "raise":
                raise RuntimeError("rank 1 failed on purpose")
        if mode == "out_of_step" and step == 3:  # both layouts checked before, then one size on each rank
            for n in (3, 4):
                distributed.all_reduce_mean({"w": np.zeros(n)})
            distributed.all_reduce_mean({"w": np.zeros(3 + r)})
        model = optim.apply_updates(model, lp.tree_map(lambda t: -0.1 * t, distributed.all_reduce_mean(grad(model))))
        time.sleep(0.01)
    (out / f"fail_rank{r}.txt").write_text("finished")


if __name__ == "__main__":
    job, where = sys.argv[1], Path(sys.argv[2])
    if job == "train":
        train(where)
    elif job == "checks":
        checks(where)
    elif job == "means":
        means(where)
    elif job == "fail":
        fail(where, sys.argv[3])
    else:
        raise SystemExit(f"unknown job {job!r}")
