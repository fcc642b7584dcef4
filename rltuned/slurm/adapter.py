"""The seam between the daemon and a Slurm installation: read the queue and nodes, write job updates.

A backend returns what Slurm printed in the shape of 22.05's `squeue --json` / `sinfo --json` documents,
whatever it really talked to (the JSON commands, pinned text formats, or pyslurm), so that one pure
parser (`parse.snapshot_from_slurm`) builds the snapshot for every backend. Writes are one job at a time
and report an `Outcome` instead of raising: a failed update is counted and logged by the caller, never
retried in a loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol


@dataclass(frozen=True)
class SlurmRead:
    """One read of slurmctld: documents shaped like `squeue --json` and `sinfo --json`.

    `scontrol_nodes` is `scontrol show node -d -o` text when the backend needed it for GRES, else None.
    `now` is the wall-clock time (epoch seconds) of the read; `durations` the seconds each command took.
    """

    squeue: Mapping[str, Any]
    sinfo: Mapping[str, Any]
    now: float
    source: str
    """"json", "text" (the pinned `-o`/`-O` formats) or "pyslurm"."""
    scontrol_nodes: str | None = None
    durations: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class HistoryRead:
    """One read of Slurm's accounting: `sshare` and `sacct` text (`slurm/history.py` parses them)."""

    sshare: str
    sacct: str
    durations: Mapping[str, float] = field(default_factory=dict)


class Outcome(StrEnum):
    """How one `scontrol update` (or hold/release) ended."""

    OK = "ok"
    GONE = "gone"
    """The job finished, started or vanished between our read and our write."""
    DENIED = "denied"
    """Slurm refused: rltuned's user is not privileged enough."""
    HELD = "held"
    """The job is held; its priority cannot be set."""
    ERROR = "error"
    """Anything else, including a timeout or an unreachable slurmctld."""


@dataclass(frozen=True)
class UpdateResult:
    outcome: Outcome
    message: str = ""
    """Slurm's stderr (or the reason) for anything but OK, one line."""
    seconds: float = 0.0


class SlurmAdapter(Protocol):
    """What the daemon needs from Slurm; `read` raises `SlurmError` when slurmctld cannot be read."""

    @property
    def name(self) -> str: ...

    def read(self) -> SlurmRead: ...

    def read_history(self, since: float) -> HistoryRead:
        """Fair-share usage and the jobs finished since `since` (epoch seconds); `SlurmError` when the
        accounting cannot be read (no slurmdbd, a timeout, a backend that cannot)."""
        ...

    def update_job(self, job_id: int, fields: Mapping[str, str]) -> UpdateResult:
        """`scontrol update jobid=N key=value ...`, in the given order."""
        ...

    def hold(self, job_id: int) -> UpdateResult: ...

    def release(self, job_id: int) -> UpdateResult: ...

    def job_state(self, job_id: int) -> str | None:
        """The job's current state word (`PENDING`, `RUNNING`, ...), None if Slurm no longer knows it.

        Asked just before a placement update, which must never reach a job that has started.
        """
        ...
