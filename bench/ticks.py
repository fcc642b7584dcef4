"""The daemon's loop in the simulator: how fast Slurm's schedulers plus a decision per tick run.

Usage: python bench/ticks.py [--trace philly|itp] [--windows 3] [--loops LIST] [--refresh-s S] [--repeat N]
       [--rounds N]
       (`--loops` default: paper_easy,paper_milp,base,model,train_base,train_model,alone,train_alone;
       also model_ts, train_model_ts)

Measures, on this machine, 1,024-job windows (window seed 0) after a 512-job warm-up (the setting the
models train and are evaluated in) on the trace's slice preset (`philly-slice`, `itp-slice`), FCFS base,
Slurm 22.05's scheduler defaults, interval 60 s, torch on one thread:
- `base`, `model`: the daemon's default config (priority lever, OverSubscribe and steering on, so the
  MILP places the top jobs every tick), without a model and with the trace's shipped FCFS actor;
- `train_base`, `train_model`: the configuration training runs by default (placement levers off);
- `alone`, `train_alone`: `base` and `train_base` as `run_ticks` runs them without a model (the base side
  of every evaluation and training's reward reference): a time-invariant base passes unchanged ticks
  (the same schedule, `tests/sim/test_ticks.py`); ticks are not counted there;
- `model_ts`, `train_model_ts`: `model` and `train_model` with the actor run by the TorchScript
  interpreter instead of its compiled kernel (`rl/actor_kernel.py`): the reference for the kernel,
  in the same process;
- `paper_easy`: the paper-replication loop's EASY run of the same windows (`Simulator.run`), the
  reference measured in the same process; `paper_milp`: the same with `--placement milp` (the solver
  places the top jobs at every scheduling pass).
One untimed paper-loop run of the first window comes first (numba's cache loads on first call).
Jobs/s counts warm-up and measured jobs; ticks are the daemon's ticks, decisions those that were not
quiet (with `--refresh-s`, core/quiet.py; otherwise every tick decides). With `--repeat N` each
window runs N times and its fastest run counts: this machine's runs of the same code differ by up to
a third, and noise only ever adds time. With `--rounds N` the whole list of loops runs N times,
alternating, and each loop reports every round (`rounds_ticks_per_s`, `rounds_jobs_per_s`) and the
median. Each window starts after `settle()` (collect, then freeze what is alive). Trace loading is excluded;
wall clock (perf_counter). Works against older commits too (PYTHONPATH=<worktree>): it uses only the
tick loop's public API.
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import resource
import statistics
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import torch
from simulate import settle  # bench/simulate.py, this script's directory

from rltuned.clusters import load_cluster
from rltuned.domain import ClusterSpec, Job
from rltuned.estimates import apply_estimates
from rltuned.policies import make_policy
from rltuned.rl.args import Args
from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.ppo import tick_settings
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.sim.ticks import TickEpisode, TickSettings, run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

MODELS = Path(__file__).resolve().parents[1] / "models"
MODEL = {"philly": MODELS / "philly-fcfs-bsld-ticks", "itp": MODELS / "itp-fcfs-bsld-ticks"}
LOOPS = (
    "paper_easy",
    "paper_milp",
    "base",
    "model",
    "train_base",
    "train_model",
    "alone",
    "train_alone",
    "model_ts",
    "train_model_ts",
)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", choices=sorted(MODEL), default="philly")
    parser.add_argument("--windows", type=int, default=3)
    parser.add_argument(
        "--repeat", type=int, default=1, help="runs of each window; the fastest counts (noise only adds time)"
    )
    parser.add_argument("--loops", default=",".join(LOOPS[:8]))
    parser.add_argument("--rounds", type=int, default=1, help="runs of the whole list of loops, alternating")
    parser.add_argument(
        "--refresh-s", type=float, default=0.0, help="quiet ticks (core/quiet.py) with this refresh_s"
    )
    args = parser.parse_args()
    torch.set_num_threads(1)
    jobs, _ = apply_estimates(load_trace(resolve_trace(args.trace)).jobs, "qssf-noise", 0)
    cluster = load_cluster(f"{args.trace}-slice")
    model = load_model(MODEL[args.trace])
    training = tick_settings(Args(base="fcfs")).core  # the settings `rltunectl train` runs
    paper = Simulator(cluster, make_policy("fcfs"), SimConfig())
    paper_milp = Simulator(cluster, make_policy("fcfs"), SimConfig(placement="milp"))
    windows = list(choose_windows(len(jobs) - 512, 1024, None, args.windows, seed=0))
    # Untimed: the compiled kernels load from numba's cache on their first call (a one-time cost of
    # about 0.15 s that would otherwise fall on whichever loop runs first).
    paper.run(*windows[0].with_warmup(jobs, 512))
    if "paper_milp" in args.loops:
        paper_milp.run(*windows[0].with_warmup(jobs, 512))
    rounds: dict[str, list[dict[str, float]]] = {}
    for name in args.loops.split(",") * args.rounds:
        if name not in LOOPS:
            parser.error(f"--loops: unknown loop {name!r}, expected some of {', '.join(LOOPS)}")
        settings = TickSettings("fcfs", core=training) if name.startswith("train_") else TickSettings("fcfs")
        if args.refresh_s:
            settings = replace(settings, core=replace(settings.core, refresh_s=args.refresh_s))
        agent: LoadedModel | None = model if "model" in name else None
        if name.endswith("_ts"):
            agent = replace(model, kernel=None)
        wall, measured, ticks, decisions = 0.0, 0, 0, 0
        for w in windows:
            chunk, warm = w.with_warmup(jobs, 512)
            fastest = math.inf
            for _ in range(args.repeat):  # the same run each time: only the wall clock differs
                settle()
                t0 = time.perf_counter()
                if name.startswith("paper_"):
                    result, run_ticks_n, run_decisions = (
                        (paper if name == "paper_easy" else paper_milp).run(chunk, warm),
                        0,
                        0,
                    )
                elif name.endswith("alone"):
                    result, run_ticks_n, run_decisions = run_ticks(cluster, chunk, warm, settings), 0, 0
                else:
                    result, run_ticks_n, run_decisions = _episode(cluster, chunk, warm, settings, agent)
                fastest = min(fastest, time.perf_counter() - t0)
            wall += fastest
            ticks, decisions = ticks + run_ticks_n, decisions + run_decisions
            measured += len(result.records) + len(result.background)
        figures = {"jobs_per_s": measured / wall, "wall_s": wall, "ticks": ticks, "decisions": decisions}
        rounds.setdefault(name, []).append({**figures, "ticks_per_s": ticks / wall})
    out = {name: _summary(runs) for name, runs in rounds.items()}
    machine = f"{platform.processor() or platform.machine()}, Python {platform.python_version()}"
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    body = {"machine": machine, "trace": args.trace, "windows": args.windows, "peak_rss_mb": peak_mb, **out}
    print(json.dumps(body, indent=2))


def _summary(runs: list[dict[str, float]]) -> dict[str, Any]:
    """One round's figures as they are; several rounds' medians, with every round's figure."""
    if len(runs) == 1:
        return dict(runs[0])
    return {
        "jobs_per_s": statistics.median(r["jobs_per_s"] for r in runs),
        "ticks_per_s": statistics.median(r["ticks_per_s"] for r in runs),
        "ticks": runs[0]["ticks"],
        "decisions": runs[0]["decisions"],
        "rounds_ticks_per_s": [round(r["ticks_per_s"]) for r in runs],
        "rounds_jobs_per_s": [round(r["jobs_per_s"]) for r in runs],
    }


def _episode(
    cluster: ClusterSpec, chunk: Sequence[Job], warm: int, settings: TickSettings, agent: LoadedModel | None
) -> tuple[SimResult, int, int]:
    """The daemon's loop over one window: its result, ticks and decisions."""
    episode, ticks, decisions = TickEpisode(cluster, chunk, warm, settings), 0, 0
    while episode.result is None:
        if getattr(episode, "quiet", False):  # older commits have no quiet ticks
            episode.pass_quiet()
        else:
            episode.apply(episode.decide(agent))
            decisions += 1
        ticks += 1
    return episode.result, ticks, decisions


if __name__ == "__main__":
    main()
