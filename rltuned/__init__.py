"""rltuned: a learned scheduler for Slurm GPU clusters, after RLTune (SoCC'25)."""

__version__ = "0.1.0"
