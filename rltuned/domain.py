"""The domain shared by the simulator, the trainer and the Slurm adapter.

Everything here is immutable: the simulator and the Slurm adapter both produce a `ClusterSnapshot`, and
policies, features and placers are pure functions of it, so what is trained is exactly what runs.
Times are seconds (floats); memory is MiB.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import NamedTuple

_EMPTY: Mapping[str, float] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class Node:
    """A compute node; `gpu_type` names its GPU model (one model per node, as Slurm's typed GRES)."""

    name: str
    gpu_type: str
    gpus: int
    cpus: int
    mem_mb: int
    partition: str = ""
    gpu_mem_gb: float = 0.0


@dataclass(frozen=True, slots=True)
class Job:
    """A job as a scheduler sees it, plus the true `runtime`, which only the simulator knows.

    `time_limit` is the user's runtime estimate; GPU traces carry none, so an estimate model fills it.
    `cpus` and `mem_mb` of 0 mean "not requested": they are inferred from the job's GPU share of a node.
    `gpu_type` of None means any GPU model will do. `nodes` is the node count the job asked Slurm for
    (`-N`, with `--gres=gpu:G` per node); 0 means "not said": traces that give only a GPU total.
    """

    id: int
    submit: float
    gpus: int
    runtime: float | None = None
    time_limit: float | None = None
    name: str = ""
    user: str = ""
    account: str = ""
    partition: str = ""
    qos: str = ""
    gpu_type: str | None = None
    cpus: int = 0
    mem_mb: int = 0
    nodes: int = 0

    @property
    def estimate(self) -> float:
        """The runtime a scheduler may use: the time limit, else (simulator only) the true runtime."""
        if self.time_limit is not None:
            return self.time_limit
        if self.runtime is not None:
            return self.runtime
        raise ValueError(f"job {self.id} has neither a time limit nor a runtime")


class Slice(NamedTuple):
    """The part of a job's allocation on one node. A named tuple rather than a frozen dataclass: one is
    built per node per job placed (an SWF job spans tens of nodes), and a tuple builds three times as
    fast; it is as immutable."""

    node: int
    gpus: int
    cpus: int
    mem_mb: int


Allocation = tuple[Slice, ...]


@dataclass(frozen=True, slots=True)
class RunningJob:
    job: Job
    start: float
    allocation: Allocation

    @property
    def expected_end(self) -> float:
        return self.start + self.job.estimate


SLOT_KINDS = ("gpus", "cpus")
"""What a node's `gpus` counts: GPUs, or, for an HPC log's CPU cluster, cores used as the slots jobs ask
for (an SWF log counts processors; the daemon then reads Slurm's CPUs in their place)."""


@dataclass(frozen=True, slots=True)
class ClusterSpec:
    """A cluster's fixed shape: its nodes, in a stable order (node index = position), and what a node's
    `gpus` counts (`SLOT_KINDS`)."""

    name: str
    nodes: tuple[Node, ...]
    slots: str = "gpus"
    total_gpus: int = field(init=False, repr=False, compare=False)
    """Every node's GPUs (slots), summed once: priority contexts read it several times a tick."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "total_gpus", sum(n.gpus for n in self.nodes))

    @property
    def gpu_types(self) -> tuple[str, ...]:
        return tuple(sorted({n.gpu_type for n in self.nodes}))

    def describe(self) -> str:
        shapes: dict[tuple[str, int], int] = {}
        for n in self.nodes:
            shapes[(n.gpu_type, n.gpus)] = shapes.get((n.gpu_type, n.gpus), 0) + 1
        parts = [f"{count} x {gpus} {gtype}" for (gtype, gpus), count in sorted(shapes.items())]
        unit = "GPUs" if self.slots == "gpus" else "cores as slots"
        return f"{self.name}: {len(self.nodes)} nodes, {self.total_gpus} {unit} ({', '.join(parts)})"


@dataclass(frozen=True, slots=True)
class History:
    """What priority policies may know about the past: fair-share usage and past runtimes.

    `usage` is decayed GPU-seconds per account (Slurm's fair-share usage); the runtime means feed the
    QSSF-style predictor. `recent_runtimes` holds the last runtimes of finished jobs per `peer_key`
    (the same owner asking for as many GPUs), oldest first: sweeps of near-identical jobs are common,
    so a finished peer tells what a queued one's loose time limit does not (policies/predicted.py).
    The simulator maintains these; on Slurm they come from sshare and sacct.
    `total_usage` is the sum of `usage`, kept so fair-share costs O(1) per job.
    """

    def __post_init__(self) -> None:
        if self.usage and not self.total_usage:
            object.__setattr__(self, "total_usage", float(sum(self.usage.values())))

    usage: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    total_usage: float = 0.0
    mean_runtime_by_user: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    mean_runtime_by_account: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    recent_runtimes: Mapping[tuple[str, int], tuple[float, ...]] = field(
        default_factory=lambda: MappingProxyType({})
    )


RECENT_RUNTIMES = 3
"""How many of a peer group's last finished runtimes `History.recent_runtimes` keeps."""


def with_runtime(recent: tuple[float, ...], run: float) -> tuple[float, ...]:
    """A peer group's last runtimes once `run` has ended: the newest `RECENT_RUNTIMES`, oldest first."""
    return (*recent[1 - RECENT_RUNTIMES :], run)


def peer_key(user: str, account: str, slots: int) -> tuple[str, int]:
    """The group whose finished jobs predict a job's runtime: its user (else its account, the only owner
    a GPU trace such as Philly names) and the slots (GPUs, or cores) it asks for."""
    return (user or account, slots)


@dataclass(frozen=True, slots=True)
class PriorityContext:
    """The slice of a snapshot that base priority policies read."""

    now: float
    total_gpus: int
    history: History = field(default_factory=History)
    origin: float = 0.0
    nodes: int = 0
    """The cluster's node count: multifactor's SMALL_RELATIVE_TO_TIME sizes a job against an average
    node (0: unknown, no floor)."""


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The scheduler's whole view at one instant, identical whether it came from the simulator or Slurm.

    Per-node free resources are indexed like `cluster.nodes`; a node that is down, drained or reserved
    shows no free resources.

    `priorities` is what squeue shows as each pending job's priority, by job id, kept apart from the
    jobs: it moves from tick to tick (multifactor's age, the daemon's own writes) while the jobs stay
    the same, so a job is one object for as long as it pends and whatever was computed from the
    jobs alone (the state's table, a static base order, quiet ticks' signature) holds while they do.
    A job absent from it shows none (a trace's job, the paper loop).
    """

    now: float
    cluster: ClusterSpec
    free_gpus: tuple[int, ...]
    free_cpus: tuple[int, ...]
    free_mem_mb: tuple[int, ...]
    pending: tuple[Job, ...]
    running: tuple[RunningJob, ...]
    history: History = field(default_factory=History)
    origin: float = 0.0
    priorities: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def context(self) -> PriorityContext:
        cluster = self.cluster
        return PriorityContext(self.now, cluster.total_gpus, self.history, self.origin, len(cluster.nodes))
