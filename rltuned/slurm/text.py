"""Slurm's pinned parsable text formats, for a Slurm that cannot print `squeue --json` / `sinfo --json`.

Older Slurm, or a 22.05 built without the openapi plugins, still prints `squeue -O` and `sinfo -O` with
a chosen separator. These pure functions turn that text into documents shaped like 22.05's JSON (the
`SlurmJob` / `SlurmNode` field names), so `parse.snapshot_from_slurm` reads every backend the same way.
Field names and cell formats were checked against squeue's and sinfo's `print.c` / `opts.c`:

* Every field is given as `Name:|`: width 0 means "never truncate" and `|` is printed after the cell.
  A row must split into exactly the pinned number of cells, or it is rejected (and counted).
* Job names are not read: a name is free text its owner chooses, which may hold the separator and even
  newlines, so a name could print a forged row for another job. Nothing rltuned decides depends on a
  name (the JSON backends still show it in `plan` and `explain`); here it is empty.
* Times are local time, `2026-11-21T23:25:44` with the default `SLURM_TIME_FORMAT` (run the commands
  with `TEXT_ENV` so a user's `relative` format cannot leak in); `N/A` / `Unknown` mean none. A plain
  epoch (`SLURM_TIME_FORMAT=%s`) is accepted too.
* A time limit is `M:SS`, `H:MM:SS` or `D-HH:MM:SS`; `UNLIMITED`, `NOT_SET` and `INVALID` (squeue
  prints that for limits over a year) have no usable value and read as no limit.
* `N/A` and `(null)` (glibc's rendering of a NULL string) mean empty. `Nice` is already signed.
* `MinMemory` drops Slurm's per-CPU flag (`4G` may be `--mem=4G` or `--mem-per-cpu=4G`), so it is
  kept only when both readings give the same total (one CPU per node); otherwise the job's memory is
  left unknown, which placement treats as "not requested".
* `-O` has no excluded-nodes field: `SQUEUE_EXCLUDED_ARGV` reads them with `-o`. Run it *after*
  `SQUEUE_TEXT_ARGV`: a job missing from its output has then ended in between and needs none.
* `sinfo -N` prints a node once per partition (parse.py merges them) and marks the default partition
  with `*`; `StateLong` ends in a flag character (`idle~`, `down*`, `mixed-`), spelled out here.

A cell that cannot be read stays in the record as printed, so the parser rejects that one record and
names the field; only text in which no line has the pinned column count raises `SlurmError`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from datetime import datetime, tzinfo
from typing import Any

from rltuned.errors import SlurmError

SQUEUE_FIELDS: tuple[str, ...] = (
    "JobID",
    "ArrayJobID",
    "ArrayTaskID",
    "HetJobID",
    "State",
    "Reason",
    "PriorityLong",
    "Nice",
    "UserName",
    "Account",
    "Partition",
    "QOS",
    "SubmitTime",
    "StartTime",
    "TimeLimit",
    "tres-per-node",
    "tres-per-job",
    "tres-per-task",
    "tres-per-socket",
    "mem-per-tres",
    "NumNodes",
    "NumCPUs",
    "NumTasks",
    "Sockets",
    "MinMemory",
    "NodeList",
    "ReqNodes",
    "OverSubscribe",
    "Reservation",
    "Dependency",
)
"""squeue `-O` fields, in column order; none is free text a user chooses (no `Name`, no `Comment`)."""
SINFO_FIELDS: tuple[str, ...] = (
    "NodeList",
    "StateLong",
    "Gres",
    "GresUsed",
    "CPUsState",
    "Memory",
    "AllocMem",
    "Partition",
)
SEPARATOR = "|"


def _format(fields: Sequence[str]) -> str:
    return ",".join([f"{name}:{SEPARATOR}" for name in fields[:-1]] + [f"{fields[-1]}:"])


SQUEUE_TEXT_ARGV: tuple[str, ...] = ("squeue", "-a", "-h", "-O", _format(SQUEUE_FIELDS))
SQUEUE_EXCLUDED_ARGV: tuple[str, ...] = ("squeue", "-a", "-h", "-o", f"%A{SEPARATOR}%x")
"""`%A` is the job's own id (an array task's, not `base_index`); `%x` its excluded nodes."""
SINFO_TEXT_ARGV: tuple[str, ...] = ("sinfo", "-a", "-N", "-h", "-O", _format(SINFO_FIELDS))
TEXT_ENV: Mapping[str, str] = {"SLURM_TIME_FORMAT": "standard"}
"""Environment to add when running the text commands: pins the time format these parsers read."""

NONE_CELLS = frozenset({"", "N/A", "(null)"})
NO_TIME = frozenset({"N/A", "Unknown", "None", "NONE", "0"})
NO_LIMIT = frozenset({"UNLIMITED", "INFINITE", "NOT_SET", "INVALID", "Partition_Limit"})
NO_VAL32 = 0xFFFFFFFE
STATE_SUFFIXES: Mapping[str, str] = {
    "*": "NOT_RESPONDING",
    "~": "POWERED_DOWN",
    "#": "POWERING_UP",
    "%": "POWERING_DOWN",
    "!": "POWER_DOWN",
    "$": "MAINT",
    "@": "REBOOT_REQUESTED",
    "^": "REBOOT_ISSUED",
    "-": "PLANNED",
    "+": "COMPLETING",
}
"""The flag character Slurm's `node_state_string` appends to a node state (`idle~`, `allocated+`)."""
OVERSUBSCRIBE = {"YES": "shared", "NO": "none", "USER": "user", "MCS": "mcs", "TOPO": "topo"}
"""squeue's OverSubscribe word as `squeue --json` spells `shared`; `OK` (never set) is null there."""

