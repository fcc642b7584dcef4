"""Slurm 22.05's `squeue --json` and `sinfo --json` turned into the `ClusterSnapshot` the simulator builds.

Pure functions of recorded text: running the commands is another module's job, so every quirk here is
tested on real output (tests/fixtures/slurm). What comes from where:

* **Cluster and free capacity: sinfo.** One `Node` per node that has GPUs, sorted by name with digit
  runs compared as numbers (`gpu2` before `gpu10`). GPU model and count come from `gres` (`gpu:p100:4`,
  `gpu:4(S:0)`; an untyped GPU is model `"gpu"`), GPUs in use from `gres_used` (`gpu:p100:2(IDX:0-1)`),
  CPUs in use from `alloc_cpus`, memory in use from `alloc_memory` (MiB, zero when memory is not a
  consumable resource). A node that is down, drained or draining, failed, reserved, in maintenance, not
  responding, unknown or rebooting shows nothing free. A node in several partitions takes the first
  one sinfo lists (the domain gives a node one partition). Nodes without GPUs are left out and counted.
* **GRES fallback: `scontrol show node -o` (best with `-d`).** Used only for a node whose JSON lacks the
  `gres` or `gres_used` key. If GPUs in use are still unknown, a node with no allocated CPU has none in
  use (no job holds a GPU without a CPU); otherwise the node shows no free GPU until
  `snapshot_from_slurm` counts the GPUs its running jobs hold.
* **Jobs: squeue.** Slurm 22.05 ignores `-t`/`-u` with `--json`, so states are filtered here. Pending
  jobs become `Job`s (id = Slurm job id, runtime None); running jobs become `RunningJob`s whose
  allocation is approximate (see `_running`): the snapshot's free capacity comes from sinfo, so the
  allocation only has to say which nodes a job holds and when it is expected to end.

Memory semantics: `Job.mem_mb` is the job's total. `memory_per_node` times the node count,
`memory_per_cpu` times the job's CPUs, or `--mem-per-gpu` (`memory_per_tres`) times its GPUs; with none
of them it is 0, "not requested", and placement infers the job's GPU share of a node. The `mem=` in
`tres_req_str` is not used: without DefMemPerCPU it is the whole node even where memory is not consumed.
`Job.cpus` is Slurm's `cpus`, what Slurm will allocate (at least 1).

Cores as slots (`slots="cpus"`, the daemon's `[slurm] slots`): for a CPU cluster served by a model trained
on an HPC log, whose jobs ask for processors, and built as the simulator builds that log's snapshot.
Every node counts, its slots are its CPUs and its free slots its idle CPUs (`cpus - alloc_cpus`); its
"GPU model" is its first partition (the wagap presets name each cluster so), `"cpu"` without one; GRES is
not read. A pending job asks for its `cpus` slots, untyped, with no node count (`nodes` 0: a `-N` Slurm
computed cannot be told from one the user gave) and no memory (0: its cores' share of a node, as for
the log's jobs, which carry no memory; a node's free memory is likewise its idle cores' share). Nodes
carry no partition, so no job's fit is limited to its own partition's nodes (the log's jobs name none).
A running job holds its CPUs spread evenly over its nodes. No job is left alone as `cpu_only`.

Jobs left alone, counted in `ParseReport` under the first reason that applies, in this order: exempt
partition (any of a multi-partition job's), exempt QOS, held (priority 0, a hold reason, or a
hold state), waiting on a dependency or begin time, an array record not yet split into tasks, a
heterogeneous job, a job in a reservation, and a job asking no GPU. A record with a missing or
unreadable field is skipped and counted (`skipped_malformed`), never raised; only a whole document that
cannot be read raises `SlurmError`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field, fields, replace
from types import MappingProxyType
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from rltuned.domain import SLOT_KINDS, Allocation, ClusterSnapshot, ClusterSpec, Job, Node, RunningJob, Slice
from rltuned.errors import SlurmError
from rltuned.slurm import hostlist
from rltuned.slurm.gres import GpuRequest, gpus_of, node_gpus
from rltuned.slurm.models import SinfoDocument, SlurmJob, SlurmNode, SqueueDocument

JsonInput = str | bytes | Mapping[str, Any]

UNTYPED_GPU = "gpu"
"""The model name given to a node whose GRES has no type (`gpu:4`)."""
NO_PARTITION = "cpu"
"""The "model" of a node in no partition, with cores as slots."""
MAX_PROBLEMS = 20
"""How many one-line problem descriptions a report keeps for the log."""
NO_VAL32 = 0xFFFFFFFE
"""Slurm's NO_VAL; INFINITE is one more. Either in a 32-bit field means "no value"."""
NICE_WRAP = 1 << 32

