"""What knowing each job's true runtime would be worth as the order: how much room runtime information leaves.

Every order that came near the best heuristic on the bundled traces, learned or hand-made, gained
through runtime information that the limits lack (docs/training.md, "How much runtime knowledge could the
order gain?"). So an admin's first question about their own history is how much room that information
leaves. If an order that knew every overstated limit's true runtime gains little over SAF, no model
or predictor will gain more. If it gains much, what remains to ask is whether anything in Slurm's
accounting predicts it.

Two oracle orders replace the base's key in the daemon's loop (`sim.ticks.run_order`). Slurm's
backfill and its reservations keep the limits as they are:
- `exact-down`: the true runtime where the limit overstates it, else the limit. On Slurm a job never
  outlives its limit, so what a predictor can correct is an overstated limit: this is SJF's order with
  every correction made. A gauge, not a strict bound: the same runtimes in another order (an area
  order, as SAF's) can do better (docs/training.md).
- `exact`: the true runtime everywhere. Where limits fall below runtimes (simulated noise draws
  such limits), it also knows those.
Both read what only the simulator knows. They are orders of this study, never policies a daemon serves.

A third gauge asks another question: `best-per-window` takes, in each window, whichever heuristic did
best there. It is the most that a chooser which follows one heuristic for a whole window (picked by
the load, by the mix of the queue) could gain; it knows each window's outcome in advance, and a best
of several noisy runs reads high, so for such a chooser it is a generous gauge. A chooser that
switched heuristics tick by tick is not bounded by it. When it is small, one heuristic wins (nearly)
every window. Its other columns (waits, utilization, fairness) are those of each window's winner on
bounded slowdown, put together: no policy ran them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rltuned.domain import ClusterSpec, Job, PriorityContext
from rltuned.rl.env import reward
from rltuned.rl.standings import Standing, contenders, run_contender
from rltuned.rl.validation import gap_record
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import SimResult
from rltuned.sim.ticks import TickSettings, run_order

ORACLES = ("exact-down", "exact")
SELECTOR = "best-per-window"
GAUGES = (*ORACLES, SELECTOR)
"""The rows of this study that no admin can run: every other row is a heuristic or Slurm alone."""
MIN_RUNTIME_S = 1.0


@dataclass(frozen=True)
class TrueRuntime:
    """An oracle order: each job by its true runtime (with `down`, only where that is below its limit)."""

    runtimes: Mapping[int, float]
    down: bool
    name: str = "exact"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        true = self.runtimes[job.id]
        return max(min(true, job.estimate) if self.down else true, MIN_RUNTIME_S)


def oracle(name: str, jobs: Sequence[Job]) -> TrueRuntime:
    """`name` (one of `ORACLES`) over `jobs`; a job without a runtime is known by its limit."""
    if name not in ORACLES:
        raise ValueError(f"oracle must be one of {ORACLES}, got {name!r}")
    runtimes = {j.id: j.runtime if j.runtime is not None else j.estimate for j in jobs}
    return TrueRuntime(runtimes, down=name == "exact-down", name=name)


def run_oracle(
    order: TrueRuntime, cluster: ClusterSpec, jobs: Sequence[Job], warm: int, settings: TickSettings
) -> SimResult:
    """One window ranked by an oracle: SJF's loop (its settings, its inputs), with the oracle's key in
    place of SJF's, so that the oracle and SJF differ only by what they know."""
    return run_order(cluster, jobs, warm, replace(settings, base="sjf"), order)


@dataclass(frozen=True)
class LimitProfile:
    """How the limits relate to the runtimes: the information an oracle has and a scheduler lacks."""

    jobs: int
    median_use: float
    """The median of runtime / limit."""
    under_tenth: float
    """The share of jobs that ran under a tenth of their limit."""
    past_limit: float
    """The share of jobs that ran past their limit (none on a Slurm that enforces limits)."""

    @classmethod
    def of(cls, jobs: Sequence[Job]) -> LimitProfile:
        timed = [(j.runtime, j.estimate) for j in jobs if j.runtime is not None]
        if not timed:
            return cls(0, float("nan"), float("nan"), float("nan"))
        use = np.array([run / max(limit, MIN_RUNTIME_S) for run, limit in timed])
        return cls(len(use), float(np.median(use)), float(np.mean(use < 0.1)), float(np.mean(use > 1.0)))


def headroom(
    draws: Sequence[Sequence[Job]],
    cluster: ClusterSpec,
    settings: TickSettings,
    windows: Sequence[Window],
    warmup: int,
    progress: Callable[[], None] | None = None,
) -> list[Standing]:
    """The two oracles, the best heuristic of each window (`SELECTOR`), then every order an admin could
    run instead (`standings.contenders`, Slurm alone included), each on every window of every draw of
    the limits (`draws`: the trace's jobs with each draw's limits)."""
    names = contenders(settings, tuned=False)
    per: dict[str, list[Metrics]] = {name: [] for name in [*ORACLES, *names]}
    for jobs in draws:
        orders = {name: oracle(name, jobs) for name in ORACLES}
        for window in windows:
            chunk, warm = window.with_warmup(jobs, warmup)
            for name, order in orders.items():
                per[name].append(compute_metrics(run_oracle(order, cluster, chunk, warm, settings)))
            for name in names:
                per[name].append(compute_metrics(run_contender(name, cluster, chunk, warm, settings)))
            if progress is not None:
                progress()
    rows = [Standing(name, tuple(ms)) for name, ms in per.items()]
    return [*rows[: len(ORACLES)], best_per_window(rows[len(ORACLES) :]), *rows[len(ORACLES) :]]


def best_per_window(rows: Sequence[Standing], key: str = "avg_bsld") -> Standing:
    """In each window, the metrics of whichever row did best there on `key` (the first on a tie): a
    chooser's best case, so that a small gain over the best heuristic rules choosing out."""
    per = zip(*(r.windows for r in rows), strict=True)
    return Standing(SELECTOR, tuple(min(ms, key=lambda m: getattr(m, key)) for ms in per))


def best_heuristic(rows: Sequence[Standing], key: str = "avg_bsld") -> Standing:
    """The contender with the lowest mean of `key`: what the oracles' room is measured from."""
    return min((r for r in rows if r.name not in GAUGES), key=lambda r: r.mean(key))


def room(rows: Sequence[Standing], draws: int) -> dict[str, dict[str, Any]]:
    """Each gauge's per-window gap in bounded slowdown over the best heuristic (`validation.gap_record`:
    the mean, its 90% window-bootstrap interval, wins and losses), the measure every choice in this
    project is made on. The best heuristic is chosen on these very windows, which favours it. Rows hold
    `draws` draws of the same windows, draw after draw (`headroom`)."""
    best = best_heuristic(rows)
    if len(best.windows) % draws:
        raise ValueError(f"{len(best.windows)} window-draws do not split into {draws} draws")
    by_name = {r.name: r for r in rows}
    out = {}
    for name in GAUGES:
        pairs = zip(best.windows, by_name[name].windows, strict=True)
        gaps = np.array([reward(b.avg_bsld, o.avg_bsld, "bsld") for b, o in pairs]).reshape(draws, -1).T
        out[name] = gap_record(gaps)
    return out
