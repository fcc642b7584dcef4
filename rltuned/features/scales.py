"""The fixed scales that map raw job quantities into [0, 1].

Every scale is a property of the cluster or a round, documented horizon, never a statistic of a trace, so
the same job reads the same on every trace and in production. Quantities spanning orders of magnitude
(GPUs, times, GPU-seconds) are on a log scale: `log(1 + x) / log(1 + full)`, which is base-free (log2 for
GPUs reads the same) and keeps resolution where most jobs are (1-8 GPUs, minutes to hours).
"""

from __future__ import annotations

import zlib
from functools import lru_cache

import numpy as np
import numpy.typing as npt

from rltuned.policies.multifactor import DEFAULT_MAX_AGE_S

HORIZON_S = 30 * 24 * 3600.0
"""Requested times (and job sizes) saturate at 30 days: longer limits are rare on GPU clusters and,
for ranking, indistinguishable from 30 days."""

MAX_AGE_S = DEFAULT_MAX_AGE_S
"""Ages saturate at Slurm's default PriorityMaxAge (7 days), as the multifactor policy's age factor does."""

_UNIT = 2.0**32

Floats = npt.NDArray[np.float64]


def log_share(x: Floats, full: float) -> Floats:
    """`x` on a log scale where 0 -> 0 and `full` -> 1, clipped to [0, 1] (0 when `full` is 0)."""
    if full <= 0:
        return np.zeros_like(x)
    out: Floats = np.log1p(np.maximum(x, 0.0)) / np.log1p(full)
    return np.minimum(out, 1.0)


def squash(x: Floats) -> Floats:
    """x / (1 + x): a ratio in [0, inf) to [0, 1), so 1 (demand equals supply) lands on 0.5."""
    out: Floats = x / (1.0 + x)
    return out


@lru_cache(maxsize=65536)
def string_unit(value: str) -> float:
    """A stable code in [0, 1) for an identity string (user, account, GPU type); "" maps to 0.

    CRC-32, not Python's `hash`, so the code is the same in every process and on every machine.
    """
    return zlib.crc32(value.encode()) / _UNIT


def id_unit(ids: npt.NDArray[np.int64]) -> Floats:
    """A stable code in [0, 1) for job ids: Knuth's multiplicative hash, computed for all ids at once.

    Ids grow without bound, so they cannot be scaled; hashing keeps them as metadata that never saturates.
    """
    mixed = (ids.astype(np.uint64) * np.uint64(2654435761)) & np.uint64(0xFFFFFFFF)
    out: Floats = mixed.astype(np.float64) / _UNIT
    return out
