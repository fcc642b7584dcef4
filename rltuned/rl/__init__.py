"""The learning half of RLTune: PPO actor-critic over the state matrix, trained against the simulator."""
