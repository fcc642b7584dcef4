"""One writer per state directory: the daemon, `rltuned --once --mode enforce` and the offline reset take
the same lock before they write to Slurm, so two of them never interleave writes and ledger updates.

The lock is `flock` on `state_dir/instance.lock`, released by the kernel when its holder exits however it
exits (a SIGKILLed daemon leaves no stale lock). The file names the holder for the error message. The
paused flag lives beside it, so that a pause survives a restart.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path

from rltuned.errors import RltunedError

LOCK_FILE = "instance.lock"
PAUSED_FILE = "paused"


class InstanceBusy(RltunedError):
    """Another rltuned process holds the state directory's lock."""

    exit_code = 75  # EX_TEMPFAIL: retry once the other writer is gone


class InstanceLock:
    """Held from `acquire` until `release` or the process's exit."""

    def __init__(self, state_dir: Path, role: str) -> None:
        self.path = state_dir / LOCK_FILE
        self.role = role
        self.fd: int | None = None

    def acquire(self) -> InstanceLock:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o640)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.pread(fd, 200, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise InstanceBusy(
                f"{self.path} is held by another rltuned ({holder}): one writer at a time"
            ) from None
        with contextlib.suppress(OSError):  # the note only names the holder: a full disk must not stop it
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"pid {os.getpid()}, {self.role}\n".encode(), 0)
        self.fd = fd
        return self

    def release(self) -> None:
        if self.fd is not None:
            os.close(self.fd)  # closing drops the flock
            self.fd = None


def is_paused(state_dir: Path) -> bool:
    return (state_dir / PAUSED_FILE).exists()


def set_paused(state_dir: Path, paused: bool) -> str | None:
    """Persist the pause; returns why it could not be (the pause itself still holds until a restart)."""
    flag = state_dir / PAUSED_FILE
    try:
        if paused:
            state_dir.mkdir(parents=True, exist_ok=True)
            flag.write_text("paused by rltunectl; `rltunectl resume` clears it\n")
        else:
            flag.unlink(missing_ok=True)
    except OSError as exc:
        return f"{flag}: {exc.strerror or exc}"
    return None
