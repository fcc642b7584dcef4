"""A real local Slurm 22.05 lab for tests, driven through ``scripts/slurm-lab`` (fixtures in conftest.py).

``lab_session()`` brings a fresh lab up in a unique directory under /tmp and tears it down afterwards;
``SlurmLab`` wraps the Slurm client commands the tests need. Needs root (apt-get, munged, slurmctld).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "scripts" / "slurm-lab"
SKIP_ENV = "RLTUNE_LAB_SKIP"  # not RLTUNED_: the config rejects unknown RLTUNED_ variables
USABLE = frozenset({"idle", "mix", "alloc"})


class SlurmLabError(RuntimeError):
    """The lab could not be brought up, or a Slurm command failed or timed out."""


def slurm_skipped() -> bool:
    """True when the user asked to skip the Slurm lab tests (``RLTUNE_LAB_SKIP=1``)."""
    return os.environ.get(SKIP_ENV) == "1"


def _free_ports(count: int, start: int) -> int:
    """The first port from `start` where `count` consecutive ports are free (a lab may already run)."""
    port = start
    while True:
        taken = False
        for p in range(port, port + count):
            with socket.socket() as probe:
                if probe.connect_ex(("127.0.0.1", p)) == 0:
                    taken = True
                    break
        if not taken:
            return port
        port += count + 1


PORTS = {
    "SLURM_LAB_CTLD_PORT": (1, 6817),
    "SLURM_LAB_NODE_PORT0": (8, 17001),  # one per node
    "SLURM_LAB_DBD_PORT": (1, 16819),
    "SLURM_LAB_DB_PORT": (1, 13306),
}
"""Each port knob of scripts/slurm-lab: how many consecutive ports it takes, and where the search starts."""

TEST_ENV = {"SLURM_LAB_PRIO_AGE": "0", "SLURM_LAB_PRIO_FAIRSHARE": "0"}
"""What the session lab sets beyond the script's defaults. Age and fair-share weights stay 0 so that every
new job gets the same priority (1000, the partition's) and a pending job keeps it: the daemon and fault
tests compare priorities before and after, and the decay thread would otherwise move them every
PriorityCalcPeriod as usage accrues. Accounting itself (slurmdbd, sacct, sshare, the Operator) stays on."""


def _ports_env(lab_dir: Path) -> dict[str, str]:
    """Ports chosen when the lab was first brought up, kept in the lab directory for later commands."""
    saved = lab_dir / "ports.json"
    if not lab_dir.exists():  # purged: nothing to remember the ports in
        return {}
    if not saved.exists():
        saved.write_text(json.dumps({knob: str(_free_ports(n, start)) for knob, (n, start) in PORTS.items()}))
    ports: dict[str, str] = json.loads(saved.read_text())
    return ports


def _script(
    command: str, lab_dir: Path, timeout: float = 300.0, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, **(env or {}), "SLURM_LAB_DIR": str(lab_dir), **_ports_env(lab_dir)}
    return subprocess.run(
        [str(SCRIPT), command], env=full_env, text=True, capture_output=True, timeout=timeout, check=False
    )


def alive(pid: int) -> bool:
    """True while the process exists and is not a zombie."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[-1][:1] != "Z"


class SlurmLab:
    """A running lab: its directory, its slurm.conf and helpers around the Slurm client commands."""

    def __init__(self, lab_dir: Path) -> None:
        self.dir = lab_dir
        self.conf = lab_dir / "etc" / "slurm.conf"
        self.env: dict[str, str] = {**os.environ, "SLURM_CONF": str(self.conf)}
        self.nodes: list[str] = re.findall(r"^NodeName=(\S+)", self.conf.read_text(), flags=re.M)

    def run(
        self, argv: list[str], user: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        """Run a Slurm client command against the lab, as ``user`` (through runuser) when given."""
        cmd = argv if user is None else ["runuser", "-u", user, "--", "env", f"SLURM_CONF={self.conf}", *argv]
        try:
            proc = subprocess.run(
                cmd, env=self.env, cwd=self.dir, text=True, capture_output=True, timeout=30, check=False
            )
        except subprocess.TimeoutExpired as exc:
            raise SlurmLabError(f"{cmd} timed out after 30 s") from exc
        if check and proc.returncode != 0:
            raise SlurmLabError(f"{cmd} failed: expected exit code 0, got {proc.returncode}: {proc.stderr}")
        return proc

    @contextlib.contextmanager
    def reconfigured(self, **settings: str) -> Iterator[None]:
        """slurm.conf with these `Key=value` lines replaced (or added), applied by `scontrol reconfigure`
        for the duration of the block, then the original file and settings back."""
        original = self.conf.read_text()
        text = original
        for key, value in settings.items():
            line = f"{key}={value}"
            text, found = re.subn(rf"^{key}=.*$", line, text, flags=re.M)
            if not found:
                text += line + "\n"
        self.conf.write_text(text)
        try:
            self.run(["scontrol", "reconfigure"])
            self.wait_usable()
            yield
        finally:
            self.conf.write_text(original)
            self.run(["scontrol", "reconfigure"])
            self.wait_usable()

    def sbatch(
        self,
        gpus: str | None,
        minutes: int = 10,
        user: str | None = None,
        partition: str | None = None,
        extra: Sequence[str] = (),
        sleep: int = 600,
    ) -> int:
        """Submit ``sleep N`` asking for ``--gres=gpu:<gpus>`` (e.g. "p100:2" or "2"); return the job id."""
        argv = ["sbatch", "--parsable", "-t", str(minutes), "-o", "/dev/null"]
        if gpus is not None:
            argv.append(f"--gres=gpu:{gpus}")
        if partition is not None:
            argv += ["-p", partition]
        argv += [*extra, "--wrap", f"sleep {sleep}"]
        return int(self.run(argv, user=user).stdout.strip().split(";")[0])

    def job_ids(self) -> list[int]:
        """Every job the controller still lists, in any state."""
        return [int(line) for line in self.run(["squeue", "-h", "-o", "%A"]).stdout.split()]

    def cancel_all(self, timeout: float = 30.0) -> None:
        """Cancel every job and wait until squeue is empty."""
        ids = self.job_ids()
        if ids:
            self.run(["scancel", *map(str, ids)], check=False)
        self._poll(lambda: not self.job_ids(), timeout, "the queue to empty")

    def node_states(self) -> dict[str, str]:
        """Compact node states by name (``idle``, ``mix``, ``alloc``, ``unk*`` ...)."""
        out = self.run(["sinfo", "-h", "-N", "-o", "%N %t"], check=False).stdout
        states: dict[str, str] = {}
        for line in out.splitlines():
            name, _, state = line.partition(" ")
            states[name] = state.strip()
        return states

    def wait_idle(self, timeout: float = 30.0) -> None:
        """Wait until every node of the lab is idle."""
        self._poll(lambda: self._nodes_in({"idle"}), timeout, "every node to be idle")

    def wait_usable(self, timeout: float = 30.0) -> None:
        """Wait until every node responds (idle, mixed or allocated)."""
        self._poll(lambda: self._nodes_in(USABLE), timeout, "every node to respond")

    def stop_controller(self, timeout: float = 15.0) -> None:
        """Stop slurmctld only (SIGTERM, saving its state); slurmds and running jobs stay."""
        pid = int((self.dir / "run" / "slurmctld.pid").read_text())
        if not alive(pid):
            raise SlurmLabError(f"slurmctld (pid {pid}) is not running")
        os.kill(pid, signal.SIGTERM)
        try:
            self._poll(lambda: not alive(pid), timeout, "slurmctld to exit")
        except SlurmLabError:
            os.kill(pid, signal.SIGKILL)
            raise

    def start_controller(self, timeout: float = 30.0) -> None:
        """Restart slurmctld on its saved state and wait until every node responds again."""
        proc = _script("up", self.dir, timeout=timeout + 30)
        if proc.returncode != 0:
            raise SlurmLabError(f"slurm-lab up (restart slurmctld) failed:\n{proc.stderr}")
        self.wait_usable(timeout)

    def script(self, command: str, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``scripts/slurm-lab <command>`` for this lab (status, env, down ...)."""
        return _script(command, self.dir, timeout=timeout)

    def wait_for(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        """Poll ``done`` every 0.1 s until it is true; SlurmLabError after ``timeout`` seconds."""
        self._poll(done, timeout, what)

    def squeue_json(self) -> dict[str, Any]:
        """``squeue --json`` (every job; 22.05 ignores -t and -u there)."""
        data: dict[str, Any] = json.loads(self.run(["squeue", "--json"]).stdout)
        return data

    def sinfo_json(self) -> dict[str, Any]:
        """``sinfo --json`` (``nodes[]`` with name, state, gres, gres_used, partitions ...)."""
        data: dict[str, Any] = json.loads(self.run(["sinfo", "--json"]).stdout)
        return data

    def job_field(self, job_id: int, field: str) -> str:
        """One ``Key=value`` field of ``scontrol show job -o`` (values with spaces are cut at the space)."""
        out = self.run(["scontrol", "show", "job", "-o", str(job_id)]).stdout
        match = re.search(rf"(?:^|\s){re.escape(field)}=(\S*)", out)
        if match is None:
            raise SlurmLabError(f"job {job_id}: expected a {field}= field, got {out!r}")
        return match.group(1)

    def wait_state(self, job_id: int, state: str, timeout: float = 15.0) -> None:
        """Wait until the job's JobState is ``state`` (e.g. RUNNING, PENDING)."""
        self._poll(lambda: self.job_field(job_id, "JobState") == state, timeout, f"job {job_id} {state}")

    def _nodes_in(self, states: set[str] | frozenset[str]) -> bool:
        current = self.node_states()
        return all(current.get(node) in states for node in self.nodes)

    def _poll(self, done: Callable[[], bool], timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not done():
            if time.monotonic() > deadline:
                raise SlurmLabError(f"timed out after {timeout:g} s waiting for {what}")
            time.sleep(0.1)


@contextlib.contextmanager
def lab_session(env: dict[str, str] | None = None) -> Iterator[SlurmLab]:
    """Bring a fresh lab up in a unique /tmp directory, yield it, then bring it down and remove it.

    `env` sets scripts/slurm-lab knobs for this lab; by default TEST_ENV (deterministic priorities)."""
    if os.geteuid() != 0:
        raise SlurmLabError(
            f"the Slurm lab needs root (apt-get, munged, slurmctld); run the tests as root, "
            f"or set {SKIP_ENV}=1 to skip the tests marked 'slurm'"
        )
    # mkdtemp makes a 0700 directory; lab users (alice, ...) must reach slurm.conf and the munge socket.
    lab_dir = Path(tempfile.mkdtemp(prefix="rltuned-slurm-lab-", dir="/tmp"))
    lab_dir.chmod(0o755)
    try:
        proc = _script("up", lab_dir, env=TEST_ENV if env is None else env)
        if proc.returncode != 0:
            raise SlurmLabError(
                f"scripts/slurm-lab up failed (exit code {proc.returncode}):\n{proc.stderr}{proc.stdout}"
            )
        yield SlurmLab(lab_dir)
    finally:
        _script("down", lab_dir, timeout=120)
        shutil.rmtree(lab_dir, ignore_errors=True)


def daemon_config(tmp_path: Path, lab: SlurmLab, **overrides: Any) -> Path:
    """A daemon config file for the lab (shadow mode, SJF, one-second ticks, the `sla` partition
    exempt, no metrics server); `section__key=value` overrides or adds a setting."""
    sections: dict[str, dict[str, Any]] = {
        "slurm": {"conf": str(lab.conf), "exempt_partitions": ["sla"], "command_timeout_s": 3.0},
        "policy": {"base": "sjf"},
        "placement": {"oversubscribe": False},
        "apply": {"mode": "shadow"},
        "daemon": {"state_dir": str(tmp_path / "state"), "interval_s": 1.0, "backoff_max_s": 2.0},
        "control": {"socket": str(tmp_path / "control.sock")},
        "metrics": {"enabled": False},
    }
    for key, value in overrides.items():
        section, _, name = key.partition("__")
        sections.setdefault(section, {})[name] = value
    lines: list[str] = []
    for section, values in sections.items():
        lines.append(f"[{section}]")
        lines += [f"{k} = {json.dumps(v)}" for k, v in values.items()]
    path = tmp_path / "rltuned.toml"
    path.write_text("\n".join(lines) + "\n")
    return path
