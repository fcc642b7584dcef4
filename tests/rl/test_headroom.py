"""How much room runtime information leaves for the order: oracles that know each job's true runtime."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from rltuned.cli import main
from rltuned.domain import PriorityContext
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.headroom import (
    GAUGES,
    ORACLES,
    SELECTOR,
    LimitProfile,
    best_heuristic,
    best_per_window,
    headroom,
    oracle,
    room,
    run_oracle,
)
from rltuned.rl.standings import Standing, contenders
from rltuned.sim.metrics import Metrics
from rltuned.sim.runner import Window
from rltuned.sim.ticks import run_ticks
from tests.builders import cluster, job

CTX = PriorityContext(now=0.0, total_gpus=1)


def test_exact_reads_the_true_runtime_and_exact_down_only_where_the_limit_overstates_it() -> None:
    overstated, understated = job(1, 0.0, 1, runtime=10.0, estimate=5000.0), job(2, 0.0, 1, 100.0, 50.0)
    jobs = [overstated, understated, job(3, 0.0, 1, runtime=0.2)]
    exact, down = oracle("exact", jobs), oracle("exact-down", jobs)
    assert [exact.key(j, CTX) for j in jobs] == [10.0, 100.0, 1.0]  # at least a second, as every order
    assert [down.key(j, CTX) for j in jobs] == [10.0, 50.0, 1.0]  # a limit below the runtime stays
    with pytest.raises(ValueError, match="oracle must be one of"):
        oracle("exact-up", jobs)


def test_the_oracle_starts_the_job_whose_long_limit_hides_a_short_run_first() -> None:
    """One GPU, busy until t = 100; at the tick at t = 60 two jobs wait: one asked for 5,000 s and runs
    10, the other asked for and runs 100. SJF ranks the second first; the oracle the first, which then
    waits 100 s less, and the other 10 s more."""
    one = cluster(("V100", 1, 1))
    jobs = [job(0, 0.0, 1, 100.0), job(1, 1.0, 1, runtime=10.0, estimate=5000.0), job(2, 2.0, 1, 100.0)]
    settings = tick_settings_of({}, "sjf")
    sjf = run_ticks(one, jobs, 0, settings).records
    starts, end = {r.job.id: r.start for r in sjf}, {r.job.id: r.end for r in sjf}
    assert starts[2] == end[0] and starts[1] == end[2]  # SJF: the 100 s limit first
    known = run_oracle(oracle("exact-down", jobs), one, jobs, 0, settings).records
    starts = {r.job.id: r.start for r in known}
    assert starts[1] == end[0] and starts[2] == end[0] + 10.0  # the true 10 s run first


def test_the_limit_profile_counts_jobs_under_a_tenth_and_past_their_limit() -> None:
    jobs = [job(1, 0.0, 1, 5.0, 100.0), job(2, 0.0, 1, 50.0, 100.0), job(3, 0.0, 1, 120.0, 100.0)]
    profile = LimitProfile.of(jobs)
    assert (profile.jobs, profile.median_use) == (3, 0.5)
    assert profile.under_tenth == pytest.approx(1 / 3) and profile.past_limit == pytest.approx(1 / 3)


def _row(name: str, *bsld: float) -> Standing:
    return Standing(name, tuple(Metrics(10, 0, 1.0, 1.0, b, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0) for b in bsld))


def test_the_room_is_measured_from_the_best_heuristic_never_from_an_oracle() -> None:
    rows = [
        _row("exact-down", 2.0),
        _row("exact", 1.5),
        _row(SELECTOR, 2.2),
        _row("sjf", 3.0),
        _row("saf", 2.5),
    ]
    assert best_heuristic(rows).name == "saf"


def test_best_per_window_takes_each_windows_winner_so_it_is_never_behind_the_best_heuristic() -> None:
    """SJF wins the first window and SAF the other two; SAF is the best heuristic over all three. The
    selector reads SJF's first window and SAF's others: +10% in window 0, nothing in the rest."""
    sjf, saf = _row("sjf", 3.6, 5.0, 2.0), _row("saf", 4.0, 4.0, 1.0)
    picked = best_per_window([sjf, saf])
    assert picked.name == SELECTOR and [m.avg_bsld for m in picked.windows] == [3.6, 4.0, 1.0]
    rows = [_row("exact-down", 3.0, 3.0, 1.0), _row("exact", 3.0, 3.0, 1.0), picked, sjf, saf]
    gaps = room(rows, draws=1)
    assert set(gaps) == set(GAUGES) and best_heuristic(rows).name == "saf"
    assert gaps[SELECTOR]["gap"] == pytest.approx(0.1 / 3) and gaps[SELECTOR]["losses"] == 0


def test_the_room_is_the_mean_per_window_gap_over_every_window_and_draw() -> None:
    """Two draws of two windows, draw after draw. Per window, not pooled: the oracle halves a window of
    4 and ties one of 100 (pooled it would read +1.9%). The interval resamples windows with both their
    draws: window 0 always gains half, window 1 nothing, so a bootstrap mean lies in [0, 0.5]."""
    saf = _row("saf", 4, 100, 4, 100)
    rows = [_row("exact-down", 2, 100, 2, 100), _row("exact", 2, 100, 2, 100), best_per_window([saf]), saf]
    down = room(rows, draws=2)["exact-down"]
    assert down["gap"] == pytest.approx(0.25) and (down["wins"], down["losses"]) == (2, 0)
    assert 0.0 <= down["interval"][0] < 0.25 < down["interval"][1] <= 0.5
    with pytest.raises(ValueError, match="do not split into 3 draws"):
        room(rows, draws=3)


def test_headroom_runs_the_oracles_and_every_contender_on_the_same_windows() -> None:
    one = cluster(("V100", 1, 2))
    runtimes = [30.0 + 40.0 * (i % 3) for i in range(24)]  # every fourth job asks for both GPUs
    limits = [r * (1 + 5 * (i % 2)) + 100.0 * (i % 5) for i, r in enumerate(runtimes)]  # all overstated
    jobs = [job(i, 10.0 * i, 1 + (i % 4 == 0), runtimes[i], limits[i]) for i in range(24)]
    settings = tick_settings_of({}, "sjf")
    rows = headroom([jobs], one, settings, [Window(4, 14), Window(14, 24)], 4)
    assert [r.name for r in rows] == [*ORACLES, SELECTOR, *contenders(settings, tuned=False)]
    assert all(len(r.windows) == 2 for r in rows)
    by_name = {r.name: r for r in rows}
    heuristics = rows[len(GAUGES) :]  # Slurm alone too
    for w, picked in enumerate(by_name[SELECTOR].windows):  # each window's own best heuristic
        assert picked == min((r.windows[w] for r in heuristics), key=lambda m: m.avg_bsld)
    # SAF wins the first window and FCFS the second, so no single heuristic does as well as the choice.
    assert [min(heuristics, key=lambda r: r.windows[w].avg_bsld).name for w in (0, 1)] == ["saf", "fcfs"]
    assert all(by_name[SELECTOR].mean("avg_bsld") < r.mean("avg_bsld") for r in heuristics)
    # Every limit overstates its run: the two oracles know the same, and beat SJF, which sees limits.
    assert by_name["exact"].windows == by_name["exact-down"].windows
    assert by_name["exact-down"].mean("avg_bsld") < by_name["sjf"].mean("avg_bsld")
    # A second draw of the limits adds its windows after the first's, each run on its own limits.
    tight = [replace(j, time_limit=j.runtime) for j in jobs]
    both = {r.name: r for r in headroom([jobs, tight], one, settings, [Window(4, 14), Window(14, 24)], 4)}
    assert both["sjf"].windows[:2] == by_name["sjf"].windows and len(both["sjf"].windows) == 4
    assert both["sjf"].windows[2:] == both["exact"].windows[2:]  # exact limits: SJF is the oracle


def test_the_command_prints_the_room_over_the_best_heuristic_on_validation(
    capsys: pytest.CaptureFixture[str],
) -> None:
    with pytest.raises(SystemExit) as done:
        main(["headroom", "--trace", "hpc2n", "--cluster", "swf-240", "--warmup", "128", "--json"])
    assert done.value.code == 0
    body = json.loads(capsys.readouterr().out)
    names = [r["name"] for r in body["rows"]]
    assert names == [*ORACLES, SELECTOR, *contenders(tick_settings_of({}, "sjf"), tuned=False)]
    # The trace's own limits have nothing to draw: one draw, whatever --draws says.
    assert (body["split"], body["estimates"], body["windows"]) == ("validation", "trace", 1)
    assert body["estimates_seeds"] == [0] and all(len(r["per_window"]) == 1 for r in body["rows"])
    rows = {r["name"]: r for r in body["rows"]}
    best = min((r for r in body["rows"] if r["name"] not in GAUGES), key=lambda r: r["avg_bsld"])
    assert body["best_heuristic"] == best["name"]
    # One window: the per-window gap is the gap of the two means, as every gap here is measured.
    gap = (best["avg_bsld"] - rows["exact-down"]["avg_bsld"]) / best["avg_bsld"]
    assert body["gap_over_best"]["exact-down"]["gap"] == pytest.approx(gap) and gap > 0
    assert 0.0 < body["limits"]["median_use"] < 1.0 and body["limits"]["jobs"] > 0
    assert [r["name"] for r in body["rows"] if r["gauge"]] == list(GAUGES)  # no admin can run these
    assert body["load"] == 1.0
    with pytest.raises(SystemExit) as done:  # the same window at twice the arrival rate waits longer
        main(
            [
                "headroom",
                "--trace",
                "hpc2n",
                "--cluster",
                "swf-240",
                "--warmup",
                "128",
                "--load",
                "2",
                "--json",
            ]
        )
    busier = json.loads(capsys.readouterr().out)
    assert done.value.code == 0 and busier["load"] == 2.0
    assert busier["rows"][names.index("fcfs")]["avg_wait_s"] > rows["fcfs"]["avg_wait_s"]
    refusals = {
        ("--split", "test"): "--split",
        ("--window", "5000"): "--window must be 1 to the split's 314",
        ("--load", "0"): "--load must be a finite number above 0",
        ("--load", "inf"): "--load must be a finite number above 0",
    }
    for extra, message in refusals.items():  # never test; a window the split cannot hold; no load
        with pytest.raises(SystemExit) as refused:
            main(["headroom", "--trace", "hpc2n", "--cluster", "swf-240", *extra])
        assert refused.value.code == 2 and message in capsys.readouterr().err
