"""Every lever rltuned pulls on a Slurm job, each defined once: the `scontrol update` key it writes and
how a value becomes that key's word, how `reset` undoes it, its ledger field (`Change.<kind>`), whether
the pyslurm backend can write it, the config setting that turns it on, and what in slurmctld's
configuration would make it ineffective.

The planner (`plan.py`) writes through `LeverSpec.action`, the engine's reset undoes through `LeverSpec.undo`,
the service checks the backend with `pyslurm_cannot` and slurm.conf with `conf_problems`. Adding a
lever is one entry here, one field on `Change`, and the planner's rule for when to pull it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, overload

if TYPE_CHECKING:
    from rltuned.core.plan import Change

HOLD_RELEASE: Mapping[str, str] = {}
"""`undo`'s answer for a fixed priority: `scontrol hold` then `release` (multifactor recomputes; no
update can return a job to "priority not fixed")."""


@dataclass(frozen=True, init=False)
class Action:
    """One pull of one lever on one job, as the planner emits it and appliers write it. Defined here,
    beside the levers, so that `LeverSpec.action` builds it without importing the planner per call."""

    job_id: int
    kind: str
    """"priority", "site_factor", "oversubscribe" or "excluded_nodes"."""
    fields: tuple[tuple[str, str], ...]
    """key=value pairs for `scontrol update jobid=N ...`, in order."""
    value: int | bool | str
    """What the ledger records once Slurm accepted it."""
    needs_pending: bool = False
    """Placement levers: re-check that the job is still pending just before writing."""

    def __init__(
        self,
        job_id: int,
        kind: str,
        fields: tuple[tuple[str, str], ...],
        value: int | bool | str,
        needs_pending: bool = False,
    ) -> None:
        """The frozen dataclass's own `__init__` sets each field through `object.__setattr__`, three
        times this cost; a training tick plans tens of actions (57 a plan on Philly with an untrained
        actor: a sampled ranking moves most of the queue)."""
        vars(self).update(job_id=job_id, kind=kind, fields=fields, value=value, needs_pending=needs_pending)


def _no_conf_problem(config: Mapping[str, str]) -> list[str]:
    return []


@dataclass(frozen=True)
class LeverSpec:
    kind: str
    """The `Action.kind` and the `Change` field the ledger keeps."""
    key: str
    """The `scontrol update` key."""
    enabled_by: str
    """The config setting that turns it on (what an error message names)."""
    pyslurm: bool
    """The pyslurm backend can write it (it sets priority and node lists only, and cannot clear a list)."""
    word: Callable[[Any], str]
    undo: Callable[[Change], Mapping[str, str] | None]
    """The update that puts the job back (`HOLD_RELEASE` for hold+release; None: nothing to undo)."""
    needs_pending: bool = False
    """Placement levers: re-check that the job still pends just before writing."""
    conf_problems: Callable[[Mapping[str, str]], list[str]] = field(default=_no_conf_problem)
    """What in `scontrol show config` would make this lever ineffective, one sentence each."""

    def action(self, job_id: int, value: int | bool | str) -> Action:
        return Action(job_id, self.kind, ((self.key, self.word(value)),), value, self.needs_pending)


class LeverWrites(Sequence[Action]):
    """A ranking lever's writes in plan order, one per job, as (job id, value) pairs, made `Action`s
    only when read. The daemon reads the actions; a simulated tick applies the pairs (`SlurmRun.apply`,
    `Written.record_plan`) and never reads them: a training episode's sampled rankings rewrite tens of
    priorities a tick, and each action was a new object (docs/performance.md, "twentieth step")."""

    __slots__ = ("_actions", "lever", "pairs")

    def __init__(self, lever: LeverSpec, pairs: Sequence[tuple[int, int]]) -> None:
        self.lever = lever
        self.pairs = pairs
        self._actions: tuple[Action, ...] | None = None

    def actions(self) -> tuple[Action, ...]:
        if self._actions is None:
            action = self.lever.action
            self._actions = tuple(action(job_id, value) for job_id, value in self.pairs)
        return self._actions

    def __len__(self) -> int:
        return len(self.pairs)

    def __iter__(self) -> Iterator[Action]:
        return iter(self.actions())

    @overload
    def __getitem__(self, index: int) -> Action: ...

    @overload
    def __getitem__(self, index: slice) -> LeverWrites: ...

    def __getitem__(self, index: int | slice) -> Action | LeverWrites:
        if isinstance(index, slice):
            return LeverWrites(self.lever, self.pairs[index])
        return self.actions()[index]

    def __eq__(self, other: object) -> bool:
        """Equal to any sequence of the same actions (a plan compares with one built action by action)."""
        if isinstance(other, LeverWrites):
            return self.lever == other.lever and list(self.pairs) == list(other.pairs)
        return isinstance(other, Sequence) and self.actions() == tuple(other)

    def __hash__(self) -> int:
        return hash(self.actions())

    def __repr__(self) -> str:
        return f"LeverWrites({self.lever.kind}, {list(self.pairs)!r})"


def _priority_conf(config: Mapping[str, str]) -> list[str]:
    if config.get("PriorityType", "") == "priority/basic":
        return [
            "PriorityType=priority/basic gives new jobs priorities near 2^32, above rltuned's band: "
            "new jobs will run before the plan's order"
        ]
    return []


def _site_factor_conf(config: Mapping[str, str]) -> list[str]:
    plugin = config.get("PriorityType", "")
    if plugin and plugin != "priority/multifactor":
        return [f"lever site_factor needs PriorityType=priority/multifactor, this Slurm runs {plugin}"]
    return []


PRIORITY = LeverSpec(
    "priority",
    "Priority",
    'apply.lever = "priority"',
    pyslurm=True,
    word=str,
    undo=lambda change: HOLD_RELEASE if change.priority is not None else None,
    conf_problems=_priority_conf,
)
SITE_FACTOR = LeverSpec(
    "site_factor",
    "SiteFactor",
    'apply.lever = "site_factor"',
    pyslurm=False,
    word=str,
    undo=lambda change: {"SiteFactor": "0"} if change.site_factor else None,
    conf_problems=_site_factor_conf,
)
OVERSUBSCRIBE = LeverSpec(
    "oversubscribe",
    "OverSubscribe",
    "placement.oversubscribe = true",
    pyslurm=False,
    word=lambda pack: "yes" if pack else "no",
    # scontrol cannot unset OverSubscribe: a job that had none gets "no", what the default partition
    # setting (OverSubscribe=NO) gives it.
    undo=lambda c: {"OverSubscribe": c.oversubscribe_before or "no"} if c.oversubscribe is not None else None,
    needs_pending=True,
)
EXCLUDED_NODES = LeverSpec(
    "excluded_nodes",
    "ExcNodeList",
    "placement.steer_untyped = true",
    pyslurm=False,
    word=str,
    # Only jobs without an ExcNodeList of their user's are steered, so cleared is the job's own value.
    undo=lambda change: {"ExcNodeList": ""} if change.excluded_nodes else None,
    needs_pending=True,
)
LEVERS: Mapping[str, LeverSpec] = {
    lever.kind: lever for lever in (PRIORITY, SITE_FACTOR, OVERSUBSCRIBE, EXCLUDED_NODES)
}
RANKING_LEVERS = (PRIORITY.kind, SITE_FACTOR.kind)
"""The levers that carry the ranking (`apply.lever`); the others carry placements."""


def enabled(ranking_lever: str, oversubscribe: bool, steer_untyped: bool) -> list[LeverSpec]:
    """The levers a configuration pulls."""
    out = [LEVERS[ranking_lever]]
    if oversubscribe:
        out.append(OVERSUBSCRIBE)
    if steer_untyped:
        out.append(EXCLUDED_NODES)
    return out


def pyslurm_cannot(levers: list[LeverSpec]) -> list[str]:
    return [lever.enabled_by for lever in levers if not lever.pyslurm]


def priority_flags(config: Mapping[str, str]) -> frozenset[str]:
    """The flags of `scontrol show config`'s PriorityFlags line, upper-cased."""
    return frozenset(f.strip().upper() for f in config.get("PriorityFlags", "").split(",") if f.strip())


def conf_problems(config: Mapping[str, str], levers: list[LeverSpec]) -> list[str]:
    """What in slurmctld's configuration would make the configured levers ineffective."""
    flags = priority_flags(config)
    problems: list[str] = []
    if "INCR_ONLY" in flags:
        problems.append(
            "PriorityFlags has INCR_ONLY: priorities only rise, so lowering a job's rank is ignored"
        )
    for lever in levers:
        problems += lever.conf_problems(config)
    return problems
