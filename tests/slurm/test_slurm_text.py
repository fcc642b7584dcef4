"""The pinned text formats (rltuned.slurm.text) read into the same snapshot as the JSON.

The lab recorded its text samples with other `-o`/`-O` field lists, at the moment of the JSON
samples. `_pinned_samples` rebuilds the pinned columns from them: each column comes from a recorded
sample when one has it, otherwise it is what squeue prints for a job without that setting (`N/A` for
no array/het/TRES, `(null)` for no reservation, `*` for no sockets), checked against squeue's print.c.
"""

from __future__ import annotations

import re
import time
from dataclasses import replace
from datetime import UTC, timedelta, timezone
from typing import Any

import pytest

from rltuned.errors import SlurmError
from rltuned.slurm import JobTable, parse_jobs, parse_nodes, snapshot_from_slurm
from rltuned.slurm.text import (
    SINFO_FIELDS,
    SINFO_TEXT_ARGV,
    SQUEUE_EXCLUDED_ARGV,
    SQUEUE_FIELDS,
    SQUEUE_TEXT_ARGV,
    epoch_seconds,
    limit_minutes,
    memory_mib,
    node_state,
    sinfo_document_from_text,
    squeue_document_from_text,
)
from tests.slurm import samples
from tests.slurm.samples import NOW


def _table(name: str) -> list[dict[str, str]]:
    """Rows of a recorded `|` sample, keyed by its header."""
    lines = [line for line in samples.text(name).splitlines() if line]
    header = lines[0].split("|")
    return [dict(zip(header, line.split("|"), strict=True)) for line in lines[1:]]


def _records(name: str, key: str) -> dict[str, dict[str, str]]:
    """`scontrol show ... -o` records by their `key` (values here hold no spaces we need)."""
    records: dict[str, dict[str, str]] = {}
    for line in samples.text(name).splitlines():
        fields = dict(re.findall(r"(\S+?)=(\S*)", line))
        if key in fields:
            records[fields[key]] = fields
    return records


def _pinned_samples() -> tuple[str, str, str]:
    """squeue, excluded-nodes and sinfo text in the pinned formats, from the recorded samples."""
    big_o = {r["JOBID"]: r for r in _table("squeue-O-pipe.txt")}
    small_o = {r["JOBID"]: r for r in _table("squeue-o-pipe.txt")}
    shown = _records("scontrol-show-job-o.txt", "JobId")
    jobs, excluded = [], []
    for job_id, row in big_o.items():
        short, scontrol = small_o[job_id], shown[job_id]
        cells = {
            "JobID": job_id,
            "ArrayJobID": job_id,  # squeue prints a plain job's own id here
            "ArrayTaskID": "N/A",
            "HetJobID": "N/A",
            "State": row["STATE"],
            "Reason": row["REASON"],
            "PriorityLong": row["PRIORITY"],
            "Nice": row["NICE"],
            "UserName": row["USER"],
            "Account": scontrol["Account"],
            "Partition": row["PARTITION"],
            "QOS": scontrol["QOS"],
            "SubmitTime": row["SUBMIT_TIME"],
            "StartTime": row["START_TIME"],
            "TimeLimit": row["TIME_LIMIT"],
            "tres-per-node": row["TRES_PER_NODE"],
            "tres-per-job": row["TRES_PER_JOB"],
            "tres-per-task": "N/A",
            "tres-per-socket": "N/A",
            "mem-per-tres": "N/A",
            "NumNodes": short["NODES"],
            "NumCPUs": short["CPUS"],
            "NumTasks": scontrol["NumTasks"],
            "Sockets": "*",
            "MinMemory": scontrol["MinMemoryNode"],
            "NodeList": row["NODELIST"],
            "ReqNodes": row["REQ_NODES"],
            "OverSubscribe": row["OVER_SUBSCRIBE"],
            "Reservation": "(null)",
            "Dependency": scontrol["Dependency"],
        }
        jobs.append("|".join(cells[f] for f in SQUEUE_FIELDS))
        excluded.append(f"{job_id}|{short['EXC_NODES']}")
    nodes = _records("scontrol-show-node-d-o.txt", "NodeName")
    sinfo = [
        "|".join(
            (
                row["NODELIST"],
                row["STATE"],
                row["GRES"],
                row["GRES_USED"],
                row["CPUS(A/I/O/T)"],
                nodes[row["NODELIST"]]["RealMemory"],
                nodes[row["NODELIST"]]["AllocMem"],
                row["PARTITION"],
            )
        )
        for row in _table("sinfo-O-gres.txt")
    ]
    return "\n".join(jobs) + "\n", "\n".join(excluded) + "\n", "\n".join(sinfo) + "\n"


