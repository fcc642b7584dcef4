"""EASY backfilling on hand-worked capacity: the head's shadow time and caps, what may start behind it,
and the per-pass memo of failed shapes."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.domain import Allocation, Slice
from rltuned.placement.greedy import place
from rltuned.placement.pools import Demand, build_pools, demand_for, node_pool_index
from rltuned.sim import easy
from rltuned.sim.capacity import Capacity
from rltuned.sim.easy import NEVER, Easy, Reservation, job_table
from tests.builders import cluster, job

SPEC = cluster(("V100", 4, 2))  # one pool: two 4-GPU nodes, 4 CPUs and 8 GiB per GPU
POOLS = build_pools(SPEC)


@dataclass
class Queued:
    idx: int
    demand: Demand
    est: float
    group: int = 0
    shape: int = 0

    @property
    def gpus(self) -> int:
        return self.demand.gpus


@dataclass
class Scanned(Queued):
    """A queued job as the scan reads it: any GPU count, whatever its demand."""

    asked: int = 1

    @property
    def gpus(self) -> int:
        return self.asked


def demand(gpus: int) -> Demand:
    found = demand_for(job(0, 0, gpus, 1), POOLS)
    assert found is not None
    return found


def busy() -> Capacity:
    """Node 0 full until 100 (expected); node 1 has 3 GPUs taken until 50, one free."""
    cap = Capacity(SPEC, POOLS, node_pool_index(SPEC, POOLS))
    cap.take((Slice(0, 4, 16, 32768),), 100.0, 0)
    cap.take((Slice(1, 3, 12, 24576),), 50.0, 1)
    return cap


def run_easy(
    cap: Capacity, queue: Sequence[Queued] = ()
) -> tuple[Easy, Callable[[Queued, Allocation, float], None], list[int]]:
    """EASY on `cap` for the jobs of `queue`, the `start` a run would pass it, and the jobs started, in
    order."""
    started: list[int] = []

    def start(entry: Queued, alloc: Allocation, now: float) -> None:
        cap.take(alloc, now + entry.est, entry.idx)
        started.append(entry.idx)

    return Easy(cap, [(0,)], 1, "pack", queue, 8), start, started


def indices(queue: Sequence[Queued]) -> npt.NDArray[np.int64]:
    return np.array([q.idx for q in queue], dtype=np.int64)


def test_the_head_is_reserved_where_the_first_release_makes_room() -> None:
    """A 2-GPU head fits once the job on node 1 ends (50): it is promised 50 there, and a job running
    past 50 may use what the head leaves on node 1 (2 GPUs, 8 CPUs, 16 GiB)."""
    e, _, _ = run_easy(busy())
    assert e.reserve(demand(2), now=0.0) == Reservation(50.0, {1: (2, 8, 16384)})
    assert e.reserve(demand(4), now=0.0) == Reservation(50.0, {1: (0, 0, 0)})


def test_a_blocked_head_is_reserved_with_its_own_needs() -> None:
    """The same as a blocked head (it fits on no node now): the release of node 1 gives the one node
    that holds it, taken without the placer, with the CPUs and memory of the head's own GPU count;
    one object serves heads of several demands, each a new object (whose id may be a gone one's)."""
    e, _, _ = run_easy(busy())
    two, four = demand(2), demand(4)
    assert e.reserve(two, now=0.0, blocked=True) == Reservation(50.0, {1: (2, 8, 16384)})
    e._heads[id(four)] = e._heads.pop(id(two))  # as if `four` had taken the gone `two`'s address
    assert e.reserve(four, now=0.0, blocked=True) == Reservation(50.0, {1: (0, 0, 0)})


def test_an_overdue_job_makes_the_shadow_time_now() -> None:
    e, _, _ = run_easy(busy())
    assert e.reserve(demand(4), now=70.0).shadow == 70.0


def test_only_jobs_that_cannot_delay_the_head_start() -> None:
    """The 4-GPU head holds node 1 from 50: a 1-GPU job ending by 50 takes node 1's free GPU; one
    ending later may not (the caps leave nothing on node 1), and no other node has room."""
    cap = busy()
    long, short = Queued(2, demand(1), 60.0), Queued(3, demand(1), 50.0)
    e, start, started = run_easy(cap, [long, short])
    reservation = e.reserve(demand(4), now=0.0)
    e.backfill([long, short], reservation, 0.0, start, set())
    assert started == [3]
    assert cap.free.gpus == [0, 0]


def test_a_failed_shape_skips_jobs_as_large_for_the_rest_of_the_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    """One GPU free on each node: the pool has 2, but no node holds a 2-GPU job. Once one fails, the
    next 2-GPU job of the same shape is not offered to the placer in that pass; a 1-GPU job still is.
    The memo is clear when the pass ends."""
    asked: list[int] = []

    def counting(d: Demand, *args: object, **kwargs: object) -> Allocation | None:
        asked.append(d.gpus)
        return place(d, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(easy, "place", counting)
    cap = Capacity(SPEC, POOLS, node_pool_index(SPEC, POOLS))
    cap.take((Slice(0, 3, 12, 24576),), 100.0, 0)
    cap.take((Slice(1, 3, 12, 24576),), 50.0, 1)
    queue = [Queued(2, demand(2), 5.0), Queued(3, demand(2), 5.0), Queued(4, demand(1), 5.0)]
    e, start, started = run_easy(cap, queue)
    e.backfill(queue, Reservation(1e9, {}), 0.0, start, set())
    assert asked == [2, 1]
    assert started == [4]
    assert e.failed.tolist() == [NEVER, NEVER]


def test_the_scan_offers_only_jobs_that_may_fit() -> None:
    """`next_candidate` skips a job asking more GPUs than its pools have free and one asking at least
    what already failed for its shape and length; a job of the same shape that ends before the shadow
    time has its own memo."""
    queue = [
        Queued(0, demand(3), 5.0),  # more than the 2 free GPUs
        Queued(1, demand(2), 50.0),  # long: 2 GPUs of this shape already failed long
        Queued(2, demand(2), 5.0),  # short: nothing failed short
    ]
    rows, est = job_table(queue, 3)
    free = np.array([2], dtype=np.int64)
    failed = np.array([NEVER, NEVER], dtype=np.int64)
    args = (rows, est, free, failed, 0.0, 10.0)
    assert easy.next_candidate(indices(queue), 0, *args) == 1
    failed[0] = 2  # shape 0, long
    assert easy.next_candidate(indices(queue), 0, *args) == 2
    assert easy.next_candidate(indices(queue), 3, *args) == -1


@given(
    st.lists(
        st.tuples(
            st.integers(1, 12), st.integers(0, 2), st.integers(0, 2), st.sampled_from([5.0, 10.0, 50.0])
        ),
        max_size=40,
    ),
    st.lists(st.integers(0, 12), min_size=3, max_size=3),
    st.lists(st.sampled_from([1, 4, 8, NEVER]), min_size=6, max_size=6),
    st.integers(0, 40),
)
@settings(deadline=None)  # the first example loads the compiled kernel
def test_the_python_scan_and_the_compiled_scan_offer_the_same_jobs(
    jobs: list[tuple[int, int, int, float]], free: list[int], failed: list[int], at: int
) -> None:
    """Short passes scan in Python, long ones compiled (`easy.SCAN_COMPILED_FROM`): the same rule. The
    Python scan reads each job's pools' free GPUs, the compiled one its group's most free."""
    spec = cluster(("V100", 4, 1), ("P100", 4, 1), ("K80", 4, 1))  # three pools: group k is pool k
    pools = build_pools(spec)
    cap = Capacity(spec, pools, node_pool_index(spec, pools))
    cap.pool_free[:] = free
    queue = [
        Scanned(i, Demand(1, (group,), (4.0,), (8192.0,)), est, group, shape, g)
        for i, (g, group, shape, est) in enumerate(jobs)
    ]
    e = Easy(cap, [(0,), (1,), (2,)], 3, "pack", queue, len(queue))
    e.failed[:] = failed
    python = e._next(queue, None, at, None, 0.0, 10.0)
    compiled = e._next(queue, indices(queue), at, e._group_free(), 0.0, 10.0)
    assert python == compiled
