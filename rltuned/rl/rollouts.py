"""Collecting episodes with the current policy: in this process, or in worker processes (one per core).

Every episode takes its window and its policy's sampling noise from its own seed (the environment's
reset seed, and a torch generator seeded alike), and the batch lists episodes in seed order. So the
batch does not depend on which worker ran which episode: n workers give exactly the batch one gives,
only sooner. Workers build their own environment once (loading the trace) and receive the policy's
weights with every episode. The same workers score the deterministic policy on the validation windows
(`rl/validation.py`), one window per task.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Protocol

import numpy as np
import torch

from rltuned.errors import UsageError
from rltuned.rl.agent import ActorCritic
from rltuned.rl.env import SchedulingEnv
from rltuned.rl.tick_env import TickEnv
from rltuned.rl.validation import Validator, frozen

Env = SchedulingEnv | TickEnv
EnvFactory = Callable[[], Env]
ValidatorFactory = Callable[[], Validator]


@dataclass
class Rollout:
    actor: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    critic: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    """One slot (paper loop) or a ranking of the 256 slots (ticks) per decision."""
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    episode_rewards: list[float] = field(default_factory=list)
    base_scores: list[float] = field(default_factory=list)
    agent_scores: list[float] = field(default_factory=list)

    def extend(self, other: Rollout) -> None:
        for f in fields(self):
            getattr(self, f.name).extend(getattr(other, f.name))


def run_episode(env: Env, agent: ActorCritic, seed: int) -> Rollout:
    """One whole episode with the current stochastic policy, everything random drawn from `seed`."""
    ro = Rollout()
    generator = torch.Generator().manual_seed(seed)
    obs, _ = env.reset(seed=seed)
    done = False
    info: dict[str, float] = {}
    while not done:
        # One copy of each (the observation's arrays are read-only): the batch keeps it, and the
        # agent reads it through a tensor over the same memory, which nothing writes.
        kept = [np.array(obs[k]) for k in ("actor", "mask", "critic")]
        actor, mask, critic = map(torch.from_numpy, kept)
        with torch.inference_mode():  # no autograd state at all: a few us less per call, same numbers
            action, logp, value = agent.act(actor, mask, critic, env.ranks, generator)
        ro.actor.append(kept[0])
        ro.mask.append(kept[1])
        ro.critic.append(kept[2])
        ro.actions.append(action.numpy())
        ro.logps.append(float(logp))
        ro.values.append(float(value))
        obs, reward, done, _, info = env.step(action.numpy())
        ro.rewards.append(reward)
        ro.dones.append(done)
    ro.episode_rewards.append(info["gap"])  # the paper's reward, whichever reward trains
    ro.base_scores.append(info["base_score"])
    ro.agent_scores.append(info["agent_score"])
    return ro


class Collector(Protocol):
    workers: int

    def collect(self, agent: ActorCritic, seeds: Sequence[int]) -> Rollout: ...

    def validate(self, agent: ActorCritic | None) -> list[float]:
        """The deterministic policy's score on every validation window (the base policy's for None)."""
        ...

    def close(self) -> None: ...


class LocalCollector:
    """Episodes one after another in this process."""

    def __init__(self, env: Env, validator: Validator | None = None) -> None:
        self.env = env
        self.validator = validator
        self.workers = 1

    def collect(self, agent: ActorCritic, seeds: Sequence[int]) -> Rollout:
        ro = Rollout()
        for seed in seeds:
            ro.extend(run_episode(self.env, agent, seed))
        return ro

    def validate(self, agent: ActorCritic | None) -> list[float]:
        if self.validator is None:
            raise RuntimeError("this collector was built without a validation split")
        model = None if agent is None else frozen(agent.actor)
        return [self.validator.score(model, i) for i in range(len(self.validator.windows))]

    def close(self) -> None:
        pass


State = dict[str, torch.Tensor]


class Worker:
    """What runs episodes away from the trainer: its own environment, agent and validator, built once
    (loading the trace), then handed the policy's weights with every task. The same class runs in a
    worker process and as a Ray actor."""

    def __init__(
        self, make_env: EnvFactory, rank_prior: float, make_validator: ValidatorFactory | None
    ) -> None:
        torch.set_num_threads(1)
        self.env = make_env()
        self.agent = ActorCritic(rank_prior, self.env.runtime_input)
        self.validator = None if make_validator is None else make_validator()

    def episode(self, state: State, seed: int) -> Rollout:
        self.agent.load_state_dict(state)
        return run_episode(self.env, self.agent, seed)

    def validate(self, state: State | None, window: int) -> float:
        if self.validator is None:
            raise RuntimeError("this worker was built without a validation split")
        if state is None:
            return self.validator.score(None, window)
        self.agent.load_state_dict(state)
        return self.validator.score(frozen(self.agent.actor), window)


def weights(agent: ActorCritic) -> State:
    return {k: v.detach().clone() for k, v in agent.state_dict().items()}


class ProcessCollector:
    """Episodes spread over worker processes (spawned, so no torch or trace state is shared by fork)."""

    def __init__(
        self,
        make_env: EnvFactory,
        rank_prior: float,
        workers: int,
        make_validator: ValidatorFactory | None = None,
        validation_windows: int = 0,
    ) -> None:
        context = multiprocessing.get_context("spawn")
        self.workers = workers
        self.validation_windows = validation_windows
        self.pool = context.Pool(
            workers, initializer=_init_worker, initargs=(make_env, rank_prior, make_validator)
        )

    def collect(self, agent: ActorCritic, seeds: Sequence[int]) -> Rollout:
        state = weights(agent)
        ro = Rollout()
        for part in self.pool.imap(_worker_episode, [(state, seed) for seed in seeds]):
            ro.extend(part)
        return ro

    def validate(self, agent: ActorCritic | None) -> list[float]:
        if not self.validation_windows:
            raise RuntimeError("this collector was built without a validation split")
        state = None if agent is None else weights(agent)
        return self.pool.map(_worker_validate, [(state, i) for i in range(self.validation_windows)], 1)

    def close(self) -> None:
        self.pool.close()
        self.pool.join()


class RayCollector:
    """Episodes on Ray actors, on this machine or across a Ray cluster; the batch is the one a single
    process collects (episodes come back in seed order whichever actor ran them)."""

    def __init__(
        self,
        address: str,
        make_env: EnvFactory,
        rank_prior: float,
        workers: int,
        make_validator: ValidatorFactory | None = None,
        validation_windows: int = 0,
    ) -> None:
        ray = connect_ray(address, "train --ray")
        from ray.util import ActorPool

        n = workers or max(1, int(ray.available_resources().get("CPU", 1)))
        actor = ray.remote(num_cpus=1)(Worker)
        self.workers = n
        self.validation_windows = validation_windows
        self.actors = [actor.remote(make_env, rank_prior, make_validator) for _ in range(n)]
        self.pool = ActorPool(self.actors)
        self._ray = ray

    def collect(self, agent: ActorCritic, seeds: Sequence[int]) -> Rollout:
        state = self._ray.put(weights(agent))
        ro = Rollout()
        for part in self.pool.map(lambda a, seed: a.episode.remote(state, seed), list(seeds)):
            ro.extend(part)
        return ro

    def validate(self, agent: ActorCritic | None) -> list[float]:
        if not self.validation_windows:
            raise RuntimeError("this collector was built without a validation split")
        state = None if agent is None else self._ray.put(weights(agent))
        tasks = list(range(self.validation_windows))
        return list(self.pool.map(lambda a, window: a.validate.remote(state, window), tasks))

    def close(self) -> None:
        for actor in self.actors:
            self._ray.kill(actor)


def connect_ray(address: str, what: str) -> Any:
    """The `ray` module, joined to the cluster at `address` ("local" starts Ray in this process)."""
    try:
        import ray
    except ImportError:
        raise UsageError(f"{what} needs Ray: pip install 'rltuned[ray]'") from None
    if not ray.is_initialized():
        ray.init(address=None if address == "local" else address, include_dashboard=False,
                 log_to_driver=False, configure_logging=False)  # fmt: skip
    return ray


def make_collector(
    make_env: EnvFactory,
    env: Env,
    rank_prior: float,
    workers: int,
    make_validator: ValidatorFactory | None = None,
    validator: Validator | None = None,
    ray_address: str | None = None,
) -> Collector:
    """Ray actors at `ray_address`, else `workers` processes (0: one per core); a single worker runs in
    this process on `env` and `validator`."""
    windows = 0 if validator is None else len(validator.windows)
    if ray_address is not None:
        return RayCollector(ray_address, make_env, rank_prior, workers, make_validator, windows)
    n = workers or default_workers()
    if n <= 1:
        return LocalCollector(env, validator)
    return ProcessCollector(make_env, rank_prior, n, make_validator, windows)


def default_workers() -> int:
    """The cores this process may run on."""
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


_worker: Worker | None = None
"""A pool process's worker, built once by the pool's initializer."""


def _init_worker(make_env: EnvFactory, rank_prior: float, make_validator: ValidatorFactory | None) -> None:
    global _worker  # noqa: PLW0603 - one per process, by design of multiprocessing pools
    _worker = Worker(make_env, rank_prior, make_validator)


def _worker_episode(task: tuple[State, int]) -> Rollout:
    assert _worker is not None
    return _worker.episode(*task)


def _worker_validate(task: tuple[State | None, int]) -> float:
    assert _worker is not None
    return _worker.validate(*task)