UNAVAILABLE_STATES = frozenset(
    {
        "DOWN",
        "DRAIN",
        "DRAINED",
        "DRAINING",
        "FAIL",
        "FAILING",
        "RESERVED",
        "MAINT",
        "MAINTENANCE",
        "NOT_RESPONDING",
        "NO_RESPOND",
        "FUTURE",
        "UNKNOWN",
        "UNK",
        "ERROR",
        "INVAL",
        "INVALID",
        "INVALID_REG",
        "REBOOT_ISSUED",
        "POWER_DOWN",
        "POWERING_DOWN",
    }
)
"""Base states and flags (sinfo --json `state` + `state_flags`) under which a node offers nothing.

A powered-down cloud node (POWERED_DOWN, POWERING_UP) stays available: Slurm resumes it for a job.
"""
RUNNING_STATES = frozenset(
    {"RUNNING", "COMPLETING", "CONFIGURING", "SUSPENDED", "RESIZING", "SIGNALING", "STAGE_OUT"}
)
"""Job states that still hold their nodes."""
HELD_STATES = frozenset({"REQUEUE_HOLD", "RESV_DEL_HOLD", "SPECIAL_EXIT"})
HELD_REASONS = frozenset({"Held", "JobHeldUser", "JobHeldAdmin"})
WAITING_REASONS = frozenset({"Dependency", "BeginTime", "DependencyNeverSatisfied"})
LEFT_ALONE = (
    "exempt_partition",
    "exempt_qos",
    "held",
    "dependency",
    "array_unsplit",
    "heterogeneous",
    "reservation",
    "cpu_only",
)


@dataclass(frozen=True, slots=True)
class ParseReport:
    """What one read of Slurm held and what was left out of the managed pending set, with counts.

    `pending` and `running` are the jobs in the snapshot; each `LEFT_ALONE` field counts pending jobs
    left alone for that reason (each job once, under the first reason in `LEFT_ALONE` order).
    `no_time_limit` counts managed pending jobs without a limit (INFINITE): their `Job.estimate` raises
    until something fills `time_limit`. `running_without_gpus` are running jobs that hold no GPU (not in
    the snapshot); `other_state` jobs are neither pending nor running (completed, cancelled, ...).
    `problems` describes the first skipped records, one line each.
    """

    pending: int = 0
    running: int = 0
    exempt_partition: int = 0
    exempt_qos: int = 0
    held: int = 0
    dependency: int = 0
    array_unsplit: int = 0
    heterogeneous: int = 0
    reservation: int = 0
    cpu_only: int = 0
    no_time_limit: int = 0
    running_without_gpus: int = 0
    other_state: int = 0
    skipped_malformed: int = 0
    nodes: int = 0
    nodes_unavailable: int = 0
    nodes_without_gpus: int = 0
    nodes_malformed: int = 0
    problems: tuple[str, ...] = ()

    @property
    def left_alone(self) -> dict[str, int]:
        """Pending jobs not managed, per reason."""
        return {reason: getattr(self, reason) for reason in LEFT_ALONE}

    def counts(self) -> dict[str, int]:
        """Every count by field name (for metrics and the tick's log line)."""
        return {f.name: getattr(self, f.name) for f in fields(self) if f.name != "problems"}


