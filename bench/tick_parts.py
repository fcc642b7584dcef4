"""Where a tick of the daemon's loop spends its time: the decision's parts and the simulated Slurm's.

Usage: python bench/tick_parts.py [--trace philly|itp] [--repeat 4] [--no-model] [--engine torchscript]

Runs one 1,024-job window (window seed 0) after a 512-job warm-up on the trace's slice preset, in the
configuration training runs (FCFS base, placement levers off, every tick decides), with the trace's
shipped FCFS actor unless `--no-model`, torch on one thread. Each part is timed by wrapping its function
with perf_counter (a few hundred ns per call of overhead, well under the parts' own cost); parts nest
(`rank_jobs` holds `encode` and `score_queue`). The run is repeated and the fastest kept, whole: this
machine's runs of the same code differ by up to a third, and noise only ever adds time. The figures
docs/performance.md gives per tick come from here.
"""

from __future__ import annotations

import argparse
import functools
import importlib
import json
import time
from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from simulate import settle  # bench/simulate.py, this script's directory

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.rl import ENGINES
from rltuned.rl.args import Args
from rltuned.rl.export import load_model
from rltuned.rl.ppo import tick_settings
from rltuned.sim.runner import choose_windows
from rltuned.sim.slurm import SlurmRun
from rltuned.sim.ticks import TickEpisode
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

MODELS = Path(__file__).resolve().parents[1] / "models"
SPENT: defaultdict[str, float] = defaultdict(float)


def timed(name: str, f: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return f(*args, **kwargs)
        finally:
            SPENT[name] += time.perf_counter() - started

    return wrapper


def instrument() -> None:
    """Wrap the parts where the modules that call them look them up (by module path: the package
    `rltuned.core` exports a function named `decide`, which hides its module of that name)."""
    ranking_module = importlib.import_module("rltuned.core.ranking")
    decide_module = importlib.import_module("rltuned.core.decide")
    ranking_module.encode = timed("encode", ranking_module.encode)
    ranking_module.score_queue = timed("score_queue (forward pass)", ranking_module.score_queue)
    decide_module.rank_jobs = timed("rank_jobs", decide_module.rank_jobs)
    decide_module.make_plan = timed("make_plan", decide_module.make_plan)
    for method in ("snapshot", "_main", "_backfill", "_events", "apply"):
        setattr(SlurmRun, method, timed(f"slurm {method}", getattr(SlurmRun, method)))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=("philly", "itp"), default="philly")
    parser.add_argument("--repeat", type=int, default=4)
    parser.add_argument("--no-model", action="store_true")
    parser.add_argument("--engine", choices=ENGINES, default="compiled", help="what runs the actor")
    args = parser.parse_args()
    torch.set_num_threads(1)
    jobs, _ = apply_estimates(load_trace(resolve_trace(args.trace)).jobs, "qssf-noise", 0)
    cluster = load_cluster(f"{args.trace}-slice")
    model = None if args.no_model else load_model(MODELS / f"{args.trace}-fcfs-bsld-ticks", args.engine)
    settings = tick_settings(Args(base="fcfs"))  # the settings `rltunectl train` runs
    window = next(iter(choose_windows(len(jobs) - 512, 1024, None, 1, seed=0)))
    chunk, warm = window.with_warmup(jobs, 512)
    instrument()
    best: tuple[float, dict[str, float], int] | None = None
    for _ in range(args.repeat):
        SPENT.clear()
        settle()
        started = time.perf_counter()
        episode, ticks = TickEpisode(cluster, chunk, warm, settings), 0
        while episode.result is None:
            episode.apply(episode.decide(model))
            ticks += 1
        wall = time.perf_counter() - started
        if best is None or wall < best[0]:
            best = (wall, dict(SPENT), ticks)
    assert best is not None
    wall, spent, ticks = best
    per_tick = {name: round(s / ticks * 1e6) for name, s in sorted(spent.items(), key=lambda kv: -kv[1])}
    body = {
        "trace": args.trace,
        "model": model is not None,
        "engine": None if model is None else model.engine,
        "ticks": ticks,
        "tick_us": round(wall / ticks * 1e6),
        "ticks_per_s": round(ticks / wall),
        "parts_us_per_tick": per_tick,
    }
    print(json.dumps(body, indent=2))


if __name__ == "__main__":
    main()
