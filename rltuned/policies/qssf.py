"""QSSF-style (Helios, SC'21): shortest predicted GPU-time first.

The duration is predicted from the same user's past jobs, else the same virtual cluster's (account), else
the job's own estimate. QSSF fixes a job's priority at submission; here it is recomputed at every decision
from the history as it stands then, because a snapshot (from the simulator or from Slurm) carries only
the current history, and the simulator and the encoder must rank identically.
"""

from __future__ import annotations

from dataclasses import dataclass

from rltuned.domain import Job, PriorityContext


@dataclass(frozen=True)
class Qssf:
    name: str = "qssf"
    dynamic: bool = True

    def predicted_runtime(self, job: Job, ctx: PriorityContext) -> float:
        history = ctx.history
        if job.user and job.user in history.mean_runtime_by_user:
            return history.mean_runtime_by_user[job.user]
        if job.account and job.account in history.mean_runtime_by_account:
            return history.mean_runtime_by_account[job.account]
        return job.estimate

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return self.predicted_runtime(job, ctx) * job.gpus
