"""The canonical ordering: `RowPolicy.finish` sorts by submit (stably) and numbers jobs 0..n-1."""

from __future__ import annotations

from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy


def test_sorted_input_keeps_its_jobs() -> None:
    jobs = [Job(i, float(i), 1, 10.0, name=f"j{i}") for i in range(3)]
    trace = RowPolicy(Path("t.csv"), lenient=False).finish("itp", jobs)
    assert all(a is b for a, b in zip(trace.jobs, jobs, strict=True))


def test_unsorted_input_is_sorted_stably_and_renumbered() -> None:
    jobs = [
        Job(0, 5.0, 1, 1.0, name="late", user="u", time_limit=9.0, gpu_type="T4", cpus=2, mem_mb=3),
        Job(1, 1.0, 2, 1.0, name="early-a", time_limit=9.0),
        Job(2, 1.0, 4, 1.0, name="early-b", time_limit=9.0),
    ]
    trace = RowPolicy(Path("t.csv"), lenient=False).finish("itp", jobs)
    assert [(j.id, j.name) for j in trace.jobs] == [(0, "early-a"), (1, "early-b"), (2, "late")]
    late = trace.jobs[2]
    assert (late.user, late.gpu_type, late.cpus, late.mem_mb, late.gpus) == ("u", "T4", 2, 3, 1)
    assert trace.report.has_time_limits
    assert (trace.report.loaded, trace.report.path) == (3, "t.csv")
