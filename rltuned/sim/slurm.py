"""The Slurm that sits behind the daemon: priorities, the main scheduler and sched/backfill, on a clock.

What the daemon changes is a job's priority (a fixed `Priority=`, or a `SiteFactor` added to multifactor's
sum) and where it may run (`ExcNodeList=`); Slurm's own schedulers then decide what starts. This module
models them with the `slurm.conf` parameters that change the outcome (docs/simulator.md lists each):

- **Priority.** A job the daemon has not written carries multifactor's priority (age, fair-share, job
  size, partition, with `PriorityWeight*` and `PriorityMaxAge`), plus any SiteFactor written. A fixed
  priority replaces the sum. Jobs are considered by priority, then job id (submit order).
- **The main scheduler** starts jobs in priority order until the first that does not fit; it stops
  there (one partition). It runs every `sched_interval`, at once after a completion, and after a submit
  or job update at slurmctld's next once-a-second background tick that is `batch_sched_delay` past the
  last pass.
- **sched/backfill** (`bf_interval`) walks the queue in priority order, testing at most
  `bf_max_job_test` jobs. For each it finds the earliest start in an availability profile built from
  the running jobs' time limits (their end times as they are, as will_run reads them) and the
  reservations made so far in the pass; a job that can start now without delaying any of them starts,
  any other job whose start lies within `bf_window` is reserved there, on whole nodes, for its start
  and end rounded down to `bf_resolution` (as backfill.c records them). Every tested job is planned,
  not only the first blocked one.

The daemon's tick (`loop` yields a snapshot every `interval_s`) and the schedulers run on their own
grids; the scheduler passes take no simulated time (so `bf_continue` changes nothing here).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from operator import attrgetter, itemgetter
from types import MappingProxyType

import numpy as np
import numpy.typing as npt

from rltuned.core.levers import Action, LeverWrites
from rltuned.core.plan import Plan
from rltuned.domain import (
    Allocation,
    ClusterSnapshot,
    ClusterSpec,
    History,
    Job,
    PriorityContext,
    RunningJob,
    Slice,
)
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, Pool, build_pools, demand_for, demands_for
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.engine import Engine
from rltuned.sim.history import Charge, HistoryTracker, charges
from rltuned.sim.kernels import (
    CONS_TRES,
    PACK,
    backfill_pass,
    build_profile,
    earliest_start,
    fits_now,
    grid,
    hold,
    past_limit_release,
)
from rltuned.sim.simulator import JobRecord, SimResult
from rltuned.slurm.hostlist import expand
from rltuned.slurm.parse import natural_key

FINISH, ARRIVAL = 0, 1
Released = tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]
ShapeArrays = tuple[
    npt.NDArray[np.int64], npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]
]
INF = float("inf")
GRID_TOLERANCE = 1e-9
"""A time within this many grid steps of a grid point is on it (floating-point sums of steps drift)."""


@dataclass(frozen=True)
class SlurmParams:
    """The slurm.conf settings the model follows; defaults are Slurm 22.05's."""

    backfill: bool = True
    """SchedulerType=sched/backfill (False: sched/builtin, the main scheduler alone)."""
    sched_interval_s: float = 60.0
    """SchedulerParameters=sched_interval: the main scheduler's periodic pass."""
    batch_sched_delay_s: float = 3.0
    """SchedulerParameters=batch_sched_delay: the least time between two passes a submit or job update
    asks for (`event_pass`)."""
    event_pass: str = "background"
    """When the main scheduler first tries a submitted or updated job. "background": slurmctld's
    once-a-second background loop, `batch_sched_delay` after its last pass (22.05: the submit and update
    RPCs only count a request, `queue_job_scheduler`); "at_once": at that instant (models trained before
    this was modelled)."""
    background_s: float = 1.0
    """The period of slurmctld's background loop, which runs the periodic and the requested passes: a
    second plus its housekeeping (`fidelity --ctld-log` fits it from the log)."""
    background_phase_s: float | None = None
    """A time at which that loop ticked (seconds, on the jobs' clock); None: the first submit."""
    bf_interval_s: float = 30.0
    """SchedulerParameters=bf_interval."""
    bf_max_job_test: int = 500
    """SchedulerParameters=bf_max_job_test: jobs tested per backfill pass."""
    bf_window_min: float = 1440.0
    """SchedulerParameters=bf_window: how far ahead backfill plans, minutes."""
    bf_resolution_s: float = 60.0
    """SchedulerParameters=bf_resolution: the time grid of the backfill plan."""
    bf_continue: bool = False
    """SchedulerParameters=bf_continue: accepted; the simulated pass never yields its locks."""
    priority: Multifactor = field(default_factory=Multifactor)
    """PriorityType=priority/multifactor with its PriorityWeight* and PriorityMaxAge."""
    fairshare_half_life_s: float = 7 * 24 * 3600.0
    """PriorityDecayHalfLife."""
    bf_whole_nodes: bool = True
    """sched/backfill plans a job that must wait on whole nodes: no other job may use them in its window
    (its `node_space` holds node bitmaps). False: only the GPUs, CPUs and memory it will take (models
    trained before this was modelled)."""
    node_selection: str = "cons_tres"
    """SelectType=select/cons_tres's choice of node (`placement/cons_tres.py`); "pack" is the GPU best
    fit models trained before it used."""

    def __post_init__(self) -> None:
        if self.event_pass not in ("background", "at_once"):
            raise ValueError(f"event_pass must be background or at_once, got {self.event_pass!r}")
        if self.batch_sched_delay_s < 0:
            raise ValueError(f"batch_sched_delay_s must be >= 0, got {self.batch_sched_delay_s}")
        if self.node_selection not in ("cons_tres", "pack"):
            raise ValueError(f"node_selection must be cons_tres or pack, got {self.node_selection!r}")
        for name in ("sched_interval_s", "background_s", "bf_interval_s", "bf_resolution_s", "bf_window_min"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be > 0, got {getattr(self, name)}")
        if self.bf_max_job_test < 1:
            raise ValueError(f"bf_max_job_test must be >= 1, got {self.bf_max_job_test}")


@dataclass(frozen=True, slots=True)
class NoPins:
    """Simulated jobs carry no user-set node lists."""

    required_nodes: tuple[str, ...] = ()
    excluded_nodes: tuple[str, ...] = ()


NO_PINS = NoPins()


_ARRIVAL = attrgetter("arrival")


class _Job:
    """A job's life in one run: what Slurm holds for it (priority, site factor, excluded nodes)."""

    __slots__ = (
        "alloc",
        "arrival",
        "demand",
        "end",
        "fixed",
        "idx",
        "job",
        "limit",
        "rows",
        "runtime",
        "shape",
        "shown",
        "site",
        "start",
        "weight",
    )

    def __init__(self, idx: int, job: Job, demand: Demand) -> None:
        self.idx = idx
        self.job = job
        self.demand = demand
        self.limit = job.estimate
        self.runtime = job.runtime if job.runtime is not None else job.estimate
        self.fixed: int | None = None
        self.site = 0
        self.start = -1.0
        self.end = -1.0
        self.alloc: Allocation = ()
        self.rows = np.zeros((0, 4), dtype=np.int64)
        """The allocation as the backfill profile reads it: (node, GPUs, CPUs, memory) per slice."""
        self.shape = -1
        """The demand's number in the run's `ShapeTable` (-1: not numbered since the demand was set)."""
        self.shown = replace(job, runtime=None, time_limit=self.limit)
        """The job as squeue shows it: no true runtime (its priority is the snapshot's, `priorities`)."""
        self.arrival = (job.submit, job.id)
        """squeue's order of pending jobs."""
        self.weight = 0.0
        """What a second of its wait costs in `SlurmRun.waited` (set at its first call)."""

    def ask(self, shapes: ShapeTable) -> tuple[int, float, int]:
        """What a backfill pass reads of the job: (GPUs, time limit, shape number)."""
        if self.shape < 0:
            self.shape = shapes.number(self.demand)
        return self.demand.gpus, self.limit, self.shape


@dataclass
class _ShownQueue:
    """squeue's pending jobs and their priorities as `SlurmRun.snapshot` last built them. The jobs are
    kept while the queue's members hold (`SlurmRun._members`), the priorities while the queue and the
    clock do (`_same_queue`), so a job is one object for as long as it pends."""

    members: int = -1
    arrived: list[_Job] = field(default_factory=list)
    """The queue in arrival order (squeue's)."""
    jobs: tuple[Job, ...] = ()
    ids: tuple[int, ...] = ()
    priorities: Mapping[int, int] = field(default_factory=lambda: MappingProxyType({}))
    queued: int = -1
    at: float = -INF
    """The `_queued` count and time the priorities were built at."""


@dataclass
class _LastPass:
    """What the last backfill pass read (`SlurmRun._backfill`). The lists are the priority order itself
    (`SlurmRun.ordered`), held, so an identical list means an unchanged order."""

    order: list[_Job] = field(default_factory=list)
    tested: list[int] = field(default_factory=list)
    """The job ids it tested, in order."""
    planned: list[_Job] = field(default_factory=list)
    """The order of the last pass that planned, with its jobs' asks as the kernel reads them."""
    asks: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros((0, 3)))
    at: float = -INF
    """When the last pass that planned ran, with its window's end, where it released the jobs past
    their limits, and its profile's row times once it had planned (`repeats`)."""
    horizon: float = -INF
    overdue_at: float = -INF
    rows: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))

    def repeats(self, now: float, horizon: float, overdue_at: float) -> bool:
        """Whether a pass at `now` (window end `horizon`, jobs past their limits released at
        `overdue_at`, INF if none) would start nothing, when nothing but the clock moved since the last
        pass that planned, which started nothing (a start sets `SlurmRun.changed`).

        That pass's profile differs from this one's only in row 0's start, in where jobs past their
        limits give their resources back, and in how far the window reaches. With the release point the
        same and no row of the last plan in (at, now] (no limit ended there, no reservation was clipped
        there by the rounding, which moves a start to the pass's own time) nor in (its horizon, this
        horizon], every job searches the rows it searched then, and row 0 holds a job from `now` only if
        it held it from `at`, over more rows: so nothing starts. A row beyond the old window matters even
        with no job past its limit: a reservation found there can push a lower job's reservation off a
        node that a third job then starts on (tests/sim/test_slurm_model.py)."""
        if overdue_at != self.overdue_at or now <= self.at:
            return False
        rows = self.rows
        between = np.searchsorted(rows, (self.at, now, self.horizon, horizon), side="right")
        return bool(between[0] == between[1] and between[2] == between[3])


