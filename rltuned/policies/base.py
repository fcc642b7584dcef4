"""The policy contract shared by the simulator, the trainer and the daemon."""

from __future__ import annotations

from typing import Protocol

from rltuned.domain import ClusterSnapshot, Job, PriorityContext


class Policy(Protocol):
    """A priority rule: `key(job, ctx)` is lower for jobs that should run sooner.

    A static policy's key is fixed once the job is queued (the simulator computes it on arrival and keeps the
    queue sorted); a dynamic one (age, fair-share) is recomputed at every scheduling decision.
    """

    @property
    def name(self) -> str: ...

    @property
    def dynamic(self) -> bool: ...

    def key(self, job: Job, ctx: PriorityContext) -> float: ...


def rank(policy: Policy, snapshot: ClusterSnapshot) -> list[Job]:
    """The pending jobs in the order the policy would start them; ties go to the earlier job id."""
    ctx = snapshot.context
    return sorted(snapshot.pending, key=lambda job: (policy.key(job, ctx), job.submit, job.id))
