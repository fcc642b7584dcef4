"""The writes a daemon in enforce mode really made, read back from its JSON log (`job_updated` events: what
Slurm accepted, with the wall-clock time of each).

Replaying these at their logged times instead of letting the simulated daemon decide again separates the
simulator's error from the daemon's own timing: the real daemon ticks on the wall clock, its reads take
tens of milliseconds and its writes go out one `scontrol update` at a time, so a re-decided tick can rank
two jobs the other way and the difference propagates (docs/fidelity.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from rltuned.core.levers import LEVERS, Action
from rltuned.errors import TraceError
from rltuned.traces.base import numbered_lines, open_text
from rltuned.traces.fields import RowError, timestamp


@dataclass(frozen=True, slots=True)
class LoggedWrites:
    writes: tuple[tuple[float, Action], ...]
    """(seconds since the epoch, the write) in log order, for the workload's jobs."""
    unknown_jobs: int
    """Writes to jobs the workload does not hold (not GPU jobs, or outside the sacct file)."""


def load_writes(path: Path, job_ids: Mapping[str, int]) -> LoggedWrites:
    """`job_ids` maps Slurm's JobID (as sacct prints it) to the workload's job id. Lines that are not
    JSON objects (a traceback, a shell's noise) are skipped; a `job_updated` event without a valid job,
    lever, value or timestamp is an error naming the file and line."""
    writes: list[tuple[float, Action]] = []
    unknown = 0
    try:
        with open_text(path) as handle:
            for line, text in numbered_lines(handle):
                event = _event(text)
                if event is None or event.get("event") != "job_updated":
                    continue
                try:
                    at, slurm_id, action = _write(event)
                except (RowError, KeyError, TypeError, ValueError) as exc:
                    raise TraceError(str(path), line, f"job_updated: {exc}") from None
                job = job_ids.get(slurm_id)
                if job is None:
                    unknown += 1
                    continue
                writes.append((at, LEVERS[action[0]].action(job, action[1])))
    except OSError as exc:
        raise TraceError(str(path), None, exc.strerror or str(exc)) from None
    return LoggedWrites(tuple(writes), unknown)


def _event(text: str) -> dict[str, object] | None:
    text = text.strip()
    if not text.startswith("{"):
        return None
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) else None


def _wall_clock(stamp: str) -> float:
    """The daemon logs UTC; sacct and slurmctld print the host's local time without a zone, which the
    loaders read as if it were UTC (`traces.fields.timestamp`). The same instant on the same scale: the
    local wall-clock time of the logged moment, read the same way."""
    try:
        moment = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        raise ValueError(f"timestamp: expected an ISO date-time, got {stamp!r}") from None
    if moment.tzinfo is not None:
        moment = moment.astimezone().replace(tzinfo=None)
    return timestamp(moment.isoformat(), "timestamp")


def _write(event: Mapping[str, object]) -> tuple[float, str, tuple[str, int | bool | str]]:
    stamp = event["timestamp"]
    if not isinstance(stamp, str):
        raise ValueError(f"timestamp must be a string, got {stamp!r}")
    at = _wall_clock(stamp)
    slurm_id = event["jobid"]
    if isinstance(slurm_id, bool) or not isinstance(slurm_id, int | str):
        raise ValueError(f"jobid must be a job id, got {slurm_id!r}")
    kind = event["action"]
    if not isinstance(kind, str) or kind not in LEVERS:
        raise ValueError(f"action must be one of {', '.join(LEVERS)}, got {kind!r}")
    value = event["value"]
    expected = {"priority": int, "site_factor": int, "oversubscribe": bool, "excluded_nodes": str}[kind]
    if not isinstance(value, int | str) or type(value) is not expected:
        raise ValueError(f"{kind} value must be {expected.__name__}, got {value!r}")
    return at, str(slurm_id), (kind, value)
