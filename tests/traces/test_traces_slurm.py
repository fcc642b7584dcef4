"""Slurm history: sacct --parsable2 and jobcomp/filetxt fixtures, TRES and time-string parsing."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from rltuned.traces import load_trace
from rltuned.traces.fields import RowError
from rltuned.traces.slurm import Tres, jobcomp_record, memory_mb, parse_tres, slurm_seconds

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1-02:03:04", 93_784.0),
        ("02:03:04", 7_384.0),
        ("30:00", 1_800.0),  # MM:SS
        ("5", 300.0),  # bare minutes, as jobcomp writes TimeLimit
        ("120", 7_200.0),
        ("2-12", 216_000.0),  # D-HH
        ("1-02:30", 95_400.0),  # D-HH:MM
        ("00:00:00", 0.0),
        ("UNLIMITED", None),
        ("Partition_Limit", None),
        ("INFINITE", None),
        ("", None),
    ],
)
def test_slurm_seconds(text: str, seconds: float | None) -> None:
    assert slurm_seconds(text, "Timelimit") == seconds


@pytest.mark.parametrize("text", ["abc", "1:2:3:4", "-5", "1-", "1.5", "01:xx"])
def test_slurm_seconds_rejects(text: str) -> None:
    with pytest.raises(RowError, match="expected a Slurm time"):
        slurm_seconds(text, "Timelimit")


@pytest.mark.parametrize(
    ("text", "tres"),
    [
        ("billing=8,cpu=8,gres/gpu:a100=2,gres/gpu=2,mem=64G,node=1", Tres(2, "a100", 8, 65_536, nodes=1)),
        ("gres/gpu=3", Tres(3, None, 0, 0)),
        ("gres/gpu:a100=2,gres/gpu:v100=1", Tres(3, None, 0, 0)),  # typed only: summed, no single type
        ("cpu=4,mem=128800M,node=1,billing=4", Tres(0, None, 4, 128_800, nodes=1)),
        ("cpu=1,gres/gpumem=40G,gres/gpu=1", Tres(1, None, 1, 0)),  # gpumem is not a GPU count
        ("", Tres()),
    ],
)
def test_parse_tres(text: str, tres: Tres) -> None:
    assert parse_tres(text) == tres


@pytest.mark.parametrize(("text", "mb"), [("16G", 16_384), ("1.5T", 1_572_864), ("512K", 1), ("2048", 2_048)])
def test_memory_mb(text: str, mb: int) -> None:
    assert memory_mb(text, "mem") == mb


def test_parse_tres_rejects_garbage() -> None:
    with pytest.raises(RowError, match="expected name=value items"):
        parse_tres("cpu=4,gpu")


def test_jobcomp_record_keeps_values_with_spaces() -> None:
    record = jobcomp_record(
        "JobId=7 Name=train resnet 50 ReservationName= WorkDir=/a b Tres=cpu=1,gres/gpu=1 "
    )
    assert record == {
        "JobId": "7",
        "Name": "train resnet 50",
        "ReservationName": "",
        "WorkDir": "/a b",
        "Tres": "cpu=1,gres/gpu=1",
    }


def test_sacct_counts() -> None:
    report = load_trace(FIXTURES / "sacct_jobs.txt").report
    assert (report.format, report.rows, report.loaded, report.malformed) == ("slurm", 9, 3, 0)
    assert report.filtered == {
        "job_step": 2,
        "cpu_only": 1,
        "never_started": 1,
        "still_running": 1,
        "zero_duration": 1,
    }


def test_sacct_values() -> None:
    bob, alice, erin = load_trace(FIXTURES / "sacct_jobs.txt").jobs
    assert (bob.name, bob.submit, bob.runtime, bob.time_limit) == (
        "101",
        utc("2024-03-01 09:30:00"),
        300.0,
        1800.0,
    )
    assert (bob.gpus, bob.gpu_type, bob.cpus, bob.mem_mb, bob.qos) == (1, None, 4, 16_000, "high")
    assert (alice.name, alice.user, alice.account, alice.partition) == ("100", "alice", "proj-a", "gpu")
    assert (alice.gpus, alice.gpu_type, alice.mem_mb, alice.time_limit, alice.runtime) == (
        2,
        "a100",
        65_536,
        86_400.0,
        7_200.0,
    )
    assert (erin.name, erin.gpus, erin.gpu_type, erin.time_limit, erin.runtime) == (
        "106_3",
        4,
        None,
        None,
        93_600.0,
    )


def test_sacct_end_minus_start_without_elapsed(tmp_path: Path) -> None:
    path = tmp_path / "sacct.txt"
    path.write_text(
        "JobID|Submit|Start|End|ReqTRES\n9|2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T01:01:00|gres/gpu=1\n"
    )
    (job,) = load_trace(path).jobs
    assert (job.submit, job.runtime, job.gpus, job.user) == (utc("2024-01-01 00:00:00"), 3600.0, 1, "")


def test_a_job_that_asked_for_any_gpu_keeps_no_type_though_alloctres_names_one(tmp_path: Path) -> None:
    """With typed GPUs in AccountingStorageTRES, AllocTRES names the model a job got; the request
    (ReqTRES) is what a scheduler replaying it must honour (issue 16: a replay pinned to the real
    model scored 100% on GPU type by construction)."""
    path = tmp_path / "sacct.txt"
    head = "JobID|Submit|Start|End|AllocTRES|ReqTRES\n"
    times = "2024-01-01T00:00:00|2024-01-01T00:01:00|2024-01-01T01:01:00"
    path.write_text(
        head
        + f"1|{times}|cpu=1,gres/gpu:k80=1,gres/gpu=1,node=1|cpu=1,gres/gpu=1,node=1\n"
        + f"2|{times}|cpu=1,gres/gpu:p100=2,gres/gpu=2,node=1|cpu=1,gres/gpu:p100=2,gres/gpu=2,node=1\n"
    )
    untyped, typed = load_trace(path).jobs
    assert (untyped.gpus, untyped.gpu_type) == (1, None)
    assert (typed.gpus, typed.gpu_type) == (2, "p100")


def test_jobcomp_counts_and_values() -> None:
    trace = load_trace(FIXTURES / "slurm_jobcomp.log")
    assert (trace.report.rows, trace.report.loaded) == (5, 3)
    assert trace.report.filtered == {"cpu_only": 1, "zero_duration": 1}
    bob, alice, dave = trace.jobs
    assert (bob.name, bob.user, bob.gpu_type, bob.time_limit, bob.runtime) == (
        "503",
        "bob",
        "p100",
        None,
        1800.0,
    )
    assert (alice.submit, alice.gpus, alice.time_limit, alice.cpus, alice.mem_mb) == (
        utc("2024-05-01 08:00:00"),
        2,
        7200.0,
        8,
        65_536,
    )
    assert (alice.account, alice.partition, alice.qos) == ("proj-a", "gpu", "normal")
    assert dave.submit == utc("2024-05-01 23:00:00")  # no SubmitTime: EligibleTime
    assert (dave.time_limit, dave.runtime) == (86_400.0, 86_405.0)


def test_a_zero_time_limit_means_none_given() -> None:
    """A 0 limit would make every job look short enough to backfill past a reservation."""
    from rltuned.traces.slurm import time_limit

    assert time_limit("0", "TimeLimit") is None
    assert time_limit("00:00:00", "Timelimit") is None
    assert time_limit("UNLIMITED", "Timelimit") is None
    assert time_limit("1-00:00:00", "Timelimit") == 86400.0
