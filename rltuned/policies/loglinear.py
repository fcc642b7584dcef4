"""A per-job order that trades limit, size and age at set rates: the imitation target a search finds.

The actor scores each job alone from its own features (log requested time, GPUs, log age, ...), so the
orders it can express are per-job rules. This family, `log(limit) + b * log(GPUs) - c * log(wait + w0)`
(lower first), holds SJF (b = c = 0), SAF (b = 1, c = 0) and WFP3 (b = -1/3, c = 1, w0 -> 0), and every
rate between them. `scripts/scorer_search.py` searches it on a trace's training windows and picks on
validation; `rltunectl train --imitate-teacher loglinear:b=..,c=..,w0=..` then warm-starts the actor on
the chosen point's rankings instead of the base's (docs/training.md). It is not a base the daemon serves:
the daemon falls back to `policy.base`, a named heuristic.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from rltuned.domain import Job, PriorityContext
from rltuned.errors import UsageError

PREFIX = "loglinear:"
MIN_ESTIMATE_S = 1.0


@dataclass(frozen=True)
class LogLinear:
    """log(limit) + b * log(GPUs) - c * log(wait + w0), lower first; limits below 1 s and GPU counts
    below 1 count as 1 (a CPU-only job sizes as one GPU)."""

    b: float
    c: float
    w0: float

    @property
    def name(self) -> str:
        return f"{PREFIX}b={self.b:g},c={self.c:g},w0={self.w0:g}"

    @property
    def dynamic(self) -> bool:
        return self.c != 0.0

    def key(self, job: Job, ctx: PriorityContext) -> float:
        wait = max(ctx.now - job.submit, 0.0)
        return (
            math.log(max(job.estimate, MIN_ESTIMATE_S))
            + self.b * math.log(max(job.gpus, 1))
            - self.c * math.log(wait + self.w0)
        )


def parse_loglinear(spec: str) -> LogLinear:
    """`loglinear:b=-0.5,c=0.25,w0=600` -> LogLinear; every term named once, w0 > 0 when c != 0."""
    if not spec.startswith(PREFIX):
        raise UsageError(f"a log-linear order is written {PREFIX}b=B,c=C,w0=W0, got {spec!r}")
    terms: dict[str, float] = {}
    for part in spec[len(PREFIX) :].split(","):
        name, _, value = part.partition("=")
        name = name.strip()
        if name not in ("b", "c", "w0") or name in terms:
            raise UsageError(f"{spec!r}: expected each of b, c and w0 once, got {name!r}")
        try:
            terms[name] = float(value)
        except ValueError:
            raise UsageError(f"{spec!r}: {name} must be a number, got {value!r}") from None
        if not math.isfinite(terms[name]):
            raise UsageError(f"{spec!r}: {name} must be finite, got {value!r}")
    if set(terms) != {"b", "c", "w0"}:
        raise UsageError(f"{spec!r}: missing {', '.join(sorted({'b', 'c', 'w0'} - set(terms)))}")
    if terms["c"] != 0.0 and terms["w0"] <= 0.0:
        raise UsageError(f"{spec!r}: w0 must be > 0 when c is not 0 (log of a zero wait)")
    return LogLinear(terms["b"], terms["c"], terms["w0"])
