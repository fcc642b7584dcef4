"""EASY backfilling on a run's capacity: the head job's reservation, then a pass over the jobs behind it.

The head (the first job in priority order that does not fit) is promised the earliest time its demand
fits if the running jobs end as estimated: the shadow time, and on its reserved nodes what is left once
it is placed there (the caps). A later job may start now if it fits and either ends, by its estimate,
before the shadow time, or stays within the caps (it uses nothing the head will need).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import NamedTuple, Protocol, TypeVar

from rltuned.domain import Allocation
from rltuned.placement.greedy import place
from rltuned.placement.pools import Demand
from rltuned.sim.capacity import Capacity

NEVER = 1 << 30  # more GPUs than any job asks for


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


class Easy:
    """EASY backfilling for one run: `groups` are the run's sets of eligible pools (`Candidate.group`
    indexes them) and `shapes` the number of demand shapes it numbered (`Candidate.shape`)."""

    __slots__ = ("capacity", "failed", "greedy", "groups")

    def __init__(
        self,
        capacity: Capacity,
        groups: Sequence[tuple[int, ...]],
        shapes: int,
        greedy: str,
    ) -> None:
        self.capacity = capacity
        self.groups = groups
        self.greedy = greedy
        self.failed = [NEVER] * (2 * shapes)
        """The fewest GPUs that failed in this pass per (shape, short) at 2 x shape + short; NEVER
        between passes (each pass resets the slots it touched)."""

    def reserve(self, demand: Demand, now: float) -> Reservation:
        """Release the running jobs in order of expected end until the head fits. The placer is asked
        only once a release touched one of the head's pools and one of them has as many free GPUs as
        the head asks for (`Capacity.may_fit`'s rule on the released capacity)."""
        capacity = self.capacity
        scratch = capacity.free.copy()
        node_pool, pool_free = capacity.node_pool, capacity.pool_free.copy()
        wanted = set(demand.pools)
        for end, _, alloc in capacity.running:
            scratch.give(alloc)
            relevant = False
            for s in alloc:
                p = node_pool[s.node]
                pool_free[p] += s.gpus
                relevant = relevant or p in wanted
            if not relevant or all(pool_free[p] < demand.gpus for p in demand.pools):
                continue
            placed = place(demand, capacity.pools, scratch, self.greedy)
            if placed is not None:
                g, c, m = scratch.gpus, scratch.cpus, scratch.mem
                caps = {
                    s.node: (g[s.node] - s.gpus, c[s.node] - s.cpus, m[s.node] - s.mem_mb) for s in placed
                }
                return Reservation(max(end, now), caps)
        raise AssertionError(
            f"a demand of {demand.gpus} GPUs cannot fit an empty cluster but was not dropped"
        )

    def backfill(
        self,
        candidates: Iterable[C],
        reservation: Reservation,
        now: float,
        start: Callable[[C, Allocation, float], None],
        started: set[int],
    ) -> None:
        """Start, in order, every candidate that fits without delaying the head: `start(job, allocation,
        now)` starts it (and updates the capacity), and its index joins `started`. The run passes its
        `start` per call: kept here, it would tie the run and this object in a cycle, and a finished run
        would wait for a full garbage collection instead of being freed at once.

        Free capacity only shrinks during a pass, so once a job fails, a job of the same shape asking
        for at least as many GPUs fails too (`failed`); one list lookup, the most free GPUs of the job's
        pools, rejects most candidates of a long queue."""
        shadow, caps = reservation
        capacity, failed, greedy = self.capacity, self.failed, self.greedy
        touched: list[int] = []
        group_free = capacity.most_free(self.groups)
        try:
            for entry in candidates:
                gpus = entry.gpus
                if gpus > group_free[entry.group]:
                    continue
                short = now + entry.est <= shadow
                memo = 2 * entry.shape + short
                if gpus >= failed[memo]:
                    continue
                alloc = place(entry.demand, capacity.pools, capacity.free, greedy, None if short else caps)
                if alloc is None:
                    if failed[memo] == NEVER:
                        touched.append(memo)
                    failed[memo] = gpus
                    continue
                start(entry, alloc, now)
                started.add(entry.idx)
                group_free = capacity.most_free(self.groups)
                if not short:
                    for s in alloc:
                        if s.node in caps:
                            cg, cc, cm = caps[s.node]
                            caps[s.node] = (cg - s.gpus, cc - s.cpus, cm - s.mem_mb)
        finally:
            for memo in touched:
                failed[memo] = NEVER
