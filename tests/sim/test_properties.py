"""Invariants of any schedule, checked on random small clusters and traces (hypothesis)."""

from __future__ import annotations

import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltuned.clusters import load_cluster
from rltuned.core.levers import Action
from rltuned.core.plan import Plan
from rltuned.domain import ClusterSpec, Job
from rltuned.estimates import apply_estimates
from rltuned.policies import POLICIES, make_policy
from rltuned.sim import easy
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.sim.slurm import SlurmParams, SlurmRun
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace
from tests.builders import cluster

SHAPES = st.lists(
    st.tuples(st.sampled_from(["P100", "K80", "V100"]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3)),
    min_size=1,
    max_size=3,
)


@st.composite
def workloads(draw: st.DrawFn, exact: bool = False) -> tuple[ClusterSpec, list[Job]]:
    spec = cluster(*draw(SHAPES))
    types = sorted({n.gpu_type for n in spec.nodes})
    n = draw(st.integers(1, 40))
    jobs = []
    submit = 0.0
    for i in range(n):
        submit += draw(st.sampled_from([0.0, 1.0, 5.0, 30.0]))
        runtime = float(draw(st.integers(1, 300)))
        estimate = runtime if exact else float(draw(st.integers(1, 600)))
        gpus = draw(st.integers(1, 12))
        gpu_type = draw(st.sampled_from([None, *types]))
        cpus = draw(st.sampled_from([0, 0, 1, 6]))
        jobs.append(Job(i, submit, gpus, runtime=runtime, time_limit=estimate, gpu_type=gpu_type, cpus=cpus))
    return spec, jobs


def assert_never_over_allocated(result: SimResult) -> None:
    events = []
    for r in result.records:
        events.append((r.start, 1, r))
        events.append((r.end, 0, r))  # ends first at equal times
    used = {i: [0, 0, 0] for i in range(len(result.cluster.nodes))}
    for _, kind, r in sorted(events, key=lambda e: (e[0], e[1], e[2].job.id)):
        sign = 1 if kind else -1
        for s in r.allocation:
            u = used[s.node]
            u[0] += sign * s.gpus
            u[1] += sign * s.cpus
            u[2] += sign * s.mem_mb
            node = result.cluster.nodes[s.node]
            assert u[0] <= node.gpus and u[1] <= node.cpus and u[2] <= node.mem_mb, (node, u)


