"""Fit the coefficients of leanpass/functional/_erf.py again (needs mpmath; a few minutes on one core).

    python benchmarks/erf_fit.py [TABLE ...]     # e.g. _S64 _PE64: only those

Each polynomial is fitted by least squares on Chebyshev nodes against a 60-digit reference, then
reweighted (Lawson's iteration) towards the minimax fit; each rational ``P/Q`` (``Q(0) = 1``) the same way
on the linearised error ``(P - f Q) / Q_previous``. The script prints each table with its fit error (the
largest weighted error over the nodes), in the order the module lists them.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import mpmath as mp

mp.mp.dps = 60


def fit(f: Callable[[mp.mpf], mp.mpf], lo: float, hi: float, degree: int, weight: Callable[..., mp.mpf] | None = None,
        nodes: int = 200, rounds: int = 12) -> tuple[list[float], mp.mpf]:
    """Coefficients (lowest power first) of the polynomial nearest ``f`` on [lo, hi], relative to ``f`` unless
    ``weight(t, f(t))`` says otherwise, and the fit error."""
    a, b = mp.mpf(lo), mp.mpf(hi)
    ts = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / nodes) for k in range(nodes)]
    fs = [f(t) for t in ts]
    scale = [1 / abs(v) if weight is None else weight(t, v) for t, v in zip(ts, fs)]
    w = [mp.mpf(1)] * nodes
    coefs: list[mp.mpf] = []
    worst = mp.mpf(0)
    for _ in range(rounds):
        design, rhs = mp.matrix(nodes, degree + 1), mp.matrix(nodes, 1)
        for i, t in enumerate(ts):
            s, p = mp.sqrt(w[i]) * scale[i], mp.mpf(1)
            for j in range(degree + 1):
                design[i, j], p = p * s, p * t
            rhs[i] = fs[i] * s
        sol = mp.qr_solve(design, rhs)[0]
        coefs = [sol[j] for j in range(degree + 1)]
        errors = [abs(mp.polyval(coefs[::-1], t) - v) * s for t, v, s in zip(ts, fs, scale)]
        worst = max(errors)
        total = sum(wi * e for wi, e in zip(w, errors))
        w = [wi * e / total for wi, e in zip(w, errors)]
    return [float(c) for c in coefs], worst


def fit_ratio(f: Callable[[mp.mpf], mp.mpf], lo: float, hi: float, m: int, n: int,
              weight: Callable[..., mp.mpf] | None = None, nodes: int = 120,
              rounds: int = 15) -> tuple[list[float], list[float], mp.mpf]:
    """``P`` (degree m) and ``Q`` (degree n, ``Q(0) = 1``), lowest power first, with ``P / Q`` nearest ``f`` on
    [lo, hi] (relative to ``f`` unless ``weight(x, f(x))`` says otherwise), and the fit error (the best round)."""
    a, b = mp.mpf(lo), mp.mpf(hi)
    xs = [(a + b) / 2 + (b - a) / 2 * mp.cos(mp.pi * (k + mp.mpf(0.5)) / nodes) for k in range(nodes)]
    fs = [f(x) for x in xs]
    scale = [1 / abs(v) if weight is None else weight(x, v) for x, v in zip(xs, fs)]
    w, qs = [mp.mpf(1)] * nodes, [mp.mpf(1)] * nodes
    best: tuple[list[mp.mpf], list[mp.mpf], mp.mpf] | None = None
    for _ in range(rounds):
        design, rhs = mp.matrix(nodes, m + 1 + n), mp.matrix(nodes, 1)
        for i, (x, v) in enumerate(zip(xs, fs)):
            s, p = mp.sqrt(w[i]) * scale[i] / abs(qs[i]), mp.mpf(1)
            for j in range(m + 1):
                design[i, j], p = p * s, p * x
            p = x
            for j in range(n):
                design[i, m + 1 + j], p = -v * p * s, p * x
            rhs[i] = v * s
        sol = mp.qr_solve(design, rhs)[0]
        pc, qc = [sol[j] for j in range(m + 1)], [mp.mpf(1)] + [sol[m + 1 + j] for j in range(n)]
        qs = [mp.polyval(qc[::-1], x) for x in xs]
        errors = [abs(mp.polyval(pc[::-1], x) / q - v) * s for x, q, v, s in zip(xs, qs, fs, scale)]
        worst = max(errors)
        if best is None or worst < best[2]:
            best = (pc, qc, worst)
        total = sum(wi * e for wi, e in zip(w, errors))
        w = [wi * e / total for wi, e in zip(w, errors)]
    assert best is not None
    return [float(c) for c in best[0]], [float(c) for c in best[1]], best[2]


def erfcx(x: mp.mpf) -> mp.mpf:
    return mp.erfc(x) * mp.exp(x * x)


def for_erf(x: mp.mpf, v: mp.mpf) -> mp.mpf:
    """The weight that makes the fit's error of ``erfcx`` that of ``erf`` (``erfc`` absolute, over ``erf``)."""
    return mp.exp(-x * x) / mp.erf(x)


