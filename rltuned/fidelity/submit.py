"""`rltunectl fidelity --submit`: a trace window, time-compressed, run on a real Slurm and then compared.

The window's arrivals are squeezed into `span_s` seconds, and every runtime is divided by the same factor
and clamped to [`min_runtime_s`, `max_runtime_s`] (a `sleep` that long). GPU counts are capped at the
largest node of the partition, so no job asks one node for more GPUs than it has (a batch job with
`--gres=gpu:G` gets one node). Time limits keep the job's over-estimate (limit / runtime) on the lab
runtime, at least that runtime plus a second, in whole minutes as Slurm holds them. Trace users map
onto the chosen users in order of first appearance. Each job goes in with `sbatch` at its compressed
time, as its user (`runuser` when run as root), to the chosen partition; when all are done their
`sacct` lines, the Slurm's `scontrol show config` and `sinfo --json` are saved, and the first mode
compares them with the simulator.

Slurm is driven through `Commands`, so the sequencing can be tested without one; the CLI passes the real
commands and the tests also run it against the lab (tests/fidelity/test_fidelity_lab.py).
"""

from __future__ import annotations

import getpass
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from rltuned.domain import Job
from rltuned.errors import SlurmError, UsageError

SACCT_FIELDS = "JobID,User,Account,Partition,Submit,Start,End,NodeList,Timelimit,AllocTRES,ReqTRES,State"
FINISHED = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED")
COMMAND_TIMEOUT_S = 30.0


@dataclass(frozen=True, slots=True)
class LabJob:
    """One job as submitted: `offset_s` after the first submit."""

    offset_s: float
    user: str
    gpus: int
    runtime_s: int
    limit_min: int
    name: str


def compress(
    jobs: Sequence[Job],
    users: Sequence[str],
    largest_gpus: int,
    span_s: float = 60.0,
    min_runtime_s: int = 5,
    max_runtime_s: int = 60,
) -> list[LabJob]:
    if not jobs:
        raise UsageError("the window has no jobs")
    if not users:
        raise UsageError("expected at least one user to submit as")
    if span_s <= 0 or not 1 <= min_runtime_s <= max_runtime_s:
        raise UsageError("expected span_s > 0 and 1 <= min_runtime_s <= max_runtime_s")
    t0 = min(j.submit for j in jobs)
    factor = max((max(j.submit for j in jobs) - t0) / span_s, 1e-9)
    owner: dict[str, str] = {}
    out = []
    for job in sorted(jobs, key=lambda j: (j.submit, j.id)):
        runtime = job.runtime if job.runtime is not None else job.estimate
        seconds = int(min(max(round(runtime / factor), min_runtime_s), max_runtime_s))
        over = job.time_limit / runtime if job.time_limit is not None and runtime > 0 else 1.0
        limit_min = max(1, math.ceil(max(seconds * over, seconds + 1) / 60.0))
        user = owner.setdefault(job.user, users[len(owner) % len(users)])
        out.append(
            LabJob(
                offset_s=(job.submit - t0) / factor,
                user=user,
                gpus=max(1, min(job.gpus, largest_gpus)),
                runtime_s=seconds,
                limit_min=limit_min,
                name=f"fid-{job.name or job.id}",
            )
        )
    return out


def demand_ratio(lab_jobs: Sequence[LabJob], total_gpus: int) -> float:
    """GPU-seconds asked for over GPU-seconds the cluster offers while jobs arrive: how contended."""
    span = max((j.offset_s for j in lab_jobs), default=0.0) or 1.0
    return sum(j.gpus * j.runtime_s for j in lab_jobs) / (total_gpus * span)


@dataclass(frozen=True)
class Commands:
    """How Slurm is reached: argv prefixes (e.g. a different SLURM_CONF is the caller's environment)."""

    run: Callable[[list[str]], str]
    """Runs argv, returns stdout; raises SlurmError on failure."""
    as_root: bool

    @staticmethod
    def real(conf: Path | None = None) -> Commands:
        """Slurm's commands as the daemon runs them (`CliAdapter.run`), with `SLURM_CONF=conf` when given
        (else the caller's environment)."""
        import os

        from rltuned.slurm.cli_backend import CliAdapter

        return Commands(CliAdapter(conf, timeout_s=COMMAND_TIMEOUT_S).run, os.geteuid() == 0)


def sbatch_argv(job: LabJob, partition: str, as_root: bool) -> list[str]:
    argv = [
        "sbatch", "--parsable", "-p", partition, "-N", "1", "-n", "1", "-c", "1",
        f"--gres=gpu:{job.gpus}", "-t", str(job.limit_min), "-J", job.name,
        "--chdir=/tmp", "-o", "/dev/null", "-e", "/dev/null", "--wrap", f"sleep {job.runtime_s}",
    ]  # fmt: skip
    if job.user != getpass.getuser():
        if not as_root:
            raise UsageError(f"submitting as {job.user} needs root (runuser); run as root or pass --users")
        argv = ["runuser", "-u", job.user, "--", *argv]
    return argv


def submit_all(
    lab_jobs: Sequence[LabJob],
    partition: str,
    commands: Commands,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[int]:
    """Each job at its offset from now; returns Slurm's job ids in submit order."""
    start = clock()
    ids = []
    for job in lab_jobs:
        delay = start + job.offset_s - clock()
        if delay > 0:
            sleep(delay)
        out = commands.run(sbatch_argv(job, partition, commands.as_root)).strip()
        try:
            ids.append(int(out.split(";")[0]))
        except ValueError:
            raise SlurmError(f"sbatch printed {out!r}, expected a job id") from None
    return ids


def wait_finished(
    ids: Sequence[int],
    commands: Commands,
    timeout_s: float,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """Poll sacct until every job has finished (and slurmdbd has its end); returns that sacct text."""
    deadline = clock() + timeout_s
    argv = ["sacct", "-X", "-P", "-o", SACCT_FIELDS, "-j", ",".join(map(str, ids))]
    while True:
        text = commands.run(argv)
        states = _states(text)
        if len(states) == len(ids) and all(s.startswith(FINISHED) for s in states.values()):
            return text
        if clock() > deadline:
            waiting = sorted(i for i in ids if not states.get(i, "").startswith(FINISHED))
            raise SlurmError(f"{len(waiting)} job(s) not finished after {timeout_s:.0f} s: {waiting[:10]}")
        sleep(1.0)


def _states(text: str) -> dict[int, str]:
    lines = text.strip().splitlines()
    if not lines:
        return {}
    header = lines[0].split("|")
    jid, state = header.index("JobID"), header.index("State")
    out = {}
    for line in lines[1:]:
        row = line.split("|")
        if len(row) == len(header) and row[jid].isdigit():
            out[int(row[jid])] = row[state]
    return out


def save_slurm(out: Path, sacct_text: str, commands: Commands) -> tuple[Path, Path, Path]:
    """sacct.txt, show-config.txt and sinfo.json in `out`."""
    out.mkdir(parents=True, exist_ok=True)
    sacct = out / "sacct.txt"
    sacct.write_text(sacct_text, encoding="utf-8")
    config = out / "show-config.txt"
    config.write_text(commands.run(["scontrol", "show", "config"]), encoding="utf-8")
    sinfo = out / "sinfo.json"
    sinfo.write_text(commands.run(["sinfo", "--json"]), encoding="utf-8")
    return sacct, config, sinfo
