"""The paper's Table 5 policies, computed at decision time with the job's current wait.

The published code reads a start time that is -1 while a job waits, which makes WFP3 and UNICEP
meaningless; here wait = now - submit. UNICEP divides by log2(GPUs), which is 0 for a 1-GPU job, so we
use log2(GPUs + 1). F1-F4 (Carastan-Santos and de Camargo, SC'17: rules fitted to minimize bounded
slowdown) measure the submit time r from the context's origin (the simulated trace's start), as
RLScheduler measures it from the trace start; a Slurm snapshot has no origin, so the daemon refuses them
as a base (core/inputs.py). Estimates below 1 s count as 1 s everywhere (log10 and the ratios need a
positive length).
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
class Saf:
    """Smallest area first: estimate x GPUs (the GPU-time a job asks for)."""

    name: str = "saf"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return max(job.estimate, MIN_RUNTIME_S) * job.gpus


def _released(job: Job, ctx: PriorityContext) -> float:
    """F1-F4's submit time r: seconds since the context's origin, at least 1 (log10 needs r > 0)."""
    return max(job.submit - ctx.origin, 1.0)


@dataclass(frozen=True)
class F1:
    """Carastan-Santos and de Camargo's (SC'17) first rule: log10(estimate) * GPUs + 870 * log10(r)."""

    name: str = "f1"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        p, r = max(job.estimate, MIN_RUNTIME_S), _released(job, ctx)
        return math.log10(p) * job.gpus + 870.0 * math.log10(r)


@dataclass(frozen=True)
class F2:
    """SC'17's second rule: sqrt(estimate) * GPUs + 25,600 * log10(r)."""

    name: str = "f2"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        p, r = max(job.estimate, MIN_RUNTIME_S), _released(job, ctx)
        return math.sqrt(p) * job.gpus + 25_600.0 * math.log10(r)


@dataclass(frozen=True)
class F3:
    """SC'17's third rule: estimate * GPUs + 6,860,000 * log10(r)."""

    name: str = "f3"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        p, r = max(job.estimate, MIN_RUNTIME_S), _released(job, ctx)
        return p * job.gpus + 6_860_000.0 * math.log10(r)


@dataclass(frozen=True)
class F4:
    """SC'17's fourth rule: estimate * sqrt(GPUs) + 530,000 * log10(r)."""

    name: str = "f4"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        p, r = max(job.estimate, MIN_RUNTIME_S), _released(job, ctx)
        return p * math.sqrt(job.gpus) + 530_000.0 * math.log10(r)
