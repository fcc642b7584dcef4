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

import numpy as np

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
AFTER_COMPLETION_S = 0.1
"""A main-scheduler start this soon after a completion came from the completion's own pass: on the lab
(no epilog) those started 8-75 ms after slurmctld logged the completion."""
SAME_PASS_S = 0.05
"""Starts this close together came from one pass (a pass starts its jobs within milliseconds)."""
MIN_PASSES = 10
"""Fewer passes than this can line up on some candidate period by chance (one in a few hundred random
sets of 10 reaches the concentration threshold; one in three of 5)."""


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


@dataclass(frozen=True, slots=True)
class BackgroundLoop:
    """slurmctld's background loop as its passes show in the log (`SlurmParams.background_s`)."""

    period_s: float
    phase_s: float
    """A time at which it ticked."""
    passes: int
    """The main-scheduler passes it was fitted on."""
    concentration: float
    """How well they sit on one grid: 1 = exactly, 0 = spread evenly over the second."""


PERIODS_S = tuple(1.0 + k * 1e-4 for k in range(101))
"""The background loop periods tried: 1 s plus up to 10 ms of housekeeping."""


def fit_background(times: CtldTimes, periods: Sequence[float] = PERIODS_S) -> BackgroundLoop | None:
    """The loop's period and phase from the main scheduler's passes that no completion triggered (those
    came from the loop's periodic or requested passes): the candidate period on which they line up best,
    with their circular mean as the phase. Its period is a second plus its housekeeping (1.002-1.003 s on
    the lab), so over a few minutes the phase drifts by a large part of a second: a grid of exactly 1 s
    misplaces passes. None (the model's 1 s grid from the first submit) when fewer than `MIN_PASSES`
    such passes, or they do not line up (concentration < 0.9)."""
    ends = np.sort(np.fromiter(times.end.values(), float, len(times.end)))
    looped = []
    for job, at in times.start.items():
        if times.started_by[job] != MAIN:
            continue
        before = np.searchsorted(ends, at, side="right")
        if before and at - ends[before - 1] < AFTER_COMPLETION_S:
            continue
        looped.append(at)
    looped.sort()
    passes = [t for i, t in enumerate(looped) if i == 0 or t - looped[i - 1] >= SAME_PASS_S]
    if len(passes) < MIN_PASSES:
        return None
    origin = passes[0]
    rel = np.array(passes) - origin
    candidates = np.array(periods)
    means = np.exp(2j * np.pi * rel[None, :] / candidates[:, None]).mean(axis=1)  # one per period
    k = int(np.argmax(np.abs(means)))  # the first of equals, as the candidates are listed
    concentration, period = float(abs(means[k])), float(candidates[k])
    if concentration < 0.9:
        return None
    phase = float(np.angle(means[k])) * period / (2 * np.pi)
    return BackgroundLoop(period, origin + phase, len(passes), concentration)
