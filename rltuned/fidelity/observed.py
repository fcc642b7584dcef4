"""What a real Slurm did with a workload, from `sacct -P`: each job as submitted (submit time, time limit,
request shape, true runtime) and where and when it really ran.

The jobs come from the trace loader (`traces/slurm.py`, so the same rows are GPU jobs and the same rows
are errors naming file and line); the real start, end and nodes are read beside them by JobID.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from rltuned.domain import Job
from rltuned.errors import TraceError
from rltuned.slurm.hostlist import expand
from rltuned.traces import load_trace
from rltuned.traces.base import TraceReport, numbered_lines, open_text
from rltuned.traces.fields import RowError, timestamp
from rltuned.traces.slurm import NO_TIME, looks_like_sacct

NODELIST_EMPTY = frozenset({"", "None assigned", "(null)"})


@dataclass(frozen=True, slots=True)
class Observed:
    """One job as Slurm ran it. `job.name` is its Slurm JobID; `job.runtime` what it really ran."""

    job: Job
    start: float
    nodes: tuple[str, ...]
    """Where it ran (sacct's NodeList, expanded); empty when the file has no NodeList column."""


@dataclass(frozen=True, slots=True)
class Workload:
    jobs: tuple[Observed, ...]
    report: TraceReport
    has_nodes: bool


def load_sacct(path: Path) -> Workload:
    """Strict: a malformed row is an error naming the file and line, since a fidelity figure over a
    silently shortened workload would mislead."""
    with open_text(path) as handle:
        first = next(numbered_lines(handle), (0, ""))[1]
    if not looks_like_sacct(first):
        raise TraceError(str(path), 1, "expected `sacct -P` output with a header line naming JobID")
    trace = load_trace(path, "slurm")
    where = _where_it_ran(path)
    jobs = []
    for job in trace.jobs:
        start, nodes = where[job.name]
        jobs.append(Observed(job, start, nodes))
    has_nodes = "NodeList" in first.split("|")
    return Workload(tuple(jobs), trace.report, has_nodes)


def _where_it_ran(path: Path) -> dict[str, tuple[float, tuple[str, ...]]]:
    out: dict[str, tuple[float, tuple[str, ...]]] = {}
    with open_text(path) as handle:
        lines = numbered_lines(handle)
        _, header = next(lines)
        columns = {name: i for i, name in enumerate(header.split("|"))}
        for line, text in lines:
            row = text.split("|")
            if len(row) != len(columns):
                continue  # the loader has already refused or counted it
            job_id = row[columns["JobID"]].strip()
            start = row[columns["Start"]].strip()
            if "." in job_id or start in NO_TIME:
                continue
            nodelist = row[columns["NodeList"]].strip() if "NodeList" in columns else ""
            try:
                nodes = () if nodelist in NODELIST_EMPTY else expand(nodelist)
                out[job_id] = (timestamp(start, "Start"), nodes)
            except (ValueError, RowError) as exc:
                raise TraceError(str(path), line, str(exc)) from None
    return out