@dataclass(frozen=True, slots=True)
class NodeTable:
    """The cluster as sinfo shows it; the free tuples are indexed like `cluster.nodes`.

    `gpus_used_known[i]` is False when neither JSON nor scontrol said how many GPUs node i has in use
    and the node has CPUs allocated; its free GPUs are then 0 until running jobs say otherwise.
    """

    cluster: ClusterSpec
    free_gpus: tuple[int, ...]
    free_cpus: tuple[int, ...]
    free_mem_mb: tuple[int, ...]
    available: tuple[bool, ...]
    gpus_used_known: tuple[bool, ...]
    without_gpus: tuple[str, ...] = ()
    skipped_malformed: int = 0
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class SlurmJobInfo:
    """What the adapter needs about a managed pending job beyond its `Job`.

    `nice` is decoded (22.05 prints 0 as null and a negative nice as a wrapped uint32); the node lists
    are expanded hostlists of `ReqNodeList`/`ExcNodeList`.
    """

    job_id: int
    state_reason: str
    nice: int
    node_count: int
    required_nodes: tuple[str, ...]
    excluded_nodes: tuple[str, ...]
    oversubscribe: str | None = None
    """squeue's `shared` ("shared" after OverSubscribe=yes, "none" after =no, null when never set)."""


@dataclass(frozen=True, slots=True)
class JobTable:
    """Managed pending jobs (by submit time, then id), running GPU jobs (by start), and the report."""

    pending: tuple[Job, ...]
    running: tuple[RunningJob, ...]
    info: Mapping[int, SlurmJobInfo]
    report: ParseReport
    priorities: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    """squeue's priority of each managed pending job that shows one (`ClusterSnapshot.priorities`)."""


@dataclass(frozen=True, slots=True)
class ScontrolNode:
    """The GRES fields of one `scontrol show node -o` record; `gres_used` needs `-d`."""

    name: str
    gres: str | None
    gres_used: str | None


# --- entry points ----------------------------------------------------------------------------------


def snapshot_from_slurm(
    squeue_json: JsonInput,
    sinfo_json: JsonInput,
    now: float,
    scontrol_nodes_text: str | None = None,
    exempt_partitions: Collection[str] = (),
    exempt_qos: Collection[str] = (),
    cluster_name: str = "slurm",
    slots: str = "gpus",
) -> tuple[ClusterSnapshot, ParseReport]:
    """The scheduler's view at `now` (epoch seconds) and what was left out of it.

    History (fair-share usage, past runtimes) is not in squeue/sinfo; it stays empty here.
    """
    view = read_view(
        squeue_json, sinfo_json, now, scontrol_nodes_text, exempt_partitions, exempt_qos, cluster_name, slots
    )
    return view.snapshot, view.report


@dataclass(frozen=True, slots=True)
class SlurmView:
    """A snapshot plus what only the daemon needs: per-job Slurm details for the managed jobs."""

    snapshot: ClusterSnapshot
    report: ParseReport
    info: Mapping[int, SlurmJobInfo]


def read_view(
    squeue_json: JsonInput,
    sinfo_json: JsonInput,
    now: float,
    scontrol_nodes_text: str | None = None,
    exempt_partitions: Collection[str] = (),
    exempt_qos: Collection[str] = (),
    cluster_name: str = "slurm",
    slots: str = "gpus",
) -> SlurmView:
    """`snapshot_from_slurm` with the managed jobs' Slurm details kept."""
    nodes = parse_nodes(sinfo_json, scontrol_nodes_text, cluster_name=cluster_name, slots=slots)
    jobs = parse_jobs(squeue_json, nodes.cluster, exempt_partitions=exempt_partitions, exempt_qos=exempt_qos)
    snapshot = ClusterSnapshot(
        now=float(now),
        cluster=nodes.cluster,
        free_gpus=_free_gpus_from_jobs(nodes, jobs.running),
        free_cpus=nodes.free_cpus,
        free_mem_mb=nodes.free_mem_mb,
        pending=jobs.pending,
        running=jobs.running,
        priorities=jobs.priorities,
    )
    report = replace(
        jobs.report,
        nodes=len(nodes.cluster.nodes),
        nodes_unavailable=nodes.available.count(False),
        nodes_without_gpus=len(nodes.without_gpus),
        nodes_malformed=nodes.skipped_malformed,
        problems=(nodes.problems + jobs.report.problems)[:MAX_PROBLEMS],
    )
    return SlurmView(snapshot, report, jobs.info)


