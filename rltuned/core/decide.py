"""One tick's decision: rank, place the top K, plan the lever writes. Pure, and the only place it is made.

`decide` is what the daemon's engine runs every tick and what the simulator's tick loop runs every
`interval_s` of simulated time; `decide_ranked` takes a ranking made elsewhere (training samples one)
and finishes the tick by the same rules. Every ranking, the model's, a sampled one or the base's, passes
the starvation guard (`guard.py`) before it is placed and planned.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

from rltuned.core.guard import GuardSettings, guard
from rltuned.core.placement import Placements, place_top
from rltuned.core.plan import Lever, Pins, Plan, Written, make_plan
from rltuned.core.ranking import Ranking, rank_jobs
from rltuned.domain import ClusterSnapshot
from rltuned.placement.milp import MilpConfig
from rltuned.policies.base import Policy
from rltuned.rl.export import LoadedModel


@dataclass(frozen=True)
class CoreSettings:
    """The settings a decision depends on (the daemon builds them from its config, the simulator from
    its arguments or from the same config file)."""

    max_inference_ms: float = 1000.0
    milp: MilpConfig = field(default_factory=MilpConfig)
    lever: Lever = field(default_factory=Lever)
    guard: GuardSettings = field(default_factory=GuardSettings)
    refresh_s: float = 0.0
    """On a quiet tick (nothing changed since the last decision, whose plan was written whole) decide
    again only this long after it (`quiet.py`); 0: every tick."""

    @property
    def places(self) -> bool:
        """Placements are only written through OverSubscribe and ExcNodeList; with both off, none is
        computed."""
        return self.lever.oversubscribe or self.lever.steer_untyped


@dataclass(frozen=True)
class Decision:
    ranking: Ranking
    placements: Placements
    plan: Plan
    displaced_since: Mapping[int, float] = field(default_factory=dict)
    """The starvation guard's clock after this tick: `commit` it when the decision is acted on."""
    guard_deadline: float = math.inf
    """When the guard would next promote a job this ranking pushes down (`guard.Guarded.deadline`)."""

    def commit(self, written: Written) -> None:
        written.displaced_since = self.displaced_since


def decide(
    snapshot: ClusterSnapshot,
    base: Policy,
    model: LoadedModel | None,
    settings: CoreSettings,
    written: Written,
    pins: Mapping[int, Pins],
) -> Decision:
    ranking = rank_jobs(snapshot, base, model, settings.max_inference_ms)
    return decide_ranked(snapshot, ranking, settings, written, pins)


def decide_ranked(
    snapshot: ClusterSnapshot,
    ranking: Ranking,
    settings: CoreSettings,
    written: Written,
    pins: Mapping[int, Pins],
) -> Decision:
    guarded = guard(ranking, snapshot, settings.guard, written.displaced_since)
    ranking = guarded.ranking
    if settings.places:
        placements = place_top(snapshot, ranking.order, settings.milp)
    else:
        placements = Placements({}, "off")
    shown, cluster = snapshot.priorities, snapshot.cluster
    plan = make_plan(ranking, shown, placements, pins, written, cluster, settings.lever)
    return Decision(ranking, placements, plan, guarded.displaced_since, guarded.deadline)
