"""Undo that always works: every write is in the ledger before it is sent, a crash loses nothing, reset
restores every lever on every job still pending, and a corrupt ledger stops nothing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import structlog

from rltuned.core.levers import Action
from rltuned.daemon import engine as engine_module
from rltuned.daemon.config import Settings
from rltuned.daemon.engine import Engine
from rltuned.daemon.ledger import LEDGER_FILE, WAL_FILE, Ledger
from rltuned.slurm.adapter import Outcome, UpdateResult
from tests.daemon.fakes import FakeAdapter

PRIORITY = Action(5, "priority", (("Priority", "9000"),), 9000)
OVERSUBSCRIBE = Action(11, "oversubscribe", (("OverSubscribe", "no"),), False, needs_pending=True)


def _enforcing(adapter: FakeAdapter, state: Path, **apply: object) -> Engine:
    settings = Settings(apply={"mode": "enforce", **apply}, placement={"steer_untyped": False})  # type: ignore[arg-type]
    return Engine(settings, adapter, None, Ledger.in_dir(state))


def test_an_update_sent_without_an_outcome_counts_as_written_after_a_crash(tmp_path: Path) -> None:
    ledger = Ledger.in_dir(tmp_path)
    ledger.intend(PRIORITY)  # ... and the process dies before scontrol answers
    assert Ledger.in_dir(tmp_path).get(5).priority == 9000


@pytest.mark.parametrize(
    ("outcome", "kept"), [("ok", True), ("error", True), ("denied", False), ("gone", False)]
)
def test_outcomes_that_may_have_landed_are_kept(tmp_path: Path, outcome: str, kept: bool) -> None:
    ledger = Ledger.in_dir(tmp_path)
    ledger.settle(ledger.intend(PRIORITY), PRIORITY, outcome)  # a timeout ("error") may still have landed
    assert (ledger.get(5).priority == 9000) is kept
    assert (Ledger.in_dir(tmp_path).get(5).priority == 9000) is kept  # the same after a restart


def test_a_torn_last_line_is_the_crash_itself_and_is_ignored(tmp_path: Path) -> None:
    ledger = Ledger.in_dir(tmp_path)
    ledger.settle(ledger.intend(PRIORITY), PRIORITY, "ok")
    with open(tmp_path / WAL_FILE, "a") as wal:
        wal.write('{"job": 6, "ki')
    again = Ledger.in_dir(tmp_path)
    assert again.get(5).priority == 9000 and again.unaccounted is None


def test_saving_compacts_the_log_and_keeps_the_guard_clock(tmp_path: Path) -> None:
    ledger = Ledger.in_dir(tmp_path)
    ledger.settle(ledger.intend(OVERSUBSCRIBE, restore="yes"), OVERSUBSCRIBE, "ok")
    ledger.displaced_since = {11: 123.0}
    ledger.save()
    assert (tmp_path / WAL_FILE).read_text() == ""
    again = Ledger.in_dir(tmp_path)
    assert again.get(11).oversubscribe is False and again.get(11).oversubscribe_before == "yes"
    assert again.displaced_since == {11: 123.0}


def test_a_version_1_ledger_still_loads(tmp_path: Path) -> None:
    body = {"version": 1, "jobs": {"5": {"priority": 7000, "site_factor": None, "oversubscribe": None,
                                         "excluded_nodes": None}}}  # fmt: skip
    (tmp_path / LEDGER_FILE).write_text(json.dumps(body))
    ledger = Ledger.in_dir(tmp_path)
    assert ledger.get(5).priority == 7000 and ledger.owned_priorities() == {5: 7000}
    ledger.forget_lever(5, "priority")  # what reset does once the priority is undone
    assert ledger.owned_priorities() == {} and len(ledger) == 0


def test_a_corrupt_ledger_is_moved_aside_and_reset_undoes_what_slurm_shows_in_band(tmp_path: Path) -> None:
    (tmp_path / LEDGER_FILE).write_text("{not json")
    ledger = Ledger.in_dir(tmp_path)
    assert ledger.moved_aside is not None and ledger.moved_aside.name.startswith(f"{LEDGER_FILE}.corrupt-")
    assert ledger.moved_aside.read_text() == "{not json" and not (tmp_path / LEDGER_FILE).exists()
    assert ledger.unaccounted and str(ledger.moved_aside) in ledger.unaccounted
    adapter = FakeAdapter()
    for job in adapter.squeue["jobs"]:
        if job["job_id"] == 9:
            job["priority"] = 50  # below the band: not rltuned's
    eng = Engine(Settings(apply={"priority_min": 1000}), adapter, None, ledger)  # type: ignore[arg-type]
    counts = eng.reset()
    released = {job for job, fields in adapter.writes if "release" in fields}
    assert released == {5, 6, 11, 12, 13}  # every pending job in [priority_min, priority_max], not 9
    assert counts["from_slurm"] == 5 and counts["priority:ok"] == 5
    assert eng.ledger.unaccounted is None  # undone: the marker is cleared ...
    assert Ledger.in_dir(tmp_path).unaccounted is None  # ... on disk too


def test_the_lost_marker_survives_a_restart_until_a_reset_clears_it(tmp_path: Path) -> None:
    (tmp_path / LEDGER_FILE).write_text("[]")
    Ledger.in_dir(tmp_path).save()
    assert Ledger.in_dir(tmp_path).unaccounted


def test_reset_restores_oversubscribe_and_undoes_jobs_that_became_exempt(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    adapter.squeue["jobs"][10]["shared"] = "shared"  # job 11 had OverSubscribe=yes of its own
    eng = _enforcing(adapter, tmp_path)
    ledger = eng.ledger
    for action, restore in ((OVERSUBSCRIBE, "yes"), (PRIORITY, None)):
        ledger.settle(ledger.intend(action, restore), action, "ok")
    ledger.save()
    adapter.writes.clear()
    # Job 5's partition is exempt now: it is no longer managed, but what rltuned wrote on it is undone.
    settings = Settings(slurm={"exempt_partitions": ("main",)})  # type: ignore[arg-type]
    counts = Engine(settings, adapter, None, Ledger.in_dir(tmp_path)).reset()
    assert (11, {"OverSubscribe": "yes"}) in adapter.writes
    assert (5, {"hold": ""}) in adapter.writes and (5, {"release": ""}) in adapter.writes
    assert counts == {"oversubscribe:ok": 1, "priority:ok": 1}
    assert len(Ledger.in_dir(tmp_path)) == 0


def test_a_failed_undo_is_logged_with_slurms_words_and_kept_for_the_next_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`reset_incomplete` names the jobs; why each failed is Slurm's message, logged per job."""
    adapter = FakeAdapter()
    eng = _enforcing(adapter, tmp_path)
    eng.ledger.settle(eng.ledger.intend(PRIORITY), PRIORITY, "ok")
    refused = UpdateResult(Outcome.ERROR, "slurm_hold error: Socket timed out on send/recv operation")
    monkeypatch.setattr(adapter, "hold", lambda job_id: refused)
    with structlog.testing.capture_logs() as logs:
        counts = eng.reset()
    assert counts == {"priority:error": 1}
    failed = [e for e in logs if e["event"] == "undo_failed"]
    assert failed == [
        {
            "event": "undo_failed",
            "log_level": "warning",
            "jobid": 5,
            "action": "priority",
            "result": "error",
            "stderr": refused.message,
        }
    ]
    assert [e["jobs"] for e in logs if e["event"] == "reset_incomplete"] == [[5]]
    assert Ledger.in_dir(tmp_path).get(5).priority == 9000  # kept for the next reset


