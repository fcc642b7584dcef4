"""From a ranking and placements to the `scontrol update`s that make Slurm follow them (pure).

Priority lever: the managed jobs get strictly decreasing priorities in plan order, inside the configured
band, so Slurm's order among them equals the plan. Churn is kept low: the longest chain of jobs that
already carry a priority rltuned wrote and that is still in plan order keeps its values, and only the
jobs between them are given new values in the gaps (`priority_step` apart where there is room); only
when a gap is too small is the whole queue renumbered. An action is emitted only where the target
differs from the priority Slurm reports now, so an unchanged plan writes nothing.

SiteFactor lever: the target is `site_factor_max * (n - rank) / n`, added to multifactor's own sum, and
written when it moved by more than the deadband since rltuned last wrote it.

Placement: the solver's pack/spread choice becomes `OverSubscribe=yes|no` for the placed jobs, and an
untyped job placed on one GPU model is steered there with `ExcNodeList=` (the other models' nodes). A
job's GPU type is never changed (Slurm accepts it and the job becomes unrunnable), and nothing is
written on a job the user pinned with ReqNodeList/ExcNodeList.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field, fields
from functools import cached_property, partial
from itertools import repeat
from typing import Any, Protocol

import numpy as np

from rltuned.core.levers import (
    EXCLUDED_NODES,
    OVERSUBSCRIBE,
    PRIORITY,
    RANKING_LEVERS,
    SITE_FACTOR,
    Action,
    LeverWrites,
)
from rltuned.core.placement import Placement, Placements
from rltuned.core.priority_kernel import NONE
from rltuned.core.priority_kernel import targets as targets_kernel
from rltuned.core.quiet import LastDecision
from rltuned.core.ranking import Ranking
from rltuned.domain import ClusterSpec, Job
from rltuned.slurm.hostlist import compress

_ID = operator.attrgetter("id")


@dataclass(frozen=True)
class Change:
    """The values rltuned last wrote on one job (None: never touched that field)."""

    priority: int | None = None
    site_factor: int | None = None
    oversubscribe: bool | None = None
    excluded_nodes: str | None = None
    oversubscribe_before: str | None = None
    """The OverSubscribe word ("yes"/"no") to restore on reset, from before rltuned's first write."""
    held: bool = False
    """rltuned's reset held the job to drop its fixed priority and has not released it yet."""


UNTOUCHED = Change()
_FIELDS = frozenset(f.name for f in fields(Change))


