"""Priority targets: Slurm's order must equal the plan, within the band, with as few writes as possible."""

from __future__ import annotations

import bisect
import dataclasses
import itertools

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from rltuned.core.levers import Action
from rltuned.core.plan import Change, Written, priority_targets
from rltuned.core.priority_kernel import longest_decreasing

LOW, HIGH, STEP = 1_000, 10_000_000, 1_000


def _strictly_decreasing(order: list[int], targets: dict[int, int]) -> bool:
    values = [targets[j] for j in order]
    return all(a > b for a, b in itertools.pairwise(values))


def test_a_fresh_queue_is_numbered_step_apart_from_below_the_top() -> None:
    targets = priority_targets([7, 3, 9], {}, {}, LOW, HIGH, STEP)
    assert _strictly_decreasing([7, 3, 9], targets)
    assert targets[7] - targets[3] == STEP
    assert targets[7] < HIGH  # headroom above for jobs that later move to the front


def test_an_unchanged_plan_keeps_every_value() -> None:
    first = priority_targets([1, 2, 3], {}, {}, LOW, HIGH, STEP)
    assert priority_targets([1, 2, 3], first, first, LOW, HIGH, STEP) == first


def test_a_new_job_slots_in_between_without_moving_the_others() -> None:
    first = priority_targets([1, 2, 3], {}, {}, LOW, HIGH, STEP)
    second = priority_targets([1, 4, 2, 3], first, first, LOW, HIGH, STEP)
    assert {j: second[j] for j in (1, 2, 3)} == first
    assert first[1] > second[4] > first[2]


def test_values_rltuned_did_not_write_are_never_trusted() -> None:
    """A multifactor priority that happens to be in order is still replaced: only fixed values are ours."""
    current = {1: 5_000_000, 2: 4_000_000}
    targets = priority_targets([1, 2], current, {}, LOW, HIGH, STEP)
    assert targets != current


def test_a_value_slurm_changed_since_we_wrote_it_is_rewritten() -> None:
    first = priority_targets([1, 2], {}, {}, LOW, HIGH, STEP)
    drifted = {1: first[1], 2: first[2] + 5}
    targets = priority_targets([1, 2], drifted, first, LOW, HIGH, STEP)
    assert targets[1] == first[1]
    assert _strictly_decreasing([1, 2], targets)


@given(
    st.lists(st.integers(0, 60), min_size=1, max_size=40, unique=True),
    st.permutations(list(range(61))),
    st.integers(1, 3),
)
def test_targets_are_strictly_decreasing_in_band_after_any_reorder(
    first_order: list[int], shuffled: list[int], step_scale: int
) -> None:
    step = STEP * step_scale
    first = priority_targets(first_order, {}, {}, LOW, HIGH, step)
    later = [j for j in shuffled if j in first or j % 3 == 0][:50]
    targets = priority_targets(later, first, first, LOW, HIGH, step)
    assert set(targets) == set(later)
    assert _strictly_decreasing(later, targets)
    assert all(LOW <= v <= HIGH for v in targets.values())


@given(st.integers(2, 40))
def test_a_narrow_band_still_orders_when_it_can(n: int) -> None:
    order = list(range(n))
    targets = priority_targets(order, {}, {}, 1, n, 1000)
    assert _strictly_decreasing(order, targets)


_OPS = st.one_of(
    st.tuples(
        st.just("write"), st.integers(0, 9), st.sampled_from(["priority", "site_factor"]), st.integers(1, 5)
    ),
    st.tuples(st.just("steer"), st.integers(0, 9), st.sampled_from(["", "a[1-2]", "b1"])),
    st.tuples(st.just("unset"), st.integers(0, 9), st.sampled_from(["priority", "excluded_nodes"])),
    st.tuples(st.just("forget"), st.integers(0, 9)),
    st.tuples(st.just("keep_only"), st.frozensets(st.integers(0, 9))),
)


