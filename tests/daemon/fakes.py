"""A scripted SlurmAdapter over recorded Slurm 22.05 output, for unit tests of the engine's logic.

Real-Slurm behaviour is covered by tests/daemon/test_real_slurm.py; this fake only lets a test say what
Slurm answers (an error, a job that vanished) and see exactly what would have been written.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from rltuned.errors import SlurmError
from rltuned.slurm.adapter import HistoryRead, Outcome, SlurmRead, UpdateResult
from tests.slurm import samples


@dataclass
class FakeAdapter:
    squeue: dict[str, Any] = field(default_factory=samples.squeue)
    sinfo: dict[str, Any] = field(default_factory=samples.sinfo)
    now: float = samples.NOW
    fail_read: str | None = None
    answer: Callable[[int, Mapping[str, str]], UpdateResult] = lambda job, fields: UpdateResult(Outcome.OK)
    states: dict[int, str] = field(default_factory=dict)
    writes: list[tuple[int, dict[str, str]]] = field(default_factory=list)
    name: str = "fake"
    history: HistoryRead = field(
        default_factory=lambda: HistoryRead(
            "Account|User|GrpTRESRaw\n", "User|Account|ElapsedRaw|State|AllocTRES|End\n"
        )
    )
    fail_history: str | None = None
    history_asked: list[float] = field(default_factory=list)
    own_priority: dict[int, int] = field(default_factory=dict)
    """Each job's priority as recorded (multifactor's), which a release gives back."""

    def __post_init__(self) -> None:
        self.own_priority = {job["job_id"]: job["priority"] for job in self.squeue["jobs"]}

    def read(self) -> SlurmRead:
        if self.fail_read:
            raise SlurmError(self.fail_read)
        return SlurmRead(copy.deepcopy(self.squeue), copy.deepcopy(self.sinfo), self.now, "json")

    def read_history(self, since: float) -> HistoryRead:
        self.history_asked.append(since)
        if self.fail_history:
            raise SlurmError(self.fail_history)
        return self.history

    def update_job(self, job_id: int, fields: Mapping[str, str]) -> UpdateResult:
        result = self.answer(job_id, fields)
        if result.outcome == Outcome.OK:
            self.writes.append((job_id, dict(fields)))
            for job in self.squeue["jobs"]:  # Slurm shows the new priority on the next read
                if job["job_id"] == job_id and "Priority" in fields:
                    job["priority"] = int(fields["Priority"])
        return result

    def hold(self, job_id: int) -> UpdateResult:
        self.writes.append((job_id, {"hold": ""}))
        for job in self.squeue["jobs"]:  # a held job shows priority 0
            if job["job_id"] == job_id:
                job["priority"] = 0
        return UpdateResult(Outcome.OK)

    def release(self, job_id: int) -> UpdateResult:
        self.writes.append((job_id, {"release": ""}))
        for job in self.squeue["jobs"]:  # multifactor recomputes the job's own priority
            if job["job_id"] == job_id:
                job["priority"] = self.own_priority.get(job_id, job["priority"])
        return UpdateResult(Outcome.OK)

    def ping(self) -> bool:
        return self.fail_read is None

    def job_state(self, job_id: int) -> str | None:
        if job_id in self.states:
            return self.states[job_id]
        return next((j["job_state"] for j in self.squeue["jobs"] if j["job_id"] == job_id), None)