class SlurmRun:
    """One simulation of `jobs` under Slurm's schedulers, with a daemon tick every `interval_s`.

    `loop()` yields the snapshot at every tick with pending jobs and expects the tick's `Plan` back
    (`None`: the daemon wrote nothing). Without a daemon, `run()` drives it with empty plans.
    """

    _weight: Callable[[Job], float] | None
    """The weight `waited` was first called with; each job's value is on its entry."""
    _free_at: tuple[int, npt.NDArray[np.int64]] = (-1, np.zeros((1, 3, 0), dtype=np.int64))
    """`_free_now`'s array and the `_version` it was built at."""

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[Job],
        warmup: int = 0,
        params: SlurmParams | None = None,
        interval_s: float = 60.0,
        history_interval_s: float = 300.0,
        writes: Sequence[tuple[float, Action]] = (),
    ) -> None:
        """`writes`: updates a daemon made at known times (`fidelity/daemon_log.py`), applied at those
        times as Slurm applies an `scontrol update`, besides whatever the ticks' plans write."""
        if not 0 <= warmup <= len(jobs):
            raise ValueError(f"warmup must be in [0, {len(jobs)}], got {warmup}")
        if interval_s <= 0:
            raise ValueError(f"interval_s must be > 0, got {interval_s}")
        # The daemon sees the nodes in the order the adapter lists them (by name, digits as numbers), and
        # placement breaks ties by node index: the simulated cluster uses the same order.
        cluster = replace(cluster, nodes=tuple(sorted(cluster.nodes, key=lambda n: natural_key(n.name))))
        self.cluster = cluster
        self.params = params or SlurmParams()
        self.interval_s = interval_s
        self.warmup = warmup
        self.pools = build_pools(cluster)
        self.pool_arrays = PoolArrays.of(self.pools)
        self._shapes = ShapeTable()
        self._node_index = {n.name: i for i, n in enumerate(cluster.nodes)}
        nodes = cluster.nodes
        self.free = FreeCapacity([n.gpus for n in nodes], [n.cpus for n in nodes], [n.mem_mb for n in nodes])
        self.total_gpus = cluster.total_gpus
        self.nodes = len(cluster.nodes)
        self.origin = min((j.submit for j in jobs), default=0.0)
        self.history = HistoryTracker(self.origin, self.params.fairshare_half_life_s)
        self.engine: Engine[_Job] = Engine()
        self.queue: list[_Job] = []
        self._smallest: int | None = None
        """The fewest GPUs a queued job asks for (None: to be recomputed), for `_may_start`."""
        self.by_id: dict[int, _Job] = {}
        self.running: dict[int, _Job] = {}
        self.done: list[_Job] = []
        self.dropped: list[Job] = []
        self._done_seen, self._done_cost, self._weight = 0, 0.0, None
        self.changed = True
        """Whether anything a backfill pass reads changed since the last pass (see `_backfill`)."""
        self._last_pass = _LastPass()
        self._released_at: tuple[int, Released, float] = (-1, releases([]), INF)
        self._version = 0
        """Counts starts and completions (what a priority context reads besides the clock)."""
        self._ctx: PriorityContext | None = None
        self._ctx_at = (0.0, -1)
        self._charges_at: tuple[int, list[Charge]] = (-1, [])
        self._queued = self._members = 0
        """Counts changes to the queue and to what its priorities read but the clock: arrivals, starts,
        completions (the running set and the history) and every write. A queue whose priorities were
        all written by the daemon ranks the same until it moves, which on a busy window holds for most
        ticks and passes (`_settled`). `_members` counts arrivals and starts: the queue's membership,
        which squeue's list of jobs follows."""
        self._settled_at: tuple[int, bool] = (-1, False)
        self._ordered_at: tuple[int, float, list[_Job]] = (-1, -INF, [])
        self._shown = _ShownQueue()
        self._shown_running: tuple[int, tuple[RunningJob, ...]] = (-1, ())
        self.history_interval_s = history_interval_s
        self._shown_history = History()
        self._history_at = -INF
        self._writes = sorted(writes, key=lambda w: w[0])
        self._next_write = 0
        self._submit(jobs)

    def _submit(self, jobs: Sequence[Job]) -> None:
        """Every job's arrival on the clock; a measured job no pool could ever hold is dropped."""
        for idx, (job, demand) in enumerate(zip(jobs, demands_for(jobs, self.pools), strict=True)):
            if demand is None:
                if idx >= self.warmup:
                    self.dropped.append(job)
                continue
            entry = _Job(idx, job, demand)
            self.by_id[job.id] = entry
            self.engine.schedule(job.submit, ARRIVAL, entry)

    # --- the clock ----------------------------------------------------------------------------------
    def run(self) -> SimResult:
        """Slurm alone: no daemon writes anything."""
        loop = self.loop()
        try:
            next(loop)
            while True:
                loop.send(None)
        except StopIteration:
            pass
        return self.result()

    def loop(self) -> Generator[ClusterSnapshot, Plan | None, None]:
        p = self.params
        start = self.engine.peek()
        if start == INF:
            return
        beat, anchor, every = self._background_grid(start)
        next_tick = next_bf = start
        next_sched = anchor
        asked = INF  # when a submit or write asked for a main pass that has not run yet (`_asked`)
        last_pass = -INF  # the last pass the background loop ran (a completion's pass does not count)
        while len(self.engine) or self.queue:
            t_event = self.engine.peek()
            if not self.queue:  # nothing to decide: the grids skip ahead to the next event
                next_tick = _align(next_tick, t_event, self.interval_s)
                next_sched = _align(next_sched, t_event, every)
                next_bf = _align(next_bf, t_event, p.bf_interval_s)
                last_pass = max(last_pass, next_sched - every)  # the periodic passes skipped still ran
            t_write = self._writes[self._next_write][0] if self._next_write < len(self._writes) else INF
            t_pass = _on_grid(anchor, max(asked, last_pass + p.batch_sched_delay_s), beat)
            now = min(t_event, next_tick, next_sched, next_bf if p.backfill else INF, t_write, t_pass)
            if now == t_event:
                finished, arrived = self._events()
                if finished or p.event_pass == "at_once":
                    self._main(now)  # the last node's epilog-complete runs a pass at once
                if arrived:
                    asked = self._asked(asked, now, ran=True)
            elif now == t_write:
                self.apply(self._due_writes(now))
                asked = self._asked(asked, now, ran=False)
            elif now == next_tick:
                next_tick += self.interval_s
                plan = yield self.snapshot(now)
                if plan is not None and plan.actions:
                    self.apply(plan.actions)
                    asked = self._asked(asked, now, ran=False)
            elif now == next_sched:  # the periodic pass also answers every request so far
                next_sched += every
                asked, last_pass = INF, now
                self._main(now)
            elif now == t_pass:
                asked, last_pass = INF, now
                self._main(now)
            else:
                next_bf += p.bf_interval_s
                self._backfill(now)

    def _background_grid(self, start: float) -> tuple[float, float, float]:
        """slurmctld's background loop: its period, a tick at or after `start`, and the periodic pass's
        spacing (every `sched_interval` of its ticks). Models trained before it was modelled keep the
        grid they were trained on (1 s, periodic passes every `sched_interval` from the first submit)."""
        p = self.params
        if p.event_pass == "at_once":
            return p.background_s, start, p.sched_interval_s
        beat, phase = p.background_s, p.background_phase_s
        anchor = start if phase is None else _on_grid(phase, start, beat)
        return beat, anchor, p.sched_interval_s * beat

    def _asked(self, asked: float, now: float, ran: bool) -> float:
        """A submit or job update asks for a main pass (`event_pass`; `ran`: one ran at this instant
        already); returns when the first request still open came."""
        if self.params.event_pass == "at_once":
            if not ran:
                self._main(now)
            return asked
        return min(asked, now)

    def _events(self) -> tuple[bool, bool]:
        """Returns whether a job completed and whether one arrived."""
        finished = arrived = False
        for kind, entry in self.engine.pop_simultaneous():
            if kind == FINISH:
                self._finish(entry)
                finished = True
            else:
                arrived = True
                self.queue.append(entry)
                self._queued += 1
                self._members += 1
                if self._smallest is not None:
                    self._smallest = min(self._smallest, entry.demand.gpus)
        self.changed = True
        return finished, arrived

    # --- what the daemon changes --------------------------------------------------------------------
    def _due_writes(self, now: float) -> list[Action]:
        due = []
        while self._next_write < len(self._writes) and self._writes[self._next_write][0] <= now:
            due.append(self._writes[self._next_write][1])
            self._next_write += 1
        return [a for a in due if a.job_id in self.by_id]  # a job no pool can hold never ran

    def apply(self, actions: Sequence[Action]) -> None:
        """The plan's `scontrol update`s, all accepted (every job in a plan is pending at its tick). A
        priority or SiteFactor write changes what a backfill pass reads only through the priority order,
        which the pass compares itself (`_backfill`); a node list changes where a job may run. A ranking
        lever's writes are read as their (job, value) pairs, without making actions of them."""
        if isinstance(actions, LeverWrites):
            by_id = self.by_id
            self._queued += len(actions)
            if actions.lever.kind == "priority":
                for job_id, value in actions.pairs:
                    by_id[job_id].fixed = value
            else:
                for job_id, value in actions.pairs:
                    by_id[job_id].site = value
            return
        for action in actions:
            entry = self.by_id[action.job_id]
            self._queued += 1
            if action.kind == "priority":
                assert isinstance(action.value, int)
                entry.fixed = action.value
            elif action.kind == "site_factor":
                assert isinstance(action.value, int)
                entry.site = action.value
            elif action.kind == "excluded_nodes":
                assert isinstance(action.value, str)
                entry.demand = self._restricted(entry.job, action.value)
                entry.shape = -1
                self.changed = True
            # OverSubscribe: with cons_tres and the partition's OverSubscribe=NO it does not change
            # which GPUs a job may use (docs/simulator.md).

    def _restricted(self, job: Job, excluded: str) -> Demand:
        demand = demand_for(job, self.pools)
        assert demand is not None
        if not excluded:
            return demand
        out = {self._node_index[name] for name in expand(excluded) if name in self._node_index}
        keep = [k for k, p in enumerate(demand.pools) if not out.intersection(self.pools[p].nodes)]
        if not keep:
            return demand  # Slurm would keep the job pending forever; the planner never asks for that
        pick = tuple(keep)
        return Demand(
            demand.gpus,
            tuple(demand.pools[k] for k in pick),
            tuple(demand.cpu_per_gpu[k] for k in pick),
            tuple(demand.mem_per_gpu[k] for k in pick),
            (*demand.shape, ("excluded", excluded)),
        )

    # --- priorities ---------------------------------------------------------------------------------
    def priority(self, entry: _Job, now: float) -> int:
        if entry.fixed is not None:
            return entry.fixed
        return int(-self.params.priority.key(entry.job, self._context(now))) + entry.site

    def _context(self, now: float) -> PriorityContext:
        """Kept while neither the clock nor the running set nor the history moves: the main scheduler,
        backfill and the daemon's read often meet at one instant."""
        if self._ctx is None or self._ctx_at != (now, self._version):
            history = self.history.view_charged(now, self._charges())
            self._ctx = PriorityContext(now, self.total_gpus, history, self.origin, self.nodes)
            self._ctx_at = (now, self._version)
        return self._ctx

    def _charges(self) -> list[Charge]:
        """The running jobs as fair-share charges them, kept while the running set holds."""
        if self._charges_at[0] != self._version:
            self._charges_at = (self._version, charges(self.running.values()))
        return self._charges_at[1]

    def _priorities(self, entries: Sequence[_Job], now: float) -> list[int]:
        """`priority` of each entry, a written one read inline: this runs several times a tick."""
        priority = self.priority
        return [e.fixed if e.fixed is not None else priority(e, now) for e in entries]

    def _settled(self) -> bool:
        """Whether every queued job's priority was written (so it reads neither the clock nor the
        running set): then the priority order and squeue's view change only with `_queued`."""
        if self._settled_at[0] != self._queued:
            self._settled_at = (self._queued, all(e.fixed is not None for e in self.queue))
        return self._settled_at[1]

    def _same_queue(self, queued: int, at: float, now: float) -> bool:
        """Whether what was built at `at` with the queue at its `queued` count still holds at `now`."""
        return queued == self._queued and (at == now or self._settled())

    def ordered(self, now: float) -> list[_Job]:
        """The queue in priority order (ties by job id). The list is shared until the queue moves:
        callers read it, never change it."""
        if self._same_queue(self._ordered_at[0], self._ordered_at[1], now):
            return self._ordered_at[2]
        queue = self.queue
        keyed = [(-p, e.job.id, e) for p, e in zip(self._priorities(queue, now), queue, strict=True)]
        keyed.sort(key=itemgetter(0, 1))
        order = [e for _, _, e in keyed]
        self._ordered_at = (self._queued, now, order)
        return order

    # --- the schedulers -----------------------------------------------------------------------------
    def _main(self, now: float) -> None:
        """Priority order until the first job that does not fit."""
        if not self._may_start():
            return
        p = self.params
        started: list[_Job] = []
        for entry in self.ordered(now):
            alloc = place(entry.demand, self.pools, self.free, p.node_selection)
            if alloc is None:
                break
            self._start(entry, alloc, now)
            started.append(entry)
        self._drop(started)

    def _backfill(self, now: float) -> None:
        """One sched/backfill pass. A pass that would start nothing is skipped: one with no submit,
        start, completion or node-list write since the last pass that planned, the same priority order
        (priority writes act only through it), and nothing in its plan that the clock moves
        (`_LastPass.repeats`). So is a pass in which no tested job fits the free capacity now
        (`fits_now`): it may plan, but whatever it reserves is forgotten when the pass ends."""
        if not self._may_start():
            return
        p = self.params
        full = self.ordered(now)
        last = self._last_pass
        if full is last.order:  # the very list the last pass read: the same order
            same = True
        else:
            tested = [e.job.id for e in full[: p.bf_max_job_test]]
            same, last.order, last.tested = tested == last.tested, full, tested
        released, first_end = self._released()
        horizon = now + p.bf_window_min * 60.0
        overdue_at = past_limit_release(now, p.bf_resolution_s) if first_end <= now else INF
        if not self.changed and same and last.repeats(now, horizon, overdue_at):
            return
        order = full[: p.bf_max_job_test]
        if last.planned is not full:  # a job's ask changes only with its demand, a write that moves
            asks = [e.ask(self._shapes) for e in order]  # the queue: the same list asks the same
            last.planned, last.asks = full, np.array(asks, dtype=np.float64).reshape(len(order), 3)
        if not self._fits_now(now):
            last.at = INF  # this pass did not plan: the next one cannot stand on its plan
            return
        self.changed = False
        profile = Profile(
            now, self.free, p.bf_resolution_s, released, self.pools, self.pool_arrays, room=2 * len(order),
            select=p.node_selection, whole_nodes=p.bf_whole_nodes,
        )  # fmt: skip
        started: list[_Job] = []
        for j, alloc in profile.plan_columns(last.asks, self._shapes, horizon):
            entry = order[j]
            self._start(entry, alloc, now)
            started.append(entry)
        self._drop(started)
        # A copy: the rows must stay this plan's even if profiles come to share their arrays.
        last.at, last.horizon, last.overdue_at, last.rows = now, horizon, overdue_at, profile.times.copy()

    def _released(self) -> tuple[Released, float]:
        """The running jobs as a profile reads them (`releases`) and the earliest end of their time
        limits; rebuilt only when a job started or ended (each job's slice rows were kept at its start)."""
        if self._released_at[0] != self._version:
            running = list(self.running.values())
            released, first_end = releases([]), INF
            if running:
                limits = [e.start + e.limit for e in running]
                ends = np.repeat(limits, [len(e.alloc) for e in running])
                released, first_end = (ends, np.concatenate([e.rows for e in running])), min(limits)
            self._released_at = (self._version, released, first_end)
        return self._released_at[1], self._released_at[2]

    def _fits_now(self, now: float) -> bool:
        """Whether a job of the last order's tested ones fits the free capacity now (`fits_now`)."""
        a, last = self.pool_arrays, self._last_pass
        return fits_now(self._free_now(), now, a.ptr, a.flat, a.gpus, last.asks, *self._shapes.arrays())

    def _free_now(self) -> npt.NDArray[np.int64]:
        """The free capacity as one profile row ([1, 3, nodes]), kept until a job starts or ends."""
        if self._free_at[0] != self._version:
            f = self.free
            self._free_at = (self._version, np.array(((f.gpus, f.cpus, f.mem),), dtype=np.int64))
        return self._free_at[1]

    def _may_start(self) -> bool:
        """Whether any queued job could start now on GPU count alone (a cheap test before ordering)."""
        if not self.queue:
            return False
        if self._smallest is None:
            self._smallest = min(e.demand.gpus for e in self.queue)
        return sum(self.free.gpus) >= self._smallest

    # --- job lifecycle ------------------------------------------------------------------------------
    def _start(self, entry: _Job, alloc: Allocation, now: float) -> None:
        self.changed = True
        self._version += 1
        self._queued += 1
        entry.start = now
        entry.alloc = alloc
        entry.rows = slice_rows(alloc)
        self.free.take(alloc)
        self.running[entry.job.id] = entry
        self.engine.schedule(now + entry.runtime, FINISH, entry)

    def _finish(self, entry: _Job) -> None:
        now = self.engine.now
        self._version += 1
        self._queued += 1
        entry.end = now
        self.free.give(entry.alloc)
        del self.running[entry.job.id]
        self.history.record(entry.job, entry.start, now)
        self.done.append(entry)

    def _drop(self, started: list[_Job]) -> None:
        if started:
            gone = {e.job.id for e in started}
            self.queue = [e for e in self.queue if e.job.id not in gone]
            self._members += 1
            self._smallest = None  # `_queued` moved with each `_start`

    # --- what the daemon reads ----------------------------------------------------------------------
    def snapshot(self, now: float) -> ClusterSnapshot:
        """As the daemon builds it: squeue's jobs (time limits, Slurm's current priorities, no true
        runtimes), free capacity per node, the accounting's history as last read (every
        `history_interval_s`, as the daemon's engine reads sshare and sacct), and no origin."""
        queue = self._shown
        if queue.members != self._members:  # one tuple of jobs while the queue's members hold
            queue.members, queue.arrived = self._members, sorted(self.queue, key=_ARRIVAL)
            queue.jobs = tuple(e.shown for e in queue.arrived)
            queue.ids = tuple(e.job.id for e in queue.arrived)
        if not self._same_queue(queue.queued, queue.at, now):  # one mapping while the priorities hold
            values = dict(zip(queue.ids, self._priorities(queue.arrived, now), strict=True))
            queue.priorities = MappingProxyType(values)  # read-only: the snapshots until then share it
            queue.queued, queue.at = self._queued, now
        if self._shown_running[0] != self._version:  # the running set is shown as it was last time
            shown = (RunningJob(e.shown, e.start, e.alloc) for e in self.running.values())
            self._shown_running = (self._version, tuple(sorted(shown, key=lambda r: (r.start, r.job.id))))
        running = self._shown_running[1]
        if self.history_interval_s and now - self._history_at >= self.history_interval_s:
            self._shown_history = self.history.view_charged(now, self._charges())
            self._history_at = now
        return ClusterSnapshot(
            now=now,
            cluster=self.cluster,
            free_gpus=tuple(self.free.gpus),
            free_cpus=tuple(self.free.cpus),
            free_mem_mb=tuple(self.free.mem),
            pending=queue.jobs,
            running=running,
            history=self._shown_history,
            priorities=queue.priorities,
        )

    def waited(self, now: float, weight: Callable[[Job], float]) -> float:
        """Sum over the measured jobs that have arrived of weight(job) x time waited so far. The finished
        jobs' part is kept between calls (it no longer changes), so one run takes one weight; each job's
        weight is read once, at the first call (a training episode calls this every tick, over a queue
        of a hundred jobs). Warm-up jobs weigh 0: adding 0.0 leaves the sum as it is."""
        if self._weight is not weight:
            if self._weight is not None:
                raise ValueError("a run's waiting cost takes one weight")
            self._weight = weight
            for entry in self.by_id.values():
                entry.weight = weight(entry.job) if entry.idx >= self.warmup else 0.0
        for entry in self.done[self._done_seen :]:
            self._done_cost += (entry.start - entry.job.submit) * entry.weight
        self._done_seen = len(self.done)
        cost = self._done_cost
        for entry in self.running.values():
            cost += (entry.start - entry.job.submit) * entry.weight
        for entry in self.queue:
            cost += (now - entry.job.submit) * entry.weight
        return cost

    def result(self) -> SimResult:
        done = sorted(self.done, key=lambda e: e.idx)
        records = [JobRecord(e.job, e.start, e.end, e.alloc) for e in done]
        cut = sum(1 for e in done if e.idx < self.warmup)
        return SimResult(self.cluster, tuple(records[cut:]), tuple(self.dropped), tuple(records[:cut]))


