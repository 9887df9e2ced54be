"""Data-parallel training over MPI: real processes started with ``mpiexec -n 2`` on this machine.

The jobs live in tests/mpi_jobs.py; each writes what it saw, and the tests here assert on it.
Every run is bounded twice: LEANPASS_MPI_TIMEOUT inside the job (a collective that waits too
long aborts it) and a subprocess timeout around mpiexec (which kills the whole process group).
MPICH's mpiexec (hydra, from the mpich wheel) runs as root with no flag, and needs no network:
``-launcher fork`` starts the processes directly (no ssh), and on one machine they talk through
shared memory (it runs alike in a network namespace that has only loopback, up or down).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import leanpass as lp
from leanpass import data, distributed

ROOT = Path(__file__).resolve().parent.parent
JOBS = Path(__file__).resolve().parent / "mpi_jobs.py"
BOUND = 90  # seconds for one mpiexec run, start to end, however loaded the machine is


def mpiexec() -> str:
    """The mpiexec beside this Python (the MPICH wheel puts it there), else the one on PATH."""
    here = Path(sys.executable).parent / "mpiexec"
    found = str(here) if here.exists() else shutil.which("mpiexec")
    if found is None:
        raise RuntimeError('mpiexec not found: install the test extras with pip install -e ".[dev,mpi]"')
    return found


def env(timeout: float = 30.0) -> dict[str, str]:
    out = {k: v for k, v in os.environ.items() if not k.startswith(("PMI_", "PMIX_", "MPIR_", "HYDRA_"))}
    out["PYTHONPATH"] = os.pathsep.join([str(ROOT), *filter(None, [os.environ.get("PYTHONPATH")])])
    out["LEANPASS_MPI_TIMEOUT"] = str(timeout)
    for name in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
        out[name] = "1"  # two processes on two cores: no BLAS threads on top
    return out


def run(args: list[str], n: int | None = 2, timeout: float = 30.0) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run ``python args`` under ``mpiexec -n n`` (or alone when n is None); return it and its seconds.

    ``-launcher fork`` starts the processes directly (no ssh, no network: loopback only)."""
    cmd = [sys.executable, *args]
    if n is not None:
        cmd = [mpiexec(), "-launcher", "fork", "-n", str(n), *cmd]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env(timeout), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=BOUND)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        raise AssertionError(f"{' '.join(cmd)} was still running after {BOUND} s:\n{out}\n{err}") from None
    return subprocess.CompletedProcess(cmd, proc.returncode, out, err), time.perf_counter() - start


def job(name: str, where: Path, *extra: str, n: int | None = 2, timeout: float = 30.0):
    return run([str(JOBS), name, str(where), *extra], n=n, timeout=timeout)


SHM = Path("/dev/shm")


def shm_files() -> set[Path]:
    return set(SHM.glob("mpich_shm_*")) if SHM.is_dir() else set()


def mapped_shm() -> set[str]:
    """The segments some live process has mapped (another MPI job running on this machine now)."""
    found = set()
    for maps in Path("/proc").glob("[0-9]*/maps"):
        try:
            text = maps.read_text()
        except OSError:  # the process ended, or is not ours to read
            continue
        found.update(line.split()[-1] for line in text.splitlines() if "/mpich_shm_" in line)
    return found


@pytest.fixture
def shm_cleanup():
    """Remove the shared-memory segments that MPICH leaves behind when a job is killed or aborted
    (only those no process maps: another job running at the same time keeps its own)."""
    before = shm_files()
    yield
    left = shm_files() - before
    if left:
        in_use = mapped_shm()
        for path in left:
            if str(path) not in in_use:
                path.unlink(missing_ok=True)


# ----- two processes train as one --------------------------------------------------------------------
def test_two_processes_train_as_one_on_the_same_global_batch(tmp_path):
    alone, _ = job("train", tmp_path, n=None)
    assert alone.returncode == 0, alone.stderr
    pair, _ = job("train", tmp_path)
    assert pair.returncode == 0, pair.stderr
    one = np.load(tmp_path / "train_1procs_rank0.npz")
    r0, r1 = np.load(tmp_path / "train_2procs_rank0.npz"), np.load(tmp_path / "train_2procs_rank1.npz")
    for style in ("functional", "eager"):  # after lp.grad, and after .backward()
        ref, a, b = one[style], r0[style], r1[style]
        assert ref.shape == a.shape == b.shape and ref.shape[0] == 20 and ref.dtype == np.float64
        for step in range(20):  # every rank holds the same bits after every step
            assert a[step].tobytes() == b[step].tobytes(), (style, step)
        scale = np.max(np.abs(ref), axis=1, keepdims=True)
        rel = np.max(np.abs(a - ref) / scale)
        assert rel <= 1e-6, (style, rel)
        assert not np.array_equal(ref[0], ref[-1])  # it trained


