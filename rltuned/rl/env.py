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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from rltuned.domain import ClusterSpec, Job
from rltuned.features import ACTOR_FEATURES, CRITIC_FEATURES, MAX_JOBS, Observation, encode
from rltuned.policies import make_policy
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import Episode, SimConfig, Simulator

METRICS = {"bsld": "avg_bsld", "wait": "avg_wait_s", "jct": "avg_jct_s", "util": "gpu_util"}
MAX_RESETS = 50


def score(metrics: Metrics, metric: str) -> float:
    return float(getattr(metrics, METRICS[metric]))


def reward(base: float, agent: float, metric: str) -> float:
    """The normalized gap; positive when the agent did better than the base policy."""
    scale = max(abs(base), abs(agent), 1e-9)
    gap = (agent - base) if metric == "util" else (base - agent)
    return gap / scale


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
    ) -> None:
        if metric not in METRICS:
            raise ValueError(f"metric must be one of {sorted(METRICS)}, got {metric!r}")
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
                return self._observe(), {"window_start": start, "base_score": self.base_score}
        raise RuntimeError(f"no window among {MAX_RESETS} tries needed a scheduling decision")

    def step(self, action: int) -> tuple[dict[str, np.ndarray], float, bool, bool, dict[str, Any]]:
        if self.episode is None or self.current is None:
            raise RuntimeError("call reset() first")
        job_id = int(self.current.job_ids[action])
        if job_id < 0:
            raise ValueError(f"action {action} selects an empty slot")
        self.episode.choose(job_id)
        if self.episode.result is None:
            return self._observe(), 0.0, False, False, {}
        agent = score(compute_metrics(self.episode.result), self.metric)
        info = {"base_score": self.base_score, "agent_score": agent, "window_start": self.window_start}
        return self._empty(), reward(self.base_score, agent, self.metric), True, False, info

    def _observe(self) -> dict[str, np.ndarray]:
        assert self.episode is not None
        self.current = encode(self.episode.snapshot(), self.base)
        return {"actor": self.current.actor, "mask": self.current.mask, "critic": self.current.critic}

    def _empty(self) -> dict[str, np.ndarray]:
        return {
            "actor": np.zeros((MAX_JOBS, ACTOR_FEATURES), np.float32),
            "mask": np.zeros(MAX_JOBS, np.bool_),
            "critic": np.zeros((MAX_JOBS, CRITIC_FEATURES), np.float32),
        }


def split(jobs: Sequence[Job], held_out: float = 0.1) -> tuple[list[Job], list[Job]]:
    """The first 90% by submit time trains; the last 10% is held out (jobs are sorted by submit)."""
    cut = int(len(jobs) * (1.0 - held_out))
    return list(jobs[:cut]), list(jobs[cut:])
