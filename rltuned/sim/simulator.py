"""The trace-driven cluster simulator: arrivals and completions on a heap, EASY backfilling, greedy placement.

The engine knows nothing about policies; the scheduling pass asks the policy for an order and the placer
for an allocation; the run's capacity (`sim/capacity.py`) counts what starts and completions change.
EASY backfilling (`sim/easy.py`): the first job in priority order that does not fit (the head) gets a
reservation, computed from the running jobs' *estimated* ends; a later job may start now only if it fits
and either ends (by its estimate) before the reservation or uses none of the resources the head will need
on its reserved nodes. Without backfilling (the paper's setting) the head blocks the queue and stays the
head until it starts: a job that arrives later, or moves ahead in a dynamic priority order, waits behind
it, as in the RLScheduler simulator the paper's code builds on.

`Simulator.episode` is the paper-replication mode: the same simulation, but the job to start next is
chosen one job at a time by the caller (the RL agent). A chosen job that does not fit becomes the head
by the same rules, so choosing is never a backfill the base policy does not get: without backfilling it
blocks every other job until it starts, and no choice is asked meanwhile (otherwise the chooser, asked
again at the next arrival or completion, could pick a smaller job that fits, and "pick any job that
fits" is a backfill: a chooser taking FCFS's first job that fits cut FCFS's bounded slowdown from 549
to 47).

A job that outlives its estimate keeps running: estimates are predictions here, not kill limits, and an
overdue job counts as ending "now" when reservations are computed.
"""

from __future__ import annotations

import bisect
from array import array
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

from rltuned.domain import Allocation, ClusterSnapshot, ClusterSpec, Job, PriorityContext, RunningJob
from rltuned.errors import SolverError
from rltuned.placement.greedy import Caps, place
from rltuned.placement.milp import MilpConfig, milp_place
from rltuned.placement.pools import Demand, build_pools, demands_for, node_pool_index
from rltuned.policies.base import Policy
from rltuned.policies.inputs import reads_history, time_invariant
from rltuned.sim.capacity import Capacity
from rltuned.sim.easy import Easy, Reservation
from rltuned.sim.engine import Engine
from rltuned.sim.history import HistoryTracker

PLACEMENTS = ("pack", "spread", "milp")
FINISH, ARRIVAL = 0, 1  # completions first at equal times, so freed resources are seen by arrivals
INF = float("inf")
FEW = 8
"""Up to this many jobs started from the middle of the queue are removed one by one (a scan each); more,
and the queue is rebuilt once."""


@dataclass(frozen=True)
class SimConfig:
    placement: str = "pack"
    backfill: bool = True
    backfill_depth: int = 500
    """Queued jobs examined per backfill pass after the head (Slurm's bf_max_job_test)."""
    fairshare_half_life_s: float = 7 * 24 * 3600.0
    milp: MilpConfig = field(default_factory=MilpConfig)
    """With placement "milp": the top-K ranked jobs are placed jointly; backfill and fallback use pack."""
    incremental: bool = True
    """Reuse the head's reservation when only arrivals happened (faster). A full pass may recompute a
    slightly different reservation (an overdue job moves the shadow time), so runs that must match an
    `Episode` decision for decision (the RL base side) turn this off."""

    def __post_init__(self) -> None:
        if self.placement not in PLACEMENTS:
            raise ValueError(f"placement must be one of {PLACEMENTS}, got {self.placement!r}")
        if self.backfill_depth < 0:
            raise ValueError(f"backfill_depth must be >= 0, got {self.backfill_depth}")


class _Job:
    """A job's mutable life in one run."""

    __slots__ = (
        "alloc",
        "demand",
        "end",
        "est",
        "gpus",
        "group",
        "idx",
        "job",
        "key",
        "runtime",
        "shape",
        "start",
    )

    def __init__(self, idx: int, job: Job, demand: Demand, group: int, shape: int) -> None:
        self.idx = idx
        self.job = job
        self.demand = demand
        self.gpus = demand.gpus
        self.group = group  # the run's number for the demand's set of eligible pools
        self.shape = shape  # the run's number for `demand.shape`
        self.est = job.estimate
        self.runtime = job.runtime if job.runtime is not None else job.estimate
        self.key = 0.0
        self.start = -1.0
        self.end = -1.0
        self.alloc: Allocation = ()


class JobRecord(NamedTuple):
    """A finished job: when it ran and where. A named tuple like `Slice`, for the same reason: a run
    builds one per job when it ends, and a tuple builds in half the time of a frozen dataclass."""

    job: Job
    start: float
    end: float
    allocation: Allocation

    @property
    def wait(self) -> float:
        return self.start - self.job.submit


