"""Where a training episode spends its time, and the two parts that scale with how much of the queue a
sampled ranking moves (the plan and the backfill pass's starting profile), timed on their own.

Usage: python bench/training_parts.py [--trace philly|itp] [--seeds 1000,1001] [--repeat 5] [--plain 0]
       PYTHONPATH=<worktree of an older commit> python bench/training_parts.py   # the reference

Runs the shipped Philly recipe's environment (the daemon's loop, `philly-slice`, or `itp-slice` with
`--trace itp`, FCFS base, 1,024-job windows after a 512-job warm-up, qssf-noise estimates, dense
reward) with an actor whose output layer has weights of std 0.1 (an untrained policy's sampled rankings
reorder most of the queue every tick, so the plan rewrites tens of priorities a tick), torch on one
thread, no settle between runs:
- the episodes of `--seeds`, each part timed by a wrapper (parts nest: `make_plan` is inside
  `decide_ranked`, the Slurm model's passes inside `advance`); this machine's runs of one commit differ
  by up to 40%, so these shares say where time goes, not whether a change helped;
- `make_plan` alone on the run's first 4,000 plans with a non-empty ranking, across `--seeds` (its
  inputs captured as it ran, the ledger copied), and `Profile` (a backfill pass's starting profile)
  alone on the first 4,000 built: the
  fastest of `--repeat` rounds of each, in one process; run at two commits back to back, their ratio is
  the change. A hash of every captured plan's actions and of every profile's rows (`digest`) shows the
  two commits computed the same thing; `plans_digest` hashes the plans alone, for commits that skip
  more backfill passes (their profiles are other passes').
Uses only public names (`make_plan`, `Written`, `Profile`), so it runs against older commits too.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import json
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from tick_parts import SPENT, timed  # bench/tick_parts.py, this script's directory

from rltuned.core.plan import Written
from rltuned.rl.agent import ActorCritic
from rltuned.rl.args import Args
from rltuned.rl.ppo import make_env
from rltuned.rl.rollouts import run_episode
from rltuned.sim.slurm import Profile, SlurmRun
from rltuned.sim.ticks import TickEpisode

PLANS: list[tuple[Any, ...]] = []
PROFILES: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
CAPTURE = 4000


def instrument(make_plan: Callable[..., Any]) -> None:
    """Wrap the parts where their callers look them up (by module path: the package `rltuned.core`
    exports a function named `decide`, which hides its module of that name)."""
    decide_module = importlib.import_module("rltuned.core.decide")
    env_module = importlib.import_module("rltuned.rl.tick_env")
    agent_module = importlib.import_module("rltuned.rl.agent")

    plan = timed("make_plan", make_plan)

    def capturing(*args: Any) -> Any:  # the arguments as they come: commits differ in their order
        if len(PLANS) < CAPTURE and args[0].order:  # the ranking comes first in every commit
            PLANS.append(tuple(Written(dict(a.items())) if isinstance(a, Written) else a for a in args))
        return plan(*args)

    decide_module.make_plan = capturing
    env_module.decide_ranked = timed("decide_ranked (the agent's plan)", env_module.decide_ranked)
    env_module.run_ticks = timed("run_ticks (the base side, at reset)", env_module.run_ticks)
    env_module.encode = timed("encode", env_module.encode)
    agent_module.ActorCritic.act = timed("act (sample and log-prob)", agent_module.ActorCritic.act)
    TickEpisode._advance = timed("advance (Slurm between ticks)", TickEpisode._advance)  # type: ignore[method-assign]
    for method in ("snapshot", "_main", "_backfill"):
        setattr(SlurmRun, method, timed(f"slurm {method}", getattr(SlurmRun, method)))
    init = Profile.__init__

    def capturing_profile(self: Profile, now: float, free: Any, resolution_s: float, released: Any,
                          pools: Any, arrays: Any, *rest: Any, **named: Any) -> None:  # fmt: skip
        if len(PROFILES) < CAPTURE:
            copied = type(free)(list(free.gpus), list(free.cpus), list(free.mem))
            PROFILES.append(((now, copied, resolution_s, released, pools, arrays, *rest), named))
        started = time.perf_counter()
        init(self, now, free, resolution_s, released, pools, arrays, *rest, **named)
        SPENT["Profile (a backfill pass's start)"] += time.perf_counter() - started

    Profile.__init__ = capturing_profile  # type: ignore[method-assign]


def fastest(rounds: int, run: Callable[[], None]) -> float:
    best = float("inf")
    for _ in range(rounds):
        started = time.perf_counter()
        run()
        best = min(best, time.perf_counter() - started)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=("philly", "itp"), default="philly", help="on its -slice preset")
    parser.add_argument("--seeds", default="1000,1001")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--plain", type=int, default=0, help="rounds of the episodes timed unwrapped first")
    opts = parser.parse_args()
    torch.set_num_threads(1)
    from rltuned.core.plan import make_plan

    args = Args(trace=opts.trace, cluster=f"{opts.trace}-slice", base="fcfs", window=1024, warmup=512,
                reward="dense", gamma=0.99, gae_lambda=0.95, out="/tmp/bench-training-parts")  # fmt: skip
    torch.manual_seed(0)
    agent = ActorCritic()
    for p in agent.actor.net[-1].parameters():
        torch.nn.init.normal_(p, std=0.1)
    env = make_env(args)
    run_episode(env, agent, 999)  # numba's cache and the trace load before timing
    seeds = [int(s) for s in opts.seeds.split(",")]
    plain: list[float] = []
    for _ in range(opts.plain):  # the episodes' own time, before any wrapper: the figure to compare
        decisions, started = 0, time.perf_counter()
        for seed in seeds:
            decisions += len(run_episode(env, agent, seed).actions)
        plain.append((time.perf_counter() - started) / decisions * 1e3)
    instrument(make_plan)
    SPENT.clear()
    PLANS.clear()
    PROFILES.clear()
    decisions, started = 0, time.perf_counter()
    for seed in seeds:
        decisions += len(run_episode(env, agent, seed).actions)
    wall = time.perf_counter() - started

    def plans() -> None:
        for captured in PLANS:
            make_plan(*captured)

    def profiles() -> None:
        for captured, named in PROFILES:
            Profile(*captured, **named)

    digest, of_plans = hashlib.sha256(), hashlib.sha256()
    for captured in PLANS:
        actions = make_plan(*captured).actions
        written = repr([(a.job_id, a.kind, a.fields, a.value) for a in actions]).encode()
        digest.update(written)
        of_plans.update(written)
    for captured, named in PROFILES:
        built = Profile(*captured, **named)
        digest.update(np.ascontiguousarray(built.times).tobytes() + np.ascontiguousarray(built.cap).tobytes())
    plan_s, profile_s = fastest(opts.repeat, plans), fastest(opts.repeat, profiles)
    actions = sum(len(make_plan(*captured).actions) for captured in PLANS)
    parts = {name: round(s / decisions * 1e3, 3) for name, s in sorted(SPENT.items(), key=lambda kv: -kv[1])}
    body = {
        "decisions": decisions,
        "plain_ms_per_decision": [round(ms, 3) for ms in plain],
        "episode_ms_per_decision": round(wall / decisions * 1e3, 3),
        "parts_ms_per_decision": parts,
        "plans": len(PLANS),
        "actions_per_plan": round(actions / max(len(PLANS), 1), 1),
        "make_plan_us": round(plan_s / max(len(PLANS), 1) * 1e6, 1),
        "profiles": len(PROFILES),
        "profile_us": round(profile_s / max(len(PROFILES), 1) * 1e6, 1),
        "digest": digest.hexdigest()[:16],
        "plans_digest": of_plans.hexdigest()[:16],
    }
    print(json.dumps(body, indent=2))


if __name__ == "__main__":
    main()
