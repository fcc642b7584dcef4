"""Pydantic models of `squeue --json` and `sinfo --json` (Slurm 22.05, openapi/v0.0.38) at the edge.

Only the fields the scheduler reads are declared; everything else is ignored, so added fields in later
Slurm versions do no harm. Numbers are accepted plain or in the `{"set", "infinite", "number"}` shape of
later versions (infinite or unset read as None), states as a string or a list, node lists as a list or
a comma string. A declared field without a default is required: a record that lacks it, or has it with
the wrong type, fails validation alone, and the parser skips and counts it.

The documents themselves are validated loosely (`jobs` / `nodes` must be lists); each record is
validated on its own so that one bad job never hides the rest of the queue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import AliasChoices, BaseModel, BeforeValidator, ConfigDict, Field, field_validator


def _number(value: object) -> object:
    """Plain numbers pass; `{"set": true, "infinite": false, "number": 5}` gives 5, infinite/unset None."""
    if isinstance(value, Mapping):
        if value.get("infinite") or not value.get("set", True):
            return None
        return value.get("number")
    return value


def _text(value: object) -> object:
    return "" if value is None else value


def _word_or_none(value: object) -> object:
    """One word, lower-case, else None: a shape this version does not know is not worth dropping a job."""
    return value.strip().lower() or None if isinstance(value, str) else None


def _words(value: object) -> object:
    """A list of strings, from a list or a comma-separated string (`"main,gpu"`)."""
    if value is None:
        return ()
    if isinstance(value, str):
        return tuple(part.strip() for part in value.split(",") if part.strip())
    return value


def _states(value: object) -> object:
    """Upper-case state words from `"mixed"`, `"IDLE+DRAIN"`, `"down*"` or `["PENDING"]`.

    sinfo's text forms mark a non-responding node with a trailing `*`; it becomes NOT_RESPONDING.
    """
    if value is None:
        return ()
    items = value.split("+") if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        return value  # let validation reject it
    words: list[str] = []
    for item in items:
        if not isinstance(item, str):
            return value
        word = item.strip().upper()
        if word.endswith("*"):
            words.append("NOT_RESPONDING")
            word = word.rstrip("*")
        if word:
            words.append(word)
    return tuple(words)


Count = Annotated[int | None, BeforeValidator(_number)]
Text = Annotated[str, BeforeValidator(_text)]
Words = Annotated[tuple[str, ...], BeforeValidator(_words)]
States = Annotated[tuple[str, ...], BeforeValidator(_states)]


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


class AllocatedNode(_Lenient):
    """One node of a running job's `job_resources.allocated_nodes`."""

    nodename: Text = ""
    memory_allocated: Count = None


class JobResources(_Lenient):
    nodes: Text = ""
    allocated_nodes: tuple[AllocatedNode, ...] = ()


class SlurmJob(_Lenient):
    """One entry of `squeue --json` `jobs[]`.

    `time_limit` is minutes (null = INFINITE); `nice` is null for 0 and wraps negatives to uint32;
    `priority` 0 means held; `memory_per_node` and `memory_per_cpu` are MiB and at most one is set;
    `memory_per_tres` is `gres:gpu:<MiB>` for `--mem-per-gpu`.
    """

    job_id: Annotated[int, BeforeValidator(_number)]
    job_state: States
    state_reason: Text = ""
    priority: Count
    nice: Count = None
    user_name: Text
    account: Text = ""
    partition: Text
    qos: Text = ""
    name: Text = ""
    submit_time: Annotated[int, BeforeValidator(_number)]
    start_time: Count = None
    time_limit: Count
    tres_per_node: Text = ""
    tres_per_job: Text = ""
    tres_per_task: Text = ""
    tres_per_socket: Text = ""
    memory_per_tres: Text = ""
    gres_detail: tuple[str, ...] = ()
    nodes: Text = ""
    node_count: Count = None
    cpus: Count = None
    tasks: Count = None
    sockets_per_node: Count = None
    memory_per_node: Count = None
    memory_per_cpu: Count = None
    array_job_id: Count = None
    array_task_id: Count = None
    array_task_string: Text = ""
    het_job_id: Count = None
    reservation: Text = Field(default="", validation_alias=AliasChoices("resv_name", "reservation"))
    dependency: Text = ""
    required_nodes: Text = ""
    excluded_nodes: Text = ""
    shared: Annotated[str | None, BeforeValidator(_word_or_none)] = None
    """OverSubscribe as squeue spells it: "shared" (yes), "none" (no), ...; null when never set."""
    job_resources: JobResources | None = None

    @field_validator("gres_detail", mode="before")
    @classmethod
    def _detail(cls, value: object) -> object:
        return () if value is None else value


class SlurmNode(_Lenient):
    """One entry of `sinfo --json` `nodes[]`.

    `gres`/`gres_used` are None when the output lacks them (scontrol's text is the fallback); `""`
    means the node has no GRES. `real_memory` and `alloc_memory` are MiB.
    """

    name: Text
    state: States
    state_flags: States = ()
    gres: str | None = None
    gres_used: str | None = None
    cpus: Annotated[int, BeforeValidator(_number)]
    alloc_cpus: Count = None
    idle_cpus: Count = None
    real_memory: Annotated[int, BeforeValidator(_number)]
    alloc_memory: Count = None
    partitions: Words = ()

    @field_validator("name")
    @classmethod
    def _named(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a node name, got an empty string")
        return value.strip()


class SlurmDocument(_Lenient):
    """The envelope both commands print: `meta`, `errors` and the record list."""

    meta: dict[str, Any] = Field(default_factory=dict)
    errors: list[Any] = Field(default_factory=list)


class SqueueDocument(SlurmDocument):
    jobs: list[Any]


class SinfoDocument(SlurmDocument):
    nodes: list[Any]