@dataclass(frozen=True)
class SimResult:
    """Records of the measured jobs; `background` holds warm-up jobs, which count only for utilization."""

    cluster: ClusterSpec
    records: tuple[JobRecord, ...]
    dropped: tuple[Job, ...]
    background: tuple[JobRecord, ...] = ()
    promised: dict[int, float] = field(default_factory=dict)
    """Job id -> the start time its first EASY reservation promised (for checking the guarantee)."""
    solver_calls: int = 0
    solver_fallbacks: int = 0
    """MILP solves that failed or ran over their time limit; those passes placed greedily (pack)."""
    guarded: frozenset[int] = frozenset()
    """Jobs the daemon loop's starvation guard acted on at some tick (`core/guard.py`)."""


class Simulator:
    def __init__(self, cluster: ClusterSpec, policy: Policy, config: SimConfig | None = None) -> None:
        self.cluster = cluster
        self.policy = policy
        self.config = config or SimConfig()
        self.pools = build_pools(cluster)
        self._node_pool = node_pool_index(cluster, self.pools)

    def run(self, jobs: Sequence[Job], warmup: int = 0) -> SimResult:
        """Simulate `jobs` from an idle cluster; the first `warmup` jobs load it but are not measured."""
        return self._new_run(jobs, warmup).execute()

    def episode(self, jobs: Sequence[Job], warmup: int = 0) -> Episode:
        """The paper-replication mode: the same simulation, but the job to start next is asked of the
        caller (see `Episode`: without backfilling, a chosen job that does not fit blocks until it starts)."""
        return Episode(self._new_run(jobs, warmup, choosing=True))

    def _new_run(self, jobs: Sequence[Job], warmup: int, choosing: bool = False) -> _Run:
        if not 0 <= warmup <= len(jobs):
            raise ValueError(f"warmup must be in [0, {len(jobs)}], got {warmup}")
        return _Run(self, jobs, warmup, choosing)


class Episode:
    """The paper-replication mode: a simulation driven one job at a time (the RL environment's view).

    At each decision the queue holds at least two jobs; `snapshot()` shows the state (pending jobs in
    base-policy order) and `choose(job_id)` names the job to start next. If it fits, it starts and the
    next decision follows at the same instant; if not, it becomes the head. With EASY backfilling it
    waits with a reservation, the other jobs backfill behind it in base order, and the next event asks
    again. Without backfilling it is committed: nothing else starts until it has, and no decision is
    asked until then, so the chooser cannot backfill implicitly by naming a smaller job at the next event.
    Always choosing the base order's first job reproduces `Simulator.run` (with `incremental=False`).
    """

    def __init__(self, run: _Run) -> None:
        self._run = run
        self._loop = run.loop()
        self.now: float | None = None
        self.result: SimResult | None = None
        self._done_seen = 0
        self._done_cost = 0.0
        self._advance(None)

    @property
    def done(self) -> bool:
        return self.result is not None

    def snapshot(self) -> ClusterSnapshot:
        if self.now is None:
            raise RuntimeError("the episode is over")
        return self._run.snapshot(self.now)

    def waited(self, weight: Callable[[Job], float]) -> float:
        """Sum over the measured jobs that have arrived of weight(job) x time waited so far (until they
        started, or until now): the waiting cost accrued up to this decision, so that a reward can be
        paid out as the cost accrues instead of once at the end (warm-up jobs are not measured). The
        finished jobs' part is kept between calls, so one episode takes one weight."""
        if self.result is not None:
            return sum(r.wait * weight(r.job) for r in self.result.records)
        run, now = self._run, self.now
        assert now is not None
        for entry in run.done[self._done_seen :]:
            if entry.idx >= run.warmup:
                self._done_cost += (entry.start - entry.job.submit) * weight(entry.job)
        self._done_seen = len(run.done)
        cost = self._done_cost
        for idx in run.capacity.running_indices():
            if idx >= run.warmup:
                entry = run.by_idx[idx]
                cost += (entry.start - entry.job.submit) * weight(entry.job)
        for entry in run.queue:
            if entry.idx >= run.warmup:
                cost += (now - entry.job.submit) * weight(entry.job)
        return cost

    def choose(self, job_id: int) -> None:
        if self.done:
            raise RuntimeError("the episode is over")
        if job_id not in self._run.queued_ids():
            raise ValueError(f"job {job_id} is not pending now")
        self._advance(job_id)

    def _advance(self, job_id: int | None) -> None:
        try:
            self.now = self._loop.send(job_id) if job_id is not None else next(self._loop)
        except StopIteration:
            self.now = None
            self.result = self._run.result()


