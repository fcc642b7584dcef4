"""A snapshot rendered as 22.05 squeue/sinfo JSON (tests/slurm/render.py) parses back to itself.

Up to what Slurm itself keeps: nodes in name order, submit times in whole seconds, time limits in
whole minutes (rounded up), at least one CPU per job, and no true runtime.
"""

from __future__ import annotations

import json
import math
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.domain import ClusterSnapshot, ClusterSpec, Job, RunningJob, Slice
from rltuned.slurm import ParseReport, snapshot_from_slurm
from rltuned.slurm.parse import natural_key
from tests.builders import cluster, job
from tests.slurm import samples
from tests.slurm.render import render, render_sinfo, render_squeue

NOW = 50_000.0


def expected_job(j: Job) -> Job:
    limit = None if j.time_limit is None else math.ceil(j.time_limit / 60 - 1e-9) * 60.0
    return replace(j, submit=float(round(j.submit)), time_limit=limit, runtime=None, cpus=max(1, j.cpus))


def assert_round_trip(
    snap: ClusterSnapshot, down: tuple[str, ...] = ()
) -> tuple[ClusterSnapshot, ParseReport]:
    squeue, sinfo = render(snap, down=down)
    got, report = snapshot_from_slurm(squeue, sinfo, snap.now, cluster_name=snap.cluster.name)
    order = sorted(range(len(snap.cluster.nodes)), key=lambda i: natural_key(snap.cluster.nodes[i].name))
    assert got.cluster == ClusterSpec(snap.cluster.name, tuple(snap.cluster.nodes[i] for i in order))
    assert got.free_gpus == tuple(snap.free_gpus[i] for i in order)
    assert got.free_cpus == tuple(snap.free_cpus[i] for i in order)
    assert got.free_mem_mb == tuple(snap.free_mem_mb[i] for i in order)
    want = sorted((expected_job(j) for j in snap.pending), key=lambda j: (j.submit, j.id))
    assert got.pending == tuple(want)
    assert got.priorities == snap.priorities  # squeue's priority of each pending job that shows one
    assert report.pending == len(snap.pending)
    assert report.skipped_malformed == report.nodes_malformed == 0
    _assert_running(snap, got)
    return got, report


def _assert_running(snap: ClusterSnapshot, got: ClusterSnapshot) -> None:
    """Same jobs, starts and per-node GPUs and memory; CPUs only in total (spread evenly on parse)."""

    def shape(s: ClusterSnapshot, r: RunningJob) -> tuple[object, ...]:
        slices = sorted((s.cluster.nodes[x.node].name, x.gpus, x.mem_mb) for x in r.allocation)
        return (
            r.job.id,
            r.job.gpus,
            r.job.gpu_type,
            round(r.start),
            tuple(slices),
            sum(x.cpus for x in r.allocation),
        )

    assert sorted(shape(got, r) for r in got.running) == sorted(shape(snap, r) for r in snap.running)


def test_rendered_documents_have_the_recorded_shape() -> None:
    """Same keys as the recorded 22.05 records, and the same JSON types wherever both are not null."""
    snap = _mixed_snapshot()
    squeue, sinfo = render_squeue(snap), render_sinfo(snap)
    assert set(squeue) == {"meta", "errors", "jobs"} and set(sinfo) == {"meta", "errors", "nodes"}
    recorded_jobs = {j["job_state"]: j for j in samples.squeue()["jobs"]}
    recorded_node = samples.sinfo()["nodes"][0]
    pairs = [(j, recorded_jobs[j["job_state"]]) for j in squeue["jobs"]] + [
        (n, recorded_node) for n in sinfo["nodes"]
    ]
    for rendered, recorded in pairs:
        assert set(rendered) == set(recorded)
        both = [k for k in recorded if rendered[k] is not None and recorded[k] is not None]
        assert {k: type(rendered[k]) for k in both} == {k: type(recorded[k]) for k in both}
    assert json.loads(json.dumps(squeue)) == squeue


def test_round_trip_mixed_cluster_with_running_jobs() -> None:
    got, report = assert_round_trip(_mixed_snapshot())
    assert [n.name for n in got.cluster.nodes] == ["k80-2", "k80-3", "v100-0", "v100-1"]  # name order
    assert report.running == 2


def test_round_trip_of_the_recorded_lab() -> None:
    """Parse the samples, render, parse again: the same snapshot (the samples are already normalized)."""
    snap, _ = snapshot_from_slurm(samples.squeue(), samples.sinfo(), samples.NOW)
    again, _ = snapshot_from_slurm(*render(snap), samples.NOW)
    assert again == snap


