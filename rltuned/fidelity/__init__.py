"""How close the simulator's Slurm is to a real Slurm: a finished workload, simulated and compared."""