def test_three_ranks_get_the_same_bits_small_and_large(tmp_path):
    proc, _ = job("means", tmp_path, n=3)
    assert proc.returncode == 0, proc.stderr
    for r in range(3):
        got = json.loads((tmp_path / f"means_rank{r}_of3.json").read_text())
        assert got["drifted"] == 0 and got["worst"] < 1e-15, got


# ----- the collectives, sharding and mismatches, in one job -----------------------------------------
@pytest.fixture(scope="module")
def checks(tmp_path_factory):
    where = tmp_path_factory.mktemp("checks")
    proc, _ = job("checks", where)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return [json.loads((where / f"checks_rank{r}.json").read_text()) for r in (0, 1)]


def test_rank_and_world_size_under_mpiexec(checks):
    assert [(c["rank"], c["size"]) for c in checks] == [(0, 2), (1, 2)]


def test_broadcast_sends_the_roots_values_and_keeps_the_kinds_of_leaf(checks):
    for c in checks:  # root=1 held w = 1, b = [1, 2, 3], step = 6, h = 1
        got = c["broadcast"]
        assert got["w"] == [[1.0] * 3] * 2 and got["b"] == [1.0, 2.0, 3.0] and got["b_requires_grad"]
        assert (got["step"], got["step_type"], got["h"], got["h_type"]) == (6, "int", 1.0, "float32")
        assert got["mine_w_after"] == [[float(c["rank"])] * 3] * 2  # the input is not changed


def test_broadcast_and_the_mean_keep_tied_weights_one_tensor(checks):
    for c in checks:  # root=1 held w = 1; the gradient at each place is the total 2 w (r + 1): 0 and 4
        assert c["tied"] == {"broadcast_one": True, "broadcast": [1.0, 1.0, 1.0],
                             "mean_one": True, "mean": [2.0, 2.0, 2.0]}


def test_all_reduce_mean_averages_with_one_allreduce_per_dtype(checks):
    for c in checks:
        m = c["mean"]  # rank r held a = r, b = 10 r (float32), c0 = 2 r + 1, c1 = r (float32 Tensor)
        assert m["a"] == [0.5] * 3 and m["b"] == [[5.0, 5.0]] * 2 and m["b_dtype"] == "float32"
        assert m["c0"] == [2.0] * 4 and m["c1"] == 0.5 and m["c1_type"] == "Tensor"
        # a new layout: one small check of its own, then one call per dtype over one buffer (7 float64
        # and 5 float32 values, each followed by the check that travels with the data: 4 and 6 numbers)
        assert m["calls"] == [["Allreduce", 2, "int64"], ["Allreduce", 11, "float64"], ["Allreduce", 11, "float32"]]
        # the same layout again: only the data (with its check); on another communicator, always both
        assert c["calls_again"] == m["calls"][1:] and c["again_equal"]
        assert c["calls_other_comm"] == m["calls"] * 2
        # float16 is exact up to 2048: 7 chunks of 5 bits (14 numbers) carry the 32-bit check for 2 ranks
        assert c["calls_float16"] == [["Allreduce", 2, "int64"], ["Allreduce", 17, "float16"],
                                      ["Allreduce", 17, "float16"]]
        assert c["mean_float16"] == [0.5] * 3
        assert m["grads_a_after"] == [float(c["rank"])] * 3


def test_a_model_shaped_gradient_comes_back_model_shaped_and_averaged(checks):
    for c in checks:
        assert c["model_grad"]["type"] == "MLP" and c["model_grad"]["leaf_types"] == ["Tensor"]
        assert c["model_grad"]["err"] < 1e-15


