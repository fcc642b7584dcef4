"""pyslurm-shaped dicts map to the same snapshot as the JSON; the adapter refuses to start without pyslurm.

The dicts are shaped as pyslurm 22.5.x's `job().get()` / `node().get()` build them (its pyslurm.pyx):
`user_id` not the name, signed `nice`, None for unset array/het ids, node lists and GRES cut at every
comma, memory split by kind. `_pyslurm_job` reshapes each recorded JSON job that way, so the two
snapshots can be compared; the literal dicts below pin the shapes the conversion cannot show.
"""

from __future__ import annotations

import sys
import types
from typing import Any

import pytest

from rltuned.errors import ConfigError, SlurmError
from rltuned.slurm import parse_jobs, parse_nodes, snapshot_from_slurm
from rltuned.slurm.adapter import Outcome
from rltuned.slurm.pyslurm_backend import PyslurmAdapter, pyslurm_available
from rltuned.slurm.pyslurm_map import joined, sinfo_document_from_pyslurm, squeue_document_from_pyslurm
from tests.slurm import samples
from tests.slurm.samples import NOW

UIDS = {"root": 0, "alice": 1001, "bob": 1002}
NAMES = {uid: name for name, uid in UIDS.items()}


def _pyslurm_job(job: dict[str, Any]) -> dict[str, Any]:
    """A recorded `squeue --json` job in the shape pyslurm gives it."""
    nice = job["nice"] or 0
    return {
        "job_id": job["job_id"],
        "job_state": job["job_state"],
        "state_reason": job["state_reason"],
        "priority": job["priority"],
        "nice": nice - (1 << 32) if nice >= 1 << 31 else nice,  # pyslurm subtracts NICE_OFFSET
        "user_id": UIDS[job["user_name"]],
        "account": job["account"],
        "partition": job["partition"],
        "qos": job["qos"],
        "name": job["name"],
        "submit_time": job["submit_time"],
        "start_time": job["start_time"],
        "time_limit": job["time_limit"],
        "tres_per_node": job["tres_per_node"],
        "tres_per_job": job["tres_per_job"],
        "tres_per_task": job["tres_per_task"],
        "tres_per_socket": job["tres_per_socket"],
        "mem_per_tres": job["memory_per_tres"],
        "nodes": job["nodes"],
        "num_nodes": job["node_count"],
        "num_cpus": job["cpus"],
        "num_tasks": job["tasks"],
        "sockets_per_node": job["sockets_per_node"],
        "array_job_id": job["array_job_id"] or None,
        "array_task_id": job["array_task_id"],
        "array_task_str": job["array_task_string"] or None,
        "het_job_id": job["het_job_id"] or None,
        "resv_name": job["resv_name"],
        "dependency": job["dependency"],
        "req_nodes": job["required_nodes"].split(",") if job["required_nodes"] else None,
        "exc_nodes": job["excluded_nodes"].split(",") if job["excluded_nodes"] else None,
        "mem_per_cpu": False,
        "min_memory_cpu": None,
        "mem_per_node": True,
        "min_memory_node": job["memory_per_node"] or 0,
        "pn_min_memory": 0,
        "shared": "1" if job["shared"] == "shared" else "OK",
        "cpus_allocated": {},
    }


def _pyslurm_node(node: dict[str, Any]) -> dict[str, Any]:
    """A recorded `sinfo --json` node in the shape pyslurm gives it."""
    return {
        "name": node["name"],
        "state": node["state"].upper(),
        "cpus": node["cpus"],
        "alloc_cpus": node["alloc_cpus"],
        "err_cpus": 0,
        "real_memory": node["real_memory"],
        "alloc_mem": node["alloc_memory"],
        "free_mem": node["free_memory"],
        "gres": node["gres"].split(",") if node["gres"] else None,
        "gres_used": [node["gres_used"]] if node["gres_used"] else None,
        "gres_drain": ["N/A"],
        "partitions": node["partitions"],
    }


