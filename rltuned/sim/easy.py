"""EASY backfilling on a run's capacity: the head job's reservation, then a pass over the jobs behind it.

The head (the first job in priority order that does not fit) is promised the earliest time its demand
fits if the running jobs end as estimated: the shadow time, and on its reserved nodes what is left once
it is placed there (the caps). A later job may start now if it fits and either ends, by its estimate,
before the shadow time, or stays within the caps (it uses nothing the head will need).
"""

from __future__ import annotations

from array import array
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import NamedTuple, Protocol, TypeVar

import numpy as np
import numpy.typing as npt
from numba import njit

from rltuned.domain import Allocation, Slice
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, Pool
from rltuned.sim.capacity import Capacity

NEVER = 1 << 30  # more GPUs than any job asks for
SCAN_COMPILED_FROM = 16
"""Backfill passes over at least this many candidates scan them compiled (`next_candidate`); below it,
building the arrays costs more than the Python scan (half of Philly's passes test fewer than 8: most
are one arrival tested against the head's reservation)."""
_NO_ROOM = (NEVER, NEVER)
"""What `Easy.reserve` asks of a node outside the head's pools: more CPUs than any node has."""


class Reservation(NamedTuple):
    shadow: float
    caps: dict[int, tuple[int, int, int]]
    """Per reserved node: the GPUs, CPUs and memory a job running past the shadow time may still use."""


class Candidate(Protocol):
    """A queued job as the backfill pass reads it; `group` and `shape` are the run's numbers for its
    demand's set of pools and for `demand.shape`."""

    @property
    def demand(self) -> Demand: ...
    @property
    def gpus(self) -> int: ...
    @property
    def est(self) -> float: ...
    @property
    def group(self) -> int: ...
    @property
    def shape(self) -> int: ...
    @property
    def idx(self) -> int: ...


C = TypeVar("C", bound=Candidate)


class JobTable(NamedTuple):
    """What the backfill pass reads of each job of a run, by `Candidate.idx`: (GPUs, group, shape)
    rows and the estimates. Rows of jobs that never queue are never read."""

    rows: npt.NDArray[np.int64]
    est: npt.NDArray[np.float64]


def job_table(entries: Iterable[Candidate], size: int) -> JobTable:
    """The table of a run whose job indices are below `size`."""
    listed = list(entries)
    rows = np.zeros((size, 3), dtype=np.int64)
    est = np.zeros(size, dtype=np.float64)
    if listed:
        at = np.array([e.idx for e in listed], dtype=np.int64)
        rows[at] = np.array([(e.gpus, e.group, e.shape) for e in listed], dtype=np.int64)
        est[at] = np.array([e.est for e in listed], dtype=np.float64)
    return JobTable(rows, est)