def test_round_trip_untyped_gpus_and_many_nodes() -> None:
    spec = cluster(("gpu", 4, 12), cpus_per_gpu=2, mem_per_gpu=4000)  # gpu-0 ... gpu-11, untyped GRES
    pending = (
        job(1, 10.0, 4, 60.0, name="four", user="ann", nodes=1),
        job(2, 11.0, 12, 60.0, cpus=6, nodes=3),  # 3 whole nodes: per node x 3
        job(3, 12.0, 6, 60.0, cpus=3, mem_mb=3001),  # per job (--gpus)
    )
    snap = ClusterSnapshot(NOW, spec, (4,) * 12, (8,) * 12, (16_000,) * 12, pending, ())
    got, _ = assert_round_trip(snap)
    assert got.cluster == spec  # natural name order is the builder's order
    assert got.pending[0].gpu_type is None


def test_round_trip_with_a_down_node() -> None:
    spec = cluster(("A100", 8, 3))
    snap = ClusterSnapshot(
        NOW,
        spec,
        (8, 0, 3),
        (32, 0, 12),
        (65_536, 0, 24_576),
        (job(9, 1.5, 8, 100.0, gpu_type="A100", nodes=1),),
        (),
        priorities={9: 7},
    )
    _, report = assert_round_trip(snap, down=("a100-1",))
    assert report.nodes_unavailable == 1


def test_round_trip_partitions() -> None:
    spec = cluster(("V100", 4, 2))
    nodes = tuple(replace(n, partition=p) for n, p in zip(spec.nodes, ("gpu", "long"), strict=True))
    spec = ClusterSpec("parts", nodes)
    pending = (job(4, 3.0, 2, 30.0, partition="long", qos="normal", account="physics"),)
    snap = ClusterSnapshot(NOW, spec, (4, 4), (16, 16), (32_768, 32_768), pending, ())
    assert_round_trip(snap)


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    shapes = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["A100", "V100", "gpu"]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3)
            ),
            min_size=1,
            max_size=3,
            unique_by=lambda s: s[0],
        )
    )
    spec = cluster(*shapes)
    free_g = tuple(draw(st.integers(0, n.gpus)) for n in spec.nodes)
    free_c = tuple(draw(st.integers(0, n.cpus)) for n in spec.nodes)
    free_m = tuple(draw(st.integers(0, n.mem_mb)) for n in spec.nodes)
    types = [None, *(s[0] for s in shapes if s[0] != "gpu")]
    pending = []
    shown: dict[int, int] = {}
    for jid in range(1, draw(st.integers(0, 6)) + 1):
        limit = draw(st.one_of(st.none(), st.floats(1.0, 1e6)))
        pending.append(
            Job(
                id=jid * 7,
                submit=draw(st.floats(0.0, 1e9)),
                gpus=draw(st.integers(1, 24)),
                time_limit=limit,
                gpu_type=draw(st.sampled_from(types)),
                cpus=draw(st.integers(0, 32)),
                mem_mb=draw(st.integers(0, 100_000)),
                user=draw(st.sampled_from(["", "ann", "bob"])),
                nodes=draw(st.sampled_from([0, 1])),
            )
        )
        priority = draw(st.one_of(st.none(), st.integers(1, 10**6)))
        if priority is not None:
            shown[jid * 7] = priority
    return ClusterSnapshot(NOW, spec, free_g, free_c, free_m, tuple(pending), (), priorities=shown)


@settings(max_examples=60, deadline=None)
@given(snapshots())
def test_round_trip_generated(snap: ClusterSnapshot) -> None:
    assert_round_trip(snap)


def _mixed_snapshot() -> ClusterSnapshot:
    spec = cluster(("V100", 4, 2), ("K80", 2, 2))  # v100-0, v100-1, k80-2, k80-3; 4 CPUs and 8 GiB per GPU
    pending = (
        job(10, 100.4, 2, 600.0, gpu_type="V100", user="ann", account="a", name="two", nodes=1),
        job(11, 99.6, 1, 90.0, cpus=2, mem_mb=4096),  # untyped; 90 s limit shows as 2 minutes
        job(12, 101.0, 8, 3600.0, gpu_type="V100", cpus=8, mem_mb=65_536, nodes=2),  # two V100 nodes
        job(13, 102.0, 6, 3600.0, gpu_type="V100", cpus=3),  # --gpus=V100:6
        job(14, 103.0, 3, 60.0, estimate=None, cpus=6, mem_mb=6000, qos="normal"),
        replace(job(15, 104.0, 2, 60.0, gpu_type="K80"), time_limit=None),  # no limit
    )
    running = (
        RunningJob(
            job(1, 5.0, 2, 900.0, gpu_type="V100", cpus=8, mem_mb=16_384), 20.0, (Slice(0, 2, 8, 16_384),)
        ),
        RunningJob(
            job(2, 6.0, 4, 900.0, gpu_type="K80", cpus=4),
            21.0,
            (Slice(2, 2, 2, 0), Slice(3, 2, 2, 0)),
        ),
    )
    return ClusterSnapshot(
        NOW,
        spec,
        free_gpus=(2, 4, 0, 0),
        free_cpus=(8, 16, 6, 6),
        free_mem_mb=(16_384, 32_768, 16_384, 16_384),
        pending=pending,
        running=running,
        priorities={10: 1500},
    )
