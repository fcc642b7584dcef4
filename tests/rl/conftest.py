"""Fixtures shared by the training tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.rl.test_training import write_trace

TINY = 'name = "tiny"\n[[nodes]]\ngpu_type = "T4"\ngpus = 4\ncpus = 16\nmem_mb = 65536\n'


@pytest.fixture(scope="module")
def burst(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 2,000-job burst trace and a one-node, 4-GPU cluster: small enough to train on in a unit test."""
    root = tmp_path_factory.mktemp("burst")
    write_trace(root / "burst.csv", 2000, seed=2)
    (root / "tiny.toml").write_text(TINY)
    return root / "burst.csv", root / "tiny.toml"