class Easy:
    """EASY backfilling for one run: `groups` are the run's sets of eligible pools (`Candidate.group`
    indexes them), `shapes` the number of demand shapes it numbered (`Candidate.shape`), and `jobs`
    every job the run may queue, with indices below `size`."""

    __slots__ = ("_heads", "_jobs", "_size", "_table", "capacity", "failed", "greedy", "groups")

    def __init__(
        self,
        capacity: Capacity,
        groups: Sequence[tuple[int, ...]],
        shapes: int,
        greedy: str,
        jobs: Collection[Candidate],
        size: int,
    ) -> None:
        self.capacity = capacity
        self.groups = groups
        self.greedy = greedy
        self._jobs, self._size = jobs, size
        self._table: JobTable | None = None
        self._heads: dict[int, tuple[Demand, set[int], dict[int, tuple[int, int]] | None]] = {}
        """By id of a demand some head had: the demand, its pools as a set, and `_one_node_need` of
        it, which a head's every reservation reads."""
        self.failed = np.full(2 * shapes, NEVER, dtype=np.int64)
        """The fewest GPUs that failed in this pass per (shape, short) at 2 x shape + short; NEVER
        between passes (each pass resets the slots it touched)."""

    @property
    def table(self) -> JobTable:
        """The jobs as the backfill pass reads them, built at the first pass: a run whose queue never
        blocks (most windows of an HPC log) never needs it."""
        if self._table is None:
            self._table = job_table(self._jobs, self._size)
        return self._table

    def reserve(self, demand: Demand, now: float, blocked: bool = False) -> Reservation:
        """Release the running jobs in order of expected end until the head fits. The placer is asked
        only once a release touched one of the head's pools and one of them has as many free GPUs as
        the head asks for (`Capacity.may_fit`'s rule on the released capacity).

        `blocked` says the head fits on no node now (the caller's placement just failed). A head that
        every eligible pool holds on one node then starts to fit only on a node a release gives back
        to, so the placer is asked only once such a node holds it, and not at all when that release
        freed a single node, the only one that can then hold it: the same reservation, without the
        placements that must fail."""
        capacity = self.capacity
        scratch = capacity.free.copy()
        node_pool, pool_free = capacity.node_pool, capacity.pool_free.copy()
        wanted, need = self._head(demand)
        need = need if blocked else None
        gpus = demand.gpus
        for end, _, alloc in capacity.running:
            scratch.give(alloc)
            relevant = False
            for s in alloc:
                p = node_pool[s.node]
                pool_free[p] += s.gpus
                relevant = relevant or p in wanted
            if not relevant:
                continue
            for p in demand.pools:  # may_fit's rule on the released capacity
                if pool_free[p] >= gpus:
                    break
            else:
                continue
            if need is None:
                placed = place(demand, capacity.pools, scratch, self.greedy)
            else:
                holder = _holder(gpus, need, node_pool, scratch, alloc)
                if holder is None:
                    continue
                # No node held the head before this release: if it changed one node, that node is
                # the one that holds it, and the placer would pick it whatever its strategy.
                placed = (holder,) if len(alloc) == 1 else place(demand, capacity.pools, scratch, self.greedy)
            if placed is not None:
                g, c, m = scratch.gpus, scratch.cpus, scratch.mem
                caps = {
                    s.node: (g[s.node] - s.gpus, c[s.node] - s.cpus, m[s.node] - s.mem_mb) for s in placed
                }
                return Reservation(max(end, now), caps)
        raise AssertionError(
            f"a demand of {demand.gpus} GPUs cannot fit an empty cluster but was not dropped"
        )

    def _head(self, demand: Demand) -> tuple[set[int], dict[int, tuple[int, int]] | None]:
        head = self._heads.get(id(demand))
        if head is None or head[0] is not demand:  # an id is reused once its object is gone
            head = (demand, set(demand.pools), _one_node_need(demand, self.capacity.pools))
            self._heads[id(demand)] = head
        return head[1], head[2]

    def backfill(
        self,
        candidates: Sequence[C],
        reservation: Reservation,
        now: float,
        start: Callable[[C, Allocation, float], None],
        started: set[int],
        kept: array[int] | None = None,
    ) -> None:
        """Start, in order, every candidate that fits without delaying the head: `start(job, allocation,
        now)` starts it (and updates the capacity), and its index joins `started`. `kept`, when the
        caller keeps them, holds the candidates' `idx` in their order (a copy: a buffer numpy reads
        cannot be resized). The run passes its `start` per call: kept here, it would tie the run and
        this object in a cycle, and a finished run would wait for a full garbage collection instead of
        being freed at once.

        Free capacity only shrinks during a pass, so once a job fails, a job of the same shape asking
        for at least as many GPUs fails too (`failed`); with the most free GPUs of each job's pools,
        that rejects most candidates of a long queue before the placer sees them: compiled
        (`next_candidate`) from `SCAN_COMPILED_FROM` candidates, in Python below it (the same rule)."""
        shadow, caps = reservation
        capacity, failed, greedy = self.capacity, self.failed, self.greedy
        idx = _indices(candidates, kept) if len(candidates) >= SCAN_COMPILED_FROM else None
        touched: list[int] = []
        group_free = self._group_free() if idx is not None else None
        try:
            at = self._next(candidates, idx, 0, group_free, now, shadow)
            while at >= 0:
                entry = candidates[at]
                short = now + entry.est <= shadow
                memo = 2 * entry.shape + short
                alloc = place(entry.demand, capacity.pools, capacity.free, greedy, None if short else caps)
                if alloc is None:
                    if failed[memo] == NEVER:
                        touched.append(memo)
                    failed[memo] = entry.gpus
                else:
                    start(entry, alloc, now)
                    started.add(entry.idx)
                    if idx is not None:
                        group_free = self._group_free()
                    if not short:
                        for s in alloc:
                            if s.node in caps:
                                cg, cc, cm = caps[s.node]
                                caps[s.node] = (cg - s.gpus, cc - s.cpus, cm - s.mem_mb)
                at = self._next(candidates, idx, at + 1, group_free, now, shadow)
        finally:
            for memo in touched:
                failed[memo] = NEVER

    def _group_free(self) -> npt.NDArray[np.int64]:
        """The most free GPUs of any one pool of each group, as the compiled scan reads them."""
        return np.array(self.capacity.most_free(self.groups), dtype=np.int64)

    def _next(
        self,
        candidates: Sequence[C],
        idx: npt.NDArray[np.int64] | None,
        at: int,
        group_free: npt.NDArray[np.int64] | None,
        now: float,
        shadow: float,
    ) -> int:
        """The first position from `at` whose job may fit (`next_candidate`'s rule); -1 if none. The
        Python scan reads the pools' free GPUs directly: a few candidates do not pay for `group_free`."""
        failed = self.failed
        if idx is not None:
            assert group_free is not None
            rows, est = self.table
            return int(next_candidate(idx, at, rows, est, group_free, failed, now, shadow))
        pool_free = self.capacity.pool_free
        for i in range(at, len(candidates)):
            entry = candidates[i]
            gpus = entry.gpus
            short = now + entry.est <= shadow
            if gpus >= failed[2 * entry.shape + short]:
                continue
            for p in entry.demand.pools:
                if gpus <= pool_free[p]:
                    return i
        return -1


