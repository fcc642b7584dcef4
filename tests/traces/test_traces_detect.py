"""Format detection and the errors `load_trace` gives before any row is read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from rltuned.errors import TraceError
from rltuned.traces import FORMATS, detect_format, load_trace
from rltuned.traces.bundled import DATA_DIR

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


@pytest.mark.parametrize(
    ("path", "fmt"),
    [
        (DATA_DIR / "philly.csv.xz", "philly"),
        (DATA_DIR / "itp" / "cluster10.csv.xz", "itp"),
        (DATA_DIR / "openb" / "openb_pod_list_default.csv.xz", "openb"),
        (DATA_DIR / "swf" / "hpc2n.swf.xz", "swf"),
        (FIXTURES / "malformed" / "swf_negative_runtime.swf", "swf"),  # extended SWF, no header comments
        (FIXTURES / "helios_cluster_log.csv", "helios"),
        (FIXTURES / "pai" / "pai_task_table.csv", "pai"),
        (FIXTURES / "sacct_jobs.txt", "slurm"),
        (FIXTURES / "slurm_jobcomp.log", "slurm"),
    ],
)
def test_detects(path: Path, fmt: str) -> None:
    assert detect_format(path) == fmt


def test_formats_are_the_documented_seven() -> None:
    assert FORMATS == ("philly", "itp", "openb", "swf", "helios", "pai", "slurm")


def test_detects_headerless_pai_by_shape(tmp_path: Path) -> None:
    renamed = tmp_path / "tasks.csv"
    shutil.copy(FIXTURES / "pai" / "pai_task_table.csv", renamed)
    assert detect_format(renamed) == "pai"


@pytest.mark.parametrize(
    ("path", "problem"),
    [
        (FIXTURES / "unknown_format.txt", "unknown_format.txt:1: unknown trace format"),
        (DATA_DIR / "openb" / "openb_node_list_gpu_node.csv.xz", "unknown trace format"),
        (FIXTURES / "empty.csv", "empty.csv: empty file"),
        (FIXTURES / "pai" / "pai_job_table.csv", "PAI job table; load the pai_task_table"),
    ],
)
def test_undetectable(path: Path, problem: str) -> None:
    with pytest.raises(TraceError, match=problem):
        detect_format(path)


def test_unknown_format_message_lists_every_format() -> None:
    with pytest.raises(TraceError) as caught:
        detect_format(FIXTURES / "unknown_format.txt")
    assert all(fmt in caught.value.problem for fmt in FORMATS)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=r"nope\.csv: no such file") as caught:
        load_trace(tmp_path / "nope.csv")
    assert caught.value.line is None


def test_directory(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="got a directory"):
        load_trace(tmp_path)


def test_unknown_fmt_lists_valid_formats() -> None:
    with pytest.raises(
        TraceError, match="unknown trace format 'csv'; expected one of philly, itp, openb, swf"
    ):
        load_trace(FIXTURES / "helios_cluster_log.csv", "csv")


def test_explicit_fmt_overrides_detection() -> None:
    trace = load_trace(str(FIXTURES / "helios_cluster_log.csv"), "helios")
    assert trace.report.format == "helios"
    with pytest.raises(TraceError, match=r"helios_cluster_log\.csv:1: expected a header with timestamp"):
        load_trace(FIXTURES / "helios_cluster_log.csv", "philly")


def test_empty_file_with_explicit_format() -> None:
    with pytest.raises(TraceError, match="empty file: expected a header line"):
        load_trace(FIXTURES / "empty.csv", "philly")
