"""Real against simulated, job by job: the figures of issue 16.

`kendall_tau` (tau-b, so ties count as Slurm's whole-second times make them) compares the start order;
`within_interval_share` the share of jobs the simulator starts within `interval_s` of the real start;
`same_gpu_type_share` and `same_nodes_share` where they ran. The worst disagreements are the jobs whose
simulated start is furthest from the real one.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy.stats import kendalltau

from rltuned.domain import ClusterSpec
from rltuned.fidelity.observed import Observed
from rltuned.sim.simulator import JobRecord


@dataclass(frozen=True, slots=True)
class Pair:
    """One job, as it ran and as simulated. Times are seconds after the workload's first submit."""

    job_id: str
    user: str
    gpus: int
    submit: float
    real_start: float
    sim_start: float
    real_nodes: tuple[str, ...]
    sim_nodes: tuple[str, ...]
    real_gpu_type: str
    sim_gpu_type: str

    @property
    def delta(self) -> float:
        return self.sim_start - self.real_start


@dataclass(frozen=True, slots=True)
class Both:
    real: float
    simulated: float


@dataclass(frozen=True, slots=True)
class Fidelity:
    jobs: int
    unsimulated: int
    """Jobs of the workload the simulated cluster could never run (dropped, e.g. no node that large)."""
    kendall_tau: float
    interval_s: float
    within_interval_share: float
    same_gpu_type_share: float | None
    same_nodes_share: float | None
    makespan_s: Both
    mean_wait_s: Both
    worst: tuple[Pair, ...]


def pairs(observed: Sequence[Observed], records: Sequence[JobRecord], cluster: ClusterSpec) -> list[Pair]:
    """Observed jobs matched to their simulated records (by job id), in submit order."""
    by_id = {r.job.id: r for r in records}
    origin = min((o.job.submit for o in observed), default=0.0)
    gpu_type = {n.name: n.gpu_type for n in cluster.nodes}
    out = []
    for o in observed:
        record = by_id.get(o.job.id)
        if record is None:
            continue
        sim_nodes = tuple(sorted(cluster.nodes[s.node].name for s in record.allocation))
        out.append(
            Pair(
                job_id=o.job.name,
                user=o.job.user,
                gpus=o.job.gpus,
                submit=o.job.submit - origin,
                real_start=o.start - origin,
                sim_start=record.start - origin,
                real_nodes=tuple(sorted(o.nodes)),
                sim_nodes=sim_nodes,
                real_gpu_type=_types(o.nodes, gpu_type),
                sim_gpu_type=_types(sim_nodes, gpu_type),
            )
        )
    return out


def compare(
    observed: Sequence[Observed],
    records: Sequence[JobRecord],
    cluster: ClusterSpec,
    interval_s: float,
    has_nodes: bool = True,
    worst: int = 10,
) -> Fidelity:
    return summarize(pairs(observed, records, cluster), observed, interval_s, has_nodes, worst)


def summarize(
    matched: Sequence[Pair],
    observed: Sequence[Observed],
    interval_s: float,
    has_nodes: bool = True,
    worst: int = 10,
) -> Fidelity:
    """The figures of `pairs(observed, ...)`; `observed` gives the runtimes and the unmatched count."""
    if len(matched) < 2:
        raise ValueError(f"expected at least 2 jobs the simulator ran, got {len(matched)}")
    real = [p.real_start for p in matched]
    sim = [p.sim_start for p in matched]
    tau = float(kendalltau(real, sim).statistic)
    n = len(matched)
    within = sum(abs(p.delta) <= interval_s + 1e-9 for p in matched) / n
    same_type = same_nodes = None
    if has_nodes:
        same_type = sum(p.real_gpu_type == p.sim_gpu_type for p in matched) / n
        same_nodes = sum(p.real_nodes == p.sim_nodes for p in matched) / n
    runtimes = {o.job.name: o.job.runtime or 0.0 for o in observed}
    ranked = sorted(matched, key=lambda p: (-abs(p.delta), p.submit))
    return Fidelity(
        jobs=n,
        unsimulated=len(observed) - n,
        kendall_tau=tau,
        interval_s=interval_s,
        within_interval_share=within,
        same_gpu_type_share=same_type,
        same_nodes_share=same_nodes,
        makespan_s=Both(
            max(p.real_start + runtimes[p.job_id] for p in matched),
            max(p.sim_start + runtimes[p.job_id] for p in matched),
        ),
        mean_wait_s=Both(
            statistics.fmean(p.real_start - p.submit for p in matched),
            statistics.fmean(p.sim_start - p.submit for p in matched),
        ),
        worst=tuple(ranked[:worst]),
    )


def _types(nodes: Sequence[str], gpu_type: dict[str, str]) -> str:
    return ",".join(sorted({gpu_type.get(n, "?") for n in nodes}))