def parse_nodes(
    sinfo_json: JsonInput,
    scontrol_nodes_text: str | None = None,
    cluster_name: str = "slurm",
    slots: str = "gpus",
) -> NodeTable:
    """The `ClusterSpec` and per-node free GPUs (or cores, `slots="cpus"`), CPUs and memory from
    `sinfo --json`."""
    if slots not in SLOT_KINDS:
        raise ValueError(f"expected slots in {SLOT_KINDS}, got {slots!r}")
    doc = _document(sinfo_json, SinfoDocument, "sinfo --json", "nodes")
    fallback = parse_scontrol_nodes(scontrol_nodes_text) if scontrol_nodes_text else {}
    records: dict[str, SlurmNode] = {}
    problems: list[str] = []
    for position, raw in enumerate(doc.nodes):
        try:
            record = SlurmNode.model_validate(raw)
        except ValidationError as exc:
            problems.append(f"node {_label(raw, 'name', position)}: {_first_error(exc)}")
            continue
        seen = records.get(record.name)
        if seen is None:
            records[record.name] = record
        else:  # a node listed once per partition: keep one record, all partitions
            merged = tuple(dict.fromkeys(seen.partitions + record.partitions))
            records[record.name] = seen.model_copy(update={"partitions": merged})
    rows: list[_NodeRow] = []
    without: list[str] = []
    for name in sorted(records, key=natural_key):
        try:
            row = _node_row(records[name], fallback.get(name), slots)
        except ValueError as exc:
            problems.append(f"node {name}: {exc}")
            continue
        if row is None:
            without.append(name)
        else:
            rows.append(row)
    return NodeTable(
        cluster=ClusterSpec(cluster_name, tuple(r.node for r in rows), slots),
        free_gpus=tuple(r.free_gpus for r in rows),
        free_cpus=tuple(r.free_cpus for r in rows),
        free_mem_mb=tuple(r.free_mem_mb for r in rows),
        available=tuple(r.available for r in rows),
        gpus_used_known=tuple(r.gpus_used_known for r in rows),
        without_gpus=tuple(without),
        skipped_malformed=len(problems),
        problems=tuple(problems[:MAX_PROBLEMS]),
    )


def parse_jobs(
    squeue_json: JsonInput,
    cluster: ClusterSpec,
    *,
    exempt_partitions: Collection[str] = (),
    exempt_qos: Collection[str] = (),
) -> JobTable:
    """Managed pending jobs and running GPU jobs from `squeue --json`; `cluster` maps node names and
    says what a slot is (with cores as slots every job is managed and asks for its CPUs)."""
    doc = _document(squeue_json, SqueueDocument, "squeue --json", "jobs")
    index = {node.name: i for i, node in enumerate(cluster.nodes)}
    exempt = (_name_set(exempt_partitions), _name_set(exempt_qos))
    counts: Counter[str] = Counter()
    problems: list[str] = []
    pending: list[Job] = []
    running: list[RunningJob] = []
    info: dict[int, SlurmJobInfo] = {}
    priorities: dict[int, int] = {}
    for position, raw in enumerate(doc.jobs):
        try:
            record = SlurmJob.model_validate(raw)
            kind = _classify(record, *exempt)
            if kind == "pending":
                job = _job(record, _requested_slots(record, cluster.slots), cluster.slots)
                if job.gpus == 0:
                    kind = "cpu_only"
                else:
                    info[job.id] = _info(record)  # may raise: before the job is kept
                    pending.append(job)
                    if record.priority is not None:
                        priorities[job.id] = record.priority
            elif kind == "running":
                held = _running(record, index, cluster)
                if held is None:
                    kind = "running_without_gpus"
                else:
                    running.append(held)
        except ValidationError as exc:
            kind = "skipped_malformed"
            problems.append(f"job {_label(raw, 'job_id', position)}: {_first_error(exc)}")
        except ValueError as exc:
            kind = "skipped_malformed"
            problems.append(f"job {_label(raw, 'job_id', position)}: {exc}")
        counts[kind] += 1
    pending.sort(key=lambda j: (j.submit, j.id))
    running.sort(key=lambda r: (r.start, r.job.id))
    report = ParseReport(
        pending=len(pending),
        running=len(running),
        exempt_partition=counts["exempt_partition"],
        exempt_qos=counts["exempt_qos"],
        held=counts["held"],
        dependency=counts["dependency"],
        array_unsplit=counts["array_unsplit"],
        heterogeneous=counts["heterogeneous"],
        reservation=counts["reservation"],
        cpu_only=counts["cpu_only"],
        no_time_limit=sum(1 for j in pending if j.time_limit is None),
        running_without_gpus=counts["running_without_gpus"],
        other_state=counts["other_state"],
        skipped_malformed=counts["skipped_malformed"],
        problems=tuple(problems[:MAX_PROBLEMS]),
    )
    return JobTable(
        tuple(pending), tuple(running), MappingProxyType(info), report, MappingProxyType(priorities)
    )


