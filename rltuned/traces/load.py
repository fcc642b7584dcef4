"""A trace at another load: the same jobs, arriving faster or slower.

Which heuristic leads depends on how congested the cluster is (docs/training.md, "Which heuristic
leads as the load rises"), and a site's load grows. Compressing the gaps between arrivals asks what
the same users' jobs would meet on a busier cluster, with their sizes, runtimes and limits unchanged.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import replace

from rltuned.domain import Job


def at_load(jobs: Sequence[Job], factor: float) -> list[Job]:
    """`jobs` with every gap between submissions divided by `factor`: 1.3 brings 30% more jobs an hour.
    The earliest submission keeps its time and the order of arrival is kept, so warm-ups and splits
    hold the same jobs."""
    if not (factor > 0 and math.isfinite(factor)):
        raise ValueError(f"a load factor must be a finite number above 0, got {factor}")
    if factor == 1.0 or not jobs:
        return list(jobs)
    origin = min(j.submit for j in jobs)
    return [replace(j, submit=origin + (j.submit - origin) / factor) for j in jobs]
