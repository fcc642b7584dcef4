"""Slurm's multifactor priority: normalized [0, 1] factors times integer weights, summed.

As in `priority_multifactor.c`: age = min(wait / max_age, 1); job size = GPUs / cluster GPUs (Slurm's
default favours large jobs; `PriorityFavorSmall=YES` turns it into 1 - that, favouring small ones; Slurm
sizes by nodes or CPUs, GPU clusters care about GPUs). With `PriorityFlags=SMALL_RELATIVE_TO_TIME` the
size is divided by the time limit in whole minutes: max(nodes x an average node, the job) / limit /
cluster. For every job on one node and no bigger than an average node that is 1 / (cluster nodes x
limit in minutes), whether counted in CPUs (Slurm) or GPUs (here): Slurm alone then orders those by
time limit, shortest first, and puts a job spanning several nodes ahead of one-node jobs of the same
limit (PriorityFavorSmall reverses both). A job wider than an average node in GPUs but not in CPUs is
sized larger here than by Slurm. TRES = GPUs / cluster GPUs times `PriorityWeightTRES=GRES/gpu=W`;
partition = the partition's tier, 1 here (one tier); fair-share = 2^(-usage share / shares share) with
equal shares per account and usage in decayed GPU-seconds (the simulator decays it with
PriorityDecayHalfLife; on Slurm it comes from sshare). Weights default to 1000 each, as in the paper.
`explain` returns the weighted terms, as `sprio` shows them.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rltuned.domain import Job, PriorityContext

DEFAULT_MAX_AGE_S = 7 * 24 * 3600.0
FACTORS = ("age", "fairshare", "job_size", "partition", "tres_gpu")


@dataclass(frozen=True)
class Multifactor:
    name: str = "multifactor"
    dynamic: bool = True
    weight_age: int = 1000
    weight_fairshare: int = 1000
    weight_job_size: int = 1000
    weight_partition: int = 1000
    max_age_s: float = DEFAULT_MAX_AGE_S
    favor_small: bool = False
    """PriorityFavorSmall."""
    weight_tres_gpu: int = 0
    """PriorityWeightTRES=GRES/gpu=N (0: not set)."""
    size_relative: bool = False
    """PriorityFlags=SMALL_RELATIVE_TO_TIME."""

    def _values(self, job: Job, ctx: PriorityContext) -> tuple[float, float, float, float, float]:
        age = min(max(ctx.now - job.submit, 0.0) / self.max_age_s, 1.0)
        gpus = min(job.gpus / ctx.total_gpus, 1.0) if ctx.total_gpus else 0.0
        size = relative_size(job, ctx) if self.size_relative else gpus
        if self.favor_small:
            size = 1.0 - size
        return age, fairshare(job.account, ctx), size, 1.0, gpus

    @property
    def weights(self) -> tuple[int, int, int, int, int]:
        return (self.weight_age, self.weight_fairshare, self.weight_job_size, self.weight_partition,
                self.weight_tres_gpu)  # fmt: skip

    def factors(self, job: Job, ctx: PriorityContext) -> dict[str, float]:
        """The normalized factors, each in [0, 1]."""
        return dict(zip(FACTORS, self._values(job, ctx), strict=True))

    def explain(self, job: Job, ctx: PriorityContext) -> dict[str, float]:
        """Weighted terms and their sum, like `sprio -l`."""
        terms = {
            name: w * f for name, f, w in zip(FACTORS, self._values(job, ctx), self.weights, strict=True)
        }
        terms["priority"] = sum(terms.values())
        return terms

    def key(self, job: Job, ctx: PriorityContext) -> float:
        """The same sum as `explain`, without building dicts: this runs for every queued job at every pass."""
        age, fs, size, part, gpus = self._values(job, ctx)
        return -(
            self.weight_age * age
            + self.weight_fairshare * fs
            + self.weight_job_size * size
            + self.weight_partition * part
            + self.weight_tres_gpu * gpus
        )


def relative_size(job: Job, ctx: PriorityContext) -> float:
    """SMALL_RELATIVE_TO_TIME's size: at least the job's nodes times an average node, over its time limit
    in minutes (Slurm holds whole minutes, rounded up) and the cluster. A job without a limit gets its
    partition's, INFINITE on every cluster modelled here: 0."""
    total = ctx.total_gpus
    if not total or job.time_limit is None:
        return 0.0
    minutes = max(1, math.ceil(job.time_limit / 60.0 - 1e-9))
    average = total / ctx.nodes if ctx.nodes else 0.0
    return min(max(max(job.nodes, 1) * average, job.gpus) / minutes / total, 1.0)


def fairshare(account: str, ctx: PriorityContext) -> float:
    """Classic fair-share 2^(-U/S): 1 for an account with no usage, 0.5 when it used exactly its share."""
    usage = ctx.history.usage
    total = ctx.history.total_usage
    if total <= 0.0 or not usage.get(account):
        return 1.0
    share = 1.0 / len(usage)
    return float(2.0 ** (-(usage[account] / total) / share))
