"""Test helper: a `ClusterSnapshot` rendered as Slurm 22.05 `squeue --json` and `sinfo --json` output.

Each record starts as a deep copy of a real record from tests/fixtures/slurm (a pending job, a running
job, a node), so every key and value type is exactly what 22.05 prints; only the fields that carry the
snapshot are overwritten. `snapshot_from_slurm(*render(snapshot), now=...)` then gives back the
snapshot's cluster (nodes in name order), free capacity and pending jobs, up to Slurm's own rounding:
submit times to whole seconds, time limits up to whole minutes, and at least one CPU per job.

How fields are written, so that every parser path is exercised:
* a pending job that asked for k nodes (`Job.nodes`) asks per node (`tres_per_node`) with `node_count` k;
  one that said nothing (0) asks per job (`tres_per_job`, like --gpus);
* memory goes in `memory_per_cpu` when it divides evenly by the job's CPUs (and there are several),
  else in `memory_per_node` (split over the nodes), else (0) is left null;
* untyped nodes (model "gpu") and untyped jobs render untyped GRES (`gpu:4`, `gres:gpu:2`);
* nodes named in `down` are rendered in state `down`;
* with `cores=True` (a cluster whose slots are cores, `ClusterSpec.slots == "cpus"`) nothing has GRES:
  nodes show their slots as CPUs in use, jobs ask for their slots as CPUs (`-n`) and 1000 MiB per CPU
  (a request of the job's own, which the snapshot does not carry).
"""

from __future__ import annotations

import copy
import json
import math
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from rltuned.domain import ClusterSnapshot, History, Job, Node, RunningJob
from rltuned.slurm.adapter import HistoryRead
from rltuned.slurm.hostlist import compress
from rltuned.slurm.parse import UNTYPED_GPU

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"


class Rendered(NamedTuple):
    squeue: str
    sinfo: str


def render(snapshot: ClusterSnapshot, *, down: Collection[str] = (), cores: bool = False) -> Rendered:
    squeue = render_squeue(snapshot, cores=cores)
    return Rendered(json.dumps(squeue), json.dumps(render_sinfo(snapshot, down=down, cores=cores)))


def render_sinfo(
    snapshot: ClusterSnapshot, *, down: Collection[str] = (), cores: bool = False
) -> dict[str, Any]:
    sample = json.loads((FIXTURES / "sinfo.json").read_text())
    template = sample["nodes"][0]
    nodes = []
    for i, node in enumerate(snapshot.cluster.nodes):
        used = node.gpus - snapshot.free_gpus[i]
        alloc_cpus = used if cores else node.cpus - snapshot.free_cpus[i]
        alloc_mem = node.mem_mb - snapshot.free_mem_mb[i]
        if node.name in down:
            state = "down"
        elif used == alloc_cpus == alloc_mem == 0:
            state = "idle"
        else:
            state = "allocated" if alloc_cpus >= node.cpus else "mixed"
        record = copy.deepcopy(template)
        record.update(
            name=node.name,
            state=state,
            gres="" if cores else _gres(node.gpu_type, node.gpus),
            gres_used="" if cores else f"{_gres(node.gpu_type, used)}({_indices(0, used)})",
            cpus=node.cpus,
            alloc_cpus=alloc_cpus,
            idle_cpus=node.cpus - alloc_cpus,
            real_memory=node.mem_mb,
            alloc_memory=alloc_mem,
            free_memory=node.mem_mb - alloc_mem,
            partitions=[node.partition] if node.partition else [],
            port=17001 + i,
            tres=f"cpu={node.cpus},mem={node.mem_mb / 1024:.2f}G,billing={node.cpus}",
            tres_used=f"cpu={alloc_cpus}" if alloc_cpus else None,
            tres_weighted=float(alloc_cpus),
        )
        nodes.append(record)
    return {"meta": sample["meta"], "errors": [], "nodes": nodes}


def render_squeue(snapshot: ClusterSnapshot, *, cores: bool = False) -> dict[str, Any]:
    sample = json.loads((FIXTURES / "squeue.json").read_text())
    pending_template = next(j for j in sample["jobs"] if j["job_state"] == "PENDING")
    running_template = next(j for j in sample["jobs"] if j["job_state"] == "RUNNING")
    shown = snapshot.priorities
    if cores:
        jobs = [_cpu_job(pending_template, job, shown.get(job.id)) for job in snapshot.pending]
        jobs += [_cpu_running(running_template, r, snapshot.cluster.nodes) for r in snapshot.running]
        return {"meta": sample["meta"], "errors": [], "jobs": jobs}
    jobs = [_pending(pending_template, job, shown.get(job.id)) for job in snapshot.pending]
    gpu_index = [0] * len(snapshot.cluster.nodes)  # next free GPU index per node, for IDX:
    jobs += [_running(running_template, r, snapshot.cluster.nodes, gpu_index) for r in snapshot.running]
    return {"meta": sample["meta"], "errors": [], "jobs": jobs}


def _cpu_job(template: dict[str, Any], job: Job, priority: int | None = None) -> dict[str, Any]:
    """`sbatch -n <slots>`: CPUs only, no memory asked."""
    record = _common(template, job, priority)
    record.update(cpus=job.gpus, tasks=job.gpus, node_count=1, job_state="PENDING", state_reason="Priority")
    record.update(nodes="", gres_detail=[], memory_per_cpu=1000)
    return record


def _cpu_running(template: dict[str, Any], running: RunningJob, nodes: tuple[Node, ...]) -> dict[str, Any]:
    record = _cpu_job(template, running.job)
    names = [nodes[s.node].name for s in running.allocation]
    start = round(running.start)
    record.update(
        job_state="RUNNING",
        state_reason="None",
        nodes=compress(names),
        node_count=len(names),
        start_time=start,
        end_time=start + (record["time_limit"] or 0) * 60,
        job_resources=None,
    )
    return record


