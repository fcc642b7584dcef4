"""The protocol's splits: training never sees a validation or test job, and no scored job counts twice."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltuned.errors import UsageError
from rltuned.rl.splits import disjoint_windows, random_windows, split_range, train_jobs, window_size
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


def test_train_validation_and_test_partition_the_trace_in_submit_order() -> None:
    jobs = load_trace(resolve_trace("philly")).jobs
    parts = [[jobs[i] for i in split_range(len(jobs), name)] for name in ("train", "validation", "test")]
    assert [j for part in parts for j in part] == list(jobs)
    assert train_jobs(jobs) == parts[0]
    for earlier, later in pairwise(parts):
        assert max(j.submit for j in earlier) <= min(j.submit for j in later)
    assert [len(p) for p in parts] == [59_217, 7_402, 7_403]  # 80 / 10 / 10 of 74,022


@given(st.integers(2_570, 200_000))
def test_disjoint_windows_tile_the_split_from_its_start_at_the_largest_size_giving_six(n: int) -> None:
    span = split_range(n, "test")
    windows = disjoint_windows(span)
    size = windows[0].stop - windows[0].start
    assert windows[0].start == span.start and windows[-1].stop <= span.stop
    assert all(a.stop == b.start for a, b in pairwise(windows))
    assert all(w.stop - w.start == size for w in windows)
    assert len(windows) == len(span) // size
    assert size == 256 or len(windows) >= 6
    larger = {1024: None, 512: 1024, 256: 512}[size]
    assert larger is None or len(span) // larger < 6  # a larger size would give fewer than six


def test_a_windows_warmup_comes_from_the_jobs_before_the_split() -> None:
    jobs = load_trace(resolve_trace("philly")).jobs
    first = disjoint_windows(split_range(len(jobs), "validation"))[0]
    chunk, warm = first.with_warmup(jobs, 512)
    assert warm == 512 and list(chunk[:warm]) == list(jobs[first.start - 512 : first.start])


def test_sizes_and_errors() -> None:
    assert window_size(range(0, 7_402)) == 1024  # Philly's validation split: 7 windows
    assert window_size(range(0, 1_580)) == 256  # ITP's: 6 windows of 256
    assert window_size(range(0, 300)) == 256  # too small for six: one window still
    with pytest.raises(UsageError, match="fewer than one 256-job window"):
        window_size(range(0, 200))
    with pytest.raises(UsageError, match="exceeds the split's 300 jobs"):
        window_size(range(0, 300), 512)
    with pytest.raises(UsageError, match="split must be one of"):
        split_range(100, "held-out")


def test_random_windows_stay_inside_their_split() -> None:
    span = split_range(10_000, "validation")
    for w in random_windows(span, 256, 50, seed=1):
        assert span.start <= w.start and w.stop <= span.stop
