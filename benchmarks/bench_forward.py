"""Forward mode and Hessians: LeanPass against torch.func, and ``jvp`` against its primal.

    pip install torch            # not a LeanPass dependency; only parts 1 and 2 need it
    python benchmarks/bench_forward.py [--rounds 7]
    python benchmarks/bench_forward.py --ops [--rounds 5]    # jvp / primal op by op (below), alone

1. The Hessian of a scalar function of 31 parameters (a dict: ``w`` (5, 5), ``b`` (5,), ``s`` ()):
   a small tanh regression with a weight penalty. LeanPass's ``lp.hessian`` (forward over
   reverse, ``jacfwd(jacrev(f))``) and, beside it, ``jacrev(jacrev(f))``, against
   ``torch.func.hessian`` on the same function and values.
2. The Hessian-vector product of the same function: ``lp.hvp`` (forward over reverse, ``jvp`` of
   ``grad``) and reverse over reverse (``grad`` of ``grad(f) . v``), against torch.func's
   forward over reverse (``jvp(grad(f), (p,), (v,))``).
3. ``lp.jvp`` of an elementwise chain (32 ops: tanh, exp, sigmoid, products and sums) over the
   chain itself run on Tensors (the primal), at three sizes; LeanPass only. Twice: as the process
   starts, and with glibc's malloc told to keep freed memory (``KEEP_MEMORY``): by default it
   returns the memory of large arrays to the system when they are freed and faults it in again
   on the next call, which a ``jvp`` (that holds a tangent beside each live value) pays for more
   than the primal does.
4. (``--linalg``: this part alone) ``lp.jvp`` of each linalg op over the op itself on Tensors (the
   primal), on one 3 x 3 matrix and on a stack of 1,000 (``op_inputs.py``'s inputs).

Everything runs on one thread. Each library is measured in a process of its own (``import
torch`` slows LeanPass's garbage collection); the processes alternate, ``--rounds`` of each. A
process reports the median of its timed calls (in part 3 the primal and the jvp alternate call by
call); the figures are the medians over the rounds,
and the results are checked against each other (the Hessians and products agree to 1e-10).

``--ops``: ``lp.jvp`` of one op over the op itself (on Tensors), op by op, for the convolutions,
pooling, padding, normalisations, ``**``, ``prod``, ``cumprod`` and the special functions, at sizes a
model meets: with the op's own forward-mode rule, and with the rule transposed from its VJP (the
rule hidden for the call: what an op without a rule of its own gets). Each tangent is checked
against the transposed one. The three alternate call by call and are timed in CPU time of the
process (``time.process_time``), which other programs on a shared machine disturb less than the
clock on the wall.
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ[_var] = "1"  # before NumPy (or torch) starts its thread pools

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # this checkout's leanpass
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from host_gauge import Gauge  # noqa: E402

SIZES = (1_000, 10_000, 100_000)


def op_cases() -> dict[str, tuple[str, Callable[..., Any], list[np.ndarray]]]:
    """``{label: (op name, f, inputs)}``: ``f`` calls one op on the inputs (all differentiated)."""
    import leanpass as lp
    from leanpass import functional as F

    rng = np.random.default_rng(0)

    def r(*shape: int) -> np.ndarray:
        return rng.standard_normal(shape)

    def u(*shape: int) -> np.ndarray:
        return rng.uniform(0.05, 0.95, shape)

    image, gw = r(16, 32, 32, 32), r(8, 32, 16, 16)
    pads = ((1, 1), (1, 1))
    n = 10_000
    return {
        "conv2d 3x3, 32 -> 32 channels, 8 x 16 x 16": ("conv2d", lambda x, w: lp.conv2d(x, w, padding=1),
                                                       [r(8, 32, 16, 16), r(32, 32, 3, 3) * 0.1]),
        "conv2d 3x3 stride 2, 16 -> 32, 8 x 32 x 32": ("conv2d", lambda x, w: lp.conv2d(x, w, stride=2, padding=1),
                                                       [r(8, 16, 32, 32), r(32, 16, 3, 3) * 0.1]),
        "conv1d k5, 32 -> 32 channels, 8 x 256": ("conv1d", lambda x, w: lp.conv1d(x, w, padding=2),
                                                  [r(8, 32, 256), r(32, 32, 5) * 0.1]),
        "conv_transpose2d 4x4 stride 2, 32 -> 16, 8 x 8 x 8": (
            "conv_transpose2d", lambda x, w: lp.conv_transpose2d(x, w, stride=2, padding=1),
            [r(8, 32, 8, 8), r(32, 16, 4, 4) * 0.1]),
        "conv_transpose_input (conv2d's input gradient)": (
            "conv_transpose_input", lambda g, w: lp.apply(F.conv_transpose_input, "conv_transpose_input", g, w,
                                                          (16, 16), (1, 1), pads, (1, 1), 1), [gw, r(32, 32, 3, 3)]),
        "conv2d_weight (conv2d's weight gradient)": (
            "conv2d_weight", lambda x, g: lp.apply(F.conv2d_weight, "conv2d_weight", x, g, (32, 32, 3, 3), (1, 1),
                                                   pads, (1, 1), 1), [r(8, 32, 16, 16), gw]),
        "max_pool2d 2x2, 16 x 32 x 32 x 32": ("max_pool2d", lambda x: lp.max_pool2d(x, 2), [image]),
        "max_pool2d 3x3 stride 1 padding 1": ("max_pool2d", lambda x: lp.max_pool2d(x, 3, 1, 1), [image]),
        "avg_pool2d 2x2": ("avg_pool2d", lambda x: lp.avg_pool2d(x, 2), [image]),
        "max_pool1d 2, 16 x 32 x 1024": ("max_pool1d", lambda x: lp.max_pool1d(x, 2), [r(16, 32, 1024)]),
        "avg_pool1d 2": ("avg_pool1d", lambda x: lp.avg_pool1d(x, 2), [r(16, 32, 1024)]),
        "pad 1, constant, 16 x 32 x 32 x 32": ("pad", lambda x: lp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1))),
                                               [image]),
        "pad 1, reflect": ("pad", lambda x: lp.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), "reflect"), [image]),
        "batch_norm, 16 x 32 x 32 x 32": ("batch_norm", lambda x, w, b: lp.batch_norm(x, w, b),
                                          [image, r(32), r(32)]),
        "group_norm, 8 groups": ("group_norm", lambda x, w, b: lp.group_norm(x, 8, w, b), [image, r(32), r(32)]),
        "x ** 1.5, 100,000": ("**", lambda x: x ** 1.5, [rng.uniform(0.5, 2.0, 100_000)]),
        "x ** y, 100,000": ("**", lambda x, y: x ** y, [rng.uniform(0.5, 2.0, 100_000), r(100_000)]),
        "prod, rows of 10, 100,000": ("prod", lambda x: lp.prod(x, axis=1), [1 + 0.1 * r(10_000, 10)]),
        "cumprod, rows of 10": ("cumprod", lambda x: lp.cumprod(x, axis=1), [1 + 0.1 * r(10_000, 10)]),
        **{f"{name}, {n:,}": (name, getattr(lp.special, name), [rng.uniform(0.5, 2.0, n)])
           for name in ("gammaln", "digamma", "ndtr", "log_ndtr")},
        f"polygamma(1, x), {n:,}": ("polygamma", lambda x: lp.special.polygamma(1, x), [rng.uniform(0.5, 2.0, n)]),
        f"erfinv, {n:,}": ("erfinv", lp.special.erfinv, [u(n) * 2 - 1]),
        f"logit, {n:,}": ("logit", lp.special.logit, [u(n)]),
        f"xlogy, {n:,}": ("xlogy", lp.special.xlogy, [r(n), u(n)]),
        f"xlog1py, {n:,}": ("xlog1py", lp.special.xlog1py, [r(n), u(n)]),
        f"betaln, {n:,}": ("betaln", lp.special.betaln, [rng.uniform(0.5, 2.0, n), rng.uniform(0.5, 20.0, n)]),
    }


def op_times(out: dict[str, Any]) -> None:
    """``--ops``: per op, the medians of the primal, of ``jvp`` with the op's own rule and of ``jvp`` with the rule
    transposed from its VJP (for those calls the op's record says ``jvp=TRANSPOSED``), alternating call by call."""
    import leanpass as lp
    from leanpass import functional as F

    def hidden(name: str, fn: Callable[[], Any]) -> Callable[[], Any]:
        def call() -> Any:
            rec = F.REGISTRY[name]
            F.REGISTRY[name] = F.Op(*(F.TRANSPOSED if f == "jvp" else getattr(rec, f) for f in F.Op.__slots__))
            rule = dict.pop(F.JVPS, name)
            try:
                return fn()
            finally:
                F.REGISTRY[name] = rec
                dict.__setitem__(F.JVPS, name, rule)
        return call

    for label, (name, f, xs) in op_cases().items():
        ts = [np.random.default_rng(1).standard_normal(x.shape) for x in xs]
        consts = [lp.Tensor(x) for x in xs]
        sides = {"primal": lambda f=f, c=consts: f(*c),
                 "own": lambda f=f, xs=xs, ts=ts: lp.jvp(f, xs, ts),
                 "transposed": hidden(name, lambda f=f, xs=xs, ts=ts: lp.jvp(f, xs, ts))}
        with np.errstate(all="ignore"):
            own, transposed = (np.asarray(sides[k]()[1].numpy()) for k in ("own", "transposed"))
            start = time.process_time()
            sides["own"]()
            calls = max(7, min(200, int(0.15 / max(time.process_time() - start, 1e-6))))
            times: dict[str, list[float]] = {k: [] for k in sides}
            for _ in range(calls):  # alternating call by call, so that a slow patch of the host hits all three
                for side, fn in sides.items():
                    start = time.process_time()
                    fn()
                    times[side].append(time.process_time() - start)
        err = float(np.max(np.abs(own - transposed)) / max(float(np.max(np.abs(transposed))), 1e-300))
        out[f"op {label}"] = [statistics.median(times[k]) for k in sides] + [err]


def problem() -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The data, the 31 parameters and a direction for the Hessian-vector product."""
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((8, 5)), rng.standard_normal(8)
    params = {"w": 0.5 * rng.standard_normal((5, 5)), "b": 0.1 * rng.standard_normal(5), "s": np.array(0.3)}
    v = {k: rng.standard_normal(p.shape) for k, p in params.items()}
    return x, y, params, v


def median_time(fn: Callable[[], Any], calls: int) -> float:
    fn()
    fn()
    times = []
    for _ in range(calls):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def flat_hessian(h: dict[str, dict[str, Any]], params: dict[str, np.ndarray]) -> np.ndarray:
    """A dict-of-dicts Hessian as one 31 x 31 matrix (for comparing libraries)."""
    n = {k: int(np.prod(p.shape)) for k, p in params.items()}
    return np.block([[np.asarray(h[a][b], dtype=np.float64).reshape(n[a], n[b]) for b in params] for a in params])


def flat(tree: dict[str, Any]) -> np.ndarray:
    return np.concatenate([np.asarray(tree[k], dtype=np.float64).ravel() for k in sorted(tree)])


def leanpass_worker() -> dict[str, Any]:
    import leanpass as lp

    x, y, params, v = problem()

    def f(p: Any) -> Any:
        r = lp.tanh(x @ p["w"] + p["b"]).sum(axis=1) - y
        return (r * r).mean() + p["s"] * (p["w"] * p["w"]).sum()

    def rev_rev(p: Any) -> Any:
        def dot(q: Any) -> Any:
            g = lp.grad(f)(q)
            return sum((g[k] * v[k]).sum() for k in v)

        return lp.grad(dot)(p)

    out: dict[str, Any] = {
        "hessian": median_time(lambda: lp.hessian(f)(params), 40),
        "jacrev(jacrev)": median_time(lambda: lp.jacrev(lp.jacrev(f))(params), 40),
        "hvp": median_time(lambda: lp.hvp(f)(params, v), 200),
        "hvp reverse over reverse": median_time(lambda: rev_rev(params), 200),
        "H": flat_hessian(lp.hessian(f)(params), params).tolist(),
        "H rev": flat_hessian(lp.jacrev(lp.jacrev(f))(params), params).tolist(),
        "Hv": flat(lp.hvp(f)(params, v)).tolist(),
        "Hv rev": flat(rev_rev(params)).tolist(),
    }

    chain_times(out)
    return out


# glibc's malloc hands freed memory back to the system, and takes it again (page faults) on the
# next call: a jvp holds a tangent beside each live value, so it pays that more than the primal
# does. These settings keep freed memory in the process (part 3 runs with and without).
KEEP_MEMORY = {"MALLOC_TRIM_THRESHOLD_": "2000000000", "MALLOC_MMAP_THRESHOLD_": "2000000000",
               "MALLOC_TOP_PAD_": "100000000"}


def chain_times(out: dict[str, Any]) -> None:
    import leanpass as lp

    def chain(z: Any) -> Any:
        u = z
        for _ in range(4):
            u = lp.tanh(u) * 1.5 + 0.1
            u = lp.exp(-u * u) + u
            u = lp.sigmoid(u) * z
        return u

    for n in SIZES:
        z = np.random.default_rng(1).standard_normal(n)
        t = np.random.default_rng(2).standard_normal(n)
        zt = lp.Tensor(z)
        calls = 400 if n <= 10_000 else 40
        sides = {"primal": lambda zt=zt: chain(zt), "jvp": lambda z=z, t=t: lp.jvp(chain, (z,), (t,))}
        times: dict[str, list[float]] = {"primal": [], "jvp": []}
        for fn in sides.values():
            fn()
            fn()
        for _ in range(calls):  # the two alternate call by call, so that a slow patch of the host hits both
            for side, fn in sides.items():
                start = time.perf_counter()
                fn()
                times[side].append(time.perf_counter() - start)
        eps = 1e-6
        fd = (np.asarray(chain(lp.Tensor(z + eps * t)).numpy()) - np.asarray(chain(lp.Tensor(z - eps * t)).numpy()))
        err = float(np.max(np.abs(lp.jvp(chain, (z,), (t,))[1].numpy() - fd / (2 * eps))))
        out[f"chain {n}"] = [statistics.median(times["primal"]), statistics.median(times["jvp"]), err]


# Part 4: the linalg ops' forward mode, jvp time over the primal's, on the inputs of op_inputs.py
# (one 3 x 3 matrix, and a stack of 1,000 of them; lstsq: one tall matrix).
LINALG = ("cholesky", "det", "eigh", "inv", "lstsq", "norm", "pinv", "qr", "slogdet", "solve", "svd")
LINALG_SIZES = (9, 9_000)


def linalg_times(out: dict[str, Any]) -> None:
    from op_inputs import INPUTS

    import leanpass as lp
    from leanpass import functional as F

    for name in LINALG:
        for n in LINALG_SIZES:
            args, diff, _ = INPUTS[name](n)
            fn = F.OPS[name]

            def f(*xs: Any, args: list[Any] = args, diff: list[int] = diff, fn: Any = fn, name: str = name) -> Any:
                full = list(args)
                for i, x in zip(diff, xs):
                    full[i] = x
                return lp.apply(fn, name, *full)

            primals = [args[i] for i in diff]
            tangents = [np.random.default_rng(1).standard_normal(np.shape(p)) for p in primals]
            held = [lp.Tensor(p) for p in primals]
            sides = {"primal": lambda f=f, held=held: f(*held),
                     "jvp": lambda f=f, primals=primals, tangents=tangents: lp.jvp(f, primals, tangents)}
            times: dict[str, list[float]] = {"primal": [], "jvp": []}
            for fn_ in sides.values():
                fn_()
                fn_()
            for _ in range(200 if n < 1_000 else 20):  # alternating call by call, as in part 3
                for side, fn_ in sides.items():
                    start = time.perf_counter()
                    fn_()
                    times[side].append(time.perf_counter() - start)
            out[f"linalg {name} {n}"] = [statistics.median(times["primal"]), statistics.median(times["jvp"])]


def print_linalg(runs: list[dict[str, Any]]) -> None:
    print(f"jvp / primal of the linalg ops (medians of {len(runs)} processes; primal and jvp in microseconds)")
    print(f"  {'op':<10}" + "".join(f"{f'{n:,} elements':>34}" for n in LINALG_SIZES))
    for name in LINALG:
        cells = []
        for n in LINALG_SIZES:
            primal = statistics.median(r[f"linalg {name} {n}"][0] for r in runs)
            tangent = statistics.median(r[f"linalg {name} {n}"][1] for r in runs)
            cells.append(f"{primal * 1e6:9.1f} {tangent * 1e6:9.1f} {tangent / primal:6.2f}x")
        print(f"  {name:<10}" + "".join(f"{c:>34}" for c in cells))


def torch_worker() -> dict[str, Any]:
    import torch
    from torch.func import grad, hessian, jvp

    torch.set_num_threads(1)
    x, y, params, v = problem()
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    pt = {k: torch.from_numpy(p.copy()) for k, p in params.items()}
    vt = {k: torch.from_numpy(d.copy()) for k, d in v.items()}

    def f(p: Any) -> Any:
        r = torch.tanh(xt @ p["w"] + p["b"]).sum(dim=1) - yt
        return (r * r).mean() + p["s"] * (p["w"] * p["w"]).sum()

    return {
        "hessian": median_time(lambda: hessian(f)(pt), 40),
        "hvp": median_time(lambda: jvp(grad(f), (pt,), (vt,))[1], 200),
        "H": flat_hessian(hessian(f)(pt), params).tolist(),
        "Hv": flat(jvp(grad(f), (pt,), (vt,))[1]).tolist(),
    }


def measure(side: str) -> dict[str, Any]:
    env = dict(os.environ, **KEEP_MEMORY) if side in ("chain", "ops") else None
    out = subprocess.run([sys.executable, __file__, "--worker", side], check=True, capture_output=True, text=True,
                         env=env)
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--worker":
        side = sys.argv[2]
        result: dict[str, Any] = {}
        if side == "ops":
            op_times(result)
        if side == "chain":
            chain_times(result)
        if side == "linalg":
            linalg_times(result)
            print(json.dumps(result))
            return
        print(json.dumps(leanpass_worker() if side == "leanpass" else torch_worker() if side == "torch" else result))
        return
    if "--ops" in sys.argv:
        ops_only(int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 5)
        return
    rounds = int(sys.argv[sys.argv.index("--rounds") + 1]) if "--rounds" in sys.argv else 7
    if "--linalg" in sys.argv:  # part 4 only
        print_linalg([measure("linalg") for _ in range(rounds)])
        return
    try:
        import importlib.metadata

        torch_version: str | None = importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        torch_version = None
        print("torch is not installed: parts 1 and 2 are skipped (pip install torch)")
    gauge = Gauge()
    ours: list[dict[str, Any]] = []
    theirs: list[dict[str, Any]] = []
    kept: list[dict[str, Any]] = []
    linalg: list[dict[str, Any]] = []
    for _ in range(rounds):
        gauge.sample()
        ours.append(measure("leanpass"))
        kept.append(measure("chain"))
        linalg.append(measure("linalg"))
        if torch_version:
            gauge.sample()
            theirs.append(measure("torch"))
    gauge.sample()

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return statistics.median(r[key] for r in runs)

    print(f"numpy {np.__version__}, python {sys.version.split()[0]}, torch {torch_version}; one thread; "
          f"medians of {rounds} processes per library")
    h, h_rev = np.array(ours[0]["H"]), np.array(ours[0]["H rev"])
    hv, hv_rev = np.array(ours[0]["Hv"]), np.array(ours[0]["Hv rev"])
    if not (np.allclose(h, h_rev, rtol=1e-10, atol=1e-12) and np.allclose(hv, hv_rev, rtol=1e-10, atol=1e-12)):
        raise SystemExit("LeanPass's forward and reverse Hessians disagree")
    if theirs and not (np.allclose(h, theirs[0]["H"], rtol=1e-10, atol=1e-12)
                       and np.allclose(hv, theirs[0]["Hv"], rtol=1e-10, atol=1e-12)):
        raise SystemExit("LeanPass's and torch's Hessians disagree")
    lines = [("Hessian, 31 parameters", "hessian", "jacrev(jacrev)"), ("Hessian-vector product", "hvp",
                                                                          "hvp reverse over reverse")]
    for title, key, other in lines:
        a, b = med(ours, key), med(ours, other)
        text = f"{title}: lp {a * 1e3:.3f} ms ({other}: {b * 1e3:.3f} ms)"
        if theirs:
            c = med(theirs, key)
            pairs = " ".join(f"{x[key] / y[key]:.2f}" for x, y in zip(ours, theirs))
            text += f", torch.func {c * 1e3:.3f} ms; lp / torch {a / c:.3f} (round by round: {pairs})"
        print(text)
    for runs, note in ((ours, ""), (kept, ", freed memory kept by malloc")):
        for n in SIZES:
            primal = statistics.median(r[f"chain {n}"][0] for r in runs)
            tangent = statistics.median(r[f"chain {n}"][1] for r in runs)
            err = max(r[f"chain {n}"][2] for r in runs)
            print(f"jvp of a 32-op elementwise chain, {n:,} elements{note}: primal {primal * 1e6:.1f} us, jvp "
                  f"{tangent * 1e6:.1f} us, jvp / primal {tangent / primal:.2f} (target <= 2; largest difference "
                  f"from central differences {err:.1e})")
    print_linalg(linalg)
    print(gauge.report())


def ops_only(rounds: int) -> None:
    """``--ops``: ``rounds`` processes, the medians of their per-op medians."""
    gauge = Gauge()
    runs = []
    for _ in range(rounds):
        gauge.sample()
        runs.append(measure("ops"))
    gauge.sample()
    print(f"numpy {np.__version__}, python {sys.version.split()[0]}; one thread; medians of {rounds} processes; "
          "jvp / primal with the op's own rule, and with the rule transposed from its VJP")
    for key in runs[0]:
        primal, own, transposed = (statistics.median(r[key][i] for r in runs) for i in range(3))
        err = max(r[key][3] for r in runs)
        print(f"{key[3:]:<52} primal {primal * 1e6:9.1f} us  jvp {own / primal:5.2f}x  transposed "
              f"{transposed / primal:5.2f}x  (own / transposed {own / transposed:4.2f}; tangents differ by {err:.0e})")
    print(gauge.report())


if __name__ == "__main__":
    main()