_LIMIT = re.compile(r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?$")
_MEMORY = re.compile(r"^(\d+(?:\.\d+)?)([KMGTP]?)$", re.IGNORECASE)
_MIB = {"K": 1 / 1024, "": 1, "M": 1, "G": 1024, "T": 1024**2, "P": 1024**3}


# --- squeue ----------------------------------------------------------------------------------------


def squeue_document_from_text(text: str, excluded_text: str = "", tz: tzinfo | None = None) -> dict[str, Any]:
    """`{"jobs": [...]}` from `SQUEUE_TEXT_ARGV`'s output and `SQUEUE_EXCLUDED_ARGV`'s.

    `tz` is the zone squeue printed its times in: the local one (None) unless TZ was set for it.
    """
    excluded = _excluded(excluded_text)
    jobs: list[dict[str, Any]] = []
    for cells in _rows(text, SQUEUE_FIELDS, "squeue", "JOBID"):
        if len(cells) != len(SQUEUE_FIELDS):  # cut off or split wrong: rejected and counted, by its id
            jobs.append({"job_id": _int(cells[0])})
            continue
        record = _job(dict(zip(SQUEUE_FIELDS, cells, strict=True)), tz)
        if isinstance(record["job_id"], int) and record["job_id"] in excluded:
            record["excluded_nodes"] = excluded[record["job_id"]]
        jobs.append(record)
    return {"jobs": jobs}


def _job(cell: Mapping[str, str], tz: tzinfo | None) -> dict[str, Any]:
    record: dict[str, Any] = {
        "job_id": _int(cell["JobID"]),
        "job_state": cell["State"].strip(),
        "state_reason": cell["Reason"].strip(),
        "priority": _int(cell["PriorityLong"]),
        "nice": _int(cell["Nice"]),
        "user_name": cell["UserName"].strip(),
        "account": _text(cell["Account"]),
        "partition": cell["Partition"].strip(),
        "qos": _text(cell["QOS"]),
        "name": "",  # not read: see the module docstring
        "submit_time": epoch_seconds(cell["SubmitTime"], tz),
        "time_limit": limit_minutes(cell["TimeLimit"]),
        "tres_per_node": _text(cell["tres-per-node"]),
        "tres_per_job": _text(cell["tres-per-job"]),
        "tres_per_task": _text(cell["tres-per-task"]),
        "tres_per_socket": _text(cell["tres-per-socket"]),
        "memory_per_tres": _text(cell["mem-per-tres"]),
        "nodes": _text(cell["NodeList"]),
        "node_count": _int(cell["NumNodes"]),
        "cpus": _int(cell["NumCPUs"]),
        "tasks": _count(cell["NumTasks"]),
        "sockets_per_node": _count(cell["Sockets"]),
        "required_nodes": _text(cell["ReqNodes"]),
        "reservation": _text(cell["Reservation"]),
        "dependency": _text(cell["Dependency"]),
        "het_job_id": 0 if cell["HetJobID"].strip() in NONE_CELLS else _int(cell["HetJobID"]),
        "start_time": epoch_seconds(cell["StartTime"], tz),
        "shared": OVERSUBSCRIBE.get(cell["OverSubscribe"].strip().upper()),
    }
    record.update(_array(cell["ArrayJobID"], cell["ArrayTaskID"]))
    memory = memory_mib(cell["MinMemory"])
    if memory and record["cpus"] == record["node_count"]:
        record["memory_per_node"] = memory  # the per-node and per-CPU readings agree
    return record


def _array(job_cell: str, task_cell: str) -> dict[str, Any]:
    """`array_job_id` 0 for a plain job (squeue prints its own id there), the task id or its range."""
    task = task_cell.strip()
    if task in NONE_CELLS:
        return {"array_job_id": 0, "array_task_id": None}
    if task.isdigit():
        return {"array_job_id": _int(job_cell), "array_task_id": int(task)}
    return {"array_job_id": _int(job_cell), "array_task_id": None, "array_task_string": task}


def _excluded(text: str) -> dict[int, str]:
    """Excluded nodes by job id from `%A|%x` lines; unreadable lines are ignored (the field is optional)."""
    excluded: dict[int, str] = {}
    for line in text.splitlines():
        job, sep, nodes = line.partition(SEPARATOR)
        if sep and job.strip().isdigit():
            excluded[int(job)] = _text(nodes)
    return excluded


# --- sinfo -----------------------------------------------------------------------------------------


def sinfo_document_from_text(text: str) -> dict[str, Any]:
    """`{"nodes": [...]}` from `SINFO_TEXT_ARGV`'s output, one record per line (node x partition).

    A node's line for the default partition (`main*`) comes first, as the JSON lists a node's partitions
    in configuration order: the parser gives a node the first partition it sees.
    """
    nodes: list[dict[str, Any]] = []
    default: set[int] = set()
    for cells in _rows(text, SINFO_FIELDS, "sinfo", "NODELIST"):
        if len(cells) != len(SINFO_FIELDS):
            nodes.append({"name": cells[0].strip()})
            continue
        cell = dict(zip(SINFO_FIELDS, cells, strict=True))
        state, flags = node_state(cell["StateLong"])
        record: dict[str, Any] = {
            "name": cell["NodeList"].strip(),
            "state": state,
            "state_flags": flags,
            "gres": _text(cell["Gres"]),
            "gres_used": _text(cell["GresUsed"]),
            "real_memory": _int(cell["Memory"]),
            "alloc_memory": _int(cell["AllocMem"]),
            "partitions": _partitions(cell["Partition"]),
        }
        record.update(_cpus(cell["CPUsState"]))
        if cell["Partition"].strip().endswith("*"):
            default.add(len(nodes))
        nodes.append(record)
    first_seen: dict[str, int] = {}
    for i, record in enumerate(nodes):
        first_seen.setdefault(str(record.get("name")), i)
    order = sorted(
        range(len(nodes)), key=lambda i: (first_seen[str(nodes[i].get("name"))], i not in default, i)
    )
    return {"nodes": [nodes[i] for i in order]}


def node_state(text: str) -> tuple[str, list[str]]:
    """Base state and flag words from `mixed`, `idle+drain`, `down*`, `allocated+` or `IDLE~+DRAIN`.

    The JSON's `state` is the base word and `state_flags` the rest; a trailing flag character becomes
    its word so that, for instance, `idle%` (powering down) is as unavailable as in the JSON.
    """
    state = ""
    flags: list[str] = []
    rest = text.strip().upper()
    completing = rest.endswith("+")  # ALLOCATED+ / MIXED+: completing, not a separator
    for part in rest.removesuffix("+").split("+"):
        word = part.strip()
        suffixes: list[str] = []
        while word and word[-1] in STATE_SUFFIXES:
            suffixes.insert(0, STATE_SUFFIXES[word[-1]])
            word = word[:-1]
        if word and not state:
            state = word
        elif word:
            flags.append(word)
        flags.extend(suffixes)
    if completing:
        flags.append(STATE_SUFFIXES["+"])
    return state, flags


def _cpus(text: str) -> dict[str, Any]:
    """`cpus`, `alloc_cpus`, `idle_cpus` from sinfo's `A/I/O/T`; the raw cell as `cpus` if unreadable."""
    parts = text.strip().split("/")
    if len(parts) != 4 or not all(p.isdigit() for p in parts):
        return {"cpus": text.strip()}
    alloc, idle, _other, total = map(int, parts)
    return {"cpus": total, "alloc_cpus": alloc, "idle_cpus": idle}


def _partitions(text: str) -> list[str]:
    """`main*` is the default partition `main`; `n/a` (a node in no partition) is none."""
    name = text.strip().rstrip("*")
    return [] if name in NONE_CELLS or name == "n/a" else [name]


# --- cells -----------------------------------------------------------------------------------------


def limit_minutes(text: str) -> int | str | None:
    """Minutes from Slurm's time grammar, None for no limit, the text itself if unreadable.

    Accepts what Slurm accepts for `--time` (`M`, `M:S`, `H:M:S`, `D-H`, `D-H:M`, `D-H:M:S`); squeue
    prints `M:SS`, `H:MM:SS` or `D-HH:MM:SS`. A part minute counts as a whole one, as in Slurm.
    """
    value = text.strip()
    if value in NO_LIMIT:
        return None
    found = _LIMIT.match(value)
    if not found:
        return value
    days_s, first, second, third = found.groups()
    days = int(days_s or 0)
    numbers = [int(x) for x in (first, second, third) if x is not None]
    if days_s is not None:  # D-H[:M[:S]]
        hours, minutes, seconds = [*numbers, 0, 0][:3]
    elif len(numbers) == 3:
        hours, minutes, seconds = numbers
    elif len(numbers) == 2:
        hours, (minutes, seconds) = 0, numbers
    else:
        hours, minutes, seconds = 0, numbers[0], 0
    return (days * 24 + hours) * 60 + minutes + (1 if seconds else 0)


def epoch_seconds(text: str, tz: tzinfo | None = None) -> int | str | None:
    """Epoch seconds from squeue's `2026-11-21T23:25:44` (in `tz`, default local) or a plain epoch."""
    value = text.strip()
    if value in NO_TIME:
        return None
    if value.isdigit():
        return int(value)
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return value
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=tz) if tz is not None else moment.astimezone()
    return int(moment.timestamp())


