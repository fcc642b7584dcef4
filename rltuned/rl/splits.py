"""The evaluation protocol's splits: train on the first 80%, choose on the next 10%, test once on the last.

A trace sorted by submit time splits into train (first 80%), validation (next 10%) and test (last 10%).
Every choice (recipe, hyperparameters, checkpoint, seed, the heuristic to beat) is made on validation;
test is run once per shipped model. Windows over validation or test are disjoint and tile the split from
its start, so no job is scored twice; each keeps the whole trace's preceding jobs as its warm-up, so the
first window of a split meets the cluster the previous split left, as it would in production.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from rltuned.domain import Job
from rltuned.errors import UsageError
from rltuned.sim.runner import Window

SPLITS = ("train", "validation", "test", "all")
TRAIN_FRACTION = 0.8
VALIDATION_FRACTION = 0.1
MIN_WINDOWS = 6
"""Disjoint windows a split must hold at the chosen size (fewer windows and one bad window decides)."""
WINDOW_SIZES = (1024, 512, 256)


def split_range(n_jobs: int, name: str) -> range:
    """Indices of a split in a trace of `n_jobs` jobs sorted by submit time."""
    train_end = int(n_jobs * TRAIN_FRACTION)
    validation_end = int(n_jobs * (TRAIN_FRACTION + VALIDATION_FRACTION))
    spans = {
        "train": range(0, train_end),
        "validation": range(train_end, validation_end),
        "test": range(validation_end, n_jobs),
        "all": range(0, n_jobs),
    }
    if name not in spans:
        raise UsageError(f"split must be one of {', '.join(SPLITS)}, got {name!r}")
    return spans[name]


def train_jobs(jobs: Sequence[Job]) -> list[Job]:
    """The only jobs training may see."""
    return list(jobs[: len(split_range(len(jobs), "train"))])


def window_size(span: range, size: int | None = None) -> int:
    """`size`, or the largest of 1,024, 512 and 256 that gives the split at least 6 disjoint windows."""
    if size is not None:
        if size < 1:
            raise UsageError(f"--jobs must be >= 1, got {size}")
        if size > len(span):
            raise UsageError(f"--jobs {size} exceeds the split's {len(span)} jobs")
        return size
    for candidate in WINDOW_SIZES:
        if len(span) // candidate >= MIN_WINDOWS:
            return candidate
    if len(span) < WINDOW_SIZES[-1]:
        raise UsageError(f"the split has {len(span)} jobs, fewer than one {WINDOW_SIZES[-1]}-job window")
    return WINDOW_SIZES[-1]


def disjoint_windows(span: range, size: int | None = None) -> list[Window]:
    """Consecutive windows from the split's start; the last `len(span) % size` jobs are not scored."""
    size = window_size(span, size)
    return [Window(start, start + size) for start in range(span.start, span.stop - size + 1, size)]


def random_windows(span: range, size: int, count: int, seed: int) -> list[Window]:
    """`count` windows at random starts inside the split (they may overlap: not for reported results)."""
    size = window_size(span, size)
    if count < 1:
        raise UsageError(f"--sequences must be >= 1, got {count}")
    starts = np.random.default_rng(seed).integers(span.start, span.stop - size + 1, size=count)
    return [Window(int(s), int(s) + size) for s in starts]
