"""Small traces with schedules worked out by hand: FCFS with and without EASY backfilling."""

from __future__ import annotations

import pytest

from rltuned.domain import Job, PriorityContext
from rltuned.policies import POLICIES, make_policy
from rltuned.sim.simulator import SimConfig, Simulator
from tests.builders import cluster, job


def starts(result) -> dict[int, float]:  # type: ignore[no-untyped-def]
    return {r.job.id: r.start for r in result.records}


def run(spec, jobs, backfill=True, placement="pack", policy="fcfs"):  # type: ignore[no-untyped-def]
    return Simulator(spec, make_policy(policy), SimConfig(placement=placement, backfill=backfill)).run(jobs)


ONE_NODE = cluster(("P100", 4, 1))


def test_fcfs_without_backfill_blocks_behind_the_head() -> None:
    """A (2 GPUs) runs; B (4) must wait for it; C and D queue behind B even though they fit now."""
    jobs = [job(0, 0, 2, 100), job(1, 1, 4, 10), job(2, 2, 1, 200), job(3, 3, 1, 50)]
    assert starts(run(ONE_NODE, jobs, backfill=False)) == {0: 0, 1: 100, 2: 110, 3: 110}


def test_without_backfill_the_head_stays_the_head_until_it_starts() -> None:
    """SJF: B (4 GPUs) heads the queue at 1 and does not fit; C arrives at 2, shorter and fitting, and
    would rank first, but the head blocks until it starts (as in the paper's simulator): C runs after B."""
    jobs = [job(0, 0, 2, 100), job(1, 1, 4, 50), job(2, 2, 1, 10)]
    assert starts(run(ONE_NODE, jobs, backfill=False, policy="sjf")) == {0: 0, 1: 100, 2: 150}
    assert starts(run(ONE_NODE, jobs, policy="sjf")) == {0: 0, 1: 100, 2: 2}  # EASY: C backfills


def test_backfill_never_delays_the_head_reservation() -> None:
    """B's reservation is t=100 on the only node: C (ends at 202) must not start early; D (ends at 53) may."""
    jobs = [job(0, 0, 2, 100), job(1, 1, 4, 10), job(2, 2, 1, 200), job(3, 3, 1, 50)]
    result = run(ONE_NODE, jobs)
    assert starts(result) == {0: 0, 1: 100, 2: 110, 3: 3}
    assert result.promised[1] == 100


def test_backfill_uses_nodes_the_head_does_not_need() -> None:
    """B waits for the P100 node; a long untyped job C may start at once on the K80 node, typed D may not."""
    spec = cluster(("P100", 4, 1), ("K80", 2, 1))
    jobs = [
        job(0, 0, 4, 100, gpu_type="P100"),
        job(1, 1, 2, 10, gpu_type="P100"),
        job(2, 2, 2, 1000),
        job(3, 3, 1, 5, gpu_type="P100"),
    ]
    result = run(spec, jobs)
    assert starts(result) == {0: 0, 1: 100, 2: 2, 3: 100}
    k80 = next(i for i, n in enumerate(spec.nodes) if n.gpu_type == "K80")
    assert [s.node for s in result.records[2].allocation] == [k80]


def test_backfill_judges_by_estimate_not_true_runtime() -> None:
    """C really ends at 30, before the reservation, but its estimate (500) says it would not: no backfill."""
    jobs = [job(0, 0, 2, 100), job(1, 1, 4, 10), job(2, 2, 1, 30, estimate=500)]
    assert starts(run(ONE_NODE, jobs)) == {0: 0, 1: 100, 2: 110}


def test_overrunning_job_keeps_running_and_delays_the_head() -> None:
    """Estimates are predictions: A overruns its estimate (50) and B starts when A really ends."""
    jobs = [job(0, 0, 4, 120, estimate=50), job(1, 1, 4, 10)]
    result = run(ONE_NODE, jobs)
    assert starts(result) == {0: 0, 1: 120}
    assert result.promised[1] == 50


def test_multi_node_job_spans_whole_nodes_first() -> None:
    spec = cluster(("P40", 8, 3))
    result = run(spec, [job(0, 0, 12, 10), job(1, 0, 16, 10)])
    first = result.records[0].allocation
    assert sorted(s.gpus for s in first) == [4, 8]
    assert starts(result) == {0: 0, 1: 10}


def test_pack_fills_partial_nodes_and_spread_picks_the_emptiest() -> None:
    spec = cluster(("P100", 4, 2))
    jobs = [job(0, 0, 3, 100), job(1, 1, 1, 100)]
    packed = run(spec, jobs, placement="pack").records
    spread = run(spec, jobs, placement="spread").records
    assert packed[1].allocation[0].node == packed[0].allocation[0].node
    assert spread[1].allocation[0].node != spread[0].allocation[0].node


def test_gpu_type_constraint_is_honored() -> None:
    spec = cluster(("P100", 4, 1), ("K80", 2, 2))
    result = run(spec, [job(0, 0, 2, 10, gpu_type="K80"), job(1, 0, 2, 10, gpu_type="K80")])
    for record in result.records:
        assert all(spec.nodes[s.node].gpu_type == "K80" for s in record.allocation)


