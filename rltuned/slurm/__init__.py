"""The Slurm adapter: reading squeue/sinfo into the same `ClusterSnapshot` the simulator produces.

`parse` holds the pure half (recorded text in, snapshot out); `models` the pydantic edge for Slurm's
JSON; `gres` and `hostlist` the two string grammars Slurm prints.
"""

from rltuned.slurm.parse import (
    JobTable,
    NodeTable,
    ParseReport,
    SlurmJobInfo,
    parse_jobs,
    parse_nodes,
    snapshot_from_slurm,
)

__all__ = [
    "JobTable",
    "NodeTable",
    "ParseReport",
    "SlurmJobInfo",
    "parse_jobs",
    "parse_nodes",
    "snapshot_from_slurm",
]
