"""`rltunectl sweep`: one trial per grid point on a local Ray, ranked on the validation split."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from rltuned.dataclass_cli import parse_grid
from rltuned.rl.args import Args
from tests.rl.test_training import burst


def test_a_grid_is_typed_by_the_fields_it_names() -> None:
    grid = parse_grid(Args, ["seed=1,2", "--pi-lr=3e-3,1e-2", "backfill=true,false", "minutes=5"])
    assert grid == {"seed": [1, 2], "pi_lr": [0.003, 0.01], "backfill": [True, False], "minutes": [5.0]}
    with pytest.raises(ValueError, match="'vf_learning_rate' is not a training flag"):
        parse_grid(Args, ["vf_learning_rate=1"])
    with pytest.raises(ValueError, match="'x' is not a int"):
        parse_grid(Args, ["seed=1,x"])
    with pytest.raises(ValueError, match="expected FIELD=V1,V2"):
        parse_grid(Args, ["seed"])


def run_sweep(tmp_path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    trace, spec = burst(tmp_path)
    return subprocess.run(
        [sys.executable, "-m", "rltuned", "sweep", "--trace", str(trace), "--cluster", str(spec),
         "--estimates", "exact", "--no-backfill", "--window", "32", "--warmup", "16", "--epochs", "2",
         "--episodes-per-epoch", "2", "--reward", "dense", "--gamma", "0.99", "--gae-lambda", "0.95",
         "--validation-window", "64", "--out", str(tmp_path / "sweep"), *extra],
        capture_output=True, text=True, timeout=900, check=False,
    )  # fmt: skip


def test_a_sweep_without_validation_is_refused(tmp_path: Path) -> None:
    out = run_sweep(tmp_path, "--grid", "seed=1,2")
    assert out.returncode == 2
    assert "--validate-every must be >= 1" in out.stderr
    out = run_sweep(tmp_path, "--validate-every", "1", "--grid", "clip_ratio=0.2,1.5")
    assert out.returncode == 2 and "--clip-ratio must be in (0, 1), got 1.5" in out.stderr
    out = run_sweep(tmp_path, "--validate-every", "1", "--grid", "validation_score=pooled,per_window")
    assert out.returncode == 2 and "--grid cannot vary validation_score" in out.stderr  # gaps on two scales
    out = run_sweep(tmp_path, "--validate-every", "1", "--grid", "estimates_seed=0,1")
    assert out.returncode == 2 and "--grid cannot vary estimates_seed" in out.stderr  # two validation sets


@pytest.mark.slow
def test_a_seed_sweep_trains_every_point_and_ranks_them_on_validation(tmp_path: Path) -> None:
    pytest.importorskip("ray")
    out = run_sweep(tmp_path, "--validate-every", "1", "--grid", "seed=1,2", "--ray", "local")
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.strip().splitlines()
    table = lines[-4:]  # after Ray Tune's own progress reports
    header, rows = table[0].split(), [line.split() for line in table[1:3]]
    assert header[:2] == ["seed", "val"] and sorted(r[0] for r in rows) == ["1", "2"]
    gaps = []
    for row in rows:
        manifest = json.loads((tmp_path / "sweep" / f"seed={row[0]}" / "manifest.json").read_text())
        assert manifest["seed"] == int(row[0]) and manifest["epochs_done"] == 2
        gaps.append(manifest["validation"]["gap"])
        assert row[1] == f"{100 * gaps[-1]:+.1f}%"
    assert gaps[0] >= gaps[1]  # best on validation first
    assert table[3] == f"best on validation: {tmp_path.resolve() / 'sweep' / ('seed=' + rows[0][0])}"
