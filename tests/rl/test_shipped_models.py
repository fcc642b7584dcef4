"""Every model shipped in models/ loads with its hash and manifest verified and names data we bundle."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from rltuned.clusters import load_cluster
from rltuned.rl.export import load_model, trained_slots
from rltuned.traces.bundled import resolve_trace

ROOT = Path(__file__).parents[2] / "models"
MODELS = sorted(p.parent for p in [*ROOT.glob("*/manifest.json"), *ROOT.glob("*/seeds/*/manifest.json")])


def test_models_are_shipped() -> None:
    shipped = {
        "philly-sjf-bsld",
        "philly-fcfs-bsld-ticks",
        "itp-sjf-bsld",
        "itp-fcfs-bsld-ticks",
        "itp-saf-bsld",
        "wagap-fcfs-bsld-ticks",
    }
    assert {m.name for m in MODELS} >= shipped


@pytest.mark.parametrize("model_dir", MODELS, ids=lambda p: p.name)
def test_what_ships_was_trained_in_the_loop_the_daemon_runs(model_dir: Path) -> None:
    # The paper-replication loop (one job chosen per decision) is kept only as what it is, and named so.
    loop = load_model(model_dir).manifest.get("loop", "paper")
    assert loop == "ticks" or (loop == "paper" and model_dir.name.endswith("-paper"))


@pytest.mark.parametrize("model_dir", MODELS, ids=lambda p: p.name)
def test_shipped_model_loads_and_names_bundled_data(model_dir: Path) -> None:
    model = load_model(model_dir)
    manifest = model.manifest
    assert resolve_trace(str(manifest["trace"])).is_file()
    assert load_cluster(str(manifest["cluster"])).total_gpus > 0
    # The daemon must know what to read as slots; the HPC-log model's are cores.
    assert trained_slots(manifest) == ("cpus" if manifest["trace"] == "wagap" else "gpus")
    assert (model_dir / "curve.csv").is_file()
    # The budget is checked at the end of each epoch's update (before that epoch's validation, if it
    # validates): the run stops at the first epoch whose update ends past it.
    curve = json.loads((model_dir / "curve.json").read_text())
    walls = [row["time/wall_s"] for row in curve]
    assert manifest["training_wall_s"] == walls[-1]
    assert len(walls) < 2 or walls[-2] < float(manifest["minutes"]) * 60 or "val/gap" in curve[-2]