def parse_scontrol_nodes(text: str) -> dict[str, ScontrolNode]:
    """`Gres=` and `GresUsed=` per node from `scontrol show node [-d] [-o]` (one-line or multi-line)."""
    nodes: dict[str, ScontrolNode] = {}
    for record in re.split(r"\s(?=NodeName=)", f" {text}"):
        found = dict(_SCONTROL_FIELD.findall(record))
        name = found.get("NodeName")
        if name:
            nodes[name] = ScontrolNode(name, found.get("Gres"), found.get("GresUsed"))
    return nodes


def natural_key(name: str) -> tuple[tuple[int, int, str], ...]:
    """Sort key for node names: digit runs compare as numbers, the rest as text."""
    return tuple(
        (0, int(part), "") if part.isdigit() else (1, 0, part) for part in _DIGITS.split(name) if part
    )


# --- nodes -----------------------------------------------------------------------------------------

_SCONTROL_FIELD = re.compile(r"(?:^|\s)(NodeName|Gres|GresUsed)=(\S*)")
_DIGITS = re.compile(r"(\d+)")


@dataclass(frozen=True, slots=True)
class _NodeRow:
    node: Node
    free_gpus: int
    free_cpus: int
    free_mem_mb: int
    available: bool
    gpus_used_known: bool


def _node_row(record: SlurmNode, text: ScontrolNode | None, slots: str) -> _NodeRow | None:
    """One node's shape and free capacity; None when it has no GPU. `ValueError` if unreadable."""
    if slots == "cpus":
        alloc_cpus = _alloc_cpus(record)
        kind = record.partitions[0] if record.partitions else NO_PARTITION
        row = _row(record, GpuRequest(record.cpus, kind), alloc_cpus, alloc_cpus, True)
        share = record.real_memory * row.free_cpus // max(1, record.cpus)
        return replace(row, node=replace(row.node, partition=""), free_mem_mb=share)
    if "gres" in record.model_fields_set:  # present, even as null: the JSON is authoritative
        gres = record.gres or ""
    elif text is not None and text.gres is not None:
        gres = text.gres
    else:
        raise ValueError("expected gres in sinfo --json or in scontrol show node, got neither")
    total = node_gpus(gres)
    if total.gpus == 0:
        return None
    alloc_cpus = _alloc_cpus(record)
    # A null gres_used is as good as missing: unlike a null gres, it cannot mean "no GPUs" here.
    used_text = record.gres_used if record.gres_used is not None else text.gres_used if text else None
    if used_text is not None:
        used, known = node_gpus(used_text).gpus, True
    elif alloc_cpus == 0:
        used, known = 0, True
    else:
        used, known = total.gpus, False
    return _row(record, total, used, alloc_cpus, known)


