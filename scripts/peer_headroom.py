"""Training and validation only: do finished peers' runtimes beat the time limit as an order's input?

Usage: python scripts/peer_headroom.py [--trace philly] [--cluster philly-slice] [--split validation]
       [--draws 10] [--orders sjf,saf,psjf,psaf] [--window 1024] [--warmup 512] [--estimates qssf-noise]

Runs each order as the daemon's base (training config, no model) on the split's disjoint windows over
`--draws` draws of the estimate noise, and prints the mean bounded slowdown, wait and p99 wait, and each
order's per-window gap over SJF and SAF with a 90% window-bootstrap interval. `psjf`/`psaf` rank by
`policies/predicted.predicted_runtime`: the limit, doubted where the same owner's finished jobs of the
same GPU count ran far shorter. Two processes. Never the test split.
"""

from __future__ import annotations

import argparse
import statistics
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.rl.args import Args
from rltuned.rl.env import reward
from rltuned.rl.ppo import tick_settings
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.rl.validation import gap_summary
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.ticks import run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


def run(task: tuple[argparse.Namespace, str, int]) -> tuple[str, int, list[tuple[float, float, float]]]:
    """(bounded slowdown, mean wait, p99 wait) per window of one order on one estimate draw."""
    args, order, draw = task
    jobs, _ = apply_estimates(load_trace(resolve_trace(args.trace)).jobs, args.estimates, draw)
    cluster = load_cluster(args.cluster)
    out = []
    for span in disjoint_windows(split_range(len(jobs), args.split), args.window):
        chunk, warm = span.with_warmup(jobs, args.warmup)
        m = compute_metrics(run_ticks(cluster, list(chunk), warm, tick_settings(Args(base=order))))
        out.append((m.avg_bsld, m.avg_wait_s, m.p99_wait_s))
    return order, draw, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--cluster", default="philly-slice")
    parser.add_argument("--split", choices=("train", "validation"), default="validation")
    parser.add_argument("--estimates", default="qssf-noise")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--orders", default="sjf,saf,psjf,psaf")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=512)
    args = parser.parse_args()
    orders = args.orders.split(",")
    tasks = [(args, o, d) for o in orders for d in range(args.draws)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(run, tasks))
    table = {o: np.array([ws for oo, _, ws in results if oo == o]) for o in orders}  # [draw, window, 3]
    for order in orders:
        t = table[order]
        line = f"{order:6s} bsld {t[..., 0].mean():.3f}  wait {t[..., 1].mean():,.0f} s"
        line += f"  p99 {t[..., 2].mean():,.0f} s"
        for ref in ("sjf", "saf"):
            if ref in table and ref != order:
                gaps = np.vectorize(lambda b, a: reward(b, a, "bsld"))(table[ref][..., 0], t[..., 0]).T
                line += f"\n       over {ref}: {gap_summary(gaps)}"
        print(line, flush=True)
    print("per draw:", {o: [round(statistics.mean(r[:, 0]), 3) for r in table[o]] for o in orders})


if __name__ == "__main__":
    main()
