"""The Slurm behind the daemon, on cases worked out by hand (multifactor weights 1000 each, one partition).

On one 4-GPU node a job's multifactor priority is 2000 (fair-share 1 + partition 1) + 1000 x GPUs / 4
+ a negligible age term, truncated to an integer as Slurm stores it; equal priorities go to the lower
job id.
"""

from __future__ import annotations

from collections.abc import Mapping
from itertools import pairwise

import numpy as np
import pytest

from rltuned.clusters import load_cluster
from rltuned.core import CoreSettings, Lever
from rltuned.core.levers import Action
from rltuned.core.plan import Plan
from rltuned.domain import Job
from rltuned.estimates import apply_estimates
from rltuned.policies import make_policy
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.runner import Window
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.sim.slurm import SlurmParams, SlurmRun
from rltuned.sim.ticks import TickSettings, run_ticks
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace
from tests.builders import cluster, job

ONE_NODE = cluster(("P100", 4, 1))


def starts(result: SimResult) -> dict[int, float]:
    return {r.job.id: r.start for r in result.records}


def with_writes(run: SlurmRun, at: float, writes: tuple[Action, ...]) -> SimResult:
    """The run with the daemon writing `writes` at its tick at `at` and nothing at the others."""
    loop = run.loop()
    try:
        snapshot = next(loop)
        while True:
            snapshot = loop.send(Plan(writes, 0) if snapshot.now == at else None)
    except StopIteration:
        pass
    return run.result()


# A (2 GPUs) runs 0-100; B (4) must wait for the whole node; C (1 GPU, limit 240) and D (1 GPU, limit 60)
# queue behind B with equal priority (C first, by id).
BLOCKED = [job(0, 0, 2, 100, 120), job(1, 1, 4, 10, 60), job(2, 2, 1, 200, 240), job(3, 3, 1, 50, 60)]


def test_the_main_scheduler_stops_at_the_first_job_that_does_not_fit() -> None:
    """sched/builtin: B blocks C and D although they fit; B starts when A ends, C and D when B ends."""
    result = SlurmRun(ONE_NODE, BLOCKED, params=SlurmParams(backfill=False)).run()
    assert starts(result) == {0: 0, 1: 100, 2: 110, 3: 110}


def test_backfill_plans_every_tested_job() -> None:
    """Pass at 30: A frees its GPUs at 120 (its limit), so B is reserved for [120, 180); C (240 s) would
    overlap B's reservation, and at 180 it is reserved for [180, 420); D (60 s) ends before 120 on the
    two free GPUs and starts at once. A ends at 100 (before its limit): B starts, then C after B."""
    result = SlurmRun(ONE_NODE, BLOCKED).run()
    assert starts(result) == {0: 0, 1: 100, 2: 110, 3: 30}


def test_backfill_tests_at_most_bf_max_job_test_jobs() -> None:
    """Testing only B and C, the pass never reaches D: it waits for the main scheduler, as without
    backfill."""
    result = SlurmRun(ONE_NODE, BLOCKED, params=SlurmParams(bf_max_job_test=2)).run()
    assert starts(result) == {0: 0, 1: 100, 2: 110, 3: 110}


def test_backfill_does_not_reserve_beyond_bf_window() -> None:
    """bf_window of one minute from 30 ends at 90: B's earliest start (120) is beyond it, so B gets no
    reservation, and C and D both start at 30; B then waits for C (until 230)."""
    result = SlurmRun(ONE_NODE, BLOCKED, params=SlurmParams(bf_window_min=1)).run()
    assert starts(result) == {0: 0, 1: 230, 2: 30, 3: 30}


def test_bf_resolution_rounds_the_plan_up() -> None:
    """On a 300 s grid, A's limit (120) frees the node at 300 in the plan, so B is reserved from 300 only,
    and C (30 + 240 = 270, 300 on the grid) fits on A's two spare GPUs before it: C starts at 30, where on
    the default 60 s grid it waited until 110."""
    result = SlurmRun(ONE_NODE, BLOCKED, params=SlurmParams(bf_resolution_s=300)).run()
    assert starts(result)[2] == 30


