"""The local Slurm lab (scripts/slurm-lab) behaves like the paper's testbed: 2x4 P100, 2x2 K80, 1x1 M40."""

from __future__ import annotations

from typing import Any

import pytest

from tests.slurm_lab import SlurmLab

pytestmark = pytest.mark.slurm

GRES = {
    "p100-1": "gpu:p100:4",
    "p100-2": "gpu:p100:4",
    "k80-1": "gpu:k80:2",
    "k80-2": "gpu:k80:2",
    "m40-1": "gpu:m40:1",
}


ACTIVE = {"PENDING", "CONFIGURING", "RUNNING", "COMPLETING", "SUSPENDED"}


def jobs_by_id(lab: SlurmLab) -> dict[int, dict[str, Any]]:
    """Active jobs from squeue --json, which also lists finished ones (for MinJobAge, 300 s)."""
    return {job["job_id"]: job for job in lab.squeue_json()["jobs"] if job["job_state"] in ACTIVE}


def fill_p100(lab: SlurmLab) -> list[int]:
    """Hold all 8 P100s with two running jobs."""
    ids = [lab.sbatch("p100:4") for _ in range(2)]
    for job_id in ids:
        lab.wait_state(job_id, "RUNNING")
    return ids


def test_all_nodes_idle_with_gres(clean_lab: SlurmLab) -> None:
    clean_lab.wait_idle()
    nodes = clean_lab.sinfo_json()["nodes"]
    assert {node["name"]: node["gres"] for node in nodes} == GRES
    assert {node["state"] for node in nodes} == {"idle"}
    assert {p for node in nodes for p in node["partitions"]} == {"main", "sla"}


def test_typed_job_runs_on_p100(clean_lab: SlurmLab) -> None:
    job_id = clean_lab.sbatch("p100:2")
    clean_lab.wait_state(job_id, "RUNNING")
    job = jobs_by_id(clean_lab)[job_id]
    assert job["nodes"] in ("p100-1", "p100-2")
    assert job["tres_per_node"] == "gres:gpu:p100:2"
    assert len(job["gres_detail"]) == 1
    assert job["gres_detail"][0].startswith("gpu:p100:2(IDX:")


def test_more_jobs_than_gpus_leaves_some_pending(clean_lab: SlurmLab) -> None:
    running = fill_p100(clean_lab)
    waiting = clean_lab.sbatch("p100:4")
    jobs = jobs_by_id(clean_lab)
    assert [jobs[i]["job_state"] for i in running] == ["RUNNING", "RUNNING"]
    assert jobs[waiting]["job_state"] == "PENDING"
    assert clean_lab.job_field(waiting, "JobState") == "PENDING"


def test_job_submitted_as_alice(clean_lab: SlurmLab) -> None:
    job_id = clean_lab.sbatch("k80:1", user="alice", partition="sla")
    job = jobs_by_id(clean_lab)[job_id]
    assert job["user_name"] == "alice"
    assert job["partition"] == "sla"


def test_admin_priority_on_pending_job(clean_lab: SlurmLab) -> None:
    fill_p100(clean_lab)
    waiting = clean_lab.sbatch("p100:2", user="bob")
    assert jobs_by_id(clean_lab)[waiting]["priority"] == 1000  # PriorityWeightPartition, no other factor
    clean_lab.run(["scontrol", "update", f"jobid={waiting}", "priority=4242"])
    job = jobs_by_id(clean_lab)[waiting]
    assert (job["job_state"], job["priority"]) == ("PENDING", 4242)
    assert clean_lab.job_field(waiting, "Priority") == "4242"


def test_controller_restart_keeps_queue(clean_lab: SlurmLab) -> None:
    running = fill_p100(clean_lab)
    waiting = clean_lab.sbatch("p100:1", user="carol")
    clean_lab.stop_controller()
    # scontrol ping answers at once; squeue would retry for about 9 s before failing.
    assert clean_lab.run(["scontrol", "ping"], check=False).returncode != 0
    clean_lab.start_controller()
    jobs = jobs_by_id(clean_lab)
    assert sorted(jobs) == sorted([*running, waiting])
    assert [jobs[i]["job_state"] for i in running] == ["RUNNING", "RUNNING"]
    assert (jobs[waiting]["job_state"], jobs[waiting]["user_name"]) == ("PENDING", "carol")