def _documents() -> tuple[dict[str, Any], dict[str, Any]]:
    jobs = {j["job_id"]: _pyslurm_job(j) for j in samples.squeue()["jobs"]}
    nodes = {n["name"]: _pyslurm_node(n) for n in samples.sinfo()["nodes"]}
    return squeue_document_from_pyslurm(jobs, NAMES.__getitem__), sinfo_document_from_pyslurm(nodes)


def test_pyslurm_dicts_give_the_json_snapshot() -> None:
    squeue, sinfo = _documents()
    from_pyslurm, pyslurm_report = snapshot_from_slurm(squeue, sinfo, NOW)
    from_json, json_report = snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)
    assert [(j.id, j.gpus, j.gpu_type, j.user, j.partition, j.time_limit) for j in from_pyslurm.pending] == [
        (j.id, j.gpus, j.gpu_type, j.user, j.partition, j.time_limit) for j in from_json.pending
    ]
    assert from_pyslurm.free_gpus == from_json.free_gpus
    assert from_pyslurm == from_json
    assert pyslurm_report == json_report
    cluster = from_json.cluster
    assert dict(parse_jobs(squeue, cluster).info) == dict(parse_jobs(samples.squeue(), cluster).info)


def test_the_readme_recorded_node_values() -> None:
    """README section 6: pyslurm gave k80-1 `gres` ['gpu:k80:2'] and `gres_used` ['gpu:k80:1(IDX:0)']."""
    node = {
        "name": "k80-1",
        "state": "MIXED",
        "cpus": 8,
        "alloc_cpus": 1,
        "real_memory": 64000,
        "alloc_mem": 0,
        "gres": ["gpu:k80:2"],
        "gres_used": ["gpu:k80:1(IDX:0)"],
        "partitions": ["main"],
    }
    from_pyslurm = parse_nodes(sinfo_document_from_pyslurm({"k80-1": node}))
    from_json = parse_nodes(
        {
            "nodes": [
                n | {"gres_used": "gpu:k80:1(IDX:0)"}
                for n in samples.sinfo()["nodes"]
                if n["name"] == "k80-1"
            ]
        }
    )
    assert from_pyslurm == from_json
    assert from_pyslurm.free_gpus == (1,)


def test_job_shapes_only_pyslurm_has() -> None:
    jobs = {
        70: {
            "job_id": 70,
            "job_state": "PENDING",
            "state_reason": "Priority",
            "priority": 900,
            "user_id": 4242,
            "partition": "gpu",
            "submit_time": 1_795_303_544,
            "time_limit": "UNLIMITED",
            "tres_per_node": "gres:gpu:a100:2",
            "num_nodes": 1,
            "num_cpus": 4,
            "req_nodes": ["a100-[1", "3]"],  # "a100-[1,3]" cut at its comma
            "exc_nodes": None,
            "mem_per_cpu": True,
            "min_memory_cpu": 2048,
            "mem_per_node": False,
            "min_memory_node": None,
            "array_job_id": None,
            "het_job_id": None,
        },
        71: {"job_id": 71, "time_limit": "Partition_Limit", "array_job_id": 69, "array_task_str": "2-9%2"},
    }
    first, second = squeue_document_from_pyslurm(jobs, lambda uid: f"uid{uid}")["jobs"]
    assert first["user_name"] == "uid4242"
    assert first["time_limit"] is None
    assert first["required_nodes"] == "a100-[1,3]"
    assert first["excluded_nodes"] == ""
    assert first["memory_per_cpu"] == 2048
    assert "memory_per_node" not in first
    assert (first["array_job_id"], first["het_job_id"]) == (0, 0)
    assert second == {
        "job_id": 71,
        "time_limit": None,
        "array_job_id": 69,
        "array_task_string": "2-9%2",
    }  # missing keys stay missing
    table = parse_jobs(
        squeue_document_from_pyslurm(jobs, lambda uid: f"uid{uid}"),
        parse_nodes({"nodes": [_pyslurm_sinfo_a100()]}).cluster,
    )
    assert [(j.id, j.mem_mb, j.time_limit) for j in table.pending] == [(70, 8192, None)]
    assert table.info[70].required_nodes == ("a100-1", "a100-3")
    assert table.report.skipped_malformed == 1  # job 71 lacks required fields: skipped, not raised