def _text_documents() -> tuple[dict[str, Any], dict[str, Any]]:
    jobs, excluded, nodes = _pinned_samples()
    return squeue_document_from_text(jobs, excluded, tz=UTC), sinfo_document_from_text(nodes)


# --- the key test: text and JSON read at the same moment give the same snapshot ---------------------


def test_text_samples_give_the_json_snapshot() -> None:
    squeue, sinfo = _text_documents()
    from_text, text_report = snapshot_from_slurm(squeue, sinfo, NOW)
    from_json, json_report = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)
    assert {j.id for j in from_text.pending} == {5, 6, 9, 11, 12, 13}
    assert [(j.id, j.gpus, j.gpu_type, j.user, j.partition, j.time_limit) for j in from_text.pending] == [
        (j.id, j.gpus, j.gpu_type, j.user, j.partition, j.time_limit) for j in from_json.pending
    ]
    assert [(r.job.id, r.start, r.allocation) for r in from_text.running] == [
        (r.job.id, r.start, r.allocation) for r in from_json.running
    ]
    assert from_text.free_gpus == from_json.free_gpus
    # Everything else too (submit times, priorities, CPUs, memory), except the names text does not read.
    unnamed = replace(
        from_json,
        pending=tuple(replace(j, name="") for j in from_json.pending),
        running=tuple(replace(r, job=replace(r.job, name="")) for r in from_json.running),
    )
    assert from_text == unnamed
    assert text_report == json_report


def test_text_samples_give_the_json_job_details() -> None:
    squeue, sinfo = _text_documents()
    cluster = parse_nodes(sinfo).cluster
    from_text = parse_jobs(squeue, cluster)
    from_json = parse_jobs(samples.squeue(), cluster)
    assert dict(from_text.info) == dict(from_json.info)
    assert from_text.info[9].nice == -500  # squeue prints it signed; the JSON wraps it to uint32
    assert from_text.info[11].excluded_nodes == ("k80-1",)  # from the `%A|%x` companion
    assert from_text.info[12].required_nodes == ("p100-2",)


def test_text_samples_give_the_json_nodes() -> None:
    _, sinfo = _text_documents()
    from_text, from_json = parse_nodes(sinfo), parse_nodes(samples.sinfo())
    assert from_text == from_json
    assert {n.partition for n in from_text.cluster.nodes} == {"main"}  # `main*`: the default


def test_recorded_text_in_another_format_is_refused() -> None:
    """The recorded -O sample has 15 columns, not the pinned ones: not silently misread."""
    with pytest.raises(SlurmError, match=r"expected 30 '\|'-separated columns.*got 15"):
        squeue_document_from_text(samples.text("squeue-O-pipe.txt"))
    with pytest.raises(SlurmError, match="expected 8"):
        sinfo_document_from_text(samples.text("sinfo-O-gres.txt"))


def test_cell_parsers_on_the_recorded_columns() -> None:
    rows = _table("squeue-O-pipe.txt")
    json_jobs = {j["job_id"]: j for j in samples.squeue()["jobs"]}
    for row in rows:
        job = json_jobs[int(row["JOBID"])]
        assert limit_minutes(row["TIME_LIMIT"]) == job["time_limit"]
        assert epoch_seconds(row["SUBMIT_TIME"], UTC) == job["submit_time"]
        assert epoch_seconds(row["START_TIME"], UTC) == job["start_time"]
    assert [node_state(r["STATE"]) for r in _table("sinfo-O-gres.txt")] == [("MIXED", [])] * 5


# --- the argv constants ----------------------------------------------------------------------------


def test_argv_pins_every_field_untruncated() -> None:
    assert SQUEUE_TEXT_ARGV[:4] == ("squeue", "-a", "-h", "-O")
    spec = SQUEUE_TEXT_ARGV[4].split(",")
    assert [s.split(":")[0] for s in spec] == list(SQUEUE_FIELDS)
    assert all(s.endswith(":|") for s in spec[:-1])  # width 0 (never cut), then the separator
    assert spec[-1] == "Dependency:" and "Name" not in SQUEUE_FIELDS  # no free text a user chooses
    assert SQUEUE_EXCLUDED_ARGV == ("squeue", "-a", "-h", "-o", "%A|%x")
    assert SINFO_TEXT_ARGV[-1].split(",") == [f"{f}:|" for f in SINFO_FIELDS[:-1]] + ["Partition:"]
    assert "-N" in SINFO_TEXT_ARGV


