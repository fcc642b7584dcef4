"""Fault injection on the real Slurm lab: for each fault, what was injected, how many runs, how many
changes reached Slurm, how many `reset` restored and how many were lost (must be 0). Each test adds its
row to the report that docs/reliability.md tabulates (`scripts/reliability_table.py`)."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from rltuned.daemon.control import request
from rltuned.rl.export import export_actor
from tests.faults.harness import (
    MODEL,
    REPO,
    FaultRow,
    config,
    daemon_argv,
    damage,
    events,
    fill,
    fill_and_queue,
    kill,
    priorities,
    queue,
    record,
    reset_offline,
    run_once,
    start,
    wait_for,
)
from tests.slurm_lab import SlurmLab

pytestmark = [pytest.mark.slurm, pytest.mark.slow]
KILL_RUNS = 20
INJECTED = {
    "SIGKILL mid-apply": (
        "`rltuned --once --mode enforce` killed (SIGKILL) at a uniform random time up to 0.8 s "
        "after its first write-ahead intent (12 paced writes at 15/s); then `rltunectl reset` "
        "offline"
    ),
    "slurmctld stopped mid-apply": (
        "slurmctld stopped (SIGTERM) after 3 accepted writes of 12, restarted once the tick gave up; reset"
    ),
    "scontrol permission denied": (
        "the daemon's scontrol runs as a user who is not an Operator; the daemon in enforce mode "
        "until it pauses itself"
    ),
    "jobs cancelled between read and write": (
        "half the pending jobs cancelled (scancel) right after the first write-ahead intent; then reset"
    ),
    "model replaced by garbage, then reloaded": (
        "the serving model's actor.pt overwritten with random bytes, then `rltunectl "
        "reload-model`; then reset through the daemon"
    ),
    "corrupt ledger": (
        "ledger.json overwritten with garbage after an enforce tick; then reset offline (from "
        "what Slurm shows in rltuned's band)"
    ),
    "full state disk": "state_dir on a 64 KiB tmpfs filled to ENOSPC; an enforce tick",
    "second writer": (
        "`rltuned --once --mode enforce` and a second daemon started beside a running enforce "
        "daemon; then reset"
    ),
    "socket clients sending garbage": "13 malformed, wrong-typed and huge (1 MiB) control socket requests",
    "job names with newlines and separators": (
        "5 jobs named with newlines, pipes, tabs and squeue format codes; an enforce tick on the "
        "text backend; then reset"
    ),
    "a model that ranks one user last forever": (
        "a TorchScript policy scoring the largest GPU request lowest (bob's job, which SJF, the base, "
        "ranks first), guard.max_wait_s = 20 s; enforce ticks before and after the bound, then reset"
    ),
}
"""What each fault injects, as docs/reliability.md shows it."""


def _row(fault: str) -> FaultRow:
    return FaultRow(fault, INJECTED[fault])


def _intent_logged(state: Path) -> bool:
    wal = state / "ledger.wal"
    return wal.exists() and wal.stat().st_size > 0


def _accepted(state: Path) -> int:
    wal = state / "ledger.wal"
    return wal.read_text().count('"outcome": "ok"') if wal.exists() else 0


def _check_reset(lab: SlurmLab, path: Path, baseline: dict[int, int], row: FaultRow) -> None:
    changed = damage(lab, baseline)
    reset_offline(path)
    lost = damage(lab, baseline)
    row.add(len(changed), len(changed - lost), len(lost))
    assert not lost, f"{row.fault}: reset left {sorted(lost)} changed"


def test_sigkill_at_random_points_of_an_apply(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab)
    baseline = priorities(lab)
    # A long interval: a tick's writes may use half of it, so all 12 are sent (paced) unless killed.
    path = config(tmp_path, lab, apply__writes_per_s=15.0, apply__write_burst=1, daemon__interval_s=10.0)
    rng = random.Random(18)
    row = _row("SIGKILL mid-apply")
    in_apply = 0
    for run in range(KILL_RUNS):
        proc = start(daemon_argv(path, "--once", "--mode", "enforce"), tmp_path / f"once-{run}.log")
        wait_for(lambda p=proc: _intent_logged(tmp_path / "state") or p.poll() is not None, 120, "an intent")
        time.sleep(rng.uniform(0.0, 0.8))
        in_apply += proc.poll() is None
        kill(proc)
        _check_reset(lab, path, baseline, row)
    row.notes.append(f"{in_apply} of {KILL_RUNS} kills landed before the apply ended")
    record(row)
    assert in_apply >= KILL_RUNS // 2 and row.changed > 0


def test_slurmctld_stopped_mid_apply(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab)
    baseline = priorities(lab)
    pacing = {"apply__writes_per_s": 5.0, "apply__write_burst": 2, "daemon__interval_s": 10.0}
    path = config(tmp_path, lab, **pacing)
    row = _row("slurmctld stopped mid-apply")
    proc = start(daemon_argv(path, "--once", "--mode", "enforce"), tmp_path / "once.log")
    try:
        wait_for(lambda: _accepted(tmp_path / "state") >= 3, 120, "three accepted writes")
        lab.stop_controller()
        assert proc.wait(timeout=120) == 0  # the tick ends: writes that cannot reach Slurm are skipped
    finally:
        lab.start_controller()
        lab.wait_usable()
    skipped = [e for e in events(tmp_path / "once.log") if e.get("event") == "apply_stopped"]
    assert skipped, "the apply did not notice slurmctld was gone"
    # The reset an admin runs once slurmctld is back, with the shipped command timeout (10 s): a
    # controller just restarted on a busy machine can take longer than the lab's 3 s to answer writes.
    path = config(tmp_path, lab, **pacing, slurm__command_timeout_s=10.0)
    _check_reset(lab, path, baseline, row)
    record(row)
    assert row.changed > 0


def test_scontrol_permission_denied(clean_lab: SlurmLab, tmp_path: Path) -> None:
    """scontrol run as an unprivileged user (a wrapper in slurm.bin_dir): Slurm refuses every write;
    the daemon pauses enforce mode after `pause_after_denied_ticks` and keeps running."""
    lab = clean_lab
    fill_and_queue(lab, jobs=6)
    baseline = priorities(lab)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("squeue", "sinfo"):
        (bin_dir / name).symlink_to(shutil.which(name) or name)
    scontrol = bin_dir / "scontrol"
    scontrol.write_text(
        f'#!/bin/sh\nexec runuser -u alice -- env SLURM_CONF={lab.conf} {shutil.which("scontrol")} "$@"\n'
    )
    scontrol.chmod(0o755)
    path = config(tmp_path, lab, slurm__bin_dir=str(bin_dir), apply__mode="enforce",
                  apply__pause_after_denied_ticks=2)  # fmt: skip
    row = _row("scontrol permission denied")
    proc = start(daemon_argv(path), tmp_path / "daemon.log")
    try:
        wait_for((tmp_path / "state" / "paused").exists, 120, "enforce mode to pause itself")
        assert proc.poll() is None  # paused, not dead
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    log = list(events(tmp_path / "daemon.log"))
    assert any(e.get("event") == "enforce_paused_permission_denied" for e in log)
    assert any(e.get("result") == "denied" for e in log if e.get("event") == "update_failed")
    _check_reset(lab, path, baseline, row)
    record(row)
    assert row.changed == 0


def test_jobs_cancelled_between_read_and_write(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    jobs = fill_and_queue(lab)
    baseline = priorities(lab)
    path = config(tmp_path, lab, apply__writes_per_s=5.0, apply__write_burst=1, daemon__interval_s=10.0)
    row = _row("jobs cancelled between read and write")
    proc = start(daemon_argv(path, "--once", "--mode", "enforce"), tmp_path / "once.log")
    wait_for(lambda: _intent_logged(tmp_path / "state"), 120, "an intent")
    cancelled = jobs[::2]
    lab.run(["scancel", *map(str, cancelled)])
    assert proc.wait(timeout=120) == 0
    gone = [
        e
        for e in events(tmp_path / "once.log")
        if e.get("event") == "update_failed" and e["result"] == "gone"
    ]
    assert gone, "no write met a cancelled job"
    _check_reset(lab, path, {j: p for j, p in baseline.items() if j not in cancelled}, row)
    row.notes.append(f"{len(gone)} writes met a cancelled job (counted gone)")
    record(row)
    assert row.changed > 0


def test_a_model_replaced_by_garbage_before_a_reload(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab, jobs=8)
    baseline = priorities(lab)
    models = tmp_path / "models"
    shutil.copytree(MODEL, models / "m")
    path = config(tmp_path, lab, policy__model=str(models / "m"), policy__model_dirs=[str(models)],
                  apply__mode="enforce")  # fmt: skip
    row = _row("model replaced by garbage, then reloaded")
    proc = start(daemon_argv(path), tmp_path / "daemon.log")
    try:
        wait_for(lambda: _ticks(tmp_path / "daemon.log") >= 2, 120, "two ticks")
        serving = json.loads(_ctl("status", "--config", str(path), "--json").stdout)["model"]
        (models / "m" / "actor.pt").write_bytes(random.Random(1).randbytes(4096))
        reload = _ctl("reload-model", "--config", str(path))
        assert reload.returncode != 0, reload.stdout
        before = _ticks(tmp_path / "daemon.log")
        wait_for(lambda: _ticks(tmp_path / "daemon.log") >= before + 2, 60, "ticks after the failed reload")
        status = json.loads(_ctl("status", "--config", str(path), "--json").stdout)
        assert status["model"] == serving and status["healthy"]
        assert _last_tick(tmp_path / "daemon.log")["ranked_by"] == "model"  # the old model still ranks
        changed = damage(lab, baseline)
        reset = _ctl("reset", "--config", str(path))
        assert reset.returncode == 0 and "reset by the daemon" in reset.stdout, reset.stderr
        lost = damage(lab, baseline)
        row.add(len(changed), len(changed - lost), len(lost))
        assert not lost
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    record(row)
    assert row.changed > 0


def test_a_corrupt_ledger(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab, jobs=8)
    baseline = priorities(lab)
    path = config(tmp_path, lab)
    row = _row("corrupt ledger")
    assert run_once(path).returncode == 0
    (tmp_path / "state" / "ledger.json").write_text('{"jobs": {"1": ')
    _check_reset(lab, path, baseline, row)
    assert list((tmp_path / "state").glob("ledger.json.corrupt-*"))
    record(row)
    assert row.changed > 0


def test_a_full_state_disk(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab, jobs=6)
    baseline = priorities(lab)
    state = tmp_path / "state"
    state.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(state)], check=True)
    try:
        with contextlib.suppress(OSError), open(state / "filler", "wb") as filler:
            while True:
                filler.write(b"\0" * 4096)
                filler.flush()
        path = config(tmp_path, lab)
        row = _row("full state disk")
        proc = run_once(path)
        assert proc.returncode == 0, proc.stderr
        summary = json.loads(proc.stdout)
        assert summary["actions_applied"] == 0 and summary["actions_failed"] == len(baseline)
        changed = damage(lab, baseline)  # nothing is sent that the ledger could not record
        (state / "filler").unlink()
        reset_offline(path)
        lost = damage(lab, baseline)
        row.add(len(changed), len(changed - lost), len(lost))
        assert not changed and not lost
    finally:
        subprocess.run(["umount", str(state)], check=False)
    record(row)


def test_a_second_writer(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab, jobs=6)
    baseline = priorities(lab)
    path = config(tmp_path, lab, apply__mode="enforce")
    row = _row("second writer")
    proc = start(daemon_argv(path), tmp_path / "daemon.log")
    try:
        wait_for(lambda: _ticks(tmp_path / "daemon.log") >= 1, 120, "a tick")
        sock = tmp_path / "control.sock"
        before = sock.stat().st_ino
        once = run_once(path)
        assert once.returncode == 75 and "pid" in once.stderr, once.stderr
        second = subprocess.run(
            daemon_argv(path), capture_output=True, text=True, timeout=120, cwd=REPO, check=False
        )
        assert second.returncode == 75, second.stderr
        # The second one did not touch the first's socket: the same file, still answered by the first.
        assert sock.stat().st_ino == before
        assert request(sock, {"command": "status"}, timeout_s=30.0)["ok"]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    _check_reset(lab, path, baseline, row)
    record(row)
    assert row.changed > 0


def test_socket_clients_sending_garbage(clean_lab: SlurmLab, tmp_path: Path) -> None:
    lab = clean_lab
    fill_and_queue(lab, jobs=4)
    path = config(tmp_path, lab)
    payloads = [
        b"\x00\xff\xfe garbage\n",
        b"not json\n",
        b"[]\n",
        b'"a string"\n',
        b'{"command": 5}\n',
        b'{"command": "explain", "job_id": "x"}\n',
        b'{"command": "explain", "job_id": 1e400}\n',
        b'{"command": "explain"}\n',
        b'{"command": "reload-model", "path": 7}\n',
        b'{"command": "no-such-command"}\n',
        b'{"command": "status"' + b" " * (1 << 20) + b"}\n",  # 1 MiB: past the request limit
        b"{" * 100_000 + b"\n",
        b"",  # connect and hang up
    ]
    row = _row("socket clients sending garbage")
    proc = start(daemon_argv(path), tmp_path / "daemon.log")
    try:
        wait_for(
            lambda: (tmp_path / "control.sock").exists() and _ticks(tmp_path / "daemon.log") >= 1,
            120,
            "start",
        )
        for payload in payloads:
            reply = _raw(tmp_path / "control.sock", payload)
            if payload:
                assert reply.get("ok") is False and reply.get("error"), (payload[:40], reply)
            row.add(0, 0, 0)
        check = _ctl("status", "--check", "--config", str(path))
        assert check.returncode == 0, check.stderr
        assert proc.poll() is None
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    record(row)


def test_job_names_with_newlines_and_separators(clean_lab: SlurmLab, tmp_path: Path) -> None:
    """The text backend (a Slurm without JSON output) reads the same jobs as JSON, however they are named;
    an enforce tick on it writes only to real queued jobs, and reset undoes them."""
    from rltuned.daemon.config import load
    from rltuned.daemon.engine import Engine
    from rltuned.daemon.ledger import Ledger
    from rltuned.slurm.cli_backend import CliAdapter

    lab = clean_lab
    fill_and_queue(lab, jobs=3)
    names = ["evil\n99999|alice|main|1000000|", "a|b|c|d|e|f", "tab\there", "x\n\n", "%i %u"]
    for name in names:
        lab.sbatch("k80:1", minutes=5, user="bob", extra=["--job-name", name])
    baseline = priorities(lab)
    path = config(tmp_path, lab, apply__mode="enforce")
    adapter = CliAdapter(lab.conf, None, 3.0)
    adapter._text_mode = True
    row = _row("job names with newlines and separators")
    engine = Engine(load(path), adapter, None, Ledger.in_dir(tmp_path / "state"))
    report = engine.tick("enforce")
    assert report.decision is not None
    assert {j.job_id for j in report.decision.plan.jobs} == set(baseline)  # no forged rows, none lost
    _check_reset(lab, path, baseline, row)
    record(row)
    assert row.changed == len(baseline)


class _LastForBob(torch.nn.Module):
    """A policy that ranks the largest GPU request last, forever (bob's 4-GPU job is the only one)."""

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        return -obs[..., 2] * 1000.0  # column 2: the GPU request


def test_a_model_that_ranks_one_user_last_forever(clean_lab: SlurmLab, tmp_path: Path) -> None:
    """The guard bounds the user's wait: past `guard.max_wait_s` the job the model keeps last (SJF, the
    base, would run it first) is planned first and Slurm puts it at the top of the queue."""
    lab = clean_lab
    fill(lab)
    bob = lab.sbatch("p100:4", minutes=5, user="bob")  # short: first for SJF, last for the model
    submitted = time.time()
    time.sleep(8.0)
    others = queue(lab, 6)
    model = export_actor(_LastForBob(), tmp_path / "models" / "last", {"base": "sjf", "seed": 0})
    path = config(tmp_path, lab, policy__model=str(model), guard__max_wait_s=20.0)
    row = _row("a model that ranks one user last forever")
    first = run_once(path)
    assert first.returncode == 0, first.stderr
    assert time.time() < submitted + 20.0, "the first tick came too late to see the model's order"
    before = priorities(lab)
    assert min(before, key=lambda j: before[j]) == bob and json.loads(first.stdout)["guarded"] == {}
    time.sleep(max(0.0, submitted + 21.0 - time.time()))
    second = run_once(path)
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout)["guarded"] == {"max_wait": 1}
    after = priorities(lab)
    assert max(after, key=lambda j: after[j]) == bob  # first in Slurm's queue
    baseline = {j: p for j, p in after.items() if j in others or j == bob}
    changed = set(baseline)
    reset_offline(path)
    restored = priorities(lab)
    lost = {j for j in changed if restored[j] >= 1_000_000 or restored[j] == 0}  # still in rltuned's band
    row.add(len(changed), len(changed - lost), len(lost))
    row.notes.append("bob's job: last of 7 in Slurm's queue before the bound, first after it")
    record(row)
    assert not lost


def _ticks(log: Path) -> int:
    return sum(1 for e in events(log) if e.get("event") == "tick" and e.get("result") == "ok")


def _last_tick(log: Path) -> dict[str, object]:
    return [e for e in events(log) if e.get("event") == "tick"][-1]


def _ctl(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "rltuned.cli", *argv], capture_output=True, text=True,
                          timeout=120, check=False, cwd=REPO)  # fmt: skip


def _raw(sock_path: Path, payload: bytes) -> dict[str, object]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(sock_path))
        with contextlib.suppress(OSError):  # the daemon may answer and close before reading it all
            sock.sendall(payload)
            sock.shutdown(socket.SHUT_WR)
        if not payload:
            return {}
        data = b""
        with contextlib.suppress(OSError):
            while chunk := sock.recv(1 << 16):
                data += chunk
    return json.loads(data.splitlines()[0]) if data.strip() else {}
