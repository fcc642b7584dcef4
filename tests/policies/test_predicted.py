"""PSJF and PSAF: a limit doubted where the same owner's finished peers ran far shorter."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from rltuned.domain import History, Job, PriorityContext
from rltuned.policies import make_policy
from rltuned.policies.predicted import predicted_runtime
from rltuned.sim.history import HistoryTracker


def history(recent: dict[tuple[str, int], tuple[float, ...]]) -> History:
    return History(recent_runtimes=MappingProxyType(recent))


def job(limit: float, gpus: int = 1, user: str = "", account: str = "vc", id: int = 1) -> Job:
    return Job(id, 0.0, gpus, runtime=1.0, time_limit=limit, user=user, account=account)


def test_a_limit_far_above_its_peers_moves_halfway_in_log_time_toward_them() -> None:
    peers = history({("vc", 1): (100.0, 300.0, 200.0)})  # median 200 s: the limit is doubted above 329.7 s
    ceiling = 200.0 * math.exp(0.5)
    assert predicted_runtime(job(1000.0), peers) == pytest.approx(math.sqrt(1000.0 * ceiling))  # 574.2 s
    assert predicted_runtime(job(300.0), peers) == 300.0  # within the margin: the limit stands
    assert predicted_runtime(job(50.0), peers) == 50.0  # never raised: Slurm kills a job at its limit


def test_only_the_same_owner_with_as_many_gpus_counts() -> None:
    peers = history({("vc", 1): (10.0,), ("alice", 2): (10.0,)})
    assert predicted_runtime(job(1000.0, gpus=2), peers) == 1000.0  # the account's peers held 1 GPU
    assert predicted_runtime(job(1000.0, gpus=2, user="bob"), peers) == 1000.0  # a user is their own owner
    assert predicted_runtime(job(1000.0, gpus=2, user="alice"), peers) < 1000.0
    assert predicted_runtime(job(1000.0), history({})) == 1000.0


def order(name: str, jobs: list[Job], ctx: PriorityContext) -> list[int]:
    policy = make_policy(name)
    return [j.id for j in sorted(jobs, key=lambda j: (policy.key(j, ctx), j.id))]


def test_psjf_puts_a_long_limit_with_short_peers_ahead_and_psaf_weighs_gpus() -> None:
    ctx = PriorityContext(0.0, 64, history({("vc", 1): (10.0, 12.0), ("vc", 4): (10.0,)}))
    doubted = job(1000.0, id=1)  # predicted sqrt(1000 * 11 e^0.5) = 136 s
    plain = job(400.0, account="other", id=2)
    assert order("psjf", [plain, doubted], ctx) == [1, 2]
    assert order("sjf", [plain, doubted], ctx) == [2, 1]
    wide = job(1000.0, gpus=4, id=3)  # predicted sqrt(1000 * 10 e^0.5) = 128 s, x 4 GPUs = 513
    assert order("psjf", [plain, wide], ctx) == [3, 2]
    assert order("psaf", [plain, wide], ctx) == [2, 3]


def test_the_simulator_keeps_the_last_three_runtimes_of_each_peer_group_in_the_order_they_ended() -> None:
    tracker = HistoryTracker(0.0, 3600.0)
    for end, runtime in enumerate((50.0, 10.0, 20.0, 30.0), start=100):
        tracker.record(job(1.0), float(end) - runtime, float(end))
    tracker.record(job(1.0, gpus=2, user="alice"), 0.0, 70.0)
    tracker.record(Job(9, 0.0, 1, runtime=5.0), 0.0, 5.0)  # no owner: no peer group
    assert dict(tracker.view(200.0, None).recent_runtimes) == {
        ("vc", 1): (10.0, 20.0, 30.0),
        ("alice", 2): (70.0,),
    }