def _on_grid(anchor: float, until: float, step: float) -> float:
    """The first point of `anchor`'s grid (spacing `step`, both ways) at or after `until` (`until` itself
    when it lies on the grid up to rounding)."""
    if until == INF:
        return INF
    return max(until, anchor + math.ceil((until - anchor) / step - GRID_TOLERANCE) * step)


def _align(at: float, until: float, step: float) -> float:
    """The first point of `at`'s grid (spacing `step`) at or after `until`."""
    if until == INF or at >= until:
        return at
    return at + math.ceil((until - at) / step) * step


@dataclass(frozen=True)
class PoolArrays:
    """The pools as the compiled kernels read them: pool p's nodes are `flat[ptr[p]:ptr[p + 1]]`
    (ascending), `gpus[p]` GPUs per node; `widest` is the most nodes one allocation can span."""

    ptr: npt.NDArray[np.int64]
    flat: npt.NDArray[np.int64]
    gpus: npt.NDArray[np.int64]
    widest: int

    @staticmethod
    def of(pools: Sequence[Pool]) -> PoolArrays:
        sizes = [len(pool.nodes) for pool in pools]
        ptr = np.zeros(len(pools) + 1, dtype=np.int64)
        ptr[1:] = np.cumsum(sizes)
        flat = np.array([n for pool in pools for n in pool.nodes], dtype=np.int64)
        gpus = np.array([pool.gpus for pool in pools], dtype=np.int64)
        return PoolArrays(ptr, flat, gpus, max(sizes, default=1))