class _Run:
    """One simulation: the mutable state lives here, never in the Simulator."""

    def __init__(self, sim: Simulator, jobs: Sequence[Job], warmup: int, choosing: bool = False) -> None:
        self.sim = sim
        self.warmup = warmup
        self.choosing = choosing
        self.policy = sim.policy
        self.cfg = sim.config
        self.capacity = Capacity(sim.cluster, sim.pools, sim._node_pool)
        self.total_gpus = sim.cluster.total_gpus
        self.nodes = len(sim.cluster.nodes)
        self.origin = min((j.submit for j in jobs), default=0.0)
        # The head job's reservation (shadow time, caps on reserved nodes), valid until resources are freed
        # or the head changes; arrivals behind the head are backfilled against it without a full pass.
        self.reservation: Reservation | None = None
        # Without backfilling: the head that did not fit, which blocks the queue until it starts.
        self.committed: _Job | None = None
        self.promised: dict[int, float] = {}
        self.greedy = "pack" if self.cfg.placement == "milp" else self.cfg.placement
        self.solver_calls = 0
        self.solver_fallbacks = 0
        self.history = HistoryTracker(self.origin, self.cfg.fairshare_half_life_s)
        # Only a key that reads the accounting, or a chooser's snapshot, sees the finished jobs.
        self.keeps_history = choosing or _reads(reads_history, self.policy.name, unknown=True)
        self.static_history = self.history.view(self.origin, None)
        self.fixed_context: PriorityContext | None = None
        if not self.policy.dynamic and _reads(time_invariant, self.policy.name, unknown=False):
            self.fixed_context = PriorityContext(
                self.origin, self.total_gpus, self.static_history, self.origin, self.nodes
            )
        self.engine: Engine[_Job] = Engine()
        self.queue: list[_Job] = []
        self.queue_idx = array("q")
        """The queue's job indices, in its order: what the backfill pass scans (`Easy.backfill`)."""
        self.queue_keys: list[tuple[float, float, int]] = []
        self.by_idx: dict[int, _Job] = {}
        self.done: list[_Job] = []
        self.dropped: list[Job] = []
        groups: dict[tuple[int, ...], int] = {}
        shapes: dict[tuple[object, ...], int] = {}
        numbered: dict[int, tuple[int, int]] = {}  # id(demand) -> (group, shape): jobs share demands
        by_idx = self.by_idx
        for idx, (job, demand) in enumerate(zip(jobs, demands_for(jobs, sim.pools), strict=True)):
            if demand is None:
                if idx >= warmup:
                    self.dropped.append(job)
                continue
            number = numbered.get(id(demand))
            if number is None:
                group = groups.setdefault(demand.pools, len(groups))
                number = numbered[id(demand)] = (group, shapes.setdefault(demand.shape, len(shapes)))
            by_idx[idx] = _Job(idx, job, demand, *number)
        queued = by_idx.values()
        self.engine.schedule_all((e.job.submit, ARRIVAL, e) for e in queued)
        self.easy = Easy(self.capacity, list(groups), len(shapes), self.greedy, queued, len(jobs))

    def execute(self) -> SimResult:
        for _ in self.loop():
            raise AssertionError("a run without a chooser asked for a decision")
        return self.result()

    def loop(self) -> Generator[float, int, None]:
        """The event loop; yields the current time whenever a chooser must pick the next job."""
        engine = self.engine
        while len(engine):
            batch = engine.pop_simultaneous()
            now = engine.now
            freed = False
            arrived: list[_Job] = []
            for kind, entry in batch:
                if kind == FINISH:
                    self._finish(entry)
                    freed = True
                else:
                    self._enqueue(entry, now)
                    arrived.append(entry)
            if not self.queue:
                continue
            if self.choosing:
                yield from self._choice_pass(now)
            elif freed or not self.cfg.incremental or not self._backfill_arrivals(arrived, now):
                self._schedule(now)

    def result(self) -> SimResult:
        done = sorted(self.done, key=lambda e: e.idx)
        records = [JobRecord(e.job, e.start, e.end, e.alloc) for e in done]
        cut = sum(1 for e in done if e.idx < self.warmup)
        return SimResult(
            self.sim.cluster,
            tuple(records[cut:]),
            tuple(self.dropped),
            tuple(records[:cut]),
            self.promised,
            self.solver_calls,
            self.solver_fallbacks,
        )

    # --- queue -------------------------------------------------------------------------------------
    def _context(self, now: float) -> PriorityContext:
        """Usage (fair-share) changes continuously, so only dynamic policies that read it pay for computing
        it; a static policy's view holds live runtime means only, so one serves the whole run, and a
        time-invariant one does not read the clock either, so one context does."""
        if self.fixed_context is not None:
            return self.fixed_context
        if not self.policy.dynamic or not self.keeps_history:
            return PriorityContext(now, self.total_gpus, self.static_history, self.origin, self.nodes)
        history = self.history.view(now, self._running_jobs())
        return PriorityContext(now, self.total_gpus, history, self.origin, self.nodes)

    def _running_jobs(self) -> list[_Job]:
        return [self.by_idx[idx] for idx in self.capacity.running_indices()]

    def _enqueue(self, entry: _Job, now: float) -> None:
        if self.policy.dynamic:
            self.queue.append(entry)
            self.queue_idx.append(entry.idx)
            return
        entry.key = self.policy.key(entry.job, self._context(now))
        sort_key = (entry.key, entry.job.submit, entry.idx)
        at = bisect.bisect(self.queue_keys, sort_key)
        self.queue_keys.insert(at, sort_key)
        self.queue.insert(at, entry)
        self.queue_idx.insert(at, entry.idx)

    def _ordered(self, now: float) -> list[_Job]:
        if not self.policy.dynamic:
            return self.queue
        ctx = self._context(now)
        key = self.policy.key
        return sorted(self.queue, key=lambda e: (key(e.job, ctx), e.job.submit, e.idx))

    # --- scheduling pass ---------------------------------------------------------------------------
    def _schedule(self, now: float) -> None:
        order = self._ordered(now)
        committed = self.committed
        if committed is not None and order[0] is not committed:
            order = [committed, *(e for e in order if e is not committed)]
        started: set[int] = set()
        first = self._start_milp_prefix(order, now, started) if self.cfg.placement == "milp" else 0
        head_at = len(order)
        for i in range(first, len(order)):
            entry = order[i]
            alloc = self._place(entry)
            if alloc is None:
                head_at = i
                break
            self._start(entry, alloc, now)
            started.add(entry.idx)
        self.reservation = None
        self.committed = None
        if head_at < len(order) and not self.cfg.backfill:
            self.committed = order[head_at]
        elif head_at < len(order):
            head = order[head_at]
            self.reservation = reservation = self.easy.reserve(head.demand, now, blocked=True)
            self.promised.setdefault(head.job.id, reservation.shadow)
            lo, hi = head_at + 1, head_at + 1 + self.cfg.backfill_depth
            candidates = order[lo:hi]
            kept = self.queue_idx[lo:hi] if order is self.queue else None
            self.easy.backfill(candidates, reservation, now, self._start, started, kept)
        if started:
            self._drop_started(started)

    def _start_milp_prefix(self, order: list[_Job], now: float, started: set[int]) -> int:
        """Start the longest rank-order prefix the MILP places jointly, K jobs per solve; returns its length.

        Only a prefix is taken so that rank order and the EASY reservation keep their meaning: a job the
        MILP placed behind a deferred one is left to the backfill pass, which checks the reservation.
        """
        k = self.cfg.milp.k
        done = 0
        while True:
            chunk = order[done : done + k]
            fitting = [e for e in chunk if self.capacity.may_fit(e.demand)]
            if len(fitting) < 2 or not chunk or chunk[0] not in fitting:
                return done
            lookahead = [e.demand for e in order[done + k : done + 2 * k]]
            self.solver_calls += 1
            try:
                allocs = milp_place(
                    [e.demand for e in chunk], lookahead, self.sim.pools, self.capacity.free, self.cfg.milp
                )
            except SolverError:
                self.solver_fallbacks += 1
                return done
            for entry, alloc in zip(chunk, allocs, strict=True):
                if alloc is None:
                    return done
                self._start(entry, alloc, now)
                started.add(entry.idx)
                done += 1

    def queued_ids(self) -> set[int]:
        return {e.job.id for e in self.queue}

    def _choice_pass(self, now: float) -> Generator[float, int, None]:
        """Start chosen jobs while they fit; the first that does not becomes the head: reserved, with
        backfilling; committed, without (tried first at later events, with no decision asked meanwhile)."""
        while self.queue:
            order = self._ordered(now)
            chosen = self.committed
            if chosen is None:
                chosen = order[0]
                if len(order) > 1:
                    job_id = yield now
                    chosen = next(e for e in order if e.job.id == job_id)
            alloc = self._place_chosen(chosen, order)
            if alloc is None:
                self.reservation = None
                if not self.cfg.backfill:
                    self.committed = chosen
                else:
                    # The solver may leave a job unplaced that the greedy placer would place.
                    blocked = self.cfg.placement != "milp"
                    self.reservation = reservation = self.easy.reserve(chosen.demand, now, blocked)
                    self.promised.setdefault(chosen.job.id, reservation.shadow)
                    started: set[int] = set()
                    others = [e for e in order if e is not chosen][: self.cfg.backfill_depth]
                    self.easy.backfill(others, reservation, now, self._start, started)
                    if started:
                        self._drop_started(started)
                return
            self.committed = None
            self._start(chosen, alloc, now)
            self._drop_started({chosen.idx})

    def _place_chosen(self, chosen: _Job, order: list[_Job]) -> Allocation | None:
        if self.cfg.placement != "milp" or not self.capacity.may_fit(chosen.demand):
            return self._place(chosen)
        lookahead = [e.demand for e in order if e is not chosen][: self.cfg.milp.k]
        self.solver_calls += 1
        try:
            placed = milp_place([chosen.demand], lookahead, self.sim.pools, self.capacity.free, self.cfg.milp)
            return placed[0]
        except SolverError:
            self.solver_fallbacks += 1
            return self._place(chosen)

    def _backfill_arrivals(self, arrived: list[_Job], now: float) -> bool:
        """Backfill new arrivals against the cached reservation; False when a full pass is needed.

        Valid only for static priorities and when no resources were freed: then the jobs already queued
        cannot start now, and the head and its reservation stand.
        """
        if self.policy.dynamic or self.reservation is None:
            return False
        head = self.queue[0]
        if any(e is head for e in arrived):
            return False
        if len(self.queue) > self.cfg.backfill_depth + 1:
            return False  # earlier backfills may have moved unexamined jobs into the backfill window
        started: set[int] = set()
        self.easy.backfill(arrived, self.reservation, now, self._start, started)
        if started:
            self._drop_started(started)
        return True

    def _place(self, entry: _Job, caps: Caps | None = None) -> Allocation | None:
        if not self.capacity.may_fit(entry.demand):
            return None
        return place(entry.demand, self.sim.pools, self.capacity.free, self.greedy, caps)

    # --- job lifecycle -----------------------------------------------------------------------------
    def _start(self, entry: _Job, alloc: Allocation, now: float) -> None:
        entry.start = now
        entry.alloc = alloc
        self.capacity.take(alloc, now + entry.est, entry.idx)
        self.engine.schedule(now + entry.runtime, FINISH, entry)

    def _finish(self, entry: _Job) -> None:
        now = self.engine.now
        entry.end = now
        self.capacity.give(entry.alloc, entry.start + entry.est, entry.idx)
        if self.keeps_history:
            self.history.record(entry.job, entry.start, now)
        self.done.append(entry)

    def _drop_started(self, started: set[int]) -> None:
        queue = self.queue
        prefix = 0
        while prefix < len(queue) and queue[prefix].idx in started:
            prefix += 1
        if prefix == len(started):  # the common case: the jobs at the front started
            del queue[:prefix]
            del self.queue_idx[:prefix]
            if not self.policy.dynamic:
                del self.queue_keys[:prefix]
            return
        if len(started) - prefix <= FEW:  # backfilled from the middle: find each with a C-level scan
            by_idx = self.by_idx
            for at in sorted((queue.index(by_idx[idx]) for idx in started), reverse=True):
                del queue[at]
                del self.queue_idx[at]
                if not self.policy.dynamic:
                    del self.queue_keys[at]
            return
        keep = [i for i, e in enumerate(queue) if e.idx not in started]
        self.queue = [queue[i] for i in keep]
        self.queue_idx = array("q", [e.idx for e in self.queue])
        if not self.policy.dynamic:
            self.queue_keys = [self.queue_keys[i] for i in keep]

    # --- observation -------------------------------------------------------------------------------
    def snapshot(self, now: float) -> ClusterSnapshot:
        running = tuple(RunningJob(e.job, e.start, e.alloc) for e in self._running_jobs())
        return ClusterSnapshot(
            now=now,
            cluster=self.sim.cluster,
            free_gpus=tuple(self.capacity.free.gpus),
            free_cpus=tuple(self.capacity.free.cpus),
            free_mem_mb=tuple(self.capacity.free.mem),
            pending=tuple(e.job for e in self._ordered(now)),
            running=running,
            history=self.history.view(now, self._running_jobs()),
            origin=self.origin,
        )


def _reads(rule: Callable[[str], bool], policy: str, unknown: bool) -> bool:
    """`rule` (`policies.inputs.reads_history` or `time_invariant`) of `policy`, and `unknown` for a
    policy the table does not know (a caller's own): the answer that is safe for it."""
    try:
        return rule(policy)
    except KeyError:
        return unknown
