"""Validation only: how much could any runtime prediction gain as the order, with the limits as they are?

Usage: python scripts/oracle_headroom.py [--draws 10] [--trace philly] [--cluster philly-slice]
           [--window 1024] [--warmup 512]
       python scripts/oracle_headroom.py --trace itp --cluster itp-slice --window 256
       python scripts/oracle_headroom.py --trace wagap --cluster wagap-slice --window 256   # its own limits
       python scripts/oracle_headroom.py --spearman [--draws 3]

The first form ranks the queue by oracles that read each job's true runtime, in the daemon's loop
(training config, no model) on the split's disjoint windows (1,024 jobs after 512 warm-up jobs), while
Slurm's backfill and every reservation keep the limits (Philly's and ITP's noisy draws, wagap's own
walltimes), beside SJF, SAF and `psjf`:
- `exact`: the true runtime (`rl/headroom.py`'s oracles);
- `exact-down`: the true runtime where the limit overstates it, else the limit. On a real Slurm a job
  never outlives its limit, so a site's predictor can only doubt limits downward (`psjf` does): this is
  SJF's order with every correction such a predictor could make.
The second form asks how much of that a prediction from the accounting history can reach, offline on
the training split (finish approximated as submit + runtime, as `policies/predicted.py`'s constants
were chosen): the rank correlation with the true runtime of the limit, of `psjf`'s rule, of a
posterior median (the job's peer group's finished runtimes as the prior, the limit-to-runtime ratios
of finished jobs as the likelihood: both are in sacct), of `psjf`'s rule on a clairvoyant sweep key
(the last 3 jobs with the same GPU count submitted within `BURST_S` before the job, their runtimes
read as if they had finished: an upper bound on what grouping jobs by submit bursts, a proxy for the
sweep an anonymized trace cannot name, could add), and of `exact-down`. The oracles are orders of
this study, never policies: no daemon can read a runtime before the job ends (`rl/headroom.py`; `rltunectl
headroom` runs the first form on any trace, against every heuristic, on three draws). Never the test split.
"""

from __future__ import annotations

import argparse
import math
from collections import defaultdict
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import numpy.typing as npt
from scipy.stats import spearmanr

from rltuned.clusters import load_cluster
from rltuned.domain import Job
from rltuned.estimates import apply_estimates, draw_seeds, resolve_model
from rltuned.policies.predicted import doubted
from rltuned.rl.args import Args
from rltuned.rl.env import reward
from rltuned.rl.headroom import MIN_RUNTIME_S, oracle, run_oracle
from rltuned.rl.ppo import tick_settings
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.rl.validation import gap_summary
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.ticks import run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

ORDERS = ("sjf", "saf", "psjf", "exact", "exact-down")


def run(task: tuple[argparse.Namespace, str, int]) -> tuple[str, int, list[tuple[float, float, float]]]:
    """(bounded slowdown, mean wait, p99 wait) per window of one order on one estimate draw."""
    args, order, draw = task
    jobs, _ = apply_estimates(load_trace(resolve_trace(args.trace)).jobs, args.estimates, draw)
    cluster = load_cluster(args.cluster)
    known = oracle(order, jobs) if order.startswith("exact") else None
    out = []
    for span in disjoint_windows(split_range(len(jobs), args.split), args.window):
        chunk, warm = span.with_warmup(jobs, args.warmup)
        if known is not None:
            result = run_oracle(known, cluster, list(chunk), warm, tick_settings(Args(base="sjf")))
        else:
            result = run_ticks(cluster, list(chunk), warm, tick_settings(Args(base=order)))
        m = compute_metrics(result)
        out.append((m.avg_bsld, m.avg_wait_s, m.p99_wait_s))
    return order, draw, out


def draws(args: argparse.Namespace) -> range:
    """The estimate draws: one where the limits are the trace's own (wagap's walltimes)."""
    jobs = load_trace(resolve_trace(args.trace)).jobs
    return draw_seeds(resolve_model(args.estimates, jobs), 0, args.draws)


def in_loop(args: argparse.Namespace) -> None:
    tasks = [(args, o, d) for o in ORDERS for d in draws(args)]
    with ProcessPoolExecutor(2) as pool:
        results = list(pool.map(run, tasks))
    table = {o: np.array([ws for oo, _, ws in results if oo == o]) for o in ORDERS}  # [draw, window, 3]
    for order in ORDERS:
        t = table[order]
        bsld, wait, p99 = (t[..., k].mean() for k in range(3))
        print(f"{order:10s} bsld {bsld:.3f}  wait {wait:,.0f} s  p99 {p99:,.0f} s")
        for ref in ("saf", "psjf"):
            if ref != order:
                gaps = np.vectorize(lambda b, a: reward(b, a, "bsld"))(table[ref][..., 0], t[..., 0]).T
                print(f"           over {ref}: {gap_summary(gaps)}")