def packed(demand: Demand) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """A demand's pools and per-GPU CPUs and memory as the kernels read them."""
    return (
        np.array(demand.pools, dtype=np.int64),
        np.array(demand.cpu_per_gpu, dtype=np.float64),
        np.array(demand.mem_per_gpu, dtype=np.float64),
    )


def releases(
    running: Sequence[tuple[float, Allocation]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
    """Running jobs as a profile reads them: per slice, the job's time limit's end and (node, GPUs, CPUs,
    memory)."""
    ends = [end for end, alloc in running for _ in alloc]
    return np.array(ends, dtype=np.float64), slice_rows(tuple(s for _, alloc in running for s in alloc))


def slice_rows(alloc: Allocation) -> npt.NDArray[np.int64]:
    """An allocation as the kernels read it: (node, GPUs, CPUs, memory) per slice."""
    return np.array([(s.node, s.gpus, s.cpus, s.mem_mb) for s in alloc], dtype=np.int64).reshape(-1, 4)


class Profile:
    """Free capacity per node over time, as sched/backfill plans it: `cap[k]` holds the free GPUs, CPUs
    and memory of every node during [times[k], times[k+1]), the first interval starting now. Running jobs
    (`released`: per slice, its job's time-limit end and (node, GPUs, CPUs, memory)) give their resources
    back at their time limit (a job past its limit, at the next `bf_resolution` grid point);
    reservations take them for their duration. The searches and reservations are
    compiled (`sim/kernels.py`); a whole pass runs there (`plan`)."""

    def __init__(
        self,
        now: float,
        free: FreeCapacity,
        resolution_s: float,
        released: Released,
        pools: Sequence[Pool],
        arrays: PoolArrays,
        room: int = 64,
        select: str = "pack",
        whole_nodes: bool = False,
    ) -> None:
        self.now = now
        self.select = CONS_TRES if select == "cons_tres" else PACK
        self.whole_nodes = whole_nodes
        self.resolution = resolution_s
        self.pools = pools
        self.arrays = arrays
        ends, slices = released
        # Rows live in arrays with room to spare (a reservation adds up to two): `size` are in use.
        free_now = np.array((free.gpus, free.cpus, free.mem), dtype=np.int64)
        self._t, self._slot, self._cap, self.size = build_profile(
            now, resolution_s, ends, slices, free_now, room
        )

    @property
    def times(self) -> npt.NDArray[np.float64]:
        return self._t[: self.size]

    @property
    def cap(self) -> npt.NDArray[np.int64]:
        """The rows' capacity in time order (a copy: the kernels keep rows out of order, `sim/kernels.py`)."""
        return self._cap[self._slot[: self.size]]

    def grid(self, t: float) -> float:
        """`t` rounded up to the plan's time grid (absolute multiples of the resolution)."""
        return grid(t, self.resolution)

    def _room(self, rows: int) -> None:
        if self.size + rows > len(self._t):
            grow = max(rows, len(self._t))
            self._t = np.concatenate((self._t, np.zeros(grow)))
            self._slot = np.concatenate((self._slot, np.zeros(grow, dtype=np.int64)))
            self._cap = np.concatenate((self._cap, np.zeros((grow, *self._cap.shape[1:]), dtype=np.int64)))

    def reserve(self, alloc: Allocation, start: float, end: float) -> None:
        """As a pass reserves: a job that starts now holds its slices until its limit; a later start is
        recorded on the resolution grid (`record`), on whole nodes when the profile plans so."""
        self._room(2)
        self.size = hold(
            self._t, self._slot, self._cap, self.size, self.now, self.resolution, start, end,
            slice_rows(alloc), self.whole_nodes,
        )  # fmt: skip

    def earliest(
        self, demand: Demand, limit: float, horizon: float, not_before: float
    ) -> tuple[float, float, Allocation] | None:
        """The first row start in [not_before, horizon] from which the job fits until its time limit:
        (start, end (start + limit), allocation as `place(..., "pack")` picks it on the least free capacity
        over that span)."""
        a = self.arrays
        out = np.zeros((a.widest, 4), dtype=np.int64)
        row, end, count = earliest_start(
            self.times, self._slot[: self.size], self._cap, limit, horizon, not_before, demand.gpus,
            *packed(demand), a.ptr, a.flat, a.gpus, out, self.select,
        )  # fmt: skip
        if row < 0:
            return None
        return float(self.times[row]), float(end), _allocation(out[:count])

    def plan(
        self, jobs: Sequence[tuple[Demand, float]], shapes: ShapeTable, horizon: float
    ) -> list[Allocation | None]:
        """One backfill pass over (demand, time limit) in priority order: every job planned and reserved
        within the horizon; returns the allocation of each job that starts now (None for the others).
        `shapes` numbers demand shapes (kept by the caller across passes)."""
        asks = [(demand.gpus, limit, shapes.number(demand)) for demand, limit in jobs]
        plan: list[Allocation | None] = [None] * len(asks)
        for j, alloc in self.plan_columns(
            np.array(asks, dtype=np.float64).reshape(len(asks), 3), shapes, horizon
        ):
            plan[j] = alloc
        return plan

    def plan_columns(
        self, columns: npt.NDArray[np.float64], shapes: ShapeTable, horizon: float
    ) -> list[tuple[int, Allocation]]:
        """`plan` for jobs given as one float64 array [jobs, 3] of (GPUs, time limit, shape number in
        `shapes`), which it does not change; returns only the jobs that start now, as (index, allocation)
        in order: a pass starts a few of the hundreds it tests (its caller visiting every tested job cost
        about 2% of ITP's base side)."""
        a = self.arrays
        n = len(columns)
        self._room(2 * n)
        gpus, shape = columns[:, 0].astype(np.int64), columns[:, 2].astype(np.int64)
        # Not zeroed: the kernel reads only the slices it wrote, so the outputs do not depend on what the
        # array held (tests/sim/test_backfill_profile.py), and zeroing a congested queue's rows (145 KB
        # on a Philly window) at every pass costs 4-8 us.
        slices = np.empty((n, a.widest, 4), dtype=np.int64)
        started, self.size = backfill_pass(
            self._t, self._slot, self._cap, self.size, self.now, horizon, self.resolution, a.ptr, a.flat,
            a.gpus, gpus, columns[:, 1].copy(), shape, *shapes.arrays(), slices, self.select,
            self.whole_nodes,
        )  # fmt: skip
        return [(j, _allocation(slices[j, : started[j]])) for j in np.flatnonzero(started).tolist()]


class ShapeTable:
    """Demand shapes numbered as they are first seen, with what the backfill kernel reads of each: shape
    s's pools and per-GPU CPUs and memory (jobs of one shape share them, `Demand.shape`). Kept for a whole
    run, so a pass hashes no demand and copies no per-job pool lists."""

    def __init__(self) -> None:
        self._number: dict[tuple[object, ...], int] = {}
        self._ptr = [0]
        self._pools: list[int] = []
        self._cpg: list[float] = []
        self._mpg: list[float] = []
        self._arrays: ShapeArrays | None = None

    def number(self, demand: Demand) -> int:
        s = self._number.get(demand.shape)
        if s is None:
            s = self._number[demand.shape] = len(self._ptr) - 1
            self._pools += demand.pools
            self._cpg += demand.cpu_per_gpu
            self._mpg += demand.mem_per_gpu
            self._ptr.append(len(self._pools))
            self._arrays = None
        return s

    def arrays(self) -> ShapeArrays:
        if self._arrays is None:
            self._arrays = (
                np.array(self._ptr, dtype=np.int64),
                np.array(self._pools, dtype=np.int64),
                np.array(self._cpg, dtype=np.float64),
                np.array(self._mpg, dtype=np.float64),
            )
        return self._arrays


def _allocation(rows: npt.NDArray[np.int64]) -> Allocation:
    return tuple(Slice(int(n), int(g), int(c), int(m)) for n, g, c, m in rows.tolist())
