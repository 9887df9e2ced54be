"""``lp.to_dot`` on a chain of 1,000,000 ops: it must finish (no recursion) in seconds.

    python benchmarks/bench_graph.py             # 1,000,000 nodes
    python benchmarks/bench_graph.py --nodes N

Prints the time to record the chain, the time ``to_dot`` takes, and the size of the text, and
checks that every node and arrow is in it.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import leanpass as lp  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--nodes", type=int, default=1_000_000, help="ops in the chain (default 1,000,000)")
    n = parser.parse_args().nodes
    x = lp.Tensor(1.0, requires_grad=True)
    start = time.perf_counter()
    y = x
    for _ in range(n):
        y = y * 1.0
    built = time.perf_counter()
    dot = lp.to_dot(y)
    drawn = time.perf_counter()
    assert dot.count(" -> ") == n and dot.count("shape=box") == n, "a node or an arrow is missing"
    print(f"{n:,}-op chain: recorded in {built - start:.2f} s; to_dot in {drawn - built:.2f} s "
          f"({len(dot) / 1e6:.0f} MB of DOT text, every node and arrow present)")


if __name__ == "__main__":
    main()
