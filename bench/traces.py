"""Benchmark: load a synthetic 1M-row Philly-format CSV and report rows/s against the 10 s budget.

Both orders are timed: submit-sorted, as real traces come, and shuffled, which costs a sort and a
renumbering pass. Exits 1 if either run misses the budget.

    .venv/bin/python bench/traces.py [--rows 1000000] [--budget 10]
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from rltuned.traces import load_trace

_START = datetime(2017, 9, 4, tzinfo=UTC).timestamp()
_SPAN_S = 100 * 86400
_VCS = ("6214e9", "b436b2", "11cb48", "7f04ca", "ee9e8c", "103959")
_GPUS = (1, 1, 1, 1, 1, 1, 1, 2, 4, 8)


def write_philly(path: Path, rows: int, *, shuffled: bool, seed: int = 0) -> None:
    rng = random.Random(seed)
    submits = [int(_START + rng.random() * _SPAN_S) for _ in range(rows)]
    if not shuffled:
        submits.sort()
    with path.open("w", encoding="utf-8") as out:
        out.write("timestamp,duration,num_gpus,gpu_time,cluster\n")
        for submit in submits:
            stamp = datetime.fromtimestamp(submit, UTC).strftime("%Y-%m-%d %H:%M:%S")
            duration = float(rng.randint(1, 500_000))
            gpus = rng.choice(_GPUS)
            out.write(f"{stamp},{duration},{gpus},{duration * gpus},{rng.choice(_VCS)}\n")


def time_load(path: Path, rows: int) -> float:
    started = time.perf_counter()
    trace = load_trace(path)
    elapsed = time.perf_counter() - started
    assert len(trace) == rows, f"expected {rows} jobs, got {len(trace)}"
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--budget", type=float, default=10.0, help="seconds allowed per load")
    args = parser.parse_args()
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for shuffled in (False, True):
            path = Path(tmp) / f"philly-{'shuffled' if shuffled else 'sorted'}.csv"
            write_philly(path, args.rows, shuffled=shuffled)
            elapsed = time_load(path, args.rows)
            ok &= elapsed <= args.budget
            order = "shuffled" if shuffled else "sorted"
            print(f"{order:>8}: {args.rows:,} rows in {elapsed:.2f} s = {args.rows / elapsed:,.0f} rows/s")
    print(f"budget {args.budget:.0f} s: {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
