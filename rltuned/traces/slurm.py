"""A Slurm cluster's own job history: `sacct --parsable2` output or the `jobcomp/filetxt` log.

sacct (one header line, '|'-separated); the recommended call is

    sacct -a -X -P -S 2024-01-01 -E now \\
      -o JobID,User,Account,Partition,QOS,Submit,Start,End,Elapsed,Timelimit,AllocTRES,ReqTRES,State

JobID, Submit and Start are required, plus End or Elapsed and AllocTRES or ReqTRES; the other columns
are optional. Job steps (a '.' in JobID) are filtered as `job_step`, so `-X` is optional too.
The jobcomp log has one `Key=Value` record per line (JobId, UserId=name(uid), JobState, Partition,
TimeLimit, StartTime, EndTime, SubmitTime, Tres, Account, QOS, ...); logs of Slurm versions without
SubmitTime use EligibleTime. GPUs come from the TRES string (`gres/gpu=2`, or `gres/gpu:a100=2`, which
also names the GPU type; the type comes from ReqTRES when the file has it, as AllocTRES names the
model a job got, not the one it asked for); jobs without a GPU TRES are filtered as `cpu_only`. Times
are the cluster's wall clock, read as UTC. The requested time limit becomes `time_limit`, and the TRES's
`node=` the node count the job held (`nodes`: a 4-GPU job on one node could not have run on two 2-GPU
nodes).
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from rltuned.domain import Job
from rltuned.errors import TraceError
from rltuned.traces.base import RowPolicy, Trace, numbered_lines, open_text
from rltuned.traces.fields import Parsed, RowError, collect, count, csv_table, number, timestamp

FORMAT = "slurm"
SACCT_REQUIRED = ("JobID", "Submit", "Start")
JOBCOMP_START = "JobId="
NO_TIME = frozenset({"", "Unknown", "None", "N/A"})
"""What sacct and jobcomp print for a time that has not come (a job not started or not ended)."""
_NO_LIMIT = frozenset({"", "UNLIMITED", "INFINITE", "PARTITION_LIMIT", "NONE", "-1"})
_LIVE = ("RUNNING", "SUSPENDED", "REQUEUED", "RESIZING")
_MEM_UNITS_MB = {"K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}


@dataclass(frozen=True, slots=True)
class Tres:
    """The parts of a TRES string a scheduler needs (`cpu=8,mem=64G,node=1,gres/gpu:a100=2`)."""

    gpus: int = 0
    gpu_type: str | None = None
    cpus: int = 0
    mem_mb: int = 0
    nodes: int = 0


def load(path: Path, lenient: bool) -> Trace:
    with open_text(path) as handle:
        first = next(numbered_lines(handle), (0, ""))[1]
    if first.startswith(JOBCOMP_START):
        return _load_jobcomp(path, lenient)
    return _load_sacct(path, lenient)


def looks_like_sacct(line: str) -> bool:
    return "|" in line and "JobID" in line.split("|")


def parse_tres(text: str, column: str = "TRES") -> Tres:
    """GPUs are the untyped `gres/gpu` total when given, else the sum of the typed counts."""
    total: int | None = None
    typed: dict[str, int] = {}
    cpus = mem_mb = nodes = 0
    for item in filter(None, text.strip().split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise RowError(f"{column}: expected name=value items like gres/gpu=2, got {item!r}")
        if key == "cpu":
            cpus = count(value, f"{column} cpu")
        elif key == "mem":
            mem_mb = memory_mb(value, f"{column} mem")
        elif key == "node":
            nodes = count(value, f"{column} node")
        elif key == "gres/gpu":
            total = count(value, f"{column} gres/gpu")
        elif key.startswith("gres/gpu:"):
            typed[key.removeprefix("gres/gpu:")] = count(value, f"{column} {key}")
    gpus = total if total is not None else sum(typed.values())
    gpu_type = next(iter(typed)) if len(typed) == 1 else None
    return Tres(gpus=gpus, gpu_type=gpu_type if gpus else None, cpus=cpus, mem_mb=mem_mb, nodes=nodes)


def memory_mb(text: str, column: str) -> int:
    """Slurm memory (`16G`, `128800M`, `1.50T`; no unit is MB), rounded up to whole MiB."""
    value = text.strip()
    scale = _MEM_UNITS_MB.get(value[-1:].upper())
    amount = number(value[:-1] if scale else value, column)
    if amount < 0:
        raise RowError(f"{column}: expected memory >= 0, got {text!r}")
    return math.ceil(amount * (scale or 1.0))


def time_limit(text: str, column: str) -> float | None:
    """A requested limit: as `slurm_seconds`, but 0 means "none given" (a zero limit would make every job
    look short enough to backfill)."""
    seconds = slurm_seconds(text, column)
    return seconds if seconds else None


def slurm_seconds(text: str, column: str) -> float | None:
    """Seconds of a Slurm time string (Timelimit, Elapsed), None for no limit.

    Slurm's grammar: `MM`, `MM:SS`, `HH:MM:SS`, `D-HH`, `D-HH:MM`, `D-HH:MM:SS`; a bare number is
    minutes, which is how jobcomp writes TimeLimit.
    """
    value = text.strip()
    if value.upper() in _NO_LIMIT:
        return None
    days, dash, clock = value.partition("-")
    if not dash:
        days, clock = "0", value
    parts = clock.split(":")
    if not (days.isdigit() and 1 <= len(parts) <= 3 and all(p.isdigit() for p in parts)):
        expected = "a Slurm time like 1-02:03:04, 02:03:04, 30:00 or UNLIMITED"
        raise RowError(f"{column}: expected {expected}, got {text!r}")
    numbers = [int(p) for p in parts]
    if dash:  # D-HH[:MM[:SS]]
        numbers += [0] * (3 - len(numbers))
    elif len(numbers) < 3:  # MM or MM:SS
        numbers = [0, *numbers, *([0] * (2 - len(numbers)))]
    hours, minutes, seconds = numbers
    return float(((int(days) * 24 + hours) * 60 + minutes) * 60 + seconds)


def _load_sacct(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        columns, rows = csv_table(path, handle, SACCT_REQUIRED, delimiter="|")
        for either in (("End", "Elapsed"), ("AllocTRES", "ReqTRES")):
            if not any(name in columns for name in either):
                raise TraceError(str(path), 1, f"expected a {' or '.join(either)} column; sacct -o needs it")

        def parse(line: int, row: list[str], job_id: int) -> Parsed:
            return _sacct_job({name: row[i] for name, i in columns.items()}, job_id)

        jobs = collect(policy, rows, parse, len(columns))
    return policy.finish(FORMAT, jobs)


def _sacct_job(row: dict[str, str], job_id: int) -> Parsed:
    name = row["JobID"].strip()
    if "." in name:
        return "job_step"
    tres_column = "AllocTRES" if row.get("AllocTRES") else "ReqTRES"  # never-started jobs have no AllocTRES
    tres = parse_tres(row.get(tres_column, ""), tres_column)
    gpu_type = tres.gpu_type
    if tres_column == "AllocTRES" and row.get("ReqTRES"):
        # Where the site accounts typed GPUs, AllocTRES names the model the job got, not the one it asked
        # for; a job that asked for any GPU must stay free to run on any.
        asked = parse_tres(row["ReqTRES"], "ReqTRES")
        gpu_type = asked.gpu_type if asked.gpus else gpu_type
    limit = time_limit(row.get("Timelimit", ""), "Timelimit")
    submit = timestamp(row["Submit"], "Submit")
    if tres.gpus == 0:
        return "cpu_only"
    if row["Start"].strip() in NO_TIME:
        return "never_started"
    start = timestamp(row["Start"], "Start")
    end = row.get("End")
    if (end is not None and end.strip() in NO_TIME) or row.get("State", "").startswith(_LIVE):
        return "still_running"
    if row.get("Elapsed", "").strip():  # Slurm's own count, which leaves out suspended time
        runtime = slurm_seconds(row["Elapsed"], "Elapsed") or 0.0
    else:
        runtime = _elapsed(start, end or "", "End")
    if runtime == 0:
        return "zero_duration"
    return Job(
        id=job_id,
        submit=submit,
        gpus=tres.gpus,
        runtime=runtime,
        time_limit=limit,
        name=name,
        user=row.get("User", ""),
        account=row.get("Account", ""),
        partition=row.get("Partition", ""),
        qos=row.get("QOS", ""),
        gpu_type=gpu_type,
        cpus=tres.cpus,
        mem_mb=tres.mem_mb,
        nodes=tres.nodes,
    )


def _load_jobcomp(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        jobs = collect(policy, _jobcomp_lines(handle), _jobcomp_job, 1)
    return policy.finish(FORMAT, jobs)


def _jobcomp_lines(handle: IO[str]) -> Iterator[tuple[int, list[str]]]:
    for line, text in numbered_lines(handle):
        yield line, [text]


def jobcomp_record(text: str) -> dict[str, str]:
    """Split `Key=Value Key=Value ...`; a space-separated word without `Key=` continues the last value.

    That keeps job names and work directories with spaces in one piece.
    """
    record: dict[str, str] = {}
    key = ""
    for word in text.split(" "):
        name, sep, value = word.partition("=")
        if sep and name.isalnum():
            key = name
            record[key] = value
        elif key and word:
            record[key] += " " + word
    return record


def _jobcomp_job(line: int, row: list[str], job_id: int) -> Parsed:
    record = jobcomp_record(row[0])
    missing = [k for k in ("JobId", "StartTime", "EndTime") if k not in record]
    if missing:
        expected = "a jobcomp record with JobId, StartTime and EndTime"
        raise RowError(f"expected {expected}; missing {', '.join(missing)}")
    tres = parse_tres(record.get("Tres", ""), "Tres")
    limit = time_limit(record.get("TimeLimit", ""), "TimeLimit")
    if tres.gpus == 0:
        return "cpu_only"
    if record["StartTime"] in NO_TIME:
        return "never_started"
    if record["EndTime"] in NO_TIME:
        return "still_running"
    start = timestamp(record["StartTime"], "StartTime")
    runtime = _elapsed(start, record["EndTime"], "EndTime")
    if runtime == 0:
        return "zero_duration"
    submitted = record.get("SubmitTime") or record.get("EligibleTime") or record["StartTime"]
    return Job(
        id=job_id,
        submit=timestamp(submitted, "SubmitTime"),
        gpus=tres.gpus,
        runtime=runtime,
        time_limit=limit,
        name=record["JobId"],
        user=record.get("UserId", "").partition("(")[0],
        account=record.get("Account", ""),
        partition=record.get("Partition", ""),
        qos=record.get("QOS", ""),
        gpu_type=tres.gpu_type,
        cpus=tres.cpus,
        mem_mb=tres.mem_mb,
        nodes=tres.nodes,
    )


def _elapsed(start: float, end_text: str, column: str) -> float:
    runtime = timestamp(end_text, column) - start
    if runtime < 0:
        raise RowError(f"{column}: expected a time at or after the start, got {end_text!r}")
    return runtime
