"""Edits of recorded records: 22.05 and later-version shapes, jobs left alone, node states, bad input."""

from __future__ import annotations

import json
from typing import Any

import pytest

from rltuned.domain import ClusterSpec
from rltuned.errors import SlurmError
from rltuned.slurm import ParseReport, parse_jobs, parse_nodes, snapshot_from_slurm
from tests.slurm import samples
from tests.slurm.samples import NOW, pending_variant, queue_of

CLUSTER = parse_nodes(samples.sinfo()).cluster


def one(record: dict[str, Any], **kw: Any) -> tuple[Any, ParseReport]:
    """The single pending job parsed from a one-record queue (None if it was left out), and the report."""
    table = parse_jobs(queue_of(record), CLUSTER, **kw)
    return (table.pending[0] if table.pending else None), table.report


# --- numbers, states and the later-version shapes ----------------------------------------------------


@pytest.mark.parametrize(
    ("time_limit", "seconds"),
    [
        (5, 300.0),
        (None, None),  # INFINITE is printed as null
        (4_294_967_294, None),  # NO_VAL
        ({"set": True, "infinite": False, "number": 7}, 420.0),
        ({"set": True, "infinite": True, "number": 0}, None),
        ({"set": False, "infinite": False, "number": 0}, None),
    ],
)
def test_time_limit_minutes_plain_or_set_infinite_number(time_limit: Any, seconds: float | None) -> None:
    job, report = one(pending_variant(time_limit=time_limit))
    assert job.time_limit == seconds
    assert report.no_time_limit == (seconds is None)  # Job.estimate raises for these until filled


def test_later_version_shapes_are_accepted() -> None:
    table = parse_jobs(
        queue_of(
            pending_variant(
                job_state=["PENDING"],
                priority={"set": True, "infinite": False, "number": 4242},
                submit_time={"set": True, "infinite": False, "number": 1_795_303_000},
                nice=-5,  # later versions print the signed value
                memory_per_node={"set": True, "infinite": False, "number": 4096},
                tres_per_node="gres/gpu:a100=2",
                reservation="",
            )
        ),
        CLUSTER,
    )
    job, report = table.pending[0], table.report
    assert (table.priorities[job.id], job.submit, job.gpus, job.gpu_type, job.mem_mb) == (
        4242,
        1_795_303_000.0,
        2,
        "a100",
        4096,
    )
    assert report.pending == 1
    table = parse_jobs(queue_of(pending_variant(nice=-5)), CLUSTER)
    assert table.info[5].nice == -5


@pytest.mark.parametrize(
    ("changes", "gpus", "gpu_type"),
    [
        ({"tres_per_node": "gres:gpu:2"}, 2, None),
        ({"tres_per_node": "gres:gpu:p100:2", "node_count": 2}, 4, "p100"),  # per node x nodes
        ({"tres_per_node": "gres/gpu:a100=2"}, 2, "a100"),
        ({"tres_per_node": "gres/gpu=3"}, 3, None),
        ({"tres_per_node": "gres:gpu:k80:1,gres:shard:4"}, 1, "k80"),  # other GRES ignored
        ({"tres_per_node": "", "tres_per_job": "gres:gpu:p100:3", "node_count": 2}, 3, "p100"),  # per job
        ({"tres_per_node": "", "tres_per_task": "gres:gpu:1", "tasks": 4}, 4, None),
        ({"tres_per_node": "", "tres_per_socket": "gres:gpu:v100:1", "sockets_per_node": 2}, 2, "v100"),
    ],
)
def test_gpu_requests(changes: dict[str, Any], gpus: int, gpu_type: str | None) -> None:
    job, _ = one(pending_variant(**changes))
    assert (job.gpus, job.gpu_type) == (gpus, gpu_type)


@pytest.mark.parametrize(
    ("changes", "mem_mb"),
    [
        ({}, 0),  # nothing asked: placement infers the GPU share of a node
        ({"memory_per_node": 16_000}, 16_000),
        ({"memory_per_node": 16_000, "node_count": 2}, 32_000),  # per node x nodes
        ({"memory_per_cpu": 2_000, "cpus": 4}, 8_000),  # per CPU x CPUs
        ({"memory_per_tres": "gres:gpu:10000"}, 20_000),  # --mem-per-gpu x 2 GPUs
    ],
)
def test_memory_is_the_job_total_in_mib(changes: dict[str, Any], mem_mb: int) -> None:
    job, _ = one(pending_variant(**changes))
    assert job.mem_mb == mem_mb


