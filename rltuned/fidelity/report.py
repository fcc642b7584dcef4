"""`rltunectl fidelity --sacct`: load, replay, compare, and say it as text or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rltuned.daemon.config import Settings
from rltuned.domain import ClusterSpec
from rltuned.fidelity.compare import Fidelity, Pair, pairs, summarize
from rltuned.fidelity.ctld_log import BackgroundLoop, fit_background, load_ctld_log, refine
from rltuned.fidelity.daemon_log import LoggedWrites, load_writes
from rltuned.fidelity.observed import load_sacct
from rltuned.fidelity.replay import replay, slurm_settings
from rltuned.sim.slurm import SlurmParams


@dataclass(frozen=True)
class Measured:
    fidelity: Fidelity
    pairs: list[Pair]
    params: SlurmParams
    writes: LoggedWrites | None
    """The daemon's logged writes the replay applied (`daemon_log`), when it was given."""
    whole_seconds: int | None = None
    """With slurmctld's log: jobs it did not time, which kept sacct's whole seconds."""
    background: BackgroundLoop | None = None
    """With slurmctld's log: the background loop's grid fitted from it, which the replay followed."""


def measure(
    sacct: Path,
    cluster: ClusterSpec,
    slurm_config: Path | None,
    scheduler_params: str | None,
    interval_s: float,
    worst: int = 10,
    daemon: Settings | None = None,
    daemon_log: Path | None = None,
    ctld_log: Path | None = None,
) -> Measured:
    workload = load_sacct(sacct)
    whole_seconds = background = None
    params, memory = slurm_settings(slurm_config, scheduler_params)
    if ctld_log is not None:
        times = load_ctld_log(ctld_log)
        workload, whole_seconds = refine(workload, times)
        background = fit_background(times) if params.event_pass == "background" else None
        if background is not None:
            params = replace(params, background_s=background.period_s, background_phase_s=background.phase_s)
    writes = None
    if daemon_log is not None:
        writes = load_writes(daemon_log, {o.job.name: o.job.id for o in workload.jobs})
    result = replay(workload, cluster, params, memory, daemon, writes.writes if writes else None)
    matched = pairs(workload.jobs, result.records, result.cluster)
    fidelity = summarize(matched, workload.jobs, interval_s, workload.has_nodes, worst)
    return Measured(fidelity, matched, params, writes, whole_seconds, background)


def as_json(fidelity: Fidelity) -> dict[str, Any]:
    body = asdict(fidelity)
    body["worst"] = [{**asdict(p), "delta_s": p.delta} for p in fidelity.worst]
    return body


def render(fidelity: Fidelity) -> str:
    f = fidelity
    lines = [
        f"jobs                  {f.jobs}" + (f" (+{f.unsimulated} it cannot run)" if f.unsimulated else ""),
        f"kendall_tau           {f.kendall_tau:.3f}",
        f"within_interval_share {f.within_interval_share:.1%} (start within {f.interval_s:g} s)",
        f"same_gpu_type_share   {_share(f.same_gpu_type_share)}",
        f"same_nodes_share      {_share(f.same_nodes_share)}",
        f"makespan_s            real {f.makespan_s.real:.0f}  simulated {f.makespan_s.simulated:.0f}",
        f"mean_wait_s           real {f.mean_wait_s.real:.1f}  simulated {f.mean_wait_s.simulated:.1f}",
        "worst disagreements (seconds after the first submit):",
        f"  {'job':>8} {'user':>8} {'gpus':>4} {'submit':>7} {'real':>7} {'sim':>7} {'delta':>7}"
        "  real nodes -> simulated",
    ]  # fmt: skip
    for p in f.worst:
        lines.append(
            f"  {p.job_id:>8} {p.user:>8} {p.gpus:>4} {p.submit:>7.0f} {p.real_start:>7.0f}"
            f" {p.sim_start:>7.0f} {p.delta:>+7.0f}"
            f"  {','.join(p.real_nodes) or '-'} -> {','.join(p.sim_nodes)}"
        )
    return "\n".join(lines)


def _share(value: float | None) -> str:
    return "n/a (no NodeList column)" if value is None else f"{value:.1%}"
