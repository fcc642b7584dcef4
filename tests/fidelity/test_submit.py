"""The --submit mode's pure parts: how a trace window becomes lab jobs, and the order of Slurm calls
(a scripted runner stands in for Slurm here; tests/fidelity/test_fidelity_lab.py runs it on the lab)."""

from __future__ import annotations

import pytest

from rltuned.errors import SlurmError
from rltuned.fidelity.submit import (
    Commands,
    LabJob,
    compress,
    demand_ratio,
    sbatch_argv,
    submit_all,
    wait_finished,
)
from tests.builders import job


def test_a_window_is_squeezed_into_the_span_with_runtimes_clamped() -> None:
    jobs = [
        job(0, 1000.0, 8, 600.0, estimate=3600.0, user="u1"),  # more GPUs than the largest node: capped
        job(1, 1600.0, 2, 60.0, user="u2"),  # runtime 60 / 10 = 6 s
        job(2, 1600.0, 1, 6000.0, user="u1"),  # 600 s: clamped to 60
    ]
    lab = compress(jobs, ("alice", "bob"), largest_gpus=4, span_s=60.0)
    assert [j.offset_s for j in lab] == [0.0, 60.0, 60.0]  # 600 s of arrivals in 60 s: factor 10
    assert [j.runtime_s for j in lab] == [60, 6, 60]
    assert [j.gpus for j in lab] == [4, 2, 1]
    assert [j.user for j in lab] == ["alice", "bob", "alice"]  # trace users in order of first appearance
    assert [j.limit_min for j in lab] == [6, 1, 2]  # 6x over-estimate kept (360 s); else runtime + 1 s


def test_short_jobs_run_at_least_the_minimum() -> None:
    lab = compress([job(0, 0.0, 1, 1.0), job(1, 100.0, 1, 1.0)], ("alice",), 4, span_s=10.0)
    assert [j.runtime_s for j in lab] == [5, 5]


def test_demand_ratio_says_how_contended_the_window_is() -> None:
    lab = [LabJob(0.0, "a", 4, 60, 2, "x"), LabJob(60.0, "a", 2, 30, 1, "y")]
    assert demand_ratio(lab, total_gpus=13) == pytest.approx((240 + 60) / (13 * 60))


def test_another_user_needs_root() -> None:
    lab = LabJob(0.0, "nobody-else", 1, 5, 1, "x")
    argv = sbatch_argv(lab, "main", as_root=True)
    assert argv[:4] == ["runuser", "-u", "nobody-else", "--"] and "--gres=gpu:1" in argv
    with pytest.raises(Exception, match="needs root"):
        sbatch_argv(lab, "main", as_root=False)


class Scripted:
    def __init__(self, replies: list[str]) -> None:
        self.replies = replies
        self.calls: list[list[str]] = []

    def __call__(self, argv: list[str]) -> str:
        self.calls.append(argv)
        return self.replies.pop(0)


def test_jobs_go_in_at_their_offsets() -> None:
    now = [100.0]
    slept: list[float] = []

    def sleep(s: float) -> None:
        slept.append(s)
        now[0] += s

    run = Scripted(["11\n", "12;cluster\n"])
    lab = [LabJob(0.0, "root", 1, 5, 1, "a"), LabJob(7.5, "root", 2, 5, 1, "b")]
    ids = submit_all(lab, "main", Commands(run, as_root=True), clock=lambda: now[0], sleep=sleep)
    assert ids == [11, 12] and slept == [7.5]


def test_waiting_ends_when_sacct_has_every_end() -> None:
    header = "JobID|State\n"
    run = Scripted([header + "11|RUNNING\n12|PENDING\n", header + "11|COMPLETED\n12|TIMEOUT\n"])
    text = wait_finished([11, 12], Commands(run, True), 60.0, clock=lambda: 0.0, sleep=lambda s: None)
    assert "TIMEOUT" in text and len(run.calls) == 2


def test_waiting_gives_up_naming_the_jobs() -> None:
    now = [0.0]
    run = Scripted(["JobID|State\n11|RUNNING\n"] * 5)

    def sleep(s: float) -> None:
        now[0] += 10

    with pytest.raises(SlurmError, match=r"1 job\(s\) not finished.*\[11\]"):
        wait_finished([11], Commands(run, True), 25.0, clock=lambda: now[0], sleep=sleep)
