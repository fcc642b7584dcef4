"""The daemon's loop, simulated: every `interval_s`, the decision core decides on the snapshot Slurm would
show, and its plan is applied as `scontrol update` would apply it; Slurm's schedulers (`sim/slurm.py`)
do the rest between ticks.

This is the loop `rltunectl train` and `evaluate` run: what is trained is what the daemon runs. Both
sides of an evaluation go through it; the base side simply has no model, as a daemon without one.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace

from rltuned.core import CoreSettings, Decision, Written, decide
from rltuned.core.inputs import reads_history, time_invariant, unreadable_inputs
from rltuned.core.plan import Pins
from rltuned.core.quiet import due, remember
from rltuned.daemon.pacing import Pacer
from rltuned.domain import ClusterSnapshot, ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.policies import Policy, make_policy
from rltuned.rl.export import LoadedModel
from rltuned.sim.simulator import SimResult
from rltuned.sim.slurm import NO_PINS, SlurmParams, SlurmRun


@dataclass(frozen=True)
class TickSettings:
    base: str = "fcfs"
    """The daemon's `policy.base`."""
    interval_s: float = 60.0
    """The daemon's `daemon.interval_s`."""
    core: CoreSettings = field(default_factory=CoreSettings)
    slurm: SlurmParams = field(default_factory=SlurmParams)
    history_interval_s: float = 300.0
    """The daemon's `slurm.history_interval_s`: how often its snapshot's history is refreshed."""
    writes_per_s: float = 0.0
    """The daemon's `apply.writes_per_s` (0: every write of a plan lands, as training has assumed so far):
    writes a tick cannot send within half its interval wait for the next tick's plan, as in the engine."""
    write_burst: int = 20
    """The daemon's `apply.write_burst`."""


class Unpinned(Mapping[int, Pins]):
    """Every simulated job's node lists: none set by its user."""

    def __getitem__(self, job_id: int) -> Pins:
        return NO_PINS

    def __iter__(self) -> Iterator[int]:
        return iter(())

    def __len__(self) -> int:
        return 0


UNPINNED = Unpinned()


class TickEpisode:
    """A simulation driven tick by tick: `snapshot` is what the daemon reads now; `apply(decision)` writes
    the decision's plan and runs Slurm until the next tick with pending jobs."""

    def __init__(
        self, cluster: ClusterSpec, jobs: Sequence[Job], warmup: int, settings: TickSettings
    ) -> None:
        unreadable = unreadable_inputs(settings.base)
        if unreadable is not None:  # the daemon refuses it; a loop the daemon never runs proves nothing
            raise UsageError(f"base policy {settings.base!r} cannot run in the daemon's loop: {unreadable}")
        self.settings = settings
        self.base = make_policy(settings.base)
        # The daemon reads sshare and sacct only for a base that reads them (`reads_history`); its
        # snapshot's history is otherwise empty, and so is this one's, at no cost per tick.
        history_s = settings.history_interval_s if reads_history(settings.base) else 0.0
        self.run = SlurmRun(cluster, jobs, warmup, settings.slurm, settings.interval_s, history_s)
        self.written = Written()
        self._fixed_at: tuple[tuple[Job, ...], int, bool] = ((), -1, True)
        self.guarded: set[int] = set()
        """Jobs the starvation guard acted on at some tick (the evaluation reports how many)."""
        self.snapshot: ClusterSnapshot | None = None
        self.result: SimResult | None = None
        self.pacer: Pacer | None = None
        # The engine's token bucket on the simulated clock (set at each apply); a wait is free. The clock
        # reads a list, not this episode: a bound method would tie the two in a cycle, and a finished
        # episode would wait for a full garbage collection.
        self._clock = clock = [0.0]
        if settings.writes_per_s > 0:
            self.pacer = Pacer(
                settings.writes_per_s, settings.write_burst, clock=lambda: clock[0], sleep=lambda s: None
            )
        self._loop = self.run.loop()
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.result is not None

    @property
    def quiet(self) -> bool:
        """Nothing changed since the last decision and `refresh_s` has not passed: the daemon writes
        nothing this tick (`core/quiet.py`); `pass_quiet` goes on to the next."""
        if self.snapshot is None:
            return False
        return not due(self.snapshot, self.settings.core.refresh_s, self.written)

    @property
    def all_fixed(self) -> bool:
        """Under the priority lever, every pending job carries a priority rltuned wrote (`run_ticks`).
        Read at every quiet tick of a base side, over a queue of hundreds on a congested window: kept
        while the pending tuple (SlurmRun keeps one while its queue holds) and the ledger's version are
        those it was computed on."""
        if self.snapshot is None or self.settings.core.lever.kind != "priority":
            return True
        pending, version = self.snapshot.pending, self.written.version
        if self._fixed_at[0] is not pending or self._fixed_at[1] != version:
            owned = self.written.owned_priorities()
            self._fixed_at = (pending, version, all(j.id in owned for j in pending))
        return self._fixed_at[2]

    def pass_quiet(self) -> None:
        if self.snapshot is None:
            raise RuntimeError("the episode is over")
        self._advance(None)

    def step(self, model: LoadedModel | None) -> None:
        """One tick as the daemon runs it: decide and write unless the tick is quiet."""
        if self.quiet:
            self.pass_quiet()
        else:
            self.apply(self.decide(model))

    def decide(self, model: LoadedModel | None) -> Decision:
        """The daemon's decision on the current snapshot."""
        if self.snapshot is None:
            raise RuntimeError("the episode is over")
        return decide(self.snapshot, self.base, model, self.settings.core, self.written, UNPINNED)

    def apply(self, decision: Decision) -> None:
        """Every write is accepted: the plan's jobs are all pending at the tick that planned them."""
        if self.snapshot is None:
            raise RuntimeError("the episode is over")
        planned = decision.plan.actions
        if self.pacer is not None:
            self._clock[0] = self.snapshot.now
            deadline = self.snapshot.now + self.settings.interval_s / 2  # as `Engine.apply`
            sent = []
            for action in decision.plan.actions:
                if not self.pacer.take(deadline):
                    break
                sent.append(action)
            decision = replace(decision, plan=replace(decision.plan, actions=tuple(sent)))
        self.written.record_plan(decision.plan.actions)
        decision.commit(self.written)
        refresh = self.settings.core.refresh_s
        if refresh > 0:  # what a quiet tick compares with (a signature costs a little)
            whole = len(decision.plan.actions) == len(planned)
            self.written.last_decision = remember(decision, self.snapshot, whole, refresh)
        self.guarded |= set(decision.ranking.guarded)
        self._advance(decision)

    def _advance(self, decision: Decision | None) -> None:
        try:
            snapshot = self._loop.send(None if decision is None else decision.plan)
        except StopIteration:
            self.snapshot = None
            self.result = replace(self.run.result(), guarded=frozenset(self.guarded))
            return
        last, self.snapshot = self.snapshot, snapshot
        if last is not None and last.pending is snapshot.pending and last.running is snapshot.running:
            return  # the same jobs as last tick (SlurmRun keeps its views): the ledger holds only theirs
        self.written.keep_only({j.id for j in snapshot.pending} | {r.job.id for r in snapshot.running})


