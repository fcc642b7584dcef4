"""The past as Slurm's accounting keeps it, into the `History` the simulator keeps: fair-share usage from
`sshare`, past runtimes from `sacct`.

- **Usage** is decayed slot-seconds per account, as `sim/history.py` counts it: sshare's `GrpTRESRaw`
  holds each association's decayed TRES usage in TRES-minutes (`gres/gpu=N` needs
  `AccountingStorageTRES=gres/gpu`; with cores as slots the `cpu` TRES, always accounted), times 60.
  Only accounts that hold users' jobs and have used slots count (the tree's root and parent accounts
  sum their children, and an account with no usage is one the simulator has never seen): multifactor's
  fair-share divides by their number.
- **Runtimes** are the mean elapsed seconds of the finished jobs per user and per account over the
  look-back window (`sacct -X`, jobs that ran), and the last `RECENT_RUNTIMES` of them per peer group
  (`domain.peer_key`: the user, else the account, and the slots the job held in `AllocTRES`), in the
  order they ended, as the simulator records them when they finish.

Both parsers are pure and strict about shape: a header without the columns asked for is a
`SlurmError`, so the daemon counts it and keeps the history it had.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from rltuned.domain import History, peer_key, with_runtime
from rltuned.errors import SlurmError

SSHARE_ARGV = ("sshare", "-a", "-P", "-o", "Account,User,GrpTRESRaw")
SACCT_FIELDS = "User,Account,ElapsedRaw,State,AllocTRES,End"
SACCT_STATES = "CD,F,TO,CA,OOM,NF,PR"
"""Finished jobs of every kind that may have run; jobs that never started have ElapsedRaw 0 and are
left out."""
TRES_MINUTES = 60.0


def sacct_argv(since: float) -> tuple[str, ...]:
    """Finished jobs (allocations only) that ended since `since` (epoch seconds), all users."""
    import time

    start = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(since))
    return ("sacct", "-a", "-X", "-P", "-S", start, "-E", "now", "-s", SACCT_STATES, "-o", SACCT_FIELDS)


SLOT_TRES = {"gpus": "gres/gpu", "cpus": "cpu"}
"""The TRES whose usage is the simulator's slot usage, by `ClusterSpec.slots`."""


def usage_from_sshare(text: str, slots: str = "gpus") -> dict[str, float]:
    tres = SLOT_TRES[slots]
    rows = _table(text, ("Account", "User", "GrpTRESRaw"), "sshare")
    with_users = {r["Account"] for r in rows if r["User"]}
    usage: dict[str, float] = {}
    for r in rows:
        account = r["Account"]
        if r["User"] or account not in with_users or account == "root":
            continue
        minutes = _tres(r["GrpTRESRaw"]).get(tres, 0.0)
        if minutes > 0:
            usage[account] = minutes * TRES_MINUTES
    return usage


def runtimes_from_sacct(text: str) -> tuple[dict[str, float], dict[str, float]]:
    """(mean runtime per user, per account) in seconds."""
    by_user, by_account, _ = _runtimes(text, "gpus")
    return by_user, by_account


def recent_from_sacct(text: str, slots: str = "gpus") -> dict[tuple[str, int], tuple[float, ...]]:
    """The last `RECENT_RUNTIMES` runtimes per peer group, oldest first (`History.recent_runtimes`)."""
    return _runtimes(text, slots)[2]


def _runtimes(
    text: str, slots: str
) -> tuple[dict[str, float], dict[str, float], dict[tuple[str, int], tuple[float, ...]]]:
    rows = _table(text, ("User", "Account", "ElapsedRaw", "AllocTRES", "End"), "sacct")
    tres = SLOT_TRES[slots]
    per_user: dict[str, list[float]] = {}
    per_account: dict[str, list[float]] = {}
    ended: list[tuple[str, tuple[str, int], float]] = []
    for r in rows:
        try:
            elapsed = float(r["ElapsedRaw"])
        except ValueError:
            raise SlurmError(f"sacct: ElapsedRaw {r['ElapsedRaw']!r} is not a number") from None
        if elapsed <= 0:
            continue
        if r["User"]:
            per_user.setdefault(r["User"], []).append(elapsed)
        if r["Account"]:
            per_account.setdefault(r["Account"], []).append(elapsed)
        held = _tres(r["AllocTRES"], "sacct AllocTRES", units=True).get(tres, 0.0)
        key = peer_key(r["User"], r["Account"], int(held))
        if key[0]:
            ended.append((r["End"], key, elapsed))
    recent: dict[tuple[str, int], tuple[float, ...]] = {}
    # sacct lists jobs by id; ISO end times (sacct's format) sort as the times do, and a stable sort
    # keeps the listed order of jobs that ended in the same second.
    for _, key, elapsed in sorted(ended, key=lambda e: e[0]):
        recent[key] = with_runtime(recent.get(key, ()), elapsed)
    return _means(per_user), _means(per_account), recent


def history_from_slurm(sshare_text: str, sacct_text: str, slots: str = "gpus") -> History:
    by_user, by_account, recent = _runtimes(sacct_text, slots)
    return History(
        usage=MappingProxyType(usage_from_sshare(sshare_text, slots)),
        mean_runtime_by_user=MappingProxyType(by_user),
        mean_runtime_by_account=MappingProxyType(by_account),
        recent_runtimes=MappingProxyType(recent),
    )


def _means(values: Mapping[str, list[float]]) -> dict[str, float]:
    return {k: sum(v) / len(v) for k, v in values.items()}


def _tres(text: str, what: str = "sshare: GrpTRESRaw", units: bool = False) -> dict[str, float]:
    """name=value items; with `units`, a value may carry sacct's unit suffix (AllocTRES' mem=16G).
    sshare's raw usage never does, so there a suffix is malformed output."""
    count = _count if units else float
    out: dict[str, float] = {}
    for item in filter(None, text.strip().split(",")):
        key, sep, value = item.partition("=")
        if not sep:
            raise SlurmError(f"{what} item {item!r} is not name=value")
        try:
            out[key] = count(value)
        except ValueError:
            raise SlurmError(f"{what} {key}={value!r} is not a number") from None
    return out


_UNITS = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12}


def _count(value: str) -> float:
    """A TRES count; sacct prints memory with a unit suffix (mem=16G), which no slot count carries."""
    if value and value[-1] in _UNITS:
        return float(value[:-1]) * _UNITS[value[-1]]
    return float(value)


def _table(text: str, columns: tuple[str, ...], what: str) -> list[dict[str, str]]:
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        raise SlurmError(f"{what}: no output, expected a header line")
    header = lines[0].split("|")
    missing = [c for c in columns if c not in header]
    if missing:
        raise SlurmError(f"{what}: expected columns {', '.join(columns)}, missing {', '.join(missing)}")
    index = {c: header.index(c) for c in columns}
    rows = []
    for number, line in enumerate(lines[1:], start=2):
        cells = line.split("|")
        if len(cells) != len(header):
            raise SlurmError(f"{what}: line {number} has {len(cells)} fields, expected {len(header)}")
        rows.append({c: cells[i].strip() for c, i in index.items()})
    return rows
