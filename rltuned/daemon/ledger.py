"""What rltuned has changed on which job, kept on disk so that `reset` can undo it after a restart.

Slurm does not say who set a job's priority or SiteFactor, so the daemon remembers every value it wrote
(`state_dir/ledger.json`, replaced atomically after each tick that wrote something). Jobs that left the
queue are forgotten at the next read.
"""

from __future__ import annotations

import json
import os
from collections.abc import Collection, Iterator, Mapping
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from rltuned.errors import ConfigError

LEDGER_FILE = "ledger.json"


@dataclass(frozen=True)
class Change:
    """The values rltuned last wrote on one job (None: never touched that field)."""

    priority: int | None = None
    site_factor: int | None = None
    oversubscribe: bool | None = None
    excluded_nodes: str | None = None


class Ledger:
    """Per-job record of rltuned's writes; mutated only by the applier and by reset."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._changes: dict[int, Change] = {}
        if path is not None and path.exists():
            self._changes = _load(path)

    @classmethod
    def in_dir(cls, state_dir: Path | None) -> Ledger:
        return cls(state_dir / LEDGER_FILE if state_dir is not None else None)

    def get(self, job_id: int) -> Change:
        return self._changes.get(job_id, Change())

    def record(self, job_id: int, **values: Any) -> None:
        self._changes[job_id] = replace(self.get(job_id), **values)

    def forget(self, job_id: int) -> None:
        self._changes.pop(job_id, None)

    def keep_only(self, job_ids: Collection[int]) -> int:
        """Drop jobs Slurm no longer lists; returns how many were dropped."""
        gone = [j for j in self._changes if j not in job_ids]
        for job_id in gone:
            del self._changes[job_id]
        return len(gone)

    def items(self) -> Iterator[tuple[int, Change]]:
        return iter(sorted(self._changes.items()))

    def __len__(self) -> int:
        return len(self._changes)

    def owned_priorities(self) -> Mapping[int, int]:
        return {j: c.priority for j, c in self._changes.items() if c.priority is not None}

    def save(self) -> None:
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        body = {str(j): asdict(c) for j, c in sorted(self._changes.items())}
        tmp.write_text(json.dumps({"version": 1, "jobs": body}, indent=1, sort_keys=True) + "\n")
        os.replace(tmp, self.path)


def _load(path: Path) -> dict[int, Change]:
    try:
        doc = json.loads(path.read_text())
        return {int(j): Change(**values) for j, values in doc["jobs"].items()}
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(f"{path}: unreadable ledger ({exc}); move it aside to start afresh") from None
