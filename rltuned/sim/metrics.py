"""Every metric of one run, computed at once from the job records (numpy, vectorized)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from rltuned.sim.simulator import SimResult

BSLD_BOUND_S = 10.0


@dataclass(frozen=True)
class Metrics:
    jobs: int
    dropped: int
    avg_wait_s: float
    avg_jct_s: float
    avg_bsld: float
    gpu_util: float
    makespan_s: float
    p50_wait_s: float
    p95_wait_s: float
    p99_wait_s: float
    max_wait_s: float
    fairness: float
    """Worst user's mean bounded slowdown over the mean of all jobs (1 = perfectly even)."""
    guarded: int = 0
    """Measured jobs the starvation guard acted on (put first, or back at base rank) at some tick."""

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


def compute_metrics(result: SimResult) -> Metrics:
    records = result.records
    if not records:
        nan = float("nan")
        return Metrics(0, len(result.dropped), nan, nan, nan, nan, 0.0, nan, nan, nan, nan, nan)
    submit = np.fromiter((r.job.submit for r in records), np.float64, len(records))
    start = np.fromiter((r.start for r in records), np.float64, len(records))
    end = np.fromiter((r.end for r in records), np.float64, len(records))
    run = end - start
    wait = start - submit
    bsld = np.maximum((wait + run) / np.maximum(run, BSLD_BOUND_S), 1.0)
    makespan = float(end.max() - submit.min())
    util = _utilization(result, float(submit.min()), float(end.max()))
    p50, p95, p99 = np.percentile(wait, [50, 95, 99])
    return Metrics(
        jobs=len(records),
        dropped=len(result.dropped),
        avg_wait_s=float(wait.mean()),
        avg_jct_s=float((end - submit).mean()),
        avg_bsld=float(bsld.mean()),
        gpu_util=util,
        makespan_s=makespan,
        p50_wait_s=float(p50),
        p95_wait_s=float(p95),
        p99_wait_s=float(p99),
        max_wait_s=float(wait.max()),
        fairness=_fairness(result, bsld),
        guarded=sum(1 for r in records if r.job.id in result.guarded),
    )


def _utilization(result: SimResult, t0: float, t1: float) -> float:
    """Time-weighted allocated GPUs over total GPUs in [t0, t1], counting warm-up jobs still running then."""
    if t1 <= t0:
        return 0.0
    busy = 0.0
    for r in (*result.background, *result.records):
        overlap = min(r.end, t1) - max(r.start, t0)
        if overlap > 0:
            busy += overlap * r.job.gpus
    return busy / (result.cluster.total_gpus * (t1 - t0))


def _fairness(result: SimResult, bsld: np.ndarray) -> float:
    owners = [r.job.user or r.job.account for r in result.records]
    by_owner: dict[str, list[float]] = {}
    for owner, value in zip(owners, bsld.tolist(), strict=True):
        by_owner.setdefault(owner, []).append(value)
    mean = float(bsld.mean())
    worst = max(sum(v) / len(v) for v in by_owner.values())
    return worst / mean if mean > 0 else 1.0
