"""The Slurm that sits behind the daemon: priorities, the main scheduler and sched/backfill, on a clock.

What the daemon changes is a job's priority (a fixed `Priority=`, or a `SiteFactor` added to multifactor's
sum) and where it may run (`ExcNodeList=`); Slurm's own schedulers then decide what starts. This module
models them with the `slurm.conf` parameters that change the outcome (docs/simulator.md lists each):

- **Priority.** A job the daemon has not written carries multifactor's priority (age, fair-share, job
  size, partition, with `PriorityWeight*` and `PriorityMaxAge`), plus any SiteFactor written. A fixed
  priority replaces the sum. Jobs are considered by priority, then job id (submit order).
- **The main scheduler** (`sched_interval`, and after every submit, completion and job update) starts
  jobs in priority order until the first that does not fit; it stops there (one partition).
- **sched/backfill** (`bf_interval`) walks the queue in priority order, testing at most
  `bf_max_job_test` jobs. For each it finds the earliest start in an availability profile built from
  the running jobs' time limits (times rounded up to `bf_resolution`) and the reservations made so far
  in the pass; a job that can start now without delaying any of them starts, any other job whose start
  lies within `bf_window` is reserved there. Every tested job is planned, not only the first blocked one.

The daemon's tick (`loop` yields a snapshot every `interval_s`) and the schedulers run on their own
grids; the scheduler passes take no simulated time (so `bf_continue` changes nothing here).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np
import numpy.typing as npt

from rltuned.core.plan import Action, Plan
from rltuned.domain import Allocation, ClusterSnapshot, ClusterSpec, Job, PriorityContext, RunningJob, Slice
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, Pool, build_pools, demand_for
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.engine import Engine
from rltuned.sim.history import HistoryTracker
from rltuned.sim.kernels import earliest_on_nodes, earliest_on_one_node, split_rows
from rltuned.sim.simulator import JobRecord, SimResult
from rltuned.slurm.hostlist import expand
from rltuned.slurm.parse import natural_key

FINISH, ARRIVAL = 0, 1
INF = float("inf")


@dataclass(frozen=True)
class SlurmParams:
    """The slurm.conf settings the model follows; defaults are Slurm 22.05's."""

    backfill: bool = True
    """SchedulerType=sched/backfill (False: sched/builtin, the main scheduler alone)."""
    sched_interval_s: float = 60.0
    """SchedulerParameters=sched_interval: the main scheduler's periodic pass."""
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

    def __post_init__(self) -> None:
        for name in ("sched_interval_s", "bf_interval_s", "bf_resolution_s", "bf_window_min"):
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


