"""`rltunectl evaluate` end to end, with a known answer: an untrained agent is its base policy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rltuned.rl.agent import Actor
from rltuned.rl.export import export_actor


def test_untrained_agent_matches_every_base_policy_exactly(tmp_path: Path) -> None:
    torch.manual_seed(0)
    model = export_actor(
        Actor(), tmp_path / "untrained", {"warmup": 256, "backfill": True, "placement": "pack"}
    )
    plot = tmp_path / "eval.png"
    out = subprocess.run(
        [sys.executable, "-m", "rltuned", "evaluate", "--model", str(model), "--trace", "philly",
         "--cluster", "philly-slice", "--base", "fcfs,sjf,wfp3", "--sequences", "2", "--jobs", "128",
         "--json", "--plot", str(plot)],
        capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert body["split"] == "validation" and body["estimates"] == "qssf-noise" and body["warmup_jobs"] == 256
    assert body["windows"] == "random" and body["sequences"] == 2 and body["jobs_per_window"] == 128
    assert [r["base"] for r in body["results"]] == ["fcfs", "sjf", "wfp3"]
    for result in body["results"]:
        for key in ("avg_bsld", "avg_wait_s", "avg_jct_s", "gpu_util"):
            assert result[key]["rl_mean"] == result[key]["base_mean"]
            assert result[key]["improvement_pct"] == 0.0
    assert plot.stat().st_size > 10_000


def test_a_corrupt_model_is_refused_with_one_line(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text("{}")
    (tmp_path / "actor.pt").write_bytes(b"x")
    out = subprocess.run(
        [sys.executable, "-m", "rltuned", "evaluate", "--model", str(tmp_path), "--trace", "philly",
         "--cluster", "philly-slice"],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert out.returncode == 1
    assert "schema_version" in out.stderr and len(out.stderr.strip().splitlines()) == 1


@pytest.mark.parametrize(
    ("trained", "trace", "cluster", "judged"),
    [("exact", "philly", "philly-slice", "exact"), ("auto", "wagap", "wagap-slice", "trace")],
)
def test_a_model_is_judged_on_the_estimates_it_was_trained_on_unless_told_otherwise(
    tmp_path: Path, trained: str, trace: str, cluster: str, judged: str
) -> None:
    """A model trained on the users' own limits (or exact runtimes) must not be scored on drawn noise."""
    model = export_actor(Actor(), tmp_path / "m", {"warmup": 0, "estimates": trained})

    def estimates(*extra: str) -> str:
        out = subprocess.run(
            [sys.executable, "-m", "rltuned", "evaluate", "--model", str(model), "--trace", trace,
             "--cluster", cluster, "--sequences", "1", "--jobs", "64", "--json", *extra],
            capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert out.returncode == 0, out.stderr
        return str(json.loads(out.stdout)["estimates"])

    assert estimates() == judged
    assert estimates("--estimates", "qssf-noise") == "qssf-noise"
