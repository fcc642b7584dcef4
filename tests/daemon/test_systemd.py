"""The systemd side: the unit passes `systemd-analyze verify`, READY=1 comes only after start-up, the
watchdog is fed, SIGHUP reloads config and model, and a reload with a bad config changes nothing."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "systemd" / "rltuned.service"
FIXTURES = REPO / "tests" / "fixtures" / "slurm"
MODELS = REPO / "models"


def unit_settings() -> dict[str, list[str]]:
    settings: dict[str, list[str]] = {}
    for line in UNIT.read_text().splitlines():
        if "=" in line and not line.startswith("#"):
            key, _, value = line.partition("=")
            settings.setdefault(key.strip(), []).append(value.strip())
    return settings


def test_the_unit_passes_systemd_analyze_verify(tmp_path: Path) -> None:
    analyze = shutil.which("systemd-analyze")
    assert analyze, "systemd-analyze is installed by scripts/setup.sh"
    binary = Path(sys.executable).with_name("rltuned")
    unit = tmp_path / "rltuned.service"
    unit.write_text(UNIT.read_text().replace("/opt/rltuned/bin/rltuned", str(binary)))
    proc = subprocess.run([analyze, "verify", str(unit)], capture_output=True, text=True, check=False)
    assert proc.returncode == 0 and proc.stderr.strip() == "", proc.stderr


def test_the_unit_is_a_notify_service_with_watchdog_reload_and_torch_safe_hardening() -> None:
    unit = unit_settings()
    assert unit["Type"] == ["notify"]
    assert unit["ExecReload"] == ["/bin/kill -HUP $MAINPID"]
    assert int(unit["WatchdogSec"][0]) >= 2 * 60  # twice a default tick, at least
    assert unit["User"] != ["root"]
    assert "MemoryDenyWriteExecute" not in unit  # PyTorch's oneDNN JIT needs W+X pages
    assert unit["NoNewPrivileges"] == ["yes"] and unit["ProtectSystem"] == ["strict"]


def test_the_unit_gives_numbas_cache_a_writable_directory() -> None:
    unit = unit_settings()
    assert unit["CacheDirectory"] == ["rltuned"]
    assert "NUMBA_CACHE_DIR=/var/cache/rltuned/numba" in unit["Environment"]


def test_the_daemons_kernels_load_from_a_read_only_install_only_with_a_cache_directory(
    tmp_path: Path,
) -> None:
    """ProtectSystem=strict and ProtectHome, as the unit runs it: the package and the home directory are
    read-only. numba then has nowhere to cache, and the import fails; NUMBA_CACHE_DIR (the unit's
    CacheDirectory) is what makes it load, with the actor compiled."""
    unshare = shutil.which("unshare")
    if unshare is None or os.geteuid() != 0:
        pytest.skip("needs unshare and root for a read-only bind mount")
    package = REPO / "rltuned"
    script = (
        "from rltuned.daemon import service; from rltuned.rl.export import load_model; "
        f"print(load_model({str(MODELS / 'philly-fcfs-bsld-ticks')!r}).engine)"
    )
    mount = f"mount --bind {package} {package} && mount -o remount,ro,bind {package}"
    unwritable = {"HOME": str(package / "home"), "XDG_CACHE_HOME": str(package / "cache")}
    outcomes = {}
    for cache in (None, tmp_path / "numba"):
        env = {k: v for k, v in os.environ.items() if k != "NUMBA_CACHE_DIR"} | unwritable
        if cache is not None:
            env["NUMBA_CACHE_DIR"] = str(cache)
        run = subprocess.run(
            [unshare, "-m", "sh", "-c", f'{mount} && exec "$0" -c "$1"', sys.executable, script],
            capture_output=True, text=True, env=env, cwd=REPO, timeout=120, check=False,
        )  # fmt: skip
        if "mount" in run.stderr and run.returncode != 0 and "numba" not in run.stderr:
            pytest.skip(f"no bind mount here: {run.stderr.strip()[:200]}")
        outcomes[cache is not None] = (run.returncode, run.stdout.strip(), run.stderr)
    assert outcomes[False][0] != 0 and "no locator available" in outcomes[False][2]
    assert outcomes[True][:2] == (0, "compiled"), outcomes[True][2][-500:]


def fake_slurm(bin_dir: Path, delay_s: float = 0.0) -> None:
    bin_dir.mkdir()
    scripts = {
        "squeue": f"sleep {delay_s}; cat {FIXTURES / 'squeue.json'}",
        "sinfo": f"cat {FIXTURES / 'sinfo.json'}",
        "scontrol": "exit 0",
    }
    for name, body in scripts.items():
        path = bin_dir / name
        path.write_text(f"#!/bin/sh\n{body}\n")
        path.chmod(0o755)


def write_config(path: Path, tmp_path: Path, model: Path | None, interval: float = 0.5) -> None:
    model_line = (f'model = "{model}"\n' if model else "") + f'model_dirs = ["{tmp_path}"]\n'
    path.write_text(
        f'[slurm]\nbin_dir = "{tmp_path / "bin"}"\n[policy]\n{model_line}'
        f'[daemon]\ninterval_s = {interval}\nstate_dir = "{tmp_path / "state"}"\n'
        f'[control]\nsocket = "{tmp_path / "ctl.sock"}"\n'
        '[metrics]\naddress = "127.0.0.1"\nport = 0\n[log]\nformat = "json"\n'
    )


class Notifications:
    """A NOTIFY_SOCKET like systemd's: collects the datagrams the daemon sends."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(str(path))
        self.sock.settimeout(0.2)
        self.seen: list[str] = []

    def wait_for(self, text: str, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if any(text in m for m in self.seen):
                return
            try:
                self.seen.append(self.sock.recv(4096).decode())
            except TimeoutError:
                continue
        raise AssertionError(f"no {text!r} within {timeout} s; got {self.seen}")


@pytest.fixture
def daemon(tmp_path: Path):  # type: ignore[no-untyped-def]
    fake_slurm(tmp_path / "bin", delay_s=1.0)
    config = tmp_path / "rltuned.toml"
    write_config(config, tmp_path, MODELS / "philly-fcfs-bsld-ticks")
    notify = Notifications(tmp_path / "notify.sock")
    log = (tmp_path / "daemon.log").open("w")
    proc = subprocess.Popen(
        [sys.executable, "-m", "rltuned.daemon_cli", "--config", str(config)],
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "NOTIFY_SOCKET": str(notify.path), "WATCHDOG_USEC": "1000000"},
    )
    yield proc, notify, config, tmp_path / "daemon.log"
    if proc.poll() is None:
        proc.terminate()
        proc.wait(timeout=30)
    log.close()


