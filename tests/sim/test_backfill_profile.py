"""The backfill plan's earliest start, compiled, against the rule written plainly: on every row from
`not_before` to the horizon, `place(..., "pack")` on the least free capacity over the job's span, the
first row where it fits wins. Random clusters, running jobs, reservations and demands (one node, many
nodes, or pools of both kinds); start, end and nodes must agree exactly. And a whole pass, compiled with
its per-shape memo, against the same rule applied job after job without one. Both for `place`'s pack and
for Slurm's cons_tres node choice (among the nodes that hold the job over its span, by their free CPUs in
the start row), and with a later start reserving whole nodes, as sched/backfill does."""

from __future__ import annotations

import bisect
import copy

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.domain import Allocation, Slice
from rltuned.placement.cons_tres import tightest_node
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import Demand, build_pools, demand_for
from rltuned.sim.kernels import CONS_TRES, PACK
from rltuned.sim.slurm import Profile, ShapeTable, SlurmRun, releases
from tests.builders import cluster, job

SHAPES = [("A100", 8, 2), ("V100", 4, 3), ("V100", 2, 3)]
RESOLUTION = 60.0
CPUS = st.sampled_from([0, 0, 1, 7, 30])
"""0: the GPU share of the node; else CPUs asked, which can run out before the GPUs do."""


def plainly(profile: Profile, demand: Demand, limit: float, horizon: float, not_before: float,
            select: str = "pack") -> tuple[float, float, Allocation] | None:  # fmt: skip
    times, cap = [float(t) for t in profile.times], profile.cap
    for k, t in enumerate(times):
        if t < not_before:
            continue
        if t > horizon:
            return None
        end = t + limit
        j = max(bisect.bisect_left(times, end), k + 1)
        low = cap[k:j].min(axis=0)
        alloc = place(
            demand, profile.pools, FreeCapacity(low[0].tolist(), low[1].tolist(), low[2].tolist()), "pack"
        )
        if alloc is not None:
            if select == "cons_tres" and len(alloc) == 1:
                alloc = _cons_tres(profile, demand, low, cap[k][1])
            return t, end, alloc
    return None


def _cons_tres(profile: Profile, demand: Demand, low: np.ndarray, cpus_now: np.ndarray) -> Allocation:  # type: ignore[type-arg]
    candidate = np.zeros(low.shape[1], dtype=np.bool_)
    entry = {}
    for k, p in enumerate(demand.pools):
        if demand.gpus > profile.pools[p].gpus:
            continue
        c, m = demand.slice_cpus(k, demand.gpus), demand.slice_mem(k, demand.gpus)
        for n in profile.pools[p].nodes:
            if low[0][n] >= demand.gpus and low[1][n] >= c and low[2][n] >= m:
                candidate[n], entry[n] = True, (c, m)
    node = int(tightest_node(cpus_now.astype(np.int64), candidate))
    return (Slice(node, demand.gpus, *entry[node]),)


@st.composite
def plans(draw: st.DrawFn) -> tuple[Profile, list[tuple[Demand, float, float, float]]]:
    spec = cluster(*SHAPES)
    run = SlurmRun(spec, [])
    pools = build_pools(run.cluster)
    free = run.free.copy()
    now = float(draw(st.integers(0, 50)) * 7)
    running: list[tuple[float, Allocation]] = []
    for i in range(draw(st.integers(0, 12))):
        demand = demand_for(job(i, 0, draw(st.integers(1, 8)), 100, cpus=draw(CPUS)), pools)
        assert demand is not None
        alloc = place(demand, pools, free, draw(st.sampled_from(["pack", "spread"])))
        if alloc is not None:
            free.take(alloc)
            running.append((now + draw(st.integers(-90, 3000)), alloc))
    profile = Profile(now, free, RESOLUTION, releases(running), run.pools, run.pool_arrays)
    horizon = now + draw(st.integers(1, 80)) * 60.0
    asks = []
    for i in range(draw(st.integers(1, 25))):
        gpus = draw(st.integers(1, 16))
        demand = demand_for(job(100 + i, 0, gpus, 10, cpus=draw(CPUS)), pools)
        assert demand is not None
        limit = float(draw(st.integers(1, 4000)))
        not_before = now + draw(st.integers(0, 3000))
        asks.append((demand, limit, horizon, not_before))
    return profile, asks


@pytest.mark.parametrize(("select", "whole"), [("pack", False), ("cons_tres", False), ("cons_tres", True)])
@given(plan=plans())
@settings(max_examples=300, deadline=None)
def test_the_compiled_earliest_start_is_the_plain_rule(
    select: str, whole: bool, plan: tuple[Profile, list]
) -> None:  # type: ignore[type-arg]
    profile, asks = plan
    profile.select, profile.whole_nodes = (CONS_TRES if select == "cons_tres" else PACK), whole
    for demand, limit, horizon, not_before in asks:
        expected = plainly(profile, demand, limit, horizon, not_before, select)
        assert profile.earliest(demand, limit, horizon, not_before) == expected
        if expected is not None:  # reserve it, as a pass does, so later asks meet a busier profile
            profile.reserve(expected[2], expected[0], expected[1])


