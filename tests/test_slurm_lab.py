"""The local Slurm lab (scripts/slurm-lab) behaves like the paper's testbed: 2x4 P100, 2x2 K80, 1x1 M40."""

from __future__ import annotations

import contextlib
import json
import re
import socket
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.slurm_lab import SlurmLab, alive, lab_session

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


# Accounting: slurmdbd on the lab's own MariaDB (scripts/slurm-lab, SLURM_LAB_ACCOUNTING=1).

SACCT_FIELDS = ("JobID", "User", "Account", "Submit", "Start", "End", "NodeList", "AllocTRES", "State")


def sacct_row(lab: SlurmLab, job_id: int) -> dict[str, str]:
    """The job's allocation line of `sacct -X -P` ({} until slurmdbd has it)."""
    out = lab.run(["sacct", "-a", "-X", "-P", "-n", "-j", str(job_id), "-o", ",".join(SACCT_FIELDS)]).stdout
    rows = [dict(zip(SACCT_FIELDS, line.split("|"), strict=True)) for line in out.splitlines() if line]
    return rows[0] if rows else {}


def test_sacct_has_a_finished_job_with_its_times_nodes_and_gpus(clean_lab: SlurmLab) -> None:
    lab = clean_lab
    job_id = lab.sbatch("k80:1", minutes=1, user="alice", sleep=2)

    def completed() -> bool:  # the end reaches slurmdbd through slurmctld's agent, a moment later
        return sacct_row(lab, job_id).get("State") == "COMPLETED"

    lab.wait_for(completed, 30, f"sacct to show job {job_id} completed")
    row = sacct_row(lab, job_id)
    assert (row["User"], row["Account"]) == ("alice", "alpha")
    submit, start, end = (datetime.fromisoformat(row[k]) for k in ("Submit", "Start", "End"))
    assert submit <= start < end and (end - start).total_seconds() >= 2
    assert row["NodeList"] in ("k80-1", "k80-2")
    tres = dict(item.split("=", 1) for item in row["AllocTRES"].split(","))
    assert (tres["gres/gpu"], tres["gres/gpu:k80"], tres["node"]) == ("1", "1", "1")


def test_the_daemons_accounting_read_gives_a_finished_jobs_peer_group(clean_lab: SlurmLab) -> None:
    """psjf/psaf's input from the real sacct (the daemon's own argv and parser): the user and the GPUs
    the job held name its peer group, and its elapsed seconds are the group's last runtime."""
    import time

    from rltuned.slurm.cli_backend import CliAdapter
    from rltuned.slurm.history import history_from_slurm

    lab = clean_lab
    since = time.time() - 60.0
    job_id = lab.sbatch("k80:2", minutes=1, user="alice", sleep=2)
    lab.wait_for(lambda: sacct_row(lab, job_id).get("State") == "COMPLETED", 30, f"sacct to show {job_id}")
    read = CliAdapter(lab.conf, None, 10.0).read_history(since)
    recent = history_from_slurm(read.sshare, read.sacct).recent_runtimes
    row = sacct_row(lab, job_id)
    elapsed = (datetime.fromisoformat(row["End"]) - datetime.fromisoformat(row["Start"])).total_seconds()
    assert elapsed >= 2.0 and recent["alice", 2][-1] == elapsed  # the last to end in its group


def test_sshare_lists_the_lab_users_with_their_account_shares(slurm_lab: SlurmLab) -> None:
    argv = ["sshare", "-a", "-P", "-n", "-o", "Account,User,RawShares,RawUsage,FairShare"]
    out = slurm_lab.run(argv).stdout
    rows = [[cell.strip() for cell in line.split("|")] for line in out.splitlines()]
    accounts = {account: shares for account, user, shares, _, _ in rows if not user}
    users = {user: account for account, user, _, _, _ in rows if user}
    assert (accounts["alpha"], accounts["beta"]) == ("3", "1")  # SLURM_LAB_ACCOUNTS="alpha:3 beta:1"
    assert {u: users.get(u) for u in ("alice", "bob", "carol", "rltune")} == {
        "alice": "alpha", "bob": "beta", "carol": "alpha", "rltune": "alpha",
    }  # fmt: skip
    assert all(usage.isdigit() for _, user, _, usage, _ in rows if user)  # RawUsage, in TRES-seconds


