"""The heuristic sampler's choices under high and low fragmentation and placement flexibility."""

from __future__ import annotations

import pytest

from rltuned.domain import Job
from rltuned.features import ACTOR_FEATURES, encode
from rltuned.features.sampler import ALWAYS
from rltuned.features.table import IDENTITY
from rltuned.policies import make_policy
from tests.builders import cluster, job
from tests.features.snapshots import NOW, snapshot

FCFS = make_policy("fcfs")


def test_high_fragmentation_samples_job_size() -> None:
    # One and two GPUs free on 8-GPU nodes: CFF = 1 - (1/8 + 4/8) / 3 ~ 0.79.
    spec = cluster(("A", 8, 2))
    obs = encode(snapshot(spec, [1, 2], [job(1, NOW, 1, 60)]), FCFS)
    assert obs.cff == pytest.approx(1 - (1 / 8 + 4 / 8) / 3)
    assert obs.sampled[6] == "job_size"


def test_low_fragmentation_samples_age() -> None:
    spec = cluster(("A", 8, 2))
    obs = encode(snapshot(spec, [8, 8], [job(1, NOW, 1, 60)]), FCFS)
    assert obs.cff == 0.0
    assert obs.sampled[6] == "submit"


def test_several_flexible_jobs_sample_num_ways() -> None:
    spec = cluster(("A", 8, 2))
    jobs = [job(1, NOW, 1, 60), job(2, NOW, 2, 60)]
    assert encode(snapshot(spec, [4, 4], jobs), FCFS).sampled[7] == "num_ways_to_schedule"


@pytest.mark.parametrize(
    ("free", "jobs"),
    [
        ([4, 0], [job(1, NOW, 1, 60), job(2, NOW, 2, 60)]),  # each fits on one node only
        ([4, 4], [job(1, NOW, 1, 60)]),  # one flexible job is not a contest
        ([4, 4], [job(1, NOW, 1, 60), job(2, NOW, 8, 60)]),  # the second cannot start
    ],
)
def test_otherwise_free_nodes(free: list[int], jobs: list[Job]) -> None:
    spec = cluster(("A", 8, 2))
    assert encode(snapshot(spec, free, jobs), FCFS).sampled[7] == "free_nodes"


def test_eight_distinct_features_never_identity() -> None:
    spec = cluster(("A", 8, 2))
    for free in ([1, 2], [8, 8], [4, 4]):
        sampled = encode(snapshot(spec, free, [job(1, NOW, 1, 60), job(2, NOW, 1, 60)]), FCFS).sampled
        assert len(sampled) == len(set(sampled)) == ACTOR_FEATURES
        assert sampled[:6] == ALWAYS
        assert not set(sampled) & set(IDENTITY)