class Written:
    """What rltuned has written on which job: the daemon's ledger keeps it on disk (`daemon/ledger.py`),
    the simulator in memory. The planner reads it to keep churn low; appliers record into it.

    Every tick reads which jobs carry a priority rltuned wrote and which it steered, over a ledger of
    hundreds of jobs. A training episode's sampled rankings rewrite tens of priorities a tick, so a
    job's priority is kept only in its index (`_priorities`) and its other fields in `_changes`; `get`
    puts the two together. A job is in the ledger while either holds it. Every change goes through
    `_put`, `forget` or `_clear`, which keep the steered index too, except a priority write
    (`record_applied`, `record_plan`), which sets its index entry alone: a subclass that hooks `_put`
    does not see those."""

    def __init__(self, changes: Mapping[int, Change] | None = None) -> None:
        self._changes: dict[int, Change] = {}
        """Each job's change with its priority left out (None)."""
        self._priorities: dict[int, int] = {}
        self._steered: set[int] = set()
        self.version = 0
        """Counts changes, so a reader can tell the index it checked against is still the same."""
        for job_id, change in (changes or {}).items():
            self._put(job_id, change)
        self.displaced_since: Mapping[int, float] = {}
        """The starvation guard's clock (`core/guard.py`): since when each job has been pushed far below
        its base rank. Committed by the applier from each tick's decision."""
        self.last_decision: LastDecision | None = None
        """The last tick that decided (`core/quiet.py`), set by the applier once its writes are done."""

    def get(self, job_id: int) -> Change:
        change = self._changes.get(job_id, UNTOUCHED)
        priority = self._priorities.get(job_id)
        if priority is None:
            return change
        return _with(change, {"priority": priority})

    def _put(self, job_id: int, change: Change) -> None:
        self.version += 1
        if change.priority is None:
            self._priorities.pop(job_id, None)
            self._changes[job_id] = change
        else:
            self._priorities[job_id] = change.priority
            self._changes[job_id] = _with(change, _NO_PRIORITY)
        if change.excluded_nodes:
            self._steered.add(job_id)
        else:
            self._steered.discard(job_id)

    def _clear(self) -> None:
        self.version += 1
        self._changes.clear()
        self._priorities.clear()
        self._steered.clear()

    def record(self, job_id: int, **values: Any) -> None:
        """`replace(change, **values)` without its generic cost."""
        unknown = values.keys() - _FIELDS
        if unknown:
            raise TypeError(f"Change has no field {sorted(unknown)[0]!r}")
        self._put(job_id, _with(self.get(job_id), values))

    def record_applied(self, action: Action) -> None:
        """An update Slurm accepted; a cleared ExcNodeList is recorded as never set. A priority is one
        entry of its index: a simulated tick records tens of them."""
        kind = action.kind
        if kind == "priority" and action.value is not None:
            self.version += 1
            self._priorities[action.job_id] = action.value  # type: ignore[assignment]
            return
        if kind not in _FIELDS:
            raise TypeError(f"Change has no field {kind!r}")
        value = None if kind == "excluded_nodes" and action.value == "" else action.value
        self._put(action.job_id, _with(self.get(action.job_id), {kind: value}))

    def record_plan(self, actions: Sequence[Action]) -> None:
        """A plan's writes, all accepted (a simulated tick). A priority lever's (`LeverWrites`) go into
        their index at once; any other write is recorded as `record_applied` records it."""
        if isinstance(actions, LeverWrites) and actions.lever.kind == "priority":
            if actions.pairs:
                self.version += 1
                self._priorities.update(actions.pairs)
            return
        for action in actions:
            self.record_applied(action)

    def forget(self, job_id: int) -> None:
        self.version += 1
        self._changes.pop(job_id, None)
        self._priorities.pop(job_id, None)
        self._steered.discard(job_id)

    def keep_only(self, job_ids: Collection[int]) -> int:
        """Drop jobs Slurm no longer lists; returns how many were dropped."""
        gone = [j for j in self._jobs() if j not in job_ids]
        for job_id in gone:
            self.forget(job_id)
        self.displaced_since = {j: t for j, t in self.displaced_since.items() if j in job_ids}
        return len(gone)

    def _jobs(self) -> AbstractSet[int]:
        return self._changes.keys() | self._priorities.keys()

    def items(self) -> Iterator[tuple[int, Change]]:
        return iter([(job_id, self.get(job_id)) for job_id in sorted(self._jobs())])

    def __len__(self) -> int:
        return len(self._jobs())

    def steered(self) -> AbstractSet[int]:
        """Jobs rltuned has set an ExcNodeList on (to clear once they are no longer placed). The index
        itself: read it before recording anything."""
        return self._steered

    def owned_priorities(self) -> Mapping[int, int]:
        """The priority rltuned wrote on each job that has one. The index itself: read it before
        recording anything."""
        return self._priorities


_NO_PRIORITY: Mapping[str, Any] = {"priority": None}


def _with(change: Change, values: Mapping[str, Any]) -> Change:
    """`change` with `values` (known fields) replaced, without `dataclasses.replace`'s generic cost
    (Change has no __post_init__ to skip)."""
    new = object.__new__(Change)
    new.__dict__.update(change.__dict__)
    new.__dict__.update(values)
    return new


