"""What rltuned has changed on which job, kept on disk so that `reset` can undo it after a restart.

Slurm does not say who set a job's priority or SiteFactor, so the daemon remembers every value it wrote
(`state_dir/ledger.json`, replaced atomically after each tick that wrote something). Jobs that left the
queue are forgotten at the next read.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict
from pathlib import Path

from rltuned.core.plan import Change, Written
from rltuned.errors import ConfigError

LEDGER_FILE = "ledger.json"


class Ledger(Written):
    """The daemon's `Written`, loaded from and saved to `state_dir/ledger.json`."""

    def __init__(self, path: Path | None) -> None:
        super().__init__(_load(path) if path is not None and path.exists() else None)
        self.path = path

    @classmethod
    def in_dir(cls, state_dir: Path | None) -> Ledger:
        return cls(state_dir / LEDGER_FILE if state_dir is not None else None)

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        body = {str(j): asdict(c) for j, c in self.items()}
        tmp.write_text(json.dumps({"version": 1, "jobs": body}, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


def _load(path: Path) -> dict[int, Change]:
    try:
        doc = json.loads(path.read_text())
        return {int(j): Change(**values) for j, values in doc["jobs"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: unreadable ledger ({exc}); move it aside to start afresh") from None
