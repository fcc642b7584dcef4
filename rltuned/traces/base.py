"""What every trace loader shares: the canonical result, streaming file access and malformed-row policy."""

from __future__ import annotations

import bz2
import gzip
import lzma
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from itertools import pairwise
from operator import attrgetter
from pathlib import Path
from typing import IO

from rltuned.domain import Job
from rltuned.errors import TraceError


@dataclass(frozen=True, slots=True)
class TraceReport:
    """How a file turned into jobs: each row is loaded, skipped as malformed, or filtered for a reason."""

    path: str
    format: str
    rows: int
    loaded: int
    malformed: int = 0
    filtered: dict[str, int] = field(default_factory=dict)
    has_time_limits: bool = False

    def summary(self) -> str:
        extra = "".join(f", {n} {why}" for why, n in sorted(self.filtered.items()))
        bad = f", {self.malformed} malformed rows skipped" if self.malformed else ""
        return f"{self.path} ({self.format}): {self.rows} rows, {self.loaded} jobs{bad}{extra}"


@dataclass(frozen=True, slots=True)
class Trace:
    """The canonical job table: jobs sorted by submit, ids 0..n-1 in that order (`name`: the original id)."""

    jobs: tuple[Job, ...]
    report: TraceReport

    def __len__(self) -> int:
        return len(self.jobs)


def open_text(path: Path) -> IO[str]:
    """Open a trace for streaming, decompressing .xz/.gz/.bz2 by suffix."""
    suffix = path.suffix
    if suffix == ".xz":
        return lzma.open(path, "rt", encoding="utf-8", newline="")
    if suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    if suffix == ".bz2":
        return bz2.open(path, "rt", encoding="utf-8", newline="")
    return path.open("r", encoding="utf-8", newline="")


class RowPolicy:
    """Strict by default (a malformed row raises, naming file and line); lenient counts and skips it."""

    def __init__(self, path: Path, lenient: bool) -> None:
        self.path = str(path)
        self.lenient = lenient
        self.rows = 0
        self.malformed = 0
        self.filtered: Counter[str] = Counter()

    def bad(self, line: int, problem: str) -> None:
        if not self.lenient:
            raise TraceError(self.path, line, problem)
        self.malformed += 1

    def skip(self, reason: str) -> None:
        """A well-formed row that is no GPU job (e.g. CPU-only, never started): counted, not an error."""
        self.filtered[reason] += 1

    def finish(self, fmt: str, jobs: Iterable[Job]) -> Trace:
        """Sort by submit (stable) and number 0..n-1, touching only jobs whose id is not already right.

        Loaders number jobs in file order while parsing, and real traces are nearly always sorted, so the
        common case costs one comparison pass; a shuffled file pays a sort and `_with_id` per job.
        """
        ordered = list(jobs)
        if not all(a.submit <= b.submit for a, b in pairwise(ordered)):
            ordered.sort(key=attrgetter("submit"))
        renumbered = tuple(job if job.id == i else _with_id(job, i) for i, job in enumerate(ordered))
        report = TraceReport(
            path=self.path,
            format=fmt,
            rows=self.rows,
            loaded=len(renumbered),
            malformed=self.malformed,
            filtered=dict(self.filtered),
            has_time_limits=bool(renumbered) and all(j.time_limit is not None for j in renumbered),
        )
        return Trace(renumbered, report)


# Job's fields after `id`, read in one C call: rebuilding a job from them is ~3x faster than `replace`,
# which a shuffled million-row trace would otherwise spend seconds in.
_JOB_FIELDS = tuple(f.name for f in fields(Job))
assert _JOB_FIELDS[0] == "id", f"expected Job's first field to be id, got {_JOB_FIELDS[0]}"
_after_id = attrgetter(*_JOB_FIELDS[1:])


def _with_id(job: Job, new_id: int) -> Job:
    return Job(new_id, *_after_id(job))


def numbered_lines(handle: IO[str], start: int = 1) -> Iterator[tuple[int, str]]:
    """Yield (line number, line without newline), skipping blank lines."""
    for number, raw in enumerate(handle, start):
        line = raw.rstrip("\r\n")
        if line.strip():
            yield number, line