def _pyslurm_sinfo_a100() -> dict[str, Any]:
    (node,) = sinfo_document_from_pyslurm(
        {
            "a100-1": {
                "name": "a100-1",
                "state": "IDLE",
                "cpus": 32,
                "alloc_cpus": 0,
                "real_memory": 256000,
                "alloc_mem": 0,
                "gres": ["gpu:a100:4(S:0", "1)"],  # "(S:0,1)" cut at its comma too
                "gres_used": None,
                "partitions": ["gpu"],
            }
        }
    )["nodes"]
    node_record: dict[str, Any] = node
    return node_record


def test_node_shapes_only_pyslurm_has() -> None:
    node = _pyslurm_sinfo_a100()
    assert node["gres"] == "gpu:a100:4(S:0,1)"
    assert node["gres_used"] == ""
    nodes = sinfo_document_from_pyslurm(
        {
            "d-1": {
                "name": "d-1",
                "state": "IDLE+DRAIN",
                "cpus": 8,
                "alloc_cpus": 0,
                "real_memory": 1,
                "gres": ["gpu:2"],
            },
            "d-2": {
                "name": "d-2",
                "state": "DOWN*",
                "cpus": 8,
                "alloc_cpus": 0,
                "real_memory": 1,
                "gres": ["gpu:2"],
            },
            "d-3": {"state": "MIXED", "cpus": 8, "alloc_cpus": 8, "real_memory": 1, "gres": None},
        }
    )["nodes"]
    assert [(n["name"], n["state"], n["state_flags"]) for n in nodes] == [
        ("d-1", "IDLE", ["DRAIN"]),
        ("d-2", "DOWN", ["NOT_RESPONDING"]),
        ("d-3", "MIXED", []),  # the name comes from the dict's key when the record lacks it
    ]
    assert nodes[2]["gres"] == ""  # no GRES at all: the node has no GPU, not "unknown"
    table = parse_nodes({"nodes": nodes})
    assert table.available == (False, False)  # d-1, d-2; d-3 has no GPU
    assert table.without_gpus == ("d-3",)


def test_joined() -> None:
    assert joined(None) == ""
    assert joined("p100-2") == "p100-2"
    assert joined(["p100-[1", "3]", "k80-1"]) == "p100-[1,3],k80-1"


# --- the adapter -----------------------------------------------------------------------------------


