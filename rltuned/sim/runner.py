"""Glue for `rltunectl simulate`: pick windows of a trace, run policies on them, average the metrics."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from rltuned.domain import ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.policies import make_policy
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.simulator import SimConfig, Simulator

METRIC_KEYS = (
    "avg_wait_s",
    "avg_jct_s",
    "avg_bsld",
    "gpu_util",
    "makespan_s",
    "p50_wait_s",
    "p95_wait_s",
    "p99_wait_s",
    "max_wait_s",
    "fairness",
)


@dataclass(frozen=True)
class Window:
    start: int
    stop: int

    def with_warmup(self, jobs: Sequence[Job], warmup: int) -> tuple[Sequence[Job], int]:
        """The window's jobs preceded by up to `warmup` earlier ones, and how many those are."""
        warm = min(warmup, self.start)
        return jobs[self.start - warm : self.stop], warm


def choose_windows(
    n_jobs: int, size: int | None, start: int | None, sequences: int | None, seed: int
) -> list[Window]:
    """One window from `start` (default 0), or `sequences` random windows of `size` consecutive jobs."""
    if n_jobs == 0:
        raise UsageError("the trace has no jobs to simulate")
    size = n_jobs if size is None else size
    if size < 1:
        raise UsageError(f"--jobs must be >= 1, got {size}")
    if size > n_jobs:
        raise UsageError(f"--jobs {size} exceeds the trace's {n_jobs} jobs")
    if sequences is None:
        first = start or 0
        if not 0 <= first <= n_jobs - size:
            raise UsageError(f"--start must be in [0, {n_jobs - size}] for --jobs {size}, got {first}")
        return [Window(first, first + size)]
    if sequences < 1:
        raise UsageError(f"--sequences must be >= 1, got {sequences}")
    rng = np.random.default_rng(seed)
    starts = rng.integers(0, n_jobs - size + 1, size=sequences)
    return [Window(int(s), int(s) + size) for s in starts]


@dataclass(frozen=True)
class WindowResult:
    window: Window
    metrics: Metrics
    wall_s: float
    solver_calls: int = 0
    solver_fallbacks: int = 0

    def as_dict(self) -> dict[str, object]:
        row: dict[str, object] = {"start": self.window.start, "stop": self.window.stop}
        row.update(self.metrics.as_dict())
        row["wall_s"] = self.wall_s
        row["jobs_per_s"] = (self.metrics.jobs + self.metrics.dropped) / self.wall_s if self.wall_s else 0.0
        return row


@dataclass(frozen=True)
class PolicyRun:
    """One policy over every window: the JSON `rltunectl simulate` prints (means over windows)."""

    policy: str
    config: SimConfig
    windows: tuple[WindowResult, ...]

    def mean(self, key: str) -> float:
        return float(np.mean([getattr(w.metrics, key) for w in self.windows]))

    @property
    def wall_s(self) -> float:
        return sum(w.wall_s for w in self.windows)

    def as_dict(self) -> dict[str, object]:
        jobs = sum(w.metrics.jobs for w in self.windows)
        dropped = sum(w.metrics.dropped for w in self.windows)
        out: dict[str, object] = {
            "policy": self.policy,
            "placement": self.config.placement,
            "backfill": self.config.backfill,
            "jobs": jobs,
            "dropped": dropped,
        }
        out.update({key: self.mean(key) for key in METRIC_KEYS})
        out["wall_s"] = self.wall_s
        out["jobs_per_s"] = (jobs + dropped) / self.wall_s if self.wall_s else 0.0
        if self.config.placement == "milp":
            out["solver_calls"] = sum(w.solver_calls for w in self.windows)
            out["solver_fallbacks"] = sum(w.solver_fallbacks for w in self.windows)
        if len(self.windows) > 1:
            out["sequences"] = [w.as_dict() for w in self.windows]
        return out


def simulate_windows(
    jobs: Sequence[Job],
    cluster: ClusterSpec,
    policy_name: str,
    config: SimConfig,
    windows: Sequence[Window],
    progress: Callable[[], None] | None = None,
    warmup: int = 0,
) -> PolicyRun:
    """Run one policy on every window; with `warmup`, up to that many preceding jobs first load the cluster
    (unmeasured), so a window starts from a busy cluster rather than an idle one."""
    simulator = Simulator(cluster, make_policy(policy_name), config)
    results = []
    for window in windows:
        chunk, warm = window.with_warmup(jobs, warmup)
        t0 = time.perf_counter()
        result = simulator.run(chunk, warmup=warm)
        wall = time.perf_counter() - t0
        metrics = compute_metrics(result)
        results.append(WindowResult(window, metrics, wall, result.solver_calls, result.solver_fallbacks))
        if progress is not None:
            progress()
    return PolicyRun(policy_name, config, tuple(results))
