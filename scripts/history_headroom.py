"""Validation only: is there runtime information in a trace's accounting history beyond the time limit?

Usage: python scripts/history_headroom.py [--trace philly] [--cluster philly-slice] [--draws 3]

Ranks the queue by a job's predicted runtime, the prediction mixing its (noisy) limit with the mean
runtime of the finished jobs of its user, else of its account (what `sacct` gives the daemon), and
compares that with SJF and SAF in the daemon's loop (training config, no model) on the trace's
validation windows, over several draws of the estimate noise: how much a hand-made use of that
history gains, a first gauge of what a model fed it could find. Never the test split.
"""

from __future__ import annotations

import argparse
import math
import statistics
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from rltuned.clusters import load_cluster
from rltuned.domain import Job, PriorityContext
from rltuned.estimates import apply_estimates
from rltuned.policies.qssf import Qssf
from rltuned.rl.args import Args
from rltuned.rl.ppo import tick_settings
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.simulator import SimResult
from rltuned.sim.ticks import TickSettings, run_order, run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

MIXES: dict[str, Callable[[float, float], float]] = {
    "min": min,
    "min-2x": lambda limit, past: min(limit, 2.0 * past),
    "geomean": lambda limit, past: math.sqrt(limit * past),
    "past-only": lambda limit, past: past,
}


@dataclass(frozen=True)
class HistoryMix:
    """Shortest predicted runtime first (x GPUs with `area`): the limit mixed with the past mean."""

    name: str
    mix: str
    area: bool = False
    dynamic: bool = True

    def key(self, job: Job, ctx: PriorityContext) -> float:
        # QSSF's prediction: the user's mean, else the account's, else the limit itself (which every mix
        # of the limit with itself leaves unchanged).
        past = Qssf().predicted_runtime(job, ctx)
        runtime = MIXES[self.mix](job.estimate, past)
        return runtime * job.gpus if self.area else runtime


def run(
    cluster_name: str, jobs: list[Job], warm: int, settings: TickSettings, order: HistoryMix | None
) -> SimResult:
    """The daemon's loop on the base policy alone; a history mix replaces QSSF, whose inputs it reads."""
    cluster = load_cluster(cluster_name)
    if order is None:
        return run_ticks(cluster, jobs, warm, settings)
    return run_order(cluster, jobs, warm, settings, order)


def score(task: tuple[str, str, str, int]) -> tuple[str, int, list[float]]:
    """Mean bounded slowdown per validation window of one order on one estimate draw."""
    trace, preset, order, draw = task
    jobs, _ = apply_estimates(load_trace(resolve_trace(trace)).jobs, "qssf-noise", draw)
    policy = None
    if order in ("sjf", "saf"):
        settings = tick_settings(Args(base=order))
    else:
        mix, _, area = order.partition("+")
        settings, policy = tick_settings(Args(base="qssf")), HistoryMix(order, mix, area == "area")
    out = []
    for window in disjoint_windows(split_range(len(jobs), "validation")):
        chunk, warm = window.with_warmup(jobs, 512)
        out.append(compute_metrics(run(preset, list(chunk), warm, settings, policy)).avg_bsld)
    return order, draw, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--cluster", default="philly-slice")
    parser.add_argument("--draws", type=int, default=3)
    args = parser.parse_args()
    jobs = load_trace(resolve_trace(args.trace)).jobs
    users, accounts = {j.user for j in jobs} - {""}, {j.account for j in jobs} - {""}
    print(f"{args.trace}: {len(users)} users, {len(accounts)} accounts named in the trace")
    orders = ["sjf", "saf", *MIXES, *(f"{m}+area" for m in MIXES)]
    tasks = [(args.trace, args.cluster, o, d) for o in orders for d in range(args.draws)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(score, tasks))
    for order in orders:
        per_draw = [statistics.mean(w) for o, _, w in results if o == order]
        shown = ", ".join(f"{b:.3f}" for b in per_draw)
        print(f"{order:16s} bounded slowdown per draw {shown}; mean {statistics.mean(per_draw):.3f}")


if __name__ == "__main__":
    main()