@given(st.lists(_OPS, max_size=40))
def test_the_ledger_holds_what_a_plain_map_of_changes_holds(ops: list[tuple[object, ...]]) -> None:
    """`Written` keeps a job's priority in its own index and the rest of its change apart, and the
    planner and the quiet check read which jobs carry a written priority and which are steered from
    indexes: after any writes, unsets, forgets and drops, it must hold what a plain map of `Change`s
    updated with `dataclasses.replace` holds, and its indexes must agree (a stale one would keep a value
    Slurm no longer shows, or leave a node list in place)."""
    written = Written()
    plain: dict[int, Change] = {}
    for op in ops:
        match op:
            case ("write", int(job), str(kind), int(value)):
                written.record_applied(Action(job, kind, (), value))
                plain[job] = dataclasses.replace(plain.get(job, Change()), **{kind: value})
            case ("steer", int(job), str(nodes)):
                written.record_applied(Action(job, "excluded_nodes", (), nodes))
                plain[job] = dataclasses.replace(plain.get(job, Change()), excluded_nodes=nodes or None)
            case ("unset", int(job), str(kind)):
                written.record(job, **{kind: None})
                plain[job] = dataclasses.replace(plain.get(job, Change()), **{kind: None})
            case ("forget", int(job)):
                written.forget(job)
                plain.pop(job, None)
            case ("keep_only", frozenset() as keep):
                assert written.keep_only(keep) == len(plain.keys() - keep)
                plain = {j: c for j, c in plain.items() if j in keep}
        changes = dict(written.items())
        assert changes == plain and len(written) == len(plain)
        assert all(written.get(j) == c for j, c in plain.items()) and written.get(99) == Change()
        owned = {j: c.priority for j, c in changes.items() if c.priority is not None}
        assert written.owned_priorities() == owned
        assert written.steered() == {j for j, c in changes.items() if c.excluded_nodes}
        assert Written(plain).owned_priorities() == owned and dict(Written(plain).items()) == plain


