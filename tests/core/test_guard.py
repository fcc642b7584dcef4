"""The starvation guard: whatever the ranking, no job waits without bound, in the daemon and in training."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from rltuned.core import CoreSettings, Ranking, Written, decide_ranked
from rltuned.core.guard import BASE_RANK, DISPLACED, MAX_WAIT, Guarded, GuardSettings, guard
from rltuned.domain import ClusterSnapshot, Job
from rltuned.sim.ticks import UNPINNED, TickEpisode, TickSettings
from tests.builders import cluster, job

SPEC = cluster(("V100", 1, 1))
HOUR = 3600.0


def _snapshot(now: float, jobs: list[Job]) -> ClusterSnapshot:
    return ClusterSnapshot(now, SPEC, (0,), (0,), (0,), tuple(jobs), ())


def _ranking(jobs: list[Job], order: list[int]) -> Ranking:
    by_id = {j.id: j for j in jobs}

    def no_state() -> None:
        raise AssertionError("the guard never needs the state matrix")

    return Ranking(tuple(by_id[i] for i in order), tuple(jobs), {}, "model", no_state)  # type: ignore[arg-type]


def _ids(ranking: Ranking) -> list[int]:
    return [j.id for j in ranking.order]


JOBS = [job(i, submit=0.0, gpus=1, runtime=60.0, user=f"u{i}") for i in range(1, 5)]


def test_a_job_pushed_below_its_base_rank_goes_first_once_pending_past_max_wait() -> None:
    ranking = _ranking(JOBS, [4, 3, 2, 1])  # jobs 1 and 2 below their base ranks; 3 and 4 above
    settings = GuardSettings(max_wait_s=10 * HOUR, max_displacement=None)
    early = guard(ranking, _snapshot(9 * HOUR, JOBS), settings, {}).ranking
    assert _ids(early) == [4, 3, 2, 1] and not early.guarded
    late = guard(ranking, _snapshot(10 * HOUR, JOBS), settings, {}).ranking
    assert _ids(late) == [1, 2, 4, 3]  # the pushed-back old jobs first, in base order; then the ranking
    assert late.guarded == {1: MAX_WAIT, 2: MAX_WAIT}


def test_a_job_the_base_policy_itself_keeps_waiting_is_left_alone() -> None:
    """Bounding waits the base policy causes is the base policy's business: promoting every old job
    regardless made SJF much worse on an overloaded ITP window (core/guard.py)."""
    every_job_old = _snapshot(100 * HOUR, JOBS)
    settings = GuardSettings(max_wait_s=HOUR, max_displacement=0, grace_s=0.0)
    base = guard(_ranking(JOBS, [1, 2, 3, 4]), every_job_old, settings, {})
    assert _ids(base.ranking) == [1, 2, 3, 4] and not base.ranking.guarded
    capped = GuardSettings(max_wait_s=None, max_displacement=None, user_max_wait_s={"u2": HOUR})
    lifted = guard(_ranking(JOBS, [2, 1, 3, 4]), every_job_old, capped, {})  # u2's job above its base rank
    assert _ids(lifted.ranking) == [2, 1, 3, 4] and not lifted.ranking.guarded


def test_a_users_own_cap_replaces_max_wait() -> None:
    settings = GuardSettings(max_wait_s=None, max_displacement=None, user_max_wait_s={"u2": HOUR})
    out = guard(_ranking(JOBS, [4, 3, 1, 2]), _snapshot(2 * HOUR, JOBS), settings, {}).ranking
    assert _ids(out) == [2, 4, 3, 1]  # job 1 is pushed down too, but u1 has no cap and no max_wait applies
    assert out.guarded == {2: MAX_WAIT}


def test_displacement_promotes_only_after_the_grace_period_and_its_clock_restarts() -> None:
    settings = GuardSettings(max_wait_s=None, max_displacement=2, grace_s=HOUR)
    ranking = _ranking(JOBS, [2, 3, 4, 1])  # job 1: base rank 0, ranked 3rd place below it
    first = guard(ranking, _snapshot(0.0, JOBS), settings, {})
    assert _ids(first.ranking) == [2, 3, 4, 1] and first.displaced_since == {1: 0.0}
    still = guard(ranking, _snapshot(HOUR - 1, JOBS), settings, first.displaced_since)
    assert not still.ranking.guarded
    due = guard(ranking, _snapshot(HOUR, JOBS), settings, still.displaced_since)
    assert _ids(due.ranking) == [1, 2, 3, 4] and due.ranking.guarded == {1: DISPLACED}
    # Ranked within two places of its base rank, the clock is dropped; pushed down again, it restarts.
    back = guard(_ranking(JOBS, [2, 3, 1, 4]), _snapshot(HOUR + 60, JOBS), settings, due.displaced_since)
    assert back.displaced_since == {}
    again = guard(ranking, _snapshot(HOUR + 120, JOBS), settings, back.displaced_since)
    assert not again.ranking.guarded and again.displaced_since == {1: HOUR + 120}


def test_back_to_base_rank_undoes_what_the_ranking_did_instead_of_jumping_the_queue() -> None:
    """On ITP, four jobs put at the head by the waiting cap stopped Slurm's main scheduler and took one
    validation window from 4.5 to 15.4 (docs/training.md); back at their base rank they do not."""
    jobs = [job(i, submit=0.0, gpus=1, runtime=60.0, user=f"u{i}") for i in range(1, 7)]
    ranking = _ranking(jobs, [1, 2, 4, 5, 6, 3])  # job 3: base rank 2, ranked last
    head = GuardSettings(max_wait_s=HOUR, max_displacement=None)
    assert _ids(guard(ranking, _snapshot(HOUR, jobs), head, {}).ranking) == [3, 1, 2, 4, 5, 6]
    undo = GuardSettings(max_wait_s=HOUR, max_displacement=None, promote_to=BASE_RANK)
    out = guard(ranking, _snapshot(HOUR, jobs), undo, {}).ranking
    assert _ids(out) == [1, 2, 3, 4, 5, 6] and out.guarded == {3: MAX_WAIT}
    held = _ranking(jobs, [1, 3, 4, 5, 2, 6])  # job 2: base rank 1, three places down
    displaced = GuardSettings(max_wait_s=None, max_displacement=2, grace_s=0.0)
    assert _ids(guard(held, _snapshot(0.0, jobs), displaced, {}).ranking) == [2, 1, 3, 4, 5, 6]
    undone = guard(held, _snapshot(0.0, jobs), replace(displaced, promote_to=BASE_RANK), {}).ranking
    assert _ids(undone) == [1, 2, 3, 4, 5, 6] and undone.guarded == {2: DISPLACED}


@given(st.permutations(list(range(1, 9))), st.sets(st.integers(1, 8)))
def test_back_at_base_rank_every_acted_on_job_sits_exactly_at_its_base_rank(
    order: list[int], old: set[int]
) -> None:
    """Each job the guard acts on lands at its base rank; the others keep the ranking's order."""
    jobs = [job(i, submit=0.0 if i in old else 9 * HOUR, gpus=1, runtime=60.0) for i in range(1, 9)]
    undo = GuardSettings(max_wait_s=HOUR, max_displacement=None, promote_to=BASE_RANK)
    out = guard(_ranking(jobs, order), _snapshot(2 * HOUR, jobs), undo, {}).ranking
    assert sorted(_ids(out)) == list(range(1, 9))
    for job_id in out.guarded:
        assert _ids(out).index(job_id) == job_id - 1  # base order is id order here
    assert [i for i in _ids(out) if i not in out.guarded] == [i for i in order if i not in out.guarded]
    assert set(out.guarded) == {i for i in old if order.index(i) > i - 1}  # pushed below base, old