def scaled_tail(p: float) -> Callable[[mp.mpf], mp.mpf]:
    """``erfc(x) exp(x**2) / t`` as a function of ``t = 1 / (1 + p x)``."""
    pp = mp.mpf(p)

    def f(t: mp.mpf) -> mp.mpf:
        if t == 0:
            return pp / mp.sqrt(mp.pi)
        x = (1 / t - 1) / pp
        return mp.erfc(x) * mp.exp(x * x) / t

    return f


def absolute(p: float) -> Callable[..., mp.mpf]:
    """The weight that makes the fit's error that of ``erfc`` itself (absolute)."""
    pp = mp.mpf(p)
    return lambda t, v: mp.mpf(0) if t == 0 else t * mp.exp(-(((1 / t - 1) / pp) ** 2))


def erfc_near_one(c: float) -> Callable[[mp.mpf], mp.mpf]:
    """``erfc(1 + y) - c`` as a function of ``y``."""
    return lambda y: mp.erfc(1 + y) - mp.mpf(c)


def log_scaled(k: float) -> Callable[[mp.mpf], mp.mpf]:
    """``log(x erfcx(x)) + k`` as a function of ``s = 1 / x**2``."""
    kk = mp.mpf(k)

    def f(s: mp.mpf) -> mp.mpf:
        if s == 0:
            return kk - mp.log(mp.pi) / 2
        x = 1 / mp.sqrt(s)
        return mp.log(x * erfcx(x)) + kk

    return f


def main() -> None:
    def inner(z: mp.mpf) -> mp.mpf:  # erf(x) / x - 1 as a function of z = x**2
        return (mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)) - 1

    def relative_to_erf(t: mp.mpf, v: mp.mpf) -> mp.mpf:  # (the error of erf(x) / x = 1 + S)
        return 1 / (1 + v)

    tables = {
        "_S64": lambda: fit(inner, 0, 0.25, 8, weight=relative_to_erf, nodes=60),
        "_S32": lambda: fit(inner, 0, 0.25, 4, weight=relative_to_erf, nodes=60),
        "_R64": lambda: fit(scaled_tail(0.3), 0, 1 / 1.15, 22, nodes=300),
        "_MR64, _MS64": lambda: fit_ratio(erfc_near_one(float(mp.erfc(1))), -0.5, 0.25, 8, 7,
                                          weight=lambda y, v: 1 / mp.erfc(1 + y), nodes=100),
        "_TR64, _TS64": lambda: fit_ratio(log_scaled(0.5625), 0, 1 / 1.25**2, 9, 9, weight=lambda s, v: mp.mpf(1),
                                          nodes=100),
        "_R32": lambda: fit(scaled_tail(0.5), 0, 1 / 1.25, 9),
        "_PC32, _QC32": lambda: fit_ratio(erfcx, 0.5, 10.1, 3, 4, nodes=80),
        "_PE64, _QE64": lambda: fit_ratio(erfcx, 0.5, 6.0, 6, 7, weight=for_erf),
        "_PE32, _QE32": lambda: fit_ratio(erfcx, 0.5, 4.0, 2, 3, weight=for_erf, nodes=80),
        "_G64": lambda: fit(scaled_tail(0.3), 0, 1, 24, nodes=150),
        "_G32": lambda: fit(scaled_tail(0.4), 0, 1, 6, weight=absolute(0.4), nodes=150),
    }
    only = sys.argv[1:]  # (table names to fit, all by default)
    for name, make in tables.items():
        if only and not any(n in name for n in only):
            continue
        *coefs, error = make()
        shown = ", ".join(repr(tuple(c)) for c in coefs)
        print(f"{name} = {shown}  # fit error {mp.nstr(error, 3)}", flush=True)


if __name__ == "__main__":
    main()