def test_a_pass_whose_window_reaches_a_new_row_is_not_skipped_as_a_repeat() -> None:
    """Two 2-GPU nodes; R (1 GPU, limit 40) and S (2 GPUs, limit 85) run from 0. At 12, J1 (4 GPUs,
    100 s), J2 (2 GPUs, 60 s) and J3 (1 GPU, 50 s) arrive, in that order; bf_window is one minute,
    passes every 10 s on a 10 s grid. The pass at 20 finds J1 no start by 80 (both nodes free at 85),
    reserves R's node for J2 from 40, so J3 (20-70) cannot start there. Nothing changes by 30 but the
    clock, yet the pass at 30 reaches 85: J1 is reserved from 80 on both nodes, J2 no longer fits before
    it, and J3 (30-80) starts on R's node. A model that skipped the pass as a repeat started J3 at 185."""
    jobs = [job(0, 0, 1, 40), job(1, 0, 2, 85), job(2, 12, 4, 100), job(3, 12, 2, 60), job(4, 12, 1, 50)]
    params = SlurmParams(bf_window_min=1, bf_resolution_s=10, bf_interval_s=10)
    result = SlurmRun(cluster(("P100", 2, 2)), jobs, params=params).run()
    assert starts(result) == {0: 0, 1: 0, 2: 85, 3: 185, 4: 30}


def test_a_pass_runs_when_only_a_job_spanning_nodes_fits_now() -> None:
    """Four 2-GPU nodes, each with one GPU and three CPUs free (R0-R3 take one GPU and five CPUs until
    1000). A (2 GPUs) fits no node until then; B (3 GPUs, one CPU each) spans three nodes, which hold it
    now. A pass is skipped when no tested job fits the free capacity (`fits_now`), and a larger job
    than one that does not fit is not tried only within its shape: B's is another (it spans nodes), so
    the pass at 30 runs and starts it. Job size out of the priority, so A ranks first."""
    jobs = [job(i, 0, 1, 1000, cpus=5) for i in range(4)]
    jobs += [job(4, 1, 2, 100, cpus=2), job(5, 1, 3, 50, cpus=3)]
    params = SlurmParams(priority=Multifactor(weight_job_size=0))
    result = SlurmRun(cluster(("P100", 2, 4)), jobs, params=params).run()
    assert starts(result) == {0: 0, 1: 0, 2: 0, 3: 0, 4: 1000, 5: 30}


def test_a_slurm_run_without_backfill_matches_the_event_simulators_fcfs_on_one_node() -> None:
    """Sanity: FCFS by multifactor with equal sizes and no backfilling is plain FCFS: the same starts
    as the paper loop's event simulator under FCFS without backfilling."""
    jobs = [job(i, 10.0 * i, 2, 100.0 + 7 * i) for i in range(8)]
    result = SlurmRun(ONE_NODE, jobs, params=SlurmParams(backfill=False)).run()
    event = Simulator(ONE_NODE, make_policy("fcfs"), SimConfig(backfill=False)).run(jobs)
    assert starts(result) == starts(event)
    assert len(set(starts(result).values())) == len(jobs)  # a queue formed: every job started apart


# When the main scheduler first tries a job. Slurm 22.05's submit and update RPCs only ask for a pass;
# slurmctld's background loop (about once a second, on a grid from the first submit here) runs it once
# batch_sched_delay (3 s) has passed since its last pass. A completion runs one at once.


def test_a_submit_waits_for_the_background_loops_next_pass() -> None:
    """A arrives at 0 and starts in that second's pass. B, which fits beside it, arrives at 1: its pass
    comes at 3, batch_sched_delay after the last. C arrives at 10.5 and waits for the next second (11).
    Models trained before this was modelled (`at_once`) start each job at its submit."""
    jobs = [job(0, 0, 1, 100, 120), job(1, 1, 1, 100, 120), job(2, 10.5, 1, 100, 120)]
    assert starts(SlurmRun(ONE_NODE, jobs).run()) == {0: 0, 1: 3, 2: 11}
    legacy = SlurmParams(event_pass="at_once")
    assert starts(SlurmRun(ONE_NODE, jobs, params=legacy).run()) == {0: 0, 1: 1, 2: 10.5}
    # The loop's grid as fitted from slurmctld's log, a quarter second off the submits (sched/builtin:
    # backfill keeps its own clock).
    observed = SlurmParams(backfill=False, background_phase_s=-7.75)
    assert starts(SlurmRun(ONE_NODE, jobs, params=observed).run()) == {0: 0.25, 1: 3.25, 2: 11.25}