class Pins(Protocol):
    """The node lists a user set on a job (Slurm's ReqNodeList/ExcNodeList); `SlurmJobInfo` has them."""

    @property
    def required_nodes(self) -> tuple[str, ...]: ...

    @property
    def excluded_nodes(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class Lever:
    """The apply settings the planner needs (a subset of `ApplySettings`)."""

    kind: str = "priority"
    priority_max: int = 10_000_000
    priority_min: int = 1_000
    priority_step: int = 1_000
    site_factor_max: int = 100_000
    site_factor_deadband: int = 0
    max_actions: int = 256
    oversubscribe: bool = True
    steer_untyped: bool = True


@dataclass(frozen=True)
class JobPlan:
    job_id: int
    user: str
    partition: str
    rank: int
    base_rank: int
    score: float | None
    priority_now: int | None
    target: int
    """The priority (or SiteFactor) the plan gives the job."""
    placement: str
    """Node names the solver chose for a job that can start now, else empty."""
    pack: bool | None


@dataclass(frozen=True)
class Plan:
    actions: Sequence[Action]
    """Capped at `max_actions`, top ranks first. Without placement writes, a `LeverWrites`."""
    capped: int
    """Actions left for later ticks by the cap."""
    describe: Callable[[], tuple[JobPlan, ...]] = field(default=tuple, repr=False, compare=False)

    @cached_property
    def jobs(self) -> tuple[JobPlan, ...]:
        """One row per managed job, in plan order. Built when read (`plan`, `explain`, the metrics):
        the simulator's ticks never read them."""
        return self.describe()


def make_plan(
    ranking: Ranking,
    shown: Mapping[int, int],
    placements: Placements,
    info: Mapping[int, Pins],
    ledger: Written,
    cluster: ClusterSpec,
    lever: Lever,
) -> Plan:
    """The tick's writes; `shown` is the priority Slurm shows for each pending job
    (`ClusterSnapshot.priorities`).

    Without placements or steered jobs (the training configuration), the writes depend only on the
    order, the priorities Slurm shows, the ledger and the lever. Where a model ranks deterministically
    (evaluation, validation, the daemon's loop in the simulator), most ticks see those of the tick
    before (63% of ITP's ticks and 73% of Philly's), and the last plan's targets and writes are kept for
    them (tests/core/test_plan.py compares with a fresh plan). A training episode's sampled rankings
    change the order nearly every tick, so there it seldom applies."""
    global _last_plan  # noqa: PLW0603 - a one-entry memo of the last plan's writes
    order = ranking.order
    memo = not placements.by_job and not ledger.steered()
    last = _last_plan
    if (
        memo
        and last is not None
        and last.ledger is ledger
        and last.version == ledger.version
        and len(last.order) == len(order)
        and all(map(operator.is_, last.order, order))
        and last.lever == lever
        and (last.shown is shown or last.shown == shown)
    ):
        return Plan(last.actions, last.capped, partial(_rows, ranking, shown, placements, last.targets))
    version = ledger.version  # read first: a ledger written during the plan must not match it later
    targets = _targets(order, shown, ledger, lever)
    actions = _actions(order, shown, targets, placements, info, ledger, cluster, lever)
    kept = actions[: lever.max_actions]
    capped = len(actions) - len(kept)
    _last_plan = _LastPlan(ledger, version, order, shown, lever, targets, kept, capped) if memo else None
    return Plan(kept, capped, partial(_rows, ranking, shown, placements, targets))


def forget_plan() -> None:
    """Drop the kept writes, so the next `make_plan` computes them (tests compare the two)."""
    global _last_plan  # noqa: PLW0603
    _last_plan = None


@dataclass(frozen=True, slots=True, eq=False)
class _LastPlan:
    ledger: Written
    version: int
    order: tuple[Job, ...]
    shown: Mapping[int, int]
    lever: Lever
    targets: Mapping[int, int]
    actions: Sequence[Action]
    capped: int


_last_plan: _LastPlan | None = None


def _targets(order: Sequence[Job], shown: Mapping[int, int], ledger: Written, lever: Lever) -> dict[int, int]:
    """Each job's value of the lever in plan order."""
    if lever.kind == "priority":
        return priority_targets(
            list(map(_ID, order)),
            shown,
            ledger.owned_priorities(),
            lever.priority_min,
            lever.priority_max,
            lever.priority_step,
        )
    if lever.kind == "site_factor":
        n = len(order)
        return {job.id: round(lever.site_factor_max * (n - r) / n) for r, job in enumerate(order)}
    raise ValueError(f"lever must be one of {RANKING_LEVERS}, got {lever.kind!r}")


def _actions(
    order: Sequence[Job],
    shown: Mapping[int, int],
    targets: Mapping[int, int],
    placements: Placements,
    info: Mapping[int, Pins],
    ledger: Written,
    cluster: ClusterSpec,
    lever: Lever,
) -> Sequence[Action]:
    """The writes that move Slurm to the targets and placements, top ranks first: each job's lever
    write, then its placement writes."""
    lever_writes = _lever_writes(order, shown, targets, ledger, lever)
    by_job = placements.by_job
    steered = ledger.steered()
    if not by_job and not steered:  # no placement lever to write or undo (the training configuration)
        return lever_writes
    writes = {action.job_id: action for action in lever_writes}
    actions: list[Action] = []
    for job in order:
        write = writes.get(job.id)
        if write is not None:
            actions.append(write)
        placed = by_job.get(job.id)
        if placed is None and job.id not in steered:
            continue
        job_info = info.get(job.id) if placed is not None else None
        actions.extend(_placement_actions(job, ledger.get(job.id), job_info, placed, cluster, lever))
    return tuple(actions)


def _lever_writes(
    order: Sequence[Job], shown: Mapping[int, int], targets: Mapping[int, int], ledger: Written, lever: Lever
) -> LeverWrites:
    """The ranking lever's write per job, in plan order: a priority wherever Slurm shows another value;
    a SiteFactor where the target moved by more than the deadband since rltuned last wrote it. One
    comprehension for the priority lever: a training tick runs it over the whole queue."""
    if lever.kind == PRIORITY.kind:  # the targets are in plan order (`_targets`)
        now = shown.get
        return LeverWrites(PRIORITY, [(i, t) for i, t in targets.items() if now(i) != t])
    writes: list[tuple[int, int]] = []
    for job in order:
        target = targets[job.id]
        written = ledger.get(job.id).site_factor
        if written != target and (written is None or abs(written - target) > lever.site_factor_deadband):
            writes.append((job.id, target))
    return LeverWrites(SITE_FACTOR, writes)


def _rows(
    ranking: Ranking, shown: Mapping[int, int], placements: Placements, targets: Mapping[int, int]
) -> tuple[JobPlan, ...]:
    base_rank = {job.id: r for r, job in enumerate(ranking.base_order)}
    rows = []
    for rank, job in enumerate(ranking.order):
        placed = placements.by_job.get(job.id)
        rows.append(
            JobPlan(
                job.id,
                job.user,
                job.partition,
                rank,
                base_rank.get(job.id, rank),
                ranking.scores.get(job.id),
                shown.get(job.id),
                targets[job.id],
                ",".join(placed.nodes) if placed else "",
                placed.pack if placed else None,
            )
        )
    return tuple(rows)


def _placement_actions(
    job: Job,
    change: Change,
    info: Pins | None,
    placed: Placement | None,
    cluster: ClusterSpec,
    lever: Lever,
) -> list[Action]:
    out: list[Action] = []
    if placed is None and change.excluded_nodes:  # steered on an earlier tick and did not start: free it
        out.append(EXCLUDED_NODES.action(job.id, ""))
    if placed is None or info is None:
        return out
    if lever.oversubscribe and change.oversubscribe != placed.pack:
        out.append(OVERSUBSCRIBE.action(job.id, placed.pack))
    pinned_by_user = info.required_nodes or (info.excluded_nodes and change.excluded_nodes is None)
    if lever.steer_untyped and job.gpu_type is None and not pinned_by_user:
        others = [n.name for n in cluster.nodes if n.gpu_type != placed.gpu_type]
        excluded = compress(others) if others else ""
        if excluded != (change.excluded_nodes or "") and excluded:
            out.append(EXCLUDED_NODES.action(job.id, excluded))
    return out


def priority_targets(
    order: Sequence[int],
    current: Mapping[int, int],
    owned: Mapping[int, int],
    low: int,
    high: int,
    step: int,
) -> dict[int, int]:
    """Strictly decreasing priorities in `order`, within [low, high], reusing values rltuned wrote.

    `current` is what Slurm reports; a job keeps its value only if rltuned wrote it (`owned`) and Slurm
    still shows it, and it lies on the longest chain of such jobs already in order (patience sorting's);
    the jobs between two kept ones get values `step` apart where the room allows (stepping up from the
    first kept job above it, down from a kept job below it, leaving room under the last new one if
    another kept job follows); if any gap is too small, the whole queue is renumbered `step` apart from a
    quarter below the band's top, so that jobs that later move ahead of all others still find room
    above. One compiled call (`priority_kernel.targets`): a sampled ranking moves most of the queue.
    """
    if not order:
        return {}
    n = len(order)
    values: list[int] = targets_kernel(
        np.fromiter(map(current.get, order, repeat(NONE, n)), np.int64, n),
        np.fromiter(map(owned.get, order, repeat(NONE, n)), np.int64, n),
        low,
        high,
        step,
    ).tolist()
    return dict(zip(order, values, strict=True))
