"""Test helper: the recorded Slurm 22.05 lab outputs (tests/fixtures/slurm) and edits of them.

The lab (README in the fixture's source) ran 5 nodes, p100-[1-2] with 4 GPUs, k80-[1-2] with 2 and
m40-1 with 1, 8 CPUs and 64000 MiB each, all in partition `main`; 13 jobs, 7 running and 6 pending.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
NOW = 1_795_303_600.0  # a minute after the lab's jobs were submitted


def text(name: str) -> str:
    return (FIXTURES / name).read_text()


def squeue() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text("squeue.json"))
    return data


def sinfo() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(text("sinfo.json"))
    return data


def job_record(job_id: int) -> dict[str, Any]:
    """A deep copy of one recorded job, to edit."""
    record: dict[str, Any] = copy.deepcopy(next(j for j in squeue()["jobs"] if j["job_id"] == job_id))
    return record


def queue_of(*records: object) -> dict[str, Any]:
    """A squeue document holding just `records`, with the recorded envelope."""
    doc = squeue()
    doc["jobs"] = list(records)
    return doc


def pending_variant(**changes: Any) -> dict[str, Any]:
    """Recorded pending job 5 (`gres:gpu:p100:2`, 5 minutes, priority 1000) with fields changed."""
    record = job_record(5)
    record.update(changes)
    return record


def node_variant(name: str, **changes: Any) -> dict[str, Any]:
    doc = sinfo()
    for node in doc["nodes"]:
        if node["name"] == name:
            node.update(changes)
    return doc
