"""The daemon against the real local Slurm 22.05 lab (scripts/slurm-lab): reads, plans, writes, resets.

The lab has p100-[1-2] (4 GPUs), k80-[1-2] (2) and m40-1 (1), partitions `main` and `sla`, and
multifactor priorities of 1000 for every new job, so without rltuned Slurm runs pending jobs FIFO. The
tests rank with SJF (or the shipped model) so that the plan's order differs from Slurm's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.request
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.slurm_lab import SlurmLab, daemon_config

pytestmark = pytest.mark.slurm
REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "philly-sjf-bsld"


def config(tmp_path: Path, lab: SlurmLab, **overrides: Any) -> Path:
    return daemon_config(tmp_path, lab, **overrides)


def cli(*argv: str, module: str = "rltuned.daemon_cli") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", module, *argv], capture_output=True, text=True, timeout=120, check=False
    )


def pending_priorities(lab: SlurmLab) -> dict[int, int]:
    return {j["job_id"]: j["priority"] for j in lab.squeue_json()["jobs"] if j["job_state"] == "PENDING"}


def fill_cluster(lab: SlurmLab) -> list[int]:
    """Blockers on every GPU, so that everything submitted next pends."""
    ids = [lab.sbatch(g, minutes=30, user="carol") for g in ("p100:4", "p100:4", "k80:2", "k80:2", "m40:1")]
    for job_id in ids:
        lab.wait_state(job_id, "RUNNING")
    return ids


def queue_for_sjf(lab: SlurmLab) -> list[int]:
    """2-GPU jobs, typed (p100) and untyped, each submitted later but shorter, so SJF reverses FIFO; then
    a 1-GPU K80 job and an 8-GPU job over both P100 nodes, both long, so SJF ranks them last."""
    users = ["alice", "bob", "carol", "alice", "bob", "carol"]
    gres = ["p100:2", "2", "p100:2", "p100:2", "2", "p100:2"]
    ids = [
        lab.sbatch(g, minutes=60 - 5 * i, user=u) for i, (g, u) in enumerate(zip(gres, users, strict=True))
    ]
    ids.append(lab.sbatch("k80:1", minutes=90, user="bob"))
    ids.append(lab.sbatch("p100:4", minutes=120, user="alice", extra=["-N", "2"]))
    return ids


def plan_json(path: Path) -> list[dict[str, Any]]:
    proc = cli("plan", "--config", str(path), "--json", module="rltuned.cli")
    assert proc.returncode == 0, proc.stderr
    rows: list[dict[str, Any]] = json.loads(proc.stdout)["rows"]
    return rows


def test_enforce_tick_sets_the_plans_priorities_and_slurm_follows_them(
    clean_lab: SlurmLab, tmp_path: Path
) -> None:
    lab = clean_lab
    blockers = fill_cluster(lab)
    managed = queue_for_sjf(lab)
    exempt = lab.sbatch("p100:1", minutes=5, user="bob", partition="sla")
    held = lab.sbatch("k80:1", minutes=5, user="alice")
    lab.run(["scontrol", "hold", str(held)])
    before = pending_priorities(lab)
    path = config(tmp_path, lab)

    proc = cli("--config", str(path), "--once", "--mode", "enforce")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["managed"] == len(managed)
    assert summary["left_alone"] == {"exempt_partition": 1, "held": 1}
    assert summary["actions_applied"] == len(managed) and summary["actions_failed"] == 0

    after = pending_priorities(lab)
    rows = plan_json(path)  # what a next tick would do: nothing, since Slurm already matches
    sjf = managed[5::-1] + managed[6:]  # SJF: the last submitted 2-GPU job is the shortest
    assert [r["job"] for r in rows] == sjf
    assert all(r["priority_now"] == r["target"] and r["actions"] == "" for r in rows)
    assert [after[j] for j in sjf] == sorted((after[j] for j in managed), reverse=True)
    for untouched in (exempt, held):
        assert after[untouched] == before[untouched]
    assert lab.job_field(held, "Reason") == "JobHeldAdmin"

    lab.run(["scancel", str(blockers[0])])  # frees 4 P100s: room for the plan's two best 2-GPU jobs
    for job_id in sjf[:2]:
        lab.wait_state(job_id, "RUNNING", timeout=20)
    for job_id in sjf[2:]:
        assert lab.job_field(job_id, "JobState") == "PENDING"  # FIFO would have started managed[0:2]


def test_jobs_slurm_must_handle_itself_are_left_alone(clean_lab: SlurmLab, tmp_path: Path) -> None:
    """Dependencies, begin times, unsplit arrays, heterogeneous jobs and reservations, as the real 22.05
    reports them: counted under their reason, and never written to in enforce mode."""
    lab = clean_lab
    blockers = fill_cluster(lab)
    managed = queue_for_sjf(lab)
    left = {
        lab.sbatch("p100:1", minutes=5, user="bob", extra=[f"--dependency=afterok:{blockers[0]}"]),
        lab.sbatch("1", minutes=5, user="alice", extra=["--begin=now+3600"]),
        lab.sbatch("k80:1", minutes=5, user="carol", extra=["--array=0-3"]),
    }
    lab.run(["scontrol", "create", "reservation", "ReservationName=rltuned-test", "StartTime=now",
             "Duration=60", "Nodes=p100-1", "Users=alice", "Flags=IGNORE_JOBS"])  # fmt: skip
    try:
        left.add(lab.sbatch("p100:4", minutes=5, user="alice", extra=["--reservation=rltuned-test"]))
        het_argv = ["sbatch", "--parsable", "-t", "5", "-o", "/dev/null", "--gres=gpu:p100:4"]
        het_argv += ["--wrap", "sleep 60", ":", "--gres=gpu:k80:2", "--wrap", "sleep 60"]
        het = lab.run(het_argv)
        het_id = int(het.stdout.strip().split(";")[0])
        before = {j["job_id"]: j["priority"] for j in lab.squeue_json()["jobs"]}
        proc = cli("--config", str(config(tmp_path, lab)), "--once", "--mode", "enforce")
        assert proc.returncode == 0, proc.stderr
        summary = json.loads(proc.stdout)
        assert summary["managed"] == len(managed) and summary["actions_failed"] == 0
        assert summary["left_alone"] == {
            "dependency": 2,  # the dependency and the begin time
            "array_unsplit": 1,
            "heterogeneous": 2,  # both components
            "reservation": 1,
        }
        after = {j["job_id"]: j["priority"] for j in lab.squeue_json()["jobs"]}
        untouched = [j for j in after if j in left or j == het_id or j not in managed]
        assert untouched and all(after[j] == before[j] for j in untouched)
        assert any(after[j] != before[j] for j in managed)
    finally:
        lab.cancel_all()
        lab.run(["scontrol", "delete", "ReservationName=rltuned-test"])


def test_a_job_that_ends_between_read_and_write_is_counted_gone(clean_lab: SlurmLab, tmp_path: Path) -> None:
    """Slurm 22.05's own message for a finished job ('Job has already finished') is recognized."""
    from rltuned.daemon.config import load
    from rltuned.daemon.engine import Engine
    from rltuned.daemon.ledger import Ledger
    from rltuned.slurm.cli_backend import CliAdapter

    lab = clean_lab
    fill_cluster(lab)
    managed = queue_for_sjf(lab)
    settings = load(config(tmp_path, lab))
    engine = Engine(settings, CliAdapter(lab.conf, None, 3.0), None, Ledger.in_dir(tmp_path / "state"))
    plan = engine.decide(engine.read()).plan
    assert len(plan.actions) == len(managed)
    gone = plan.actions[0].job_id
    lab.run(["scancel", str(gone)])
    lab.wait_state(gone, "CANCELLED")
    counts = engine.apply(plan)
    assert counts == {"priority:gone": 1, "priority:ok": len(managed) - 1}
    assert gone not in dict(engine.ledger.items())


