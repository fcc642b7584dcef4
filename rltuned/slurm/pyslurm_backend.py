"""An optional `SlurmAdapter` over pyslurm 22.5.x, for sites that already build it against their Slurm.

Not the default: PyPI has no pyslurm for 22.05 and building it takes minutes (shared README, section
6), so pyslurm is imported only when this adapter is made, through `importlib` because it has no type
information. Reads use the old-style `job().get()` / `node().get()` dicts (mapped by `pyslurm_map`);
writes use the new-style `Job(id).modify(JobSubmitDescription(...))`, `hold()` and `release()`, since
the old `job` class cannot modify. pyslurm raises `RPCError` carrying Slurm's own message, which is
classified like scontrol's stderr.
"""

from __future__ import annotations

import importlib
import time
from collections.abc import Callable, Mapping
from typing import Any

from rltuned.errors import SlurmError
from rltuned.slurm.adapter import HistoryRead, Outcome, SlurmRead, UpdateResult
from rltuned.slurm.cli_backend import classify
from rltuned.slurm.pyslurm_map import sinfo_document_from_pyslurm, squeue_document_from_pyslurm

_REQUIRED = ("job", "node", "Job", "JobSubmitDescription")
_FIELDS: Mapping[str, tuple[str, Callable[[str], object]]] = {
    "priority": ("priority", int),
    "nice": ("nice", int),
    "reqnodelist": ("required_nodes", str),
    "nodelist": ("required_nodes", str),
    "excnodelist": ("excluded_nodes", str),
    "timelimit": ("time_limit", str),
}
"""`scontrol update` keys this backend can set, as `JobSubmitDescription` attributes.

An empty value (scontrol's way to clear a list) is refused: whether pyslurm clears the field or
silently ignores an empty string was not verified.
"""


def pyslurm_available() -> bool:
    """Whether pyslurm imports here with the API this adapter uses."""
    try:
        _load()
    except SlurmError:
        return False
    return True


def _load() -> Any:
    try:
        module: Any = importlib.import_module("pyslurm")
    except (ImportError, OSError) as exc:  # not installed, or built against another libslurm
        raise SlurmError(
            f"pyslurm is not installed or does not match this Slurm ({exc}); use the cli backend"
        ) from None
    missing = [name for name in _REQUIRED if not hasattr(module, name)]
    if missing:
        version = getattr(module, "__version__", "unknown version")
        raise SlurmError(
            f"pyslurm {version} lacks {', '.join(missing)}: this adapter needs the 22.5.x API "
            "(old job()/node() reads and the new Job class); use the cli backend"
        )
    return module


class PyslurmAdapter:
    """`SlurmAdapter` over pyslurm; `SlurmError` at construction when pyslurm cannot be used."""

    name = "pyslurm"

    def __init__(self, user_names: Callable[[int], str] | None = None) -> None:
        self._pyslurm: Any = _load()
        self._user_names = user_names

    def read_history(self, since: float) -> HistoryRead:
        raise SlurmError(
            "the pyslurm backend does not read accounting; slurm.backend = cli reads sshare/sacct"
        )

    def read(self) -> SlurmRead:
        now = time.time()
        durations: dict[str, float] = {}
        jobs = self._call(lambda: self._pyslurm.job().get(), "job().get()", durations, "squeue")
        nodes = self._call(lambda: self._pyslurm.node().get(), "node().get()", durations, "sinfo")
        for what, got in (("job().get()", jobs), ("node().get()", nodes)):
            if not isinstance(got, Mapping):
                raise SlurmError(f"pyslurm {what} returned {type(got).__name__}, expected a dict")
        return SlurmRead(
            squeue_document_from_pyslurm(jobs, self._user_names),
            sinfo_document_from_pyslurm(nodes),
            now,
            "pyslurm",
            None,
            durations,
        )

    def update_job(self, job_id: int, fields: Mapping[str, str]) -> UpdateResult:
        """All fields in one `slurm_update_job` RPC (their order cannot matter there)."""
        changes: dict[str, object] = {}
        for key, value in fields.items():
            known = _FIELDS.get(key.lower())
            if known is None:
                return UpdateResult(Outcome.ERROR, f"the pyslurm backend cannot set {key}")
            if value == "":
                return UpdateResult(Outcome.ERROR, f"the pyslurm backend cannot clear {key}")
            attribute, convert = known
            try:
                changes[attribute] = convert(value)
            except ValueError:
                return UpdateResult(Outcome.ERROR, f"{key}={value!r} is not a valid value")
        pyslurm = self._pyslurm
        return self._write(lambda: pyslurm.Job(job_id).modify(pyslurm.JobSubmitDescription(**changes)))

    def hold(self, job_id: int) -> UpdateResult:
        return self._write(lambda: self._pyslurm.Job(job_id).hold())

    def release(self, job_id: int) -> UpdateResult:
        return self._write(lambda: self._pyslurm.Job(job_id).release())

    def job_state(self, job_id: int) -> str | None:
        try:
            state = self._pyslurm.Job.load(job_id).state
        except Exception:  # pyslurm's RPCError when the job is unknown, or slurmctld is unreachable
            return None
        return str(state) if state else None

    def _call(self, fetch: Callable[[], Any], what: str, durations: dict[str, float], label: str) -> Any:
        start = time.perf_counter()
        try:
            got = fetch()
        except Exception as exc:  # pyslurm raises ValueError/RPCError/RuntimeError from libslurm
            raise SlurmError(f"pyslurm {what} failed: {_one_line(exc)}") from None
        durations[label] = time.perf_counter() - start
        return got

    def _write(self, action: Callable[[], object]) -> UpdateResult:
        start = time.perf_counter()
        try:
            action()
        except Exception as exc:  # RPCError carries slurm_strerror's text, the same words scontrol prints
            message = _one_line(exc)
            return UpdateResult(classify(message), message, time.perf_counter() - start)
        return UpdateResult(Outcome.OK, "", time.perf_counter() - start)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())[:500] or type(exc).__name__
