"""How far can a one-line per-job order go? A grid over a log-linear family, searched on training windows.

Usage: python scripts/scorer_search.py [--trace philly] [--cluster philly-slice] [--train-windows 16]
       [--train-draws 1] [--reference sjf] [--top 6] [--draws 3] [--workers 2] [--sizes -0.5,0,0.5,1]
       [--ages 0.25,0.5,1,2] [--offsets 600,3600]

The actor scores each job alone (shared weights over its features), so what it can learn is a per-job
order. The family `log(limit) + b * log(GPUs) - c * log(wait + w0)` (policies/loglinear.py), lower
first, holds SJF (b = c = 0), SAF (b = 1), WFP3 (b = -1/3, c = 1, w0 -> 0) and orders between them.
Every point of the grid runs in the daemon's loop (as `rltunectl train` runs it, no model) on training windows
(evenly spaced over the training split, `--train-draws` draws of the estimate noise each); the best
`--top` points by per-window gap over `--reference` and the heuristics then run on the validation
windows over `--draws` draws, where any choice is made, with a 90% interval per order (a bootstrap
over windows, `rl/validation.window_interval`). Outcomes swing by tens of percent with any small change
of a busy window, so a point picked on few window-draws is mostly picked for its luck: read many draws
on training, and validation on ten (docs/training.md, "How much a choice made on three draws is
worth"). Never the test split. What this gauges: the gain over the best heuristic that any per-job
order of these inputs offers, against what PPO found; the point chosen is a teacher for
`--imitate-teacher` (docs/training.md). A per-window gap is the training reward's and validation's
(`rl/env.reward`: divided by the larger of the two). The runs docs/training.md reports divided by
the reference's, which reads losses larger; its sections say so.
"""

from __future__ import annotations

import argparse
import functools
import itertools
import statistics
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from rltuned.clusters import load_cluster
from rltuned.domain import Job
from rltuned.estimates import apply_estimates
from rltuned.policies.loglinear import LogLinear
from rltuned.policies.registry import make_policy
from rltuned.rl.args import Args
from rltuned.rl.env import reward
from rltuned.rl.ppo import tick_settings
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.rl.validation import TIE, window_interval
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.ticks import run_order
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

SIZE_EXPONENTS = "-0.5,0,0.5,1"
AGE_EXPONENTS = "0.25,0.5,1,2"
AGE_OFFSETS_S = "600,3600"


Order = LogLinear | str


def floats(text: str) -> list[float]:
    return [float(v) for v in text.split(",")]


def grid(sizes: str, ages: str, offsets: str) -> list[LogLinear]:
    """Every (b, c, w0), and each b without age (where w0 plays no part)."""
    points = [LogLinear(b, 0.0, floats(offsets)[0]) for b in floats(sizes)]
    product = itertools.product(floats(sizes), floats(ages), floats(offsets))
    points += [LogLinear(b, c, w0) for b, c, w0 in product]
    return points


@functools.cache
def drawn(trace: str, draw: int) -> list[Job]:
    """The trace with one draw of the noisy limits, loaded once per worker."""
    return apply_estimates(load_trace(resolve_trace(trace)).jobs, "qssf-noise", draw)[0]


def bsld(task: tuple[str, str, Order, int, Window]) -> tuple[Order, int, Window, float]:
    """One order on one window and one estimate draw: mean bounded slowdown."""
    trace, preset, order, draw, window = task
    jobs = drawn(trace, draw)
    # The loop needs a registered base for its settings; the episode's base is then replaced.
    base = order if isinstance(order, str) else ("sjf" if order.c == 0.0 else "wfp3")
    chunk, warm = window.with_warmup(jobs, 512)
    policy = make_policy(order) if isinstance(order, str) else order
    result = run_order(load_cluster(preset), list(chunk), warm, tick_settings(Args(base=base)), policy)
    return order, draw, window, compute_metrics(result).avg_bsld


def name(order: Order) -> str:
    return order if isinstance(order, str) else order.name


