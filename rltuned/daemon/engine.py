"""One tick, start to end: snapshot -> features -> policy -> ranking -> MILP -> plan -> apply.

The engine owns the adapter, the serving model, the base policy and the ledger; it does not loop, sleep
or handle signals (`service.py` does). Every expected failure is turned into a report field, a metric
and one log event, and the tick goes on with the fallback: an unreadable Slurm skips the tick, a broken
model gives the base order, a failed solve gives greedy pack, a failed `scontrol` is counted and left
for the next tick. Applying starts only when the whole plan is known and, once started, finishes: a
stop request before it abandons the tick with nothing written.
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from rltuned.core import Action, Change, Placements, Plan, Ranking, decide
from rltuned.core.inputs import reads_history
from rltuned.core.levers import HOLD_RELEASE, LEVERS
from rltuned.core.quiet import due, remember
from rltuned.daemon.config import Settings
from rltuned.daemon.ledger import Ledger
from rltuned.daemon.logs import get_logger
from rltuned.daemon.metrics import Metrics
from rltuned.daemon.pacing import Pacer
from rltuned.domain import ClusterSnapshot, History, Job, RunningJob
from rltuned.errors import SlurmError
from rltuned.policies import make_policy
from rltuned.rl.export import LoadedModel
from rltuned.slurm.adapter import Outcome, SlurmAdapter, UpdateResult
from rltuned.slurm.history import history_from_slurm
from rltuned.slurm.parse import SlurmJobInfo, SlurmView, read_view


@dataclass(frozen=True)
class Decision:
    """Everything a tick decided before writing; also what `plan` and `explain` show."""

    view: SlurmView
    ranking: Ranking
    placements: Placements
    plan: Plan
    stages: Mapping[str, float]
    displaced_since: Mapping[int, float] = field(default_factory=dict)
    """The starvation guard's clock after this tick (committed to the ledger when the tick completes)."""
    guard_deadline: float = math.inf
    """When the guard would next promote a job this ranking pushes down (`core/quiet.py` waits no longer)."""


@dataclass(frozen=True)
class TickReport:
    tick: int
    mode: str
    result: str
    """"ok", "quiet" (nothing changed since the last decision: nothing decided, `core/quiet.py`), "error"
    (Slurm unreadable: skipped) or "abandoned" (stop requested before applying)."""
    error: str | None = None
    decision: Decision | None = None
    applied: Mapping[str, int] = field(default_factory=dict)
    """Counts by "<kind>:<outcome>" of the updates sent (empty in shadow mode)."""
    stages: Mapping[str, float] = field(default_factory=dict)
    queue: tuple[int, int] | None = None
    """Pending and running jobs as read, on a quiet tick (which has no decision to report them)."""

    def summary(self) -> dict[str, Any]:
        """The canonical per-tick log line's fields."""
        out: dict[str, Any] = {"tick": self.tick, "mode": self.mode, "result": self.result}
        if self.error:
            out["error"] = self.error
        if self.queue is not None:
            out["pending"], out["running"] = self.queue
        d = self.decision
        if d is not None:
            report = d.view.report
            out |= {
                "pending": report.pending,
                "running": report.running,
                "managed": len(d.plan.jobs),
                "exempt": sum(report.left_alone.values()),
                "left_alone": {k: v for k, v in report.left_alone.items() if v},
                "skipped_malformed": report.skipped_malformed,
                "ranked_by": d.ranking.source,
                "fallback": d.ranking.fallback,
                "guarded": _count_reasons(d.ranking.guarded),
                "solver": d.placements.outcome,
                "placed": len(d.placements.by_job),
                "planned_actions": len(d.plan.actions),
                "capped_actions": d.plan.capped,
            }
        ok = sum(n for key, n in self.applied.items() if key.endswith(":ok"))
        out["actions_applied"] = ok
        out["actions_failed"] = sum(self.applied.values()) - ok
        out["latency_ms"] = {k: round(v * 1000.0, 2) for k, v in self.stages.items()}
        return out


