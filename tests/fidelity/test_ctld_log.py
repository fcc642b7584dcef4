"""slurmctld's millisecond times (`fidelity/ctld_log.py`) in place of sacct's whole seconds."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from rltuned.cli import main
from rltuned.errors import TraceError
from rltuned.fidelity.ctld_log import MAIN, CtldTimes, fit_background, load_ctld_log, refine, save_job_lines
from rltuned.fidelity.observed import load_sacct

SACCT = Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sacct-lab-small.txt"
T = "2026-11-24T10:00:"
LOG = f"""\
[{T}00.076] _slurm_rpc_submit_batch_job: JobId=1 InitPrio=1000 usec=448
[{T}00.957] sched: Allocate JobId=1 NodeList=p100-1 #CPUs=1 Partition=main
[{T}01.120] _slurm_rpc_submit_batch_job: JobId=2 InitPrio=1000 usec=431
[{T}01.400] sched: _update_job: set priority to 7500250 for JobId=2
[{T}01.958] sched/backfill: _start_job: Started JobId=2 in main on p100-2
[{T}02.010] _slurm_rpc_submit_batch_job: JobId=10 InitPrio=1000 usec=400
  a continuation line without a time
[{T}30.980] _job_complete: JobId=1 WEXITSTATUS 0
[{T}30.981] _job_complete: JobId=1 done
[{T}31.500] _job_complete: JobId=2 done
"""


def _log(tmp_path: Path, text: str = LOG) -> Path:
    path = tmp_path / "slurmctld.log"
    path.write_text(text)
    return path


def test_submits_starts_with_their_scheduler_and_ends(tmp_path: Path) -> None:
    times = load_ctld_log(_log(tmp_path))
    assert {k: v % 60 for k, v in times.submit.items()} == pytest.approx({"1": 0.076, "2": 1.12, "10": 2.01})
    assert {k: v % 60 for k, v in times.start.items()} == pytest.approx({"1": 0.957, "2": 1.958})
    assert times.started_by == {"1": "main", "2": "backfill"}
    assert {k: v % 60 for k, v in times.end.items()} == pytest.approx({"1": 30.981, "2": 31.5})


def _passes(starts: list[float], ends: dict[str, float] | None = None) -> CtldTimes:
    ids = [str(i) for i in range(len(starts))]
    return CtldTimes({}, dict(zip(ids, starts, strict=True)), dict.fromkeys(ids, MAIN), ends or {})


def test_the_background_loops_grid_is_fitted_from_its_passes() -> None:
    """Passes every 1.003 s from 100.4 on 10 ticks up to 200 (200 ticks drift 0.6 s from a 1 s grid),
    one of them starting two jobs 2 ms apart (one pass), plus a start 0.05 s after a completion, off the
    grid, which the fit leaves out."""
    ticks = (0, 3, 17, 40, 55, 90, 120, 150, 170, 200)
    starts = [100.4 + k * 1.003 for k in ticks] + [100.4 + 3 * 1.003 + 0.002, 150.0]
    loop = fit_background(_passes(starts, {"x": 149.95}))
    assert loop is not None
    assert loop.passes == 10
    assert loop.period_s == pytest.approx(1.003, abs=1e-9)
    assert (loop.phase_s - 100.4) / 1.003 == pytest.approx(round((loop.phase_s - 100.4) / 1.003), abs=1e-6)


def test_no_grid_from_too_few_or_scattered_passes() -> None:
    """Nine passes are too few to tell a grid from chance, even perfectly aligned ones; so are ten jobs
    of one pass. Fifty passes at random times do not line up."""
    assert fit_background(_passes([100.4 + k for k in range(9)])) is None
    assert fit_background(_passes([100.4 + k * 0.001 for k in range(10)])) is None
    rng = np.random.default_rng(0)
    assert fit_background(_passes(sorted(rng.uniform(0, 1800, 50).tolist()))) is None


def test_a_bad_time_names_the_file_and_line(tmp_path: Path) -> None:
    log = _log(tmp_path, LOG.replace(f"[{T}01.120]", "[2026-11-24T10:00:99.120]"))  # a submit
    with pytest.raises(TraceError, match=rf"{log}:3: time: expected a date-time"):
        load_ctld_log(log)


def test_the_workload_takes_the_logs_times_where_it_has_all_three(tmp_path: Path) -> None:
    workload, kept = refine(load_sacct(SACCT), load_ctld_log(_log(tmp_path)))
    assert kept == 3  # jobs 3, 4 and 5 are not in the log: sacct's seconds stay
    first, second = workload.jobs[0], workload.jobs[1]
    assert first.job.submit % 60 == pytest.approx(0.076) and first.start % 60 == pytest.approx(0.957)
    assert first.job.runtime == pytest.approx(30.024)  # end - start, not sacct's 30
    assert second.start % 60 == pytest.approx(1.958) and second.nodes == ("p100-2",)
    assert workload.jobs[2].job.submit % 60 == 2 and workload.jobs[2].job.runtime == 30


def test_only_the_windows_jobs_are_saved(tmp_path: Path) -> None:
    out = tmp_path / "saved.log"
    assert save_job_lines(_log(tmp_path), [1], out)
    saved = out.read_text().splitlines()
    assert len(saved) == 4 and all("JobId=1 " in line for line in saved)  # not JobId=10
    assert not save_job_lines(tmp_path / "missing.log", [1], out)


def test_the_command_measures_on_the_logs_times(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    sinfo = SACCT.parent / "sinfo.json"
    args = ["fidelity", "--sacct", str(SACCT), "--cluster", str(sinfo), "--scheduler-params",
            "bf_interval=1,sched_interval=1", "--ctld-log", str(_log(tmp_path)), "--json"]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main(args)
    assert done.value.code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["whole_second_jobs"] == 3 and body["jobs"] == 5
    # job 1 arrives at 0.076 and starts at once in the model; Slurm's pass started it at 0.957
    assert next(w for w in body["worst"] if w["job_id"] == "1")["delta_s"] == pytest.approx(-0.881)
