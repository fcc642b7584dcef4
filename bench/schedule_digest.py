"""A hash of every schedule the daemon's loop produces, to show a speed change left them all unchanged.

Usage: python bench/schedule_digest.py [--quick]
       PYTHONPATH=<worktree of an older commit> python bench/schedule_digest.py   # the reference

Runs 1,024-job windows (window seed 0) after a 512-job warm-up on the trace's slice preset (Philly: 2
windows, ITP: 1; `--quick`: one Philly window) in the simulated daemon's loop under several
configurations: the daemon's default config, the training config (placement levers off), quiet ticks
(refresh_s=600), an SJF base, the SiteFactor lever, and paced writes (writes_per_s=5), each without a
model and, for FCFS-based configurations, with the trace's shipped FCFS actor. Each line prints a
SHA-256 over every job's (id, start, end, allocation) in the order the run recorded them, warm-up jobs
included. Two commits whose lines match schedule every job identically in every configuration; a
line that differs names the configuration to look at. Uses only the tick loop's public API, so it runs
against older commits too.
"""

from __future__ import annotations

import argparse
import hashlib
from pathlib import Path

import torch

from rltuned.clusters import load_cluster
from rltuned.core import CoreSettings, Lever
from rltuned.estimates import apply_estimates
from rltuned.rl.args import Args
from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.ppo import tick_settings
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimResult
from rltuned.sim.ticks import TickEpisode, TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

MODELS = Path(__file__).resolve().parents[1] / "models"
TRAINING = tick_settings(Args(base="fcfs")).core  # the settings `rltunectl train` runs
CONFIGS: dict[str, TickSettings] = {
    "default": TickSettings("fcfs"),
    "training": TickSettings("fcfs", core=TRAINING),
    "quiet": TickSettings("fcfs", core=CoreSettings(refresh_s=600.0)),
    "sjf": TickSettings("sjf"),
    "sitefactor": TickSettings("fcfs", core=CoreSettings(lever=Lever(kind="site_factor"))),
    "paced": TickSettings("fcfs", writes_per_s=5.0),
}


def digest(result: SimResult) -> str:
    h = hashlib.sha256()
    for record in (*result.background, *result.records):
        h.update(repr((record.job.id, record.start, record.end, record.allocation)).encode())
    return h.hexdigest()[:16]


def run(episode: TickEpisode, model: LoadedModel | None) -> SimResult:
    while episode.result is None:
        if getattr(episode, "quiet", False):
            episode.pass_quiet()
        else:
            episode.apply(episode.decide(model))
    return episode.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one Philly window only")
    args = parser.parse_args()
    torch.set_num_threads(1)
    plan = {"philly": 1} if args.quick else {"philly": 2, "itp": 1}
    for trace, count in plan.items():
        jobs, _ = apply_estimates(load_trace(resolve_trace(trace)).jobs, "qssf-noise", 0)
        cluster = load_cluster(f"{trace}-slice")
        model = load_model(MODELS / f"{trace}-fcfs-bsld-ticks")
        for w, window in enumerate(choose_windows(len(jobs) - 512, 1024, None, count, seed=0)):
            chunk, warm = window.with_warmup(jobs, 512)
            for name, settings in CONFIGS.items():
                agents: list[LoadedModel | None] = [None] if settings.base != "fcfs" else [None, model]
                for agent in agents:
                    result = run(TickEpisode(cluster, chunk, warm, settings), agent)
                    label = f"{trace} w{w} {name:<10} {'model' if agent else 'base '}"
                    print(label, digest(result), flush=True)


if __name__ == "__main__":
    main()
