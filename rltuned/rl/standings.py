"""A model against every heuristic an admin could run instead, on the same windows.

Beating its own base is not enough for a model to be worth serving: an admin can order the queue by
SJF in slurm.conf, or give multifactor better weights (`rltunectl tune`), and run no daemon at all. So
the table a model is judged by has a row for each of those: every base policy the daemon can serve
(in the daemon's loop, with no model), Slurm alone with the multifactor weights the model was trained
under, and, when given, Slurm alone with tuned weights. Nothing here chooses a winner: which heuristic
is the one to beat is chosen on validation (docs/training.md), never on the windows being reported.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rltuned.core.inputs import unreadable_inputs
from rltuned.domain import ClusterSpec, Job
from rltuned.policies.multifactor import Multifactor
from rltuned.rl.evaluate import LOWER_IS_BETTER, make_side
from rltuned.rl.export import LoadedModel
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import SimConfig, SimResult
from rltuned.sim.slurm import SlurmRun
from rltuned.sim.ticks import TickSettings

HEURISTICS = ("fcfs", "sjf", "wfp3", "f1", "f2", "f3", "f4", "saf", "unicep", "qssf", "psjf", "psaf")
"""The published orders, and the daemon's own history-informed ones. QSSF (Helios, SC'21: shortest
predicted GPU-time, the prediction from the user's or the account's past runtimes) is the one the paper
itself compares RLTune against (its Table 8). PSJF and PSAF (policies/predicted.py) doubt a limit that
the same owner's finished peers ran far below: no slurm.conf setting can express them, but the daemon
serves them with no model, so a model must beat them too. Slurm's multifactor is compared below, as
Slurm alone."""
SLURM_ALONE = "slurm-multifactor"
"""Slurm with no daemon, multifactor with the weights the model was trained under."""
SLURM_TUNED = "slurm-multifactor-tuned"
"""Slurm with no daemon, multifactor with the weights `rltunectl tune` chose on validation."""
COLUMNS = (("avg_bsld", "bsld"), ("avg_wait_s", "mean wait"), ("p95_wait_s", "p95 wait"),
           ("p99_wait_s", "p99 wait"), ("max_wait_s", "max wait"), ("gpu_util", "GPU util"),
           ("fairness", "fairness"))  # fmt: skip


def contenders(config: TickSettings | SimConfig, tuned: bool) -> list[str]:
    """What a model is compared with in its loop: in the daemon's, only what an admin could really run."""
    if not isinstance(config, TickSettings):
        return list(HEURISTICS)
    served = [h for h in HEURISTICS if unreadable_inputs(h) is None]
    return [*served, SLURM_ALONE, *([SLURM_TUNED] if tuned else [])]


def run_contender(
    name: str,
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    warm: int,
    config: TickSettings | SimConfig,
    tuned: Multifactor | None = None,
) -> SimResult:
    """One window run by one contender, with no model."""
    if name in (SLURM_ALONE, SLURM_TUNED):
        if not isinstance(config, TickSettings):
            raise ValueError(f"{name} exists only in the daemon's loop")
        params = config.slurm
        if name == SLURM_TUNED:
            if tuned is None:
                raise ValueError(f"{name} needs the tuned weights")
            params = replace(params, priority=tuned)
        return SlurmRun(cluster, jobs, warm, params, config.interval_s).run()
    return make_side(cluster, name, config)(jobs, warm, None)


@dataclass(frozen=True)
class Standing:
    name: str
    windows: tuple[Metrics, ...]

    def mean(self, key: str) -> float:
        return float(np.mean([getattr(m, key) for m in self.windows]))

    def record_against(self, other: Standing, key: str = "avg_bsld") -> tuple[int, int, int]:
        """Windows won, lost and tied against `other` on `key` (ties: within 0.1%)."""
        wins = losses = 0
        for mine, theirs in zip(self.windows, other.windows, strict=True):
            a, b = getattr(mine, key), getattr(theirs, key)
            if abs(a - b) <= 1e-3 * max(abs(a), abs(b)):
                continue
            if (a < b) == LOWER_IS_BETTER[key]:
                wins += 1
            else:
                losses += 1
        return wins, losses, len(self.windows) - wins - losses


def standings(
    model: LoadedModel | None,
    base: str,
    jobs: Sequence[Job],
    cluster: ClusterSpec,
    config: TickSettings | SimConfig,
    windows: Sequence[Window],
    warmup: int,
    tuned: Multifactor | None = None,
    progress: Callable[[], None] | None = None,
) -> list[Standing]:
    """The model on its base first, then every contender, each on every window."""
    model_side = make_side(cluster, base, config)
    names = contenders(config, tuned is not None)
    per: dict[str, list[Metrics]] = {name: [] for name in ["model", *names]}
    for w in windows:
        chunk, warm = w.with_warmup(jobs, warmup)
        per["model"].append(compute_metrics(model_side(chunk, warm, model)))
        for name in names:
            per[name].append(compute_metrics(run_contender(name, cluster, chunk, warm, config, tuned)))
        if progress is not None:
            progress()
    label = f"model on {base}"
    return [Standing(label if name == "model" else name, tuple(ms)) for name, ms in per.items()]


def render_standings(rows: Sequence[Standing], key: str = "avg_bsld") -> str:
    """Mean over windows per column; the model's windows won/lost/tied against each row on `key` (the
    metric it was trained for)."""
    model = rows[0]
    label = dict(COLUMNS).get(key, key)
    head = f"{'':>24}" + "".join(f"{name:>11}" for _, name in COLUMNS) + f"{'W/L/T ' + label:>18}"
    lines = [head]
    for row in rows:
        cells = "".join(_cell(row.mean(column)) for column, _ in COLUMNS)
        record = "" if row is model else "{}/{}/{}".format(*model.record_against(row, key))
        lines.append(f"{row.name:>24}{cells}{record:>18}")
    return "\n".join(lines)


def _cell(value: float) -> str:
    return f"{value:>11.3f}" if abs(value) < 10 else f"{value:>11,.0f}"
