"""A request keeps Slurm's shape: `--gres=gpu:G` is per node, and a batch job gets one node unless it
asks for more (issue 16: the simulator split a 4-GPU job over two 2-GPU k80 nodes; Slurm never does)."""

from __future__ import annotations

from typing import Any

import pytest

from rltuned.domain import Allocation
from rltuned.placement import greedy
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, build_pools, demand_for
from rltuned.sim.slurm import SlurmRun
from tests.builders import cluster, job

LAB = cluster(("P100", 4, 2), ("K80", 2, 2), ("M40", 1, 1))  # the lab's shape: p100 x2, k80 x2, m40


def _gpu_types(pool_ids: tuple[int, ...]) -> set[str]:
    pools = build_pools(LAB)
    return {pools[p].gpu_type for p in pool_ids}


def test_a_job_some_node_can_hold_may_use_only_nodes_that_hold_it() -> None:
    demand = demand_for(job(1, 0, 4, 60), build_pools(LAB))
    assert demand is not None
    assert _gpu_types(demand.pools) == {"P100"}
    two = demand_for(job(2, 0, 2, 60), build_pools(LAB))
    assert two is not None and _gpu_types(two.pools) == {"P100", "K80"}


def test_the_4_gpu_job_waits_for_a_p100_node_instead_of_taking_both_k80_nodes() -> None:
    pools = build_pools(LAB)
    demand = demand_for(job(1, 0, 4, 60), pools)
    assert demand is not None
    free = FreeCapacity([0, 0, 2, 2, 1], [0, 0, 8, 8, 4], [0, 0, 16384, 16384, 8192])  # p100s busy
    assert place(demand, pools, free, "pack") is None


def test_only_a_job_larger_than_every_node_spans_nodes() -> None:
    pools = build_pools(LAB)
    demand = demand_for(job(1, 0, 8, 60), pools)
    assert demand is not None and _gpu_types(demand.pools) == {"P100"}
    alloc = place(demand, pools, FreeCapacity([4, 4, 2, 2, 1], [16, 16, 8, 8, 4], [32768] * 5), "pack")
    assert alloc is not None and sorted(s.node for s in alloc) == [0, 1]


def test_a_job_that_asked_for_one_node_more_than_any_node_has_never_runs() -> None:
    assert demand_for(job(1, 0, 8, 60, nodes=1), build_pools(LAB)) is None


def test_a_job_that_asked_for_two_nodes_spans_smaller_nodes() -> None:
    demand = demand_for(job(1, 0, 4, 60, nodes=2), build_pools(LAB))
    assert demand is not None and _gpu_types(demand.pools) == {"K80"}


def test_the_slurm_model_runs_the_4_gpu_job_on_a_p100_node_after_the_p100_jobs() -> None:
    jobs = [job(1, 0, 4, 100), job(2, 0, 4, 100), job(3, 1, 4, 50)]
    result = SlurmRun(LAB, jobs).run()
    third = next(r for r in result.records if r.job.id == 3)
    assert third.start == 100  # not at 1 on k80-2 + k80-3
    assert {result.cluster.nodes[s.node].gpu_type for s in third.allocation} == {"P100"}


def test_pack_takes_the_tightest_node_of_any_pool_and_an_exact_fit_ends_the_search(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A 1-GPU job: the p100 pool (first) has a node with 2 GPUs free, the k80 pool one with exactly 1:
    the k80 node wins, as the tightest fit. With both pools leaving one GPU over, the first pool's node
    wins the tie. An exact fit ends the search: no later pool can fit tighter."""
    searched: list[int] = []

    def counting(demand: Demand, k: int, *args: Any) -> Allocation | None:
        searched.append(demand.pools[k])
        return one_node(demand, k, *args)

    one_node = greedy._single_node
    monkeypatch.setattr(greedy, "_single_node", counting)
    pools = build_pools(LAB)
    demand = demand_for(job(1, 0, 1, 60), pools)
    assert demand is not None and len(demand.pools) == 3
    mem = [32768, 32768, 16384, 16384, 8192]
    p100, k80, m40 = demand.pools
    tight_k80 = place(demand, pools, FreeCapacity([2, 0, 1, 0, 0], [16, 16, 8, 8, 4], mem), "pack")
    assert tight_k80 is not None and [s.node for s in tight_k80] == [2]
    assert searched == [p100, k80]  # the k80 node fits exactly: the m40 pool is not searched
    searched.clear()
    tie = place(demand, pools, FreeCapacity([2, 0, 2, 0, 0], [16, 16, 8, 8, 4], mem), "pack")
    assert tie is not None and [s.node for s in tie] == [0]
    assert searched == [p100, k80, m40]
    searched.clear()
    exact = place(demand, pools, FreeCapacity([1, 0, 1, 0, 1], [16, 16, 8, 8, 4], mem), "pack")
    assert exact is not None and [s.node for s in exact] == [0]
    assert searched == [p100]
