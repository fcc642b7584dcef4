"""What rltuned has changed on which job, kept on disk so that `reset` can always undo it.

Slurm does not say who set a job's priority, SiteFactor or OverSubscribe, so the daemon remembers every
value it wrote, write-ahead:

- `ledger.wal`: before each `scontrol update`, the intended change (job, lever, new value, the value to
  restore) is appended and fsynced; after it, the outcome. A crash between the two leaves an intent
  without an outcome, which counts as written: the update may have landed, and undoing a change that
  never landed is harmless (hold+release, SiteFactor=0, the original OverSubscribe).
- `ledger.json`: the compacted state, replaced atomically (write, fsync, rename, fsync the directory)
  at the end of each tick that wrote; the WAL then starts afresh.

Both files are only written under the instance lock (`instance.py`: one writer per state directory).
A ledger that cannot be read is moved aside (its new name in the error) and the daemon starts with an
empty one marked `unaccounted`: `reset` then also undoes what Slurm shows in rltuned's band.
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rltuned.core.levers import Action
from rltuned.core.plan import Change, Written
from rltuned.errors import ConfigError

LEDGER_FILE = "ledger.json"
WAL_FILE = "ledger.wal"
VERSION = 2
UNCERTAIN = frozenset({"ok", "error"})
"""Outcomes after which the value may be in Slurm: accepted, or a timeout/unknown error."""


class Ledger(Written):
    """The daemon's `Written`, durable: see the module docstring."""

    def __init__(self, path: Path | None) -> None:
        super().__init__()
        self.path = path
        self.unaccounted: str | None = None
        """Why changes may exist that this ledger does not know of (a corrupt ledger moved aside)."""
        self.moved_aside: Path | None = None
        """Where this process moved an unreadable ledger (the service logs it once)."""
        self._seq = 0
        self._wal = None if path is None else path.with_name(WAL_FILE)
        if path is not None:
            self._load(path)

    @classmethod
    def in_dir(cls, state_dir: Path | None) -> Ledger:
        return cls(state_dir / LEDGER_FILE if state_dir is not None else None)

    # --- the write-ahead log ------------------------------------------------------------------------

    def intend(self, action: Action, restore: str | None = None) -> int:
        """Log the update about to be sent (durably, before it is sent); returns its sequence number.
        `restore` is the OverSubscribe word to put back on reset (the job's value before rltuned's first
        write)."""
        self._seq += 1
        self._append({"seq": self._seq, "job": action.job_id, "kind": action.kind, "value": action.value,
                      "restore": restore})  # fmt: skip
        if restore is not None and self.get(action.job_id).oversubscribe_before is None:
            self.record(action.job_id, oversubscribe_before=restore)
        return self._seq

    def settle(self, seq: int, action: Action, outcome: str) -> None:
        """Log the update's outcome; a value that may be in Slurm is recorded as written."""
        self._append({"seq": seq, "outcome": outcome})
        if outcome in UNCERTAIN:
            self.record_applied(action)

    def _append(self, entry: dict[str, Any]) -> None:
        if self._wal is None:
            return
        self._wal.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self._wal, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, (json.dumps(entry, sort_keys=True) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)

    # --- the compacted state ------------------------------------------------------------------------

    def save(self) -> None:
        """Write the compacted state atomically and durably, then start the WAL afresh."""
        if self.path is None:
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = {
            "version": VERSION,
            "jobs": {str(j): asdict(c) for j, c in self.items()},
            "displaced_since": {str(j): t for j, t in sorted(self.displaced_since.items())},
            "unaccounted": self.unaccounted,
        }
        tmp = self.path.with_suffix(".tmp")
        with open(tmp, "w") as f:
            f.write(json.dumps(body, indent=1, sort_keys=True) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self.path)
        _fsync_dir(self.path.parent)
        if self._wal is not None and self._wal.exists():
            os.truncate(self._wal, 0)

    def _load(self, path: Path) -> None:
        try:
            if path.exists():
                doc = json.loads(path.read_text())
                jobs = doc["jobs"]
                for job_id, values in jobs.items():
                    self._put(int(job_id), Change(**values))
                self.displaced_since = {int(j): float(t) for j, t in doc.get("displaced_since", {}).items()}
                self.unaccounted = doc.get("unaccounted")
            if self._wal is not None and self._wal.exists():
                self._replay(self._wal)
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
            self._move_aside(path, exc)

    def _replay(self, wal: Path) -> None:
        intents: dict[int, dict[str, Any]] = {}
        outcomes: dict[int, str] = {}
        lines = wal.read_text().splitlines()
        for number, line in enumerate(lines, 1):
            try:
                entry = json.loads(line)
            except ValueError:
                if number == len(lines):  # a torn last line: the crash came mid-append, before the write
                    break
                raise
            if "outcome" in entry:
                outcomes[int(entry["seq"])] = str(entry["outcome"])
            else:
                intents[int(entry["seq"])] = entry
        for seq, entry in sorted(intents.items()):
            if outcomes.get(seq, "unknown") in UNCERTAIN | {"unknown"}:
                action = Action(int(entry["job"]), str(entry["kind"]), (), entry["value"])
                self.record_applied(action)
            if entry.get("restore") is not None and self.get(int(entry["job"])).oversubscribe_before is None:
                self.record(int(entry["job"]), oversubscribe_before=entry["restore"])
        self._seq = max(intents, default=0)

    def _move_aside(self, path: Path, exc: Exception) -> None:
        stamp = time.strftime("%Y%m%dT%H%M%S")
        self._clear()
        self.displaced_since = {}
        moved: list[Path] = []
        for source in (path, self._wal):
            if source is not None and source.exists():
                target = source.with_name(f"{source.name}.corrupt-{stamp}")
                try:
                    os.replace(source, target)
                except OSError as move_error:
                    raise ConfigError(
                        f"{source}: unreadable ledger ({exc}) that cannot be moved aside ({move_error})"
                    ) from None
                moved.append(target)
        self.moved_aside = moved[0] if moved else None
        self.unaccounted = f"{path} was unreadable ({exc}); moved to {', '.join(map(str, moved))}"

    def mark_accounted(self) -> None:
        """A reset that worked from Slurm's own values has undone whatever the lost ledger knew."""
        self.unaccounted = None

    def forget_lever(self, job_id: int, kind: str) -> None:
        """One lever undone on a job; the job is forgotten once nothing of it is left to undo."""
        cleared: dict[str, Any] = {kind: None}
        change = replace(self.get(job_id), **cleared)
        if kind == "priority":
            change = replace(change, held=False)
        if change.oversubscribe is None:
            change = replace(change, oversubscribe_before=None)
        if change == Change():
            self.forget(job_id)
        else:
            self._put(job_id, change)


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