class Engine:
    def __init__(
        self,
        settings: Settings,
        adapter: SlurmAdapter,
        model: LoadedModel | None,
        ledger: Ledger,
        metrics: Metrics | None = None,
    ) -> None:
        self.settings = settings
        self.adapter = adapter
        self.model = model
        self.ledger = ledger
        self.metrics = metrics or Metrics()
        self.log = get_logger()
        self.ticks = 0
        self.model_problem: str | None = None
        """Why the configured model is not serving (load failure at start-up), reported each tick."""
        self.last: TickReport | None = None
        self.last_error = ""
        """The last update's error message, when it failed as ERROR (a timeout means slurmctld is gone)."""
        self.progress_at = time.monotonic()
        """When the current tick last moved (read, decision, an action sent): the watchdog's clock."""
        self.logged_problems: set[str] = set()
        """Malformed-record problems already logged: the last tick's, so the set stays small."""
        self.queue_ids: set[int] = set()
        """Every job id in the last read, managed or not."""
        a = settings.apply
        self.pacer = Pacer(a.writes_per_s, a.write_burst)
        self.denied_ticks = 0
        """Ticks in a row in which every write was refused for permissions."""
        self.history = History()
        """Slurm's accounting as last read (`read_history`); kept when a read fails."""
        self.history_at = -math.inf
        """When the accounting was last asked for (monotonic seconds), read or failed."""
        self.last_decided: Decision | None = None
        """The last tick's decision that was made (quiet ticks make none)."""
        self.decided_as: tuple[str, LoadedModel | None, Settings] | None = None
        """The mode, model and settings of the last decision: a tick with others (a mode switch, a model
        or config reload) or after a reset, which clears it, always decides."""

    @property
    def base(self) -> str:
        return self.settings.policy.base

    # --- deciding -----------------------------------------------------------------------------------

    def read(self) -> SlurmView:
        read = self.adapter.read()
        self.queue_ids = set(_queue_jobs(read.squeue))
        for command, seconds in read.durations.items():
            self.metrics.slurm_command.labels(command).observe(seconds)
        s = self.settings.slurm
        view = read_view(
            read.squeue,
            read.sinfo,
            read.now,
            read.scontrol_nodes,
            s.exempt_partitions,
            s.exempt_qos,
            s.cluster_name,
            s.slots,
        )
        snapshot = _with_time_limits(view.snapshot, self.settings.policy.default_time_limit_min)
        return replace(view, snapshot=replace(snapshot, history=self.read_history(read.now)))

    def read_history(self, now: float) -> History:
        """Fair-share usage and past runtimes for a base policy that reads them, every
        `slurm.history_interval_s`; a failed read is logged and counted, and the last history stays."""
        s = self.settings.slurm
        if not s.history_interval_s or not reads_history(self.base):
            return self.history
        clock = time.monotonic()
        if clock - self.history_at < s.history_interval_s:
            return self.history
        self.history_at = clock
        try:
            read = self.adapter.read_history(now - s.history_lookback_days * 86400.0)
            self.history = history_from_slurm(read.sshare, read.sacct, s.slots)
        except SlurmError as exc:
            self.metrics.fallbacks.labels("history").inc()
            self.log.warning("history_failed", error=str(exc), kept_accounts=len(self.history.usage))
            return self.history
        for command, seconds in read.durations.items():
            self.metrics.slurm_command.labels(command).observe(seconds)
        return self.history

    def decide(self, view: SlurmView) -> Decision:
        core = decide(
            view.snapshot,
            make_policy(self.base),
            self.model,
            self.settings.core(),
            self.ledger,
            view.info,
        )
        ranking = core.ranking
        if self.model is None and self.model_problem and ranking.fallback is None:
            ranking = replace(ranking, fallback=self.model_problem)
        stages = {
            "features": ranking.features_s,
            "policy": ranking.policy_s,
            "solver": core.placements.seconds,
        }
        return Decision(
            view, ranking, core.placements, core.plan, stages, core.displaced_since, core.guard_deadline
        )

    def _same_as_decided(self, mode: str) -> bool:
        """The last decision was made in this mode, by this model object and these settings."""
        if self.decided_as is None:
            return False
        decided_mode, model, settings = self.decided_as
        return decided_mode == mode and model is self.model and settings is self.settings

    # --- one tick -----------------------------------------------------------------------------------

    def tick(self, mode: str | None = None, stop_requested: Callable[[], bool] = lambda: False) -> TickReport:
        self.ticks += 1
        mode = mode or self.settings.apply.mode
        self.metrics.set_mode(mode)
        started = time.perf_counter()
        try:
            view = self.read()
        except SlurmError as exc:
            return self._finish(TickReport(self.ticks, mode, "error", str(exc)), started, slurm_up=False)
        snapshot_s = time.perf_counter() - started
        self.progress_at = time.monotonic()
        self.ledger.keep_only(self.queue_ids)
        core = self.settings.core()
        if self._same_as_decided(mode) and not due(view.snapshot, core.refresh_s, self.ledger):
            queue = (view.report.pending, view.report.running)
            report = TickReport(self.ticks, mode, "quiet", stages={"snapshot": snapshot_s}, queue=queue)
            return self._finish(report, started)
        decision = self.decide(view)
        self.last_decided, self.decided_as = decision, None
        self.progress_at = time.monotonic()
        self._observe(decision)
        stages = {"snapshot": snapshot_s, **decision.stages}
        if stop_requested():
            return self._finish(
                TickReport(self.ticks, mode, "abandoned", None, decision, {}, stages), started
            )
        self.ledger.displaced_since = decision.displaced_since
        applied: dict[str, int] = {}
        if mode == "enforce":
            t0 = time.perf_counter()
            applied = self.apply(decision.plan, decision.view.info)
            stages["apply"] = time.perf_counter() - t0
        if core.refresh_s > 0:  # shadow mode writes nothing, and its plan is as settled as it will get
            ok = sum(n for key, n in applied.items() if key.endswith((":ok", ":gone", ":held")))
            whole = mode != "enforce" or ok == len(decision.plan.actions)
            self.ledger.last_decision = remember(decision, view.snapshot, whole, core.refresh_s)
            self.decided_as = (mode, self.model, self.settings)
        reachable = "skipped:unreachable" not in applied
        report = TickReport(self.ticks, mode, "ok", None, decision, applied, stages)
        return self._finish(report, started, slurm_up=reachable)

    def apply(self, plan: Plan, plan_info: Mapping[int, SlurmJobInfo] | None = None) -> dict[str, int]:
        """Send the plan's updates in order, each logged to the ledger before it is sent (`ledger.py`);
        each failure is logged with Slurm's message and counted. `plan_info` (the tick's read) gives the
        OverSubscribe value to restore on reset."""
        plan_info = plan_info or {}
        counts: Counter[str] = Counter()
        self.last_error = ""
        # Writes may use half the interval: the rest is the next tick's, which plans again anyway.
        deadline = time.monotonic() + self.settings.daemon.interval_s / 2
        for done, action in enumerate(plan.actions):
            self.progress_at = time.monotonic()
            if not self.pacer.take(deadline):
                left = len(plan.actions) - done
                counts["deferred:paced"] += left
                self.metrics.actions.labels("any", "deferred").inc(left)
                self.log.warning("apply_paced", deferred=left, writes_per_s=self.settings.apply.writes_per_s)
                break
            if done and _unreachable(self.last_error):
                left = len(plan.actions) - done  # slurmctld stopped answering: the next tick retries
                counts["skipped:unreachable"] += left
                self.metrics.actions.labels("any", "skipped").inc(left)
                self.log.error("apply_stopped", reason=self.last_error, skipped=left)
                break
            if action.needs_pending:
                state = self.adapter.job_state(action.job_id)
                if state != "PENDING":
                    self._count(counts, action.kind, Outcome.GONE)
                    continue
            try:  # write-ahead: never send what the ledger could not record, so reset can always undo
                seq = self.ledger.intend(action, _restore_word(action, plan_info.get(action.job_id)))
            except OSError as exc:
                left = len(plan.actions) - done
                counts["skipped:ledger"] += left
                self.metrics.fallbacks.labels("ledger_unsaved").inc()
                self.log.error("apply_stopped", reason=f"ledger unwritable: {exc}", skipped=left)
                break
            result = self.adapter.update_job(action.job_id, dict(action.fields))
            self._count(counts, action.kind, result.outcome)
            self.last_error = result.message if result.outcome == Outcome.ERROR else ""
            try:
                self.ledger.settle(seq, action, result.outcome.value)
            except OSError as exc:  # the intent is durable: a restart counts the write as landed
                self.metrics.fallbacks.labels("ledger_unsaved").inc()
                self.log.error("ledger_save_failed", path=str(self.ledger.path), error=str(exc))
            if result.outcome == Outcome.OK:
                self.log.info(
                    "job_updated", jobid=action.job_id, action=action.kind, value=action.value, mode="enforce"
                )
            else:
                self.log.warning(
                    "update_failed",
                    jobid=action.job_id,
                    action=action.kind,
                    result=result.outcome.value,
                    stderr=result.message,
                )
        self._save_ledger()
        attempted = sum(n for key, n in counts.items() if not key.startswith(("deferred", "skipped")))
        denied = sum(n for key, n in counts.items() if key.endswith(":" + Outcome.DENIED.value))
        self.denied_ticks = self.denied_ticks + 1 if attempted and denied == attempted else 0
        return dict(counts)

    def reset(self) -> dict[str, int]:
        """Undo every lever rltuned set, on every job still pending whatever its exemption now: fixed
        priorities by hold+release (multifactor recomputes), SiteFactor=0, OverSubscribe back to the
        job's own value, ExcNodeList cleared. A job its user held is left held (their release recomputes
        the priority anyway). When the ledger was lost, jobs whose priority lies in rltuned's band are
        undone too. What failed stays in the ledger for the next reset and is reported."""
        counts: Counter[str] = Counter()
        self.decided_as = None  # the priorities go back to Slurm's: the next tick decides
        try:
            read = self.adapter.read()
        except SlurmError as exc:
            self.log.error("reset_failed", error=str(exc))
            raise
        queue = _queue_jobs(read.squeue)
        undo = dict(self.ledger.items())
        written = {j: c.priority for j, c in undo.items() if c.priority is not None}
        if self.ledger.unaccounted:
            lost = self._in_band(queue, undo)
            counts["from_slurm"] = len(lost)
            undo |= lost
        failed: list[int] = []
        for job_id, change in sorted(undo.items()):
            queued = queue.get(job_id)
            if queued is None or not queued.pending:  # started or finished: nothing left to undo
                self.ledger.forget(job_id)
                counts["skipped"] += 1
                continue
            self.ledger.record(job_id, **{k: v for k, v in asdict(change).items() if v is not None})
            if not self._undo_job(job_id, change, queued, counts):
                failed.append(job_id)
        if self.ledger.unaccounted and not failed:
            self.ledger.mark_accounted()
        failed += self._undo_stragglers({j: p for j, p in written.items() if j not in failed}, counts)
        self._save_ledger()
        if failed:
            self.log.error("reset_incomplete", jobs=sorted(set(failed)), **counts)
        else:
            self.log.info("reset", **counts)
        return dict(counts)

    def _undo_stragglers(self, written: Mapping[int, int], counts: Counter[str]) -> list[int]:
        """Look again once the undo has settled: a priority write a daemon sent just before it died can
        still be queued in slurmctld (its scontrol had sent the RPC; the job write lock was busy) and land
        after reset's release. A job that shows the very value rltuned wrote is undone once more;
        returns those whose second undo failed (kept in the ledger for the next reset)."""
        if not written:
            return []
        time.sleep(RESET_SETTLE_S)
        try:
            queue = _queue_jobs(self.adapter.read().squeue)
        except SlurmError as exc:
            self.log.error("reset_check_failed", error=str(exc))
            return []
        failed: list[int] = []
        for job_id, value in sorted(written.items()):
            queued = queue.get(job_id)
            if queued is None or not queued.pending or queued.priority != value:
                continue
            counts["priority:straggler"] += 1
            self.log.warning("reset_straggler", jobid=job_id, priority=value)
            self.ledger.record(job_id, priority=value)
            if self._restore_priority(job_id, Change(priority=value), queued, counts):
                self.ledger.forget_lever(job_id, "priority")
            else:
                failed.append(job_id)
        return failed

    def _undo_job(self, job_id: int, change: Change, queued: QueuedJob, counts: Counter[str]) -> bool:
        """Undo each lever the ledger has on the job (`core/levers.py`); True when all worked."""
        all_ok = True
        for lever in LEVERS.values():
            fields = lever.undo(change)
            if fields is None:
                continue
            if fields is HOLD_RELEASE:
                ok = self._restore_priority(job_id, change, queued, counts)
            else:
                ok = self._undone(counts, job_id, lever.kind, self.adapter.update_job(job_id, dict(fields)))
            if ok:
                self.ledger.forget_lever(job_id, lever.kind)
            all_ok &= ok
        return all_ok

    def _in_band(self, queue: Mapping[int, QueuedJob], known: Mapping[int, Change]) -> dict[int, Change]:
        """Pending jobs whose priority lies in rltuned's band: what a lost ledger may have known."""
        a = self.settings.apply
        return {
            job_id: Change(priority=q.priority)
            for job_id, q in queue.items()
            if job_id not in known and q.pending and a.priority_min <= q.priority <= a.priority_max
        }

    def _restore_priority(self, job_id: int, change: Change, queued: QueuedJob, counts: Counter[str]) -> bool:
        if queued.reason == "JobHeldUser" or (queued.reason == "JobHeldAdmin" and not change.held):
            counts["priority:held"] += 1  # the holder's release recomputes it: nothing of ours survives
            return True
        if not change.held:
            held = self.adapter.hold(job_id)
            if held.outcome != Outcome.OK:
                if _unreachable(held.message):
                    # The hold may still land (its RPC was sent): the next reset releases the job, which
                    # on 22.05 also recomputes a fixed priority if it never did. Left unrecorded, a job
                    # held that way would read as an admin's hold and stay held.
                    self.ledger.record(job_id, held=True)
                return self._undone(counts, job_id, "priority", held)
            self.ledger.record(job_id, held=True)  # from here on, a failed release is ours to retry
        for delay in RELEASE_RETRIES:
            released = self.adapter.release(job_id)
            if released.outcome == Outcome.OK:
                self.ledger.record(job_id, held=False)
                return self._count(counts, "priority", Outcome.OK)
            time.sleep(delay)
        counts["priority:release_failed"] += 1
        self.metrics.actions.labels("priority", "release_failed").inc()
        hint = f"held by rltuned's reset: `scontrol release {job_id}`, or run reset again"
        self.log.error("release_failed", jobid=job_id, error=released.message, hint=hint)
        return False

    # --- bookkeeping --------------------------------------------------------------------------------

    def _save_ledger(self) -> None:
        """A full disk or a lost state_dir must not kill the daemon; `reset` just knows less."""
        try:
            self.ledger.save()
        except OSError as exc:
            self.metrics.fallbacks.labels("ledger_unsaved").inc()
            self.log.error("ledger_save_failed", path=str(self.ledger.path), error=str(exc))

    def _undone(self, counts: Counter[str], job_id: int, kind: str, result: UpdateResult) -> bool:
        """Count one undo; a failed one is logged with Slurm's own words, which say why (the summary
        `reset_incomplete` names only the jobs)."""
        if result.outcome != Outcome.OK:
            self.log.warning(
                "undo_failed", jobid=job_id, action=kind, result=result.outcome.value, stderr=result.message
            )
        return self._count(counts, kind, result.outcome)

    def _count(self, counts: Counter[str], kind: str, outcome: Outcome) -> bool:
        counts[f"{kind}:{outcome.value}"] += 1
        self.metrics.actions.labels(kind, outcome.value).inc()
        return outcome == Outcome.OK

    def _observe(self, decision: Decision) -> None:
        report = decision.view.report
        m = self.metrics
        m.pending.set(report.pending)
        m.running.set(report.running)
        m.managed.set(len(decision.plan.jobs))
        m.managed_by_partition.clear()  # a partition that empties must not keep its last count
        for partition, n in Counter(job.partition for job in decision.plan.jobs).items():
            m.managed_by_partition.labels(partition).set(n)
        for reason, n in report.left_alone.items():
            m.exempt.labels(reason).set(n)
        if report.skipped_malformed or report.nodes_malformed:
            m.malformed.inc(report.skipped_malformed + report.nodes_malformed)
            # A bad record stays bad tick after tick: counted every time, logged the first time only.
            new = [p for p in report.problems if p not in self.logged_problems]
            if new:
                self.log.warning(
                    "slurm_records_skipped",
                    jobs=report.skipped_malformed,
                    nodes=report.nodes_malformed,
                    first=new[:3],
                )
        self.logged_problems = set(report.problems)
        for reason, n in _count_reasons(decision.ranking.guarded).items():
            m.guarded.labels(reason).inc(n)
        if decision.ranking.fallback:
            m.fallbacks.labels(_reason(decision.ranking.fallback)).inc()
        if decision.placements.outcome == "fallback":
            m.fallbacks.labels("solver").inc()
        m.solver.labels(decision.placements.outcome).inc()
        for action in decision.plan.actions:
            m.planned.labels(action.kind).inc()

    def _finish(self, report: TickReport, started: float, slurm_up: bool = True) -> TickReport:
        total = time.perf_counter() - started
        report = replace(report, stages={**report.stages, "total": total})
        m = self.metrics
        m.slurm_up.set(1 if slurm_up else 0)
        m.ticks.labels(report.result).inc()
        if report.result in ("ok", "quiet"):
            m.last_success.set(time.time())
        for stage, seconds in report.stages.items():
            m.tick_duration.labels(stage).observe(seconds)
        summary = report.summary()
        if report.result == "error":
            self.log.error("tick", **summary)
        else:
            self.log.info("tick", **summary)
        self.last = report
        return report