@given(
    st.lists(
        st.tuples(
            st.sampled_from(["same", "same", "shuffle", "fewer", "shown"]),
            st.booleans(),
            st.integers(0, 2**16),
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["priority", "site_factor"]),
)
def test_a_kept_plan_is_the_plan_made_afresh(ticks: list[tuple[str, bool, int]], kind: str) -> None:
    """`make_plan` keeps the last tick's writes for an unchanged order, ledger and priorities shown;
    over ticks that keep the order, reorder it, lose jobs, show another priority for the same job
    objects (someone else's `scontrol update`), and apply their writes or not, each plan is what a
    fresh one is."""
    import random

    from rltuned.core.placement import Placements
    from rltuned.core.plan import Lever, forget_plan, make_plan
    from rltuned.core.ranking import Ranking
    from rltuned.domain import Job
    from tests.builders import cluster

    spec = cluster(("V100", 8, 2))
    lever = Lever(kind=kind, max_actions=5)
    ledger = Written()
    jobs = [Job(i, float(i), 1, runtime=60.0, time_limit=60.0) for i in range(8)]
    none = Placements({}, "off")
    shown: dict[int, int] = {}
    for change, apply, seed in ticks:
        rng = random.Random(seed)
        if change == "shuffle":
            rng.shuffle(jobs)
        elif change == "fewer" and len(jobs) > 1:
            jobs.pop(rng.randrange(len(jobs)))
        elif change == "shown":
            shown = {**shown, rng.choice(jobs).id: rng.randrange(1, 10**6)}
        ranking = Ranking(tuple(jobs), tuple(jobs), {}, "base", lambda: None)  # type: ignore[arg-type,return-value]
        kept = make_plan(ranking, shown, none, {}, ledger, spec, lever)
        forget_plan()
        fresh = make_plan(ranking, shown, none, {}, ledger, spec, lever)
        assert (kept.actions, kept.capped) == (fresh.actions, fresh.capped)
        assert kept.jobs == fresh.jobs
        kept = make_plan(ranking, shown, none, {}, ledger, spec, lever)  # the memo's path, for the next tick
        if apply:  # Slurm accepted the writes: the ledger records them, squeue shows them
            for action in kept.actions:
                ledger.record_applied(action)
            if kind == "priority":
                shown = {**shown, **{a.job_id: int(a.value) for a in kept.actions}}


def _patience(points: list[tuple[int, int]], values: list[int]) -> list[tuple[int, int]]:
    """The longest strictly decreasing chain of `points`, one patience step at a time (as first
    written): each point goes on the leftmost pile whose top is not above it, its parent the top of the
    pile before; the chain is read back from the last pile."""
    tails: list[int] = []
    tail_at: list[int] = []
    parent = [-1] * len(values)
    for p, value in enumerate(values):
        k = bisect.bisect_left(tails, -value)
        if k == len(tails):
            tails.append(-value)
            tail_at.append(p)
        else:
            tails[k] = -value
            tail_at[k] = p
        parent[p] = tail_at[k - 1] if k > 0 else -1
    chain: list[tuple[int, int]] = []
    p = tail_at[-1] if tail_at else -1
    while p >= 0:
        chain.append(points[p])
        p = parent[p]
    return chain[::-1]


def _targets_as_first_written(
    order: list[int], current: dict[int, int], owned: dict[int, int], low: int, high: int, step: int
) -> dict[int, int]:
    """`priority_targets` as first written, one anchor at a time and its chain one patience step at a
    time (`_patience`): the oracle for the faster code, which must give the same values."""
    n = len(order)
    inside = [(i, owned[j]) for i, j in enumerate(order) if j in owned and current.get(j) == owned[j]]
    points = [(i, v) for i, v in inside if low <= v <= high]
    keep = _patience(points, [v for _, v in points])
    top = high - (high - low) // 4
    spacing = max(1, min(step, (top - low) // max(n - 1, 1)))
    if spacing * (n - 1) > top - low:
        top, spacing = high, max(1, (high - low) // max(n - 1, 1))
    renumbered = {j: max(low, top - spacing * i) for i, j in enumerate(order)}
    if not keep:
        return renumbered
    targets: dict[int, int] = {}
    for (i0, upper), (i1, lower) in itertools.pairwise([(-1, high + 1), *keep, (n, low - 1)]):
        if i0 >= 0:
            targets[order[i0]] = upper
        m = i1 - i0 - 1
        if m == 0:
            continue
        if i0 < 0:
            spacing = min(step, (upper - lower - 1) // m)
            values = [lower + spacing * (m - k) for k in range(m)]
        else:
            spacing = min(step, (upper - lower - 1) // (m + 1 if i1 < n else m))
            values = [upper - spacing * (k + 1) for k in range(m)]
        if spacing < 1:
            return renumbered
        targets.update(zip(order[i0 + 1 : i1], values, strict=True))
    return targets


@st.composite
def _plans(draw: st.DrawFn) -> tuple[list[int], dict[int, int]]:
    """An order and the values rltuned wrote: random ones, or the last tick's in order with a few
    jobs moved, a few new and a few gone (a deterministic ranking's next tick)."""
    order = draw(st.lists(st.integers(0, 300), max_size=120, unique=True))
    if draw(st.booleans()):
        return order, draw(st.dictionaries(st.integers(0, 300), st.integers(0, 12_000), max_size=120))
    owned = {j: 11_000 - 75 * k for k, j in enumerate(order)}
    for j in draw(st.sets(st.sampled_from(order))) if order else ():
        if draw(st.integers(0, 9)) == 0:
            del owned[j]  # new since the last tick
    for _ in range(draw(st.integers(0, 4)) if order else 0):
        at, to = draw(st.integers(0, len(order) - 1)), draw(st.integers(0, len(order) - 1))
        order.insert(to, order.pop(at))
    return order, owned


@given(
    _plans(),
    st.sets(st.integers(0, 300)),
    st.sampled_from([(1_000, 10_000_000, 1_000), (1, 200, 1_000), (1_000, 12_000, 7)]),
)
def test_the_targets_are_those_of_the_rule_as_first_written(
    plan: tuple[list[int], dict[int, int]], drifted: set[int], band: tuple[int, int, int]
) -> None:
    """Runs of values already in order are kept at once and only the gaps between kept jobs are
    filled; the values are those of one patience step and one anchor at a time, for any mix of kept,
    drifted, out-of-band and new jobs."""
    order, owned = plan
    low, high, step = band
    current = {j: v + 1 if j in drifted else v for j, v in owned.items()}
    assert priority_targets(order, current, owned, low, high, step) == _targets_as_first_written(
        order, current, owned, low, high, step
    )


@st.composite
def _values(draw: st.DrawFn) -> list[int]:
    """Shuffled values (a sampled ranking's), or decreasing ones with a few moved (a deterministic
    ranking's queue, a few arrivals and starts since the last tick)."""
    if draw(st.booleans()):
        return draw(st.lists(st.integers(0, 50), max_size=60))
    values = sorted(draw(st.lists(st.integers(0, 500), min_size=16, max_size=120)), reverse=True)
    for _ in range(draw(st.integers(0, 4))):
        at, to = draw(st.integers(0, len(values) - 1)), draw(st.integers(0, len(values) - 1))
        values.insert(to, values.pop(at))
    return values


@given(_values())
def test_the_longest_decreasing_chain_is_patience_sortings(values: list[int]) -> None:
    """The compiled chain is the one patience sorting picks one point at a time in Python (ties and
    repeated values included): the chain decides which jobs keep their values."""
    points = list(enumerate(values))
    chain = longest_decreasing(np.array(values, np.int64)).tolist()
    assert [points[p] for p in chain] == _patience(points, values)
