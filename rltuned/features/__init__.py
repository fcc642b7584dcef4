"""The RLTune state matrix: the 17 features of Table 3, the heuristic sampler, and the encoder.

`encode(snapshot, policy)` is a pure function of a `ClusterSnapshot`, the same in the simulator and on
Slurm, so what the agent is trained on is what it sees in production. docs/features.md documents every
feature's formula and scale.
"""

from rltuned.features.encode import MAX_JOBS, Observation, encode
from rltuned.features.sampler import ACTOR_FEATURES, CRITIC_FEATURES, SAMPLER_VERSION, sample
from rltuned.features.table import FEATURE_NAMES, feature_table

__all__ = [
    "ACTOR_FEATURES",
    "CRITIC_FEATURES",
    "FEATURE_NAMES",
    "MAX_JOBS",
    "SAMPLER_VERSION",
    "Observation",
    "encode",
    "feature_table",
    "sample",
]