def _common(template: dict[str, Any], job: Job, priority: int | None) -> dict[str, Any]:
    record = copy.deepcopy(template)
    submit = round(job.submit)
    limit = None if job.time_limit is None else math.ceil(job.time_limit / 60 - 1e-9)
    record.update(
        job_id=job.id,
        name=job.name,
        user_name=job.user,
        group_name=job.user,
        account=job.account,
        partition=job.partition,
        qos=job.qos,
        priority=priority,
        nice=None,
        submit_time=submit,
        eligible_time=submit,
        accrue_time=submit,
        time_limit=limit,
        cpus=max(1, job.cpus),
        tasks=1,
        required_nodes="",
        excluded_nodes="",
        shared=None,
        memory_per_node=None,
        memory_per_cpu=None,
        tres_per_job="",
        tres_per_node="",
    )
    return record


def _pending(template: dict[str, Any], job: Job, priority: int | None) -> dict[str, Any]:
    record = _common(template, job, priority)
    count = max(1, job.nodes)
    if job.nodes >= 1:  # `-N k --gres=gpu:G`: per node
        assert job.gpus % job.nodes == 0 and job.mem_mb % job.nodes == 0, "a per-node request splits evenly"
        record["tres_per_node"] = _gres(job.gpu_type, job.gpus // job.nodes, prefix="gres:")
    else:  # `--gpus=G`: a total Slurm may spread
        record["tres_per_job"] = _gres(job.gpu_type, job.gpus, prefix="gres:")
    _memory(record, job, count)
    record.update(node_count=count, job_state="PENDING", state_reason="Priority", nodes="", gres_detail=[])
    return record


def _running(
    template: dict[str, Any], running: RunningJob, nodes: tuple[Node, ...], gpu_index: list[int]
) -> dict[str, Any]:
    job = running.job
    record = _common(template, job, None)
    names = [nodes[s.node].name for s in running.allocation]
    detail = []
    for s in running.allocation:
        first = gpu_index[s.node]
        gpu_index[s.node] += s.gpus
        detail.append(f"{_gres(nodes[s.node].gpu_type, s.gpus)}({_indices(first, s.gpus)})")
    per_node = {s.gpus for s in running.allocation}
    if len(per_node) == 1:
        record["tres_per_node"] = _gres(job.gpu_type, per_node.pop(), prefix="gres:")
    else:
        record["tres_per_job"] = _gres(job.gpu_type, job.gpus, prefix="gres:")
    cpus = sum(s.cpus for s in running.allocation) or max(1, job.cpus)
    start = round(running.start)
    record.update(
        job_state="RUNNING",
        state_reason="None",
        nodes=compress(names),
        batch_host=names[0] if names else "",
        node_count=len(names),
        cpus=cpus,
        gres_detail=detail,
        start_time=start,
        end_time=start + (record["time_limit"] or 0) * 60,
        job_resources={
            "nodes": compress(names),
            "allocated_cores": cpus,
            "allocated_hosts": len(names),
            "allocated_nodes": [
                {
                    "sockets": {"0": {"cores": {str(c): "allocated" for c in range(s.cpus)}}},
                    "nodename": nodes[s.node].name,
                    "cpus_used": 0,
                    "memory_used": 0,
                    "memory_allocated": s.mem_mb,
                }
                for s in running.allocation
            ],
        },
    )
    _memory(record, job, max(1, len(names)))
    return record


def _memory(record: dict[str, Any], job: Job, nodes: int) -> None:
    cpus = record["cpus"]
    if job.mem_mb and cpus > 1 and job.mem_mb % cpus == 0:
        record["memory_per_cpu"] = job.mem_mb // cpus
    elif job.mem_mb:
        record["memory_per_node"] = job.mem_mb // nodes


def _gres(gpu_type: str | None, count: int, prefix: str = "") -> str:
    if gpu_type is None or gpu_type == UNTYPED_GPU:
        return f"{prefix}gpu:{count}"
    return f"{prefix}gpu:{gpu_type}:{count}"


def _indices(first: int, count: int) -> str:
    if count == 0:
        return "IDX:N/A"
    return f"IDX:{first}" if count == 1 else f"IDX:{first}-{first + count - 1}"


def render_history(
    history: History, finished: Sequence[tuple[Job, float, float]] | None = None
) -> HistoryRead:
    """`sshare -P` and `sacct -P` text that `slurm/history.py` reads back as `history`. Without
    `finished`, one sacct row per user with its mean runtime and no account, one per account with no
    user (no peers); with the simulator's finished jobs (job, start, end, in the order they ended), one
    row per job, as sacct lists them, which gives the means and the peers alike."""
    sshare = ["Account|User|GrpTRESRaw", "root||cpu=0,gres/gpu=0"]
    for account, usage in history.usage.items():
        sshare.append(f"{account}||cpu=0,gres/gpu={usage / 60.0!r}")
        sshare.append(f"{account}|someone|cpu=0,gres/gpu=0")
    sacct = ["User|Account|ElapsedRaw|State|AllocTRES|End"]
    if finished is None:
        sacct += [f"{user}||{mean!r}|COMPLETED||" for user, mean in history.mean_runtime_by_user.items()]
        sacct += [f"|{a}|{mean!r}|COMPLETED||" for a, mean in history.mean_runtime_by_account.items()]
    else:
        for job, start, end in finished:
            ended = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(end))
            sacct.append(f"{job.user}|{job.account}|{end - start!r}|COMPLETED|gres/gpu={job.gpus}|{ended}")
    return HistoryRead("\n".join(sshare) + "\n", "\n".join(sacct) + "\n")