def test_check_in_sync_passes_in_step_and_names_the_leaf_and_the_rank_that_drifted(checks):
    for c in checks:
        assert c["in_sync"] == "no error"
        assert c["drifted"].startswith("OutOfSyncError: check_in_sync: the replicas have drifted apart in 1 of 4")
        assert ".layers[1].bias differs on ranks [1] from rank 0" in c["drifted"]


def test_trees_that_differ_across_ranks_raise_on_every_rank_and_name_the_leaf(checks):
    for c in checks:
        assert "ValueError: all_reduce_mean: the ranks' trees do not match: ranks [1]" in c["shape_mismatch"]
        assert "['w'] has shape (3,) and dtype float64 on rank 0 but shape (4,)" in c["shape_mismatch"]
        assert "rank 0's tree has 1 leaf, rank 1's has 2 leaves; rank 1 also has the leaf ['v']" \
            in c["structure_mismatch"]
        assert "rank 0 called all_reduce_mean but rank 1 called broadcast(root=0)" in c["call_mismatch"]
        assert ".layers[0].weight has shape (4, 5)" in c["model_mismatch"] and "(4, 6)" in c["model_mismatch"]
        # layouts checked before, then different on the ranks: the check inside the data finds it
        assert ("ValueError: all_reduce_mean: the ranks' trees do not match: ranks [1] differ from rank 0: the leaf "
                "['w'] has shape (2, 3) and dtype float64 on rank 0 but shape (3, 2)") in c["checked_shape_mismatch"]
        assert "leaf 0 is ['p'] on rank 0 but ['q'] on rank 1" in c["checked_structure_mismatch"]
        assert c["after_errors"] == 0.5  # and the ranks are still in step afterwards


def test_shards_are_disjoint_parts_of_the_same_global_batches(checks):
    shards = checks[0]["shards"]
    assert shards == checks[1]["shards"]
    whole = [b.tolist() for (b,) in data.batches(np.arange(21), batch_size=8, rng=3)]
    assert [len(p) for p in shards[0]] == [len(p) for p in shards[1]] == [4, 4, 2]
    for i, batch in enumerate(whole):  # rank 0 the first half of each global batch, rank 1 the second
        got = shards[0][i] + shards[1][i]
        assert got == batch[:len(got)] and len(set(got)) == len(got)
    assert len(whole[-1]) == 5 and len(shards[0][-1] + shards[1][-1]) == 4  # one example cut, on both


# ----- failures end the job, with a message, in bounded time ----------------------------------------
def test_a_rank_that_dies_ends_the_job(tmp_path, shm_cleanup):
    proc, seconds = job("fail", tmp_path, "kill", timeout=60)
    assert proc.returncode != 0 and not (tmp_path / "fail_rank0.txt").exists()
    assert seconds < 30, seconds  # mpiexec ends the others at once, not after the 60 s timeout


def test_a_rank_that_stops_calling_makes_the_others_time_out_with_a_message(tmp_path, shm_cleanup):
    proc, seconds = job("fail", tmp_path, "leave", timeout=2)
    assert proc.returncode != 0 and not (tmp_path / "fail_rank0.txt").exists()
    assert "rank 0 of 2 waited more than 2 s in all_reduce_mean for the other ranks" in proc.stderr
    assert "LEANPASS_MPI_TIMEOUT" in proc.stderr
    assert seconds < 45, seconds


def test_an_exception_on_one_rank_aborts_the_job_at_once(tmp_path, shm_cleanup):
    proc, seconds = job("fail", tmp_path, "raise", timeout=60)
    assert proc.returncode != 0
    assert "RuntimeError: rank 1 failed on purpose" in proc.stderr
    assert "waited more than" not in proc.stderr and seconds < 30, seconds  # not the 60 s timeout


def test_ranks_out_of_step_with_checked_layouts_of_different_sizes_end_the_job(tmp_path, shm_cleanup):
    proc, seconds = job("fail", tmp_path, "out_of_step", timeout=60)
    assert proc.returncode != 0 and not (tmp_path / "fail_rank0.txt").exists()
    # MPI finds that the sizes differ and the job ends at once, not after the 60 s timeout. What it
    # prints depends on which rank MPI stops first: LeanPass's message, MPI's "Message truncated",
    # or nothing when mpiexec ends the job before the output reaches it
    assert "waited more than" not in proc.stderr and seconds < 30, seconds
    if proc.stderr:
        assert "ranks are out of step" in proc.stderr or "Message truncated" in proc.stderr, proc.stderr