def test_a_guard_rule_no_one_knows_is_refused() -> None:
    import pytest

    with pytest.raises(ValueError, match="promote_to must be one of"):
        GuardSettings(promote_to="front")


def test_off_leaves_the_ranking_alone() -> None:
    settings = GuardSettings(max_wait_s=None, max_displacement=None)
    ranking = _ranking(JOBS, [4, 3, 2, 1])
    assert guard(ranking, _snapshot(1e9, JOBS), settings, {}).ranking is ranking


def test_the_core_plans_the_guarded_order_and_the_clock_moves_only_when_committed() -> None:
    settings = CoreSettings(guard=GuardSettings(max_wait_s=None, max_displacement=2, grace_s=0.0))
    written = Written()
    decision = decide_ranked(_snapshot(0.0, JOBS), _ranking(JOBS, [2, 3, 4, 1]), settings, written, UNPINNED)
    assert decision.plan.jobs[0].job_id == 1  # planned first, so written highest
    assert written.displaced_since == {}  # a dry run (`rltunectl plan`) does not start the clock
    decision.commit(written)
    assert written.displaced_since == {1: 0.0}


def test_training_and_evaluation_run_with_the_guard() -> None:
    """One GPU; a ranking that always puts job 1 last would start it after every other job. The guard
    (max wait 30 min) starts it at the first free GPU after 30 minutes, in the simulated daemon loop,
    and the result says it acted."""
    jobs = sorted([job(1, 30.0, 1, 600.0)] + [job(i, 60.0 * (i - 2), 1, 600.0) for i in range(2, 12)],
                  key=lambda j: j.submit)  # fmt: skip

    def run(guard_settings: GuardSettings) -> dict[int, float]:
        settings = TickSettings(core=CoreSettings(guard=guard_settings))
        episode = TickEpisode(SPEC, jobs, 0, settings)
        while episode.snapshot is not None:
            snap = episode.snapshot
            order = sorted((j.id for j in snap.pending), key=lambda i: (i == 1, i))
            episode.apply(decide_ranked(snap, _ranking(list(snap.pending), order), settings.core,
                                        episode.written, UNPINNED))  # fmt: skip
        assert episode.result is not None
        starts = {r.job.id: r.start for r in episode.result.records}
        assert (1 in episode.result.guarded) == (guard_settings.max_wait_s is not None)
        return starts

    unguarded = run(GuardSettings(max_wait_s=None, max_displacement=None))
    assert unguarded[1] == max(unguarded.values())
    guarded = run(GuardSettings(max_wait_s=1800.0, max_displacement=None))
    assert guarded[1] < 1800.0 + 600.0 + 120.0  # the first GPU freed after the bound, on the tick grid
    assert guarded[1] < max(guarded.values())


