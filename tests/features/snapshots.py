"""Snapshots of tiny clusters whose features can be worked out by hand."""

from __future__ import annotations

from collections.abc import Sequence

from rltuned.domain import ClusterSnapshot, ClusterSpec, Job

NOW = 10_000.0


def snapshot(
    spec: ClusterSpec,
    free_gpus: Sequence[int],
    pending: Sequence[Job] = (),
    free_cpus: Sequence[int] | None = None,
    free_mem: Sequence[int] | None = None,
    now: float = NOW,
) -> ClusterSnapshot:
    """A snapshot whose free CPUs and memory are, unless given, each node's share for its free GPUs."""
    nodes = spec.nodes
    if free_cpus is None:
        free_cpus = [n.cpus * f // n.gpus for n, f in zip(nodes, free_gpus, strict=True)]
    if free_mem is None:
        free_mem = [n.mem_mb * f // n.gpus for n, f in zip(nodes, free_gpus, strict=True)]
    return ClusterSnapshot(now, spec, tuple(free_gpus), tuple(free_cpus), tuple(free_mem), tuple(pending), ())