def table(
    results: list[tuple[Order, int, Window, float]], reference: str
) -> list[tuple[str, float, float, int, int]]:
    """(order, mean bsld, mean per-window gap over `reference`, wins, losses), best gap first."""
    by: dict[str, dict[tuple[int, Window], float]] = {}
    for order, draw, window, value in results:
        by.setdefault(name(order), {})[(draw, window)] = value
    ref = by[reference]
    rows = []
    for key, cells in by.items():
        gaps = [reward(ref[c], v, "bsld") for c, v in cells.items()]
        wins = sum(g > TIE for g in gaps)
        losses = sum(g < -TIE for g in gaps)
        rows.append((key, statistics.mean(cells.values()), statistics.mean(gaps), wins, losses))
    return sorted(rows, key=lambda r: -r[2])


def show(title: str, rows: list[tuple[str, float, float, int, int]], reference: str) -> None:
    print(f"\n{title} (per-window gap over {reference}; wins/losses beyond 0.1%)")
    for key, mean, gap, wins, losses in rows:
        print(f"  {key:28s} bsld {mean:8.3f}  gap {100 * gap:+6.1f}%  {wins:2d} W {losses:2d} L")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--cluster", default="philly-slice")
    parser.add_argument("--train-windows", type=int, default=16)
    parser.add_argument("--train-draws", type=int, default=1)
    parser.add_argument("--reference", default="sjf", help="the heuristic the top points are chosen against")
    parser.add_argument("--top", type=int, default=6)
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--sizes", default=SIZE_EXPONENTS, help="values of b, comma-separated")
    parser.add_argument("--ages", default=AGE_EXPONENTS, help="values of c other than 0")
    parser.add_argument("--offsets", default=AGE_OFFSETS_S, help="values of w0 (s)")
    args = parser.parse_args()
    n = len(load_trace(resolve_trace(args.trace)).jobs)
    train = disjoint_windows(split_range(n, "train"), 1024)[1:]  # the first has no full warm-up
    step = max(len(train) // args.train_windows, 1)
    train = train[::step][: args.train_windows]
    heuristics = ["sjf", "saf", "wfp3", "unicep"]
    points = grid(args.sizes, args.ages, args.offsets)
    orders: list[Order] = [*heuristics, *points]
    with ProcessPoolExecutor(args.workers) as pool:
        tasks = [
            (args.trace, args.cluster, o, d, w)
            for o in orders
            for d in range(args.train_draws)
            for w in train
        ]
        searched = table(list(pool.map(bsld, tasks, chunksize=1)), args.reference)
        show(f"{len(train)} training windows of 1,024 x {args.train_draws} draw(s)", searched, args.reference)
        chosen = [r[0] for r in searched if r[0] not in heuristics][: args.top]
        finalists: list[Order] = [*heuristics, *(o for o in points if o.name in chosen)]
        validation = disjoint_windows(split_range(n, "validation"))
        tasks = [
            (args.trace, args.cluster, o, d, w)
            for o in finalists
            for d in range(args.draws)
            for w in validation
        ]
        checked = list(pool.map(bsld, tasks, chunksize=1))
    for reference in ("sjf", "saf"):
        title = f"validation: {len(validation)} windows x {args.draws} draws"
        show(title, table(checked, reference), reference)
        for key, (low, high) in intervals(checked, reference).items():
            print(f"  {key:28s} 90% interval over {reference}: [{100 * low:+.1f}%, {100 * high:+.1f}%]")


def intervals(
    results: list[tuple[Order, int, Window, float]], reference: str
) -> dict[str, tuple[float, float]]:
    """Per order, the 90% interval of its per-window gap over `reference`, resampling windows."""
    cells: dict[str, dict[tuple[Window, int], float]] = {}
    for order, draw, window, value in results:
        cells.setdefault(name(order), {})[(window, draw)] = value
    ref = cells[reference]
    windows = sorted({w for w, _ in ref}, key=lambda w: w.start)
    draws = sorted({d for _, d in ref})
    out = {}
    for key, values in cells.items():
        gaps = np.array([[reward(ref[(w, d)], values[(w, d)], "bsld") for d in draws] for w in windows])
        out[key] = window_interval(gaps)
    return out


if __name__ == "__main__":
    main()
