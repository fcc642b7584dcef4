"""Cores as slots (`[slurm] slots = "cpus"`): the recorded lab read as a CPU cluster, as the HPC-log model
(trained on an SWF log's processors) must see it."""

from __future__ import annotations

from rltuned.domain import Slice
from rltuned.slurm import parse_jobs, parse_nodes, snapshot_from_slurm
from tests.slurm import samples
from tests.slurm.samples import NOW


def test_every_node_counts_its_cpus_as_slots_and_its_idle_cpus_as_free() -> None:
    table = parse_nodes(samples.text("sinfo.json"), slots="cpus")
    cluster = table.cluster
    assert cluster.slots == "cpus"
    # The "model" is the partition; nodes carry none, as the log's nodes (a job may fit any).
    assert [(n.gpu_type, n.gpus, n.cpus, n.partition) for n in cluster.nodes] == [("main", 8, 8, "")] * 5
    assert table.free_gpus == table.free_cpus == (7, 7, 7, 6, 6)  # alloc_cpus 1, 1, 1, 2, 2
    assert table.free_mem_mb == (56_000, 56_000, 56_000, 48_000, 48_000)  # the idle cores' share


def test_a_node_without_gres_is_a_cpu_node_not_left_out() -> None:
    doc = samples.node_variant("m40-1", gres="", gres_used="", partitions=[])
    assert len(parse_nodes(doc).cluster.nodes) == 4  # GPUs as slots: no GPU, no node
    cores = parse_nodes(doc, slots="cpus")
    assert [n.name for n in cores.cluster.nodes].count("m40-1") == 1
    assert cores.cluster.nodes[2].gpu_type == "cpu"  # in no partition


def test_a_down_node_offers_no_core() -> None:
    doc = samples.node_variant("k80-2", state="down")
    assert parse_nodes(doc, slots="cpus").free_gpus == (7, 0, 7, 6, 6)


def test_pending_jobs_ask_for_their_cpus_and_a_job_without_gpus_is_managed() -> None:
    cpu_only = samples.pending_variant(job_id=20, tres_per_node="", cpus=12, memory_per_cpu=4000)
    wide = samples.pending_variant(job_id=21, cpus=16, node_count=2)  # also asks p100:2 per node
    doc = samples.queue_of(cpu_only, wide)
    gpus = parse_jobs(doc, parse_nodes(samples.sinfo()).cluster)
    assert [j.id for j in gpus.pending] == [21] and gpus.report.cpu_only == 1
    cores = parse_jobs(doc, parse_nodes(samples.sinfo(), slots="cpus").cluster)
    assert [(j.id, j.gpus, j.cpus, j.gpu_type, j.nodes, j.mem_mb) for j in cores.pending] == [
        (20, 12, 12, None, 0, 0),  # untyped, no node count, no memory: as an SWF log's jobs
        (21, 16, 16, None, 0, 0),
    ]
    assert cores.report.cpu_only == 0


def test_a_running_job_holds_its_cpus_on_its_nodes() -> None:
    spread = samples.job_record(1)
    spread.update(cpus=6, nodes="p100-[1-2]", node_count=2)
    cores = parse_jobs(samples.queue_of(spread), parse_nodes(samples.sinfo(), slots="cpus").cluster)
    (held,) = cores.running
    assert held.job.gpus == 6
    # Spread evenly (gres_detail unread), each with its cores' share of the node's 64,000 MiB.
    assert held.allocation == (Slice(3, 3, 3, 24_000), Slice(4, 3, 3, 24_000))


def test_the_snapshot_frees_what_sinfo_says_is_idle() -> None:
    snap, report = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW, slots="cpus")
    assert snap.cluster.total_gpus == 40
    assert snap.free_gpus == (7, 7, 7, 6, 6)
    assert report.pending == 6 and report.running == 7
    assert sum(s.gpus for r in snap.running for s in r.allocation) == 7  # one CPU each