def test_cpu_and_memory_bind_when_requested() -> None:
    """Node has 16 CPUs: a 1-GPU job asking 12 CPUs blocks a second one despite 3 free GPUs."""
    jobs = [job(0, 0, 1, 100, cpus=12), job(1, 0, 1, 100, cpus=12), job(2, 0, 1, 100)]
    assert starts(run(ONE_NODE, jobs)) == {0: 0, 1: 100, 2: 0}


def test_jobs_larger_than_the_cluster_are_dropped_and_counted() -> None:
    spec = cluster(("P100", 4, 1), ("K80", 2, 2))
    jobs = [
        job(0, 0, 16, 10),
        job(1, 0, 1, 10, gpu_type="A100"),
        job(2, 0, 3, 10, gpu_type="K80"),
        job(3, 0, 1, 5),
    ]
    result = run(spec, jobs)
    assert [j.id for j in result.dropped] == [0, 1]
    assert sorted(r.job.id for r in result.records) == [2, 3]


def test_warmup_jobs_load_the_cluster_but_are_not_measured() -> None:
    jobs = [job(0, 0, 4, 100), job(1, 1, 4, 10)]
    result = Simulator(ONE_NODE, make_policy("fcfs")).run(jobs, warmup=1)
    assert [r.job.id for r in result.records] == [1]
    assert result.records[0].start == 100
    assert [r.job.id for r in result.background] == [0]


@pytest.mark.parametrize("policy", list(POLICIES))
def test_every_policy_runs_and_is_deterministic(policy: str) -> None:
    spec = cluster(("P100", 4, 2), ("K80", 2, 2))
    jobs = [
        job(i, i * 7.0, 1 + i % 4, 50 + (i * 37) % 400, user=f"u{i % 3}", account=f"a{i % 2}")
        for i in range(60)
    ]
    first = run(spec, jobs, policy=policy)
    second = run(spec, jobs, policy=policy)
    assert first.records == second.records
    assert len(first.records) == 60


def test_sjf_starts_the_shortest_estimate_first() -> None:
    jobs = [
        job(0, 0, 4, 100),
        job(1, 1, 4, 300),
        job(2, 2, 4, 50, estimate=20),
        job(3, 3, 4, 10, estimate=90),
    ]
    assert starts(run(ONE_NODE, jobs, policy="sjf")) == {0: 0, 2: 100, 3: 150, 1: 160}


def test_pack_splits_a_multi_node_job_onto_the_tightest_lowest_node() -> None:
    """12 GPUs on 8-GPU nodes with 8, 4 and 4 free: a whole node, then the first of the two 4-free nodes."""
    spec = cluster(("P40", 8, 4))
    jobs = [job(0, 0, 4, 100), job(1, 0, 4, 100), job(2, 0, 4, 100), job(3, 0, 4, 100), job(4, 1, 12, 10)]
    # Jobs 0-3 pack pairwise onto nodes 0 and 1 (4 + 4), leaving nodes 2 and 3 whole.
    result = run(spec, jobs)
    big = next(r for r in result.records if r.job.id == 4)
    assert sorted((s.node, s.gpus) for s in big.allocation) == [(2, 8), (3, 4)]


def test_fair_share_survives_centuries_of_simulated_time() -> None:
    """Usage decays as 2^(t / half-life); the tracker rebases instead of overflowing a float."""
    jobs = [job(0, 0, 1, 1e10), job(1, 1, 1, 10, account="b")]
    result = Simulator(ONE_NODE, make_policy("multifactor")).run(jobs)
    assert len(result.records) == 2


def test_a_finished_run_is_freed_without_the_garbage_collector() -> None:
    """A run holds every job, allocation and record of its window: a reference cycle would keep it
    until a full collection, which then walks all of them (it cost NASA windows 16% of their time)."""
    import gc
    import weakref

    jobs = [job(i, i, 1 + i % 4, 50 + 7 * i) for i in range(40)]
    simulator = Simulator(ONE_NODE, make_policy("fcfs"), SimConfig())
    gc.disable()
    try:
        run = simulator._new_run(jobs, 0)
        run.execute()
        alive = weakref.ref(run)
        del run
        assert alive() is None
    finally:
        gc.enable()


class _NewestFirst:
    """A caller's own static policy that reads the clock: the later a job arrives, the sooner it runs."""

    name = "newest-first"
    dynamic = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return -ctx.now


def test_a_static_key_that_reads_the_clock_sees_each_arrival_time() -> None:
    """A run keeps one priority context for a base whose key reads neither the clock nor the
    accounting (`policies.inputs.time_invariant`); a policy the table does not know gets the time of
    its job's arrival, so the newest of B, C, D, queued behind A, starts first."""
    jobs = [job(0, 0, 4, 100), job(1, 1, 4, 10), job(2, 2, 4, 10), job(3, 3, 4, 10)]
    result = Simulator(ONE_NODE, _NewestFirst(), SimConfig()).run(jobs)
    assert starts(result) == {0: 0, 3: 100, 2: 110, 1: 120}
