"""Multifactor's SMALL_RELATIVE_TO_TIME job size against the real Slurm 22.05 lab: what `sprio` shows is
what `policies/multifactor.py` computes on the snapshot the daemon reads.

The lab has 5 nodes with 40 CPUs and 13 GPUs. Slurm sizes a job in CPUs, at least its nodes times an
average node (8 CPUs); the model sizes it in GPUs, at least its nodes times an average node (2.6 GPUs).
For the jobs here (one CPU per task, at most an average node's GPUs per node) both give
nodes / (5 x limit in minutes). A job wider than an average node in GPUs but not in CPUs is where the
two differ (docs/simulator.md).
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from rltuned import tuning
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.slurm_config import max_age_as_kept, params_from_config
from rltuned.slurm.config_check import parse_show_config
from rltuned.slurm.parse import snapshot_from_slurm
from tests.slurm_lab import SlurmLab

pytestmark = pytest.mark.slurm
WEIGHT = 1_000_000


def sprio_job_size(lab: SlurmLab) -> dict[int, int]:
    out = lab.run(["sprio", "-h", "-o", "%i %J"]).stdout
    return {int(job): int(float(size)) for job, size in (line.split() for line in out.splitlines())}


def test_small_relative_to_time_is_the_size_slurm_gives(clean_lab: SlurmLab) -> None:
    lab = clean_lab
    settings = {"PriorityWeightJobSize": str(WEIGHT), "PriorityFlags": "SMALL_RELATIVE_TO_TIME"}
    with lab.reconfigured(**settings):
        lab.run(["scontrol", "update", "PartitionName=main", "State=DOWN"])  # everything pends
        try:
            jobs = {
                lab.sbatch("1", minutes=1, user="alice"): 1 / 5,
                lab.sbatch("1", minutes=7, user="bob"): 1 / 35,
                lab.sbatch("2", minutes=7, user="carol"): 1 / 35,
                lab.sbatch("k80:2", minutes=600, user="alice"): 1 / 3000,
                lab.sbatch("1", minutes=7, user="bob", extra=["-N", "2"]): 2 / 35,
            }
            shown = sprio_job_size(lab)
            snapshot, _ = snapshot_from_slurm(lab.squeue_json(), lab.sinfo_json(), time.time())
        finally:
            lab.run(["scontrol", "update", "PartitionName=main", "State=UP"])
    model = Multifactor(weight_job_size=WEIGHT, size_relative=True)
    ctx = snapshot.context
    computed = {job.id: model.explain(job, ctx)["job_size"] for job in snapshot.pending}
    assert sorted(computed) == sorted(jobs)
    for job_id, factor in jobs.items():
        assert computed[job_id] == pytest.approx(WEIGHT * factor)  # the formula, worked by hand
        assert abs(shown[job_id] - computed[job_id]) <= 1, (job_id, shown, computed)  # sprio rounds


def test_the_tuned_slurm_conf_lines_are_what_slurm_reads_back(clean_lab: SlurmLab) -> None:
    """`rltunectl tune` prints slurm.conf lines for the admin to paste: Slurm 22.05 takes them at
    `scontrol reconfigure`, and its `scontrol show config` gives back the very weights (GPU TRES,
    favor-small and a max age in days-hours:minutes:seconds included). Slurm keeps the age in whole
    minutes, rounded up (3-01:01:01 reads back as 3-01:02:00): the lines give it so, and a search
    simulates only such ages (`sim/slurm_config.max_age_as_kept`)."""
    weights = Multifactor(weight_age=17, weight_fairshare=0, weight_job_size=9999, weight_partition=1000,
                          weight_tres_gpu=250, favor_small=True, max_age_s=3 * 86400 + 3661)  # fmt: skip
    lines = dict(line.split("=", 1) for line in tuning.slurm_conf_lines(weights))
    with clean_lab.reconfigured(**lines):
        shown = parse_show_config(clean_lab.run(["scontrol", "show", "config"]).stdout)
    kept = replace(weights, max_age_s=max_age_as_kept(weights.max_age_s))
    assert kept.max_age_s == 3 * 86400 + 3720
    assert params_from_config(shown).priority == kept
    # Slurm's own rounding, on a printed age that is not whole minutes:
    with clean_lab.reconfigured(PriorityMaxAge="3-01:01:01"):
        shown = parse_show_config(clean_lab.run(["scontrol", "show", "config"]).stdout)
    assert params_from_config(shown).priority.max_age_s == max_age_as_kept(3 * 86400 + 3661)
