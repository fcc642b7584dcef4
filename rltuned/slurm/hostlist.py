"""Slurm hostlist expressions (`p100-[1-2],k80-[01-03,5]`), expanded to names and compressed back.

squeue prints a job's nodes, and its required and excluded nodes, in this form; scontrol accepts it for
`ReqNodeList=`/`ExcNodeList=`. Only the numeric ranges Slurm itself prints are supported; zero padding
follows the width of a range's lower bound, as in Slurm (`[01-10]` gives `01` ... `10`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable

EMPTY = frozenset({"", "(null)", "N/A", "None"})
MAX_NAMES = 100_000
"""Refuse absurd ranges (`n[1-999999999]`) instead of allocating them."""

_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")


def expand(text: str) -> tuple[str, ...]:
    """Every node name of a hostlist, in order; `ValueError` on a malformed expression."""
    text = text.strip()
    if text in EMPTY:
        return ()
    names: list[str] = []
    for expr in _split_top(text):
        names.extend(_expand_one(expr))
        if len(names) > MAX_NAMES:
            raise ValueError(f"expected a hostlist of at most {MAX_NAMES} names, got more in {text!r}")
    return tuple(names)


def compress(names: Iterable[str]) -> str:
    """A hostlist for `names`: runs of a trailing number sharing prefix and width become ranges.

    Groups keep the order in which their prefix first appears; numbers within a group are sorted.
    """
    groups: dict[tuple[str, int], list[int]] = {}
    plain: dict[str, None] = {}
    order: list[tuple[str, int] | str] = []
    for name in names:
        match = _TRAILING_NUMBER.match(name)
        if match is None:
            if name not in plain:
                plain[name] = None
                order.append(name)
            continue
        key = (match.group(1), len(match.group(2)))
        if key not in groups:
            groups[key] = []
            order.append(key)
        groups[key].append(int(match.group(2)))
    parts: list[str] = []
    for item in order:
        if isinstance(item, str):
            parts.append(item)
            continue
        prefix, width = item
        numbers = sorted(set(groups[item]))
        if len(numbers) == 1:
            parts.append(f"{prefix}{numbers[0]:0{width}d}")
            continue
        ranges = []
        for _, run in itertools.groupby(enumerate(numbers), key=lambda pair: pair[1] - pair[0]):
            values = [v for _, v in run]
            lo, hi = values[0], values[-1]
            ranges.append(f"{lo:0{width}d}" if lo == hi else f"{lo:0{width}d}-{hi:0{width}d}")
        parts.append(f"{prefix}[{','.join(ranges)}]")
    return ",".join(parts)


def _split_top(text: str) -> list[str]:
    """Split at the commas outside brackets."""
    parts: list[str] = []
    depth = start = 0
    for i, char in enumerate(text):
        if char == "[":
            depth += 1
            if depth > 1:
                raise ValueError(f"expected no nested brackets in a hostlist, got {text!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise ValueError(f"expected balanced brackets in a hostlist, got {text!r}")
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    if depth:
        raise ValueError(f"expected balanced brackets in a hostlist, got {text!r}")
    parts.append(text[start:])
    if any(not part.strip() for part in parts):
        raise ValueError(f"expected no empty names in a hostlist, got {text!r}")
    return [part.strip() for part in parts]


def _expand_one(expr: str) -> list[str]:
    """One name expression; several bracket groups (`r[1-2]n[1-4]`) give their product."""
    pieces: list[list[str]] = []
    rest = expr
    while rest:
        open_at = rest.find("[")
        if open_at < 0:
            pieces.append([rest])
            break
        close_at = rest.index("]", open_at)
        pieces.append([rest[:open_at]])
        pieces.append(_range_items(rest[open_at + 1 : close_at], expr))
        rest = rest[close_at + 1 :]
    return ["".join(combo) for combo in itertools.product(*pieces)]


def _range_items(body: str, expr: str) -> list[str]:
    items: list[str] = []
    for item in body.split(","):
        lo, dash, hi = item.strip().partition("-")
        if not lo.isdigit() or (dash and not hi.isdigit()):
            raise ValueError(f"expected numeric ranges like [1-4,7] in a hostlist, got {expr!r}")
        if not dash:
            items.append(lo)
            continue
        first, last = int(lo), int(hi)
        if last < first or last - first >= MAX_NAMES:
            raise ValueError(f"expected an increasing range of at most {MAX_NAMES} names, got {expr!r}")
        items.extend(f"{n:0{len(lo)}d}" for n in range(first, last + 1))
    return items