def test_the_operator_may_set_a_pending_jobs_priority(clean_lab: SlurmLab) -> None:
    """`rltune` has AdminLevel=Operator in slurmdbd: what the daemon's unit runs as, not root."""
    lab = clean_lab
    admin = lab.run(["sacctmgr", "-n", "-P", "show", "user", "rltune", "format=admin"]).stdout.strip()
    assert admin == "Operator"
    fill_p100(lab)
    waiting = lab.sbatch("p100:2", user="bob")
    denied = lab.run(["scontrol", "update", f"jobid={waiting}", "priority=5000"], user="alice", check=False)
    assert denied.returncode != 0
    lab.run(["scontrol", "update", f"jobid={waiting}", "priority=4242"], user="rltune")
    assert (lab.job_field(waiting, "JobState"), lab.job_field(waiting, "Priority")) == ("PENDING", "4242")


def test_status_and_env_name_the_accounting_daemons(slurm_lab: SlurmLab) -> None:
    ports = json.loads((slurm_lab.dir / "ports.json").read_text())
    status = slurm_lab.script("status")
    assert status.returncode == 0, status.stderr
    dbd, db = ports["SLURM_LAB_DBD_PORT"], ports["SLURM_LAB_DB_PORT"]
    line = next(line for line in status.stdout.splitlines() if line.startswith("accounting:"))
    want = f"slurmdbd running on 127.0.0.1:{dbd}, answering; MariaDB running on 127.0.0.1:{db}"
    assert line == f"accounting: {want}"
    env = slurm_lab.script("env").stdout
    assert env.startswith(f"export SLURM_CONF={slurm_lab.conf}\n")
    assert f"slurmdbd on 127.0.0.1:{dbd}" in env and f"MariaDB on 127.0.0.1:{db}" in env


def _marked(lab_dir: Path) -> list[int]:
    """Processes whose environment carries the lab's marker (what `down` must leave none of)."""
    mark = f"RLTLAB_MARK={lab_dir}".encode()
    pids = []
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            with contextlib.suppress(OSError):
                if mark in (proc / "environ").read_bytes().split(b"\0"):
                    pids.append(int(proc.name))
    return pids


def _listening(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.slow
def test_a_lab_with_the_default_weights_adds_fairshare_and_down_leaves_nothing() -> None:
    """A second lab, with the script's own Age and FairShare weights (the session lab has them at 0):
    multifactor uses them, which it only does with slurmdbd. Then `down` stops MariaDB and slurmdbd too."""
    with lab_session(env={}) as lab:
        config = lab.run(["scontrol", "show", "config"]).stdout
        assert re.search(r"^PriorityWeightAge\s*=\s*1000$", config, re.M)
        assert re.search(r"^PriorityWeightFairShare\s*=\s*1000$", config, re.M)
        assert re.search(r"^AccountingStorageTRES\s*=.*gres/gpu", config, re.M)
        lab.run(["scontrol", "update", "PartitionName=main", "State=DOWN"])
        job_id = lab.sbatch("1", minutes=1, user="bob")
        fairshare = lab.run(["sprio", "-h", "-j", str(job_id), "-o", "%F"]).stdout.split()
        assert fairshare == ["1000"]  # no usage yet: factor 1.0 times the weight

        ports = json.loads((lab.dir / "ports.json").read_text())
        db_ports = [int(ports["SLURM_LAB_DBD_PORT"]), int(ports["SLURM_LAB_DB_PORT"])]
        daemons = [int((lab.dir / "run" / name).read_text()) for name in ("slurmdbd.pid", "mariadbd.pid")]
        assert all(_listening(port) for port in db_ports) and all(alive(pid) for pid in daemons)
        assert (lab.dir / "db" / "data" / "slurm_acct_db").is_dir()  # the datadir is the lab's own

        down = lab.script("down")
        assert down.returncode == 0, down.stderr
        assert not any(alive(pid) for pid in daemons)
        assert not any(_listening(port) for port in db_ports)
        assert _marked(lab.dir) == []
        assert not (lab.dir / "db" / "mysqld.sock").exists()
