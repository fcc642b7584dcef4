"""The recorded Slurm 22.05 lab outputs parse into what the lab held (tests/slurm/samples.py)."""

from __future__ import annotations

import pytest

from rltuned.domain import Job, Slice
from rltuned.slurm import parse_jobs, parse_nodes, snapshot_from_slurm
from rltuned.slurm.gres import node_gpus
from rltuned.slurm.parse import ParseReport, ScontrolNode, parse_scontrol_nodes
from tests.slurm import samples
from tests.slurm.samples import NOW

NAMES = ("k80-1", "k80-2", "m40-1", "p100-1", "p100-2")
SUBMIT = 1_795_303_544.0


def test_nodes_from_sinfo_json() -> None:
    table = parse_nodes(samples.text("sinfo.json"), cluster_name="rltlab")
    cluster = table.cluster
    assert cluster.name == "rltlab"
    assert tuple(n.name for n in cluster.nodes) == NAMES  # sorted by name
    assert [(n.gpu_type, n.gpus) for n in cluster.nodes] == [
        ("k80", 2),
        ("k80", 2),
        ("m40", 1),
        ("p100", 4),
        ("p100", 4),
    ]
    assert {(n.cpus, n.mem_mb, n.partition) for n in cluster.nodes} == {(8, 64_000, "main")}
    assert cluster.total_gpus == 13
    assert table.free_gpus == (0, 0, 0, 0, 0)  # every GPU in gres_used
    assert table.free_cpus == (7, 7, 7, 6, 6)  # alloc_cpus 1, 1, 1, 2, 2
    assert table.free_mem_mb == (64_000,) * 5  # CR_Core: memory is not consumed, alloc_memory 0
    assert table.available == (True,) * 5
    assert table.gpus_used_known == (True,) * 5


def test_snapshot_from_the_samples() -> None:
    snap, report = snapshot_from_slurm(samples.text("squeue.json"), samples.text("sinfo.json"), NOW)
    assert snap.now == NOW
    assert snap.cluster.describe() == "slurm: 5 nodes, 13 GPUs (2 x 2 k80, 1 x 1 m40, 2 x 4 p100)"
    assert report == ParseReport(pending=6, running=7, nodes=5)
    assert snap.free_gpus == (0,) * 5


def test_pending_jobs_with_their_gres() -> None:
    snap, _ = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)
    shown = snap.priorities
    got = {j.id: (j.gpus, j.gpu_type, j.time_limit, shown[j.id], j.user, j.nodes) for j in snap.pending}
    assert got == {
        5: (2, "p100", 300.0, 1000, "bob", 1),  # gres:gpu:p100:2 (per node, one node), 5 minutes
        6: (2, "p100", 300.0, 5000, "bob", 1),  # admin priority 5000
        9: (1, "k80", 180.0, 1500, "alice", 1),  # nice -500 raised it by 500
        11: (1, "m40", 120.0, 1000, "root", 1),
        12: (2, None, 240.0, 1000, "alice", 1),  # untyped gres:gpu:2
        13: (3, "p100", 240.0, 1000, "bob", 0),  # --gpus=p100:3: a total, which Slurm may spread
    }
    assert [j.id for j in snap.pending] == [5, 6, 9, 11, 12, 13]  # same submit second: by id
    assert snap.pending[0] == Job(
        id=5,
        submit=SUBMIT,
        gpus=2,
        time_limit=300.0,
        name="p100pend",
        user="bob",
        partition="main",
        gpu_type="p100",
        cpus=1,
        mem_mb=0,  # memory_per_node and memory_per_cpu are null: not requested
        nodes=1,
    )


def test_running_jobs_and_their_allocation() -> None:
    snap, _ = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)
    index = {n.name: i for i, n in enumerate(snap.cluster.nodes)}
    got = {r.job.id: (r.job.gpu_type, r.allocation) for r in snap.running}
    assert got == {
        1: ("p100", (Slice(index["p100-1"], 2, 1, 0),)),
        2: ("p100", (Slice(index["p100-1"], 2, 1, 0),)),
        3: ("p100", (Slice(index["p100-2"], 2, 1, 0),)),
        4: ("p100", (Slice(index["p100-2"], 2, 1, 0),)),
        7: ("k80", (Slice(index["k80-1"], 2, 1, 0),)),
        8: ("k80", (Slice(index["k80-2"], 2, 1, 0),)),
        10: ("m40", (Slice(index["m40-1"], 1, 1, 0),)),
    }
    assert {(r.start, r.job.time_limit, r.expected_end) for r in snap.running} == {
        (SUBMIT + 1, 600.0, SUBMIT + 601)
    }
    # The running jobs account for exactly the GPUs sinfo reports in use.
    held = [0] * 5
    for r in snap.running:
        for s in r.allocation:
            held[s.node] += s.gpus
    assert tuple(n.gpus - h for n, h in zip(snap.cluster.nodes, held, strict=True)) == snap.free_gpus


