"""The default backend: Slurm's own client commands, run as argv lists with timeouts, never through a shell.

Reads use `squeue --json` and `sinfo --json` (10 ms each on 22.05); a Slurm without the JSON plugins
falls back to pinned parsable text formats (`text.py`). `scontrol show node -d -o` is only read when
sinfo's JSON lacks GRES fields. Writes are `scontrol update jobid=N key=value ...`, one job per call so
that one failure says which job it was; stderr is classified into an `Outcome`.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from rltuned.errors import SlurmError
from rltuned.slurm.adapter import HistoryRead, Outcome, SlurmRead, UpdateResult

_GONE = (
    "invalid job id",
    "already completed",
    "already finished",
    "no longer pending",
    "job/step already completing or completed",
)
_DENIED = (
    "access/permission denied",
    "permission denied",
    "only a privileged user",
    "not authorized",
    "invalid user id",  # 22.05's answer to a non-Operator updating another user's job
)
_HELD = ("held",)
_NO_JSON = ("unrecognized option", "invalid option", "unknown option", "openapi", "data_parser", "serializer")


def classify(stderr: str) -> Outcome:
    """Map scontrol's complaint to an outcome (messages as Slurm 22.05 prints them)."""
    text = stderr.lower()
    if any(word in text for word in _GONE):
        return Outcome.GONE
    if any(word in text for word in _DENIED):
        return Outcome.DENIED
    if any(word in text for word in _HELD):
        return Outcome.HELD
    return Outcome.ERROR