settings.register_profile("ci", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")


@given(
    workloads(),
    st.sampled_from(sorted(POLICIES)),
    st.booleans(),
    st.sampled_from(["pack", "spread"]),
)
@settings(max_examples=150)
def test_schedules_respect_capacity_submit_and_types(
    workload: tuple[ClusterSpec, list[Job]], policy: str, backfill: bool, placement: str
) -> None:
    spec, jobs = workload
    result = Simulator(spec, make_policy(policy), SimConfig(placement=placement, backfill=backfill)).run(jobs)
    assert len(result.records) + len(result.dropped) == len(jobs)
    for r in result.records:
        assert r.start >= r.job.submit
        assert r.end == r.start + r.job.runtime
        assert sum(s.gpus for s in r.allocation) == r.job.gpus
        assert len({spec.nodes[s.node].gpu_type for s in r.allocation}) == 1
        if r.job.gpu_type is not None:
            assert spec.nodes[r.allocation[0].node].gpu_type == r.job.gpu_type
    assert_never_over_allocated(result)


@given(workloads(exact=True), st.sampled_from(["pack", "spread"]))
@settings(max_examples=150)
def test_backfilling_never_delays_the_reserved_head_job(
    workload: tuple[ClusterSpec, list[Job]], placement: str
) -> None:
    """With exact estimates and FCFS, every job starts no later than its first reservation promised."""
    spec, jobs = workload
    result = Simulator(spec, make_policy("fcfs"), SimConfig(placement=placement)).run(jobs)
    started = {r.job.id: r.start for r in result.records}
    for job_id, promised in result.promised.items():
        assert started[job_id] <= promised + 1e-9, (job_id, started[job_id], promised)


@given(workloads(exact=True))
@settings(max_examples=80)
def test_backfilling_never_starts_the_head_later_than_strict_fcfs_would_wait_for_it(
    workload: tuple[ClusterSpec, list[Job]],
) -> None:
    """EASY only fills holes: the first job to wait starts no later than under strict FCFS."""
    spec, jobs = workload
    backfilled = Simulator(spec, make_policy("fcfs"), SimConfig(backfill=True)).run(jobs)
    strict = Simulator(spec, make_policy("fcfs"), SimConfig(backfill=False)).run(jobs)
    strict_start = {r.job.id: r.start for r in strict.records}
    waited = [r for r in strict.records if r.start > r.job.submit]
    if waited:
        first = min(waited, key=lambda r: r.job.id).job.id
        easy_start = {r.job.id: r.start for r in backfilled.records}
        assert easy_start[first] <= strict_start[first]


class _EveryPass(SlurmRun):
    """The Slurm model without its shortcuts: every backfill pass plans, even one that repeats the last
    or one where no tested job fits the free capacity now."""

    def _backfill(self, now: float) -> None:
        self.changed = True
        super()._backfill(now)

    def _fits_now(self, now: float) -> bool:
        return True


@given(workloads(), st.randoms(use_true_random=False))
@settings(max_examples=100)
def test_skipping_a_repeated_backfill_pass_changes_no_start(
    workload: tuple[ClusterSpec, list[Job]], rng: random.Random
) -> None:
    """A pass is skipped when nothing it reads changed (`SlurmRun._backfill`); priority writes count only
    through the order they make. With the queue put in a random order by priority writes at every tick,
    the schedule is the one of a model that plans every pass."""
    spec, jobs = workload

    def drive(run: SlurmRun) -> SimResult:
        loop = run.loop()
        try:
            snapshot = next(loop)
            while True:
                order = rng.sample(snapshot.pending, len(snapshot.pending))  # a new order every tick
                writes = [Action(j.id, "priority", (), 100 - k) for k, j in enumerate(order)]
                snapshot = loop.send(Plan(tuple(writes), 0))
        except StopIteration:
            pass
        return run.result()

    state = rng.getstate()
    shortcut = drive(SlurmRun(spec, jobs, interval_s=20.0))
    rng.setstate(state)
    full = drive(_EveryPass(spec, jobs, interval_s=20.0))
    assert [(r.job.id, r.start, r.allocation) for r in shortcut.records] == [
        (r.job.id, r.start, r.allocation) for r in full.records
    ]


@given(
    workloads(),
    st.sampled_from([1.0, 2.0, 5.0, 1440.0]),
    st.sampled_from([10.0, 60.0, 90.0]),
    st.sampled_from([7.0, 30.0]),
    st.booleans(),
)
@settings(max_examples=150)
def test_skipping_a_pass_while_jobs_run_past_their_limits_changes_no_start(
    workload: tuple[ClusterSpec, list[Job]], window_min: float, resolution: float, every: float, whole: bool
) -> None:
    """While a running job is past its limit, a pass after one that started nothing is skipped only when
    the clock moved nothing the plan reads (`_LastPass.repeats`): the overdue jobs' release point, and
    no row of the last plan between the two passes or between their windows' ends. Windows as short as
    the jobs' limits and coarse resolutions put rows there; the schedule is the one of a model that
    plans every pass."""
    spec, jobs = workload
    params = SlurmParams(
        bf_window_min=window_min, bf_resolution_s=resolution, bf_interval_s=every, bf_whole_nodes=whole
    )
    shortcut = SlurmRun(spec, jobs, params=params).run()
    full = _EveryPass(spec, jobs, params=params).run()
    assert [(r.job.id, r.start, r.allocation) for r in shortcut.records] == [
        (r.job.id, r.start, r.allocation) for r in full.records
    ]


@pytest.mark.parametrize(
    ("trace", "cluster_name", "at"), [("philly", "philly-slice", 30_100), ("itp", "itp-slice", 6_000)]
)
@pytest.mark.parametrize(("window_min", "resolution", "every"), [(1440.0, 60.0, 30.0), (10.0, 60.0, 7.0)])
def test_the_skipped_passes_change_no_start_on_trace_windows(
    trace: str, cluster_name: str, at: int, window_min: float, resolution: float, every: float
) -> None:
    """The same as the property tests above on a stretch of each GPU trace where a queue forms, with
    noisy estimates (jobs run past their limits): Slurm's defaults, and a ten-minute window with passes
    every 7 s, where the window's end meets rows often."""
    jobs = apply_estimates(load_trace(resolve_trace(trace)).jobs, "qssf-noise", 0)[0][at : at + 400]
    params = SlurmParams(bf_window_min=window_min, bf_resolution_s=resolution, bf_interval_s=every)
    spec = load_cluster(cluster_name)
    shortcut = SlurmRun(spec, jobs, 100, params).run()
    full = _EveryPass(spec, jobs, 100, params).run()
    assert len(shortcut.records) == 300
    assert schedule(shortcut) == schedule(full)


@given(workloads(), st.sampled_from(["pack", "spread"]), st.sampled_from(sorted(POLICIES)))
@settings(max_examples=100)
def test_reserving_only_where_a_release_makes_room_changes_no_start(
    workload: tuple[ClusterSpec, list[Job]], placement: str, policy: str
) -> None:
    """A blocked head's reservation asks the placer only once a node a release gave back holds it,
    and not at all when that release freed one node, the only one that can then hold it
    (`Easy.reserve`); asking at every release whose pools have the GPUs gives the same schedule,
    with either strategy."""
    spec, jobs = workload
    config = SimConfig(placement=placement)
    shortcut = Simulator(spec, make_policy(policy), config).run(jobs)
    original = easy._one_node_need
    easy._one_node_need = lambda demand, pools: None
    try:
        every = Simulator(spec, make_policy(policy), config).run(jobs)
    finally:
        easy._one_node_need = original
    assert schedule(shortcut) == schedule(every)


def schedule(result: SimResult) -> tuple[object, ...]:
    """Every start, allocation and promised start of a run: what a change that must schedule the
    same compares."""
    starts = [(r.job.id, r.start, r.allocation) for r in (*result.background, *result.records)]
    return (starts, sorted(result.promised.items()))


@given(workloads(), st.sampled_from(sorted(POLICIES)), st.booleans())
@settings(max_examples=100)
def test_the_compiled_backfill_scan_changes_no_start(
    workload: tuple[ClusterSpec, list[Job]], policy: str, choosing: bool
) -> None:
    """Every backfill pass scanned compiled, or every one in Python (`easy.SCAN_COMPILED_FROM`): the
    queue's kept indices follow it through arrivals, starts from its middle and re-sorts, so the two
    schedule alike. Also a chooser that always names the base order's first job."""
    spec, jobs = workload
    config = SimConfig(incremental=not choosing)

    def run() -> SimResult:
        sim = Simulator(spec, make_policy(policy), config)
        if not choosing:
            return sim.run(jobs)
        episode = sim.episode(jobs)
        while not episode.done:
            episode.choose(episode.snapshot().pending[0].id)
        assert episode.result is not None
        return episode.result

    original = easy.SCAN_COMPILED_FROM
    try:
        easy.SCAN_COMPILED_FROM = 0
        compiled = run()
        easy.SCAN_COMPILED_FROM = 1 << 30
        python = run()
    finally:
        easy.SCAN_COMPILED_FROM = original
    assert schedule(compiled) == schedule(python)
