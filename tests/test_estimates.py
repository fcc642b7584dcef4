"""Runtime-estimate models: seeded, named, and noisy by default."""

from __future__ import annotations

import numpy as np
import pytest

from rltuned.domain import Job
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates, qssf_errors, resolve_model


def jobs(n: int, limit: float | None = None) -> list[Job]:
    return [Job(i, float(i), 1, runtime=100.0 + i, time_limit=limit) for i in range(n)]


def test_default_is_noisy_when_the_trace_has_no_limits() -> None:
    assert resolve_model("auto", jobs(3)) == "qssf-noise"
    assert resolve_model("auto", jobs(3, limit=50.0)) == "trace"


def test_qssf_noise_matches_the_published_accuracy_profile() -> None:
    errors = np.abs(qssf_errors(np.random.default_rng(1), 200_000))
    for bound, share in ((0.1, 0.10), (0.5, 0.50), (1.0, 0.70), (10.0, 0.90)):
        assert np.mean(errors <= bound) == pytest.approx(share, abs=0.01)


def test_estimates_are_seeded_and_never_below_one_second() -> None:
    a, name = apply_estimates(jobs(500), "qssf-noise", seed=7)
    b, _ = apply_estimates(jobs(500), "qssf-noise", seed=7)
    c, _ = apply_estimates(jobs(500), "qssf-noise", seed=8)
    assert name == "qssf-noise"
    assert [j.time_limit for j in a] == [j.time_limit for j in b]
    assert [j.time_limit for j in a] != [j.time_limit for j in c]
    assert min(j.time_limit or 0 for j in a) >= 1.0


def test_swf_ratio_mostly_overestimates_like_real_users() -> None:
    out, _ = apply_estimates(jobs(5000), "swf-ratio", seed=0)
    over = np.mean([j.time_limit >= j.runtime for j in out])  # type: ignore[operator]
    assert over > 0.9


def test_exact_is_the_oracle() -> None:
    out, name = apply_estimates(jobs(10), "exact", seed=0)
    assert name == "exact"
    assert all(j.time_limit == j.runtime for j in out)


def test_trace_model_refuses_jobs_without_limits() -> None:
    with pytest.raises(UsageError, match="no requested time"):
        apply_estimates(jobs(3), "trace", seed=0)
