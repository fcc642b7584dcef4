"""The daemon's loop in the simulator: how fast Slurm's schedulers plus a decision per tick run.

Usage: python bench/ticks.py [--windows 5]

Measures, on this machine, 1,024-job Philly windows on `philly-slice` after a 512-job warm-up (the setting
the shipped models train and are evaluated in), FCFS base, default Slurm parameters, interval 60 s:
1. the base side (`run_ticks` without a model): jobs/s and ticks/s;
2. the same windows with a TorchScript actor in the loop (the shipped Philly FCFS model): jobs/s;
3. the paper-replication loop's EASY run of the same windows (`Simulator.run`), as the reference measured
   in the same process.
Trace loading is excluded; wall clock (perf_counter), torch on one thread.
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from pathlib import Path

import torch

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.policies import make_policy
from rltuned.rl.export import load_model
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimConfig, Simulator
from rltuned.sim.ticks import TickEpisode, TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

MODEL = Path(__file__).resolve().parents[1] / "models" / "philly-fcfs-bsld"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=5)
    args = parser.parse_args()
    torch.set_num_threads(1)
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    cluster = load_cluster("philly-slice")
    model = load_model(MODEL)
    settings = TickSettings("fcfs")
    paper = Simulator(cluster, make_policy("fcfs"), SimConfig())
    out: dict[str, dict[str, float]] = {}
    for name in ("paper_easy", "ticks_base", "ticks_model"):
        wall, measured, ticks = 0.0, 0, 0
        for w in choose_windows(len(jobs) - 512, 1024, None, args.windows, seed=0):
            chunk, warm = w.with_warmup(jobs, 512) if w.start >= 512 else (jobs[w.start : w.stop], 0)
            t0 = time.perf_counter()
            if name == "paper_easy":
                result = paper.run(chunk, warm)
            else:
                episode = TickEpisode(cluster, chunk, warm, settings)
                agent = model if name == "ticks_model" else None
                while episode.result is None:
                    episode.apply(episode.decide(agent))
                    ticks += 1
                result = episode.result
            wall += time.perf_counter() - t0
            measured += len(result.records) + len(result.background)
        out[name] = {
            "jobs_per_s": measured / wall,
            "wall_s": wall,
            "ticks": ticks,
            "ticks_per_s": ticks / wall,
        }
    machine = f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    print(json.dumps({"machine": machine, "windows": args.windows, **out}, indent=2))


if __name__ == "__main__":
    main()
