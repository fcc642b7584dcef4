"""Alibaba PAI 2020: headerless task table, aggregated per job, users from the job table beside it."""

from __future__ import annotations

import gzip
import lzma
from pathlib import Path

from rltuned.traces import load_trace

PAI = Path(__file__).resolve().parents[1] / "fixtures" / "traces" / "pai"
TASKS = PAI / "pai_task_table.csv"


def test_counts_are_of_task_rows() -> None:
    report = load_trace(TASKS).report
    assert (report.rows, report.loaded, report.malformed) == (11, 4, 0)
    assert report.filtered == {
        "merged_task": 3,
        "cpu_only": 1,
        "never_started": 1,
        "still_running": 1,
        "zero_duration": 1,
    }


def test_tasks_aggregate_into_jobs() -> None:
    jobs = {j.name: j for j in load_trace(TASKS).jobs}
    assert list(jobs) == ["jobH", "jobB", "jobA", "jobF"]  # by earliest task start
    job_a = jobs["jobA"]
    # worker: 4 x 50% GPU = 2 GPUs, 4 x 600% CPU, 4 x 29.296875 GB; ps: 1 x 400% CPU, 10 GB, no GPU
    assert (job_a.gpus, job_a.cpus, job_a.mem_mb) == (2, 28, 120_000 + 10_240)
    assert (job_a.submit, job_a.runtime, job_a.gpu_type, job_a.user) == (90.0, 620.0, "V100", "userX")
    job_b = jobs["jobB"]  # 100% + 25% of a GPU in two tasks: each task rounds up on its own
    assert (job_b.gpus, job_b.submit, job_b.runtime, job_b.gpu_type) == (2, 50.0, 1000.0, "P100")
    assert jobs["jobF"].gpus == 1  # 3 x 33.333333% is one GPU, not two
    assert (jobs["jobH"].gpu_type, jobs["jobH"].user) == (None, "")  # mixed types; not in the job table


def test_compressed_tables_found_beside_each_other(tmp_path: Path) -> None:
    (tmp_path / "pai_task_table.csv.xz").write_bytes(lzma.compress(TASKS.read_bytes()))
    (tmp_path / "pai_job_table.csv.gz").write_bytes(gzip.compress((PAI / "pai_job_table.csv").read_bytes()))
    jobs = {j.name: j for j in load_trace(tmp_path / "pai_task_table.csv.xz").jobs}
    assert (jobs["jobA"].user, jobs["jobB"].user) == ("userX", "userY")


def test_without_job_table_users_are_empty(tmp_path: Path) -> None:
    alone = tmp_path / "pai_task_table.csv"
    alone.write_bytes(TASKS.read_bytes())
    trace = load_trace(alone)
    assert trace.report.loaded == 4
    assert {j.user for j in trace.jobs} == {""}
