"""The run's capacity: per-pool totals move with every start and completion, running jobs stay in order."""

from __future__ import annotations

from rltuned.domain import Slice
from rltuned.placement.pools import build_pools, demand_for, node_pool_index
from rltuned.sim.capacity import Capacity
from tests.builders import cluster, job

SPEC = cluster(("P100", 2, 2), ("V100", 4, 2))  # pools: 2 x 2-GPU P100, 2 x 4-GPU V100


def capacity() -> Capacity:
    pools = build_pools(SPEC)
    return Capacity(SPEC, pools, node_pool_index(SPEC, pools))


def test_pool_totals_follow_starts_and_completions() -> None:
    cap = capacity()
    assert cap.pool_free == [4, 8]
    a = (Slice(2, 4, 16, 32768),)
    b = (Slice(3, 3, 12, 24576),)
    cap.take(a, 100.0, 0)
    cap.take(b, 50.0, 1)
    assert cap.pool_free == [4, 1]
    assert cap.free.gpus == [2, 2, 0, 1]
    assert [idx for _, idx, _ in cap.running] == [1, 0]  # by expected end
    cap.give(a, 100.0, 0)
    assert cap.pool_free == [4, 5]
    assert cap.running_indices() == [1]


def test_give_removes_the_right_job_when_two_end_at_the_same_time() -> None:
    cap = capacity()
    cap.take((Slice(0, 1, 4, 8192),), 60.0, 7)
    cap.take((Slice(1, 1, 4, 8192),), 60.0, 3)
    cap.give((Slice(0, 1, 4, 8192),), 60.0, 7)
    assert cap.running_indices() == [3]
    assert cap.free.gpus[:2] == [2, 1]


def test_may_fit_and_most_free_read_each_pool_alone() -> None:
    """A 2-GPU job that must run on V100 does not fit in the V100 pool's one free GPU, however many
    P100 GPUs are free; one that may run on either fits in the P100 pool."""
    cap = capacity()
    cap.take((Slice(2, 4, 16, 32768),), 10.0, 0)
    cap.take((Slice(3, 3, 12, 24576),), 10.0, 1)  # V100 pool: 1 free; P100 pool: 4 free
    pools = build_pools(SPEC)
    v100 = demand_for(job(9, 0, 2, 10, gpu_type="V100"), pools)
    anywhere = demand_for(job(10, 0, 2, 10), pools)
    assert v100 is not None and anywhere is not None
    assert v100.pools == (1,) and anywhere.pools == (0, 1)
    assert not cap.may_fit(v100)
    assert cap.may_fit(anywhere)
    assert cap.most_free([v100.pools, anywhere.pools]) == [1, 4]