def test_different_models_on_the_ranks_stop_the_job_with_the_leaf_named(tmp_path, shm_cleanup):
    proc, _ = job("fail", tmp_path, "mismatch", timeout=60)
    assert proc.returncode != 0
    assert "the leaf .layers[0].weight has shape (4, 8) and dtype float32 on rank 0 but shape (4, 9)" in proc.stderr


# ----- the digits example, data-parallel ------------------------------------------------------------
def test_digits_distributed_rank_0_alone_reports_and_saves(tmp_path):
    ckpt = tmp_path / "digits.npz"
    proc, _ = run(["-m", "leanpass.examples.digits", "--distributed", "--epochs", "2", "--output", str(ckpt)])
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert sum(ln.startswith("digits:") for ln in lines) == 1  # one process printed
    assert "data-parallel on 2 processes: global batch 32, 16 per process" in lines
    assert sum(ln.startswith("epoch") for ln in lines) == 2 and f"saved the model to {ckpt}" in proc.stdout
    done = next(ln for ln in lines if ln.startswith("done in"))
    assert float(done.split("test accuracy ")[1].split("%")[0]) > 90
    assert done.split("test accuracy ")[1].split()[0] in next(ln for ln in lines if ln.startswith("saved"))
    from leanpass import nn

    restored = lp.load(ckpt)
    assert isinstance(restored, nn.Sequential) and restored.num_params == 19_210


def test_digits_distributed_without_mpi4py_says_how_to_get_it(monkeypatch, capsys):
    from leanpass.examples import digits

    monkeypatch.setitem(sys.modules, "mpi4py", None)  # as if it were not installed
    monkeypatch.setattr(distributed, "_WORLD", None)
    with pytest.raises(SystemExit) as exc:
        digits.main(["--distributed", "--epochs", "1", "--output", ""])
    assert exc.value.code == 2
    err = capsys.readouterr().err
    assert "pip install mpi4py mpich" in err and "mpiexec -n 2 python -m leanpass.examples.digits" in err


def test_digits_distributed_on_one_process_trains_as_usual(capsys):
    from leanpass.examples import digits

    result = digits.main(["--distributed", "--epochs", "1", "--output", "", "--blas-threads", "0"])
    captured = capsys.readouterr()
    assert "--distributed: one process (start several with mpiexec -n N)" in captured.err
    assert "data-parallel on 1 process: global batch 32, 32 per process" in captured.out
    assert result["test_acc"] > 0.8


def test_digits_distributed_batch_that_does_not_divide_is_one_message(tmp_path):
    proc, _ = run(["-m", "leanpass.examples.digits", "--distributed", "--batch-size", "33", "--output", ""])
    assert proc.returncode == 2
    assert proc.stderr.count("--batch-size 33 is the global batch: it must be divisible by the 2 processes") == 1


# ----- one process, in this process ------------------------------------------------------------------
def test_without_mpi4py_one_process_and_the_values_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr(distributed, "_WORLD", None)
    assert (distributed.rank(), distributed.world_size(), distributed.is_available()) == (0, 1, False)
    tree = {"w": np.ones(2), "b": lp.Tensor(3.0)}
    assert distributed.all_reduce_mean(tree) is tree and distributed.broadcast(tree) is tree
    distributed.check_in_sync(tree)
    distributed.barrier()


def test_started_by_mpiexec_but_without_mpi4py_is_an_error_not_a_lone_run(monkeypatch):
    monkeypatch.setitem(sys.modules, "mpi4py", None)
    monkeypatch.setattr(distributed, "_WORLD", None)
    monkeypatch.setenv("PMI_SIZE", "4")
    with pytest.raises(RuntimeError, match=r"one of 4 that mpiexec started, but mpi4py cannot be imported"):
        distributed.rank()


def test_a_launcher_of_another_mpi_is_an_error_not_lone_runs():
    # Open MPI's mpirun starting an mpi4py built for MPICH: each process would be a world of one
    code = "import os; os.environ['OMPI_COMM_WORLD_SIZE'] = '2'; import leanpass.distributed as d; d.rank()"
    proc, _ = run(["-c", code], n=None)
    assert proc.returncode != 0
    assert "mpiexec started 2 processes, but MPI says this one is alone" in proc.stderr


