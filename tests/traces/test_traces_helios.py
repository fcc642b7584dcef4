"""Helios `cluster_log.csv` on a hand-written fixture in the published schema."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from rltuned.traces import load_trace

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "helios_cluster_log.csv"


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_counts() -> None:
    report = load_trace(FIXTURE).report
    assert (report.rows, report.loaded, report.malformed) == (6, 3, 0)
    assert report.filtered == {"cpu_only": 1, "never_started": 1, "zero_duration": 1}


def test_jobs_sorted_by_submit_with_original_ids_as_names() -> None:
    jobs = load_trace(FIXTURE).jobs
    assert [(j.id, j.name) for j in jobs] == [(0, "1000"), (1, "1001"), (2, "1005")]


def test_values() -> None:
    bob, alice, dave = load_trace(FIXTURE).jobs
    assert (bob.submit, bob.runtime, bob.gpus, bob.cpus) == (utc("2020-05-01 09:00:00"), 60.0, 1, 4)
    assert (bob.user, bob.account, bob.time_limit, bob.gpu_type) == ("uBob", "vcB02", None, None)
    assert (alice.gpus, alice.cpus, alice.runtime) == (8, 32, 7200.0)
    assert dave.runtime == 3600.0  # empty duration: end_time - start_time
