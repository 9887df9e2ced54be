"""The rows of the conformance matrix (tests/test_conformance.py): one per op, keyed by its name.

A row gives the op's samples beyond the shared tables (``tests/op_samples*.py``, which every walk
over ``functional.OPS`` reads), the cells that cannot apply to it, each with its reason, and its
float32 tolerance. Adding an op is its record plus one line here (and its samples, here or in the
shared tables). ``samples_of(name)`` gathers an op's samples: the shared ones, the row's, an
empty-array variant (``name/empty``, unless the row says why the op has none), the first sample
again as ``name/strided`` (the matrix passes its float inputs as views with gaps) and, for an op
that takes them, a 0-d one (``name/0d``).

>>> sorted(samples_of("exp"))
['exp', 'exp/0d', 'exp/empty', 'exp/inf', 'exp/strided']
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from functools import cache
from typing import Any, NamedTuple

import numpy as np
from op_samples import DOMAINS, every_sample, op_of, pair

from leanpass.testing import CONV_SAMPLES

Sample = Callable[[np.random.Generator], tuple[Any, ...]]

CELLS = ("grad", "grad_grad", "jvp", "jvp_grad", "vmap", "vmap_grad", "vmap_jacrev", "jit", "jit_grad")


class Row(NamedTuple):
    samples: dict[str, Sample]  # more samples, keyed "name/variant"
    exempt: dict[str, str]  # cell -> why it cannot apply to this op
    exempt_samples: dict[str, dict[str, str]]  # sample key -> (cell -> why it cannot apply to that sample)
    no_empty: str  # why the op takes no empty array ("" : it does)
    rtol32: float  # float32 against float64, relative to the largest value


def row(samples: dict[str, Sample] | None = None, exempt: dict[str, str] | None = None,
        exempt_samples: dict[str, dict[str, str]] | None = None, no_empty: str = "", rtol32: float = 1e-4) -> Row:
    return Row(samples or {}, exempt or {}, exempt_samples or {}, no_empty, rtol32)


inf = np.inf
FROM_BELOW = (-inf, -1.3, 0.4)  # (for an op infinite at +inf)


def _x(rng: np.random.Generator, *shape: int) -> np.ndarray:
    return rng.standard_normal(shape)


def _no_examples(name: str) -> dict[str, Sample]:
    """A convolution's sample with no examples (its first input cut to none)."""
    make = CONV_SAMPLES[name]
    return {f"{name}/empty": lambda rng: (make()[0][:0], *make()[1:])}


def _moved(rng: np.random.Generator, values: Any) -> np.ndarray:
    """``values`` with the finite ones moved a little by the generator."""
    x = np.array(values, dtype=np.float64)
    return np.where(np.isfinite(x), x + rng.uniform(-0.1, 0.1, x.shape), x)


def _inf(name: str, values: tuple[float, ...] = (-inf, -1.3, 0.4, inf), *rest: Any) -> dict[str, Sample]:
    """A sample ``name/inf``: one input holding ``values`` (some infinite), the finite ones moved by the
    generator, then the constants ``rest``."""
    return {f"{name}/inf": lambda rng: (_moved(rng, values), *rest)}


def _broadcast(name: str) -> dict[str, Sample]:
    """A sample ``name/broadcast`` of a two-input elementwise op: inputs of shapes (2, 3) and (1, 3)."""
    def make(rng: np.random.Generator) -> tuple[Any, ...]:
        if name in DOMAINS:
            x, y = pair(name, rng, (2, 3))
        else:
            x, y = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
        if name in ("remainder", "fmod"):  # (x a multiple of y plus a fraction of it, away from the jumps)
            y = y[:1]
            return y * (rng.integers(-3, 3, (2, 3)) + rng.uniform(0.1, 0.9, (2, 3))), y
        return x, y[:1]

    return {f"{name}/broadcast": make}


