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

import pytest

from rltuned.policies.multifactor import Multifactor
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