def test_a_hold_that_timed_out_is_released_by_the_next_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A hold whose scontrol timed out may still land after reset gave up (a CI run after a slurmctld
    restart): the job then shows JobHeldAdmin, which without a record would read as an admin's own hold
    and be left held for good. The ledger records it as held, so the next reset releases it."""
    adapter = FakeAdapter()
    eng = _enforcing(adapter, tmp_path)
    eng.ledger.settle(eng.ledger.intend(PRIORITY), PRIORITY, "ok")
    late = UpdateResult(Outcome.ERROR, "scontrol timed out after 3 s (slurmctld unreachable?)")

    def hold_lands_late(job_id: int) -> UpdateResult:
        for job in adapter.squeue["jobs"]:
            if job["job_id"] == job_id:
                job.update(priority=0, state_reason="JobHeldAdmin")  # what Slurm shows once it lands
        return late

    monkeypatch.setattr(adapter, "hold", hold_lands_late)
    assert eng.reset() == {"priority:error": 1}
    assert Ledger.in_dir(tmp_path).get(5).held
    monkeypatch.undo()
    adapter.writes.clear()
    assert eng.reset() == {"priority:ok": 1}
    assert adapter.writes == [(5, {"release": ""})]
    assert len(Ledger.in_dir(tmp_path)) == 0


def test_a_failed_release_is_retried_reported_and_finished_by_the_next_reset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(engine_module, "RELEASE_RETRIES", (0.0, 0.0))
    adapter = FakeAdapter()
    eng = _enforcing(adapter, tmp_path)
    eng.ledger.settle(eng.ledger.intend(PRIORITY), PRIORITY, "ok")
    calls: list[int] = []

    def refuse(job_id: int) -> UpdateResult:
        calls.append(job_id)
        return UpdateResult(Outcome.ERROR, "slurm_update error: Socket timed out")

    monkeypatch.setattr(adapter, "release", refuse)
    counts = eng.reset()
    assert calls == [5, 5] and counts == {"priority:release_failed": 1}
    left = Ledger.in_dir(tmp_path).get(5)
    assert left.priority == 9000 and left.held  # remembered as held by rltuned
    monkeypatch.undo()
    adapter.writes.clear()
    for job in adapter.squeue["jobs"]:
        if job["job_id"] == 5:
            job.update(priority=0, state_reason="JobHeldAdmin")  # what Slurm shows for it now
    counts = Engine(Settings(), adapter, None, Ledger.in_dir(tmp_path)).reset()
    assert adapter.writes == [(5, {"release": ""})]  # released, not held again
    assert counts == {"priority:ok": 1} and len(Ledger.in_dir(tmp_path)) == 0


def test_a_job_its_user_held_is_left_held(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    eng = _enforcing(adapter, tmp_path)
    eng.ledger.settle(eng.ledger.intend(PRIORITY), PRIORITY, "ok")
    for job in adapter.squeue["jobs"]:
        if job["job_id"] == 5:
            job.update(priority=0, state_reason="JobHeldUser")
    assert eng.reset() == {"priority:held": 1}
    assert adapter.writes == [] and len(eng.ledger) == 0


def test_every_update_is_logged_before_it_is_sent(tmp_path: Path) -> None:
    adapter = FakeAdapter()
    seen: list[int] = []

    def answer(job_id: int, fields: object) -> UpdateResult:
        entries = [json.loads(line) for line in (tmp_path / WAL_FILE).read_text().splitlines()]
        assert entries[-1]["job"] == job_id and "outcome" not in entries[-1]  # the intent, already on disk
        seen.append(job_id)
        return UpdateResult(Outcome.OK)

    adapter.answer = answer
    report = _enforcing(adapter, tmp_path, writes_per_s=0).tick()
    assert seen and report.applied.get("priority:ok") == len(seen)
    assert (tmp_path / WAL_FILE).read_text() == ""  # compacted at the end of the tick
    assert {j for j, _ in Ledger.in_dir(tmp_path).items()} == set(seen)
