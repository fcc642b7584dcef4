"""The table a model is judged by: every heuristic an admin could run instead, on the same windows."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from rltuned.clusters import load_cluster
from rltuned.core.inputs import unreadable_inputs
from rltuned.estimates import apply_estimates
from rltuned.policies.multifactor import Multifactor
from rltuned.rl.standings import (
    HEURISTICS,
    SLURM_ALONE,
    SLURM_TUNED,
    Standing,
    contenders,
    run_contender,
    standings,
)
from rltuned.sim.metrics import Metrics, compute_metrics
from rltuned.sim.runner import Window
from rltuned.sim.simulator import SimConfig
from rltuned.sim.slurm import SlurmRun
from rltuned.sim.ticks import TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

REPO = Path(__file__).resolve().parents[2]


def test_in_the_daemons_loop_only_what_an_admin_could_run_is_a_contender() -> None:
    names = contenders(TickSettings("sjf"), tuned=False)
    assert all(unreadable_inputs(h) is None for h in names if h in HEURISTICS)
    assert {"fcfs", "sjf", "saf", "wfp3", "unicep"} <= set(names)
    assert [h for h in HEURISTICS if unreadable_inputs(h) is not None] != []  # some are left out
    assert names[-1] == SLURM_ALONE and SLURM_TUNED not in names
    assert contenders(TickSettings("sjf"), tuned=True)[-2:] == [SLURM_ALONE, SLURM_TUNED]
    assert contenders(SimConfig(), tuned=True) == list(HEURISTICS)  # no Slurm in the paper's loop


def _metrics(bsld: float) -> Metrics:
    return Metrics(10, 0, 1.0, 1.0, bsld, 0.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


def test_windows_won_lost_and_tied_on_bounded_slowdown() -> None:
    model = Standing("model", tuple(_metrics(b) for b in (2.0, 3.0, 4.0, 5.0)))
    other = Standing("sjf", tuple(_metrics(b) for b in (2.5, 2.0, 4.002, 5.0)))
    assert model.record_against(other) == (1, 1, 2)  # 4.0 vs 4.002 is within 0.1%: a tie
    assert model.mean("avg_bsld") == pytest.approx(3.5)


def test_without_a_model_the_model_row_is_its_base_row_and_slurm_alone_is_slurm() -> None:
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    cluster = load_cluster("philly-slice")
    config = TickSettings("sjf")
    windows = [Window(60_000, 60_064), Window(61_000, 61_064)]
    tuned = Multifactor(weight_age=0, weight_job_size=5000, favor_small=True, weight_fairshare=0)
    rows = standings(None, "sjf", jobs, cluster, config, windows, 128, tuned)
    by_name = {r.name: r for r in rows}
    assert rows[0].name == "model on sjf" and rows[0].windows == by_name["sjf"].windows
    assert rows[0].record_against(by_name["sjf"]) == (0, 0, 2)
    chunk, warm = windows[0].with_warmup(jobs, 128)
    alone = SlurmRun(cluster, chunk, warm, replace(config.slurm, priority=tuned), 60.0).run()
    assert by_name[SLURM_TUNED].windows[0] == compute_metrics(alone)
    with pytest.raises(ValueError, match="needs the tuned weights"):
        run_contender(SLURM_TUNED, cluster, chunk, warm, config)


def test_evaluate_heuristics_prints_every_contender_with_the_models_record(tmp_path: Path) -> None:
    model = REPO / "models" / "philly-sjf-bsld"
    base = [sys.executable, "-m", "rltuned", "evaluate", "--model", str(model), "--trace", "philly",
            "--cluster", "philly-slice", "--base", "sjf", "--sequences", "1", "--jobs", "64"]  # fmt: skip
    out = subprocess.run([*base, "--heuristics", "--tuned", str(REPO / "docs/tuned/philly.json"), "--json"],
                         capture_output=True, text=True, timeout=600, check=False)  # fmt: skip
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["standings"]
    assert [r["name"] for r in rows] == ["model on sjf", *contenders(TickSettings("sjf"), tuned=True)]
    assert rows[0]["model_wins_losses_ties"] is None and sum(rows[1]["model_wins_losses_ties"]) == 1
    assert all(len(r["per_window_bsld"]) == 1 and r["p99_wait_s"] >= r["p95_wait_s"] for r in rows)
    bad = tmp_path / "tune.json"
    bad.write_text("{}")
    refused = subprocess.run([*base, "--heuristics", "--tuned", str(bad)], capture_output=True, text=True,
                             timeout=120, check=False)  # fmt: skip
    assert (
        refused.returncode != 0 and f"--tuned {bad}: not a `rltunectl tune --json` output" in refused.stderr
    )
    alone = subprocess.run(
        [*base, "--tuned", str(bad)], capture_output=True, text=True, timeout=120, check=False
    )
    assert alone.returncode != 0 and "--tuned needs --heuristics" in alone.stderr
