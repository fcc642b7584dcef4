"""The learning half of RLTune: PPO actor-critic over the state matrix, trained against the simulator."""

from typing import Literal, get_args

REWARDS = ("terminal", "dense", "relative")
"""How the environment pays the reward (rltuned.rl.env, rltuned.rl.tick_env); here so the CLI can list
it without gymnasium. `relative` is the daemon's loop's only."""
PAPER_REWARDS = ("terminal", "dense")

LOOPS = ("ticks", "paper")
"""The training and evaluation loops: the daemon's (one ranking per tick, rl/tick_env.py) and the
paper-replication loop (one job chosen per decision, rl/env.py)."""
Engine = Literal["compiled", "torchscript"]
ENGINES: tuple[str, ...] = get_args(Engine)
"""What runs a model's forward pass: its compiled kernel where its graph has one (rl/actor_kernel.py;
TorchScript otherwise), or always the TorchScript interpreter. The two compute the same function to
float32 rounding, and rounding differences order near-ties differently, which a schedule can amplify
(docs/performance.md): figures recorded before the kernel existed are reproduced with "torchscript"."""
METRIC_NAMES = ("bsld", "wait", "jct", "util")
"""What a model is trained to improve (rl/env.py maps each to a field of the simulator's metrics)."""
