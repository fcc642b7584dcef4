"""Start-up checks of slurmctld's priority settings against the lever rltuned is configured to use.

An external priority daemon fails silently under some settings: with
`PriorityFlags=INCR_ONLY` every decrease rltuned writes is ignored; `SiteFactor` only exists in the
multifactor plugin; with `priority/basic` new jobs get priorities near 2^32, above any band rltuned sets.
`scontrol show config` is read once and each problem becomes a warning; nothing here stops the daemon.
Each lever's own checks live with its definition (`core/levers.py`, `conf_problems`).
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
