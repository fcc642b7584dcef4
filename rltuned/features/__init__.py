"""The RLTune state matrix: the 17 features of Table 3, the heuristic sampler, and the encoder.

`encode(snapshot, policy[, runtime])` is a pure function of a `ClusterSnapshot`, the same in the
simulator and on Slurm, so what the agent is trained on is what it sees in production.
docs/features.md documents every feature's formula and scale.
"""

from rltuned.features.encode import LIMIT, MAX_JOBS, PREDICTED, RUNTIME_INPUTS, Observation, encode
from rltuned.features.sampler import ACTOR_FEATURES, CRITIC_FEATURES, SAMPLER_VERSION, sample
from rltuned.features.table import FEATURE_NAMES, feature_table

__all__ = [
    "ACTOR_FEATURES",
    "CRITIC_FEATURES",
    "FEATURE_NAMES",
    "LIMIT",
    "MAX_JOBS",
    "PREDICTED",
    "RUNTIME_INPUTS",
    "SAMPLER_VERSION",
    "Observation",
    "encode",
    "feature_table",
    "sample",
]
