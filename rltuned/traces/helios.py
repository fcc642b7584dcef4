"""SenseTime Helios `cluster_log.csv` (SC'21; S-Lab-System-Group/HeliosData), one file per cluster.

Columns (HeliosData README): `job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,
end_time,duration,queue`, times as `YYYY-MM-DD HH:MM:SS` (read as UTC), `duration` in seconds.
The log covers every Slurm job, CPU-only ones included: `gpu_num` 0 is filtered as `cpu_only`.
`duration` is the runtime; when the column is absent or empty, `end_time - start_time` is used.
`vc` (the virtual cluster) is the job's account. There is no time limit or GPU type.
"""

from __future__ import annotations

from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, open_text
from rltuned.traces.fields import Parsed, RowError, collect, count, csv_table, nonnegative, timestamp

FORMAT = "helios"
COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "submit_time", "start_time", "end_time")
# How pandas and Slurm exports spell "no start time".
_NO_TIME = frozenset({"", "None", "Unknown", "NaT", "nan"})


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        columns, rows = csv_table(path, handle, COLUMNS)
        at = {name: columns[name] for name in (*COLUMNS, "duration") if name in columns}

        def parse(line: int, row: list[str], job_id: int) -> Parsed:
            return _job(row, at, job_id)

        jobs = collect(policy, rows, parse, len(columns))
    return policy.finish(FORMAT, jobs)


def _job(row: list[str], at: dict[str, int], job_id: int) -> Parsed:
    gpus = count(row[at["gpu_num"]], "gpu_num")
    cpus = count(row[at["cpu_num"]], "cpu_num")
    submit = timestamp(row[at["submit_time"]], "submit_time")
    if gpus == 0:
        return "cpu_only"
    start = row[at["start_time"]].strip()
    if start in _NO_TIME:
        return "never_started"
    runtime = _runtime(row, at, timestamp(start, "start_time"))
    if runtime is None:
        return "still_running"
    if runtime == 0:
        return "zero_duration"
    return Job(
        id=job_id,
        submit=submit,
        gpus=gpus,
        runtime=runtime,
        name=row[at["job_id"]],
        user=row[at["user"]],
        account=row[at["vc"]],
        cpus=cpus,
    )


def _runtime(row: list[str], at: dict[str, int], start: float) -> float | None:
    """`duration`, else end - start; None for a job that has neither (still running when exported)."""
    if "duration" in at and row[at["duration"]].strip():
        return nonnegative(row[at["duration"]], "duration")
    end = row[at["end_time"]].strip()
    if end in _NO_TIME:
        return None
    runtime = timestamp(end, "end_time") - start
    if runtime < 0:
        raise RowError(f"expected end_time >= start_time, got {end} < {row[at['start_time']]}")
    return runtime