def spearman(args: argparse.Namespace) -> None:
    for draw in draws(args):
        jobs, _ = apply_estimates(load_trace(resolve_trace(args.trace)).jobs, args.estimates, draw)
        span = split_range(len(jobs), "train")
        jobs = jobs[span.start : span.stop]
        predictions = offline_predictions(jobs)
        runtime = predictions["true"]
        late = slice(len(jobs) // 4, None)  # the first quarter only feeds the ratio profile
        shown = ", ".join(
            f"{name} {spearmanr(p[late], runtime[late]).correlation:.3f}"
            for name, p in predictions.items()
            if name != "true"
        )
        print(f"draw {draw}: rank correlation with the true runtime: {shown}")


def offline_predictions(jobs: list[Job], prior_jobs: int = 200) -> dict[str, npt.NDArray[np.float64]]:
    submit = np.array([j.submit for j in jobs])
    runtime = np.maximum(np.array([j.runtime or 0.0 for j in jobs]), MIN_RUNTIME_S)
    limit = np.maximum(np.array([j.estimate for j in jobs]), MIN_RUNTIME_S)
    finish = submit + runtime
    edges = np.arange(-8.0, 8.0001, 0.1)
    counts, _ = np.histogram(np.log(limit[: len(jobs) // 4] / runtime[: len(jobs) // 4]), bins=edges)
    ratio_pdf = (counts + 0.5) / (counts.sum() + 0.5 * len(counts))
    groups: dict[tuple[str, int], list[int]] = defaultdict(list)
    for i, job in enumerate(jobs):
        groups[(job.user or job.account, job.gpus)].append(i)
    psjf, posterior = limit.copy(), limit.copy()
    for members in groups.values():
        idx = np.array(members)
        for n, i in enumerate(idx):
            done = idx[:n][finish[idx[:n]] <= submit[i]]
            if len(done) == 0:
                continue
            last = done[np.argsort(finish[done], kind="stable")][-3:]
            psjf[i] = doubted(float(limit[i]), float(np.median(runtime[last])))
            prior = np.log(runtime[done[-prior_jobs:]])
            ratio = math.log(limit[i]) - prior
            weight = ratio_pdf[np.clip(np.searchsorted(edges, ratio) - 1, 0, len(ratio_pdf) - 1)]
            weight = weight * ((ratio >= edges[0]) & (ratio < edges[-1]))
            if len(prior) >= 5 and weight.sum() > 0:
                order = np.argsort(prior)
                cumulative = np.cumsum(weight[order]) / weight.sum()
                posterior[i] = math.exp(prior[order][np.searchsorted(cumulative, 0.5)])
    return {
        "true": runtime,
        "sweep (clairvoyant)": sweep_predictions(jobs, submit, runtime, limit),
        "limit": limit,
        "psjf": psjf,
        "posterior median": posterior,
        "min(limit, posterior)": np.minimum(limit, posterior),
        "exact-down": np.minimum(limit, runtime),
    }


BURST_S = 600.0


def sweep_predictions(
    jobs: list[Job],
    submit: npt.NDArray[np.float64],
    runtime: npt.NDArray[np.float64],
    limit: npt.NDArray[np.float64],
) -> npt.NDArray[np.float64]:
    """`psjf`'s rule on the last 3 same-GPU jobs submitted within `BURST_S` before each job, read as if
    finished: no scheduler knows these runtimes at the time, so this bounds the sweep key from above."""
    gpus = np.array([j.gpus for j in jobs])
    out = limit.copy()
    for i in range(len(jobs)):
        near = np.arange(int(np.searchsorted(submit, submit[i] - BURST_S)), i)
        peers = near[gpus[near] == gpus[i]][-3:]
        if len(peers) == 0:
            continue
        out[i] = doubted(float(limit[i]), float(np.median(runtime[peers])))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default="philly")
    parser.add_argument("--cluster", default="philly-slice")
    parser.add_argument("--split", choices=("train", "validation"), default="validation")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--estimates", default="auto", help="auto: the trace's own limits, else qssf-noise")
    parser.add_argument("--window", type=int, default=1024)
    parser.add_argument("--warmup", type=int, default=512)
    parser.add_argument("--spearman", action="store_true")
    args = parser.parse_args()
    spearman(args) if args.spearman else in_loop(args)


if __name__ == "__main__":
    main()
