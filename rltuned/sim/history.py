"""Fair-share usage and runtime history, kept by the simulator the way slurmctld/slurmdbd keep them.

Usage is GPU-seconds per account, decayed with a half-life (PriorityDecayHalfLife); running jobs are
charged for the time they have run so far. Stored values are scaled to the run's origin so decay needs no
per-account timestamps.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Protocol

from rltuned.domain import History, Job, peer_key, with_runtime

REBASE_HALF_LIVES = 256.0  # 2^256 is far from float overflow (2^1024)


class _Started(Protocol):
    job: Job
    start: float


class HistoryTracker:
    def __init__(self, origin: float, half_life_s: float) -> None:
        self.origin = origin
        self.half_life = half_life_s
        self._scaled_usage: dict[str, float] = {}
        self._runtime_sum: dict[str, float] = {}
        self._runtime_n: dict[str, int] = {}
        self._acct_sum: dict[str, float] = {}
        self._acct_n: dict[str, int] = {}
        self._user_mean: dict[str, float] = {}
        self._acct_mean: dict[str, float] = {}
        self._recent: dict[tuple[str, int], tuple[float, ...]] = {}

    def _scale(self, t: float) -> float:
        return float(2.0 ** ((t - self.origin) / self.half_life))

    def _rebase(self, t: float) -> None:
        """Move the origin forward before 2^((t - origin) / half-life) could overflow a float."""
        if (t - self.origin) / self.half_life < REBASE_HALF_LIVES:
            return
        factor = 2.0 ** (-(t - self.origin) / self.half_life)  # may underflow to 0: all usage long decayed
        self._scaled_usage = {acct: value * factor for acct, value in self._scaled_usage.items()}
        self.origin = t

    def record(self, job: Job, start: float, end: float) -> None:
        self._rebase(end)
        run = end - start
        acct = job.account
        self._scaled_usage[acct] = self._scaled_usage.get(acct, 0.0) + job.gpus * run * self._scale(end)
        if job.user:
            self._runtime_sum[job.user] = self._runtime_sum.get(job.user, 0.0) + run
            self._runtime_n[job.user] = self._runtime_n.get(job.user, 0) + 1
            self._user_mean[job.user] = self._runtime_sum[job.user] / self._runtime_n[job.user]
        if acct:
            self._acct_sum[acct] = self._acct_sum.get(acct, 0.0) + run
            self._acct_n[acct] = self._acct_n.get(acct, 0) + 1
            self._acct_mean[acct] = self._acct_sum[acct] / self._acct_n[acct]
        key = peer_key(job.user, job.account, job.gpus)
        if key[0]:
            self._recent[key] = with_runtime(self._recent.get(key, ()), run)

    def view(self, now: float, running: Iterable[_Started] | None) -> History:
        """History as of `now`; with `running` None, usage is left out (static policies never read it).
        The runtime means are live read-only views (their dicts are only ever updated in place), so the
        simulator keeps one usage-free view for a whole run."""
        if running is None:
            return History(
                mean_runtime_by_user=MappingProxyType(self._user_mean),
                mean_runtime_by_account=MappingProxyType(self._acct_mean),
                recent_runtimes=MappingProxyType(self._recent),
            )
        return self.view_charged(now, charges(running))

    def view_charged(self, now: float, running: Sequence[Charge]) -> History:
        """`view` with the running jobs as `charges` gives them: a caller that reads the history at
        several instants of one running set builds those once."""
        self._rebase(now)
        decay = 1.0 / self._scale(now)
        usage = {acct: value * decay for acct, value in self._scaled_usage.items()}
        for acct, gpus, start in running:
            usage[acct] = usage.get(acct, 0.0) + gpus * max(now - start, 0.0)
        # An account with nothing used yet (a job started this instant) is not one fair-share counts,
        # as Slurm's sshare shows it with no usage (`slurm/history.py` leaves those out too).
        return History(
            usage=MappingProxyType({acct: u for acct, u in usage.items() if u > 0}),
            mean_runtime_by_user=MappingProxyType(self._user_mean),
            mean_runtime_by_account=MappingProxyType(self._acct_mean),
            recent_runtimes=MappingProxyType(self._recent),
        )


Charge = tuple[str, int, float]
"""A running job as fair-share charges it: its account, GPUs and start."""


def charges(running: Iterable[_Started]) -> list[Charge]:
    return [(entry.job.account, entry.job.gpus, entry.start) for entry in running]
