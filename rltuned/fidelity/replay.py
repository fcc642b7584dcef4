"""A finished workload replayed in the simulator's Slurm (`sim/slurm.py`), with the cluster's own
scheduler and priority settings, each job with its real submit time, time limit, request shape and
runtime.

Settings come from a saved `scontrol show config` (`--slurm-config`); `--scheduler-params` overrides its
SchedulerParameters. Without a saved config the priorities are Slurm 22.05's default `priority/basic`
(every job equal, so submit order) and the scheduler's parameters are Slurm's defaults.
With the daemon's config (`--daemon-config`, enforce mode), the replay runs the daemon's loop over it
(`sim/ticks.py`): its base policy, model, levers and tick interval, as `rltunectl train` and `evaluate` do.
With the daemon's log instead (`--daemon-log`), its accepted writes are applied at their logged times and
nothing is decided again (`daemon_log.py`).
Memory binds only where `SelectTypeParameters` makes it a consumable resource (`CR_*_Memory`); otherwise
sacct's memory figure is what the job could touch, not what it held, and is dropped.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from rltuned.core.levers import Action
from rltuned.daemon.config import Settings
from rltuned.domain import ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.fidelity.observed import Workload
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.simulator import SimResult
from rltuned.sim.slurm import SlurmParams, SlurmRun
from rltuned.sim.slurm_config import params_from_config
from rltuned.slurm.config_check import parse_show_config

BASIC = Multifactor(weight_age=0, weight_fairshare=0, weight_job_size=0, weight_partition=0)
"""priority/basic: every job the same priority, so Slurm's order is submit order (then job id)."""


def slurm_settings(slurm_config: Path | None, scheduler_params: str | None) -> tuple[SlurmParams, bool]:
    """The simulator's Slurm parameters, and whether memory is a consumable resource."""
    config: dict[str, str] = {}
    where = "--scheduler-params"
    if slurm_config is not None:
        try:
            config = parse_show_config(slurm_config.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"--slurm-config {slurm_config}: {exc.strerror}") from None
        where = str(slurm_config)
    if scheduler_params is not None:
        config["SchedulerParameters"] = scheduler_params
    params = params_from_config(config, where)
    if config.get("PriorityType", "priority/basic") != "priority/multifactor":
        params = replace(params, priority=BASIC)
    memory = "MEMORY" in config.get("SelectTypeParameters", "").upper()
    return params, memory


def replay(
    workload: Workload,
    cluster: ClusterSpec,
    params: SlurmParams,
    memory: bool,
    daemon: Settings | None = None,
    writes: Sequence[tuple[float, Action]] | None = None,
) -> SimResult:
    jobs = [o.job if memory else _without_memory(o.job) for o in workload.jobs]
    if writes is not None:
        return SlurmRun(cluster, jobs, params=params, writes=writes).run()
    if daemon is None or daemon.apply.mode != "enforce":  # a shadow daemon writes nothing
        return SlurmRun(cluster, jobs, params=params).run()
    from rltuned.rl.export import load_model
    from rltuned.sim.ticks import TickSettings, run_ticks

    a = daemon.apply
    settings = TickSettings(
        daemon.policy.base, daemon.daemon.interval_s, daemon.core(), params,
        daemon.slurm.history_interval_s, a.writes_per_s, a.write_burst,
    )  # fmt: skip
    model = load_model(daemon.policy.model, daemon.policy.engine) if daemon.policy.model is not None else None
    return run_ticks(cluster, jobs, 0, settings, model)


def _without_memory(job: Job) -> Job:
    return replace(job, mem_mb=0) if job.mem_mb else job
