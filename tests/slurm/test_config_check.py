"""Start-up warnings for Slurm priority settings under which rltuned's writes would do nothing."""

from __future__ import annotations

from rltuned.core.levers import LEVERS, conf_problems
from rltuned.slurm.config_check import parse_show_config


def priority_problems(config: dict[str, str], lever: str) -> list[str]:
    return conf_problems(config, [LEVERS[lever]])


SHOW = """Configuration data as of 2026-11-22T02:10:00
PriorityType            = priority/multifactor
PriorityFlags           = CALCULATE_RUNNING,INCR_ONLY
SchedulerType           = sched/backfill
"""


def test_show_config_lines_are_read() -> None:
    config = parse_show_config(SHOW)
    assert config["PriorityType"] == "priority/multifactor"
    assert config["SchedulerType"] == "sched/backfill"


def test_incr_only_is_reported_for_either_lever() -> None:
    config = parse_show_config(SHOW)
    for lever in ("priority", "site_factor"):
        assert any("INCR_ONLY" in p for p in priority_problems(config, lever))


def test_basic_priorities_defeat_the_priority_band_and_the_site_factor() -> None:
    config = {"PriorityType": "priority/basic", "PriorityFlags": ""}
    assert any("2^32" in p for p in priority_problems(config, "priority"))
    assert any("multifactor" in p for p in priority_problems(config, "site_factor"))


def test_a_plain_multifactor_setup_is_fine() -> None:
    assert priority_problems({"PriorityType": "priority/multifactor", "PriorityFlags": ""}, "priority") == []