def test_a_model_is_evaluated_under_the_guard_it_was_trained_with() -> None:
    from dataclasses import asdict

    from rltuned.rl.evaluate import tick_settings_of

    trained = GuardSettings(
        max_wait_s=3600.0, max_displacement=None, grace_s=0.0, user_max_wait_s={"u": 60.0}
    )
    assert tick_settings_of({"guard": asdict(trained)}, "sjf").core.guard == trained
    assert tick_settings_of({}, "sjf").core.guard == GuardSettings()  # older models: today's default
    undo = replace(trained, promote_to="base_rank")
    assert tick_settings_of({"guard": asdict(undo)}, "sjf").core.guard == undo


def test_training_records_the_guard_it_was_told_and_the_cli_lists_the_same_rules() -> None:
    from rltuned.core.guard import PROMOTE_TO
    from rltuned.rl.args import PROMOTE_TO as FLAG_VALUES
    from rltuned.rl.args import Args
    from rltuned.rl.ppo import tick_settings

    assert FLAG_VALUES == PROMOTE_TO
    from rltuned.features import RUNTIME_INPUTS
    from rltuned.rl.args import RUNTIME_INPUTS as RUNTIME_FLAG_VALUES

    assert RUNTIME_FLAG_VALUES == RUNTIME_INPUTS
    args = Args(guard_promote_to="base_rank")
    assert tick_settings(args).core.guard.promote_to == "base_rank"
    assert args.extra["guard"]["promote_to"] == "base_rank"  # what the manifest records


