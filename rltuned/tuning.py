"""`rltunectl tune`: better multifactor weights for an admin's own cluster, no daemon needed.

A black-box search (optuna's TPE sampler, seeded) over the `slurm.conf` settings that rank GPU jobs -
PriorityWeightAge, PriorityWeightFairShare, PriorityWeightJobSize with and without PriorityFavorSmall and
with and without `PriorityFlags=SMALL_RELATIVE_TO_TIME` (the job size over its time limit: Slurm's own
way to an SJF-like order), PriorityWeightTRES=GRES/gpu and PriorityMaxAge - each trial scored in the
simulator's Slurm alone (`SlurmRun.run`: no daemon writes anything) on random windows of the trace's
training split. The best trials on training are then run on every disjoint window of the validation
split, and the one best there is the answer, compared there with the current settings. The test split
is never read.

PriorityWeightPartition and PriorityWeightQOS are left as they are: with one partition and no QOS
priorities in the trace they add the same to every job (on a cluster whose QOS carry priorities, keep
yours). Weights are searched on Slurm's integer scale up to 10,000: only their ratios matter, and the
sum stays far below the 32-bit limit. The one exception is the job size weight under
SMALL_RELATIVE_TO_TIME, whose factor is about 1 / (nodes x limit in minutes), 1e-4 to 1e-7 on a
cluster of a hundred nodes: Slurm truncates the priority to an integer, so that weight is searched on a
log scale from 10^4 to 10^9 (below Slurm's 32-bit weights, with room for the others in the sum).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from rltuned.domain import ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.policies.multifactor import Multifactor
from rltuned.rl.splits import disjoint_windows, random_windows, split_range
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.slurm import SlurmParams, SlurmRun
from rltuned.sim.slurm_config import max_age_as_kept

WEIGHT_MAX = 10_000
RELATIVE_LOG10 = (4.0, 9.0)
"""The job size weight's range under SMALL_RELATIVE_TO_TIME, as powers of ten."""
MAX_AGE_RANGE_S = (3600.0, 30 * 86400.0)
METRIC_KEYS = {"bsld": "avg_bsld", "wait": "avg_wait_s", "jct": "avg_jct_s"}


@dataclass(frozen=True)
class TuneSettings:
    metric: str = "bsld"
    trials: int = 40
    train_windows: int = 4
    window: int = 1024
    warmup: int = 512
    finalists: int = 5
    """Best trials on training that are run on validation; the best there is chosen."""
    seed: int = 0
    interval_s: float = 60.0
    validation_window: int | None = None
    """Jobs per validation window (default: the protocol's 1,024, 512 or 256)."""


@dataclass(frozen=True)
class Scored:
    weights: Multifactor
    train: float
    validation: float | None = None
    per_window: tuple[float, ...] = ()


@dataclass(frozen=True)
class TuneResult:
    current: Scored
    chosen: Scored
    finalists: tuple[Scored, ...]
    trials: int
    validation_windows: int

    @property
    def gain_pct(self) -> float:
        """Validation improvement of the chosen weights over the current ones (lower metric is better)."""
        assert self.current.validation is not None and self.chosen.validation is not None
        return 100.0 * (self.current.validation - self.chosen.validation) / self.current.validation


