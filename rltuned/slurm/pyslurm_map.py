"""pyslurm 22.5.x's `job().get()` / `node().get()` dicts as `squeue --json` / `sinfo --json` documents.

Pure and free of pyslurm itself, so it is tested without it. What pyslurm's old-style dicts do
differently from the JSON (read from its `pyslurm.pyx`):

* A job carries `user_id`, not the name; `time_limit` is minutes or the words `UNLIMITED` /
  `Partition_Limit`; `nice` is already signed; unset array and het ids are None, not 0.
* Memory is split by kind (`mem_per_cpu` / `min_memory_cpu`, `mem_per_node` / `min_memory_node`),
  which is more than squeue's text says.
* `req_nodes`, `exc_nodes`, a node's `gres` and `partitions` are lists made by cutting Slurm's string
  at every comma, brackets and parentheses included (`p100-[1` / `3]`); joining them with commas
  gives Slurm's string back. `gres_used` is cut outside parentheses only; the same join works.
* A node's `state` is the base state with flag words appended (`IDLE+DRAIN`, `DOWN*+DRAIN`).

A missing key is left out of the record (the parser then uses its default or rejects the record).
"""

from __future__ import annotations

import pwd
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from rltuned.slurm.text import NO_LIMIT, limit_minutes, node_state

_SAME = (
    "job_id",
    "job_state",
    "state_reason",
    "priority",
    "nice",
    "account",
    "partition",
    "qos",
    "name",
    "submit_time",
    "start_time",
    "tres_per_node",
    "tres_per_job",
    "tres_per_task",
    "tres_per_socket",
    "nodes",
    "sockets_per_node",
    "dependency",
    "array_task_id",
)
"""Job keys pyslurm names and shapes like `squeue --json`."""
_RENAMED = {
    "num_nodes": "node_count",
    "num_cpus": "cpus",
    "num_tasks": "tasks",
    "mem_per_tres": "memory_per_tres",
    "resv_name": "reservation",
}
_SHARED = {"0": "none", "1": "shared", "USER": "user", "MCS": "mcs"}
"""pyslurm's `shared` as the JSON spells it; `OK` (never set) is null there."""


def squeue_document_from_pyslurm(
    jobs: Mapping[int, Mapping[str, Any]], user_names: Callable[[int], str] | None = None
) -> dict[str, Any]:
    """`{"jobs": [...]}` from `pyslurm.job().get()`; `user_names` maps a uid (default: the passwd db)."""
    names = user_names or user_name_of
    return {"jobs": [_job(job, names) for job in jobs.values()]}


def sinfo_document_from_pyslurm(nodes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """`{"nodes": [...]}` from `pyslurm.node().get()`."""
    return {"nodes": [_node(name, node) for name, node in nodes.items()]}


def user_name_of(uid: int) -> str:
    """The login name of `uid`, or the number itself, as squeue prints an unknown user."""
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return str(uid)


def _job(job: Mapping[str, Any], user_names: Callable[[int], str]) -> dict[str, Any]:
    record: dict[str, Any] = {key: job[key] for key in _SAME if key in job}
    record.update({new: job[old] for old, new in _RENAMED.items() if old in job})
    if isinstance(job.get("user_id"), int):
        record["user_name"] = user_names(job["user_id"])
    if "time_limit" in job:
        record["time_limit"] = _minutes(job["time_limit"])
    for key in ("array_job_id", "het_job_id"):
        if key in job:
            record[key] = job[key] or 0
    if "array_task_str" in job:
        record["array_task_string"] = job["array_task_str"] or ""
    for old, new in (("req_nodes", "required_nodes"), ("exc_nodes", "excluded_nodes")):
        if old in job:
            record[new] = joined(job[old])
    if job.get("mem_per_cpu") and "min_memory_cpu" in job:
        record["memory_per_cpu"] = job["min_memory_cpu"]
    elif job.get("mem_per_node") and "min_memory_node" in job:
        record["memory_per_node"] = job["min_memory_node"]
    if "shared" in job:
        record["shared"] = _SHARED.get(str(job["shared"]).upper())
    return record


def _minutes(value: object) -> object:
    """Minutes as pyslurm gives them, None for its no-limit words; anything else left to validation."""
    if isinstance(value, str):
        return None if value in NO_LIMIT else limit_minutes(value)
    return value


def _node(name: str, node: Mapping[str, Any]) -> dict[str, Any]:
    record: dict[str, Any] = {"name": node.get("name", name)}
    if isinstance(node.get("state"), str):
        record["state"], record["state_flags"] = node_state(node["state"])
    for old, new in (
        ("cpus", "cpus"),
        ("alloc_cpus", "alloc_cpus"),
        ("real_memory", "real_memory"),
        ("alloc_mem", "alloc_memory"),
    ):
        if old in node:
            record[new] = node[old]
    for key in ("gres", "gres_used"):
        if key in node:
            record[key] = joined(node[key])  # None (no GRES at all) reads as "" like the JSON
    if "partitions" in node:
        record["partitions"] = [p for p in joined(node["partitions"]).split(",") if p]
    return record


def joined(value: object) -> str:
    """One Slurm string from pyslurm's comma-cut list (or a plain string); None is empty."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, Sequence):
        return ",".join(str(part) for part in value)
    return str(value)
