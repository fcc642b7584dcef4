"""`rltunectl fidelity --submit`, start to finish: submit a compressed window to a real Slurm (optionally
with the daemon ticking in enforce mode), wait, save what Slurm recorded, and compare it with the
simulator's replay of the same jobs."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from rltuned.daemon.config import Settings
from rltuned.domain import ClusterSpec, Job
from rltuned.errors import SlurmError, UsageError
from rltuned.fidelity.compare import Fidelity, Pair
from rltuned.fidelity.ctld_log import save_job_lines
from rltuned.fidelity.report import measure
from rltuned.fidelity.submit import (
    Commands,
    LabJob,
    compress,
    demand_ratio,
    save_slurm,
    submit_all,
    wait_finished,
)
from rltuned.slurm.config_check import parse_show_config
from rltuned.slurm.parse import parse_nodes

DAEMON_START_S = 3.0
"""How long the daemon gets to read Slurm and tick once before the first job goes in."""


@dataclass(frozen=True)
class Experiment:
    partition: str
    users: tuple[str, ...]
    span_s: float = 60.0
    interval_s: float = 2.0
    worst: int = 10
    daemon_config: Path | None = None
    daemon: Settings | None = None


@dataclass(frozen=True)
class Outcome:
    fidelity: Fidelity
    pairs: list[Pair]
    lab_jobs: list[LabJob]
    demand_ratio: float
    slurm_ids: list[int]
    out: Path
    logged: Fidelity | None = None
    """With the daemon: the replay of its logged writes at their times instead of deciding again."""


def run_on_slurm(window: Sequence[Job], exp: Experiment, out: Path, commands: Commands) -> Outcome:
    if exp.daemon is not None and exp.daemon.apply.mode != "enforce":
        raise UsageError(f"--daemon-config {exp.daemon_config}: apply.mode must be enforce to measure it")
    cluster = _partition(parse_nodes(commands.run(["sinfo", "--json"])).cluster, exp.partition)
    lab_jobs = compress(window, exp.users, max(n.gpus for n in cluster.nodes), exp.span_s)
    daemon = _start_daemon(exp.daemon_config, out) if exp.daemon_config is not None else None
    try:
        ids = submit_all(lab_jobs, exp.partition, commands)
        longest = max(j.offset_s for j in lab_jobs) + sum(j.runtime_s * j.gpus for j in lab_jobs)
        text = wait_finished(ids, commands, timeout_s=longest + 120.0)
    finally:
        if daemon is not None:
            _stop(daemon)
    sacct, config, sinfo = save_slurm(out, text, commands)
    from rltuned.clusters import load_cluster

    spec = load_cluster(str(sinfo))
    ctld = _ctld_lines(config, ids, out)
    decided = measure(sacct, spec, config, None, exp.interval_s, exp.worst, exp.daemon, ctld_log=ctld)
    logged = None
    if daemon is not None:
        logged = measure(
            sacct, spec, config, None, exp.interval_s, exp.worst, daemon_log=out / "daemon.log", ctld_log=ctld
        )
    total = sum(n.gpus for n in cluster.nodes)
    return Outcome(
        decided.fidelity, decided.pairs, lab_jobs, demand_ratio(lab_jobs, total), ids, out,
        logged.fidelity if logged else None,
    )  # fmt: skip


def _ctld_lines(config: Path, ids: Sequence[int], out: Path) -> Path | None:
    """slurmctld's lines for these jobs (millisecond times, `ctld_log.py`) when its log is readable here."""
    log = parse_show_config(config.read_text(encoding="utf-8")).get("SlurmctldLogFile", "")
    saved = out / "slurmctld.log"
    if log and log != "(null)" and save_job_lines(Path(log), ids, saved):
        return saved
    return None


def _partition(cluster: ClusterSpec, partition: str) -> ClusterSpec:
    nodes = tuple(n for n in cluster.nodes if not n.partition or partition in n.partition.split(","))
    if not nodes:
        raise UsageError(f"partition {partition!r} has no nodes in sinfo")
    return ClusterSpec(cluster.name, nodes, cluster.slots)


def _start_daemon(config: Path, out: Path) -> subprocess.Popen[bytes]:
    out.mkdir(parents=True, exist_ok=True)
    log = (out / "daemon.log").open("wb")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltuned.daemon_cli", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    time.sleep(DAEMON_START_S)
    if proc.poll() is not None:
        raise SlurmError(f"the daemon exited with {proc.returncode} at start; see {out / 'daemon.log'}")
    return proc


def _stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
