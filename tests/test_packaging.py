"""The controller image (no Docker engine runs here, so its rules are checked on the Dockerfile itself)."""

from __future__ import annotations

import json
import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def instructions() -> list[tuple[str, str]]:
    text = (REPO / "Dockerfile").read_text().replace("\\\n", " ")
    lines = [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return [(line.split(None, 1)[0].upper(), line.split(None, 1)[1]) for line in lines]


def test_the_image_runs_as_a_non_root_user_after_installing() -> None:
    steps = instructions()
    users = [arg for op, arg in steps if op == "USER"]
    assert users == ["rltune"]
    last_user = max(i for i, (op, _) in enumerate(steps) if op == "USER")
    assert all(op not in ("RUN", "COPY") for op, _ in steps[last_user:])


def test_the_image_has_the_slurm_client_munge_and_a_cpu_torch() -> None:
    runs = " ".join(arg for op, arg in instructions() if op == "RUN")
    assert "slurm-client" in runs and "munge" in runs
    assert "torch==2.13.0" in runs and "$TORCH_INDEX" in runs


def test_the_image_ships_the_sample_config_and_the_models_the_config_names() -> None:
    copies = [arg for op, arg in instructions() if op == "COPY"]
    assert "etc/rltuned.toml /etc/rltuned/rltuned.toml" in copies
    assert "models /usr/share/rltuned/models" in copies
    config = (REPO / "etc" / "rltuned.toml").read_text()
    named = re.search(r'^model = "/usr/share/rltuned/models/([^"]+)"', config, re.MULTILINE)
    assert named is not None
    manifest = json.loads((REPO / "models" / named.group(1) / "manifest.json").read_text())
    assert f'base = "{manifest["base"]}"' in config  # the daemon refuses a model on another base
