"""`rltunectl fidelity --daemon-log`: the daemon's accepted writes replayed at their logged times."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from rltuned.cli import main
from rltuned.clusters import load_cluster
from rltuned.errors import TraceError
from rltuned.fidelity.daemon_log import load_writes
from rltuned.fidelity.observed import load_sacct
from rltuned.fidelity.replay import replay, slurm_settings
from rltuned.traces.fields import timestamp

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SINFO = FIXTURES / "sinfo.json"
PARAMS = "bf_interval=1,sched_interval=1"


def _event(jobid: object, action: str, value: object, at: str) -> str:
    return json.dumps(
        {"jobid": jobid, "action": action, "value": value, "mode": "enforce", "event": "job_updated",
         "level": "info", "timestamp": at}
    )  # fmt: skip


def _log(tmp_path: Path, *lines: str) -> Path:
    path = tmp_path / "daemon.log"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_writes_are_read_for_the_workloads_jobs_and_other_lines_are_skipped(tmp_path: Path) -> None:
    log = _log(
        tmp_path,
        json.dumps({"event": "tick", "tick": 1, "timestamp": "2026-11-24T10:00:00.100000Z"}),
        "Traceback (most recent call last):",
        _event(3, "excluded_nodes", "p100-1", "2026-11-24T10:00:02.500000Z"),
        _event("6", "priority", 7500000, "2026-11-24T10:00:06.200000Z"),  # the CPU-only job: not replayed
        _event(4, "priority", 7499000, "2026-11-24T10:00:03.250000Z"),
    )
    got = load_writes(log, {"3": 30, "4": 40})
    assert got.unknown_jobs == 1
    assert [(at % 60, a.job_id, a.kind, a.value) for at, a in got.writes] == [
        (2.5, 30, "excluded_nodes", "p100-1"),
        (3.25, 40, "priority", 7499000),
    ]
    assert got.writes[0][1].fields == (("ExcNodeList", "p100-1"),)


@pytest.mark.parametrize(
    ("event", "problem"),
    [
        (_event(3, "hold", 1, "2026-11-24T10:00:02Z"), "action must be one of"),
        (_event(3, "priority", "high", "2026-11-24T10:00:02Z"), "priority value must be int"),
        (_event(3, "priority", True, "2026-11-24T10:00:02Z"), "priority value must be int"),
        (_event(3, "priority", 5, "soon"), "timestamp"),
        (json.dumps({"event": "job_updated", "jobid": 3, "timestamp": "2026-11-24T10:00:02Z"}), "action"),
    ],
)
def test_a_malformed_write_names_its_file_and_line(tmp_path: Path, event: str, problem: str) -> None:
    log = _log(tmp_path, json.dumps({"event": "tick"}), event)
    with pytest.raises(TraceError, match=rf"{log}:2: job_updated: .*{problem}"):
        load_writes(log, {"3": 3})


def _contended(tmp_path: Path) -> Path:
    """Two 4-GPU jobs hold both p100 nodes (to 30 s and 40 s); jobs 3 and 4 (4 GPUs each) wait for them.
    FCFS (priority/basic): 3 takes the node freed at 30, 4 the one freed at 40."""
    row = "{id}|alice|lab|main|2026-11-24T10:00:{submit:02d}|2026-11-24T10:00:{start:02d}|"
    row += "2026-11-24T10:00:{end:02d}|{node}|00:01:00|billing=1,cpu=1,gres/gpu=4,mem=64000M,node=1|COMPLETED"
    header = "JobID|User|Account|Partition|Submit|Start|End|NodeList|Timelimit|AllocTRES|State"
    rows = [
        (1, 0, 0, 30, "p100-1"),
        (2, 0, 0, 40, "p100-2"),
        (3, 1, 30, 50, "p100-1"),
        (4, 2, 40, 59, "p100-2"),
    ]
    path = tmp_path / "sacct.txt"
    lines = [row.format(id=i, submit=s, start=a, end=e, node=n) for i, s, a, e, n in rows]
    path.write_text("\n".join([header, *lines]) + "\n")
    return path


def test_a_logged_priority_write_lets_job_4_go_first(tmp_path: Path) -> None:
    params, memory = slurm_settings(None, PARAMS)
    workload = load_sacct(_contended(tmp_path))
    ids = {o.job.name: o.job.id for o in workload.jobs}
    cluster = load_cluster(str(SINFO))
    t0 = workload.jobs[0].job.submit

    def starts(log: Path | None) -> dict[str, float]:
        writes = load_writes(log, ids).writes if log else None
        result = replay(workload, cluster, params, memory, writes=writes)
        return {r.job.name: r.start - t0 for r in result.records}

    assert starts(None) == {"1": 0, "2": 0, "3": 30, "4": 40}
    log = _log(tmp_path, _event(4, "priority", 100, "2026-11-24T10:00:02.500000Z"))
    assert starts(log) == {"1": 0, "2": 0, "3": 40, "4": 30}
    late = _log(tmp_path, _event(4, "priority", 100, "2026-11-24T10:00:35.000000Z"))  # after 3 started
    assert starts(late) == {"1": 0, "2": 0, "3": 30, "4": 40}


def test_the_command_replays_the_log_and_refuses_both_ways_at_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    log = _log(tmp_path, _event(4, "priority", 100, "2026-11-24T10:00:02.500000Z"))
    args = [
        "fidelity",
        "--sacct",
        str(_contended(tmp_path)),
        "--cluster",
        str(SINFO),
        "--scheduler-params",
        PARAMS,
    ]
    with pytest.raises(SystemExit) as done:
        main([*args, "--daemon-log", str(log), "--json"])
    assert done.value.code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["daemon_writes"] == 1 and body["daemon_writes_unknown_jobs"] == 0
    assert body["kendall_tau"] < 1.0  # the write swapped 3 and 4, which Slurm ran in submit order
    assert {w["job_id"]: w["delta_s"] for w in body["worst"][:2]} == {"3": 10, "4": -10}
    config = tmp_path / "rltuned.toml"
    config.write_text("")
    with pytest.raises(SystemExit) as refused:
        main([*args, "--daemon-log", str(log), "--daemon-config", str(config)])
    assert refused.value.code != 0
    assert "give one" in capsys.readouterr().err


def test_utc_log_times_meet_saccts_local_times(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On a host in Berlin (UTC+1 in November) sacct prints 11:00:02 for the instant the daemon logs as
    # 10:00:02Z; both must land on the same simulated second.
    log = _log(tmp_path, _event(4, "priority", 100, "2026-11-24T10:00:02.500000Z"))
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        ((at, _),) = load_writes(log, {"4": 4}).writes
    finally:
        monkeypatch.undo()
        time.tzset()
    assert at == pytest.approx(timestamp("2026-11-24T11:00:02.5", "Submit"))
