"""The tick's rules on recorded Slurm output: shadow writes nothing, enforce makes Slurm's order the
plan's, failures are counted and survived, and the fallbacks take over."""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import numpy as np
import pytest
import structlog
import torch

from rltuned.daemon.config import Settings
from rltuned.daemon.engine import Engine
from rltuned.daemon.ledger import Ledger
from rltuned.rl.export import LoadedModel, export_actor, load_model
from rltuned.slurm.adapter import Outcome, UpdateResult
from rltuned.slurm.hostlist import expand
from tests.daemon.fakes import FakeAdapter
from tests.slurm import samples

MANAGED = {5, 6, 9, 11, 12, 13}  # the recorded lab's pending GPU jobs


def settings(**sections: dict[str, object]) -> Settings:
    return Settings(**sections)


def engine(adapter: FakeAdapter, tmp_path: Path, **sections: dict[str, object]) -> Engine:
    return Engine(settings(**sections), adapter, None, Ledger.in_dir(tmp_path))


def priorities(adapter: FakeAdapter) -> dict[int, int]:
    return {j["job_id"]: j["priority"] for j in adapter.squeue["jobs"] if j["job_state"] == "PENDING"}


def test_shadow_mode_writes_nothing_but_plans_everything(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    report = engine(adapter, tmp_path).tick("shadow")
    assert report.result == "ok"
    assert adapter.writes == []
    assert report.decision is not None
    assert {j.job_id for j in report.decision.plan.jobs} == MANAGED
    assert report.decision.plan.actions


def test_enforce_makes_slurms_order_the_plans_and_a_second_tick_writes_nothing(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = engine(
        adapter,
        tmp_path,
        apply={"mode": "enforce"},
        placement={"oversubscribe": False, "steer_untyped": False},
    )
    report = eng.tick()
    assert report.decision is not None
    plan_order = [j.job_id for j in report.decision.plan.jobs]
    now = priorities(adapter)
    assert sorted(plan_order, key=lambda j: -now[j]) == plan_order
    assert report.applied == {"priority:ok": len(MANAGED)}
    adapter.writes.clear()
    again = eng.tick()
    assert again.applied == {}
    assert adapter.writes == []


def test_exempt_partitions_and_held_jobs_are_never_written(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    adapter.squeue["jobs"][4]["partition"] = "sla"  # job 5
    adapter.squeue["jobs"][5]["priority"] = 0  # job 6: held
    eng = engine(adapter, tmp_path, apply={"mode": "enforce"}, slurm={"exempt_partitions": ["sla"]})
    report = eng.tick()
    touched = {job for job, _ in adapter.writes}
    assert touched and not touched & {5, 6}
    assert report.decision is not None
    assert report.decision.view.report.exempt_partition == 1
    assert report.decision.view.report.held == 1


def test_a_failed_scontrol_is_counted_logged_and_not_retried_within_the_tick(tmp_path: Path) -> None:
    calls: list[int] = []

    def refuse(job: int, fields: Mapping[str, str]) -> UpdateResult:
        calls.append(job)
        if job == 9:
            return UpdateResult(Outcome.DENIED, "Access/permission denied for job 9")
        if job == 13:
            return UpdateResult(Outcome.GONE, "Invalid job id specified")
        return UpdateResult(Outcome.OK)

    adapter = FakeAdapter(answer=refuse)
    report = engine(adapter, tmp_path, apply={"mode": "enforce"}, placement={"oversubscribe": False}).tick()
    assert calls.count(9) == 1 and calls.count(13) == 1
    assert report.applied["priority:denied"] == 1
    assert report.applied["priority:gone"] == 1
    assert report.summary()["actions_failed"] == 2


def test_unreadable_slurm_skips_the_tick(tmp_path: Path) -> None:
    adapter = FakeAdapter(fail_read="squeue timed out after 10 s (slurmctld unreachable?)")
    eng = engine(adapter, tmp_path, apply={"mode": "enforce"})
    report = eng.tick()
    assert report.result == "error" and "unreachable" in (report.error or "")
    assert adapter.writes == []
    assert eng.metrics.slurm_up._value.get() == 0


def test_garbage_job_records_are_skipped_and_counted_not_fatal(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    adapter.squeue["jobs"][4]["submit_time"] = "yesterday"
    adapter.squeue["jobs"].append({"job_id": "x"})
    report = engine(adapter, tmp_path).tick("shadow")
    assert report.result == "ok"
    assert report.decision is not None
    assert report.decision.view.report.skipped_malformed == 2


def test_a_bad_record_is_counted_every_tick_but_logged_once(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    adapter.squeue["jobs"].append({"job_id": "x"})
    eng = engine(adapter, tmp_path)
    with structlog.testing.capture_logs() as logs:
        eng.tick("shadow")
        eng.tick("shadow")
    assert [e["event"] for e in logs].count("slurm_records_skipped") == 1
    assert eng.metrics.malformed._value.get() == 2


class _Broken:
    """A model whose forward pass raises, as a corrupt or incompatible TorchScript would at run time."""

    manifest: ClassVar[dict[str, object]] = {}
    path = Path("broken")
    runtime_input = "limit"

    def score_rows(self, actor: np.ndarray, mask: np.ndarray) -> np.ndarray:
        raise RuntimeError("The following operation failed in the TorchScript interpreter")


def test_a_broken_model_falls_back_to_the_base_policy_for_the_tick(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = engine(adapter, tmp_path)
    eng.model = _Broken()  # type: ignore[assignment]
    report = eng.tick("shadow")
    assert report.decision is not None
    assert report.decision.ranking.source == "base"
    assert "model failed" in (report.decision.ranking.fallback or "")
    assert eng.metrics.fallbacks.labels("model_error")._value.get() == 1


def test_a_solver_timeout_falls_back_to_greedy_pack(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    for job in adapter.squeue["jobs"]:  # free the cluster so the top jobs can be placed
        if job["job_state"] == "RUNNING":
            job["job_state"] = "COMPLETED"
    for node in adapter.sinfo["nodes"]:
        gpu_type = node["gres"].rsplit(":", 1)[0]  # gpu:p100:4 -> gpu:p100
        node["gres_used"] = f"{gpu_type}:0(IDX:N/A)"
        node["alloc_cpus"] = 0
    report = engine(adapter, tmp_path, placement={"time_limit_ms": 0}).tick("shadow")
    assert report.decision is not None
    assert report.decision.placements.outcome == "fallback"
    assert report.decision.placements.by_job


def test_reset_restores_multifactor_with_hold_and_release(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = engine(adapter, tmp_path, apply={"mode": "enforce"}, placement={"oversubscribe": False})
    eng.tick()
    assert len(eng.ledger) == len(MANAGED)
    adapter.writes.clear()
    counts = Engine(
        settings(), adapter, None, Ledger.in_dir(tmp_path)
    ).reset()  # a new process: ledger on disk
    assert counts == {"priority:ok": len(MANAGED)}
    assert [w for _, w in adapter.writes] == [{"hold": ""}, {"release": ""}] * len(MANAGED)
    assert len(Ledger.in_dir(tmp_path)) == 0


class _LateWrite(FakeAdapter):
    """A priority write that slurmctld applies after reset's release of job 6 (its daemon died with the
    RPC queued): the release gives back multifactor's value, then the late write lands."""

    late: dict[int, int] = {}  # noqa: RUF012 - set once per test

    def release(self, job_id: int) -> UpdateResult:
        result = super().release(job_id)
        if job_id in self.late:
            for job in self.squeue["jobs"]:
                if job["job_id"] == job_id:
                    job["priority"] = self.late.pop(job_id)
        return result


def test_reset_undoes_a_write_that_lands_after_its_release(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("rltuned.daemon.engine.RESET_SETTLE_S", 0.0)
    adapter = _LateWrite()
    eng = engine(adapter, tmp_path, apply={"mode": "enforce"}, placement={"oversubscribe": False})
    eng.tick()
    written = eng.ledger.get(6).priority
    assert written is not None
    adapter.late = {6: written}
    counts = Engine(settings(), adapter, None, Ledger.in_dir(tmp_path)).reset()
    assert counts["priority:straggler"] == 1
    assert priorities(adapter) == {j: adapter.own_priority[j] for j in priorities(adapter)}
    assert len(Ledger.in_dir(tmp_path)) == 0


@pytest.mark.parametrize("lever", ["site_factor"])
def test_site_factor_lever_writes_bounded_non_negative_factors(tmp_path: Path, lever: str) -> None:
    adapter = FakeAdapter()
    report = engine(
        adapter, tmp_path, apply={"mode": "enforce", "lever": lever, "site_factor_max": 600}
    ).tick()
    values = [int(f["SiteFactor"]) for _, f in adapter.writes if "SiteFactor" in f]
    assert len(values) == len(MANAGED)
    assert max(values) == 600 and min(values) > 0
    assert report.decision is not None
    order = [j.job_id for j in report.decision.plan.jobs]
    by_job = {job: int(f["SiteFactor"]) for job, f in adapter.writes if "SiteFactor" in f}
    assert [by_job[j] for j in order] == sorted(by_job.values(), reverse=True)


def test_a_working_model_ranks_by_its_scores(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = engine(adapter, tmp_path)

    class _Reversing:
        manifest: ClassVar[dict[str, object]] = {}
        path = Path("last")
        runtime_input = "limit"

        def score_rows(self, actor: np.ndarray, mask: np.ndarray) -> np.ndarray:
            return np.arange(256, dtype=np.float64)  # higher for later rows: the base order reversed

    eng.model = _Reversing()  # type: ignore[assignment]
    report = eng.tick("shadow")
    assert report.decision is not None
    ranks = [(j.rank, j.base_rank) for j in report.decision.plan.jobs]
    n = len(ranks)
    assert all(rank == n - 1 - base for rank, base in ranks)


def _free_everything(adapter: FakeAdapter) -> None:
    for job in adapter.squeue["jobs"]:
        if job["job_state"] == "RUNNING":
            job["job_state"] = "COMPLETED"
    for node in adapter.sinfo["nodes"]:
        node["gres_used"] = node["gres"].rsplit(":", 1)[0] + ":0(IDX:N/A)"
        node["alloc_cpus"] = 0


def test_an_untyped_job_is_steered_with_excnodelist_and_never_given_a_gpu_type(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    _free_everything(adapter)
    adapter.squeue["jobs"][11]["required_nodes"] = ""  # job 12 (gres:gpu:2), no longer pinned by its user
    report = engine(adapter, tmp_path, apply={"mode": "enforce"}).tick()
    assert report.decision is not None
    placed = report.decision.placements.by_job[12]
    excluded = [f["ExcNodeList"] for job, f in adapter.writes if job == 12 and "ExcNodeList" in f]
    assert len(excluded) == 1
    others = {n.name for n in report.decision.view.snapshot.cluster.nodes if n.gpu_type != placed.gpu_type}
    assert set(expand(excluded[0])) == others
    never = ("Gres", "TresPerNode", "NodeList", "ReqNodeList")
    assert not any(key in f for _, f in adapter.writes for key in never)
    written = {job for job, f in adapter.writes if "OverSubscribe" in f}
    assert written == set(report.decision.placements.by_job)


def test_a_placement_lever_is_not_written_once_the_job_started(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    _free_everything(adapter)
    adapter.squeue["jobs"][11]["required_nodes"] = ""
    adapter.states = {12: "RUNNING"}  # started between the read and the write
    report = engine(adapter, tmp_path, apply={"mode": "enforce"}).tick()
    assert not any(job == 12 and ("ExcNodeList" in f or "OverSubscribe" in f) for job, f in adapter.writes)
    assert report.applied.get("excluded_nodes:gone") == 1


def test_a_user_pinned_job_is_not_steered(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    _free_everything(adapter)  # job 12 keeps its ReqNodeList=p100-2
    engine(adapter, tmp_path, apply={"mode": "enforce"}).tick()
    assert not any(job == 12 and "ExcNodeList" in f for job, f in adapter.writes)


def test_a_slow_model_is_not_trusted_for_the_tick(tmp_path: Path) -> None:
    class _Slow:
        manifest: ClassVar[dict[str, object]] = {}
        path = Path("slow")
        runtime_input = "limit"

        def score_rows(self, actor: np.ndarray, mask: np.ndarray) -> np.ndarray:
            time.sleep(0.05)
            return np.zeros(256)

    eng = engine(FakeAdapter(), tmp_path, policy={"max_inference_ms": 10})
    eng.model = _Slow()  # type: ignore[assignment]
    report = eng.tick("shadow")
    assert report.decision is not None
    assert report.decision.ranking.source == "base"
    assert (report.decision.ranking.fallback or "").startswith("model too slow")
    assert eng.metrics.fallbacks.labels("model_slow")._value.get() == 1


def test_writes_stop_for_the_tick_once_slurmctld_stops_answering(tmp_path: Path) -> None:
    def timeout(job: int, fields: Mapping[str, str]) -> UpdateResult:
        return UpdateResult(Outcome.ERROR, "scontrol timed out after 10 s (slurmctld unreachable?)")

    adapter = FakeAdapter(answer=timeout)
    report = engine(adapter, tmp_path, apply={"mode": "enforce"}, placement={"oversubscribe": False}).tick()
    assert report.applied == {"priority:error": 1, "skipped:unreachable": len(MANAGED) - 1}


def test_a_steered_job_that_did_not_start_is_freed_on_the_next_tick(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    _free_everything(adapter)
    adapter.squeue["jobs"][11]["required_nodes"] = ""
    eng = engine(adapter, tmp_path, apply={"mode": "enforce"})
    eng.tick()
    assert eng.ledger.get(12).excluded_nodes
    for node in adapter.sinfo["nodes"]:  # the cluster fills up before job 12 starts: nothing is placed
        node["gres_used"] = node["gres"] + "(IDX:0)"
    adapter.writes.clear()
    eng.tick()
    assert (12, {"ExcNodeList": ""}) in adapter.writes
    assert eng.ledger.get(12).excluded_nodes is None


def test_nothing_is_written_that_the_ledger_could_not_record_and_the_tick_goes_on(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    adapter = FakeAdapter()
    eng = engine(adapter, tmp_path / "file", apply={"mode": "enforce"})  # state_dir under a plain file
    report = eng.tick()
    assert report.result == "ok" and not adapter.writes  # reset could not undo them: none are sent
    assert report.applied == {"skipped:ledger": len(MANAGED)}
    assert eng.metrics.fallbacks.labels("ledger_unsaved")._value.get() >= 1


def test_history_is_read_for_a_base_that_needs_it_on_its_interval_and_kept_when_a_read_fails(
    tmp_path: Path,
) -> None:
    from rltuned.slurm.adapter import HistoryRead

    sshare = "Account|User|GrpTRESRaw\na||gres/gpu=2\na|u|gres/gpu=2\n"
    adapter = FakeAdapter(
        history=HistoryRead(sshare, "User|Account|ElapsedRaw|State|AllocTRES|End\nu|a|60|COMPLETED||\n")
    )
    eng = engine(adapter, tmp_path, policy={"base": "multifactor"}, slurm={"history_lookback_days": 1.0})
    assert eng.read().snapshot.history.usage == {"a": 120.0}
    assert adapter.history_asked == [samples.NOW - 86400.0]
    eng.read()
    assert len(adapter.history_asked) == 1  # not again within history_interval_s
    eng.history_at -= 301.0
    adapter.fail_history = "sshare: Problem talking to the database"
    assert eng.read().snapshot.history.usage == {"a": 120.0}  # the last history stays
    assert eng.metrics.fallbacks.labels("history")._value.get() == 1


def test_history_is_not_read_for_a_base_that_does_not_need_it(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = engine(adapter, tmp_path, policy={"base": "sjf"})
    eng.read()
    assert adapter.history_asked == []


def quiet_engine(adapter: FakeAdapter, tmp_path: Path, **apply: object) -> Engine:
    """Enforce mode with quiet ticks (refresh_s = 600 s), priorities only."""
    return engine(
        adapter,
        tmp_path,
        apply={"mode": "enforce", **apply},
        policy={"refresh_s": 600.0},
        placement={"oversubscribe": False, "steer_untyped": False},
    )


def test_with_refresh_s_a_tick_where_nothing_changed_decides_nothing_until_it_must(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = quiet_engine(adapter, tmp_path)
    assert eng.tick().result == "ok"
    adapter.writes.clear()
    adapter.now += 60.0
    quiet = eng.tick()
    assert quiet.result == "quiet" and quiet.decision is None and adapter.writes == []
    assert quiet.summary()["result"] == "quiet" and quiet.summary()["pending"] == len(MANAGED)
    assert eng.metrics.ticks.labels("quiet")._value.get() == 1
    assert eng.tick("shadow").result == "ok"  # another mode: decide
    assert eng.tick("enforce").result == "ok"  # and back
    adapter.now += 60.0
    assert eng.tick().result == "quiet"
    adapter.squeue["jobs"] = [j for j in adapter.squeue["jobs"] if j["job_id"] != 5]  # job 5 left
    assert eng.tick().result == "ok"
    adapter.now += 60.0
    assert eng.tick().result == "quiet"
    adapter.now += 600.0
    assert eng.tick().result == "ok"  # refresh_s passed: aging and the guard get their turn
    eng.reset()
    assert eng.tick().result == "ok"  # reset gave Slurm its own priorities back: decide again


def test_a_plan_written_only_in_part_is_decided_again_at_the_next_tick(tmp_path: Path) -> None:
    adapter = FakeAdapter(answer=lambda job, fields: UpdateResult(Outcome.ERROR, "slurmctld busy"))
    eng = quiet_engine(adapter, tmp_path)
    assert eng.tick().result == "ok"
    adapter.now += 60.0
    assert eng.tick().result == "ok"  # the failed writes are work left: not quiet


def test_a_quiet_engine_decides_again_after_a_model_swap_a_capped_plan_or_an_outside_priority_change(
    tmp_path: Path,
) -> None:
    class Zeros(torch.nn.Module):
        def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
            return torch.zeros(mask.shape)

    def model(name: str) -> LoadedModel:
        return load_model(export_actor(Zeros(), tmp_path / name, {"base": "fcfs", "seed": 0}))

    adapter = FakeAdapter()
    eng = quiet_engine(adapter, tmp_path)
    assert [eng.tick().result, eng.tick().result] == ["ok", "quiet"]
    eng.model = model("a")
    assert [eng.tick().result, eng.tick().result] == ["ok", "quiet"]
    eng.model = model("b")  # another object, whatever address it lands at
    assert eng.tick().result == "ok"
    job = next(j for j in adapter.squeue["jobs"] if j["job_id"] == 5)
    job["priority"] += 1000  # an admin's `scontrol update priority=` on a job rltuned ranks
    assert eng.tick().result == "ok"
    assert eng.tick().result == "quiet"

    capped = quiet_engine(FakeAdapter(), tmp_path / "capped", max_actions=2)
    assert [capped.tick().result, capped.tick().result] == ["ok", "ok"]  # 6 writes, 2 a tick: work is left
    assert capped.tick().result == "ok"
    assert capped.tick().result == "quiet"  # all 6 written
