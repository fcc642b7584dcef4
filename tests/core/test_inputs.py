"""Which base policies the daemon can serve from what it reads from Slurm, and why not the others."""

from __future__ import annotations

import pytest

from rltuned.core import inputs
from rltuned.core.inputs import (
    FAIRSHARE_USAGE,
    ORIGIN,
    PAST_RUNTIMES,
    PEER_RUNTIMES,
    POLICY_INPUTS,
    READABLE_FROM_SLURM,
    readable_bases,
    reads_history,
    time_invariant,
    unreadable_inputs,
)
from rltuned.domain import History, PriorityContext
from rltuned.policies import POLICIES, make_policy
from tests.builders import job

NOW = 100_000.0


@pytest.mark.parametrize("base", ["fcfs", "sjf", "wfp3", "unicep", "saf", "SJF", "multifactor", "qssf"])
def test_bases_that_read_what_slurm_and_its_accounting_give_are_readable(base: str) -> None:
    assert unreadable_inputs(base) is None


@pytest.mark.parametrize(
    ("base", "names"),
    [
        ("f1", ["origin"]),
        ("f2", ["origin"]),
        ("f3", ["origin"]),
        ("f4", ["origin"]),
    ],
)
def test_the_other_bases_are_refused_with_the_reason(base: str, names: list[str]) -> None:
    reason = unreadable_inputs(base)
    assert reason is not None
    for name in names:
        assert name in reason
    assert "\n" not in reason


def test_every_base_policy_has_its_inputs_listed() -> None:
    assert set(POLICY_INPUTS) == set(POLICIES)
    assert readable_bases() == ("fcfs", "sjf", "wfp3", "unicep", "saf", "multifactor", "qssf", "psjf", "psaf")
    with pytest.raises(KeyError):
        unreadable_inputs("lifo")


def test_without_the_accounting_the_history_bases_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        inputs, "READABLE_FROM_SLURM", READABLE_FROM_SLURM - {FAIRSHARE_USAGE, PAST_RUNTIMES, PEER_RUNTIMES}
    )
    assert "fairshare_usage" in (unreadable_inputs("multifactor") or "")
    assert "past_runtimes" in (unreadable_inputs("qssf") or "")
    assert "peer_runtimes" in (unreadable_inputs("psjf") or "")
    assert unreadable_inputs("sjf") is None


JOBS = [
    job(1, 1_000.0, 1, 600.0, user="u1", account="a"),
    job(2, 5_000.0, 4, 60.0, user="u2", account="b"),
    job(3, 9_000.0, 2, 3_600.0, user="u3", account="a"),
]
ACCRUED = History(
    usage={"a": 9_000.0, "b": 10.0},
    mean_runtime_by_user={"u1": 30.0, "u2": 7_200.0},
    mean_runtime_by_account={"a": 100.0},
    recent_runtimes={("u1", 1): (30.0,), ("u3", 2): (100.0, 200.0)},
)
"""What Slurm's accounting (sshare, sacct) would hold for `JOBS`' users and accounts."""


@pytest.mark.parametrize("base", list(POLICIES))
def test_the_listed_inputs_are_what_the_policy_reads(base: str) -> None:
    """A Slurm snapshot has an empty history and origin 0: a policy's keys change when those are filled
    exactly when its listed inputs include them."""
    slurm = PriorityContext(NOW, 16)
    filled = PriorityContext(NOW, 16, ACCRUED, origin=900.0)
    policy = make_policy(base)
    on_slurm = [policy.key(j, slurm) for j in JOBS]
    in_sim = [policy.key(j, filled) for j in JOBS]
    reads_more = bool(POLICY_INPUTS[base] & {FAIRSHARE_USAGE, PAST_RUNTIMES, PEER_RUNTIMES, ORIGIN})
    assert (on_slurm != in_sim) == reads_more


@pytest.mark.parametrize("base", list(POLICIES))
def test_a_time_invariant_base_keys_the_same_as_the_clock_and_the_accounting_move(base: str) -> None:
    """`time_invariant` lets the simulator skip a base's unchanged ticks: it must hold exactly for the
    policies whose keys do not move when time passes and usage accrues."""
    then = PriorityContext(NOW, 16)
    later = PriorityContext(NOW + 86_400.0, 16, ACCRUED)
    policy = make_policy(base)
    moved = [policy.key(j, then) for j in JOBS] != [policy.key(j, later) for j in JOBS]
    assert time_invariant(base) is not moved


@pytest.mark.parametrize("base", list(POLICIES))
def test_a_base_that_reads_no_history_keys_the_same_without_it(base: str) -> None:
    """`reads_history` lets the simulator keep no history of finished jobs for a base: it must hold
    exactly for the policies whose keys move when the accounting fills."""
    empty = PriorityContext(NOW, 16)
    filled = PriorityContext(NOW, 16, ACCRUED)
    policy = make_policy(base)
    moved = [policy.key(j, empty) for j in JOBS] != [policy.key(j, filled) for j in JOBS]
    assert reads_history(base) is moved