def test_batch_sched_delay_zero_leaves_only_the_one_second_grid() -> None:
    """batch_sched_delay=0 (as in the lab): B at 1 is tried at once (1 is on the grid), C at 10.5 at 11.
    With the default 3 s, B waits until 3 (above)."""
    jobs = [job(0, 0, 1, 100, 120), job(1, 1, 1, 100, 120), job(2, 10.5, 1, 100, 120)]
    no_delay = SlurmParams(batch_sched_delay_s=0)
    assert starts(SlurmRun(ONE_NODE, jobs, params=no_delay).run()) == {0: 0, 1: 1, 2: 11}


def test_a_completion_runs_a_pass_at_once_which_does_not_delay_the_next_request() -> None:
    """A holds the node until 100.5; B waits for it and starts at A's completion, off the grid. C arrives
    at 101.2: the completion's pass does not count as the loop's last pass, so C is tried at the next
    tick (102), not batch_sched_delay after 100.5."""
    jobs = [job(0, 0, 4, 100.5, 120), job(1, 1, 2, 10, 60), job(2, 101.2, 1, 10, 60)]
    result = SlurmRun(ONE_NODE, jobs, params=SlurmParams(backfill=False)).run()
    assert starts(result) == {0: 0, 1: 100.5, 2: 102}


def test_the_periodic_passes_run_while_the_queue_is_empty() -> None:
    """sched/builtin, sched_interval 60: A (0-10) empties the queue; the loop's periodic pass still runs
    at 60, so B, submitted at 61.5, is tried batch_sched_delay after it, at 63 (not at 62)."""
    jobs = [job(0, 0, 1, 10, 60), job(1, 61.5, 1, 10, 60)]
    assert starts(SlurmRun(ONE_NODE, jobs, params=SlurmParams(backfill=False)).run()) == {0: 0, 1: 63}


def test_a_priority_update_waits_for_the_background_loop_too() -> None:
    """sched/builtin: A (2 GPUs) runs until 1000, B (4 GPUs) blocks C (1 GPU) behind it. An update at
    50.4 puts C first: it starts in the pass at 51, not at the write."""
    jobs = [job(0, 0, 2, 1000, 1200), job(1, 1, 4, 10, 60), job(2, 2, 1, 10, 60)]
    first = Action(job_id=2, kind="priority", fields=(("Priority", "1000000"),), value=1_000_000)
    builtin = SlurmParams(backfill=False)
    assert starts(SlurmRun(ONE_NODE, jobs, params=builtin, writes=[(50.4, first)]).run())[2] == 51
    legacy = SlurmParams(backfill=False, event_pass="at_once")
    assert starts(SlurmRun(ONE_NODE, jobs, params=legacy, writes=[(50.4, first)]).run())[2] == 50.4


# The daemon in the loop: an 8-GPU node; A fills it from 0 to 100. B (2 GPUs, limit 600) and C (2 GPUs,
# limit 60) arrive at 10 and 20; the tick at 60 ranks them by SJF (C, B). D (8 GPUs) arrives at 70,
# after the tick: it carries multifactor's priority (2000 + 1000 = 3000) until the next tick at 120.
EIGHT = cluster(("P100", 8, 1))
ARRIVALS = [
    job(0, 0, 8, 100, 120),
    job(1, 10, 2, 50, 600),
    job(2, 20, 2, 10, 60),
    job(3, 70, 8, 5, 60),
]


def ticks(lever: Lever) -> TickSettings:
    core = CoreSettings(lever=lever)
    return TickSettings(base="sjf", core=core, slurm=SlurmParams(backfill=False))


def test_without_a_daemon_slurm_orders_by_multifactor() -> None:
    """D (8 GPUs: job size 1000) outranks B and C (250 each): D starts at 100; B and C when D ends."""
    result = SlurmRun(EIGHT, ARRIVALS, params=SlurmParams(backfill=False)).run()
    assert starts(result) == {0: 0, 1: 105, 2: 105, 3: 100}


