"""Shared pytest fixtures: the real local Slurm lab (tests/slurm_lab.py, scripts/slurm-lab)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.slurm_lab import SKIP_ENV, SlurmLab, lab_session, slurm_skipped


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "slurm: needs the real local Slurm lab (scripts/slurm-lab; root)")


@pytest.fixture(scope="session")
def slurm_lab() -> Iterator[SlurmLab]:
    """One lab for the whole session, in a fresh /tmp directory; never skipped unless asked to."""
    if slurm_skipped():
        pytest.skip(f"{SKIP_ENV}=1: Slurm lab tests skipped on request")
    with lab_session() as lab:
        yield lab


@pytest.fixture
def clean_lab(slurm_lab: SlurmLab) -> SlurmLab:
    """The session lab with an empty queue."""
    slurm_lab.cancel_all()
    return slurm_lab
