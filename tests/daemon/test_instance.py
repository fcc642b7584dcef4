"""One writer per state directory, and a pause that survives a restart."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from rltuned.daemon import ctl
from rltuned.daemon.control import request
from rltuned.daemon.instance import InstanceBusy, InstanceLock
from rltuned.daemon.service import run_once
from tests.daemon.test_service import service


@contextmanager
def held_elsewhere(state_dir: Path, role: str = "daemon") -> Iterator[subprocess.Popen[str]]:
    """Another process holding the lock, as a running daemon would."""
    code = (
        "import sys, time; from pathlib import Path; from rltuned.daemon.instance import InstanceLock; "
        f"InstanceLock(Path({str(state_dir)!r}), {role!r}).acquire(); print('locked', flush=True); "
        "time.sleep(60)"
    )
    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "locked"
        yield proc
    finally:
        proc.kill()
        proc.wait()


def test_the_lock_is_exclusive_names_its_holder_and_dies_with_it(tmp_path: Path) -> None:
    with held_elsewhere(tmp_path) as holder:
        with pytest.raises(InstanceBusy, match=rf"held by another rltuned \(pid {holder.pid}, daemon\)"):
            InstanceLock(tmp_path, "test").acquire()
        holder.send_signal(signal.SIGKILL)  # no clean-up at all
        holder.wait()
    InstanceLock(tmp_path, "test").acquire().release()


def test_a_second_daemon_stops_before_touching_the_first_ones_socket(tmp_path: Path) -> None:
    first = service(tmp_path)
    first.start()
    try:
        sock = tmp_path / "ctl.sock"
        before = sock.stat().st_ino
        second = service(tmp_path)
        with pytest.raises(InstanceBusy):
            second.start()
        assert first.control is not None
        # The first daemon's own socket file, still answering through it: a second daemon that bound
        # the path before the lock refused it would have replaced the file (a new inode).
        assert sock.stat().st_ino == before
        assert request(sock, {"command": "status"}, timeout_s=10.0)["ok"]
    finally:
        first.control.stop()  # type: ignore[union-attr]
        first.instance.release()  # type: ignore[union-attr]


def test_once_in_enforce_mode_and_the_offline_reset_refuse_beside_a_silent_daemon(tmp_path: Path) -> None:
    svc = service(tmp_path)
    with held_elsewhere(tmp_path / "state"):
        with pytest.raises(InstanceBusy):
            run_once(svc.settings, None, "enforce")
        assert run_once(svc.settings, None, "shadow").mode == "shadow"  # reading needs no lock
        config = tmp_path / "rltuned.toml"
        config.write_text(
            f'[daemon]\nstate_dir = "{tmp_path / "state"}"\n[control]\nsocket = "{tmp_path / "none.sock"}"\n'
            "[metrics]\nenabled = false\n"
        )
        with pytest.raises(InstanceBusy, match="did not answer on its socket"):
            ctl.reset(config)


def test_a_pause_survives_a_restart_and_resume_clears_it(tmp_path: Path) -> None:
    svc = service(tmp_path)
    assert svc.handle({"command": "pause"})["paused"] is True
    restarted = service(tmp_path)
    assert restarted.paused is True and restarted.status()["paused"] is True
    assert restarted.handle({"command": "resume"})["paused"] is False
    assert service(tmp_path).paused is False
