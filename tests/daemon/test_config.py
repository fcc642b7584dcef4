"""The config file: the shipped sample is valid, and every mistake names its key and exits 78."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from rltuned.daemon.config import Settings, load
from rltuned.errors import ConfigError
from rltuned.rl.export import export_actor

SAMPLE = Path(__file__).resolve().parents[2] / "etc" / "rltuned.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rltuned.toml"
    path.write_text(text)
    return path


def test_the_shipped_sample_is_valid_and_safe_by_default() -> None:
    settings = load(SAMPLE)
    assert settings.apply.mode == "shadow"
    assert settings.slurm.exempt_partitions == ("sla",)


def test_the_sample_documents_every_key() -> None:
    """Every setting appears in the sample, set or commented out, so an admin finds each one there."""
    text = SAMPLE.read_text()
    for section, values in Settings().model_dump().items():
        assert f"[{section}]" in text, section
        for key in values:
            assert re.search(rf"^#? ?{key} = ", text, flags=re.M), f"{section}.{key} is not in the sample"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[apply]\nmoda = "enforce"\n', "apply.moda: unknown key"),
        ('[aply]\nmode = "enforce"\n', "aply: unknown key"),
        ('[apply]\nmode = "dry-run"\n', "apply.mode"),
        ("[daemon]\ninterval_s = -1\n", "daemon.interval_s"),
        ('[policy]\nbase = "lifo"\n', "policy.base"),
        ("[apply]\npriority_min = 10\npriority_max = 5\n", "priority_min (10) must be below"),
        ("[apply\n", "not valid TOML"),
        ('[guard]\npromote_to = "front"\n', "guard.promote_to"),
        ('[policy]\nengine = "onnx"\n', "policy.engine"),
    ],
)
def test_a_bad_file_names_the_key_and_the_problem(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as caught:
        load(write(tmp_path, text))
    assert expected in str(caught.value)
    assert "\n" not in str(caught.value)


def test_environment_overrides_win_over_the_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = write(tmp_path, '[apply]\nmode = "shadow"\nmax_actions = 5\n')
    monkeypatch.setenv("RLTUNED_APPLY__MODE", "enforce")
    settings = load(path)
    assert settings.apply.mode == "enforce"
    assert settings.apply.max_actions == 5


def test_a_misspelt_environment_override_is_an_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RLTUNED_APPLY__MODES", "enforce")
    with pytest.raises(ConfigError, match="RLTUNED_APPLY__MODES"):
        load(write(tmp_path, ""))


def test_check_config_exits_78_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, "[metrics]\nport = 70000\n")
    proc = subprocess.run(
        [sys.executable, "-m", "rltuned.daemon_cli", "--check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 78
    assert proc.stderr.count("\n") == 1 and "metrics.port" in proc.stderr


def check_config(path: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rltuned.daemon_cli", "--check-config", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, **env},
    )


def test_check_config_accepts_the_sample_once_its_model_and_state_dir_exist(tmp_path: Path) -> None:
    model = Path(__file__).resolve().parents[2] / "models" / "philly-sjf-bsld"  # the sample's model
    proc = check_config(
        SAMPLE, RLTUNED_POLICY__MODEL=str(model), RLTUNED_DAEMON__STATE_DIR=str(tmp_path / "state")
    )
    assert proc.returncode == 0, proc.stderr
    assert "model philly/sjf/bsld" in proc.stdout


def test_check_config_loads_the_model_and_names_the_key(tmp_path: Path) -> None:
    proc = check_config(write(tmp_path, f'[policy]\nmodel = "{tmp_path / "nowhere"}"\n'))
    assert proc.returncode == 78
    assert proc.stderr.count("\n") == 1 and "policy.model" in proc.stderr


def test_check_config_refuses_a_state_dir_that_cannot_be_written(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    proc = check_config(write(tmp_path, f'[daemon]\nstate_dir = "{tmp_path / "file" / "state"}"\n'))
    assert proc.returncode == 78
    assert "daemon.state_dir" in proc.stderr


class _Zeros(torch.nn.Module):
    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return torch.zeros(mask.shape)


def test_check_config_refuses_a_model_trained_on_another_base_naming_both(tmp_path: Path) -> None:
    model = export_actor(_Zeros(), tmp_path / "model", {"base": "sjf", "seed": 0, "training_commit": "abc"})
    state = tmp_path / "state"
    text = f'[policy]\nmodel = "{model}"\nbase = "fcfs"\n[daemon]\nstate_dir = "{state}"\n'
    proc = check_config(write(tmp_path, text))
    assert proc.returncode == 78, proc.stderr
    assert proc.stderr.count("\n") == 1 and "policy.model" in proc.stderr
    assert "trained on base 'sjf' but policy.base is 'fcfs'" in proc.stderr
    proc = check_config(write(tmp_path, text.replace('base = "fcfs"', 'base = "sjf"')))
    assert proc.returncode == 0, proc.stderr


@pytest.mark.parametrize(("base", "reason"), [("f1", "origin"), ("f3", "origin")])
def test_check_config_refuses_a_base_whose_inputs_slurm_does_not_give(
    tmp_path: Path, base: str, reason: str
) -> None:
    proc = check_config(write(tmp_path, f'[policy]\nbase = "{base}"\n'))
    assert proc.returncode == 78
    assert proc.stderr.count("\n") == 1 and f"policy.base: '{base}'" in proc.stderr and reason in proc.stderr


def test_the_daemon_refuses_to_start_on_a_base_whose_inputs_slurm_does_not_give(tmp_path: Path) -> None:
    path = write(tmp_path, f'[policy]\nbase = "f1"\n[daemon]\nstate_dir = "{tmp_path / "state"}"\n')
    proc = subprocess.run(
        [sys.executable, "-m", "rltuned.daemon_cli", "--once", "--config", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 78
    assert "policy.base: 'f1'" in proc.stderr and "origin" in proc.stderr


def test_check_config_refuses_a_model_whose_slots_are_not_slurm_slots(tmp_path: Path) -> None:
    """The HPC-log model ranks jobs by the cores they ask for; read as GPUs, its state would be another
    cluster's, so the daemon must be told to read cores (and a GPU model must not be served on cores)."""
    models = Path(__file__).resolve().parents[2] / "models"
    state = tmp_path / "state"
    text = (
        f'[slurm]\nslots = "gpus"\n[policy]\nmodel = "{models / "wagap-fcfs-bsld-ticks"}"\nbase = "fcfs"\n'
        f'refresh_s = 600\n[daemon]\nstate_dir = "{state}"\n'
    )
    proc = check_config(write(tmp_path, text))
    assert proc.returncode == 78, proc.stderr
    assert "cpus as slots (cluster wagap-slice) but slurm.slots is 'gpus'" in proc.stderr
    proc = check_config(write(tmp_path, text.replace('"gpus"', '"cpus"')))
    assert proc.returncode == 0 and "cores as slots (placement levers off)" in proc.stdout
    gpu_model = text.replace("wagap-fcfs-bsld-ticks", "philly-sjf-bsld").replace('"fcfs"', '"sjf"')
    gpu_model = gpu_model.replace("refresh_s = 600", "refresh_s = 0").replace('"gpus"', '"cpus"')
    proc = check_config(write(tmp_path, gpu_model))
    assert proc.returncode == 78
    assert "gpus as slots (cluster philly-slice) but slurm.slots is 'cpus'" in proc.stderr


def test_with_cores_as_slots_the_placement_levers_are_off() -> None:
    """They steer GPU jobs between GPU models (ExcNodeList) and pack them (OverSubscribe): nothing a CPU
    job asks for, and not what the HPC model was trained with."""
    gpus = Settings()
    cpus = Settings(slurm={"slots": "cpus"})  # type: ignore[arg-type]
    assert [lever.kind for lever in gpus.levers()] == ["priority", "oversubscribe", "excluded_nodes"]
    assert [lever.kind for lever in cpus.levers()] == ["priority"]
    assert not cpus.core().lever.oversubscribe and not cpus.core().lever.steer_untyped
