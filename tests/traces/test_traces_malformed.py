"""Malformed rows: strict mode names file, line and problem; lenient mode counts and skips them."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltuned.errors import TraceError
from rltuned.traces import load_trace

MALFORMED = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "malformed"

# file -> (bad line, problem, jobs loaded when lenient)
CASES: dict[str, tuple[int, str, int]] = {
    "philly_columns.csv": (3, "expected 5 columns, got 3", 2),
    "philly_number.csv": (4, "duration: expected a number, got 'abc'", 2),
    "philly_timestamp.csv": (
        3,
        "timestamp: expected a date-time like 2017-10-09 07:01:55, got '09/10/2017",
        1,
    ),
    "itp_negative_duration.csv": (3, "duration: expected a number >= 0, got '-5'", 2),
    "itp_negative_gpus.csv": (3, "num_gpu: expected a count >= 0, got '-1'", 1),
    "openb_ends_before_start.csv": (3, "expected deletion_time >= scheduled_time, got 50 < 90", 1),
    "swf_short_line.swf": (4, "expected at least 18 columns, got 5", 2),
    "swf_negative_runtime.swf": (2, "run time (field 4): expected a value >= 0 or -1, got -5", 2),
    "helios_bad_time.csv": (2, "submit_time: expected a date-time", 0),
    "pai_task_table_bad.csv": (2, "plan_gpu: expected a number, got 'lots'", 1),
    "sacct_bad_tres.txt": (3, "AllocTRES gres/gpu: expected a number, got 'two'", 1),
    "sacct_bad_timelimit.txt": (2, "Timelimit: expected a Slurm time like 1-02:03:04", 0),
    "jobcomp_missing_start.log": (2, "missing StartTime", 1),
}


def test_every_fixture_has_a_case() -> None:
    assert {p.name for p in MALFORMED.iterdir()} == set(CASES)


@pytest.mark.parametrize("name", sorted(CASES))
def test_strict_names_file_line_and_problem(name: str) -> None:
    line, problem, _ = CASES[name]
    with pytest.raises(TraceError) as caught:
        load_trace(MALFORMED / name)
    error = caught.value
    assert (Path(error.path).name, error.line) == (name, line)
    assert problem in error.problem
    assert str(error).startswith(f"{MALFORMED / name}:{line}: ")


@pytest.mark.parametrize("name", sorted(CASES))
def test_lenient_counts_and_skips(name: str) -> None:
    _, _, loaded = CASES[name]
    report = load_trace(MALFORMED / name, lenient=True).report
    assert (report.malformed, report.loaded) == (1, loaded)
    assert report.rows == report.loaded + report.malformed + sum(report.filtered.values())
    assert "1 malformed rows skipped" in report.summary()