def test_adapter_refuses_to_start_without_pyslurm(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # `import pyslurm` now raises ImportError
    assert not pyslurm_available()
    with pytest.raises(SlurmError, match="pyslurm is not installed or does not match this Slurm"):
        PyslurmAdapter()


def test_adapter_refuses_a_pyslurm_without_the_job_class(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.ModuleType("pyslurm")
    old.job = old.node = object  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "pyslurm", old)
    with pytest.raises(SlurmError, match="lacks Job, JobSubmitDescription"):
        PyslurmAdapter()


class _RPCError(Exception):
    """pyslurm's RPCError: the message is slurm_strerror's text."""


class _FakePyslurm(types.ModuleType):
    """Just enough of pyslurm 22.5.x: old-style reads, new-style writes, recorded as calls."""

    def __init__(self, fail: str = "") -> None:
        super().__init__("pyslurm")
        self.calls: list[tuple[str, int, dict[str, object]]] = []
        fake = self

        class Job:
            def __init__(self, job_id: int) -> None:
                self.id = job_id

            @classmethod
            def load(cls, job_id: int) -> types.SimpleNamespace:
                if job_id != 5:
                    raise _RPCError("Invalid job id specified")
                return types.SimpleNamespace(state="PENDING")

            def modify(self, changes: dict[str, object]) -> None:
                fake.act("modify", self.id, changes)

            def hold(self) -> None:
                fake.act("hold", self.id, {})

            def release(self) -> None:
                fake.act("release", self.id, {})

        self.fail = fail
        self.Job = Job
        self.JobSubmitDescription = dict
        jobs = {j["job_id"]: _pyslurm_job(j) for j in samples.squeue()["jobs"]}
        nodes = {n["name"]: _pyslurm_node(n) for n in samples.sinfo()["nodes"]}
        self.job = lambda: types.SimpleNamespace(get=lambda: jobs)
        self.node = lambda: types.SimpleNamespace(get=lambda: nodes)

    def act(self, what: str, job_id: int, changes: dict[str, object]) -> None:
        if self.fail:
            raise _RPCError(self.fail)
        self.calls.append((what, job_id, changes))


def test_adapter_reads_and_writes_through_pyslurm(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakePyslurm()
    monkeypatch.setitem(sys.modules, "pyslurm", fake)
    adapter = PyslurmAdapter(NAMES.__getitem__)
    read = adapter.read()
    assert read.source == "pyslurm"
    assert set(read.durations) == {"squeue", "sinfo"}
    snapshot, _ = snapshot_from_slurm(read.squeue, read.sinfo, NOW)
    assert snapshot == snapshot_from_slurm(samples.squeue(), samples.sinfo(), NOW)[0]

    assert adapter.update_job(5, {"Priority": "4242", "ReqNodeList": "p100-2"}).outcome is Outcome.OK
    assert adapter.hold(6).outcome is Outcome.OK
    assert adapter.release(6).outcome is Outcome.OK
    assert fake.calls == [
        ("modify", 5, {"priority": 4242, "required_nodes": "p100-2"}),
        ("hold", 6, {}),
        ("release", 6, {}),
    ]
    assert adapter.job_state(5) == "PENDING"
    assert adapter.job_state(99) is None


def test_adapter_refuses_what_it_cannot_write(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakePyslurm()
    monkeypatch.setitem(sys.modules, "pyslurm", fake)
    adapter = PyslurmAdapter()
    assert adapter.update_job(5, {"OverSubscribe": "yes"}).outcome is Outcome.ERROR
    assert (
        adapter.update_job(5, {"ExcNodeList": ""}).message == "the pyslurm backend cannot clear ExcNodeList"
    )
    assert adapter.update_job(5, {"Priority": "high"}).outcome is Outcome.ERROR
    assert fake.calls == []


@pytest.mark.parametrize(
    ("message", "outcome"),
    [
        ("Invalid job id specified", Outcome.GONE),
        ("Job/step already completing or completed", Outcome.GONE),
        ("Access/permission denied", Outcome.DENIED),
        ("Requested node configuration is not available", Outcome.ERROR),
    ],
)
def test_adapter_maps_rpc_errors(monkeypatch: pytest.MonkeyPatch, message: str, outcome: Outcome) -> None:
    monkeypatch.setitem(sys.modules, "pyslurm", _FakePyslurm(fail=message))
    result = PyslurmAdapter().update_job(5, {"Priority": "10"})
    assert (result.outcome, result.message) == (outcome, message)


def test_adapter_read_failure_is_a_slurm_error(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = _FakePyslurm()

    def down() -> None:
        raise ValueError("Unable to contact slurm controller (connect failure)", 1007)

    fake.job = lambda: types.SimpleNamespace(get=down)
    monkeypatch.setitem(sys.modules, "pyslurm", fake)
    with pytest.raises(SlurmError, match=r"pyslurm job\(\)\.get\(\) failed: .*connect failure"):
        PyslurmAdapter().read()


def test_auto_takes_pyslurm_only_when_it_can_write_every_configured_lever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rltuned.daemon.config import Settings
    from rltuned.daemon.service import make_adapter
    from rltuned.slurm.cli_backend import CliAdapter

    priority_only = {"oversubscribe": False, "steer_untyped": False}
    monkeypatch.setitem(sys.modules, "pyslurm", None)  # not installed: the commands
    assert isinstance(make_adapter(Settings(placement=priority_only)), CliAdapter)  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "pyslurm", _FakePyslurm())
    assert isinstance(make_adapter(Settings(placement=priority_only)), PyslurmAdapter)  # type: ignore[arg-type]
    assert isinstance(make_adapter(Settings()), CliAdapter)  # defaults steer and oversubscribe: commands
    with pytest.raises(ConfigError, match=r"placement\.oversubscribe = true"):
        make_adapter(Settings(slurm={"backend": "pyslurm"}))  # type: ignore[arg-type]