def test_priority_lever_fixes_the_order_above_new_arrivals() -> None:
    """The tick fixes C and B at priorities in the millions; D arrives with 3000 and waits behind both:
    C and B start at 100, D when B ends (150)."""
    result = run_ticks(EIGHT, ARRIVALS, 0, ticks(Lever(kind="priority")))
    assert starts(result) == {0: 0, 1: 100, 2: 100, 3: 150}


def test_site_factor_lever_adds_to_multifactor() -> None:
    """SiteFactor max 100: C gets 2250 + 100, B 2250 + 50; D's own 3000 still wins, as in Slurm."""
    result = run_ticks(EIGHT, ARRIVALS, 0, ticks(Lever(kind="site_factor", site_factor_max=100)))
    assert starts(result) == {0: 0, 1: 105, 2: 105, 3: 100}


def test_the_daemons_order_is_followed_at_the_next_start() -> None:
    """Two 8-GPU jobs wait behind A: B (limit 600) is older, C (limit 60) shorter. Slurm alone starts B
    first; after the tick at 60 ranks by SJF, C starts first."""
    jobs = [job(0, 0, 8, 100, 120), job(1, 10, 8, 50, 600), job(2, 20, 8, 10, 60)]
    alone = SlurmRun(EIGHT, jobs, params=SlurmParams(backfill=False)).run()
    assert starts(alone) == {0: 0, 1: 100, 2: 150}
    managed = run_ticks(EIGHT, jobs, 0, ticks(Lever(kind="priority")))
    assert starts(managed) == {0: 0, 1: 110, 2: 100}


def test_a_priority_write_that_reorders_the_queue_is_seen_by_the_next_backfill_pass() -> None:
    """Nothing but the order changes between two backfill passes, and the second must still plan. K80
    node busy until 100 (R1), V100 node half busy until 90 (R2). In Slurm's order Y (4 K80, first, blocks
    the main scheduler), Z (4 V100, reserved on the V100 node from 90), X (2 V100, limit 100): X would
    overrun Z's reservation, so the pass at 30 does not start it. The daemon's tick at 40 puts X above Z;
    the pass at 60 starts X (a pass that skipped the repeat because nothing else changed would leave it
    until R2 ends at 90)."""
    two = cluster(("K80", 4, 1), ("V100", 4, 1))
    jobs = [
        job(0, 0, 4, 100, gpu_type="K80"),
        job(1, 0, 2, 90, gpu_type="V100"),
        job(2, 1, 4, 50, gpu_type="K80"),  # Y
        job(3, 2, 4, 100, gpu_type="V100"),  # Z
        job(4, 3, 2, 100, gpu_type="V100"),  # X
    ]
    writes = tuple(Action(j, "priority", (), p) for j, p in ((2, 30), (4, 20), (3, 10)))
    result = with_writes(SlurmRun(two, jobs, interval_s=20.0), 40.0, writes)
    assert starts(result) == {0: 0, 1: 0, 4: 60, 2: 100, 3: 160}


def test_a_node_list_write_changes_where_the_next_backfill_pass_may_start_a_job() -> None:
    """Two 4-GPU K80 nodes hold 2 and 3 GPUs of jobs ending at 60; the V100 node is busy until 200. Y
    (4 V100 GPUs) blocks the main scheduler; X (3 GPUs, any type, limit 30) is tested by the backfill
    pass at 30 (3 GPUs free, but not on one node). The daemon's tick at 40 excludes the K80 nodes for
    X, so when they free up at 60 the pass may not start X there: it waits behind Y's reservation of
    the V100 node and starts when Y ends, at 300 (a pass that kept X's demand from before the write
    would start it on a K80 node at 60)."""
    two = cluster(("K80", 4, 2), ("V100", 4, 1))
    jobs = [
        job(0, 0, 2, 60, gpu_type="K80"),
        job(1, 0, 3, 60, gpu_type="K80"),
        job(2, 0, 4, 200, gpu_type="V100"),
        job(3, 1, 4, 100, gpu_type="V100"),  # Y
        job(4, 2, 3, 30),  # X
    ]
    writes = (Action(4, "excluded_nodes", (), "k80-0,k80-1"),)
    result = with_writes(SlurmRun(two, jobs, interval_s=40.0), 40.0, writes)
    assert starts(result) == {0: 0, 1: 0, 2: 0, 3: 200, 4: 300}
    assert [s.node for r in result.records if r.job.id == 4 for s in r.allocation] == [2]


