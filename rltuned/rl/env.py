"""A gymnasium environment over the simulator: RLTune's training loop (paper Fig. 8).

An episode is a window of consecutive jobs (256 by default) from the training split, optionally after a
warm-up of the preceding jobs (scheduled by the agent too, but not scored) so that the window meets a
busy cluster. The base policy's run of the same jobs is computed once at reset. At each decision the
agent picks one of the visible queued jobs (a categorical over the 256 slots, padding masked); it is
placed and started if it fits,
otherwise it waits as the head with EASY backfilling behind it in base order. The reward is 0 until the
window is done, then the normalized gap between the base policy's score and the agent's on the chosen
metric, as in the paper: (base - agent) / max(base, agent) for bounded slowdown, wait and JCT, and
(agent - base) / max(base, agent) for utilization: it lies in [-1, 1], and positive means better.

`reward="dense"` (not the paper's) pays the same kind of signal as it accrues: after each decision,
minus the waiting cost the window's jobs accrued since the previous one (seconds waited, weighted by
1 / max(runtime, 10 s) for bounded slowdown), over the base policy's score times the window's jobs
(floored at 1 per job). The episode's return is then minus the agent's mean waiting cost relative to
the base policy's score (for bounded slowdown, about -(agent - 1) / base), and each decision
is credited only with the waiting that follows it: a terminal reward over ~1,500 decisions tells the
agent which episodes were good, hardly which decisions. The paper's normalized gap is still reported
in `info["gap"]` at the end of every episode.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rltuned.domain import ClusterSpec, Job
from rltuned.features import ACTOR_FEATURES, CRITIC_FEATURES, LIMIT, MAX_JOBS, Observation, encode
from rltuned.policies import make_policy
from rltuned.rl import PAPER_REWARDS
from rltuned.sim.metrics import BSLD_BOUND_S, Metrics, compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import Episode, SimConfig, SimResult, Simulator

METRICS = {"bsld": "avg_bsld", "wait": "avg_wait_s", "jct": "avg_jct_s", "util": "gpu_util"}
MAX_RESETS = 50


def score(metrics: Metrics, metric: str) -> float:
    return float(getattr(metrics, METRICS[metric]))


def reward(base: float, agent: float, metric: str) -> float:
    """The normalized gap; positive when the agent did better than the base policy."""
    scale = max(abs(base), abs(agent), 1e-9)
    gap = (agent - base) if metric == "util" else (base - agent)
    return gap / scale


def waiting_weight(metric: str) -> Callable[[Job], float]:
    """What a second of a job's wait costs on `metric`: bounded slowdown divides the wait by the runtime
    (the true one: this is the simulator's reward, never a feature), wait and JCT count it as it is."""
    if metric == "bsld":
        return lambda job: 1.0 / max(job.runtime if job.runtime is not None else job.estimate, BSLD_BOUND_S)
    if metric in ("wait", "jct"):
        return lambda job: 1.0
    raise ValueError(f"dense rewards need a waiting metric (bsld, wait, jct), got {metric!r}")


class SchedulingEnv(gym.Env[dict[str, np.ndarray], int]):
    metadata: dict[str, Any] = {"render_modes": []}  # noqa: RUF012 (gymnasium's class attribute)
    observation_space: spaces.Dict  # type: ignore[assignment]  # gymnasium types it as a bare Space
    action_space: spaces.Discrete  # type: ignore[assignment]

    def __init__(
        self,
        jobs: Sequence[Job],
        cluster: ClusterSpec,
        base_policy: str,
        metric: str,
        window: int = 256,
        config: SimConfig | None = None,
        warmup: int = 0,
        reward_mode: str = "terminal",
    ) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
        if reward_mode not in PAPER_REWARDS:
            raise ValueError(f"reward must be one of {PAPER_REWARDS} in this loop, got {reward_mode!r}")
        self.weight = waiting_weight(metric) if reward_mode == "dense" else None
        self.runtime_input = LIMIT
        """The paper's state: the time limit as requested time (`features.RUNTIME_INPUTS`)."""
        if len(jobs) < window:
            raise ValueError(f"need at least {window} jobs for a window, got {len(jobs)}")
        self.jobs = list(jobs)
        self.metric = metric
        self.window = window
        self.warmup = warmup
        self.base = make_policy(base_policy)
        # Full passes on the base side too, so both sides follow the same rules decision for decision.
        self.simulator = Simulator(cluster, self.base, replace(config or SimConfig(), incremental=False))
        self.observation_space = spaces.Dict(
            {
                "actor": spaces.Box(0.0, 1.0, (MAX_JOBS, ACTOR_FEATURES), np.float32),
                "mask": spaces.MultiBinary(MAX_JOBS),
                "critic": spaces.Box(0.0, 1.0, (MAX_JOBS, CRITIC_FEATURES), np.float32),
            }
        )
        self.action_space = spaces.Discrete(MAX_JOBS)
        self.episode: Episode | None = None
        self.current: Observation | None = None
        self.base_score = 0.0
        self.base_cost = 1.0
        self.accrued = 0.0
        self.window_start = 0

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, np.ndarray], dict[str, Any]]:
        """A new random window; windows in which no decision is ever needed are skipped."""
        super().reset(seed=seed)
        for _ in range(MAX_RESETS):
            start = int(self.np_random.integers(self.warmup, len(self.jobs) - self.window + 1))
            if options and "start" in options:
                start = int(options["start"])
            window, warm = Window(start, start + self.window).with_warmup(self.jobs, self.warmup)
            episode = self.simulator.episode(window, warmup=warm)
            if not episode.done:
                self.window_start = start
                base = self.simulator.run(window, warmup=warm)
                self.base_score = score(compute_metrics(base), self.metric)
                self.episode = episode
                if self.weight is not None:
                    # The base's score x jobs (floored at 1 like SchedInspector's max(base, rl, 1)) rather
                    # than its waiting cost, which is 0 on a window where nothing waits.
                    self.base_cost = len(base.records) * max(self.base_score, 1.0)
                    self.accrued = episode.waited(self.weight)
                return self._observe(), {"window_start": start, "base_score": self.base_score}
        raise RuntimeError(f"no window among {MAX_RESETS} tries needed a scheduling decision")

    ranks = False
    """The action is one slot: the job to start next (the paper-replication loop)."""

    def base_action(self) -> int:
        """The base policy's choice: slot 0, since rows are in base order."""
        return 0

    def step(  # also takes the slot as a 0-d array, as PPO samples it
        self, action: int | np.ndarray
    ) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.episode is None or self.current is None:
            raise RuntimeError("call reset() first")
        job_id = int(self.current.job_ids[int(action)])
        if job_id < 0:
            raise ValueError(f"action {action} selects an empty slot")
        self.episode.choose(job_id)
        paid = self._accrual()
        if self.episode.result is None:
            return self._observe(), paid, False, False, {}
        info = episode_info(self.episode.result, self.metric, self.base_score, self.window_start)
        return empty_observation(), info["gap"] if self.weight is None else paid, True, False, info

    def _accrual(self) -> float:
        """Dense mode: minus the waiting cost accrued since the last decision, over the base's total."""
        if self.weight is None or self.episode is None:
            return 0.0
        now = self.episode.waited(self.weight)
        paid, self.accrued = -(now - self.accrued) / self.base_cost, now
        return paid

    def _observe(self) -> dict[str, np.ndarray]:
        assert self.episode is not None
        self.current = encode(self.episode.snapshot(), self.base)
        return {"actor": self.current.actor, "mask": self.current.mask, "critic": self.current.critic}


def episode_info(result: SimResult, metric: str, base_score: float, window_start: int) -> dict[str, Any]:
    """What an episode's last step reports: both scores and the paper's normalized gap."""
    agent = score(compute_metrics(result), metric)
    gap = reward(base_score, agent, metric)
    return {"base_score": base_score, "agent_score": agent, "gap": gap, "window_start": window_start}


def empty_observation() -> dict[str, np.ndarray]:
    """The observation after the last step (all padding)."""
    return {
        "actor": np.zeros((MAX_JOBS, ACTOR_FEATURES), np.float32),
        "mask": np.zeros(MAX_JOBS, np.bool_),
        "critic": np.zeros((MAX_JOBS, CRITIC_FEATURES), np.float32),
    }
