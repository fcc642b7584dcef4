"""Row-level parsing shared by the loaders: typed field readers, CSV headers and the per-row loop.

A field reader raises `RowError` with an "expected ..., got ..." message; `collect` turns that into
`RowPolicy.bad`, so each loader only states what a good row looks like.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from datetime import datetime
from pathlib import Path
from typing import IO, TYPE_CHECKING, TypeVar

from rltuned.domain import Job
from rltuned.errors import TraceError
from rltuned.traces.base import RowPolicy

if TYPE_CHECKING:
    from _csv import Reader

Row = TypeVar("Row", bound=Sequence[str])

# A parsed row: the job, or the reason a well-formed row is not a usable GPU job.
Parsed = Job | str
RowParser = Callable[[int, Row, int], Parsed]

_EPOCH = datetime(1970, 1, 1)


class RowError(ValueError):
    """Why one row cannot be read; caught per row so that lenient mode can count it and go on."""


def collect(
    policy: RowPolicy,
    rows: Iterable[tuple[int, Row]],
    parse: RowParser[Row],
    width: int,
    *,
    at_least: bool = False,
) -> list[Job]:
    """Run `parse(line, row, next_id)` over every row, routing bad rows to the policy.

    `next_id` is the job's position among the loaded jobs, so already-sorted input needs no renumbering.
    """
    jobs: list[Job] = []
    for line, row in rows:
        policy.rows += 1
        got = len(row)
        if got != width and not (at_least and got > width):
            policy.bad(line, f"expected {'at least ' if at_least else ''}{width} columns, got {got}")
            continue
        try:
            parsed = parse(line, row, len(jobs))
        except RowError as err:
            policy.bad(line, str(err))
            continue
        if isinstance(parsed, str):
            policy.skip(parsed)
        else:
            jobs.append(parsed)
    return jobs


def csv_table(
    path: Path, handle: IO[str], required: Sequence[str], *, delimiter: str = ","
) -> tuple[dict[str, int], Iterator[tuple[int, list[str]]]]:
    """Read the header and return column positions by name plus the numbered data rows.

    Columns are found by name, so extra or reordered columns in a re-exported file still load.
    A '|'-separated file (sacct) is read without quoting: sacct never quotes, so a '"' is data.
    """
    if delimiter == ",":
        reader = csv.reader(handle)
    else:
        reader = csv.reader(handle, delimiter=delimiter, quoting=csv.QUOTE_NONE)
    rows = _numbered(str(path), reader)
    first = next(rows, None)
    if first is None:
        raise TraceError(str(path), None, "empty file: expected a header line")
    line, header = first
    names = [name.strip().lstrip("\ufeff") for name in header]
    missing = [name for name in required if name not in names]
    if missing:
        expected = delimiter.join(required)
        raise TraceError(str(path), line, f"expected a header with {expected}; missing {', '.join(missing)}")
    return {name: i for i, name in enumerate(names)}, rows


def csv_rows(path: Path, handle: IO[str]) -> Iterator[tuple[int, list[str]]]:
    """The numbered rows of a headerless CSV file (the PAI tables)."""
    return _numbered(str(path), csv.reader(handle))


def _numbered(path: str, reader: Reader) -> Iterator[tuple[int, list[str]]]:
    """Rows with their 1-based line numbers, blank lines dropped; a CSV-level error names its line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as err:
            raise TraceError(path, reader.line_num, f"unreadable CSV: {err}") from None
        if row:
            yield reader.line_num, row


def number(value: str, column: str) -> float:
    try:
        result = float(value)
    except ValueError:
        raise RowError(f"{column}: expected a number, got {value!r}") from None
    if not math.isfinite(result):
        raise RowError(f"{column}: expected a finite number, got {value!r}")
    return result


def nonnegative(value: str, column: str) -> float:
    result = number(value, column)
    if result < 0:
        raise RowError(f"{column}: expected a number >= 0, got {value!r}")
    return result


def count(value: str, column: str) -> int:
    """A whole number >= 0; "2.0" is accepted because pandas-written traces print counts as floats."""
    try:
        result = int(value)
    except ValueError:
        as_float = number(value, column)
        if not as_float.is_integer():
            raise RowError(f"{column}: expected a whole number, got {value!r}") from None
        result = int(as_float)
    if result < 0:
        raise RowError(f"{column}: expected a count >= 0, got {value!r}")
    return result


def timestamp(value: str, column: str) -> float:
    """Seconds since the epoch of an ISO date-time; a naive one is read as UTC.

    Traces record local wall-clock time without a zone; only differences matter to a simulation, so
    reading them as UTC keeps them exact (no DST jumps). `fromisoformat` is ~15x faster than `strptime`.
    """
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        raise RowError(f"{column}: expected a date-time like 2017-10-09 07:01:55, got {value!r}") from None
    if moment.tzinfo is not None:
        return moment.timestamp()
    return (moment - _EPOCH).total_seconds()