def events(log: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in log.read_text().splitlines() if line.startswith("{")]


def test_ready_comes_after_the_first_snapshot_and_the_watchdog_is_fed(daemon) -> None:  # type: ignore[no-untyped-def]
    proc, notify, _config, log = daemon
    notify.wait_for("READY=1", 60)
    seen = events(log)
    names = [e["event"] for e in seen]
    assert names.index("model_loaded") < names.index("first_snapshot")  # READY only after both
    port = next(e["port"] for e in seen if e["event"] == "metrics_listening")  # ... and the metrics
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as response:
        assert b"rltuned_model_info" in response.read()
    notify.wait_for("WATCHDOG=1", 10)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    notify.wait_for("STOPPING=1", 5)


def test_sighup_reloads_the_config_and_its_model_and_a_bad_config_changes_nothing(daemon) -> None:  # type: ignore[no-untyped-def]
    proc, notify, config, log = daemon
    notify.wait_for("READY=1", 60)
    config.write_text(config.read_text().replace("philly-fcfs-bsld-ticks", "itp-fcfs-bsld-ticks"))
    proc.send_signal(signal.SIGHUP)
    notify.wait_for("RELOADING=1", 20)
    deadline = time.monotonic() + 30
    while not any(e["event"] == "model_reloaded" for e in events(log)):
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.2)
    reloaded = next(e for e in events(log) if e["event"] == "model_reloaded")
    assert "itp-fcfs-bsld-ticks" in str(reloaded["path"])
    config.write_text(config.read_text() + "[apply]\nmoda = 1\n")
    proc.send_signal(signal.SIGHUP)
    deadline = time.monotonic() + 30
    while not any(e["event"] == "reload_failed" for e in events(log)):
        assert time.monotonic() < deadline, log.read_text()[-2000:]
        time.sleep(0.2)
    failed = next(e for e in events(log) if e["event"] == "reload_failed")
    assert "apply.moda: unknown key" in str(failed["error"])
    assert proc.poll() is None  # still running, still on the ITP model
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert [e["event"] for e in events(log)].count("model_reloaded") == 1


def rltunectl(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rltuned.cli", *argv], capture_output=True, text=True, timeout=60, check=False
    )


