"""On random small snapshots (hypothesis): `can_schedule_now` is the greedy placer's verdict, every
value is in [0, 1], and a state built from the last tick's kept one is the state built afresh."""

from __future__ import annotations

import dataclasses

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rltuned.domain import ClusterSnapshot, ClusterSpec, Job
from rltuned.features import FEATURE_NAMES, encode, feature_table
from rltuned.features.encode import forget
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import build_pools, demand_for
from rltuned.policies import make_policy
from tests.builders import cluster

SHAPES = st.lists(
    st.tuples(st.sampled_from(["P100", "K80", "V100"]), st.sampled_from([1, 2, 4, 8]), st.integers(1, 3)),
    min_size=1,
    max_size=3,
)


@st.composite
def snapshots(draw: st.DrawFn) -> ClusterSnapshot:
    spec = cluster(*draw(SHAPES))
    spec = ClusterSpec(
        spec.name,
        tuple(dataclasses.replace(n, partition=draw(st.sampled_from(["", "p1"]))) for n in spec.nodes),
    )
    types = sorted({n.gpu_type for n in spec.nodes})
    free_gpus = [draw(st.sampled_from([n.gpus, n.gpus, draw(st.integers(0, n.gpus))])) for n in spec.nodes]
    # Mostly each node's share for its free GPUs (as running jobs that took their GPU share leave it),
    # sometimes anything, so CPUs and memory bind now and then.
    free_cpus = [
        draw(st.sampled_from([n.cpus * f // n.gpus] * 3 + [draw(st.integers(0, n.cpus))]))
        for n, f in zip(spec.nodes, free_gpus, strict=True)
    ]
    free_mem = [
        draw(st.sampled_from([n.mem_mb * f // n.gpus] * 3 + [draw(st.integers(0, n.mem_mb))]))
        for n, f in zip(spec.nodes, free_gpus, strict=True)
    ]
    jobs = []
    for i in range(draw(st.integers(0, 12))):
        gpus = draw(st.sampled_from([0, 1, 1, 1, 2, 2, 3, 4, 6, 8, 12, 16]))
        jobs.append(
            Job(
                i,
                submit=float(draw(st.integers(0, 10**6))),
                gpus=gpus,
                time_limit=float(draw(st.integers(1, 10**7))),
                gpu_type=draw(st.sampled_from([None, *types, "H100"])),
                partition=draw(st.sampled_from(["", "p1", "vc9"])),
                cpus=draw(st.sampled_from([0, 0, 1, 3, 6, 40])),
                mem_mb=draw(st.sampled_from([0, 0, 1000, 20000, 10**6])),
            )
        )
    now = float(draw(st.integers(0, 2 * 10**6)))
    return ClusterSnapshot(now, spec, tuple(free_gpus), tuple(free_cpus), tuple(free_mem), tuple(jobs), ())


settings.register_profile("features", deadline=None, suppress_health_check=[HealthCheck.too_slow])


@settings(settings.get_profile("features"), max_examples=300)
@given(snapshots())
def test_can_schedule_now_is_the_greedy_verdict(snap: ClusterSnapshot) -> None:
    pools = build_pools(snap.cluster)
    table = feature_table(snap, snap.pending)
    for job, value in zip(snap.pending, table[:, FEATURE_NAMES.index("can_schedule_now")], strict=True):
        demand = demand_for(job, pools) if job.gpus >= 1 else None  # it divides by the GPUs first
        free = FreeCapacity(list(snap.free_gpus), list(snap.free_cpus), list(snap.free_mem_mb))
        fits = demand is not None and place(demand, pools, free, "pack") is not None
        assert bool(value) is fits, (job, value)


@settings(settings.get_profile("features"), max_examples=150)
@given(snapshots(), st.sampled_from(["fcfs", "sjf", "wfp3", "multifactor"]))
def test_every_value_is_in_unit_interval(snap: ClusterSnapshot, policy: str) -> None:
    obs = encode(snap, make_policy(policy))
    for array in (obs.table, obs.actor, obs.critic):
        assert np.isfinite(array).all()
        assert array.min() >= 0.0 and array.max() <= 1.0
    assert 0.0 <= obs.cff <= 1.0
    assert int(obs.mask.sum()) == len(snap.pending)


@st.composite
def successive(draw: st.DrawFn) -> tuple[ClusterSnapshot, ClusterSnapshot]:
    """A snapshot and the next tick's: later, and sometimes with other free capacity, the jobs in
    another order, a job fewer, a job more (an arrival: a copy of the last with a new id), both free
    capacity and jobs moved, equal jobs rebuilt as new objects (as the Slurm adapter does), new
    priorities (the daemon's writes), a job's limit edited, or another origin."""
    first = draw(snapshots())
    later = first.now + draw(st.sampled_from([0.0, 60.0, 86_400.0 * 30]))
    pending = first.pending
    change = draw(
        st.sampled_from(
            ["none", "none", "free", "order", "fewer", "arrived", "free+fewer", "rebuilt", "priority",
             "edited", "origin"]
        )
    )  # fmt: skip
    free, origin = first.free_gpus, first.origin
    if change in ("free", "free+fewer"):
        free = tuple(max(g - 1, 0) for g in free)
    if change == "free+fewer":
        pending = pending[1:]
    elif change == "order":
        pending = pending[::-1]
    elif change == "fewer":
        pending = pending[1:]
    elif change == "arrived" and pending:
        newest = max(j.id for j in pending) + 1
        pending = (*pending, dataclasses.replace(pending[-1], id=newest, submit=later))
    elif change == "rebuilt":
        pending = tuple(dataclasses.replace(j) for j in pending)
    elif change == "priority":  # the daemon's writes, as Slurm shows them on the next tick
        shown = {j.id: draw(st.integers(1, 10**6)) for j in pending}
        return first, dataclasses.replace(first, now=later, pending=pending, priorities=shown)
    elif change == "edited" and pending:  # an admin's `scontrol update TimeLimit=` on one job
        limit = pending[0].time_limit or 60.0
        pending = (dataclasses.replace(pending[0], time_limit=2 * limit), *pending[1:])
    elif change == "origin":  # F1-F4 read it
        origin = float(draw(st.integers(0, 10**6)))
    return first, dataclasses.replace(first, now=later, free_gpus=free, pending=pending, origin=origin)


@settings(settings.get_profile("features"), max_examples=300)
@given(successive(), st.sampled_from(["fcfs", "sjf", "saf", "f1", "wfp3", "multifactor"]))
def test_a_kept_state_is_the_state_computed_afresh(
    pair: tuple[ClusterSnapshot, ClusterSnapshot], policy_name: str
) -> None:
    """`encode` keeps its last order and table for the next tick; what it returns must be, to the
    last bit, what a fresh computation gives."""
    first, second = pair
    policy = make_policy(policy_name)
    encode(first, policy)
    kept = encode(second, policy)
    forget()
    fresh = encode(second, policy)
    for name in ("actor", "mask", "critic", "job_ids", "table"):
        assert getattr(kept, name).tobytes() == getattr(fresh, name).tobytes(), name
    assert (kept.sampled, kept.cff, kept.overflow) == (fresh.sampled, fresh.cff, fresh.overflow)
