"""PPO rollouts on every core: one epoch's episodes collected in this process vs in worker processes.

Usage: python bench/rollouts.py [--episodes 8] [--workers 2] [--window 1024]

Measures, on this machine, the training collection of the shipped Philly recipe (the daemon's loop,
`philly-slice`, FCFS base, 1,024-job windows after a 512-job warm-up, qssf-noise estimates) with an
actor whose scores are not all equal: wall time of `LocalCollector` and of `ProcessCollector` with
`--workers` processes on the same seeds, their ratio, and whether the two batches are identical.
Worker start-up (spawn, trace loading) and one warm-up episode per worker are timed apart: a training
run pays the start-up once. Torch on one thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import time
from functools import partial

import numpy as np
import torch

from rltuned.rl.agent import ActorCritic
from rltuned.rl.args import Args
from rltuned.rl.ppo import make_env
from rltuned.rl.rollouts import LocalCollector, ProcessCollector


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--window", type=int, default=1024)
    opts = parser.parse_args()
    torch.set_num_threads(1)
    args = Args(trace="philly", cluster="philly-slice", base="fcfs", window=opts.window, warmup=512,
                reward="dense", gamma=0.99, gae_lambda=0.95, out="/tmp/bench-rollouts")  # fmt: skip
    torch.manual_seed(0)
    agent = ActorCritic()
    for p in agent.actor.net[-1].parameters():
        torch.nn.init.normal_(p, std=0.1)
    seeds = range(1000, 1000 + opts.episodes)
    env = make_env(args)
    t0 = time.perf_counter()
    one = LocalCollector(env).collect(agent, seeds)
    local_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    pool = ProcessCollector(partial(make_env, args), 0.0, opts.workers)
    pool.collect(agent, range(opts.workers))  # one short round: every worker has built its environment
    start_s = time.perf_counter() - t0
    try:
        t0 = time.perf_counter()
        many = pool.collect(agent, seeds)
        pool_s = time.perf_counter() - t0
    finally:
        pool.close()
    same = len(one.actions) == len(many.actions) and all(
        np.array_equal(a, b) for a, b in zip(one.actions, many.actions, strict=True)
    )
    print(json.dumps({
        "machine": f"{platform.processor() or platform.machine()}, Python {platform.python_version()}",
        "episodes": opts.episodes,
        "decisions": len(one.actions),
        "local_s": local_s,
        "workers": opts.workers,
        "workers_s": pool_s,
        "worker_start_s": start_s,
        "speedup": local_s / pool_s,
        "decisions_per_s_local": len(one.actions) / local_s,
        "decisions_per_s_workers": len(many.actions) / pool_s,
        "identical_batches": same,
        "peak_rss_mb_main": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }, indent=2))  # fmt: skip


if __name__ == "__main__":
    main()
