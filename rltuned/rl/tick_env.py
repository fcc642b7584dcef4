"""Training in the loop the daemon runs: one action per tick, the ranking of the visible jobs.

An episode is a window of consecutive jobs from the training split, after a warm-up of the preceding
jobs, simulated with Slurm's schedulers behind the daemon's tick (`sim/ticks.py`). At every tick with at
least two visible jobs the agent returns a ranking of the state's slots (drawn from the Plackett-Luce
policy); the decision core turns it into the tick's plan exactly as the daemon would (placement, lever
targets, the action cap), Slurm's priority order follows it, and Slurm's main scheduler and backfill
start the jobs. Ticks with fewer than two visible jobs have only one ranking and are decided by the
core without asking; quiet ticks (nothing changed since the last decision, `core/quiet.py`) decide
nothing, as in the daemon, so with `refresh_s` an episode has one action per change.

Rewards are paid per tick: `dense` pays minus the waiting cost accrued since the previous tick (over
the base side's score x jobs, as in `rl/env.py`); `relative` pays the same less what the base side's
own run accrued over the same stretch of time, so that the cost every schedule pays for the same
arrivals cancels and what is left is what the rankings did (the rewards of an episode still sum to its
gap, in the same units); `terminal` pays the paper's normalized gap once. The base side is the same
loop without a model.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from rltuned.core import decide_ranked, ranking_from_slots
from rltuned.domain import ClusterSpec, Job
from rltuned.features import LIMIT, MAX_JOBS, RUNTIME_INPUTS, Observation, encode
from rltuned.policies import Policy, rank
from rltuned.rl import REWARDS
from rltuned.rl.env import MAX_RESETS, METRICS, empty_observation, episode_info, score, waiting_weight
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import JobRecord
from rltuned.sim.ticks import UNPINNED, TickEpisode, TickSettings, run_ticks

Obs = dict[str, npt.NDArray[Any]]


class TickEnv:
    ranks = True
    """The action is a ranking of the 256 slots (real slots first), not one slot."""

    def __init__(
        self,
        jobs: Sequence[Job],
        cluster: ClusterSpec,
        settings: TickSettings,
        metric: str,
        window: int = 256,
        warmup: int = 0,
        reward_mode: str = "dense",
        runtime_input: str = LIMIT,
    ) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
        if reward_mode not in REWARDS:
            raise ValueError(f"reward must be one of {REWARDS}, got {reward_mode!r}")
        if len(jobs) < window:
            raise ValueError(f"need at least {window} jobs for a window, got {len(jobs)}")
        self.jobs = list(jobs)
        self.cluster = cluster
        self.settings = settings
        self.metric = metric
        self.window = window
        self.warmup = warmup
        self.weight = waiting_weight(metric) if reward_mode in ("dense", "relative") else None
        self.relative = reward_mode == "relative"
        if runtime_input not in RUNTIME_INPUTS:
            raise ValueError(f"runtime input must be one of {RUNTIME_INPUTS}, got {runtime_input!r}")
        self.runtime_input = runtime_input
        """What the state's `requested_time` column holds (`features.RUNTIME_INPUTS`)."""
        self.base_waits = _Waits.none()
        self.base_accrued = 0.0
        self.rng = np.random.default_rng()
        self.episode: TickEpisode | None = None
        self.current: Observation | None = None
        self.base_score = 0.0
        self.base_cost = 1.0
        self.accrued = 0.0
        self.window_start = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[Obs, dict[str, Any]]:
        """A new random window; windows in which no tick ever needs a decision are skipped."""
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        for _ in range(MAX_RESETS):
            start = int(self.rng.integers(self.warmup, len(self.jobs) - self.window + 1))
            if options and "start" in options:
                start = int(options["start"])
            jobs, warm = Window(start, start + self.window).with_warmup(self.jobs, self.warmup)
            self.episode = TickEpisode(self.cluster, jobs, warm, self.settings)
            self._skip_trivial()
            if self.episode.done:
                continue
            self.window_start = start
            base = run_ticks(self.cluster, jobs, warm, self.settings)
            self.base_score = score(compute_metrics(base), self.metric)
            if self.weight is not None:
                self.base_cost = len(base.records) * max(self.base_score, 1.0)
                self.accrued = self._waited()
            if self.relative:
                assert self.weight is not None and self.episode.snapshot is not None
                self.base_waits = _Waits.of(base.records, self.weight)
                self.base_accrued = self.base_waits.at(self.episode.snapshot.now)
            return self._observe(), {"window_start": start, "base_score": self.base_score}
        raise RuntimeError(f"no window among {MAX_RESETS} tries needed a ranking")

    def base_action(self) -> npt.NDArray[np.int64]:
        """The base policy's ranking: the slots in order (rows are in base order)."""
        return np.arange(MAX_JOBS, dtype=np.int64)

    def teacher_action(self, teacher: Policy) -> npt.NDArray[np.int64]:
        """`teacher`'s ranking of the visible rows (`policies.rank`, ties included), padding last: what
        the imitation warm start clones when it targets another order than the base's."""
        episode, obs = self.episode, self.current
        if episode is None or obs is None or episode.snapshot is None:
            raise RuntimeError("call reset() first")
        n = int(obs.mask.sum())
        row = {job_id: i for i, job_id in enumerate(obs.job_ids[:n].tolist())}
        order = [row[job.id] for job in rank(teacher, episode.snapshot) if job.id in row]
        return np.array(order + list(range(n, MAX_JOBS)), dtype=np.int64)

    def teacher_keys(self, teacher: Policy) -> npt.NDArray[np.float32]:
        """Minus `teacher`'s key for each visible row (higher first, as the actor scores), 0 on padding:
        a per-job teacher's scores, for a clone that regresses on them (scripts/clone_fidelity.py)."""
        episode, obs = self.episode, self.current
        if episode is None or obs is None or episode.snapshot is None:
            raise RuntimeError("call reset() first")
        snapshot = episode.snapshot
        by_id = {job.id: job for job in snapshot.pending}
        keys = np.zeros(MAX_JOBS, dtype=np.float32)
        for i, job_id in enumerate(obs.job_ids[: int(obs.mask.sum())].tolist()):
            keys[i] = -teacher.key(by_id[job_id], snapshot.context)
        return keys

    def step(self, ranking: int | npt.NDArray[np.integer]) -> tuple[Obs, float, bool, bool, dict[str, Any]]:
        if isinstance(ranking, int):
            raise TypeError("the daemon's loop takes a ranking of the slots, not one slot")
        episode, obs = self.episode, self.current
        if episode is None or obs is None or episode.snapshot is None:
            raise RuntimeError("call reset() first")
        snapshot = episode.snapshot
        order = ranking_from_slots(obs, obs.jobs, ranking, None, "sampled")
        episode.apply(decide_ranked(snapshot, order, self.settings.core, episode.written, UNPINNED))
        self._skip_trivial()
        paid = self._accrual()
        if episode.result is None:
            return self._observe(), paid, False, False, {}
        info = episode_info(episode.result, self.metric, self.base_score, self.window_start)
        return empty_observation(), info["gap"] if self.weight is None else paid, True, False, info

    def _skip_trivial(self) -> None:
        """Quiet ticks decide nothing (`core/quiet.py`), as in the daemon; ticks with fewer than two
        visible jobs have one ranking: the core decides them. Neither is an action."""
        episode = self.episode
        assert episode is not None
        while episode.snapshot is not None and (episode.quiet or len(episode.snapshot.pending) < 2):
            episode.step(None)

    def _waited(self) -> float:
        episode = self.episode
        assert episode is not None and self.weight is not None
        if episode.result is not None:
            return sum(r.wait * self.weight(r.job) for r in episode.result.records)
        assert episode.snapshot is not None
        return episode.run.waited(episode.snapshot.now, self.weight)

    def _accrual(self) -> float:
        if self.weight is None:
            return 0.0
        now = self._waited()
        paid, self.accrued = -(now - self.accrued) / self.base_cost, now
        if self.relative:
            episode = self.episode
            assert episode is not None
            at = math.inf if episode.snapshot is None else episode.snapshot.now
            base_now = self.base_waits.at(at)
            paid, self.base_accrued = paid + (base_now - self.base_accrued) / self.base_cost, base_now
        return paid

    def _observe(self) -> Obs:
        episode = self.episode
        assert episode is not None and episode.snapshot is not None
        self.current = encode(episode.snapshot, episode.base, self.runtime_input)
        return {"actor": self.current.actor, "mask": self.current.mask, "critic": self.current.critic}


@dataclass(frozen=True, slots=True)
class _Waits:
    """The base side's measured jobs, to read its waiting cost at any time of the run: each job that has
    arrived by `t` has waited until its start or until `t`, whichever is first."""

    submit: npt.NDArray[np.float64]
    start: npt.NDArray[np.float64]
    weight: npt.NDArray[np.float64]

    @classmethod
    def none(cls) -> _Waits:
        empty = np.zeros(0)
        return cls(empty, empty, empty)

    @classmethod
    def of(cls, records: Sequence[JobRecord], weight: Callable[[Job], float]) -> _Waits:
        return cls(
            np.array([r.job.submit for r in records], dtype=np.float64),
            np.array([r.start for r in records], dtype=np.float64),
            np.array([weight(r.job) for r in records], dtype=np.float64),
        )

    def at(self, t: float) -> float:
        waited = np.maximum(np.minimum(self.start, t) - self.submit, 0.0)
        return float(np.dot(self.weight, waited))
