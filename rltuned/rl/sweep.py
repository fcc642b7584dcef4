"""Seed and recipe sweeps on Ray Tune, judged on the validation split only.

Every trial is one `train` run with the sweep's flags plus one point of the grid; it validates as it
trains (`--validate-every`) and reports the validation gap of the actor it exports. The test split is
never read, so the sweep can pick a recipe, a seed or a checkpoint without spending it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rltuned.errors import UsageError
from rltuned.rl.args import Args


@dataclass(frozen=True)
class Trial:
    point: dict[str, Any]
    """the grid values this trial ran with"""
    out: str
    validation_gap: float
    """the gap to the base on validation as `Args.validation_score` measures it (positive: better)"""
    base_score: float
    agent_score: float
    epoch: int
    """the epoch whose actor was exported (the best on validation)"""
    epochs_done: int
    wins: int
    windows: int
    wall_s: float


def trial_name(point: Mapping[str, Any]) -> str:
    return ",".join(f"{k}={v}" for k, v in sorted(point.items())) or "default"


def run_trial(base: Args, root: Path, point: Mapping[str, Any]) -> Trial:
    """One training run at one grid point; what its exported manifest says about validation."""
    from rltuned.rl.ppo import train  # torch, in the trial's own process only

    out = root / trial_name(point)
    args = replace(base, **point, out=str(out), extra={})
    t0 = time.perf_counter()
    manifest = json.loads((train(args) / "manifest.json").read_text())
    chosen = manifest["validation"]
    return Trial(
        point=dict(point),
        out=str(out),
        validation_gap=float(chosen["gap"]),
        base_score=float(chosen["base_score"]),
        agent_score=float(chosen["agent_score"]),
        epoch=int(chosen["epoch"]),
        epochs_done=int(manifest["epochs_done"]),
        wins=int(chosen["wins"]),
        windows=int(chosen["windows"]),
        wall_s=time.perf_counter() - t0,
    )


def sweep(
    base: Args,
    grid: Mapping[str, Sequence[Any]],
    root: Path,
    address: str,
    cpus_per_trial: int = 1,
    verbose: int = 1,
) -> list[Trial]:
    """Every point of the grid as a Ray Tune trial on the Ray cluster at `address` (`local`: start one
    here), `cpus_per_trial` rollout processes each; trials best first."""
    if base.validate_every < 1:
        raise UsageError("a sweep chooses on the validation split: --validate-every must be >= 1")
    if "out" in grid or "ray" in grid:
        raise UsageError("--grid cannot vary out or ray")
    fixed = sorted(
        {"validation_score", "validation_window", "validation_estimate_seeds", "estimates_seed"} & set(grid)
    )
    if fixed:  # trials are ranked by their gaps: one scale and one validation set for all of them
        raise UsageError(
            f"--grid cannot vary {', '.join(fixed)}: the trials must be judged on one validation"
        )
    base.check()
    for key, values in grid.items():
        for value in values:
            replace(base, **{key: value}).check()  # a bad value fails now, not in trial 7
    from rltuned.rl.rollouts import connect_ray  # torch, only once a sweep runs

    connect_ray(address, "rltunectl sweep")
    from ray import tune

    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    # Trials train with worker processes of their own; Ray only places them.
    trial_args = replace(base, ray=None, workers=cpus_per_trial)

    def trainable(config: dict[str, Any]) -> dict[str, Any]:
        trial = run_trial(trial_args, root, config)
        return {"validation_gap": trial.validation_gap, "trial": json.dumps(trial.__dict__)}

    tuner = tune.Tuner(
        tune.with_resources(trainable, {"cpu": cpus_per_trial}),
        param_space={k: tune.grid_search(list(v)) for k, v in grid.items()},
        tune_config=tune.TuneConfig(metric="validation_gap", mode="max"),
        run_config=tune.RunConfig(storage_path=str(root / "ray"), name="sweep", verbose=verbose),
    )
    results = tuner.fit()
    trials: list[Trial] = []
    for i in range(len(results)):
        result = results[i]
        if result.error is not None:
            raise UsageError(f"a trial failed: {result.error}")
        assert result.metrics is not None
        trials.append(Trial(**json.loads(result.metrics["trial"])))
    return sorted(trials, key=lambda t: -t.validation_gap)


def render(trials: Sequence[Trial], metric: str, fmt: Callable[[float], str]) -> str:
    """The summary table, best on validation first."""
    keys = sorted({k for t in trials for k in t.point})
    header = [*keys, "val gap", f"base {metric}", f"model {metric}", "won", "epoch", "epochs", "min"]
    rows = [
        [*(str(t.point.get(k, "")) for k in keys), f"{100 * t.validation_gap:+.1f}%", fmt(t.base_score),
         fmt(t.agent_score), f"{t.wins}/{t.windows}", str(t.epoch), str(t.epochs_done),
         f"{t.wall_s / 60:.1f}"]
        for t in trials
    ]  # fmt: skip
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    lines = ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in [header, *rows]]
    if trials:
        lines.append(f"best on validation: {trials[0].out}")
    return "\n".join(lines)