def _alloc_cpus(record: SlurmNode) -> int:
    if record.alloc_cpus is not None:
        return record.alloc_cpus
    if record.idle_cpus is not None:
        return record.cpus - record.idle_cpus
    raise ValueError("expected alloc_cpus or idle_cpus, got neither")


def _row(record: SlurmNode, total: GpuRequest, used: int, alloc_cpus: int, known: bool) -> _NodeRow:
    """The node with `total` slots of which `used` are taken; an unavailable node offers nothing."""
    node = Node(
        name=record.name,
        gpu_type=total.gpu_type or UNTYPED_GPU,
        gpus=total.gpus,
        cpus=record.cpus,
        mem_mb=record.real_memory,
        partition=record.partitions[0] if record.partitions else "",
    )
    available = not (set(record.state) | set(record.state_flags)) & UNAVAILABLE_STATES
    if not available:
        return _NodeRow(node, 0, 0, 0, False, known)
    return _NodeRow(
        node,
        free_gpus=max(0, total.gpus - used),
        free_cpus=max(0, record.cpus - alloc_cpus),
        free_mem_mb=max(0, record.real_memory - (record.alloc_memory or 0)),
        available=True,
        gpus_used_known=known,
    )


def _free_gpus_from_jobs(nodes: NodeTable, running: tuple[RunningJob, ...]) -> tuple[int, ...]:
    """sinfo's free GPUs, with nodes whose use was unknown filled in from the running jobs' slices."""
    if all(nodes.gpus_used_known):
        return nodes.free_gpus
    held = [0] * len(nodes.cluster.nodes)
    for r in running:
        for s in r.allocation:
            held[s.node] += s.gpus
    return tuple(
        free if known or not up else max(0, node.gpus - held[i])
        for i, (node, free, known, up) in enumerate(
            zip(nodes.cluster.nodes, nodes.free_gpus, nodes.gpus_used_known, nodes.available, strict=True)
        )
    )


# --- jobs ------------------------------------------------------------------------------------------


def _classify(record: SlurmJob, exempt_partitions: frozenset[str], exempt_qos: frozenset[str]) -> str:
    states = set(record.job_state)
    if states & RUNNING_STATES:
        return "running"
    if "PENDING" not in states and not states & HELD_STATES:
        return "other_state"
    if exempt_partitions and exempt_partitions & set(record.partition.split(",")):
        return "exempt_partition"
    if record.qos in exempt_qos:
        return "exempt_qos"
    if record.priority == 0 or record.state_reason in HELD_REASONS or states & HELD_STATES:
        return "held"
    if record.state_reason in WAITING_REASONS:
        return "dependency"
    if record.array_task_string or (record.array_job_id and record.array_task_id is None):
        return "array_unsplit"
    if record.het_job_id:
        return "heterogeneous"
    if record.reservation:
        return "reservation"
    return "pending"


def _requested_slots(record: SlurmJob, slots: str) -> GpuRequest:
    """What the job asks for in slots: its GPUs, or with cores as slots its CPUs (untyped, at least 1)."""
    if slots == "cpus":
        return GpuRequest(max(1, record.cpus or 1), None)
    return _requested_gpus(record)


def _requested_gpus(record: SlurmJob) -> GpuRequest:
    """The job's GPU total from `--gpus` (per job), else per node, per task or per socket.

    Per-node counts are multiplied by the node count (for a pending job, the minimum it asked for),
    per-task by the task count, per-socket by sockets per node and nodes. A model named in any of the
    strings types the request.
    """
    nodes = max(1, record.node_count or 1)
    per_job = gpus_of(record.tres_per_job)
    per_node = gpus_of(record.tres_per_node)
    per_task = gpus_of(record.tres_per_task)
    per_socket = gpus_of(record.tres_per_socket)
    gpu_type = next((r.gpu_type for r in (per_job, per_node, per_task, per_socket) if r.gpu_type), None)
    if per_job.gpus:
        total = per_job.gpus
    elif per_node.gpus:
        total = per_node.gpus * nodes
    elif per_task.gpus:
        if not record.tasks:
            raise ValueError(f"expected a task count for tres_per_task {record.tres_per_task!r}")
        total = per_task.gpus * record.tasks
    elif per_socket.gpus:
        if not record.sockets_per_node:
            raise ValueError(f"expected sockets_per_node for tres_per_socket {record.tres_per_socket!r}")
        total = per_socket.gpus * record.sockets_per_node * nodes
    else:
        total = 0
    return GpuRequest(total, gpu_type if total else None)