_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None
PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """In the child before exec: killed with the daemon. A `scontrol update` that outlived a SIGKILLed
    daemon could land after a reset had undone what the ledger says it intended (tests/faults)."""
    if _LIBC is not None:
        _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class CliAdapter:
    """`SlurmAdapter` over squeue, sinfo and scontrol."""

    name = "cli"

    def __init__(
        self, conf: Path | None = None, bin_dir: Path | None = None, timeout_s: float = 10.0
    ) -> None:
        self.timeout_s = timeout_s
        self.bin_dir = bin_dir
        self.env = dict(os.environ)
        if conf is not None:
            self.env["SLURM_CONF"] = str(conf)
        self._text_mode = False

    # --- reading ------------------------------------------------------------------------------------

    def read(self) -> SlurmRead:
        durations: dict[str, float] = {}
        now = time.time()
        if not self._text_mode:
            try:
                squeue = self._json(["squeue", "--json"], durations)
                sinfo = self._json(["sinfo", "--json"], durations)
            except _NoJson:
                self._text_mode = True  # this Slurm has no JSON output; stay on text from now on
            else:
                scontrol = None
                if any("gres" not in n or "gres_used" not in n for n in _records(sinfo, "nodes")):
                    scontrol = self._run(["scontrol", "show", "node", "-d", "-o"], durations)
                return SlurmRead(squeue, sinfo, now, "json", scontrol, durations)
        return self._read_text(now, durations)

    def read_history(self, since: float) -> HistoryRead:
        from rltuned.slurm.history import SSHARE_ARGV, sacct_argv

        durations: dict[str, float] = {}
        sshare = self._run(list(SSHARE_ARGV), durations)
        sacct = self._run(list(sacct_argv(since)), durations)
        return HistoryRead(sshare, sacct, durations)

    def _read_text(self, now: float, durations: dict[str, float]) -> SlurmRead:
        from rltuned.slurm import text

        env = {**self.env, **text.TEXT_ENV}  # the time format the parser reads, whatever the user set
        jobs = self._run(list(text.SQUEUE_TEXT_ARGV), durations, "squeue", env)
        # after the main read: a job missing here has just ended, so an empty exclusion list is harmless
        excluded = self._run(list(text.SQUEUE_EXCLUDED_ARGV), durations, "squeue_excluded", env)
        nodes = self._run(list(text.SINFO_TEXT_ARGV), durations, "sinfo", env)
        return SlurmRead(
            text.squeue_document_from_text(jobs, excluded),
            text.sinfo_document_from_text(nodes),
            now,
            "text",
            None,
            durations,
        )

    def _json(self, argv: list[str], durations: dict[str, float]) -> Mapping[str, Any]:
        try:
            out = self._run(argv, durations)
        except SlurmError as exc:
            if any(word in str(exc).lower() for word in _NO_JSON):
                raise _NoJson from None
            raise
        try:
            doc = json.loads(out)
        except json.JSONDecodeError as exc:
            raise SlurmError(f"{argv[0]} --json printed invalid JSON ({exc})") from None
        if not isinstance(doc, dict):
            raise SlurmError(f"{argv[0]} --json printed {type(doc).__name__}, expected an object")
        return doc

    def _run(
        self,
        argv: Sequence[str],
        durations: dict[str, float],
        label: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> str:
        """stdout of a successful command; SlurmError (with stderr) for anything else."""
        proc, seconds = self._exec(argv, env)
        durations[label or argv[0]] = seconds
        if proc.returncode != 0:
            raise SlurmError(f"{' '.join(argv)} exited {proc.returncode}: {_one_line(proc.stderr)}")
        return proc.stdout

    def _exec(
        self, argv: Sequence[str], env: Mapping[str, str] | None = None
    ) -> tuple[subprocess.CompletedProcess[str], float]:
        command = [str(self.bin_dir / argv[0]) if self.bin_dir else argv[0], *argv[1:]]
        start = time.perf_counter()
        try:
            proc = subprocess.run(
                command,
                capture_output=True,
                text=True,
                timeout=self.timeout_s,
                env=dict(env or self.env),
                stdin=subprocess.DEVNULL,
                check=False,
                preexec_fn=_die_with_parent,
            )
        except subprocess.TimeoutExpired:
            raise SlurmError(
                f"{argv[0]} timed out after {self.timeout_s:g} s (slurmctld unreachable?)"
            ) from None
        except OSError as exc:
            raise SlurmError(f"cannot run {command[0]}: {exc.strerror or exc}") from None
        return proc, time.perf_counter() - start

    # --- writing ------------------------------------------------------------------------------------

    def update_job(self, job_id: int, fields: Mapping[str, str]) -> UpdateResult:
        return self._scontrol(["update", f"jobid={job_id}", *(f"{k}={v}" for k, v in fields.items())])

    def hold(self, job_id: int) -> UpdateResult:
        return self._scontrol(["hold", str(job_id)])

    def release(self, job_id: int) -> UpdateResult:
        return self._scontrol(["release", str(job_id)])

    def job_state(self, job_id: int) -> str | None:
        try:
            proc, _ = self._exec(["scontrol", "show", "job", "-o", str(job_id)])
        except SlurmError:
            return None
        if proc.returncode != 0:
            return None
        for word in proc.stdout.split():
            if word.startswith("JobState="):
                return word.removeprefix("JobState=")
        return None

    def ping(self) -> bool:
        """`scontrol ping`: one cheap RPC, asked while backing off to notice slurmctld coming back."""
        try:
            proc, _ = self._exec(["scontrol", "ping"])
        except SlurmError:
            return False
        return proc.returncode == 0 and " is UP" in proc.stdout

    def show_config(self) -> str:
        """`scontrol show config` text (for the start-up priority checks)."""
        return self.run(["scontrol", "show", "config"])

    def run(self, argv: Sequence[str]) -> str:
        """stdout of one Slurm command (or `runuser ... sbatch`) with this adapter's SLURM_CONF and
        timeout; `SlurmError` on failure (`rltunectl fidelity --submit` drives Slurm through this)."""
        return self._run(argv, {})

    def _scontrol(self, args: list[str]) -> UpdateResult:
        try:
            proc, seconds = self._exec(["scontrol", *args])
        except SlurmError as exc:
            return UpdateResult(Outcome.ERROR, str(exc))
        if proc.returncode == 0:
            return UpdateResult(Outcome.OK, "", seconds)
        message = _one_line(proc.stderr) or f"exit {proc.returncode}"
        return UpdateResult(classify(message), message, seconds)


class _NoJson(Exception):
    """This Slurm cannot print JSON."""


def _records(doc: Mapping[str, Any], key: str) -> list[Mapping[str, Any]]:
    records = doc.get(key)
    return [r for r in records if isinstance(r, Mapping)] if isinstance(records, list) else []


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]
