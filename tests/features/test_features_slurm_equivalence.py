"""One code path: a simulator snapshot and the same state read back from Slurm 22.05 JSON encode the same.

The state comes from a real simulator run (mid-episode, with running and pending jobs); it is rendered as
`squeue --json` / `sinfo --json` in the recorded 22.05 shape and parsed by the Slurm adapter. Jobs use what
Slurm keeps exactly: whole-second submits, whole-minute limits and explicit CPUs.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from rltuned.domain import ClusterSnapshot, ClusterSpec, Job, Node
from rltuned.features import encode
from rltuned.policies import make_policy
from rltuned.sim.simulator import SimConfig, Simulator
from rltuned.slurm import snapshot_from_slurm
from tests.builders import cluster
from tests.slurm.render import render

SPEC = cluster(("P100", 4, 2), ("K80", 2, 2), ("M40", 1, 1))


def workload() -> list[Job]:
    jobs = []
    for i in range(60):
        gpus = 1 + (i * 5) % 4
        gpu_type = [None, "P100", "K80", None][i % 4]
        if gpu_type == "K80":
            gpus = min(gpus, 2)
        jobs.append(
            Job(
                i + 1,
                float(i * 30),
                gpus,
                runtime=float(600 + (i * 97) % 3000),
                time_limit=60.0 * (5 + (i * 13) % 90),
                user=f"u{i % 4}",
                account=f"a{i % 3}",
                gpu_type=gpu_type,
                cpus=2 * gpus,
            )
        )
    return jobs


def busy_snapshots(count: int) -> list[ClusterSnapshot]:
    episode = Simulator(SPEC, make_policy("fcfs"), SimConfig()).episode(workload())
    found = []
    while not episode.done and len(found) < count:
        snap = episode.snapshot()
        if len(snap.pending) >= 3 and snap.running:
            found.append(snap)
        episode.choose(snap.pending[-1].id)
    return found


@pytest.mark.parametrize("policy", ["fcfs", "sjf", "wfp3"])
def test_simulator_and_slurm_snapshots_encode_identically(policy: str) -> None:
    snapshots = busy_snapshots(5)
    assert len(snapshots) == 5
    for snap in snapshots:
        squeue, sinfo = render(snap)
        from_slurm, report = snapshot_from_slurm(squeue, sinfo, snap.now, cluster_name=snap.cluster.name)
        assert len(from_slurm.pending) == len(snap.pending), report
        a = encode(snap, make_policy(policy))
        b = encode(from_slurm, make_policy(policy))
        assert a.sampled == b.sampled
        assert np.array_equal(a.job_ids, b.job_ids)
        assert np.array_equal(a.mask, b.mask)
        assert np.array_equal(a.table, b.table)
        assert np.array_equal(a.actor, b.actor)
        assert np.array_equal(a.critic, b.critic)


CORES = ClusterSpec(
    "cores",
    tuple(Node(f"big{i}", "big", 16, 16, 64_000) for i in range(2))
    + tuple(Node(f"small{i}", "small", 4, 4, 16_000) for i in range(4)),
    slots="cpus",
)


def hpc_workload() -> list[Job]:
    """As an SWF log loads: processors as slots, no GPU model, CPUs, memory or partition asked."""
    return [
        Job(
            i + 1,
            float(i * 20),
            [1, 2, 4, 8, 12, 16][(i * 7) % 6],
            runtime=float(300 + (i * 131) % 4000),
            time_limit=60.0 * (10 + (i * 17) % 120),
            user=f"u{i % 5}",
            account=f"g{i % 2}",
        )
        for i in range(80)
    ]


@pytest.mark.parametrize("policy", ["fcfs", "sjf"])
def test_with_cores_as_slots_slurm_snapshots_encode_as_the_hpc_logs_simulator(policy: str) -> None:
    """The HPC model was trained on snapshots of an SWF log; `slurm.slots = "cpus"` must read a CPU
    cluster's squeue/sinfo into the same state, though on Slurm the nodes sit in partitions, the jobs
    name one and ask for memory: the log's jobs had none of these, so the state ignores them."""
    episode = Simulator(CORES, make_policy("fcfs"), SimConfig()).episode(hpc_workload())
    snapshots = []
    while not episode.done and len(snapshots) < 5:
        snap = episode.snapshot()
        if len(snap.pending) >= 3 and snap.running:
            snapshots.append(snap)
        episode.choose(snap.pending[-1].id)
    assert len(snapshots) == 5
    for snap in snapshots:
        nodes = tuple(replace(n, partition="batch" if n.gpus > 4 else "short") for n in CORES.nodes)
        pending = tuple(replace(j, partition="batch") for j in snap.pending)
        shown = replace(snap, cluster=replace(CORES, nodes=nodes), pending=pending)
        squeue, sinfo = render(shown, cores=True)
        from_slurm, _ = snapshot_from_slurm(squeue, sinfo, snap.now, slots="cpus")
        assert from_slurm.free_gpus == snap.free_gpus and from_slurm.free_mem_mb == snap.free_mem_mb
        a = encode(snap, make_policy(policy))
        b = encode(from_slurm, make_policy(policy))
        assert np.array_equal(a.job_ids, b.job_ids)
        assert np.array_equal(a.table, b.table)
        assert np.array_equal(a.actor, b.actor)
        assert np.array_equal(a.critic, b.critic)
