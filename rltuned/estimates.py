"""Runtime-estimate models: what a scheduler believes a job will take.

GPU traces carry no user time limits, and schedulers never see true runtimes, so every run names the
model it used and its seed. `exact` is the oracle (what the published RLTune code silently does) and is
only ever reported as such.

- `trace`: the trace's own requested times (SWF field 9, Slurm Timelimit); an error if any job lacks one.
- `swf-ratio`: runtime / limit ratios drawn from the empirical distribution of real SWF logs
  (HPC2N and MetaCentrum, `rltuned/data/swf_ratio_quantiles.txt`), so limit = runtime / ratio.
- `qssf-noise`: relative error |estimate - runtime| / runtime is within 10% for 10% of jobs, 50% for 50%,
  100% for 70% and 1000% for 90% (the QSSF paper's predictor accuracy); the last 10% lie between 1000% and
  10000%. Errors up to 100% take either sign; larger ones can only be overestimates.
- `auto` (the default): `trace` when every job has a requested time, else `qssf-noise`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from importlib import resources

import numpy as np

from rltuned.domain import Job
from rltuned.errors import UsageError

MODELS = ("auto", "trace", "exact", "swf-ratio", "qssf-noise")
UNDRAWN = frozenset({"exact", "trace"})
"""Estimate models with nothing to draw: every seed gives the same limits."""


def draw_seeds(resolved: str, first: int, count: int) -> range:
    """The estimate seeds a model is validated on (`--validation-estimate-seeds`): its training draw
    `first` and the next `count - 1`; one for a model with nothing to draw (`resolved`: the estimate
    model after `auto`), whose other seeds would repeat the same windows."""
    return range(first, first + (1 if resolved in UNDRAWN else max(count, 1)))


MIN_ESTIMATE_S = 1.0
MIN_RATIO = 1e-3  # a limit 1000x the runtime is as loose as real logs get once outliers are cut

# (probability, low, high) bands of |relative error|, cumulative to the QSSF accuracy figures.
_QSSF_BANDS = ((0.10, 0.0, 0.1), (0.40, 0.1, 0.5), (0.20, 0.5, 1.0), (0.20, 1.0, 10.0), (0.10, 10.0, 100.0))


def resolve_model(model: str, jobs: Sequence[Job]) -> str:
    if model not in MODELS:
        raise UsageError(f"unknown estimate model {model!r}; choose from {', '.join(MODELS)}")
    if model == "auto":
        return "trace" if jobs and all(j.time_limit is not None for j in jobs) else "qssf-noise"
    return model


def apply_estimates(jobs: Sequence[Job], model: str, seed: int) -> tuple[list[Job], str]:
    """Return jobs whose `time_limit` is the model's estimate, and the resolved model name."""
    name = resolve_model(model, jobs)
    if name == "trace":
        missing = sum(1 for j in jobs if j.time_limit is None)
        if missing:
            raise UsageError(f"--estimates trace: {missing} jobs have no requested time in the trace")
        return list(jobs), name
    runtimes = np.array([_runtime(j) for j in jobs], dtype=np.float64)
    rng = np.random.default_rng(seed)
    if name == "exact":
        limits = runtimes
    elif name == "swf-ratio":
        limits = runtimes / swf_ratios(rng, len(jobs))
    else:
        limits = runtimes * (1.0 + qssf_errors(rng, len(jobs)))
    limits = np.maximum(limits, MIN_ESTIMATE_S)
    return [replace(j, time_limit=float(t)) for j, t in zip(jobs, limits, strict=True)], name


def swf_ratios(rng: np.random.Generator, n: int) -> np.ndarray:
    table = _ratio_quantiles()
    u = rng.random(n) * (len(table) - 1)
    lo = np.floor(u).astype(np.int64)
    hi = np.minimum(lo + 1, len(table) - 1)
    ratios = table[lo] + (table[hi] - table[lo]) * (u - lo)
    return np.asarray(np.maximum(ratios, MIN_RATIO), dtype=np.float64)


def qssf_errors(rng: np.random.Generator, n: int) -> np.ndarray:
    """Signed relative errors with the QSSF accuracy profile."""
    probs = np.array([b[0] for b in _QSSF_BANDS])
    band = rng.choice(len(_QSSF_BANDS), size=n, p=probs)
    low = np.array([b[1] for b in _QSSF_BANDS])[band]
    high = np.array([b[2] for b in _QSSF_BANDS])[band]
    magnitude = low + (high - low) * rng.random(n)
    sign = np.where((magnitude <= 1.0) & (rng.random(n) < 0.5), -1.0, 1.0)
    return np.asarray(sign * magnitude, dtype=np.float64)


@cache
def _ratio_quantiles() -> np.ndarray:
    text = resources.files("rltuned.data").joinpath("swf_ratio_quantiles.txt").read_text()
    values = [float(line) for line in text.splitlines() if line and not line.startswith("#")]
    return np.array(values, dtype=np.float64)


def _runtime(job: Job) -> float:
    if job.runtime is None:
        raise UsageError(f"job {job.id} has no runtime; estimate models need the true runtime")
    return job.runtime