@pytest.mark.parametrize("kind", ["priority", "site_factor"])
def test_the_kept_priority_order_and_squeue_view_change_no_snapshot_and_no_start(
    kind: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The priority order and squeue's priorities are kept while the queue holds (arrivals, starts,
    completions and writes move it; so does the clock while any queued job's multifactor priority is
    unwritten), and squeue's jobs while the queue's members do. Rebuilt at every read instead, as
    before they were kept, every snapshot and every job's start and nodes are the same, on a Philly
    stretch where a queue forms and where the daemon writes a random third of the queue at each tick,
    so that some jobs age in multifactor beside written ones."""
    jobs, warmup = Window(100, 300).with_warmup(
        apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)[0][30_100:30_400], 100
    )

    Seen = list[tuple[float, tuple[Job, ...], Mapping[int, int]]]

    def drive(rebuilt: bool) -> tuple[Seen, SimResult]:
        run = SlurmRun(load_cluster("philly-slice"), jobs, warmup)
        if rebuilt:
            monkeypatch.setattr(run, "_same_queue", lambda queued, at, now: False)
        rng = np.random.default_rng(0)
        seen: Seen = []
        loop = run.loop()
        try:
            snapshot = next(loop)
            while True:
                seen.append((snapshot.now, snapshot.pending, snapshot.priorities))
                chosen = [j.id for j in snapshot.pending if rng.random() < 1 / 3]
                writes = tuple(Action(i, kind, (), int(rng.integers(1, 5_000))) for i in chosen)
                snapshot = loop.send(Plan(writes, 0))
        except StopIteration:
            pass
        return seen, run.result()

    kept, rebuilt = drive(False), drive(True)
    assert len(kept[0]) > 500 and max(len(p) for _, p, _ in kept[0]) >= 10  # a queue forms

    def reused(seen: Seen, part: int) -> int:
        return sum(a[part] is b[part] for a, b in pairwise(seen))

    # A written Priority is fixed, so an unchanged queue's priorities are served again; a SiteFactor
    # adds to multifactor, which ages, so they are rebuilt at every tick (kept within an instant).
    assert reused(kept[0], 2) > 50 if kind == "priority" else reused(kept[0], 2) == 0
    assert reused(rebuilt[0], 2) == 0
    # The jobs are one tuple while no job arrives or starts, whatever their priorities do.
    assert reused(kept[0], 1) > reused(kept[0], 2)
    assert kept[0] == rebuilt[0]
    assert kept[1].records == rebuilt[1].records and kept[1].background == rebuilt[1].background


def test_the_waiting_cost_at_a_tick_is_each_measured_jobs_weighted_wait_so_far() -> None:
    """What a training episode's dense reward is paid from: at every tick, each measured job that has
    arrived counts its wait so far (to its start, or to now while it pends) times its weight; warm-up
    jobs count nothing. Checked against the finished run's starts."""
    jobs = [job(0, 0, 4, 100), job(1, 1, 4, 100), job(2, 2, 1, 50), job(3, 3, 2, 20)]  # 1 waits for 0
    run = SlurmRun(ONE_NODE, jobs, warmup=2, params=SlurmParams(backfill=False))
    weight = lambda j: 1.0 / (j.runtime or 1.0)  # noqa: E731 - one name for the same function twice
    seen: list[tuple[float, float]] = []
    loop = run.loop()
    try:
        snapshot = next(loop)
        while True:
            seen.append((snapshot.now, run.waited(snapshot.now, weight)))
            snapshot = loop.send(None)
    except StopIteration:
        pass
    start = starts(run.result())
    assert len(seen) >= 2
    for now, cost in seen:
        arrived = [j for j in jobs[2:] if j.submit <= now]
        assert cost == pytest.approx(sum((min(start[j.id], now) - j.submit) * weight(j) for j in arrived))
    with pytest.raises(ValueError, match="one weight"):
        run.waited(seen[-1][0], lambda j: 1.0)
