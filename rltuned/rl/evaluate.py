"""Honest evaluation: a base policy and its RL-enabled counterpart on the same windows of one split.

Both sides run the same loop on the same jobs, with the same runtime estimates (noisy by default):
by default the daemon's loop (`sim/ticks.py`: a decision per tick by the decision core, Slurm's
schedulers behind it), where the base side is the daemon without a model, so the two sides differ only
by the model. `SimConfig` instead selects the paper-replication loop (a job chosen per decision, EASY
behind it), reported only under that name. The agent acts deterministically (the argsort of its
scores). Windows are those of `rl/splits.py`: disjoint windows of the validation split (where every
choice is made) or of the test split (run once per shipped model), each after its preceding jobs.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from rltuned.core import CoreSettings, Lever
from rltuned.core.guard import GuardSettings
from rltuned.core.scoring import score_queue
from rltuned.domain import ClusterSpec, Job
from rltuned.features import encode
from rltuned.policies import make_policy
from rltuned.rl.export import LoadedModel
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.runner import METRIC_KEYS, Window
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.sim.slurm import SlurmParams
from rltuned.sim.slurm_config import params_from_record
from rltuned.sim.ticks import TickSettings, run_ticks

LOWER_IS_BETTER = {k: k != "gpu_util" for k in METRIC_KEYS}


@dataclass(frozen=True)
class Comparison:
    base: str
    loop: str
    """"ticks" (the daemon's loop) or "paper" (the paper-replication loop)."""
    base_metrics: tuple[Metrics, ...]
    rl_metrics: tuple[Metrics, ...]
    base_waits: tuple[float, ...]
    rl_waits: tuple[float, ...]

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {"base": self.base, "loop": self.loop, "windows": len(self.base_metrics)}
        for key in METRIC_KEYS:
            b = np.array([getattr(m, key) for m in self.base_metrics])
            r = np.array([getattr(m, key) for m in self.rl_metrics])
            better = (b.mean() - r.mean()) if LOWER_IS_BETTER[key] else (r.mean() - b.mean())
            out[key] = {
                "base_mean": float(b.mean()),
                "base_std": float(b.std()),
                "rl_mean": float(r.mean()),
                "rl_std": float(r.std()),
                "improvement_pct": float(100.0 * better / b.mean()) if b.mean() else 0.0,
            }
        # How often the starvation guard overrode each side's ranking (measured jobs promoted).
        out["guarded"] = {
            "base": sum(m.guarded for m in self.base_metrics),
            "rl": sum(m.guarded for m in self.rl_metrics),
        }
        return out


def run_rl(simulator: Simulator, model: LoadedModel, jobs: Sequence[Job], warmup: int) -> SimResult:
    """The paper-replication loop's agent: at every decision, the visible job with the highest actor score
    (the base's choice where the model is not trusted, as in the daemon)."""
    episode = simulator.episode(jobs, warmup)
    while episode.result is None:
        obs = encode(episode.snapshot(), simulator.policy)
        scored = score_queue(model, obs, float("inf"))
        slot = 0 if scored.scores is None else int(np.argmax(scored.scores))
        episode.choose(int(obs.job_ids[slot]))
    return episode.result


Side = Callable[[Sequence[Job], int, LoadedModel | None], SimResult]
"""Runs one side of a comparison: (jobs, how many of them are warm-up, the model or None) -> result."""


def make_side(cluster: ClusterSpec, base: str, config: TickSettings | SimConfig) -> Side:
    """One side of a comparison in the loop `config` names; the base side is the same call with no model."""
    if isinstance(config, TickSettings):
        settings = replace(config, base=base)

        def ticks(chunk: Sequence[Job], warm: int, agent: LoadedModel | None) -> SimResult:
            return run_ticks(cluster, chunk, warm, settings, agent)

        return ticks
    # Full passes on the base side too: an agent that always picks the base's choice reproduces it.
    simulator = Simulator(cluster, make_policy(base), replace(config, incremental=False))

    def paper(chunk: Sequence[Job], warm: int, agent: LoadedModel | None) -> SimResult:
        return simulator.run(chunk, warm) if agent is None else run_rl(simulator, agent, chunk, warm)

    return paper


def compare(
    model: LoadedModel | None,
    jobs: Sequence[Job],
    cluster: ClusterSpec,
    base: str,
    config: TickSettings | SimConfig,
    windows: Sequence[Window],
    warmup: int,
    progress: Callable[[], None] | None = None,
) -> Comparison:
    """Each window run by both sides; `model=None` runs the base on both (they must then agree)."""
    loop = "ticks" if isinstance(config, TickSettings) else "paper"
    side = make_side(cluster, base, config)
    base_m: list[Metrics] = []
    rl_m: list[Metrics] = []
    base_w: list[float] = []
    rl_w: list[float] = []
    for w in windows:
        chunk, warm = w.with_warmup(jobs, warmup)
        base_result = side(chunk, warm, None)
        rl_result = side(chunk, warm, model)
        base_m.append(compute_metrics(base_result))
        rl_m.append(compute_metrics(rl_result))
        base_w.extend(r.wait for r in base_result.records)
        rl_w.extend(r.wait for r in rl_result.records)
        if progress is not None:
            progress()
    return Comparison(base, loop, tuple(base_m), tuple(rl_m), tuple(base_w), tuple(rl_w))


def tick_settings_of(manifest: Mapping[str, Any], base: str, backfill: bool | None = None) -> TickSettings:
    """The daemon and Slurm settings a model was trained in (`rl/ppo.tick_settings`), from its manifest."""
    placing = bool(manifest.get("placement_levers", False))
    lever = Lever(kind=str(manifest.get("lever", "priority")), oversubscribe=placing, steer_untyped=placing)
    recorded = manifest.get("slurm_params")
    slurm = params_from_record(recorded) if isinstance(recorded, Mapping) else SlurmParams()
    bf = slurm.backfill and bool(manifest.get("backfill", True)) if backfill is None else backfill
    interval = float(manifest.get("interval_s", 60.0))
    guard = manifest.get("guard")  # models from before the guard existed: today's default guard
    core = CoreSettings(
        lever=lever,
        guard=GuardSettings(**guard) if isinstance(guard, Mapping) else GuardSettings(),
        refresh_s=float(manifest.get("refresh_s", 0.0)),  # models from before quiet ticks: every tick
    )
    return TickSettings(base, interval, core, replace(slurm, backfill=bf))


def plot(comparisons: Sequence[Comparison], path: str) -> None:
    """Per-metric box plots (base vs RL, per base policy) and a wait-time CDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = ("avg_bsld", "avg_wait_s", "avg_jct_s", "gpu_util")
    fig, axes = plt.subplots(1, len(keys) + 1, figsize=(4 * (len(keys) + 1), 4))
    for ax, key in zip(axes, keys, strict=False):
        data, labels = [], []
        for c in comparisons:
            data += [[getattr(m, key) for m in c.base_metrics], [getattr(m, key) for m in c.rl_metrics]]
            labels += [c.base, f"{c.base}+RL"]
        ax.boxplot(data)
        ax.set_xticks(range(1, len(labels) + 1), labels, rotation=45, ha="right")
        ax.set_title(key)
    cdf = axes[-1]
    for c in comparisons:
        for waits, label in ((c.base_waits, c.base), (c.rl_waits, f"{c.base}+RL")):
            xs = np.sort(np.array(waits))
            cdf.plot(xs, np.arange(1, len(xs) + 1) / len(xs), label=label)
    cdf.set_xscale("symlog")
    cdf.set_title("wait time CDF (s)")
    cdf.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
