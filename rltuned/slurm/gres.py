"""GRES and TRES-per-X strings as Slurm prints them, reduced to what a GPU scheduler needs.

The GPU count and model are read from GRES because this Slurm cannot put GPUs in its TRES strings
without slurmdbd (README section 2). The shapes seen in 22.05 and neighbouring versions:

    node gres        gpu:p100:4          gpu:4(S:0)          gpu:a100:4(S:0-1),shard:8
    node gres_used   gpu:p100:2(IDX:0-1) gpu:(null):0(IDX:N/A)  gpu:tesla:3(IDX:0,2-3)
    job tres_per_*   gres:gpu:p100:2     gres:gpu:2          gres/gpu:a100=2      gres/gpu=2
    job gres_detail  gpu:p100:2(IDX:0-1)

Items are comma-separated (commas inside parentheses belong to the item); only `gpu` items count.
A count may carry Slurm's K/M/G/T suffix (powers of 1024). `no_consume` is a flag, not a type.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

NONE_TEXT = frozenset({"", "(null)", "N/A", "None", "none"})
_COUNT = re.compile(r"^(\d+)([KMGTP]?)$", re.IGNORECASE)
_SUFFIX = {"": 1, "K": 1024, "M": 1024**2, "G": 1024**3, "T": 1024**4, "P": 1024**5}
_FLAGS = frozenset({"no_consume"})
_WHERE = re.compile(r"\([^()]*\)\s*$")


@dataclass(frozen=True, slots=True)
class Gres:
    """One GRES item: `name` (`gpu`), `type` (`p100`, None when untyped) and `count`."""

    name: str
    type: str | None
    count: int


@dataclass(frozen=True, slots=True)
class GpuRequest:
    """A GPU total and its single model; `gpu_type` None means untyped (any model)."""

    gpus: int
    gpu_type: str | None


def parse_gres(text: str) -> tuple[Gres, ...]:
    """All items of a GRES or TRES-per-X string; `ValueError` names the bad item."""
    if text.strip() in NONE_TEXT:
        return ()
    return tuple(_item(raw.strip(), text) for raw in _split_items(text) if raw.strip() not in NONE_TEXT)


def gpus_of(text: str) -> GpuRequest:
    """The GPUs a string names: their total and model.

    Several models in one request cannot be expressed as one `Job.gpu_type`, so they are an error. A
    TRES-style string may give both the untyped total and the typed counts (`gres/gpu=2,gres/gpu:a100=2`);
    then the total is the count and the typed items only name the model.
    """
    items = [g for g in parse_gres(text) if g.name == "gpu"]
    untyped = sum(g.count for g in items if g.type is None)
    typed: dict[str, int] = {}
    for g in items:
        if g.type is not None:
            typed[g.type] = typed.get(g.type, 0) + g.count
    if len(typed) > 1:
        raise ValueError(f"expected one GPU model per request, got {sorted(typed)} in {text!r}")
    if not typed:
        return GpuRequest(untyped, None)
    ((gpu_type, typed_count),) = typed.items()
    if untyped and untyped != typed_count:
        raise ValueError(f"expected the untyped GPU total to match the typed count, got {text!r}")
    return GpuRequest(typed_count, gpu_type if typed_count else None)


def node_gpus(text: str) -> GpuRequest:
    """A node's GPUs: the total over all `gpu` items and the first model named (None if untyped).

    The domain gives each node one model; a node that mixes models (MIG slices, two cards) is reported
    under its first one.
    """
    items = [g for g in parse_gres(text) if g.name == "gpu"]
    gpu_type = next((g.type for g in items if g.type is not None), None)
    return GpuRequest(sum(g.count for g in items), gpu_type)


def _split_items(text: str) -> list[str]:
    items: list[str] = []
    depth = start = 0
    for i, char in enumerate(text):
        if char == "(":
            depth += 1
        elif char == ")":
            depth = max(0, depth - 1)
        elif char == "," and depth == 0:
            items.append(text[start:i])
            start = i + 1
    items.append(text[start:])
    return items


def _item(raw: str, text: str) -> Gres:
    body = raw
    for prefix in ("gres:", "gres/"):
        if body.startswith(prefix):
            body = body[len(prefix) :]
            break
    body = _WHERE.sub("", body).strip()  # (IDX:0-1), (S:0-1): where, not how many; `(null)` stays
    if "=" in body:  # TRES style: gpu:a100=2
        key, _, count_text = body.partition("=")
        name, _, type_text = key.partition(":")
        count = _count(count_text, raw, text)
        types = [type_text] if type_text else []
    else:
        parts = body.split(":")
        name = parts[0]
        if len(parts) > 1 and _COUNT.match(parts[-1]):
            count = _count(parts[-1], raw, text)
            types = parts[1:-1]
        else:
            count = 1  # `gpu` or `gpu:a100` alone mean one
            types = parts[1:]
    types = [t for t in types if t not in _FLAGS]
    if not name or not re.fullmatch(r"[A-Za-z0-9_./-]+", name) or len(types) > 1:
        raise ValueError(f"expected GRES items like gpu:a100:2 or gres/gpu:a100=2, got {raw!r} in {text!r}")
    gpu_type = types[0] if types and types[0] not in NONE_TEXT else None
    return Gres(name, gpu_type, count)


def _count(value: str, raw: str, text: str) -> int:
    match = _COUNT.match(value.strip())
    if match is None:
        raise ValueError(f"expected a GRES count like 2 or 4K, got {raw!r} in {text!r}")
    return int(match.group(1)) * _SUFFIX[match.group(2).upper()]
