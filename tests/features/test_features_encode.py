"""The observation's layout: shapes, dtypes, padding, base-policy order, overflow, determinism."""

from __future__ import annotations

import numpy as np
import pytest

from rltuned.domain import Job
from rltuned.features import ACTOR_FEATURES, CRITIC_FEATURES, FEATURE_NAMES, MAX_JOBS, SAMPLER_VERSION, encode
from rltuned.policies import make_policy
from tests.builders import cluster, job
from tests.features.snapshots import NOW, snapshot

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def three_jobs() -> list[Job]:
    # FCFS order 1, 2, 3; SJF order 3, 1, 2.
    return [
        job(1, NOW - 300, 1, 600),
        job(2, NOW - 200, 2, 900),
        job(3, NOW - 100, 4, 60),
    ]


def test_constants() -> None:
    assert (MAX_JOBS, ACTOR_FEATURES, CRITIC_FEATURES, SAMPLER_VERSION) == (256, 8, 5, "v1")


def test_shapes_dtypes_and_padding() -> None:
    obs = encode(snapshot(cluster(("A", 8, 2)), [8, 4], three_jobs()), make_policy("fcfs"))
    assert obs.actor.shape == (256, 8) and obs.actor.dtype == np.float32
    assert obs.critic.shape == (256, 5) and obs.critic.dtype == np.float32
    assert obs.table.shape == (256, 17) and obs.table.dtype == np.float32
    assert obs.mask.shape == (256,) and obs.mask.dtype == np.bool_
    assert obs.job_ids.shape == (256,) and obs.job_ids.dtype == np.int64
    assert obs.mask.tolist() == [True] * 3 + [False] * 253
    assert obs.job_ids[3:].tolist() == [-1] * 253
    assert not obs.actor[3:].any() and not obs.critic[3:].any() and not obs.table[3:].any()
    assert obs.overflow == ()
    assert not obs.actor.flags.writeable


def test_actor_and_critic_columns_come_from_the_table() -> None:
    obs = encode(snapshot(cluster(("A", 8, 2)), [8, 4], three_jobs()), make_policy("fcfs"))
    assert np.array_equal(obs.actor, obs.table[:, [COL[n] for n in obs.sampled]])
    critic = ["submit", "requested_time", "gpus", "can_schedule_now", "cff"]
    assert np.array_equal(obs.critic, obs.table[:, [COL[n] for n in critic]])


@pytest.mark.parametrize(("policy", "order"), [("fcfs", [1, 2, 3]), ("sjf", [3, 1, 2])])
def test_rows_follow_the_base_policy(policy: str, order: list[int]) -> None:
    spec = cluster(("A", 8, 2))
    obs = encode(snapshot(spec, [8, 4], three_jobs()), make_policy(policy))
    assert obs.job_ids[:3].tolist() == order
    gpus = {1: 1, 2: 2, 3: 4}
    expected = [np.log1p(gpus[i]) / np.log1p(16) for i in order]
    assert obs.table[:3, COL["gpus"]] == pytest.approx(expected)


def test_queue_beyond_256_overflows_in_base_order() -> None:
    spec = cluster(("A", 8, 2))
    # SJF: estimates decrease with the id, so the base order is 299, 298, ..., 0.
    jobs = [job(i, NOW - i, 1, float(1000 - i)) for i in range(300)]
    obs = encode(snapshot(spec, [8, 8], jobs), make_policy("sjf"))
    assert obs.mask.all()
    assert obs.job_ids.tolist() == list(range(299, 43, -1))
    assert obs.overflow == tuple(range(43, -1, -1))


def test_encode_is_deterministic() -> None:
    spec = cluster(("A", 8, 2), ("B", 4, 1))
    jobs = [job(i, NOW - 7 * i, 1 + i % 6, 60.0 * (i + 1), user=f"u{i % 3}") for i in range(40)]
    snap = snapshot(spec, [3, 8, 1], jobs)
    first, second = encode(snap, make_policy("wfp3")), encode(snap, make_policy("wfp3"))
    for name in ("actor", "mask", "critic", "job_ids", "table"):
        assert np.array_equal(getattr(first, name), getattr(second, name)), name
    assert (first.sampled, first.cff, first.overflow) == (second.sampled, second.cff, second.overflow)


def test_the_predicted_runtime_input_moves_only_requested_time_and_only_where_peers_finished_shorter() -> (
    None
):
    """With `runtime="predicted"` the requested_time column holds the limit as finished peers correct it
    (what psjf ranks by); every other column, job size included, reads what it read before."""
    from dataclasses import replace

    from rltuned.domain import History, peer_key
    from rltuned.features.scales import HORIZON_S, log_share
    from rltuned.policies.predicted import predicted_runtime

    jobs = [
        job(1, NOW - 300, 1, 600, estimate=36_000.0, user="sweep"),  # peers ran 600 s: doubted
        job(2, NOW - 200, 1, 900, estimate=950.0, user="sweep"),  # within e^0.5 x 600 (989 s): kept
        job(3, NOW - 100, 2, 60, estimate=7_200.0, user="alone"),  # no peers: the limit
    ]
    history = History(recent_runtimes={peer_key("sweep", "", 1): (500.0, 600.0, 700.0)})
    snap = replace(snapshot(cluster(("A", 8, 2)), [8, 4], jobs), history=history)
    fcfs = make_policy("fcfs")
    limit, predicted = encode(snap, fcfs), encode(snap, fcfs, "predicted")
    rt = COL["requested_time"]
    expected = log_share(np.array([predicted_runtime(j, history) for j in jobs]), HORIZON_S)
    assert predicted.table[:3, rt] == pytest.approx(expected.astype(np.float32))
    assert predicted.table[0, rt] < limit.table[0, rt]  # 36,000 s toward 600 x e^0.5
    assert predicted.table[1:3, rt].tolist() == limit.table[1:3, rt].tolist()
    others = [c for c in range(len(FEATURE_NAMES)) if c != rt]
    assert np.array_equal(predicted.table[:, others], limit.table[:, others])
    assert predicted.sampled == limit.sampled
    assert np.array_equal(predicted.actor, predicted.table[:, [COL[n] for n in predicted.sampled]])
    with pytest.raises(ValueError, match="runtime input must be one of"):
        encode(snap, fcfs, "oracle")
