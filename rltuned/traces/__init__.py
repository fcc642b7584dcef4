"""Trace loaders: every supported file format becomes the same canonical `Trace`.

`load_trace(path)` detects the format from the file's first line (or, for PAI's headerless tables, the
file name and row shape), streams it once, and returns jobs sorted by submit time with ids 0..n-1.
A malformed row raises `TraceError` naming file and line, unless `lenient`, which counts and skips it.
"""

from __future__ import annotations

import gc
import lzma
import zlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, NoReturn

from rltuned.errors import TraceError
from rltuned.traces import helios, itp, openb, pai, philly, slurm, swf
from rltuned.traces.base import Trace, TraceReport, numbered_lines, open_text

__all__ = ["FORMATS", "Trace", "TraceReport", "detect_format", "load_trace"]

FORMATS: tuple[str, ...] = ("philly", "itp", "openb", "swf", "helios", "pai", "slurm")

_LOADERS: dict[str, Callable[[Path, bool], Trace]] = {
    philly.FORMAT: philly.load,
    itp.FORMAT: itp.load,
    openb.FORMAT: openb.load,
    swf.FORMAT: swf.load,
    helios.FORMAT: helios.load,
    pai.FORMAT: pai.load,
    slurm.FORMAT: slurm.load,
}
# CSV formats, told apart by the columns their header must contain.
_HEADERS: tuple[tuple[str, frozenset[str]], ...] = (
    (philly.FORMAT, frozenset(philly.COLUMNS)),
    (itp.FORMAT, frozenset(itp.COLUMNS)),
    (openb.FORMAT, frozenset(openb.COLUMNS)),
    (helios.FORMAT, frozenset(helios.COLUMNS)),
)
# Errors a corrupt or mislabelled compressed file raises while being read.
_UNREADABLE = (OSError, EOFError, lzma.LZMAError, zlib.error, UnicodeDecodeError)


def load_trace(path: str | Path, fmt: str | None = None, *, lenient: bool = False) -> Trace:
    """Load a trace file (plain or .xz/.gz/.bz2) of format `fmt`, detected when None."""
    path = Path(path)
    if fmt is not None and fmt not in _LOADERS:
        valid = ", ".join(FORMATS)
        raise TraceError(str(path), None, f"unknown trace format {fmt!r}; expected one of {valid}")
    _check_file(path)
    with _readable(path), _cyclic_gc_paused():
        return _LOADERS[fmt or detect_format(path)](path, lenient)


def detect_format(path: Path) -> str:
    """The format of a trace, from its first data line (SWF's ';' comments skipped) or PAI's file name."""
    _check_file(path)
    if pai.JOB_TABLE in path.name:
        raise TraceError(str(path), None, f"this is the PAI job table; load the {pai.TASK_TABLE} beside it")
    if pai.TASK_TABLE in path.name:
        return pai.FORMAT
    with _readable(path), open_text(path) as handle:
        line_number, line = next(_data_lines(handle), (None, ""))
    if line_number is None:
        raise TraceError(str(path), None, "empty file: no line to detect the format from")
    return _format_of(line) or _unknown(path, line_number, line)


def _format_of(line: str) -> str | None:
    if line.startswith(slurm.JOBCOMP_START) or slurm.looks_like_sacct(line):
        return slurm.FORMAT
    header = {name.strip().lstrip("\ufeff") for name in line.split(",")}
    for fmt, columns in _HEADERS:
        if columns <= header:
            return fmt
    if swf.looks_like_record(line):
        return swf.FORMAT
    if pai.looks_like_task_row(line):
        return pai.FORMAT
    return None


def _unknown(path: Path, line_number: int, line: str) -> NoReturn:
    valid = ", ".join(FORMATS)
    problem = f"unknown trace format: expected a header or record of one of {valid}, got {line[:80]!r}"
    raise TraceError(str(path), line_number, problem)


def _data_lines(handle: IO[str]) -> Iterator[tuple[int, str]]:
    return ((n, line) for n, line in numbered_lines(handle) if not line.lstrip().startswith(";"))


def _check_file(path: Path) -> None:
    if not path.exists():
        raise TraceError(str(path), None, "no such file")
    if path.is_dir():
        raise TraceError(str(path), None, "expected a trace file, got a directory")


@contextmanager
def _cyclic_gc_paused() -> Iterator[None]:
    """Pause the cycle collector while a loader allocates its (acyclic) jobs.

    Each collection rescans the growing job list, which cost ~30% of a million-row load; reference
    counting still frees everything, and the previous setting is restored.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@contextmanager
def _readable(path: Path) -> Iterator[None]:
    """Turn the errors of an unreadable or corrupt (compressed) file into one TraceError."""
    try:
        yield
    except _UNREADABLE as err:
        raise TraceError(str(path), None, f"cannot read the file: {err}") from err
