"""A trace at another load: only the gaps between arrivals change."""

from __future__ import annotations

import pytest

from rltuned.traces.load import at_load
from tests.builders import job


def test_a_higher_load_divides_every_gap_and_keeps_the_first_arrival_and_the_jobs() -> None:
    jobs = [job(0, 100.0, 1, 50.0, 600.0), job(1, 160.0, 2, 70.0), job(2, 400.0, 4, 90.0, 60.0)]
    busier = at_load(jobs, 1.5)
    assert [j.submit for j in busier] == [100.0, 140.0, 300.0]
    kept = [(j.id, j.gpus, j.runtime, j.time_limit) for j in busier]
    assert kept == [(j.id, j.gpus, j.runtime, j.time_limit) for j in jobs]
    assert [j.submit for j in at_load(jobs, 0.5)] == [100.0, 220.0, 700.0]  # a quieter cluster
    assert at_load(jobs, 1.0) == jobs and at_load([], 2.0) == []


def test_jobs_out_of_order_or_submitted_together_keep_their_order_and_ties() -> None:
    jobs = [job(0, 300.0, 1, 1.0), job(1, 100.0, 1, 1.0), job(2, 300.0, 1, 1.0)]
    assert [j.submit for j in at_load(jobs, 2.0)] == [200.0, 100.0, 200.0]  # from the earliest


@pytest.mark.parametrize("factor", [0.0, -1.0, float("nan"), float("inf")])
def test_a_load_factor_that_is_not_a_finite_number_above_zero_is_refused(factor: float) -> None:
    with pytest.raises(ValueError, match="load factor must be a finite number above 0"):
        at_load([job(0, 0.0, 1, 1.0)], factor)
