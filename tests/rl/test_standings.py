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
    assert "qssf" in names  # the paper's own comparison (its Table 8): served from sacct's runtimes
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


def test_slurm_alone_runs_with_the_tuned_weights_and_refuses_to_run_without_them() -> None:
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    cluster = load_cluster("philly-slice")
    config = TickSettings("sjf")
    windows = [Window(60_000, 60_064), Window(61_000, 61_064)]
    tuned = Multifactor(weight_age=0, weight_job_size=5000, favor_small=True, weight_fairshare=0)
    rows = standings(None, "sjf", jobs, cluster, config, windows, 128, tuned)
    by_name = {r.name: r for r in rows}
    assert [r.name for r in rows] == ["model on sjf", *contenders(config, tuned=True)]
    chunk, warm = windows[0].with_warmup(jobs, 128)
    alone = SlurmRun(cluster, chunk, warm, replace(config.slurm, priority=tuned), 60.0).run()
    assert by_name[SLURM_TUNED].windows[0] == compute_metrics(alone)
    with pytest.raises(ValueError, match="needs the tuned weights"):
        run_contender(SLURM_TUNED, cluster, chunk, warm, config)


def test_evaluate_heuristics_prints_every_contender_with_the_models_record(tmp_path: Path) -> None:
    model = REPO / "models" / "philly-sjf-bsld"
    tuned = str(REPO / "docs/tuned/philly.json")
    base = [sys.executable, "-m", "rltuned", "evaluate", "--model", str(model), "--trace", "philly",
            "--cluster", "philly-slice", "--sequences", "2", "--jobs", "64"]  # fmt: skip

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([*base, *extra], capture_output=True, text=True, timeout=600, check=False)

    out = run("--base", "sjf", "--heuristics", "--tuned", tuned, "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    rows = body["standings"]
    assert body["record_metric"] == "avg_bsld"  # the metric the model was trained for
    assert [r["name"] for r in rows] == ["model on sjf", *contenders(TickSettings("sjf"), tuned=True)]
    assert rows[0]["model_wins_losses_ties"] is None
    for row in rows[1:]:
        wins, losses, ties = row["model_wins_losses_ties"]
        won = sum(a < b for a, b in zip(rows[0]["per_window"], row["per_window"], strict=True))
        assert wins + losses + ties == 2 and wins <= won  # ties within 0.1% are not wins
    assert all(len(r["per_window"]) == 2 and r["avg_bsld"] == sum(r["per_window"]) / 2 for r in rows)

    bad = tmp_path / "tune.json"
    bad.write_text("{}")
    other = tmp_path / "itp.json"
    other.write_text(json.dumps({**json.loads(Path(tuned).read_text()), "trace": "itp"}))
    refusals = {
        (
            "--base",
            "sjf",
            "--heuristics",
            "--tuned",
            str(bad),
        ): f"--tuned {bad}: not a `rltunectl tune --json`",
        ("--base", "sjf", "--heuristics", "--tuned", str(other)): "tuned on trace 'itp', not 'philly'",
        ("--base", "sjf", "--tuned", tuned): "--tuned needs --heuristics",
    }
    paper = str(REPO / "models" / "philly-fcfs-bsld-paper")  # the paper-replication loop takes any base
    refusals |= {
        (
            "--model",
            paper,
            "--base",
            "sjf,fcfs",
            "--heuristics",
        ): "--heuristics compares the model on one base",
        ("--model", paper, "--base", "fcfs", "--heuristics", "--tuned", tuned): "only in the daemon's loop",
    }
    for extra, message in refusals.items():
        refused = run(*extra)
        assert refused.returncode != 0 and message in refused.stderr, refused.stderr
