"""Every model shipped in models/ loads with its hash and manifest verified and names data we bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltuned.clusters import load_cluster
from rltuned.rl.export import load_model
from rltuned.traces.bundled import resolve_trace

ROOT = Path(__file__).parents[2] / "models"
MODELS = sorted(p.parent for p in [*ROOT.glob("*/manifest.json"), *ROOT.glob("*/seeds/*/manifest.json")])


def test_models_are_shipped() -> None:
    assert {m.name for m in MODELS} >= {"philly-fcfs-bsld", "itp-fcfs-bsld"}


@pytest.mark.parametrize("model_dir", MODELS, ids=lambda p: p.name)
def test_shipped_model_loads_and_names_bundled_data(model_dir: Path) -> None:
    model = load_model(model_dir)
    manifest = model.manifest
    assert resolve_trace(str(manifest["trace"])).is_file()
    assert load_cluster(str(manifest["cluster"])).total_gpus > 0
    assert manifest["training_wall_s"] <= 45 * 60
    assert (model_dir / "curve.csv").is_file()
