"""The Standard Workload Format of the Parallel Workloads Archive: 18 whitespace-separated fields.

Lines starting with ';' are header comments; fields past the 18th (extended logs such as MetaCentrum's,
which append node lists, queue names and PBS resource strings) are ignored. `-1` means unknown.
HPC logs count processors, not GPUs: the requested processors (field 8, else the allocated ones, field 5)
become `gpus`, so a CPU log can drive a GPU simulation as a stand-in for its size and runtime mix.
The requested time (field 9) is the job's `time_limit` (None if -1 or 0), which is what these logs are
bundled for. A run time of -1 or 0 is filtered as `unknown_runtime`, and so is one of exactly
-(submit + wait), an end time never recorded (MetaCentrum's wagap-2013 log has two such rows); any other
negative number is a corrupt field and makes the row malformed.
User and group numbers become `u<N>` and `g<N>` (user and account); the queue and partition fields
are not carried over, so jobs are not restricted to a partition.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import IO

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, numbered_lines, open_text
from rltuned.traces.fields import Parsed, RowError, collect, number

FORMAT = "swf"
FIELDS = 18
UNKNOWN = -1.0


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        jobs = collect(policy, _records(handle), _job, FIELDS, at_least=True)
    return policy.finish(FORMAT, jobs)


def looks_like_record(line: str) -> bool:
    """A data line: at least 18 fields, the first 18 of them numbers."""
    fields = line.split()
    if len(fields) < FIELDS:
        return False
    try:
        for field in fields[:FIELDS]:
            float(field)
    except ValueError:
        return False
    return True


def _records(handle: IO[str]) -> Iterator[tuple[int, list[str]]]:
    for line, text in numbered_lines(handle):
        if not text.lstrip().startswith(";"):
            yield line, text.split()


def _job(line: int, fields: list[str], job_id: int) -> Parsed:
    if _never_ended(fields):
        return "unknown_runtime"
    runtime = _field(fields, 4, "run time")
    processors = _field(fields, 8, "requested processors")
    if processors == UNKNOWN:
        processors = _field(fields, 5, "allocated processors")
    limit = _field(fields, 9, "requested time")
    submit = _field(fields, 2, "submit time")
    if runtime in (UNKNOWN, 0):
        return "unknown_runtime"
    if processors in (UNKNOWN, 0):
        return "unknown_processors"
    if not processors.is_integer():
        raise RowError(f"requested processors (field 8): expected a whole number, got {processors}")
    return Job(
        id=job_id,
        submit=submit,
        gpus=int(processors),
        runtime=runtime,
        time_limit=limit if limit > 0 else None,
        name=fields[0],
        user=_tag("u", fields[11]),
        account=_tag("g", fields[12]),
    )


def _never_ended(fields: list[str]) -> bool:
    """A run time of exactly -(submit + wait): the log computed end - start with an end time of 0, one
    never recorded (MetaCentrum's wagap-2013 log has two such rows)."""
    try:
        runtime, submit, wait = (float(fields[i]) for i in (3, 1, 2))
    except ValueError:
        return False  # the fields' own checks name the bad one
    return runtime < 0 and submit > 0 and runtime == -(submit + max(wait, 0.0))


def _field(fields: list[str], position: int, name: str) -> float:
    """Field `position` (1-based, as the SWF spec numbers them); -1 is unknown, other negatives are errors."""
    value = number(fields[position - 1], f"{name} (field {position})")
    if value < 0 and value != UNKNOWN:
        raise RowError(f"{name} (field {position}): expected a value >= 0 or -1, got {fields[position - 1]}")
    return value


def _tag(prefix: str, value: str) -> str:
    return "" if value.strip() in ("-1", "") else f"{prefix}{value}"
