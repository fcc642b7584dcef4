"""Choosing the checkpoint on the validation split, in the loop the model was trained in.

Every few epochs the trainer runs the deterministic policy (the argsort of the actor's scores, frozen to
TorchScript exactly as `export_actor` freezes it, so the daemon's code path ranks) on every disjoint
window of the validation split, and keeps the actor with the best score relative to the base policy.
The test split is never read here.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rltuned.clusters import load_cluster
from rltuned.domain import ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates, draw_seeds
from rltuned.features import LIMIT
from rltuned.rl.env import reward, score
from rltuned.rl.evaluate import make_side, tick_settings_of
from rltuned.rl.export import LoadedModel, loaded, quiet_torchscript
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.simulator import SimConfig
from rltuned.sim.ticks import TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


class Validator:
    """Scores a model (or the base policy, `model=None`) on one validation window at a time.

    `draws` holds the trace once per draw of the runtime-estimate noise (one list for exact estimates or
    a trace's own limits); the windows are every disjoint window of the split in every draw. One draw
    chooses a checkpoint on one set of noisy limits: Philly's SJF model gained 7.4% per window on the
    draw it was chosen on and -0.3% and +2.0% on two others (docs/training.md)."""

    def __init__(
        self,
        draws: Sequence[Sequence[Job]],
        cluster: ClusterSpec,
        base: str,
        config: TickSettings | SimConfig,
        warmup: int,
        metric: str,
        window: int | None = None,
    ) -> None:
        self.draws = [list(jobs) for jobs in draws]
        split = disjoint_windows(split_range(len(self.draws[0]), "validation"), window)
        self.windows = [(d, w) for d in range(len(self.draws)) for w in split]
        self.cluster = cluster
        self.base = base
        self.config = config
        self.warmup = warmup
        self.metric = metric
        self.side = make_side(cluster, base, config)

    def under(self, config: TickSettings | SimConfig) -> Validator:
        """The same windows and draws in another loop configuration (another guard, say)."""
        other = copy.copy(self)
        other.config = config
        other.side = make_side(self.cluster, self.base, config)
        return other

    def score(self, model: LoadedModel | None, window: int) -> float:
        return score(self.metrics(model, window), self.metric)

    def metrics(self, model: LoadedModel | None, window: int) -> Metrics:
        """Every measure of one validation window, for checks that read more than the chosen metric."""
        draw, span = self.windows[window]
        chunk, warm = span.with_warmup(self.draws[draw], self.warmup)
        return compute_metrics(self.side(chunk, warm, model))


def model_validator(manifest: Mapping[str, Any], draws: int | None = None) -> Validator:
    """The validator a model trained in the daemon's loop was chosen with, rebuilt from its manifest: its
    trace with the draws of the estimate noise it was validated on (`draw_seeds`, as the trainer draws
    them; `draws` of them from the same first one instead, if given), its cluster, base, loop settings,
    warm-up, metric and windows. For checks on validation after training (scripts/guard_validation.py,
    scripts/ensemble_validation.py, scripts/validation_power.py)."""
    if manifest.get("loop") != "ticks":
        raise UsageError(
            f"the model was trained in the {manifest.get('loop', 'paper')!r} loop, not the daemon's"
        )
    estimates = str(manifest["estimates"])
    resolved = str(manifest.get("estimates_resolved", estimates))
    count = draws if draws is not None else int(manifest.get("validation_estimate_seeds") or 1)
    seeds = draw_seeds(resolved, int(manifest["estimates_seed"]), count)
    trace = load_trace(resolve_trace(str(manifest["trace"]))).jobs
    base = str(manifest["base"])
    window = manifest.get("validation_window")
    return Validator(
        [apply_estimates(trace, estimates, seed)[0] for seed in seeds],
        load_cluster(str(manifest["cluster"])),
        base,
        tick_settings_of(manifest, base),
        int(manifest["warmup"]),
        str(manifest["metric"]),
        None if window is None else int(window),
    )


def frozen(actor: nn.Module) -> LoadedModel:
    """The actor as the daemon would load it (scripted and frozen), without writing it to disk."""
    with quiet_torchscript():
        module = torch.jit.freeze(torch.jit.script(copy.deepcopy(actor).eval()))
    return loaded(module, {"runtime_input": getattr(actor, "runtime_input", LIMIT)}, Path("(training)"))


def gap(
    base_scores: Sequence[float], agent_scores: Sequence[float], metric: str, how: str = "pooled"
) -> float:
    """How much better the model did than the base on the validation windows (positive: better).

    `pooled` is the paper's normalized gap between the mean scores; with bounded slowdown one window
    whose queue explodes outweighs all the others (Philly: one of 7 windows at 10.2 against a mean of
    3.6 chose a checkpoint that lost on test). `per_window` averages each window's normalized gap.
    """
    if how == "per_window":
        return float(np.mean([reward(b, a, metric) for b, a in zip(base_scores, agent_scores, strict=True)]))
    if how != "pooled":
        raise ValueError(f"validation score must be pooled or per_window, got {how!r}")
    return reward(float(np.mean(base_scores)), float(np.mean(agent_scores)), metric)


def by_window(values: Sequence[float], validator: Validator) -> npt.NDArray[np.float64]:
    """A validator's per-window-draw figures (draw-major, as `Validator.windows`) as [windows, draws]."""
    draws = len(validator.draws)
    return np.asarray(values, dtype=np.float64).reshape(draws, -1).T


def window_interval(
    gaps: npt.NDArray[np.float64], level: float = 0.9, rounds: int = 4000, seed: int = 0
) -> tuple[float, float]:
    """The `level` interval of the mean per-window gap (`gaps` [windows, draws]) from a bootstrap that
    resamples windows with all their draws: a window's draws move together (one heavy window is heavy
    on every draw), so resampling window-draws alone would claim more certainty than the windows hold."""
    picks = np.random.default_rng(seed).integers(0, gaps.shape[0], size=(rounds, gaps.shape[0]))
    means = gaps[picks].mean(axis=(1, 2))
    tail = 100.0 * (1.0 - level) / 2.0
    low, high = np.percentile(means, [tail, 100.0 - tail])
    return float(low), float(high)


TIE = 0.001
"""A per-window gap within this of zero is a tie, neither a win nor a loss."""


def gap_record(gaps: npt.NDArray[np.float64]) -> dict[str, Any]:
    """Per-window gaps ([windows, draws]) summed up: mean, 90% interval (`window_interval`), wins and
    losses beyond `TIE`."""
    low, high = window_interval(gaps)
    return {
        "gap": float(gaps.mean()),
        "interval": [low, high],
        "wins": int((gaps > TIE).sum()),
        "losses": int((gaps < -TIE).sum()),
    }


def gap_summary(gaps: npt.NDArray[np.float64]) -> str:
    """`gap_record` as one line: `+1.2% [-0.4%, +2.9%] (20 W / 22 L of 60)`."""
    r = gap_record(gaps)
    low, high = r["interval"]
    return f"{r['gap']:+.1%} [{low:+.1%}, {high:+.1%}] ({r['wins']} W / {r['losses']} L of {gaps.size})"


def confirm(validator: Validator, model: LoadedModel) -> dict[str, Any]:
    """The model and its base on `validator`'s windows, as a record: per-window gap, its 90% interval
    (`window_interval`), wins and losses. Meant for draws of the estimate noise no choice has read: a
    checkpoint chosen as the best of many on some window-draws carries that choice's luck there
    (docs/training.md: +4.7% on the draws it was chosen on, -0.3% on fresh draws of the same windows)."""
    windows = range(len(validator.windows))
    base = [validator.score(None, w) for w in windows]
    agent = [validator.score(model, w) for w in windows]
    gaps = by_window([reward(b, a, validator.metric) for b, a in zip(base, agent, strict=True)], validator)
    return {
        "windows": len(base),
        **gap_record(gaps),
        "base_score": float(np.mean(base)),
        "agent_score": float(np.mean(agent)),
    }