def _count_reasons(guarded: Mapping[int, str]) -> dict[str, int]:
    return dict(Counter(guarded.values()))


def _restore_word(action: Action, info: SlurmJobInfo | None) -> str | None:
    """For an OverSubscribe write, the word that puts the job's own value back. scontrol cannot unset
    OverSubscribe; a job that never had one gets "no", which is what the default partition setting
    (OverSubscribe=NO) gives it."""
    if action.kind != "oversubscribe":
        return None
    return "yes" if info is not None and info.oversubscribe == "shared" else "no"


def _unreachable(message: str) -> bool:
    """After a write that timed out or could not reach slurmctld, the rest of the plan would too."""
    text = message.lower()
    return any(word in text for word in ("timed out", "unable to contact", "connection refused"))


def _reason(text: str) -> str:
    """A bounded label for a fallback message."""
    for prefix, label in (("model too slow", "model_slow"), ("model failed", "model_error")):
        if text.startswith(prefix):
            return label
    return "model_unavailable"


RELEASE_RETRIES = (0.2, 0.5, 1.0)
"""Pauses between attempts to release a job reset held: a held job must not be left behind."""
RESET_SETTLE_S = 1.0
"""How long reset waits before it looks for a write that landed after its undo (`_undo_stragglers`)."""


@dataclass(frozen=True)
class QueuedJob:
    """What reset needs of any job squeue lists, managed or not."""

    state: str
    priority: int
    reason: str

    @property
    def pending(self) -> bool:
        return self.state == "PENDING"


