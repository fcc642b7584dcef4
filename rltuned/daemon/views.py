"""What `rltunectl plan` and `explain` show: plain rows built from a `Decision`, and their text tables."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rltuned.daemon.engine import Decision
from rltuned.features import FEATURE_NAMES

PLAN_COLUMNS = (
    "job",
    "user",
    "partition",
    "rank",
    "base_rank",
    "score",
    "priority_now",
    "target",
    "placement",
    "guard",
)


def plan_rows(decision: Decision) -> list[dict[str, Any]]:
    actions: dict[int, list[str]] = {}
    for action in decision.plan.actions:
        actions.setdefault(action.job_id, []).extend(f"{k}={v}" for k, v in action.fields)
    rows = []
    for job in decision.plan.jobs:
        rows.append(
            {
                "job": job.job_id,
                "user": job.user,
                "partition": job.partition,
                "rank": job.rank + 1,
                "base_rank": job.base_rank + 1,
                "score": None if job.score is None else round(job.score, 4),
                "priority_now": job.priority_now,
                "target": job.target,
                "placement": job.placement
                + ("" if job.pack is None else (" (pack)" if job.pack else " (spread)")),
                "actions": " ".join(actions.get(job.job_id, [])),
                "guard": decision.ranking.guarded.get(job.job_id),
            }
        )
    return rows


def explain_job(decision: Decision, job_id: int) -> dict[str, Any]:
    """The job's features (the state row the policy saw), score, ranks and planned actions."""
    obs = decision.ranking.observation
    row = next((r for r in plan_rows(decision) if r["job"] == job_id), None)
    if row is None:
        report = decision.view.report
        return {
            "job": job_id,
            "managed": False,
            "why": "not a managed pending job (running, finished, held, exempt or unknown); "
            f"left alone this read: {dict((k, v) for k, v in report.left_alone.items() if v)}",
        }
    slots = [i for i, j in enumerate(obs.job_ids) if int(j) == job_id]
    features: dict[str, float] = {}
    if slots:
        features = {name: float(obs.table[slots[0], i]) for i, name in enumerate(FEATURE_NAMES)}
    return {
        **row,
        "managed": True,
        "ranked_by": decision.ranking.source,
        "fallback": decision.ranking.fallback,
        "visible": bool(slots),
        "sampled_features": list(obs.sampled),
        "features": features,
    }


def table(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    cells = [[_cell(r.get(c)) for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    lines = ["  ".join(c.upper().ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip()]
    lines += ["  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in cells]
    return "\n".join(lines)


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)