LOGADD = [inf, -inf, -inf, 1.0]
# Second derivatives at +-inf: the first derivative's own graph (exp(-x x / 2) for ndtr) multiplies 0 by inf
# there and gives NaN, where the limit is 0. Only the first derivatives' limits are defined (docs/operations.md).
NO_SECOND_AT_INF = {"grad_grad": "second derivative at +-inf: 0 * inf inside the first derivative's graph",
                    "jvp_grad": "second derivative at +-inf: 0 * inf inside the first derivative's graph"}

# NumPy takes axis 0 or -1 of a 0-d array as "all of it"; vmap does not: a 0-d example has no axis
# (vmap/rules.py's reductions raise AxisError, as JAX does), so the loop computes where vmap refuses.
NO_AXIS_OF_0D = {cell: "an axis of a 0-d example: vmap raises AxisError where NumPy's loop takes it as all"
                 for cell in ("vmap", "vmap_grad", "vmap_jacrev")}

ROWS: dict[str, Row] = {
    "*": row(),
    "**": row(),
    "+": row(),
    "-": row(),
    "/": row(),
    "@": row(),
    "abs": row(),
    "arccos": row(),
    "arccosh": row(),
    "arcsin": row(),
    "arcsinh": row(),
    "arctan": row(samples=_inf("arctan")),
    "arctan2": row(samples={**_broadcast("arctan2"),
                            "arctan2/inf": lambda r: (_moved(r, [inf, -inf, 0.5, 1.0]),
                                                      _moved(r, [1.0, 0.5, inf, -inf]))}),
    "arctanh": row(),
    "astype": row(),
    "avg_pool1d": row(),
    "avg_pool2d": row(),
    "batch_norm": row(),
    "betaln": row(samples={"betaln/broadcast": lambda r: (r.uniform(0.5, 2.0, (2, 1)), r.uniform(0.5, 2.0, 3))}),
    "broadcast_to": row(samples={"broadcast_to/empty": lambda r: (_x(r, 0), (2, 0))}),
    "cbrt": row(),
    "ceil": row(),
    "cholesky": row(samples={"cholesky/empty": lambda r: (_x(r, 0, 3, 3),)}),
    "clip": row(samples=_inf("clip", (-inf, -0.2, 0.3, inf), -0.5, 0.5)),
    "cofactor": row(),
    "concatenate": row(),
    "conv1d": row(samples=_no_examples("conv1d")),
    "conv2d": row(samples=_no_examples("conv2d")),
    "conv2d_weight": row(),
    "conv_transpose2d": row(samples=_no_examples("conv_transpose2d")),
    "conv_transpose_input": row(samples=_no_examples("conv_transpose_input")),
    "cos": row(),
    "cosh": row(),
    "cross_entropy": row(samples={
        "cross_entropy/empty": lambda r: (_x(r, 0, 3), np.zeros(0, int), "none"),
        "cross_entropy/inf": lambda r: (_moved(r, [[1e3, -1e3, 0.0], [-inf, 0.0, 1.0]]), np.array([0, 1]), "mean")}),
    "cumprod": row(),
    "cumsum": row(),
    "deg2rad": row(),
    "det": row(samples={"det/empty": lambda r: (_x(r, 0, 3, 3),)}),
    "digamma": row(),
    "eigh": row(),
    "einsum": row(),
    "erf": row(samples=_inf("erf")),
    "erfc": row(samples=_inf("erfc")),
    "erfinv": row(),
    "exp": row(samples=_inf("exp", FROM_BELOW)),
    "exp2": row(samples=_inf("exp2", FROM_BELOW)),
    "expand_dims": row(),
    "expm1": row(samples=_inf("expm1", FROM_BELOW)),
    "fabs": row(),
    "floor": row(),
    "fmax": row(samples={**_broadcast("fmax"),
                         "fmax/inf": lambda r: (_moved(r, [-inf, 0.5, 1.0]), _moved(r, [0.2, -inf, 2.0]))}),
    "fmin": row(samples={**_broadcast("fmin"),
                         "fmin/inf": lambda r: (_moved(r, [inf, 0.5, 1.0]), _moved(r, [0.2, inf, 2.0]))}),
    "fmod": row(samples=_broadcast("fmod")),
    "gammaln": row(),
    "gelu": row(samples={**_inf("gelu", FROM_BELOW),
                         "gelu/exact": lambda rng: (_x(rng, 5) * 3, "none"),
                         "gelu/exact_inf": lambda rng: (_moved(rng, (-inf, -9.0, -1.3, 0.4, 9.0, inf)), "none")}),
    "getitem": row(),
    "group_norm": row(),
    "layer_norm": row(),
    "hypot": row(samples=_broadcast("hypot")),
    "i0e": row(samples=_inf("i0e")),
    "i1e": row(samples=_inf("i1e")),
    "identity": row(),
    "inv": row(),
    "leaky_relu": row(),
    "linear": row(samples={"linear/empty": lambda r: (_x(r, 0, 3), _x(r, 3, 4), _x(r, 4))}),
    "log": row(),
    "log10": row(),
    "log1p": row(),
    "log2": row(),
    "log_ndtr": row(samples=_inf("log_ndtr", (-1.3, 0.4, np.inf)), exempt_samples={"log_ndtr/inf": NO_SECOND_AT_INF}),
    "log_softmax": row(samples={"log_softmax/inf": lambda r: (_moved(r, [[-inf, 0.0, 2.0], [1e3, -1e3, 0.0]]), -1)},
                       exempt_samples={"log_softmax/0d": NO_AXIS_OF_0D}),
    "logaddexp": row(samples={"logaddexp/inf": lambda r: (_moved(r, [inf, -inf, 0.0, -inf]), _moved(r, LOGADD))}),
    "logaddexp2": row(samples={**_broadcast("logaddexp2"),
                               "logaddexp2/inf": lambda r: (_moved(r, [inf, -inf, 0.0, -inf]), _moved(r, LOGADD))}),
    "logit": row(),
    "logsumexp": row(samples={"logsumexp/inf": lambda r: (_moved(r, [[inf, 1.0], [-inf, -inf], [-inf, 0.5]]), 1)}),
    "lstsq": row(samples={"lstsq/empty": lambda r: (_x(r, 0, 3), _x(r, 0), None)}),
    "max": row(samples={"max/empty": lambda r: (_x(r, 0, 3), 1),
                        "max/inf": lambda r: (_moved(r, [[-inf, 0.5, 1.0], [-inf, -inf, -2.0]]), 1)},
               exempt_samples={"max/0d": NO_AXIS_OF_0D}),
    "max_pool1d": row(),
    "max_pool2d": row(),
    "maximum": row(samples={**_broadcast("maximum"),
                            "maximum/inf": lambda r: (_moved(r, [-inf, 0.5, inf]), _moved(r, [0.2, inf, -1.0]))}),
    "mean": row(samples={"mean/empty": lambda r: (_x(r, 0, 3), 1, False)}),
    "min": row(samples={"min/inf": lambda r: (_moved(r, [[inf, 0.5, 1.0], [inf, inf, -2.0]]), 1, False)},
               exempt_samples={"min/0d": NO_AXIS_OF_0D}),
    "minimum": row(samples={"minimum/inf": lambda r: (_moved(r, [-inf, 0.5, inf]), _moved(r, [0.2, inf, -1.0]))}),
    "nan_to_num": row(samples=_inf("nan_to_num", (-inf, 0.5, inf), True, 0.0, 1e3, -1e3)),
    "ndtr": row(samples=_inf("ndtr"), exempt_samples={"ndtr/inf": NO_SECOND_AT_INF}),
    "neg": row(),
    "norm": row(),
    "pad": row(),
    "pinv": row(),
    "polygamma": row(),
    "prod": row(),
    "qr": row(),
    "rad2deg": row(),
    "reciprocal": row(),
    "relu": row(samples=_inf("relu", FROM_BELOW)),
    "remainder": row(samples=_broadcast("remainder")),
    "reshape": row(),
    "rint": row(),
    "round": row(),
    "scaled_dot_product_attention": row(),
    "sigmoid": row(samples=_inf("sigmoid")),
    "sign": row(),
    "sin": row(),
    "sinc": row(),
    "sinh": row(),
    "slogdet": row(),
    "softmax": row(samples={"softmax/inf": lambda r: (_moved(r, [[inf, 1.0, inf], [-inf, 0.0, 2.0]]), -1)},
                   exempt_samples={"softmax/0d": NO_AXIS_OF_0D}),
    "softplus": row(samples=_inf("softplus", FROM_BELOW)),
    "solve": row(),
    "sqrt": row(),
    "square": row(),
    "squeeze": row(),
    "stack": row(),
    "std": row(),
    "sum": row(),
    "svd": row(),
    "swapaxes": row(),
    "tan": row(),
    "tanh": row(samples=_inf("tanh")),
    "transpose": row(),
    "trunc": row(),
    "unindex": row(),
    "var": row(samples={"var/empty": lambda r: (_x(r, 0, 3), 1)}),
    "where": row(samples={"where/inf": lambda r: (np.array([True, False, True]), _moved(r, [0.5, inf, -1.0]),
                                                  _moved(r, [-inf, 2.0, inf]))}),
    "xlog1py": row(),
    "xlogy": row(),
}