def test_squeue_json_ignores_state_filters_so_states_are_filtered_here() -> None:
    records = [
        pending_variant(job_id=101, job_state="COMPLETED"),
        pending_variant(job_id=102, job_state="CANCELLED"),
        pending_variant(job_id=103, job_state="REQUEUED"),
        pending_variant(job_id=104),
    ]
    table = parse_jobs(queue_of(*records), CLUSTER)
    assert [j.id for j in table.pending] == [104]
    assert (table.report.other_state, table.report.pending) == (3, 1)


def test_completing_and_suspended_jobs_still_hold_their_gpus() -> None:
    records = [samples.job_record(1), samples.job_record(3)]
    records[0]["job_state"] = "COMPLETING"
    records[1]["job_state"] = "SUSPENDED"
    table = parse_jobs(queue_of(*records), CLUSTER)
    assert [r.job.id for r in table.running] == [1, 3]


def test_running_job_without_gpus_is_counted_not_kept() -> None:
    record = samples.job_record(1)
    record.update(gres_detail=[], tres_per_node="")
    table = parse_jobs(queue_of(record), CLUSTER)
    assert table.running == ()
    assert table.report.running_without_gpus == 1


def test_multi_node_running_job_allocation() -> None:
    record = samples.job_record(1)
    record.update(
        nodes="p100-[1-2]",
        node_count=2,
        cpus=4,
        gres_detail=["gpu:p100:4(IDX:0-3)", "gpu:p100:3(IDX:0-2)"],
        tres_per_node="",
        tres_per_job="gres:gpu:p100:7",
        memory_per_node=1_000,
        job_resources=None,
    )
    table = parse_jobs(queue_of(record), CLUSTER)
    (running,) = table.running
    index = {n.name: i for i, n in enumerate(CLUSTER.nodes)}
    assert running.job.gpus == 7
    assert [(s.node, s.gpus, s.cpus, s.mem_mb) for s in running.allocation] == [
        (index["p100-1"], 4, 2, 1_000),
        (index["p100-2"], 3, 2, 1_000),
    ]


# --- jobs left alone ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"partition": "debug"}, "exempt_partition"),
        ({"partition": "main,debug"}, "exempt_partition"),  # any of its partitions
        ({"qos": "urgent"}, "exempt_qos"),
        ({"priority": 0}, "held"),
        ({"state_reason": "JobHeldUser"}, "held"),
        ({"state_reason": "JobHeldAdmin", "priority": 0}, "held"),
        ({"job_state": "REQUEUE_HOLD"}, "held"),
        ({"state_reason": "Dependency", "dependency": "afterok:4"}, "dependency"),
        ({"state_reason": "DependencyNeverSatisfied"}, "dependency"),
        ({"state_reason": "BeginTime"}, "dependency"),
        ({"array_job_id": 5, "array_task_string": "0-9"}, "array_unsplit"),
        ({"array_job_id": 5, "array_task_id": None, "array_task_string": ""}, "array_unsplit"),
        ({"het_job_id": 5, "het_job_offset": 0}, "heterogeneous"),
        ({"resv_name": "maint"}, "reservation"),
        ({"tres_per_node": ""}, "cpu_only"),
    ],
)
def test_left_alone_and_counted(changes: dict[str, Any], reason: str) -> None:
    job, report = one(pending_variant(**changes), exempt_partitions=("debug",), exempt_qos=("urgent",))
    assert job is None
    assert report.left_alone == {r: int(r == reason) for r in report.left_alone}
    assert (report.pending, report.skipped_malformed) == (0, 0)


def test_a_bare_exempt_name_is_one_name() -> None:
    _, report = one(pending_variant(partition="d"), exempt_partitions="debug")
    assert report.pending == 1


def test_split_array_tasks_are_managed() -> None:
    job, report = one(pending_variant(job_id=40, array_job_id=39, array_task_id=1, array_task_string=""))
    assert job is not None and job.id == 40
    assert report.array_unsplit == 0


def test_a_job_is_counted_once_under_its_first_reason() -> None:
    record = pending_variant(partition="debug", priority=0, state_reason="Dependency", resv_name="r")
    _, report = one(record, exempt_partitions=("debug",))
    assert report.left_alone == {
        "exempt_partition": 1,
        "exempt_qos": 0,
        "held": 0,
        "dependency": 0,
        "array_unsplit": 0,
        "heterogeneous": 0,
        "reservation": 0,
        "cpu_only": 0,
    }


def test_report_on_a_mixed_queue() -> None:
    doc = samples.squeue()
    held = pending_variant(job_id=20, priority=0, state_reason="JobHeldAdmin")
    waiting = pending_variant(job_id=21, state_reason="Dependency")
    broken = pending_variant(job_id=22)
    del broken["submit_time"]
    doc["jobs"] += [held, waiting, broken]
    snap, report = snapshot_from_slurm(doc, samples.sinfo(), NOW, exempt_qos=("normal",))
    assert [j.id for j in snap.pending] == [5, 6, 9, 11, 12, 13]
    assert report.counts() == {
        **ParseReport().counts(),
        "pending": 6,
        "running": 7,
        "held": 1,
        "dependency": 1,
        "skipped_malformed": 1,
        "nodes": 5,
    }
    assert report.problems == ("job 22: submit_time: Field required",)