def memory_mib(text: str) -> int | None:
    """MiB from squeue's `MinMemory` (`0`, `500M`, `4G`, `1.50T`); None if empty or unreadable."""
    found = _MEMORY.match(text.strip())
    if not found:
        return None
    return round(float(found.group(1)) * _MIB[found.group(2).upper()])


def _text(cell: str) -> str:
    value = cell.strip()
    return "" if value in NONE_CELLS else value


def _int(cell: str) -> int | str:
    """An int, or the cell as printed so that validation rejects the record and names the field."""
    value = cell.strip()
    return int(value) if re.fullmatch(r"-?\d+", value) else value


def _count(cell: str) -> int | str | None:
    """An optional count: `*`, `N/A` and NO_VAL are unset."""
    value = _int(cell)
    if isinstance(value, int):
        return None if value >= NO_VAL32 else value
    return None if value in NONE_CELLS or value == "*" else value


def _rows(text: str, fields: Sequence[str], what: str, header: str) -> list[list[str]]:
    """Each line split into its cells (another count than `len(fields)`: a bad line); a header line is
    skipped.

    `SlurmError` when there are lines but none has the pinned column count: that is not this format.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].split(SEPARATOR, 1)[0].strip().upper() == header:
        lines = lines[1:]  # printed without -h
    rows = [line.split(SEPARATOR) for line in lines]
    if rows and all(len(cells) != len(fields) for cells in rows):
        counts = sorted({len(line.split(SEPARATOR)) for line in lines})
        raise SlurmError(
            f"{what}: expected {len(fields)} {SEPARATOR!r}-separated columns (the pinned -O format), "
            f"got {', '.join(map(str, counts))} on every line; first line {lines[0][:120]!r}"
        )
    return rows