def test_a_run_is_not_resumed_under_the_other_guard(tmp_path: Path) -> None:
    """Half a run under each rule would be neither recipe; the manifest could record only one."""
    import pytest
    import torch

    from rltuned.errors import UsageError
    from rltuned.rl.args import Args
    from rltuned.rl.ppo import _resume

    torch.save({"extra": {"guard": {"promote_to": "base_rank"}}}, tmp_path / "checkpoint.pt")
    args = Args(out=str(tmp_path), resume=True)
    with pytest.raises(
        UsageError, match="--guard-promote-to head: the run being resumed trained with base_rank"
    ):
        _resume(args, None, (None, None))  # type: ignore[arg-type]


def _guard_by_the_rule(
    ranking: Ranking, now: float, settings: GuardSettings, since: dict[int, float]
) -> tuple[dict[int, str], dict[int, float], float]:
    """The rule of core/guard.py's docstring, one job at a time (as the guard was first written)."""
    base_rank = {j.id: i for i, j in enumerate(ranking.base_order)}
    reasons: dict[int, str] = {}
    clock: dict[int, float] = {}
    deadline = math.inf
    for place, j in enumerate(ranking.order):
        pushed = place - base_rank[j.id]
        if pushed <= 0:
            continue
        cap = settings.user_max_wait_s.get(j.user, settings.max_wait_s)
        if cap is not None:
            if now - j.submit >= cap:
                reasons[j.id] = MAX_WAIT
            else:
                deadline = min(deadline, j.submit + cap)
        if settings.max_displacement is not None and pushed > settings.max_displacement:
            clock[j.id] = since.get(j.id, now)
            if now - clock[j.id] >= settings.grace_s:
                reasons.setdefault(j.id, DISPLACED)
            else:
                deadline = min(deadline, clock[j.id] + settings.grace_s)
    return reasons, clock, deadline


@given(
    st.permutations(list(range(1, 13))),
    st.lists(st.integers(0, 20), min_size=12, max_size=12),
    st.sampled_from([None, 5 * HOUR, 10 * HOUR]),
    st.sampled_from([None, 0, 2, 5]),
    st.dictionaries(st.sampled_from(["u1", "u2", "u3"]), st.sampled_from([HOUR, 8 * HOUR])),
    st.dictionaries(st.integers(1, 12), st.integers(0, 20)),
)
def test_the_guard_acts_on_exactly_the_jobs_the_rule_names_with_their_clocks_and_deadline(
    order: list[int],
    submit_h: list[int],
    max_wait: float | None,
    max_displacement: int | None,
    user_caps: dict[str, float],
    since_h: dict[int, int],
) -> None:
    """Jobs pushed down, old or far below their base rank, across caps, per-user caps and clocks: the
    guard decides as the rule does job by job, reasons in place order, and its shortcut for a ranking
    that is the base order itself changes nothing."""
    jobs = [
        job(i, submit=h * HOUR, gpus=1, runtime=60.0, user=f"u{i % 4}") for i, h in enumerate(submit_h, 1)
    ]
    settings = GuardSettings(max_wait, max_displacement, 6 * HOUR, user_caps)
    since = {i: h * HOUR for i, h in since_h.items()}
    ranking = _ranking(jobs, order)
    got = guard(ranking, _snapshot(20 * HOUR, jobs), settings, since)
    reasons, clock, deadline = _guard_by_the_rule(ranking, 20 * HOUR, settings, since)
    assert list(got.ranking.guarded.items()) == list(reasons.items())
    assert got.displaced_since == clock and got.deadline == deadline
    if not reasons:
        assert got.ranking is ranking
    in_base = Ranking(ranking.base_order, ranking.base_order, {}, "base", ranking.observe)
    assert guard(in_base, _snapshot(20 * HOUR, jobs), settings, since) == Guarded(in_base, {})
