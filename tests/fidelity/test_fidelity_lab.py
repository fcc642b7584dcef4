"""`rltunectl fidelity --submit` on the real lab: a compressed Philly window runs on Slurm 22.05, once
alone and once with the daemon ticking in enforce mode, and the simulator's replay is compared with
what Slurm did (docs/fidelity.md has the figures on larger windows)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rltuned.daemon.config import load
from rltuned.fidelity.daemon_log import load_writes
from rltuned.fidelity.experiment import Experiment, run_on_slurm
from rltuned.fidelity.submit import Commands
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace
from tests.slurm_lab import SlurmLab, daemon_config

pytestmark = [pytest.mark.slurm, pytest.mark.slow]

WINDOW = slice(2000, 2030)
"""30 Philly jobs: contended on the lab's 13 GPUs once squeezed into 20 s."""


def _window() -> list:  # type: ignore[type-arg]
    return list(load_trace(resolve_trace("philly")).jobs[WINDOW])


def test_slurm_alone(clean_lab: SlurmLab, tmp_path: Path) -> None:
    exp = Experiment("main", ("alice", "bob", "carol"), span_s=20.0, interval_s=2.0)
    outcome = run_on_slurm(_window(), exp, tmp_path, Commands.real(clean_lab.conf))
    f = outcome.fidelity
    assert f.jobs == 30 and f.unsimulated == 0
    assert outcome.demand_ratio > 1.5  # contended: more GPU time asked than the lab has
    assert f.kendall_tau >= 0.9
    assert f.same_gpu_type_share is not None and f.same_gpu_type_share >= 0.6
    assert f.within_interval_share >= 0.5
    assert (tmp_path / "sacct.txt").is_file() and (tmp_path / "sinfo.json").is_file()
    assert "sched: Allocate" in (tmp_path / "slurmctld.log").read_text()  # millisecond times were used


def test_with_the_daemon_in_enforce_mode(clean_lab: SlurmLab, tmp_path: Path) -> None:
    config = daemon_config(tmp_path, clean_lab, apply__mode="enforce", policy__base="sjf")
    exp = Experiment("main", ("alice", "bob", "carol"), 20.0, 2.0, daemon_config=config, daemon=load(config))
    outcome = run_on_slurm(_window(), exp, tmp_path / "out", Commands.real(clean_lab.conf))
    f = outcome.fidelity
    assert f.jobs == 30 and f.unsimulated == 0
    assert f.kendall_tau >= 0.8
    log = tmp_path / "out" / "daemon.log"
    ticks = [line for line in log.read_text().splitlines() if re.search(r'"event": ?"tick"', line)]
    assert any(re.search(r'"result": ?"ok"', line) for line in ticks)
    # The daemon wrote to Slurm: its `job_updated` events name jobs of this workload.
    assert load_writes(log, {str(i): i for i in outcome.slurm_ids}).writes
    assert outcome.logged is not None and outcome.logged.kendall_tau >= 0.8  # its own writes replayed
