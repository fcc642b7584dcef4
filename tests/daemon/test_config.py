"""The config file: the shipped sample is valid, and every mistake names its key and exits 78."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from rltuned.daemon.config import Settings, load
from rltuned.errors import ConfigError

SAMPLE = Path(__file__).resolve().parents[2] / "etc" / "rltuned.toml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "rltuned.toml"
    path.write_text(text)
    return path


def test_the_shipped_sample_is_valid_and_safe_by_default() -> None:
    settings = load(SAMPLE)
    assert settings.apply.mode == "shadow"
    assert settings.slurm.exempt_partitions == ("sla",)


def test_the_sample_states_every_key_it_documents() -> None:
    """Keys in the sample are the real keys: an empty file and the sample differ only where the sample
    sets example values."""
    assert load(SAMPLE).model_dump().keys() == Settings().model_dump().keys()


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


def test_check_config_accepts_the_sample() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "rltuned.daemon_cli", "--check-config", "--config", str(SAMPLE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