# --- synthetic rows in the pinned format -----------------------------------------------------------

PENDING = {
    "JobID": "40",
    "ArrayJobID": "40",
    "ArrayTaskID": "N/A",
    "HetJobID": "N/A",
    "State": "PENDING",
    "Reason": "Priority",
    "PriorityLong": "1000",
    "Nice": "0",
    "UserName": "carol",
    "Account": "physics",
    "Partition": "gpu",
    "QOS": "normal",
    "SubmitTime": "2026-11-21T23:25:44",
    "StartTime": "N/A",
    "TimeLimit": "1-00:00:00",
    "tres-per-node": "gres:gpu:a100:2",
    "tres-per-job": "N/A",
    "tres-per-task": "N/A",
    "tres-per-socket": "N/A",
    "mem-per-tres": "N/A",
    "NumNodes": "1",
    "NumCPUs": "1",
    "NumTasks": "1",
    "Sockets": "*",
    "MinMemory": "0",
    "NodeList": "",
    "ReqNodes": "",
    "OverSubscribe": "OK",
    "Reservation": "(null)",
    "Dependency": "",
}
NODE = "a100-1|idle|gpu:a100:4|gpu:a100:0(IDX:N/A)|0/32/0/32|256000|0|gpu*"


def _row(**changes: str) -> str:
    cells = {**PENDING, **{k.replace("_", "-") if k.startswith("tres") else k: v for k, v in changes.items()}}
    return "|".join(cells[f] for f in SQUEUE_FIELDS)


def _jobs(*rows: str, excluded: str = "") -> tuple[dict[str, Any], ...]:
    return tuple(squeue_document_from_text("\n".join(rows), excluded, tz=UTC)["jobs"])


def _parsed(*rows: str, excluded: str = "") -> JobTable:
    cluster = parse_nodes(sinfo_document_from_text(NODE)).cluster
    return parse_jobs(squeue_document_from_text("\n".join(rows), excluded, tz=UTC), cluster)


def test_a_pending_row() -> None:
    (job,) = _jobs(_row())
    assert job["job_id"] == 40
    assert job["submit_time"] == 1_795_303_544
    assert job["time_limit"] == 24 * 60
    assert job["tres_per_job"] == ""  # N/A
    assert job["reservation"] == ""  # (null)
    assert job["het_job_id"] == 0
    assert job["array_job_id"] == 0  # squeue's ArrayJobID repeats the job id for a plain job
    assert job["array_task_id"] is None
    assert job["start_time"] is None
    assert job["shared"] is None  # OverSubscribe=OK: never set
    table = _parsed(_row())
    assert [(j.id, j.gpus, j.gpu_type, j.account, j.qos, j.name) for j in table.pending] == [
        (40, 2, "a100", "physics", "normal", "")
    ]


def test_bad_rows_are_skipped_and_counted_not_raised() -> None:
    rows = (
        _row(JobID="41"),
        _row(JobID="42", PriorityLong="high"),  # unreadable number
        _row(JobID="43", TimeLimit="soon"),  # unreadable limit
        _row(JobID="44", SubmitTime="yesterday"),  # unreadable time
        "45|45|N/A|PENDING",  # a cut-off line
        _row(JobID="4x"),  # an id that is not a number
    )
    table = _parsed(*rows)
    assert [j.id for j in table.pending] == [41]
    assert table.report.skipped_malformed == 5
    assert any(p.startswith("job 42: priority") for p in table.report.problems)
    assert any(p.startswith("job 43: time_limit") for p in table.report.problems)
    assert any(p.startswith("job 4x: job_id") for p in table.report.problems)
    assert any(p.startswith("job 45: job_state: Field required") for p in table.report.problems)


def test_whole_text_in_another_format_raises() -> None:
    with pytest.raises(SlurmError, match="squeue: expected 30"):
        squeue_document_from_text("40|PENDING|alice\n41|RUNNING|bob\n")
    assert squeue_document_from_text("") == {"jobs": []}  # an empty queue is not an error
    assert sinfo_document_from_text("\n") == {"nodes": []}


def test_a_header_line_is_skipped() -> None:
    header = "|".join(f.upper() for f in SQUEUE_FIELDS)  # squeue without -h: JOBID|ARRAYJOBID|...
    assert len(_jobs(header, _row())) == 1