def tune(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    current: SlurmParams,
    settings: TuneSettings,
    progress: Callable[[int, float], None] | None = None,
) -> TuneResult:
    try:
        import optuna
    except ImportError:
        raise UsageError("rltunectl tune needs optuna: pip install 'rltuned[tune]'") from None
    if settings.metric not in METRIC_KEYS:
        raise UsageError(f"--metric must be one of {', '.join(METRIC_KEYS)}")
    train = split_range(len(jobs), "train")
    window = min(settings.window, len(train) // 2)
    train_windows = random_windows(train, window, settings.train_windows, settings.seed)
    validation = disjoint_windows(split_range(len(jobs), "validation"), settings.validation_window)

    def score(weights: Multifactor, windows: Sequence[Window]) -> list[float]:
        params = replace(current, priority=weights)
        out = []
        for w in windows:
            chunk, warm = w.with_warmup(jobs, settings.warmup)
            result = SlurmRun(cluster, chunk, warm, params, settings.interval_s).run()
            out.append(float(getattr(compute_metrics(result), METRIC_KEYS[settings.metric])))
        return out

    def objective(trial: optuna.Trial) -> float:
        relative = bool(trial.suggest_categorical("size_relative", [False, True]))
        if relative:
            job_size = round(10.0 ** trial.suggest_float("job_size_log10", *RELATIVE_LOG10))
        else:
            job_size = trial.suggest_int("job_size", 0, WEIGHT_MAX)
        weights = Multifactor(
            weight_age=trial.suggest_int("age", 0, WEIGHT_MAX),
            weight_fairshare=trial.suggest_int("fairshare", 0, WEIGHT_MAX),
            weight_job_size=job_size,
            weight_tres_gpu=trial.suggest_int("tres_gpu", 0, WEIGHT_MAX),
            favor_small=trial.suggest_categorical("favor_small", [False, True]),
            max_age_s=max_age_as_kept(trial.suggest_float("max_age_s", *MAX_AGE_RANGE_S, log=True)),
            weight_partition=current.priority.weight_partition,
            size_relative=relative,
        )
        value = float(np.mean(score(weights, train_windows)))
        trial.set_user_attr("weights", weights)
        if progress is not None:
            progress(trial.number + 1, value)
        return value

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="minimize", sampler=optuna.samplers.TPESampler(seed=settings.seed))
    study.enqueue_trial(_as_params(current.priority))  # the admin's own settings are trial 0
    study.optimize(objective, n_trials=settings.trials)
    done = sorted(((float(t.value), t) for t in study.trials if t.value is not None), key=lambda p: p[0])

    def validated(weights: Multifactor, train_score: float) -> Scored:
        per = score(weights, validation)
        return Scored(weights, train_score, float(np.mean(per)), tuple(per))

    finalists = tuple(validated(t.user_attrs["weights"], value) for value, t in done[: settings.finalists])
    now = validated(current.priority, float(study.trials[0].value or 0.0))
    chosen = min((now, *finalists), key=lambda s: (s.validation, s is not now))
    return TuneResult(now, chosen, finalists, settings.trials, len(validation))


def _as_params(weights: Multifactor) -> dict[str, object]:
    """The current settings as a trial's parameters, each clamped into its search range."""
    if weights.size_relative:
        low, high = RELATIVE_LOG10
        size: dict[str, object] = {
            "job_size_log10": min(max(math.log10(max(weights.weight_job_size, 1)), low), high)
        }
    else:
        size = {"job_size": min(weights.weight_job_size, WEIGHT_MAX)}
    return {
        "size_relative": weights.size_relative,
        **size,
        "age": min(weights.weight_age, WEIGHT_MAX),
        "fairshare": min(weights.weight_fairshare, WEIGHT_MAX),
        "tres_gpu": min(weights.weight_tres_gpu, WEIGHT_MAX),
        "favor_small": weights.favor_small,
        "max_age_s": min(max(weights.max_age_s, MAX_AGE_RANGE_S[0]), MAX_AGE_RANGE_S[1]),
    }


def slurm_conf_lines(weights: Multifactor) -> list[str]:
    """The settings as slurm.conf spells them (`sim/slurm_config.params_from_config` reads them back);
    the maximum age in the whole minutes Slurm keeps."""
    seconds = round(max_age_as_kept(weights.max_age_s))
    days, rest = divmod(seconds, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    return [
        "PriorityType=priority/multifactor",
        f"PriorityWeightAge={weights.weight_age}",
        f"PriorityWeightFairShare={weights.weight_fairshare}",
        f"PriorityWeightJobSize={weights.weight_job_size}",
        f"PriorityWeightPartition={weights.weight_partition}",
        f"PriorityWeightTRES=GRES/gpu={weights.weight_tres_gpu}",
        f"PriorityFavorSmall={'YES' if weights.favor_small else 'NO'}",
        f"PriorityMaxAge={days}-{hours:02d}:{minutes:02d}:{secs:02d}",
        *(["PriorityFlags=SMALL_RELATIVE_TO_TIME"] if weights.size_relative else []),
    ]
