"""The decision core: what one tick decides, as pure functions of a `ClusterSnapshot`.

The daemon's engine calls `decide` every tick on a snapshot read from Slurm; the simulator's tick loop
calls the very same function every `interval_s` of simulated time on a snapshot built as the Slurm
adapter builds it. This package sits below both `daemon/` and `sim/` in the import graph, so what a
policy is trained and evaluated with is what serves: ranking (`ranking`), top-K placement
(`placement`), the lever targets (`plan`), and the one model wrapper with its checks (`scoring`).
"""

from rltuned.core.decide import CoreSettings, Decision, decide, decide_ranked
from rltuned.core.levers import Action
from rltuned.core.placement import Placement, Placements, place_top
from rltuned.core.plan import Change, JobPlan, Lever, Plan, Written, make_plan
from rltuned.core.ranking import Ranking, rank_jobs, ranking_from_slots

__all__ = [
    "Action",
    "Change",
    "CoreSettings",
    "Decision",
    "JobPlan",
    "Lever",
    "Placement",
    "Placements",
    "Plan",
    "Ranking",
    "Written",
    "decide",
    "decide_ranked",
    "make_plan",
    "place_top",
    "rank_jobs",
    "ranking_from_slots",
]