def test_negative_nice() -> None:
    (job,) = _jobs(_row(Nice="-500"))
    assert job["nice"] == -500
    assert _parsed(_row(Nice="-500")).info[40].nice == -500


def test_a_row_with_a_separator_too_many_or_too_few_is_rejected_and_counted() -> None:
    """No pinned field holds free text, so a row must split into exactly the pinned cells."""
    table = _parsed(
        _row(JobID="41"), _row(JobID="42") + "|77", _row(JobID="43", Reason="a|b"), _row(JobID="44")
    )
    assert [j.id for j in table.pending] == [41, 44]
    assert table.report.skipped_malformed == 2


def test_unlimited_and_unset_limits_read_as_none() -> None:
    for word in ("UNLIMITED", "NOT_SET", "INVALID"):
        (job,) = _jobs(_row(TimeLimit=word))
        assert job["time_limit"] is None
    table = _parsed(_row(TimeLimit="UNLIMITED"))
    assert table.pending[0].time_limit is None
    assert table.report.no_time_limit == 1


@pytest.mark.parametrize(
    ("text", "minutes"),
    [
        ("5:00", 5),  # M:SS, as squeue prints under an hour
        ("0:30", 1),  # a part minute counts whole
        ("59:59", 60),
        ("1:00:00", 60),  # H:MM:SS
        ("12:30:00", 750),
        ("2-00:00:00", 2880),  # D-HH:MM:SS
        ("1-12", 2160),  # D-H (Slurm's input grammar)
        ("1-12:30", 2190),  # D-H:M
        ("90", 90),  # plain minutes
        ("UNLIMITED", None),
        ("INFINITE", None),
        ("garbage", "garbage"),
        ("1-", "1-"),
    ],
)
def test_time_limit_grammar(text: str, minutes: int | str | None) -> None:
    assert limit_minutes(text) == minutes


def test_times_in_a_zone_local_or_epoch(monkeypatch: pytest.MonkeyPatch) -> None:
    plus2 = timezone(timedelta(hours=2))
    assert epoch_seconds("2026-11-21T23:25:44", UTC) == 1_795_303_544
    assert epoch_seconds("2026-11-21T23:25:44", plus2) == 1_795_303_544 - 7200
    # Without a zone the host's own: on a host in Berlin (UTC+1 in November), not UTC, which CI runs on.
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    try:
        berlin = epoch_seconds("2026-11-21T23:25:44")
    finally:
        monkeypatch.undo()
        time.tzset()
    assert berlin == 1_795_303_544 - 3600
    assert epoch_seconds("1795303544") == 1_795_303_544  # SLURM_TIME_FORMAT=%s
    for none in ("N/A", "Unknown"):
        assert epoch_seconds(none) is None


def test_array_and_het_records() -> None:
    task, unsplit, het = _jobs(
        _row(JobID="51", ArrayJobID="50", ArrayTaskID="1"),
        _row(JobID="50", ArrayJobID="50", ArrayTaskID="2-9%2"),
        _row(JobID="60", HetJobID="60"),
    )
    assert (task["array_job_id"], task["array_task_id"]) == (50, 1)
    assert (unsplit["array_job_id"], unsplit["array_task_string"]) == (50, "2-9%2")
    assert het["het_job_id"] == 60
    table = _parsed(
        _row(JobID="51", ArrayJobID="50", ArrayTaskID="1"),
        _row(JobID="50", ArrayJobID="50", ArrayTaskID="2-9%2"),
        _row(JobID="60", HetJobID="60"),
    )
    assert [j.id for j in table.pending] == [51]  # a split task is an ordinary job
    assert (table.report.array_unsplit, table.report.heterogeneous) == (1, 1)


def test_per_gpu_tres_and_other_columns() -> None:
    (job,) = _jobs(
        _row(
            tres_per_node="N/A",
            tres_per_task="gres:gpu:1",
            NumTasks="4",
            **{"mem-per-tres": "gres:gpu:16384"},
            Reservation="maint",
            Dependency="afterok:39(unfulfilled)",
            ReqNodes="a100-[1-2]",
            OverSubscribe="YES",
            Sockets="2",
        )
    )
    assert (job["tres_per_node"], job["tres_per_task"], job["tasks"]) == ("", "gres:gpu:1", 4)
    assert job["memory_per_tres"] == "gres:gpu:16384"
    assert (job["reservation"], job["dependency"]) == ("maint", "afterok:39(unfulfilled)")
    assert (job["required_nodes"], job["shared"], job["sockets_per_node"]) == ("a100-[1-2]", "shared", 2)


