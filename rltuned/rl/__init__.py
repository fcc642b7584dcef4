"""The learning half of RLTune: PPO actor-critic over the state matrix, trained against the simulator."""

REWARDS = ("terminal", "dense")
"""How the environment pays the reward (rltuned.rl.env); here so the CLI can list it without gymnasium."""
