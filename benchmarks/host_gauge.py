"""How fast this machine runs plain Python right now, for reading the benchmarks' figures.

The machines these benchmarks run on are shared, and their speed changes from one second to
the next. On the 2-core machine behind docs/performance.md, with nothing else running inside
it (no load, no steal time in /proc/stat), the loop below took 19-20 ms at best and 33-36 ms
most of the time: something outside the machine, most likely another guest of the same host,
takes a share of the processor that no tool inside it shows. The benchmarks time the loop
between their measurements and print its fastest and median times; a median well above the
fastest says the figures beside it come from a slowed machine (the Python side of a step
slows more than NumPy's loops do).
"""

from __future__ import annotations

import statistics
import time


def _loop() -> int:
    total = 0
    for i in range(500_000):
        total += i
    return total


class Gauge:
    """Times of a fixed pure-Python loop, taken with ``sample()`` between measurements."""

    def __init__(self) -> None:
        self.times: list[float] = []

    def sample(self) -> None:
        """Time the loop once (about 20-35 ms)."""
        start = time.perf_counter()
        _loop()
        self.times.append(time.perf_counter() - start)

    def report(self) -> str:
        """One line: the loop's fastest, median and slowest time, and median over fastest."""
        t = sorted(self.times)
        if not t:
            return "host gauge: no samples"
        fastest, median = t[0], statistics.median(t)
        return (f"host gauge (a fixed Python loop, {len(t)} samples during this run): fastest {fastest * 1e3:.1f} ms, "
                f"median {median * 1e3:.1f} ms, slowest {t[-1] * 1e3:.1f} ms; median / fastest {median / fastest:.2f}")