def _queue_jobs(squeue: Mapping[str, Any]) -> dict[int, QueuedJob]:
    """Every job squeue lists, managed or not (a job the user held since is still ours to restore)."""
    jobs = squeue.get("jobs")
    out: dict[int, QueuedJob] = {}
    for job in jobs if isinstance(jobs, list) else ():
        if not isinstance(job, Mapping) or not isinstance(job.get("job_id"), int):
            continue
        state = job.get("job_state")
        state = state[0] if isinstance(state, list) and state else state
        priority = job.get("priority")
        out[job["job_id"]] = QueuedJob(
            str(state or "").upper(),
            priority if isinstance(priority, int) else -1,
            str(job.get("state_reason") or ""),
        )
    return out


def _with_time_limits(snapshot: ClusterSnapshot, default_min: int) -> ClusterSnapshot:
    """Give jobs without a time limit (Slurm's INFINITE) the configured estimate, so features and
    backfill reservations have a number to use."""
    limit = default_min * 60.0

    def job(j: Job) -> Job:
        return j if j.time_limit is not None else replace(j, time_limit=limit)

    def running(r: RunningJob) -> RunningJob:
        return r if r.job.time_limit is not None else replace(r, job=job(r.job))

    if all(j.time_limit is not None for j in snapshot.pending) and all(
        r.job.time_limit is not None for r in snapshot.running
    ):
        return snapshot
    return replace(
        snapshot, pending=tuple(map(job, snapshot.pending)), running=tuple(map(running, snapshot.running))
    )