@pytest.mark.parametrize(("select", "whole"), [("pack", False), ("cons_tres", False), ("cons_tres", True)])
@given(plan=plans())
@settings(max_examples=300, deadline=None)
def test_a_compiled_pass_plans_as_the_plain_rule_job_after_job(
    select: str,
    whole: bool,
    plan: tuple[Profile, list],  # type: ignore[type-arg]
) -> None:
    """The pass searches from where the memo says a smaller, shorter job of the same shape could not start
    earlier; that must change no start: every job that starts now, on its nodes, and the reservations the
    others leave (the profile after the pass)."""
    profile, asks = plan
    profile.select, profile.whole_nodes = (CONS_TRES if select == "cons_tres" else PACK), whole
    plain = copy.deepcopy(profile)
    horizon = asks[0][2]
    expected = []
    for demand, limit, _, _ in asks:
        found = plainly(plain, demand, limit, horizon, plain.now, select)
        if found is not None:
            plain.reserve(found[2], found[0], found[1])
        expected.append(found[2] if found is not None and found[0] == plain.now else None)
    assert profile.plan([(d, limit) for d, limit, _, _ in asks], ShapeTable(), horizon) == expected
    assert profile.times.tolist() == plain.times.tolist()
    assert (profile.cap == plain.cap).all()


@given(plan=plans())
@settings(max_examples=100, deadline=None)
def test_a_pass_reads_only_the_slices_it_wrote(plan: tuple[Profile, list]) -> None:  # type: ignore[type-arg]
    """`plan_columns` hands the kernel an array it does not zero (a congested queue's rows, at every
    pass); a pass over one filled with garbage must plan exactly as one over zeros."""
    profile, asks = plan
    profile.select, profile.whole_nodes = CONS_TRES, True
    garbage = copy.deepcopy(profile)
    horizon = asks[0][2]
    jobs = [(d, limit) for d, limit, _, _ in asks]
    empty = np.empty
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(np, "empty", lambda shape, dtype=float: np.zeros(shape, dtype))
        expected = profile.plan(jobs, ShapeTable(), horizon)
        patch.setattr(np, "empty", lambda shape, dtype=float: np.full(shape, -7, dtype))
        assert garbage.plan(jobs, ShapeTable(), horizon) == expected
    assert np.empty is empty
    assert garbage.times.tolist() == profile.times.tolist()
    assert (garbage.cap == profile.cap).all()


def _hold_plainly(
    rows: list[tuple[float, np.ndarray]],  # type: ignore[type-arg]
    now: float,
    start: float,
    end: float,
    alloc: Allocation,
    whole: bool,
) -> None:
    """A reservation on a list of (start time, capacity) rows, as sched/backfill holds it: from now, the
    slices until the limit; later, on the resolution grid (on whole nodes when `whole`), or not at all
    when the rounding leaves nothing. A row is split where the span starts and ends inside it."""
    if start > now:
        start, end = (
            max(np.floor(start / RESOLUTION) * RESOLUTION, now),
            np.floor(end / RESOLUTION) * RESOLUTION,
        )
        if end <= start:
            return
    else:
        whole = False
    for t in (start, end):
        times = [r[0] for r in rows]
        k = bisect.bisect_right(times, t) - 1
        if times[k] != t:
            rows.insert(k + 1, (t, rows[k][1].copy()))
    for t, cap in rows:
        if start <= t < end:
            for s in alloc:
                if whole:
                    cap[:, s.node] = 0
                else:
                    cap[:, s.node] -= (s.gpus, s.cpus, s.mem_mb)


@pytest.mark.parametrize("whole", [False, True])
@given(plan=plans())
@settings(max_examples=200, deadline=None)
def test_a_reservation_takes_capacity_only_during_its_span(whole: bool, plan: tuple[Profile, list]) -> None:  # type: ignore[type-arg]
    """The kernels keep a row's capacity wherever it was first written (`sim/kernels.py`, `slot`); read in
    time order, the profile after every reservation must be the plain list of rows split and reduced."""
    profile, asks = plan
    profile.whole_nodes = whole
    # No spare rows: every reservation grows the arrays (`Profile._room`), slot numbers included.
    size = profile.size
    profile._t, profile._slot, profile._cap = (
        profile._t[:size].copy(),
        profile._slot[:size].copy(),
        profile._cap[:size].copy(),
    )
    rows = [(float(t), c.copy()) for t, c in zip(profile.times, profile.cap, strict=True)]
    for demand, limit, horizon, not_before in asks:
        found = profile.earliest(demand, limit, horizon, not_before)
        if found is None:
            continue
        start, end, alloc = found
        profile.reserve(alloc, start, end)
        _hold_plainly(rows, profile.now, start, end, alloc, whole)
        assert profile.times.tolist() == [t for t, _ in rows]
        assert (profile.cap == np.stack([c for _, c in rows])).all()
