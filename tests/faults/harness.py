"""What every fault-injection test shares: a queue that pends on the real lab, the daemon run as a
process, and the ledger of what a fault did to Slurm (changes made, restored by `reset`, lost).

"Changed" and "lost" are read from Slurm itself, never from rltuned's own ledger: a job is changed when
its priority is no longer the one multifactor gave it, and lost when that is still so after `reset`
(or when reset left it held).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from tests.slurm_lab import SlurmLab, daemon_config

REPO = Path(__file__).resolve().parents[2]
MODEL = REPO / "models" / "philly-sjf-bsld"
REPORT = Path(os.environ.get("RLTUNED_FAULTS_REPORT", REPO / ".cache" / "faults.json"))
"""Where the suite's rows go (`scripts/reliability_table.py` renders docs/reliability.md's table)."""


@dataclass
class FaultRow:
    fault: str
    injected: str
    runs: int = 0
    changed: int = 0
    restored: int = 0
    lost: int = 0
    notes: list[str] = field(default_factory=list)

    def add(self, changed: int, restored: int, lost: int) -> None:
        self.runs += 1
        self.changed += changed
        self.restored += restored
        self.lost += lost


def record(row: FaultRow) -> None:
    """Append one fault's row to the report (rows of an earlier session's run are replaced)."""
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    rows = json.loads(REPORT.read_text()) if REPORT.exists() else {}
    rows[row.fault] = asdict(row) | {"at": time.strftime("%Y-%m-%d %H:%M:%S")}
    REPORT.write_text(json.dumps(rows, indent=1, sort_keys=True) + "\n")


def config(tmp_path: Path, lab: SlurmLab, **overrides: Any) -> Path:
    """The lab's daemon config with placement levers off and unpaced writes (a fault test paces its own)."""
    defaults = {"placement__steer_untyped": False, "apply__writes_per_s": 0.0}
    return daemon_config(tmp_path, lab, **{**defaults, **overrides})


def pending(lab: SlurmLab) -> dict[int, dict[str, Any]]:
    return {j["job_id"]: j for j in lab.squeue_json()["jobs"] if j["job_state"] == "PENDING"}


def priorities(lab: SlurmLab) -> dict[int, int]:
    return {job_id: int(j["priority"]) for job_id, j in pending(lab).items()}


def fill(lab: SlurmLab) -> None:
    """Blockers on every GPU, so that every job submitted next pends."""
    shapes = ("p100:4", "p100:4", "k80:2", "k80:2", "m40:1")
    blockers = [lab.sbatch(g, minutes=60, user="carol") for g in shapes]
    for job_id in blockers:
        lab.wait_state(job_id, "RUNNING")


def queue(lab: SlurmLab, jobs: int) -> list[int]:
    """`jobs` pending GPU jobs of three users, each shorter than the one before, so that SJF reverses
    FIFO and every job gets a write."""
    users = ("alice", "bob", "carol")
    gres = ("p100:2", "k80:1", "p100:1", "2")
    return [lab.sbatch(gres[i % 4], minutes=59 - i, user=users[i % 3]) for i in range(jobs)]


def fill_and_queue(lab: SlurmLab, jobs: int = 12) -> list[int]:
    fill(lab)
    return queue(lab, jobs)


def damage(lab: SlurmLab, baseline: dict[int, int]) -> set[int]:
    """Jobs whose priority is no longer multifactor's, or that are held: what a fault left behind."""
    out: set[int] = set()
    for job_id, job in pending(lab).items():
        held = "Held" in str(job["state_reason"])
        if job_id in baseline and (int(job["priority"]) != baseline[job_id] or held):
            out.add(job_id)
    return out


def daemon_argv(path: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "rltuned.daemon_cli", "--config", str(path), *extra]


def run_once(path: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        daemon_argv(path, "--once", "--mode", "enforce", *extra),
        capture_output=True, text=True, timeout=180, check=False, cwd=REPO,
    )  # fmt: skip


def start(argv: list[str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(argv, stdout=log.open("wb"), stderr=subprocess.STDOUT, cwd=REPO)


def wait_for(done: Any, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(0.02)


def events(log: Path) -> Iterator[dict[str, Any]]:
    for line in log.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                yield json.loads(line)
            except ValueError:
                continue


def kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)


def reset_offline(path: Path) -> str:
    """`rltunectl reset` as an admin runs it with no daemon answering (in-process: the same code path)."""
    from rltuned.daemon.ctl import reset

    return reset(path)
