"""Shared builders for tiny clusters and jobs whose schedules can be worked out by hand."""

from __future__ import annotations

from rltuned.domain import ClusterSpec, Job, Node


def cluster(*shapes: tuple[str, int, int], cpus_per_gpu: int = 4, mem_per_gpu: int = 8192) -> ClusterSpec:
    """`shapes` are (gpu_type, gpus per node, node count)."""
    nodes: list[Node] = []
    for gpu_type, gpus, count in shapes:
        for _ in range(count):
            nodes.append(
                Node(
                    f"{gpu_type.lower()}-{len(nodes)}",
                    gpu_type,
                    gpus,
                    gpus * cpus_per_gpu,
                    gpus * mem_per_gpu,
                )
            )
    return ClusterSpec("test", tuple(nodes))


def job(
    jid: int, submit: float, gpus: int, runtime: float, estimate: float | None = None, **kw: object
) -> Job:
    """A job whose estimate is exact unless given."""
    limit = runtime if estimate is None else estimate
    return Job(jid, submit, gpus, runtime=runtime, time_limit=limit, **kw)  # type: ignore[arg-type]
