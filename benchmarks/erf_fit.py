"""Fit the coefficients of leanpass/functional/_erf.py again (needs mpmath; a few minutes on one core).

    python benchmarks/erf_fit.py

Each polynomial is fitted by least squares on Chebyshev nodes against a 60-digit reference, then
reweighted (Lawson's iteration) towards the minimax fit; the script prints each table with its fit
error (the largest weighted error over the nodes), in the order the module lists them.
"""

from __future__ import annotations

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


def main() -> None:
    def inner(z: mp.mpf) -> mp.mpf:  # erf(x) / x as a function of z = x**2
        return mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)

    tables = {
        "_S64": lambda: fit(inner, 0, 0.25, 8, nodes=60),
        "_S32": lambda: fit(inner, 0, 0.25, 4, nodes=60),
        "_R64": lambda: fit(scaled_tail(0.3), 0, 1 / 1.15, 22, nodes=300),
        "_R32": lambda: fit(scaled_tail(0.5), 0, 1 / 1.25, 9),
        "_E64": lambda: fit(scaled_tail(0.3), 1 / (1 + 0.3 * 6), 1 / 1.15, 16, nodes=300),
        "_E32": lambda: fit(scaled_tail(0.5), 1 / (1 + 0.5 * 4), 1 / 1.25, 7),
        "_G64": lambda: fit(scaled_tail(0.3), 0, 1, 24, nodes=150),
        "_G32": lambda: fit(scaled_tail(0.4), 0, 1, 6, weight=absolute(0.4), nodes=150),
    }
    for name, make in tables.items():
        coefs, error = make()
        print(f"{name} = {tuple(coefs)!r}  # fit error {mp.nstr(error, 3)}", flush=True)


if __name__ == "__main__":
    main()