# --- node states -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "flags"),
    [
        ("down", []),
        ("idle", ["DRAIN"]),  # drained
        ("mixed", ["DRAIN"]),  # draining
        ("mixed", ["NOT_RESPONDING"]),
        ("idle", ["RESERVED"]),
        ("idle", ["MAINTENANCE"]),
        ("idle", ["FAIL"]),
        ("unknown", []),  # after a slurmctld restart, until slurmd re-registers
        ("future", []),
        ("IDLE+DRAIN", []),  # a text form
        (["IDLE", "DRAIN"], []),  # a later-version list
    ],
)
def test_unavailable_nodes_offer_nothing(state: Any, flags: list[str]) -> None:
    doc = samples.node_variant("p100-1", state=state, state_flags=flags, gres_used="gpu:p100:0(IDX:N/A)")
    snap, report = snapshot_from_slurm(queue_of(), doc, NOW)
    i = [n.name for n in snap.cluster.nodes].index("p100-1")
    assert (snap.free_gpus[i], snap.free_cpus[i], snap.free_mem_mb[i]) == (0, 0, 0)
    assert snap.cluster.nodes[i].gpus == 4  # still part of the cluster
    assert report.nodes_unavailable == 1


@pytest.mark.parametrize(
    ("state", "flags"), [("idle", []), ("mixed", ["COMPLETING"]), ("idle", ["POWERED_DOWN"])]
)
def test_available_nodes(state: str, flags: list[str]) -> None:
    doc = samples.node_variant(
        "p100-1",
        state=state,
        state_flags=flags,
        gres_used="gpu:p100:1(IDX:2)",
        alloc_cpus=3,
        alloc_memory=1000,
    )
    table = parse_nodes(doc)
    i = [n.name for n in table.cluster.nodes].index("p100-1")
    assert (table.free_gpus[i], table.free_cpus[i], table.free_mem_mb[i]) == (3, 5, 63_000)


def test_untyped_socket_bound_gres_and_gpu_less_nodes() -> None:
    doc = samples.sinfo()
    doc["nodes"][0].update(gres="gpu:4(S:0)", gres_used="gpu:(null):1(IDX:0)")
    doc["nodes"][1].update(gres="", gres_used="")  # a CPU-only node
    doc["nodes"][2].update(gres=None, gres_used=None)  # as 22.05 prints a node without GRES
    table = parse_nodes(doc)
    assert [n.name for n in table.cluster.nodes] == ["k80-1", "p100-1", "p100-2"]
    assert (table.cluster.nodes[0].gpu_type, table.cluster.nodes[0].gpus, table.free_gpus[0]) == ("gpu", 4, 3)
    assert table.without_gpus == ("k80-2", "m40-1")
    _, report = snapshot_from_slurm(queue_of(), doc, NOW)
    assert (report.nodes, report.nodes_without_gpus) == (3, 2)


def test_nodes_sort_by_name_with_numbers_as_numbers() -> None:
    doc = samples.sinfo()
    template = doc["nodes"][3]
    doc["nodes"] = [dict(template, name=name) for name in ("gpu10", "gpu2", "gpu1", "a100-3")]
    assert [n.name for n in parse_nodes(doc).cluster.nodes] == ["a100-3", "gpu1", "gpu2", "gpu10"]


def test_a_node_listed_per_partition_is_one_node() -> None:
    doc = samples.sinfo()
    doc["nodes"].append(dict(doc["nodes"][0], partitions=["gpu"]))
    table = parse_nodes(doc)
    assert len(table.cluster.nodes) == 5
    assert table.cluster.nodes[0].partition == "main"  # the first partition listed


# --- malformed input ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "problem"),
    [
        ({"job_id": None}, "job #0: job_id: Input should be a valid integer"),
        ({"job_state": 7}, "job 5: job_state: Input should be a valid tuple"),
        ({"submit_time": "yesterday"}, "job 5: submit_time: Input should be a valid integer"),
        ({"tres_per_node": "gres:gpu:p100:-2"}, "job 5: expected GRES items like gpu:a100:2"),
        ({"tres_per_node": "gres:gpu:a100:1,gres:gpu:v100:1"}, "job 5: expected one GPU model per request"),
        ({"required_nodes": "p100-[1-"}, "job 5: expected balanced brackets in a hostlist"),
        ({"tres_per_node": "", "tres_per_task": "gres:gpu:1", "tasks": None}, "job 5: expected a task count"),
    ],
)
def test_malformed_jobs_are_skipped_and_counted(changes: dict[str, Any], problem: str) -> None:
    doc = queue_of(pending_variant(**changes), pending_variant(job_id=77))
    table = parse_jobs(doc, CLUSTER)
    assert [j.id for j in table.pending] == [77]  # the rest of the queue survives
    assert table.report.skipped_malformed == 1
    (line,) = table.report.problems
    assert line.startswith(problem)
    assert "\n" not in line