def _job(record: SlurmJob, gpus: GpuRequest, slots: str) -> Job:
    cpus = record.cpus or 0
    return Job(
        id=record.job_id,
        submit=float(record.submit_time),
        gpus=gpus.gpus,
        runtime=None,
        time_limit=_limit_seconds(record.time_limit),
        name=record.name,
        user=record.user_name,
        account=record.account,
        partition=record.partition,
        qos=record.qos,
        gpu_type=gpus.gpu_type,
        cpus=cpus,
        mem_mb=_memory_mb(record, cpus, gpus.gpus) if slots == "gpus" else 0,
        nodes=_node_count(record) if slots == "gpus" else 0,
    )


def _node_count(record: SlurmJob) -> int:
    """The node count a per-node GPU request (`--gres=gpu:G`, `--gpus-per-node`) pins; 0 when the job
    asked for a GPU total (`--gpus`), which Slurm may spread over nodes."""
    if gpus_of(record.tres_per_node).gpus and not gpus_of(record.tres_per_job).gpus:
        return max(1, record.node_count or 1)
    return 0


def _limit_seconds(minutes: int | None) -> float | None:
    """squeue's minutes as seconds; null (INFINITE) and NO_VAL mean no limit."""
    if minutes is None or minutes >= NO_VAL32:
        return None
    if minutes < 0:
        raise ValueError(f"expected time_limit >= 0 minutes, got {minutes}")
    return float(minutes * 60)


def _memory_mb(record: SlurmJob, cpus: int, gpus: int) -> int:
    """The job's total memory in MiB, 0 when it asked for none (see the module docstring)."""
    if record.memory_per_node:
        return record.memory_per_node * max(1, record.node_count or 1)
    if record.memory_per_cpu:
        return record.memory_per_cpu * max(1, cpus)
    per_gpu = gpus_of(record.memory_per_tres).gpus  # `gres:gpu:16384`: the "count" is MiB per GPU
    return per_gpu * gpus


def _nice(value: int | None) -> int:
    """22.05 prints nice 0 as null and a negative nice as its uint32 wrap (-500 as 4294966796)."""
    if value is None:
        return 0
    return value - NICE_WRAP if value >= NICE_WRAP // 2 else value


def _info(record: SlurmJob) -> SlurmJobInfo:
    return SlurmJobInfo(
        job_id=record.job_id,
        state_reason=record.state_reason,
        nice=_nice(record.nice),
        node_count=max(1, record.node_count or 1),
        required_nodes=hostlist.expand(record.required_nodes),
        excluded_nodes=hostlist.expand(record.excluded_nodes),
        oversubscribe=record.shared,
    )


