"""The paper's Table 5 policies, computed at decision time with the job's current wait.

The published code reads a start time that is -1 while a job waits, which makes WFP3 and UNICEP
meaningless; here wait = now - submit. UNICEP divides by log2(GPUs), which is 0 for a 1-GPU job, so we
use log2(GPUs + 1). F1's submit time is measured from the context's origin (the simulated trace's
start), as RLScheduler measures it from the trace start; a Slurm snapshot has no origin, so the daemon
refuses F1 as a base (core/inputs.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rltuned.domain import Job, PriorityContext

MIN_RUNTIME_S = 1.0


@dataclass(frozen=True)
class Fcfs:
    name: str = "fcfs"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return job.submit


@dataclass(frozen=True)
class Sjf:
    """Shortest estimated job first (on the estimate, never the true runtime)."""

    name: str = "sjf"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return job.estimate


@dataclass(frozen=True)
class Wfp3:
    """-(wait / estimate)^3 * GPUs: favours jobs that have waited long relative to their length."""

    name: str = "wfp3"
    dynamic: bool = True

    def key(self, job: Job, ctx: PriorityContext) -> float:
        wait = max(ctx.now - job.submit, 0.0)
        return -((wait / max(job.estimate, MIN_RUNTIME_S)) ** 3) * job.gpus


@dataclass(frozen=True)
class Unicep:
    """-wait / (log2(GPUs + 1) * estimate)."""

    name: str = "unicep"
    dynamic: bool = True

    def key(self, job: Job, ctx: PriorityContext) -> float:
        wait = max(ctx.now - job.submit, 0.0)
        return -wait / (math.log2(job.gpus + 1) * max(job.estimate, MIN_RUNTIME_S))


@dataclass(frozen=True)
class F1:
    """Carastan-Santos et al.'s learned rule: log10(estimate) * GPUs + 870 * log10(submit)."""

    name: str = "f1"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        submit = max(job.submit - ctx.origin, 1.0)
        return math.log10(max(job.estimate, MIN_RUNTIME_S)) * job.gpus + 870.0 * math.log10(submit)