def test_rltunectl_talks_to_the_running_daemon_and_a_bad_reload_keeps_the_model(
    daemon, tmp_path: Path
) -> None:  # type: ignore[no-untyped-def]
    _proc, notify, config, _log = daemon
    notify.wait_for("READY=1", 60)
    status = rltunectl("status", "--config", str(config), "--json")
    assert status.returncode == 0, status.stderr
    assert "philly-fcfs-bsld-ticks" in json.loads(status.stdout)["model"]
    healthy = rltunectl("status", "--check", "--config", str(config))
    assert healthy.returncode == 0 and "healthy: True" in healthy.stdout, healthy.stderr
    bad = tmp_path / "bad-model"
    bad.mkdir()
    (bad / "manifest.json").write_text("{}")
    (bad / "actor.pt").write_bytes(b"not torchscript")
    reload = rltunectl("reload-model", str(bad), "--config", str(config))
    assert reload.returncode == 1
    assert reload.stderr.count("\n") == 1 and "schema_version" in reload.stderr
    assert (
        "philly-fcfs-bsld-ticks"
        in json.loads(rltunectl("status", "--config", str(config), "--json").stdout)["model"]
    )
    good = rltunectl("reload-model", str(MODELS / "itp-fcfs-bsld-ticks"), "--config", str(config))
    assert good.returncode == 0, good.stderr
    assert (
        "itp-fcfs-bsld-ticks"
        in json.loads(rltunectl("status", "--config", str(config), "--json").stdout)["model"]
    )
    plan = rltunectl("plan", "--config", str(config))
    assert plan.returncode == 0 and "daemon (shadow)" in plan.stdout
    assert plan.stdout.splitlines()[1].split()[:3] == ["JOB", "USER", "PARTITION"]
    assert rltunectl("pause", "--config", str(config)).returncode == 0
    assert json.loads(rltunectl("status", "--config", str(config), "--json").stdout)["paused"] is True


def allowed_syscalls(group: str) -> set[str]:
    """A systemd syscall group, sub-groups expanded, as this machine's systemd defines it."""
    listing = subprocess.run(
        ["systemd-analyze", "syscall-filter"], capture_output=True, text=True, check=True
    ).stdout
    groups: dict[str, list[str]] = {}
    current = ""
    for line in listing.splitlines():
        if line.startswith("@"):
            current = line.strip()
            groups[current] = []
        elif line.strip() and not line.strip().startswith("#") and current:
            groups[current].append(line.strip())

    def expand(name: str, seen: set[str]) -> set[str]:
        out: set[str] = set()
        for member in groups.get(name, []):
            if member.startswith("@") and member not in seen:
                out |= expand(member, seen | {member})
            elif not member.startswith("@"):
                out.add(member)
        return out

    return expand(group, {group})


@pytest.mark.slow
@pytest.mark.skipif(not shutil.which("strace"), reason="strace is installed by scripts/setup.sh")
def test_every_syscall_of_a_running_daemon_is_in_the_units_filter(tmp_path: Path) -> None:
    """SystemCallFilter=@system-service kills the daemon on any other syscall: record every syscall of
    a daemon (torch model, GLPK MILP, control socket, metrics server, SIGHUP reload, SIGTERM) under
    strace, as systemd-run cannot start a unit here."""
    unit = unit_settings()
    assert unit["SystemCallFilter"] == ["@system-service"]
    fake_slurm(tmp_path / "bin", delay_s=0.2)
    config = tmp_path / "rltuned.toml"
    write_config(config, tmp_path, MODELS / "philly-fcfs-bsld-ticks")
    notify = Notifications(tmp_path / "notify.sock")
    trace = tmp_path / "strace.txt"
    with (tmp_path / "daemon.log").open("w") as log:
        tracer = subprocess.Popen(
            ["strace", "-f", "-qq", "-o", str(trace), sys.executable, "-m", "rltuned.daemon_cli",
             "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "NOTIFY_SOCKET": str(notify.path)},
        )  # fmt: skip
        try:
            notify.wait_for("READY=1", 240)
            assert rltunectl("status", "--check", "--config", str(config)).returncode == 0
            assert rltunectl("plan", "--config", str(config)).returncode == 0
            port = next(
                e["port"] for e in events(tmp_path / "daemon.log") if e["event"] == "metrics_listening"
            )
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
                assert b"rltuned_ticks_total" in response.read()
            daemon_pid = int(subprocess.run(["pgrep", "-P", str(tracer.pid)], capture_output=True,
                                            text=True, check=True).stdout.split()[0])  # fmt: skip
            notify.seen.clear()  # start-up's READY=1 must not stand for the reload's
            os.kill(daemon_pid, signal.SIGHUP)
            notify.wait_for("RELOADING=1", 60)
            notify.wait_for("READY=1", 60)  # the reload is done: its syscalls are in the trace
            os.kill(daemon_pid, signal.SIGTERM)
            assert tracer.wait(timeout=240) == 0
        finally:
            if tracer.poll() is None:
                tracer.kill()
    used = {m.group(1) for line in trace.read_text().splitlines() if (m := re.match(r"\d+ +(\w+)\(", line))}
    assert {"mmap", "futex", "sendto", "accept4"} <= used  # a real trace, threads and sockets included
    outside = used - allowed_syscalls("@system-service")
    assert not outside, f"syscalls the unit's filter would refuse: {sorted(outside)}"