def test_nice_null_and_uint32_wrap() -> None:
    """22.05 prints nice 0 as null and -500 as 4294966796; squeue's text form says 0 and -500."""
    table = parse_jobs(samples.squeue(), parse_nodes(samples.sinfo()).cluster)
    nice = {job_id: info.nice for job_id, info in table.info.items()}
    raw = {j["job_id"]: j["nice"] for j in samples.squeue()["jobs"]}
    assert raw[9] == 4_294_966_796 and raw[5] is None
    assert nice == {5: 0, 6: 0, 9: -500, 11: 0, 12: 0, 13: 0}
    rows = _pipe_table("squeue-O-pipe.txt")
    assert nice == {int(row["JOBID"]): int(row["NICE"]) for row in rows if row["STATE"] == "PENDING"}


def test_pinning_is_kept_for_the_adapter() -> None:
    table = parse_jobs(samples.squeue(), parse_nodes(samples.sinfo()).cluster)
    assert table.info[12].required_nodes == ("p100-2",)
    assert table.info[11].excluded_nodes == ("k80-1",)
    assert table.info[6].state_reason == "Resources"
    assert table.info[5].state_reason == "Priority"


def test_json_agrees_with_the_text_forms() -> None:
    """The same lab state printed by `squeue -o`/`sinfo -O`: the JSON parse must tell the same story."""
    snap, _ = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)
    pending = {j.id: j for j in snap.pending}
    for row in _pipe_table("squeue-o-pipe.txt"):
        job_id = int(row["JOBID"])
        if row["STATE"] != "PENDING":
            assert job_id in {r.job.id for r in snap.running}
            continue
        job = pending[job_id]
        assert snap.priorities[job.id] == int(row["PRIORITY"])
        minutes, seconds = row["TIME_LIMIT"].split(":")
        assert job.time_limit == int(minutes) * 60 + int(seconds)
        if row["TRES_PER_NODE"] != "N/A":
            gres = node_gpus(row["TRES_PER_NODE"].removeprefix("gres:"))
            assert (job.gpus, job.gpu_type) == (gres.gpus, gres.gpu_type)
    for i, (row, node) in enumerate(zip(_pipe_table("sinfo-O-gres.txt"), snap.cluster.nodes, strict=True)):
        assert row["NODELIST"] == node.name
        assert (node_gpus(row["GRES"]).gpus, node.gpu_type) == (node.gpus, row["GRES"].split(":")[1])
        assert node.gpus - node_gpus(row["GRES_USED"]).gpus == snap.free_gpus[i]
        assert node.cpus - int(row["CPUS(A/I/O/T)"].split("/")[0]) == snap.free_cpus[i]


@pytest.mark.parametrize("scontrol", ["scontrol-show-node-d-o.txt", "scontrol-show-node-o.txt"])
def test_scontrol_fills_gres_missing_from_json(scontrol: str) -> None:
    """Without `gres`/`gres_used` in the JSON, scontrol's Gres= (and, with -d, GresUsed=) stand in."""
    doc = samples.sinfo()
    for node in doc["nodes"]:
        del node["gres"], node["gres_used"]
    table = parse_nodes(doc, samples.text(scontrol))
    assert table.cluster == parse_nodes(samples.sinfo()).cluster
    with_detail = scontrol == "scontrol-show-node-d-o.txt"
    assert table.gpus_used_known == (with_detail,) * 5
    assert table.free_gpus == (0,) * 5  # known all used, or unknown on busy nodes: none offered


def test_scontrol_text_one_line_or_several() -> None:
    one_line = parse_scontrol_nodes(samples.text("scontrol-show-node-d-o.txt"))
    several = parse_scontrol_nodes(samples.text("scontrol-show-node-d-o.txt").replace(" Gres", "\n   Gres"))
    assert one_line == several
    assert one_line["k80-1"] == ScontrolNode("k80-1", "gpu:k80:2", "gpu:k80:2(IDX:0-1)")
    plain = parse_scontrol_nodes(samples.text("scontrol-show-node-o.txt"))
    assert plain["p100-2"] == ScontrolNode("p100-2", "gpu:p100:4", None)  # no GresUsed without -d


def test_unknown_gpu_use_is_filled_from_running_jobs() -> None:
    """Plain `scontrol show node -o` has no GresUsed; the running jobs' gres_detail say what is held."""
    sinfo = samples.sinfo()
    for node in sinfo["nodes"]:
        del node["gres_used"]
    squeue = samples.squeue()
    squeue["jobs"] = [
        j for j in squeue["jobs"] if j["job_id"] not in {2, 10}
    ]  # p100-1 keeps one job, m40-1 none
    snap, _ = snapshot_from_slurm(squeue, sinfo, NOW, samples.text("scontrol-show-node-o.txt"))
    assert dict(zip(NAMES, snap.free_gpus, strict=True)) == {
        "k80-1": 0,
        "k80-2": 0,
        "m40-1": 1,
        "p100-1": 2,
        "p100-2": 0,
    }


def test_without_any_gres_source_a_node_is_skipped_and_counted() -> None:
    doc = samples.sinfo()
    del doc["nodes"][0]["gres"]
    table = parse_nodes(doc)
    assert table.skipped_malformed == 1
    assert "k80-1" not in {n.name for n in table.cluster.nodes}
    assert table.problems == (
        "node k80-1: expected gres in sinfo --json or in scontrol show node, got neither",
    )


def _pipe_table(name: str) -> list[dict[str, str]]:
    header, *rows = samples.text(name).splitlines()
    columns = header.split("|")
    return [dict(zip(columns, row.split("|"), strict=True)) for row in rows]