def run_ticks(
    cluster: ClusterSpec,
    jobs: Sequence[Job],
    warmup: int,
    settings: TickSettings,
    model: LoadedModel | None = None,
) -> SimResult:
    """The daemon (with `model`, or on its base policy alone) over Slurm, start to finish.

    On its base alone, a time-invariant base (`core/inputs.time_invariant`: FCFS, SJF, SAF) ranks an
    unchanged queue as at the last decision and the guard has nothing to bound, so a tick where nothing
    changed (`core/quiet.py`, with no refresh) after a decision whose whole plan was written would plan
    no write; such ticks are passed instead of planned again (most ticks of a busy window; the reward's
    reference in training and every base side of an evaluation run here). With the priority lever they
    must also have every pending job fixed at a value rltuned wrote: a job whose multifactor priority
    happened to equal its target was not written, and ages until a decision writes it. A MILP solve
    that times out is the one way two runs of a tick can differ (`placement/milp.py`), with or without
    this."""
    skips = model is None and time_invariant(settings.base)
    if skips:
        settings = replace(settings, core=replace(settings.core, refresh_s=math.inf))
    episode = TickEpisode(cluster, jobs, warmup, settings)
    while episode.result is None:
        if not skips:
            episode.step(model)
        elif episode.quiet and episode.all_fixed:
            episode.pass_quiet()
        else:
            episode.apply(episode.decide(None))
    return episode.result


def run_order(
    cluster: ClusterSpec, jobs: Sequence[Job], warmup: int, settings: TickSettings, order: Policy
) -> SimResult:
    """The daemon on its base alone over Slurm, with `order` ranking in place of the base policy.

    For orders that are not registered policies (a searched `loglinear` point, a teacher, a history
    mix): they are read as the daemon would read a base. `settings.base` still names the loop's settings
    and the inputs checked. Every tick is decided: whether an arbitrary order is time-invariant is not
    known, and deciding a quiet tick gives the schedule passing it gives (`run_ticks`)."""
    episode = TickEpisode(cluster, jobs, warmup, settings)
    episode.base = order
    while episode.result is None:
        episode.step(None)
    return episode.result