def test_shadow_mode_changes_nothing(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_cluster(lab)
    queue_for_sjf(lab)
    before = pending_priorities(lab)
    proc = cli("--config", str(config(tmp_path, lab)), "--once")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["mode"] == "shadow" and summary["planned_actions"] == len(before)
    assert summary["actions_applied"] == 0
    assert pending_priorities(lab) == before


def test_reset_restores_multifactors_own_priorities(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_cluster(lab)
    managed = queue_for_sjf(lab)
    before = pending_priorities(lab)
    path = config(tmp_path, lab)
    assert cli("--config", str(path), "--once", "--mode", "enforce").returncode == 0
    assert pending_priorities(lab) != before
    proc = cli("reset", "--config", str(path), module="rltuned.cli")
    assert proc.returncode == 0, proc.stderr
    assert pending_priorities(lab) == before
    assert all(lab.job_field(j, "Reason") != "JobHeldAdmin" for j in managed)  # released again


def sprio_site(lab: SlurmLab) -> dict[int, int]:
    """Each pending job's SiteFactor as multifactor adds it (`sprio`'s SITE column)."""
    out = lab.run(["sprio", "-h", "-o", "%i %S"]).stdout
    return {int(job): int(site) for job, site in (line.split() for line in out.splitlines())}


def planned_gpu_type(row: dict[str, Any]) -> str:
    """The GPU model of the node a plan row places its job on ("k80-1 (spread)" -> "k80")."""
    return str(row["placement"]).split()[0].split(",")[0].rsplit("-", 1)[0]


def test_site_factor_and_placement_levers_reach_slurm_and_reset_undoes_them(
    clean_lab: SlurmLab, tmp_path: Path
) -> None:
    """With the partition down, jobs pend on an idle cluster, so the solver places every one of them:
    SiteFactor, OverSubscribe and ExcNodeList are all written, checked in Slurm, undone, and obeyed."""
    from rltuned.slurm.hostlist import expand

    lab = clean_lab
    lab.run(["scontrol", "update", "PartitionName=main", "State=DOWN"])
    try:
        untyped = [lab.sbatch("2", minutes=10, user="alice"), lab.sbatch("1", minutes=3, user="carol")]
        typed = [lab.sbatch("p100:1", minutes=5, user="bob"), lab.sbatch("k80:2", minutes=20, user="alice")]
        own = lab.sbatch("m40:1", minutes=7, user="bob", extra=["--oversubscribe"])  # OverSubscribe=YES
        typed.append(own)
        managed = untyped + typed
        path = config(tmp_path, lab, apply__lever="site_factor", placement__oversubscribe=True)
        proc = cli("--config", str(path), "--once", "--mode", "enforce")
        assert proc.returncode == 0, proc.stderr
        summary = json.loads(proc.stdout)
        assert summary["managed"] == len(managed) and summary["actions_failed"] == 0
        assert summary["placed"] == len(managed)
        rows = {r["job"]: r for r in plan_json(path)}
        assert sorted(rows) == sorted(managed)
        assert all(r["actions"] == "" for r in rows.values())  # Slurm now matches the plan
        site = sprio_site(lab)
        for job in managed:
            assert site[job] == rows[job]["target"] > 0
            pack = str(rows[job]["placement"]).endswith("(pack)")
            assert lab.job_field(job, "OverSubscribe") == ("YES" if pack else "NO")
        for job in untyped:
            gpu_type = planned_gpu_type(rows[job])
            assert set(expand(lab.job_field(job, "ExcNodeList"))) == {
                n for n in lab.nodes if not n.startswith(gpu_type + "-")
            }
        for job in typed:  # typed jobs are never steered: their GPU model already says where
            assert lab.job_field(job, "ExcNodeList") == "(null)"

        proc = cli("reset", "--config", str(path), module="rltuned.cli")
        assert proc.returncode == 0, proc.stderr
        assert all(sprio_site(lab)[job] == 0 for job in managed)
        assert all(lab.job_field(job, "ExcNodeList") == "(null)" for job in untyped)
        # Each job's own OverSubscribe is back (never set cannot be restored: NO, the partition default).
        assert {job: lab.job_field(job, "OverSubscribe") for job in managed} == {
            job: "YES" if job == own else "NO" for job in managed
        }

        # Steer again, then let Slurm schedule: each untyped job runs on the GPU model the plan chose.
        assert cli("--config", str(path), "--once", "--mode", "enforce").returncode == 0
        rows = {r["job"]: r for r in plan_json(path)}
        lab.run(["scontrol", "update", "PartitionName=main", "State=UP"])
        for job in untyped:
            lab.wait_state(job, "RUNNING", timeout=30)
            assert lab.job_field(job, "NodeList").startswith(planned_gpu_type(rows[job]) + "-")
    finally:
        lab.run(["scontrol", "update", "PartitionName=main", "State=UP"])


def _scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        body: bytes = response.read()
    return body.decode()


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " ") or line.startswith(name + "{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{name} not exported")


def test_the_daemon_runs_ticks_survives_a_slurmctld_restart_and_exports_metrics(
    clean_lab: SlurmLab, tmp_path: Path
) -> None:
    lab = clean_lab
    fill_cluster(lab)
    queue_for_sjf(lab)
    path = config(
        tmp_path,
        lab,
        metrics__enabled=True,
        metrics__port=0,
        policy__model=str(MODEL),
        daemon__backoff_max_s=60.0,
    )
    log = (tmp_path / "daemon.log").open("w+")
    daemon = subprocess.Popen(
        [sys.executable, "-m", "rltuned.daemon_cli", "--config", str(path), "--mode", "enforce"],
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "NOTIFY_SOCKET": ""},
    )
    try:
        events = _wait_for(log, lambda e: e.get("event") == "tick" and e.get("result") == "ok", 30)
        port = next(e["port"] for e in events if e.get("event") == "metrics_listening")
        lab.stop_controller()
        events = _wait_for(log, lambda e: e.get("event") == "tick" and e.get("result") == "error", 30)
        first = min(e["tick"] for e in events if e.get("event") == "tick" and e.get("result") == "error")
        # Four failed reads in a row: the wait between full reads is now 8 s and growing (up to 60 s).
        _wait_for(log, lambda e: e.get("event") == "tick" and e.get("tick", 0) >= first + 3, 60)
        lab.start_controller()
        restarted = time.monotonic()
        _wait_for(log, lambda e: e.get("event") == "tick" and e.get("result") == "ok", 30, after_error=True)
        assert time.monotonic() - restarted < 4  # the 1 s ping ends the backoff: within one interval + a read
        text = _scrape(port)
        assert _metric(text, 'rltuned_ticks_total{result="error"}') >= 1
        assert _metric(text, 'rltuned_ticks_total{result="ok"}') >= 2
        assert _metric(text, "rltuned_slurmctld_up") == 1
        assert _metric(text, "rltuned_pending_jobs") == 8
        assert _metric(text, 'rltuned_partition_managed_jobs{partition="main"}') == 8
        assert 'rltuned_model_info{base_policy="sjf"' in text
        assert _metric(text, 'rltuned_actions_total{kind="priority",result="ok"}') >= 8  # every job once
        assert _metric(text, 'rltuned_tick_duration_seconds_count{stage="apply"}') >= 1
        assert _metric(text, 'rltuned_solver_outcomes_total{outcome="idle"}') >= 1  # all GPUs busy
        assert _metric(text, "rltuned_last_successful_tick_timestamp_seconds") > time.time() - 30
    finally:
        daemon.terminate()
        code = daemon.wait(timeout=60)
        log.close()
    assert code == 0
    lines = (tmp_path / "daemon.log").read_text().splitlines()
    assert any(json.loads(line).get("event") == "stopped" for line in lines)
    assert not any("Traceback" in line for line in lines)
    records = [json.loads(line) for line in lines if line.startswith("{")]
    names = [r.get("event") for r in records]
    first_ok = next(r for r in records if r.get("event") == "tick" and r.get("result") == "ok")
    assert first_ok["pending"] == 8 and first_ok["managed"] == 8 and first_ok["exempt"] == 0
    assert first_ok["ranked_by"] == "model" and first_ok["fallback"] is None
    assert first_ok["actions_applied"] == 8 and first_ok["actions_failed"] == 0
    assert {"snapshot", "features", "policy", "solver", "apply", "total"} <= set(first_ok["latency_ms"])
    assert "slurm_config_unread" not in names  # `scontrol show config` was read ...
    assert "slurm_priority_setting" not in names  # ... and the lab's multifactor setup needs no warning