def test_import_leanpass_loads_neither_mpi4py_nor_distributed():
    code = "import sys, leanpass; print('mpi4py' in sys.modules, 'leanpass.distributed' in sys.modules)"
    proc, _ = run(["-c", code], n=None)
    assert proc.stdout.split() == ["False", "False"], proc.stderr


def test_bad_input_is_a_clear_error_on_one_process():
    with pytest.raises(TypeError, match=r"the leaf \['n'\] has dtype int64; only floating-point"):
        distributed.all_reduce_mean({"n": np.arange(3)})
    with pytest.raises(TypeError, match=r"the leaf \[0\] is a str"):
        distributed.broadcast(["text"])
    with pytest.raises(ValueError, match="root must be a rank from 0 to 0"):
        distributed.broadcast([1.0], root=1)
    with pytest.raises(TypeError, match="is being differentiated"):
        lp.grad(lambda w: distributed.all_reduce_mean(w).sum())(np.ones(2))
    with pytest.raises(ValueError, match="positive number of seconds"):
        distributed.set_timeout(0)

    class StandIn:  # what a tracing transform puts inside Tensors while it records
        shape, dtype = (2,), np.dtype(np.float64)

    from leanpass.core.tensor import _const

    with pytest.raises(TypeError, match=r"the leaf \['w'\] holds a StandIn, not a NumPy array: all_reduce_mean is "
                                        "being traced"):
        distributed.all_reduce_mean({"w": _const(StandIn())})


def test_timeout_comes_from_the_environment(monkeypatch):
    monkeypatch.setattr(distributed, "_TIMEOUT", [])
    monkeypatch.setenv("LEANPASS_MPI_TIMEOUT", "12.5")
    assert distributed.timeout() == 12.5
    monkeypatch.setenv("LEANPASS_MPI_TIMEOUT", "none")
    assert distributed.timeout() is None
    monkeypatch.setenv("LEANPASS_MPI_TIMEOUT", "soon")
    with pytest.raises(ValueError, match="not a number of seconds"):
        distributed.timeout()
    monkeypatch.delenv("LEANPASS_MPI_TIMEOUT")
    assert distributed.timeout() == distributed.DEFAULT_TIMEOUT


def test_shard_splits_every_global_batch_and_checks_its_arguments():
    x = np.arange(23)
    parts = [[b.tolist() for (b,) in data.batches(x, batch_size=6, rng=0, shard=(r, 3))] for r in range(3)]
    whole = [b.tolist() for (b,) in data.batches(x, batch_size=6, rng=0)]
    assert [len(p) for p in parts] == [4, 4, 4] == [data.num_batches(23, 6, shard=(r, 3)) for r in range(3)]
    for i in range(4):
        joined = parts[0][i] + parts[1][i] + parts[2][i]
        assert joined == whole[i][:len(joined)] and len({len(p[i]) for p in parts}) == 1
    assert len(joined) == 3  # the last batch of 5 gives 1 to each rank
    assert [b.tolist() for (b,) in data.batches(x, batch_size=6, shard=(0, 1))] == \
        [b.tolist() for (b,) in data.batches(x, batch_size=6)]
    eight = list(data.batches(np.arange(8), batch_size=6, shard=(0, 3)))  # the 2 left are fewer than 3 ranks
    assert len(eight) == 1 == data.num_batches(8, 6, shard=(0, 3))
    with pytest.raises(ValueError, match="must be divisible by world_size 4"):
        next(data.batches(x, batch_size=6, shard=(0, 4)))
    with pytest.raises(ValueError, match=r"0 <= rank < world_size, got \(2, 2\)"):
        next(data.batches(x, batch_size=6, shard=(2, 2)))


def test_the_docs_training_script_prints_the_same_on_two_processes(tmp_path):
    text = (ROOT / "docs" / "distributed.md").read_text()
    section = text[text.index("## A full training script"):]
    script = section.split("```python\n", 1)[1].split("```\n", 1)[0]
    expected = section.split("```output\n", 1)[1].split("```", 1)[0]
    (tmp_path / "train.py").write_text(script)
    proc, _ = run([str(tmp_path / "train.py")])
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == expected
