"""The MILP placer: optimum equals brute force, never over-allocates, honors GPU types, falls back."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from rltuned.domain import ClusterSpec, Job
from rltuned.errors import SolverError
from rltuned.placement.candidates import candidates
from rltuned.placement.greedy import FreeCapacity
from rltuned.placement.milp import (
    MilpConfig,
    Problem,
    build_problem,
    milp_place,
    objective_of,
    solve_cvxpy,
    solve_glpk,
)
from rltuned.placement.pools import Demand, build_pools, demand_for
from rltuned.policies import make_policy
from rltuned.sim.simulator import SimConfig, Simulator
from tests.builders import cluster, job


def state(spec: ClusterSpec, used: list[int]) -> FreeCapacity:
    free = [max(n.gpus - u, 0) for n, u in zip(spec.nodes, used, strict=True)]
    return FreeCapacity(free, [g * 4 for g in free], [g * 8192 for g in free])


def demands(spec: ClusterSpec, jobs: list[Job]) -> list[Demand]:
    pools = build_pools(spec)
    out = [demand_for(j, pools) for j in jobs]
    assert all(d is not None for d in out)
    return [d for d in out if d is not None]


def brute_force(problem: Problem) -> float:
    choices = [range(-1, len(opts)) for opts in problem.options]
    values = (objective_of(problem, combo) for combo in itertools.product(*choices))
    return max(v for v in values if v is not None)


@st.composite
def instances(draw: st.DrawFn) -> tuple[ClusterSpec, FreeCapacity, list[Job], list[Job]]:
    spec = cluster(*draw(st.lists(st.tuples(st.sampled_from(["P100", "K80"]), st.sampled_from([1, 2, 4]),
                                             st.integers(1, 2)), min_size=1, max_size=2)))  # fmt: skip
    used = [draw(st.integers(0, n.gpus)) for n in spec.nodes]
    free = state(spec, used)
    # CPUs and memory free independently of GPUs, so their rows can bind on their own.
    free.cpus = [draw(st.integers(0, n.cpus)) for n in spec.nodes]
    free.mem = [draw(st.integers(0, n.mem_mb)) for n in spec.nodes]
    types = sorted({n.gpu_type for n in spec.nodes})
    total = spec.total_gpus

    def one(i: int) -> Job:
        gpus = draw(st.integers(1, min(total, 6)))
        gpu_type = draw(st.sampled_from([None, *types]))
        cpus = draw(st.sampled_from([0, gpus, 3 * gpus]))
        mem_mb = draw(st.sampled_from([0, 4096 * gpus]))
        return job(i, 0, gpus, 10, gpu_type=gpu_type, cpus=cpus, mem_mb=mem_mb)

    pools = build_pools(spec)
    ranked = [j for j in (one(i) for i in range(draw(st.integers(1, 3)))) if demand_for(j, pools)]
    ahead = [j for j in (one(10 + i) for i in range(draw(st.integers(0, 2)))) if demand_for(j, pools)]
    assume(ranked)
    return spec, free, ranked, ahead


@given(instances())
@settings(max_examples=60, deadline=None)
def test_glpk_optimum_equals_brute_force(
    instance: tuple[ClusterSpec, FreeCapacity, list[Job], list[Job]],
) -> None:
    spec, free, ranked, ahead = instance
    problem = build_problem(
        demands(spec, ranked), demands(spec, ahead), build_pools(spec), free, MilpConfig()
    )
    solution = solve_glpk(problem, time_limit_ms=5000)
    assert solution.objective == pytest.approx(brute_force(problem), abs=1e-6)


@given(instances())
@settings(max_examples=60, deadline=None)
def test_milp_never_over_allocates_and_honors_gpu_types(
    instance: tuple[ClusterSpec, FreeCapacity, list[Job], list[Job]],
) -> None:
    spec, free, ranked, ahead = instance
    allocs = milp_place(
        demands(spec, ranked), demands(spec, ahead), build_pools(spec), free, MilpConfig(time_limit_ms=5000)
    )
    used = {n: [0, 0, 0] for n in range(len(spec.nodes))}
    for j, alloc in zip(ranked, allocs, strict=True):
        if alloc is None:
            continue
        assert sum(s.gpus for s in alloc) == j.gpus
        if j.cpus:
            assert sum(s.cpus for s in alloc) >= j.cpus
        for s in alloc:
            used[s.node][0] += s.gpus
            used[s.node][1] += s.cpus
            used[s.node][2] += s.mem_mb
            if j.gpu_type is not None:
                assert spec.nodes[s.node].gpu_type == j.gpu_type
    for n, (g, c, m) in used.items():  # checked from the slices, independently of the solver's matrix
        assert g <= free.gpus[n] and c <= free.cpus[n] and m <= free.mem[n], (n, used[n])


def test_cvxpy_and_swiglpk_reach_the_same_optimum() -> None:
    spec = cluster(("P100", 8, 4), ("K80", 4, 4))
    free = state(spec, [3, 8, 0, 5, 1, 2, 4, 0])
    ranked = [job(i, 0, g, 10) for i, g in enumerate([4, 1, 2, 8, 3])]
    ahead = [job(10, 0, 16, 10), job(11, 0, 2, 10)]
    problem = build_problem(
        demands(spec, ranked), demands(spec, ahead), build_pools(spec), free, MilpConfig()
    )
    fast = solve_glpk(problem, time_limit_ms=5000)
    stated = solve_cvxpy(problem)
    assert fast.objective == pytest.approx(stated.objective, abs=1e-6)


def test_rank_order_is_lexicographic() -> None:
    """Only one of the two fits: the higher-ranked 1-GPU job wins over a lower-ranked 4-GPU job."""
    spec = cluster(("P100", 4, 1))
    free = state(spec, [3])
    allocs = milp_place(
        demands(spec, [job(0, 0, 1, 10), job(1, 0, 1, 10)]), [], build_pools(spec), free, MilpConfig()
    )
    assert allocs[0] is not None and allocs[1] is None


def test_joint_placement_fits_both_where_greedy_pack_blocks_the_second() -> None:
    """Pack puts the 1-GPU job on the 2-free node (best fit), leaving no node for the 2-GPU job; the MILP
    places both by putting the 1-GPU job on the 3-free node."""
    spec = cluster(("P100", 4, 2))
    free = state(spec, [2, 1])  # node0 has 2 free, node1 has 3 free
    ds = demands(spec, [job(0, 0, 1, 10), job(1, 0, 3, 10)])
    allocs = milp_place(ds, [], build_pools(spec), free, MilpConfig())
    assert allocs[0] is not None and allocs[1] is not None
    assert allocs[0][0].node == 0 and allocs[1][0].node == 1


def test_keeps_a_whole_node_for_the_largest_waiting_job() -> None:
    """Two 8-GPU nodes, one half busy: a 4-GPU job goes to the half-busy node so an 8-GPU job can follow."""
    spec = cluster(("P40", 8, 2))
    free = state(spec, [0, 4])
    allocs = milp_place(demands(spec, [job(0, 0, 4, 10)]), demands(spec, [job(1, 0, 8, 10)]),
                        build_pools(spec), free, MilpConfig())  # fmt: skip
    assert allocs[0] is not None and allocs[0][0].node == 1


def test_forced_timeout_raises_a_typed_error_and_the_simulator_falls_back() -> None:
    spec = cluster(("P100", 4, 2))
    free = state(spec, [0, 0])
    ds = demands(spec, [job(0, 0, 1, 10), job(1, 0, 1, 10)])
    with pytest.raises(SolverError):
        milp_place(ds, [], build_pools(spec), free, MilpConfig(time_limit_ms=0.0))
    jobs = [job(i, i, 1, 50) for i in range(12)]
    config = SimConfig(placement="milp", milp=MilpConfig(time_limit_ms=0.0))
    result = Simulator(spec, make_policy("fcfs"), config).run(jobs)
    assert result.solver_calls > 0 and result.solver_fallbacks == result.solver_calls
    assert len(result.records) == 12


def test_candidates_cover_each_free_level_and_respect_types() -> None:
    spec = cluster(("P100", 4, 3), ("K80", 2, 2))
    free = state(spec, [1, 1, 0, 0, 2])
    ds = demands(spec, [job(0, 0, 2, 10, gpu_type="P100")])
    found = candidates(ds[0], build_pools(spec), free, per_level=1)
    nodes = sorted(a[0].node for a in found)
    assert nodes == [0, 2]  # one node of the 3-free level (0 or 1), and the 4-free node