def _wait_for(log: Any, match: Any, timeout: float, after_error: bool = False) -> list[dict[str, Any]]:
    """Poll the daemon's JSON log until an event matches (after the last error event, if asked)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log.flush()
        events = [
            json.loads(line) for line in Path(log.name).read_text().splitlines() if line.startswith("{")
        ]
        start = 0
        if after_error:
            errors = [i for i, e in enumerate(events) if e.get("result") == "error"]
            start = errors[-1] + 1 if errors else 0
        if any(match(e) for e in events[start:]):
            return events
        time.sleep(0.2)
    raise AssertionError(f"no matching event within {timeout} s:\n{Path(log.name).read_text()[-3000:]}")


def test_the_text_fallback_reads_the_same_snapshot_as_json(clean_lab: SlurmLab) -> None:
    """The pinned `-O` formats are checked against this real 22.05, not only against recorded text."""
    from rltuned.slurm.cli_backend import CliAdapter
    from rltuned.slurm.parse import read_view

    lab = clean_lab
    fill_cluster(lab)
    queue_for_sjf(lab)
    adapter = CliAdapter(lab.conf)
    json_read = adapter.read()
    adapter._text_mode = True  # as after a Slurm without JSON output
    text_read = adapter.read()
    assert (json_read.source, text_read.source) == ("json", "text")
    a = read_view(json_read.squeue, json_read.sinfo, json_read.now)
    b = read_view(text_read.squeue, text_read.sinfo, json_read.now)
    assert b.report.skipped_malformed == 0, b.report.problems
    assert b.snapshot.cluster == a.snapshot.cluster
    assert b.snapshot.free_gpus == a.snapshot.free_gpus
    assert b.snapshot.pending == tuple(replace(j, name="") for j in a.snapshot.pending)  # text reads no names
    assert [r.job.id for r in b.snapshot.running] == [r.job.id for r in a.snapshot.running]


def test_with_refresh_s_an_unchanged_queue_is_a_quiet_tick_and_a_change_is_decided(
    clean_lab: SlurmLab, tmp_path: Path
) -> None:
    from rltuned.daemon.config import load
    from rltuned.daemon.engine import Engine
    from rltuned.daemon.ledger import Ledger
    from rltuned.daemon.service import make_adapter
    from rltuned.rl.export import load_model

    lab = clean_lab
    blockers = fill_cluster(lab)
    managed = queue_for_sjf(lab)
    settings = load(config(tmp_path, lab, apply__mode="enforce", policy__refresh_s=600.0))
    engine = Engine(settings, make_adapter(settings), load_model(MODEL), Ledger(None))
    first = engine.tick()
    assert first.result == "ok" and first.applied == {"priority:ok": len(managed)}
    written = pending_priorities(lab)
    quiet = engine.tick()  # Slurm shows the same queue, with the priorities just written
    assert quiet.result == "quiet" and pending_priorities(lab) == written
    lab.run(["scancel", str(managed[0])])
    assert engine.tick().result == "ok"  # a job left the queue: decide again
    assert engine.tick().result == "quiet"
    waiting = len(pending_priorities(lab))
    lab.run(["scancel", str(blockers[0])])  # 4 P100s freed: Slurm starts jobs, the next tick decides
    deadline = time.monotonic() + 20
    while len(pending_priorities(lab)) == waiting and time.monotonic() < deadline:
        time.sleep(0.2)
    assert len(pending_priorities(lab)) < waiting
    assert engine.tick().result == "ok"


def test_with_cores_as_slots_cpu_jobs_are_ranked_and_slurm_starts_them_in_that_order(
    clean_lab: SlurmLab, tmp_path: Path
) -> None:
    """`slurm.slots = "cpus"`, as the HPC-log model is served: jobs asking for CPUs alone are managed
    (with GPUs as slots they are left to Slurm), each node's 8 CPUs are its slots, and Slurm starts the
    plan's order when cores free up. Then the HPC model itself ranks this queue."""
    from rltuned.daemon.config import load
    from rltuned.daemon.engine import Engine
    from rltuned.daemon.ledger import Ledger
    from rltuned.daemon.service import make_adapter
    from rltuned.rl.export import load_model

    lab = clean_lab
    blockers = [lab.sbatch(None, minutes=30, user="carol", extra=["-n", "8"]) for _ in range(5)]
    for job_id in blockers:
        lab.wait_state(job_id, "RUNNING")
    users = ["alice", "bob", "carol", "alice", "bob", "carol"]
    managed = [lab.sbatch(None, minutes=60 - 5 * i, user=u, extra=["-n", "4"]) for i, u in enumerate(users)]

    gpus = cli("--config", str(config(tmp_path, lab)), "--once", "--mode", "shadow")
    assert gpus.returncode == 0, gpus.stderr
    assert json.loads(gpus.stdout)["left_alone"] == {"cpu_only": len(managed)}
    path = config(tmp_path, lab, slurm__slots="cpus")
    proc = cli("--config", str(path), "--once", "--mode", "enforce")
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["managed"] == len(managed) and summary["left_alone"] == {}
    # Priorities only: the placement levers are off with cores as slots.
    assert summary["actions_applied"] == len(managed) and summary["actions_failed"] == 0
    sjf = managed[::-1]  # each submitted later but shorter
    assert [r["job"] for r in plan_json(path)] == sjf
    after = pending_priorities(lab)
    assert [after[j] for j in sjf] == sorted(after.values(), reverse=True)

    lab.run(["scancel", str(blockers[0])])  # frees one node's 8 cores: room for the plan's best two
    for job_id in sjf[:2]:
        lab.wait_state(job_id, "RUNNING", timeout=20)
    for job_id in sjf[2:]:
        assert lab.job_field(job_id, "JobState") == "PENDING"  # FIFO would have started managed[0:2]

    model = REPO / "models" / "wagap-fcfs-bsld-ticks"
    settings = load(config(tmp_path, lab, slurm__slots="cpus", policy__base="fcfs", policy__refresh_s=600.0))
    engine = Engine(settings, make_adapter(settings), load_model(model), Ledger(None))
    report = engine.tick(mode="shadow")
    assert report.result == "ok" and report.decision is not None
    snapshot = report.decision.view.snapshot
    assert snapshot.cluster.total_gpus == 40 and sum(snapshot.free_gpus) == 0  # 4 x 8 blockers + 2 x 4
    assert report.decision.ranking.source == "model" and report.decision.ranking.fallback is None
    assert sorted(j.id for j in report.decision.ranking.order) == sorted(sjf[2:])