def _one_node_need(demand: Demand, pools: Sequence[Pool]) -> dict[int, tuple[int, int]] | None:
    """Per eligible pool, the CPUs and memory a node of it must have free to hold the job alone (as the
    placer's one-node rule reads them); None if some pool would have to span nodes."""
    if any(demand.gpus > pools[p].gpus for p in demand.pools):
        return None
    return dict(zip(demand.pools, demand.one_node, strict=True))


def _indices(candidates: Sequence[Candidate], kept: array[int] | None) -> npt.NDArray[np.int64]:
    """The candidates' job indices as the compiled scan reads them: a view of the caller's copy."""
    if kept is not None:
        return np.frombuffer(kept, dtype=np.int64)
    return np.array([e.idx for e in candidates], dtype=np.int64)


def _holder(
    gpus: int,
    need: dict[int, tuple[int, int]],
    node_pool: Sequence[int],
    free: FreeCapacity,
    alloc: Allocation,
) -> Slice | None:
    """The first node of `alloc` that holds a one-node job of `gpus` GPUs on `free` (`need`:
    `_one_node_need`), as the slice the placer would give it there; None if none does."""
    free_g, free_c, free_m = free.gpus, free.cpus, free.mem
    for s in alloc:
        n = s.node
        cpus, mem = need.get(node_pool[n], _NO_ROOM)
        if free_g[n] >= gpus and free_c[n] >= cpus and free_m[n] >= mem:
            return Slice(n, gpus, cpus, mem)
    return None


@njit(cache=True)
def next_candidate(
    idx: npt.NDArray[np.int64],
    at: int,
    rows: npt.NDArray[np.int64],
    est: npt.NDArray[np.float64],
    group_free: npt.NDArray[np.int64],
    failed: npt.NDArray[np.int64],
    now: float,
    shadow: float,
) -> int:
    """The first position from `at` whose job may fit: no more GPUs than one of its pools has free,
    and fewer than failed for its shape (short or long) in this pass; -1 if none. A queue of hundreds
    is mostly rejected here; a Python loop costs about 70 ns a job."""
    for i in range(at, idx.shape[0]):
        j = idx[i]
        gpus = rows[j, 0]
        if gpus > group_free[rows[j, 1]]:
            continue
        short = 1 if now + est[j] <= shadow else 0
        if gpus >= failed[2 * rows[j, 2] + short]:
            continue
        return i
    return -1
