"""Alibaba PAI GPU trace 2020 (`cluster-trace-gpu-v2020`, NSDI'22): headerless task and job tables.

Load the task table (`job_name,task_name,inst_num,status,start_time,end_time,plan_cpu,plan_mem,
plan_gpu,gpu_type`); the job table (`job_name,inst_id,user,status,start_time,end_time`) is read from the
same folder (`pai_job_table.csv[.xz|.gz|.bz2]`) only for the user, which stays empty without it.
A job is the sum of its tasks. `plan_gpu` and `plan_cpu` are percent of one GPU / core per instance,
so a task needs `ceil(plan / 100 * inst_num)` of each (a fractional GPU counts as a whole one);
`plan_mem` is GB per instance. PAI records no submit time: `submit` is the earliest task start, so
PAI jobs never waited in the original cluster and their queueing delay cannot be compared.
`runtime` runs from that start to the last task end. The GPU type is the GPU tasks' `gpu_type` when
they agree (MISC, T4, P100, V100, V100M32), else None.
Report counts are of task rows: a loaded job's extra tasks are counted as `merged_task`, and a filtered
job's reason is counted once per task, so rows = loaded + malformed + filtered. Malformed rows of the
job table are counted in `malformed` too (but not in `rows`).
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass, field
from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, open_text
from rltuned.traces.fields import collect, count, csv_rows, nonnegative

FORMAT = "pai"
TASK_COLUMNS = (
    "job_name",
    "task_name",
    "inst_num",
    "status",
    "start_time",
    "end_time",
    "plan_cpu",
    "plan_mem",
    "plan_gpu",
    "gpu_type",
)
JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
TASK_TABLE = "pai_task_table"
JOB_TABLE = "pai_job_table"
_USER = JOB_COLUMNS.index("user")
_COMPRESSED = ("", ".xz", ".gz", ".bz2")


@dataclass(slots=True)
class _Tasks:
    """One job's tasks as read so far; tasks of a job need not be adjacent in the table."""

    rows: int = 0
    start: float | None = None
    end: float | None = None
    unfinished: bool = False
    gpus: int = 0
    cpus: int = 0
    mem_mb: int = 0
    gpu_types: set[str] = field(default_factory=set)


def looks_like_task_row(line: str) -> bool:
    """The shape of a task-table row: 10 fields, numbers (or blanks) where the schema has numbers."""
    fields = next(csv.reader([line]), [])
    if len(fields) != len(TASK_COLUMNS):
        return False
    try:
        for value in (fields[2], *fields[4:9]):
            if value:
                float(value)
    except ValueError:
        return False
    return True


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    tasks: dict[str, _Tasks] = {}

    def parse(line: int, row: list[str], job_id: int) -> str:
        _add_task(tasks, row)
        return "task"  # a placeholder: rows are accounted per job below, once all its tasks are in

    with open_text(path) as handle:
        collect(policy, csv_rows(path, handle), parse, len(TASK_COLUMNS))
    policy.filtered.pop("task", None)
    users = _users(path, set(tasks), policy)
    jobs: list[Job] = []
    for name, job in tasks.items():
        reason = _reject(job)
        if reason:
            policy.filtered[reason] += job.rows
            continue
        if job.rows > 1:
            policy.filtered["merged_task"] += job.rows - 1
        jobs.append(_job(len(jobs), name, job, users.get(name, "")))
    return policy.finish(FORMAT, jobs)


def _add_task(tasks: dict[str, _Tasks], row: list[str]) -> None:
    """Fold one task row into its job; a malformed row raises RowError before any job is touched."""
    instances = count(row[2], "inst_num")
    start = _optional(row[4], "start_time")
    end = _optional(row[5], "end_time")
    cpu, mem, gpu = (_optional(row[i], TASK_COLUMNS[i]) or 0.0 for i in (6, 7, 8))
    job = tasks.setdefault(row[0], _Tasks())
    job.rows += 1
    if start is not None:
        job.start = start if job.start is None else min(job.start, start)
        if end is None:
            job.unfinished = True
        else:
            job.end = end if job.end is None else max(job.end, end)
    gpus = _ceil(gpu / 100 * instances)
    job.gpus += gpus
    job.cpus += _ceil(cpu / 100 * instances)
    job.mem_mb += _ceil(mem * 1024 * instances)
    if gpus and row[9].strip():
        job.gpu_types.add(row[9].strip())


def _reject(job: _Tasks) -> str:
    """Why a job is not usable ('' if it is); the same reasons, in the same order, as the other loaders."""
    if job.gpus == 0:
        return "cpu_only"
    if job.start is None:
        return "never_started"
    if job.unfinished or job.end is None:
        return "still_running"
    if job.end <= job.start:
        return "zero_duration"
    return ""


def _job(job_id: int, name: str, job: _Tasks, user: str) -> Job:
    assert job.start is not None and job.end is not None, "only started, finished jobs are built"
    return Job(
        id=job_id,
        submit=job.start,
        gpus=job.gpus,
        runtime=job.end - job.start,
        name=name,
        user=user,
        gpu_type=next(iter(job.gpu_types)) if len(job.gpu_types) == 1 else None,
        cpus=job.cpus,
        mem_mb=job.mem_mb,
    )


def _users(task_path: Path, wanted: set[str], policy: RowPolicy) -> dict[str, str]:
    """Users of the wanted jobs from the job table beside the task table, if there is one."""
    job_path = job_table_for(task_path)
    if job_path is None:
        return {}
    jobs_policy = RowPolicy(job_path, policy.lenient)
    users: dict[str, str] = {}

    def parse(line: int, row: list[str], job_id: int) -> str:
        if row[0] in wanted:
            users.setdefault(row[0], row[_USER])
        return "user"

    with open_text(job_path) as handle:
        collect(jobs_policy, csv_rows(job_path, handle), parse, len(JOB_COLUMNS))
    policy.malformed += jobs_policy.malformed
    return users


def job_table_for(task_path: Path) -> Path | None:
    """The job table next to a task table: same naming (prefix, compression) first, then any compression."""
    folder = task_path.parent
    candidates = [folder / f"{JOB_TABLE}.csv{suffix}" for suffix in _COMPRESSED]
    if TASK_TABLE in task_path.name:
        candidates.insert(0, folder / task_path.name.replace(TASK_TABLE, JOB_TABLE))
    return next((c for c in candidates if c != task_path and c.is_file()), None)


def _optional(value: str, column: str) -> float | None:
    return nonnegative(value, column) if value.strip() else None


def _ceil(amount: float) -> int:
    """Round up, after rounding off float noise, so that 3 x 33.333333% is one GPU, not two."""
    return math.ceil(round(amount, 6))
