"""Millisecond times from slurmctld's own log, where sacct has whole seconds.

With a daemon writing several times a second, whole seconds hide the order that decides a start: a job
submitted at 46.08 and steered by an `scontrol update` at 46.46 was started by the main scheduler's pass
at 46.96, after the update; on sacct's times the job arrives at 46 and the simulator starts it before the
update lands. slurmctld logs (at `SlurmctldDebug=info`, Slurm 22.05's default `LogTimeFormat=iso8601_ms`)
every submit, every start with the scheduler that made it, and every completion:

    [2026-11-24T15:59:46.076] _slurm_rpc_submit_batch_job: JobId=182 InitPrio=1000 usec=448
    [2026-11-24T15:59:46.957] sched: Allocate JobId=182 NodeList=k80-1 #CPUs=1 Partition=main
    [2026-11-24T16:01:19.320] sched/backfill: _start_job: Started JobId=230 in main on m40-1
    [2026-11-24T15:59:52.002] _job_complete: JobId=182 done
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from rltuned.errors import TraceError
from rltuned.fidelity.observed import Observed, Workload
from rltuned.traces.base import numbered_lines, open_text
from rltuned.traces.fields import RowError, timestamp

_LINE = re.compile(r"^\[(?P<at>[0-9T:.\-]+)\] (?P<text>.*)$")
_SUBMIT = re.compile(r"_slurm_rpc_submit_batch_job: JobId=(\d+) ")
_MAIN = re.compile(r"^sched: Allocate JobId=(\d+) ")
_BACKFILL = re.compile(r"^sched/backfill: _start_job: Started JobId=(\d+) ")
_DONE = re.compile(r"^_job_complete: JobId=(\d+) done")

MAIN, BACKFILL = "main", "backfill"


@dataclass(frozen=True, slots=True)
class CtldTimes:
    """Seconds since the epoch per Slurm JobID (as sacct prints it)."""

    submit: dict[str, float]
    start: dict[str, float]
    started_by: dict[str, str]
    """`main` (the main scheduler) or `backfill` (sched/backfill)."""
    end: dict[str, float]


def save_job_lines(log: Path, job_ids: Sequence[int], out: Path) -> bool:
    """Copy the lines of slurmctld's log that name one of `job_ids` to `out` (the lab's log also holds
    other runs). False when the log cannot be read (another host's Slurm, or not root)."""
    wanted = re.compile(r"JobId=(" + "|".join(str(i) for i in job_ids) + r")\b")
    try:
        with open_text(log) as handle:
            lines = [text for _, text in numbered_lines(handle) if wanted.search(text)]
    except OSError:
        return False
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return True


def load_ctld_log(path: Path) -> CtldTimes:
    """Lines without a bracketed time, or of other events, are skipped (the log holds much else); a
    bracketed time that does not parse is an error naming the file and line. A job submitted, started or
    ended twice (a requeue) keeps its last time."""
    times = CtldTimes({}, {}, {}, {})
    try:
        with open_text(path) as handle:
            for line, text in numbered_lines(handle):
                found = _LINE.match(text)
                if found is None:
                    continue
                body = found["text"]
                event = _event(body)
                if event is None:
                    continue
                try:
                    at = timestamp(found["at"], "time")
                except RowError as exc:
                    raise TraceError(str(path), line, str(exc)) from None
                kind, job = event
                if kind == "submit":
                    times.submit[job] = at
                elif kind == "end":
                    times.end[job] = at
                else:
                    times.start[job] = at
                    times.started_by[job] = kind
    except OSError as exc:
        raise TraceError(str(path), None, exc.strerror or str(exc)) from None
    return times


def _event(body: str) -> tuple[str, str] | None:
    for kind, pattern in (("submit", _SUBMIT), (MAIN, _MAIN), (BACKFILL, _BACKFILL), ("end", _DONE)):
        found = pattern.search(body) if kind == "submit" else pattern.match(body)
        if found is not None:
            return kind, found[1]
    return None


def refine(workload: Workload, times: CtldTimes) -> tuple[Workload, int]:
    """The workload with slurmctld's submit, start and end times where the log has all three for a job
    (the runtime becomes end - start); returns it and how many jobs kept sacct's whole seconds."""
    jobs = []
    kept = 0
    for o in workload.jobs:
        name = o.job.name
        if name in times.submit and name in times.start and name in times.end:
            start = times.start[name]
            job = replace(o.job, submit=times.submit[name], runtime=max(times.end[name] - start, 0.0))
            jobs.append(Observed(job, start, o.nodes))
        else:
            jobs.append(o)
            kept += 1
    return Workload(tuple(jobs), workload.report, workload.has_nodes), kept