def test_min_memory_only_when_unambiguous() -> None:
    """squeue drops the per-CPU flag: `4G` is per node or per CPU, alike only at one CPU per node."""
    one, many = _jobs(_row(MinMemory="4G"), _row(JobID="41", MinMemory="4G", NumCPUs="8"))
    assert one["memory_per_node"] == 4096
    assert "memory_per_node" not in many
    assert "memory_per_cpu" not in many
    assert [memory_mib(m) for m in ("0", "500M", "4G", "1.50T", "7", "lots")] == [
        0,
        500,
        4096,
        1_572_864,
        7,
        None,
    ]


def test_excluded_nodes_join_by_job_id() -> None:
    excluded = "40|a100-[2-3]\n41|\nnot a line\n"
    first, second, third = _jobs(_row(), _row(JobID="41"), _row(JobID="42"), excluded=excluded)
    assert first["excluded_nodes"] == "a100-[2-3]"
    assert second["excluded_nodes"] == ""
    assert "excluded_nodes" not in third  # ended before the excluded-nodes call: not needed
    assert _parsed(_row(), excluded=excluded).info[40].excluded_nodes == ("a100-2", "a100-3")


# --- sinfo -----------------------------------------------------------------------------------------


def test_a_sinfo_row() -> None:
    (node,) = sinfo_document_from_text(NODE)["nodes"]
    assert node == {
        "name": "a100-1",
        "state": "IDLE",
        "state_flags": [],
        "gres": "gpu:a100:4",
        "gres_used": "gpu:a100:0(IDX:N/A)",
        "real_memory": 256_000,
        "alloc_memory": 0,
        "partitions": ["gpu"],
        "cpus": 32,
        "alloc_cpus": 0,
        "idle_cpus": 32,
    }


def test_a_node_in_two_partitions_and_nodes_without_gpus() -> None:
    text = "\n".join(
        (
            NODE,
            NODE.replace("|gpu*", "|debug"),
            "cpu-1|idle|(null)|(null)|0/8/0/8|64000|0|cpu",
            "lost-1|idle|(null)|(null)|0/8/0/8|64000|0|n/a",
        )
    )
    table = parse_nodes(sinfo_document_from_text(text))
    assert [(n.name, n.gpus) for n in table.cluster.nodes] == [("a100-1", 4)]
    assert table.without_gpus == ("cpu-1", "lost-1")
    assert table.free_gpus == (4,)


@pytest.mark.parametrize(
    ("state", "words", "available"),
    [
        ("idle", ("IDLE", []), True),
        ("mixed", ("MIXED", []), True),
        ("allocated+", ("ALLOCATED", ["COMPLETING"]), True),
        ("idle~", ("IDLE", ["POWERED_DOWN"]), True),  # cloud node: Slurm resumes it for a job
        ("down*", ("DOWN", ["NOT_RESPONDING"]), False),
        ("mixed*", ("MIXED", ["NOT_RESPONDING"]), False),
        ("idle%", ("IDLE", ["POWERING_DOWN"]), False),
        ("drained", ("DRAINED", []), False),
        ("draining@", ("DRAINING", ["REBOOT_REQUESTED"]), False),
        ("idle$", ("IDLE", ["MAINT"]), False),
        ("idle+drain", ("IDLE", ["DRAIN"]), False),
        ("IDLE*+DRAIN", ("IDLE", ["NOT_RESPONDING", "DRAIN"]), False),
        ("reserved", ("RESERVED", []), False),
    ],
)
def test_node_states(state: str, words: tuple[str, list[str]], available: bool) -> None:
    assert node_state(state) == words
    table = parse_nodes(sinfo_document_from_text(NODE.replace("|idle|", f"|{state}|")))
    assert table.available == (available,)


def test_bad_sinfo_rows_are_skipped() -> None:
    text = "\n".join(
        (
            NODE,
            "b-1|idle|gpu:2|gpu:0|lots|64000|0|gpu",
            "c-1|idle|gpu:2",
            "d-1|idle|gpu:2|gpu:0|0/8/0/8|x|0|gpu",
        )
    )
    table = parse_nodes(sinfo_document_from_text(text))
    assert [n.name for n in table.cluster.nodes] == ["a100-1"]
    assert table.skipped_malformed == 3