class _Job:
    """A job's life in one run: what Slurm holds for it (priority, site factor, excluded nodes)."""

    __slots__ = (
        "alloc",
        "demand",
        "end",
        "fixed",
        "idx",
        "job",
        "limit",
        "runtime",
        "shown",
        "shown_with",
        "site",
        "start",
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
        self.shown = replace(job, runtime=None, time_limit=self.limit, priority=None)
        """The job as squeue shows it: no true runtime; the priority is set per snapshot."""
        self.shown_with = self.shown

    def shown_at(self, priority: int) -> Job:
        """The job as squeue shows it with this priority (kept while the priority does not change)."""
        if self.shown_with.priority != priority:
            self.shown_with = replace(self.shown, priority=priority)
        return self.shown_with


class SlurmRun:
    """One simulation of `jobs` under Slurm's schedulers, with a daemon tick every `interval_s`.

    `loop()` yields the snapshot at every tick with pending jobs and expects the tick's `Plan` back
    (`None`: the daemon wrote nothing). Without a daemon, `run()` drives it with empty plans.
    """

    def __init__(
        self,
        cluster: ClusterSpec,
        jobs: Sequence[Job],
        warmup: int = 0,
        params: SlurmParams | None = None,
        interval_s: float = 60.0,
    ) -> None:
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
        self._pool_nodes = [np.array(pool.nodes, dtype=np.int64) for pool in self.pools]
        self._node_index = {n.name: i for i, n in enumerate(cluster.nodes)}
        nodes = cluster.nodes
        self.free = FreeCapacity([n.gpus for n in nodes], [n.cpus for n in nodes], [n.mem_mb for n in nodes])
        self.total_gpus = cluster.total_gpus
        self.origin = min((j.submit for j in jobs), default=0.0)
        self.history = HistoryTracker(self.origin, self.params.fairshare_half_life_s)
        self.engine: Engine[_Job] = Engine()
        self.queue: list[_Job] = []
        self.by_id: dict[int, _Job] = {}
        self.running: dict[int, _Job] = {}
        self.done: list[_Job] = []
        self.dropped: list[Job] = []
        self._done_seen, self._done_cost = 0, 0.0
        self.changed = True
        """Whether anything a backfill pass reads changed since the last pass (see `_backfill`)."""
        self._last_pass: list[int] = []
        for idx, job in enumerate(jobs):
            demand = demand_for(job, self.pools)
            if demand is None:
                if idx >= warmup:
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
        next_tick = next_sched = next_bf = start
        while len(self.engine) or self.queue:
            t_event = self.engine.peek()
            if not self.queue:  # nothing to decide: the grids skip ahead to the next event
                next_tick = _align(next_tick, t_event, self.interval_s)
                next_sched = _align(next_sched, t_event, p.sched_interval_s)
                next_bf = _align(next_bf, t_event, p.bf_interval_s)
            now = min(t_event, next_tick, next_sched, next_bf if p.backfill else INF)
            if now == t_event:
                self._events()
                self._main(now)
            elif now == next_tick:
                next_tick += self.interval_s
                plan = yield self.snapshot(now)
                if plan is not None and plan.actions:
                    self.apply(plan.actions)
                    self._main(now)  # Slurm queues a scheduler run after job updates
            elif now == next_sched:
                next_sched += p.sched_interval_s
                self._main(now)
            else:
                next_bf += p.bf_interval_s
                self._backfill(now)

    def _events(self) -> None:
        for kind, entry in self.engine.pop_simultaneous():
            if kind == FINISH:
                self._finish(entry)
            else:
                self.queue.append(entry)
        self.changed = True

    # --- what the daemon changes --------------------------------------------------------------------
    def apply(self, actions: Sequence[Action]) -> None:
        """The plan's `scontrol update`s, all accepted (every job in a plan is pending at its tick)."""
        self.changed = True
        for action in actions:
            entry = self.by_id[action.job_id]
            if action.kind == "priority":
                assert isinstance(action.value, int)
                entry.fixed = action.value
            elif action.kind == "site_factor":
                assert isinstance(action.value, int)
                entry.site = action.value
            elif action.kind == "excluded_nodes":
                assert isinstance(action.value, str)
                entry.demand = self._restricted(entry.job, action.value)
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
    def priority(self, entry: _Job, ctx: PriorityContext) -> int:
        if entry.fixed is not None:
            return entry.fixed
        return int(-self.params.priority.key(entry.job, ctx)) + entry.site

    def _context(self, now: float) -> PriorityContext:
        history = self.history.view(now, self.running.values())
        return PriorityContext(now, self.total_gpus, history, self.origin)

    def ordered(self, now: float) -> list[_Job]:
        ctx = self._context(now)
        keyed = [(-self.priority(e, ctx), e.job.id, e) for e in self.queue]
        keyed.sort(key=lambda t: (t[0], t[1]))
        return [e for _, _, e in keyed]

    # --- the schedulers -----------------------------------------------------------------------------
    def _main(self, now: float) -> None:
        """Priority order until the first job that does not fit."""
        if not self.queue:
            return
        started: list[_Job] = []
        for entry in self.ordered(now):
            alloc = place(entry.demand, self.pools, self.free, "pack")
            if alloc is None:
                break
            self._start(entry, alloc, now)
            started.append(entry)
        self._drop(started)

    def _backfill(self, now: float) -> None:
        """One sched/backfill pass. A pass that would repeat the last one is skipped: with no submit,
        start, completion or write since, no running job past its limit and the same priority order, the
        plan can only have moved later (the window slides towards the same reservations), so it starts
        nothing."""
        if not self.queue:
            return
        p = self.params
        order = self.ordered(now)[: p.bf_max_job_test]
        signature = [e.job.id for e in order]
        overdue = any(e.start + e.limit <= now for e in self.running.values())
        if not self.changed and not overdue and signature == self._last_pass:
            return
        self.changed, self._last_pass = False, signature
        running = [(e.start + e.limit, e.alloc) for e in self.running.values()]
        profile = Profile(now, self.free, p.bf_resolution_s, running, self.pools, self._pool_nodes)
        horizon = now + p.bf_window_min * 60.0
        started: list[_Job] = []
        # Reservations only take capacity away during a pass, and within a demand shape a job asking for
        # no fewer GPUs for no less time fits nowhere a smaller, shorter one did not: its earliest start is
        # no earlier than theirs (inf: beyond the window).
        seen: dict[tuple[object, ...], dict[int, Staircase]] = {}
        for entry in order:
            demand = entry.demand
            by_gpus = seen.setdefault(demand.shape, {})
            bound = max((st.at(entry.limit) for g, st in by_gpus.items() if g <= demand.gpus), default=now)
            found = None
            if bound <= horizon:
                found = profile.earliest(demand, entry.limit, horizon, max(bound, now))
            by_gpus.setdefault(demand.gpus, Staircase()).add(entry.limit, INF if found is None else found[0])
            if found is None:
                continue
            at, end, alloc = found
            profile.reserve(alloc, at, end)
            if at == now:
                self._start(entry, alloc, now)
                started.append(entry)
        self._drop(started)

    # --- job lifecycle ------------------------------------------------------------------------------
    def _start(self, entry: _Job, alloc: Allocation, now: float) -> None:
        self.changed = True
        entry.start = now
        entry.alloc = alloc
        self.free.take(alloc)
        self.running[entry.job.id] = entry
        self.engine.schedule(now + entry.runtime, FINISH, entry)

    def _finish(self, entry: _Job) -> None:
        now = self.engine.now
        entry.end = now
        self.free.give(entry.alloc)
        del self.running[entry.job.id]
        self.history.record(entry.job, entry.start, now)
        self.done.append(entry)

    def _drop(self, started: list[_Job]) -> None:
        if started:
            gone = {e.job.id for e in started}
            self.queue = [e for e in self.queue if e.job.id not in gone]

    # --- what the daemon reads ----------------------------------------------------------------------
    def snapshot(self, now: float) -> ClusterSnapshot:
        """As the Slurm adapter builds it: squeue's jobs (time limits, Slurm's current priorities, no true
        runtimes), free capacity per node, and no history or origin (squeue and sinfo carry none)."""
        ctx = self._context(now)
        pending = tuple(
            e.shown_at(self.priority(e, ctx))
            for e in sorted(self.queue, key=lambda e: (e.job.submit, e.job.id))
        )
        running = tuple(
            RunningJob(e.shown, e.start, e.alloc)
            for e in sorted(self.running.values(), key=lambda e: (e.start, e.job.id))
        )
        return ClusterSnapshot(
            now=now,
            cluster=self.cluster,
            free_gpus=tuple(self.free.gpus),
            free_cpus=tuple(self.free.cpus),
            free_mem_mb=tuple(self.free.mem),
            pending=pending,
            running=running,
        )

    def waited(self, now: float, weight: Callable[[Job], float]) -> float:
        """Sum over the measured jobs that have arrived of weight(job) x time waited so far. The finished
        jobs' part is kept between calls (it no longer changes), so one run takes one weight."""
        for entry in self.done[self._done_seen :]:
            if entry.idx >= self.warmup:
                self._done_cost += (entry.start - entry.job.submit) * weight(entry.job)
        self._done_seen = len(self.done)
        cost = self._done_cost
        for entry in self.running.values():
            if entry.idx >= self.warmup:
                cost += (entry.start - entry.job.submit) * weight(entry.job)
        for entry in self.queue:
            if entry.idx >= self.warmup:
                cost += (now - entry.job.submit) * weight(entry.job)
        return cost

    def result(self) -> SimResult:
        done = sorted(self.done, key=lambda e: e.idx)
        records = [JobRecord(e.job, e.start, e.end, e.alloc) for e in done]
        cut = sum(1 for e in done if e.idx < self.warmup)
        return SimResult(self.cluster, tuple(records[cut:]), tuple(self.dropped), tuple(records[:cut]))


def _align(at: float, until: float, step: float) -> float:
    """The first point of `at`'s grid (spacing `step`) at or after `until`."""
    if until == INF or at >= until:
        return at
    return at + math.ceil((until - at) / step) * step


class Staircase:
    """The largest value recorded at a key no greater than the one asked, for keys in any order: a
    non-decreasing step function kept as sorted keys (entries it dominates are dropped)."""

    def __init__(self) -> None:
        self.keys: list[float] = []
        self.values: list[float] = []

    def at(self, key: float) -> float:
        i = bisect.bisect_right(self.keys, key)
        return self.values[i - 1] if i else -INF

    def add(self, key: float, value: float) -> None:
        if self.at(key) >= value:
            return
        i = bisect.bisect_left(self.keys, key)
        j = i
        while j < len(self.keys) and self.values[j] <= value:
            j += 1
        self.keys[i:j] = [key]
        self.values[i:j] = [value]


class Profile:
    """Free capacity per node over time, as sched/backfill plans it: `cap[k]` holds the free GPUs, CPUs
    and memory of every node during [times[k], times[k+1]), the first interval starting now. Running jobs
    give their resources back at their time limit on the `bf_resolution` grid (a job past its limit, at
    the next grid point); reservations take them for their duration."""

    def __init__(
        self,
        now: float,
        free: FreeCapacity,
        resolution_s: float,
        running: Sequence[tuple[float, Allocation]],
        pools: Sequence[Pool],
        pool_nodes: Sequence[npt.NDArray[np.int64]],
    ) -> None:
        self.now = now
        self.resolution = resolution_s
        self.pools = pools
        self.pool_nodes = pool_nodes
        released: dict[float, list[Allocation]] = {}
        for end, alloc in running:
            at = self.grid(end)
            if at <= now:  # past its limit and still running: free from the next grid point on
                at = self.grid(now + resolution_s / 2)
            released.setdefault(at, []).append(alloc)
        times = [now, *sorted(released)]
        cap = np.zeros((len(times), 3, len(free.gpus)), dtype=np.int64)
        cap[0] = (free.gpus, free.cpus, free.mem)
        for k, t in enumerate(times[1:], start=1):
            for alloc in released[t]:
                _add(cap[k], alloc, 1)
        # Rows live in arrays with room to spare (a reservation adds up to two): `size` are in use.
        self.size = len(times)
        room = 2 * self.size + 64
        self._t = np.zeros(room)
        self._t[: self.size] = times
        self._cap = np.zeros((room, 3, len(free.gpus)), dtype=np.int64)
        self._cap[: self.size] = np.cumsum(cap, axis=0)

    @property
    def times(self) -> npt.NDArray[np.float64]:
        return self._t[: self.size]

    @property
    def cap(self) -> npt.NDArray[np.int64]:
        return self._cap[: self.size]

    def grid(self, t: float) -> float:
        """`t` rounded up to the plan's time grid (absolute multiples of the resolution)."""
        return math.ceil(t / self.resolution - 1e-9) * self.resolution

    def reserve(self, alloc: Allocation, start: float, end: float) -> None:
        if self.size + 2 > len(self._t):
            self._t = np.concatenate((self._t, np.zeros_like(self._t)))
            self._cap = np.concatenate((self._cap, np.zeros_like(self._cap)))
        k0, k1, self.size = split_rows(self._t, self._cap, self.size, start, end)
        for s in alloc:
            self._cap[k0:k1, :, s.node] -= (s.gpus, s.cpus, s.mem_mb)

    def earliest(
        self, demand: Demand, limit: float, horizon: float, not_before: float
    ) -> tuple[float, float, Allocation] | None:
        """The first row start in [not_before, horizon] from which the job fits until its time limit:
        (start, end on the grid, allocation as `place(..., "pack")` picks it on the least free capacity
        over that span).

        `place` prefers one node to several, then the fewest GPUs left over, then the pool listed first.
        So: the earliest row on one node of a pool (each pool's row and best node, compiled), unless a
        pool where the job spans nodes fits strictly earlier; that row's placement is `place`'s own."""
        times, cap = self.times, self.cap
        first = int(np.searchsorted(times, not_before, side="left"))
        last = int(np.searchsorted(times, horizon, side="right"))
        if first >= last:
            return None
        g = demand.gpus
        single: tuple[int, int, int, int] | None = None  # (row, leftover, k in demand.pools, node)
        multi = -1
        for k, p in enumerate(demand.pools):
            nodes = self.pool_nodes[p]
            if g <= self.pools[p].gpus:
                c, m = demand.slice_cpus(k, g), demand.slice_mem(k, g)
                row, i, left = earliest_on_one_node(
                    times, cap, first, last, self.resolution, limit, nodes, g, c, m
                )
                if row >= 0 and (single is None or (row, left) < single[:2]):
                    single = (row, left, k, int(nodes[i]))
            else:
                row = earliest_on_nodes(
                    times, cap, first, last, self.resolution, limit, nodes, g,
                    demand.cpu_per_gpu[k], demand.mem_per_gpu[k],
                )  # fmt: skip
                if row >= 0 and (multi < 0 or row < multi):
                    multi = row
        if multi >= 0 and (single is None or multi < single[0]):
            t = float(times[multi])
            end = self.grid(t + limit)
            j = max(int(np.searchsorted(times, end, side="left")), multi + 1)
            low = cap[multi:j].min(axis=0)
            alloc = place(
                demand, self.pools, FreeCapacity(low[0].tolist(), low[1].tolist(), low[2].tolist()), "pack"
            )
            assert alloc is not None, "the compiled count and place disagree"
            return t, end, alloc
        if single is None:
            return None
        row, _, k, node = single
        t = float(times[row])
        return t, self.grid(t + limit), (Slice(node, g, demand.slice_cpus(k, g), demand.slice_mem(k, g)),)


def _add(row: np.ndarray, alloc: Allocation, sign: int) -> None:
    for s in alloc:
        row[0, s.node] += sign * s.gpus
        row[1, s.node] += sign * s.cpus
        row[2, s.node] += sign * s.mem_mb