def test_missing_fields_and_non_objects_are_skipped() -> None:
    no_state = pending_variant(job_id=30)
    del no_state["job_state"]
    doc = queue_of(no_state, "not a job", pending_variant(job_id=31))
    table = parse_jobs(doc, CLUSTER)
    assert [j.id for j in table.pending] == [31]
    assert table.report.skipped_malformed == 2
    assert table.report.problems[0] == "job 30: job_state: Field required"


def test_malformed_nodes_are_skipped_and_counted() -> None:
    doc = samples.sinfo()
    doc["nodes"][0]["cpus"] = "eight"
    doc["nodes"][1]["gres"] = "gpu:k80:lots:more"
    del doc["nodes"][2]["name"]
    table = parse_nodes(doc)
    assert [n.name for n in table.cluster.nodes] == ["p100-1", "p100-2"]
    assert table.skipped_malformed == 3


def test_problems_are_capped() -> None:
    doc = queue_of(*[pending_variant(job_id=i, submit_time=None) for i in range(1, 60)])
    report = parse_jobs(doc, CLUSTER).report
    assert report.skipped_malformed == 59
    assert len(report.problems) == 20


@pytest.mark.parametrize(
    ("squeue", "message"),
    [
        ("", "squeue --json: expected a JSON document, got empty output"),
        (
            "{not json",
            "squeue --json: invalid JSON: Expecting property name enclosed in double quotes at line 1",
        ),
        (b'{"jobs": "\xff"}', "squeue --json: expected UTF-8 JSON, got undecodable bytes"),
        ("[]", "squeue --json: expected a JSON object, got list"),
        (
            '{"meta": {}, "errors": []}',
            "squeue --json: expected a 'jobs' list (Slurm 22.05 output), got keys",
        ),
        ('{"jobs": {}}', "squeue --json: expected a 'jobs' list (Slurm 22.05 output), got dict"),
        (
            '{"jobs": [], "errors": [{"error": "Unable to contact slurm controller", "errno": 1007}]}',
            "squeue --json: Slurm reported an error: Unable to contact slurm controller (errno 1007)",
        ),
    ],
)
def test_unreadable_squeue_documents_raise_one_line(squeue: str | bytes, message: str) -> None:
    with pytest.raises(SlurmError) as caught:
        parse_jobs(squeue, CLUSTER)
    assert str(caught.value).startswith(message)
    assert "\n" not in str(caught.value)


def test_unreadable_sinfo_documents_raise() -> None:
    with pytest.raises(SlurmError, match=r"^sinfo --json: expected a 'nodes' list"):
        parse_nodes(json.dumps({"meta": {}, "errors": [], "sinfo": []}))
    with pytest.raises(SlurmError, match=r"^sinfo --json: invalid JSON"):
        snapshot_from_slurm(samples.text("squeue.json"), samples.text("sinfo.json")[:-40], NOW)


def test_documents_may_be_text_bytes_or_parsed() -> None:
    as_text = parse_nodes(samples.text("sinfo.json"))
    as_bytes = parse_nodes(samples.text("sinfo.json").encode())
    assert as_text == as_bytes == parse_nodes(samples.sinfo())


def test_an_empty_queue_and_an_empty_cluster() -> None:
    table = parse_jobs(queue_of(), ClusterSpec("empty", ()))
    assert (table.pending, table.running, table.report) == ((), (), ParseReport())
    doc = samples.sinfo()
    doc["nodes"] = []
    assert parse_nodes(doc).cluster.nodes == ()


@pytest.mark.parametrize(
    ("stderr", "outcome"),
    [
        ("slurm_update error: Access/permission denied for job 26", "denied"),
        # What 22.05 answers when a user who is not an Operator sets another user's job's priority
        # (seen by the fault-injection suite): a refusal, so enforce mode pauses after a few ticks.
        ("slurm_update error: Invalid user id for job 28", "denied"),
        ("slurm_update error: Invalid job id specified", "gone"),
        ("slurm_update error: Job is no longer pending execution for job 12", "gone"),
        ("scontrol timed out after 3 s (slurmctld unreachable?)", "error"),
    ],
)
def test_scontrol_complaints_are_classified_as_slurm_words_them(stderr: str, outcome: str) -> None:
    from rltuned.slurm.cli_backend import classify

    assert classify(stderr).value == outcome
