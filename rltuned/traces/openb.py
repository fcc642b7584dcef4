"""Alibaba's "openb" GPU pod list (FGD, ATC'23; `cluster-trace-gpu-v2023`).

Times are seconds from the trace start. `runtime` is `deletion_time - scheduled_time`; pods still running
when the trace was cut carry the cut as their deletion time, so their runtimes are lower bounds.
A pod asks for `num_gpu` whole GPUs, or for a `gpu_milli` share of one GPU when `num_gpu` is 1: such a
fractional pod counts as 1 GPU here, because Slurm allocates whole GPUs (sharding aside).
`gpu_spec` names the GPU models a pod accepts; the domain has one model per job, so a multi-model spec
(`A|B`) becomes None (any model) rather than a name no node has. A pod that was never scheduled (empty
`scheduled_time`, mostly `Pending` pods) is filtered as `never_started`.
"""

from __future__ import annotations

import math
from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, open_text
from rltuned.traces.fields import Parsed, RowError, collect, count, csv_table, nonnegative

FORMAT = "openb"
COLUMNS = (
    "name",
    "cpu_milli",
    "memory_mib",
    "num_gpu",
    "gpu_spec",
    "qos",
    "creation_time",
    "deletion_time",
    "scheduled_time",
)


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        columns, rows = csv_table(path, handle, COLUMNS)
        at = {name: columns[name] for name in COLUMNS}

        def parse(line: int, row: list[str], job_id: int) -> Parsed:
            return _pod(row, at, job_id)

        jobs = collect(policy, rows, parse, len(columns))
    return policy.finish(FORMAT, jobs)


def _pod(row: list[str], at: dict[str, int], job_id: int) -> Parsed:
    gpus = count(row[at["num_gpu"]], "num_gpu")
    cpu_milli = count(row[at["cpu_milli"]], "cpu_milli")
    mem_mb = count(row[at["memory_mib"]], "memory_mib")
    submit = nonnegative(row[at["creation_time"]], "creation_time")
    scheduled, deleted = row[at["scheduled_time"]], row[at["deletion_time"]]
    if gpus == 0:
        return "cpu_only"
    if not scheduled:
        return "never_started"
    if not deleted:
        return "still_running"
    runtime = nonnegative(deleted, "deletion_time") - nonnegative(scheduled, "scheduled_time")
    if runtime < 0:
        raise RowError(f"expected deletion_time >= scheduled_time, got {deleted} < {scheduled}")
    if runtime == 0:
        return "zero_duration"
    spec = row[at["gpu_spec"]].strip()
    return Job(
        id=job_id,
        submit=submit,
        gpus=gpus,
        runtime=runtime,
        name=row[at["name"]],
        qos=row[at["qos"]],
        gpu_type=spec if spec and "|" not in spec else None,
        cpus=math.ceil(cpu_milli / 1000),
        mem_mb=mem_mb,
    )