def _empty(make: Sample) -> Sample:
    """``make`` with its arrays of the most axes (float inputs, and their labels or masks) cut to no rows."""
    def empty(rng: np.random.Generator) -> tuple[Any, ...]:
        args = make(rng)
        most = max(np.ndim(a) for a in args if isinstance(a, np.ndarray))
        return tuple(a[:0] if isinstance(a, np.ndarray) and a.ndim == most else a for a in args)

    return empty


def _zero_d(make: Sample) -> Sample:
    """``make`` with its float inputs (all of one shape) cut to their first elements, 0-d."""
    def zero_d(rng: np.random.Generator) -> tuple[Any, ...]:
        return tuple(np.asarray(a.flat[0]) if isinstance(a, np.ndarray) and a.dtype.kind == "f" else a
                     for a in make(rng))

    return zero_d


def _runs(name: str, make: Sample, shape: tuple[int, ...] | None = None) -> bool:
    from leanpass import functional as F

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            args = make(np.random.default_rng(0))
            ans = F.OPS[name](*args)[0]
    except Exception:  # (the op refuses these shapes, as NumPy does: the row says why)
        return False
    return shape is None or np.shape(ans) == shape


@cache
def _shared() -> dict[str, dict[str, Sample]]:
    out: dict[str, dict[str, Sample]] = {}
    for key, make in every_sample().items():
        out.setdefault(key if key in ROWS else op_of(key), {})[key] = make
    return out


def samples_of(name: str) -> dict[str, Sample]:
    """Every sample of the op ``name``, keyed by ``name`` or ``name/variant``: the shared tables', the
    row's, and ``name/empty``: the first sample that takes no rows, cut to none (unless the row says
    why the op takes no empty input)."""
    return _samples_of(name).copy()


@cache
def _samples_of(name: str) -> dict[str, Sample]:
    samples = {**_shared().get(name, {}), **ROWS[name].samples}
    if not ROWS[name].no_empty and f"{name}/empty" not in samples:
        for key in sorted(samples):
            empty = _empty(samples[key])
            if _runs(name, empty):
                samples[f"{name}/empty"] = empty
                break
    first = min(k for k in samples if not k.endswith("/empty"))
    samples[f"{name}/strided"] = samples[first]  # (its float inputs made views with gaps by the matrix)
    for key in sorted(samples):  # 0-d inputs, for the ops that take them (elementwise ones, full reductions)
        args = samples[key](np.random.default_rng(0))
        if len({a.shape for a in args if isinstance(a, np.ndarray) and a.dtype.kind == "f"}) == 1 and _runs(
                name, _zero_d(samples[key]), ()):
            samples[f"{name}/0d"] = _zero_d(samples[key])
            break
    return samples
