"""Start-up checks of slurmctld's priority settings against the lever rltuned is configured to use.

An external priority daemon fails silently under some settings: with
`PriorityFlags=INCR_ONLY` every decrease rltuned writes is ignored; `SiteFactor` only exists in the
multifactor plugin; with `priority/basic` new jobs get priorities near 2^32, above any band rltuned sets.
`scontrol show config` is read once and each problem becomes a warning; nothing here stops the daemon.
"""

from __future__ import annotations

import re

_LINE = re.compile(r"^(\w+)\s*=\s*(.*?)\s*$")


def parse_show_config(text: str) -> dict[str, str]:
    """`Key = value` lines of `scontrol show config`."""
    out: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.match(line)
        if match:
            out[match.group(1)] = match.group(2)
    return out


def priority_problems(config: dict[str, str], lever: str) -> list[str]:
    """What would make the configured lever ineffective, one sentence each (empty when all is well)."""
    problems: list[str] = []
    plugin = config.get("PriorityType", "")
    flags = {f.strip().upper() for f in config.get("PriorityFlags", "").split(",") if f.strip()}
    if "INCR_ONLY" in flags:
        problems.append(
            "PriorityFlags has INCR_ONLY: priorities only rise, so lowering a job's rank is ignored"
        )
    if lever == "site_factor" and plugin and plugin != "priority/multifactor":
        problems.append(
            f"lever site_factor needs PriorityType=priority/multifactor, this Slurm runs {plugin}"
        )
    if lever == "priority" and plugin == "priority/basic":
        problems.append(
            "PriorityType=priority/basic gives new jobs priorities near 2^32, above rltuned's band: "
            "new jobs will run before the plan's order"
        )
    return problems
