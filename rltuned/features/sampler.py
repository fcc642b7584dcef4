"""Heuristic feature sampling (paper section 3.2): which 8 of the 17 features the actor sees.

Six features are always on: requested GPUs, requested time, urgency, can_schedule_now, demand-supply
ratio and future availability. Two slots switch with the situation, choosing a raw or an engineered
variant so the actor never sees both:

- slot 7 is `job_size` (GPUs x requested time) when the cluster is fragmented (cluster CFF > 0.5), so
  small short jobs that fill the scattered free GPUs stand out; otherwise `submit` (the age as Slurm's age
  factor), so aged jobs gain without penalising large or long ones. CFF is the mean, over free GPUs, of the
  busy fraction of their node, so 0.5 means the typical free GPU sits on a node that is more than half busy:
  the midpoint of the scale, not a value fitted to a trace.
- slot 8 is `num_ways_to_schedule` when placement is a real choice: at least two visible jobs could each
  start now on more than one node, so where a job lands affects the others; otherwise `free_nodes`.

The identity features (job id, user, account, GPU type) are metadata and never sampled.
"""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

from rltuned.features.table import COLUMN, IDENTITY

ACTOR_FEATURES = 8
SAMPLER_VERSION = "v1"
"""Bump when the rule changes: a trained actor is only valid with the sampler it was trained with."""

ALWAYS: tuple[str, ...] = (
    "gpus",
    "requested_time",
    "urgency",
    "can_schedule_now",
    "demand_supply_ratio",
    "future_availability",
)
HIGH_CFF = 0.5
MIN_FLEXIBLE_JOBS = 2
"""Placement is a choice when at least two jobs can start now on more than one node."""

CRITIC: tuple[str, ...] = ("submit", "requested_time", "gpus", "can_schedule_now", "cff")
CRITIC_FEATURES = len(CRITIC)

assert not set(ALWAYS + CRITIC) & set(IDENTITY), "identity features are metadata only"


def sample(table: npt.NDArray[np.float32], ways: npt.NDArray[np.int64], cff: float) -> tuple[str, ...]:
    """The actor's 8 feature names for this decision; `ways` counts each job's usable nodes."""
    slot7 = "job_size" if cff > HIGH_CFF else "submit"
    can = table[:, COLUMN["can_schedule_now"]] > 0
    flexible = int(np.count_nonzero(can & (ways > 1)))
    slot8 = "num_ways_to_schedule" if flexible >= MIN_FLEXIBLE_JOBS else "free_nodes"
    return (*ALWAYS, slot7, slot8)