def _running(record: SlurmJob, index: Mapping[str, int], cluster: ClusterSpec) -> RunningJob | None:
    """A running job and an approximate allocation; None when it holds no GPU.

    The nodes come from the job's hostlist. GPUs per node come from `gres_detail` (one entry per node,
    in hostlist order) when it lines up with the nodes, else the request spread evenly. CPUs are the
    job's CPUs spread evenly (the per-core detail in `job_resources` is not worth decoding), memory is
    `job_resources`' `memory_allocated` per node when given, else the job's memory spread evenly (with
    cores as slots: each node's share for the cores held there).
    Nodes outside `cluster` (no GPUs, or unreadable) get no slice.
    """
    names = hostlist.expand(record.nodes or (record.job_resources.nodes if record.job_resources else ""))
    slots = cluster.slots
    request = _requested_slots(record, slots)
    details = [node_gpus(d) for d in record.gres_detail] if slots == "gpus" else []
    if details and len(details) == len(names):
        per_node = [d.gpus for d in details]
        gpu_type = next((d.gpu_type for d in details if d.gpu_type), request.gpu_type)
        gpus = GpuRequest(sum(per_node), gpu_type)
    else:
        per_node = _spread(request.gpus, len(names))
        gpus = request
    if gpus.gpus == 0:
        return None
    if not record.start_time:
        raise ValueError("expected start_time for a running job, got none")
    job = _job(record, gpus, slots)
    allocated_mem: dict[str, int] = {}
    if slots == "cpus":  # each core's share of its node, as for the log's jobs
        shares = ((name, cluster.nodes[index[name]], k) for k, name in enumerate(names) if name in index)
        allocated_mem = {name: node.mem_mb * per_node[k] // max(1, node.cpus) for name, node, k in shares}
    elif record.job_resources is not None:
        allocated_mem = {
            a.nodename: a.memory_allocated
            for a in record.job_resources.allocated_nodes
            if a.memory_allocated is not None
        }
    cpus = _spread(job.cpus, len(names))
    mem = _spread(job.mem_mb, len(names))
    allocation: Allocation = tuple(
        Slice(index[name], per_node[i], cpus[i], allocated_mem.get(name, mem[i]))
        for i, name in enumerate(names)
        if name in index
    )
    return RunningJob(job, float(record.start_time), allocation)


def _name_set(names: Collection[str]) -> frozenset[str]:
    """A bare string is one name, not its characters."""
    return frozenset((names,) if isinstance(names, str) else names)


def _spread(total: int, parts: int) -> list[int]:
    """`total` split into `parts` near-equal integers, the remainder on the first ones."""
    if parts <= 0:
        return []
    base, extra = divmod(total, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


# --- documents -------------------------------------------------------------------------------------

_Doc = TypeVar("_Doc", bound=BaseModel)


def _document(doc: JsonInput, model: type[_Doc], what: str, key: str) -> _Doc:
    """The validated envelope, or a one-line `SlurmError` saying what was expected and what came."""
    data: object = doc
    if isinstance(doc, str | bytes):
        if not doc.strip():
            raise SlurmError(f"{what}: expected a JSON document, got empty output")
        try:
            data = json.loads(doc)
        except json.JSONDecodeError as exc:
            raise SlurmError(
                f"{what}: invalid JSON: {exc.msg} at line {exc.lineno} column {exc.colno}"
            ) from None
        except UnicodeDecodeError as exc:
            raise SlurmError(f"{what}: expected UTF-8 JSON, got undecodable bytes ({exc.reason})") from None
    if not isinstance(data, Mapping):
        raise SlurmError(f"{what}: expected a JSON object, got {type(data).__name__}")
    errors = data.get("errors")
    if isinstance(errors, list) and errors:
        raise SlurmError(f"{what}: Slurm reported an error: {_slurm_error(errors[0])}")
    if not isinstance(data.get(key), list):
        got = f"keys {sorted(map(str, data))}" if key not in data else type(data[key]).__name__
        raise SlurmError(f"{what}: expected a {key!r} list (Slurm 22.05 output), got {got}")
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise SlurmError(f"{what}: {_first_error(exc)}") from None


def _slurm_error(entry: object) -> str:
    if isinstance(entry, Mapping):
        message = entry.get("error") or entry.get("description") or entry
        code = entry.get("errno", entry.get("error_number", entry.get("error_code")))
        return f"{message} (errno {code})" if code is not None else str(message)
    return str(entry)


def _first_error(exc: ValidationError) -> str:
    """The first validation problem in one line: field, message, and count of further problems."""
    errors = exc.errors()
    first = errors[0]
    where = ".".join(str(part) for part in first["loc"]) or "record"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _label(raw: object, key: str, position: int) -> str:
    """How to name a record that may not have validated: its id or name, else its position."""
    if (
        isinstance(raw, Mapping)
        and isinstance(raw.get(key), int | str)
        and not isinstance(raw.get(key), bool)
    ):
        return str(raw[key])
    return f"#{position}"
