"""Generalized advantage estimation as a pure function (tested against hand-computed values)."""

from __future__ import annotations

import numpy as np
import numpy.typing as npt

Floats = npt.NDArray[np.float32]


def compute_gae(
    rewards: Floats, values: Floats, dones: npt.NDArray[np.bool_], last_value: float, gamma: float, lam: float
) -> tuple[Floats, Floats]:
    """Advantages and returns for one flat rollout.

    `dones[t]` is True when step t ended its episode, so nothing bootstraps across episodes;
    `last_value` bootstraps the final step if its episode was cut off (0 when it ended).
    """
    n = len(rewards)
    advantages = np.zeros(n, dtype=np.float32)
    gae = 0.0
    for t in reversed(range(n)):
        if dones[t]:
            next_value, gae = 0.0, 0.0
        else:
            next_value = float(values[t + 1]) if t + 1 < n else last_value
        delta = float(rewards[t]) + gamma * next_value - float(values[t])
        gae = delta + gamma * lam * gae
        advantages[t] = gae
    return advantages, advantages + values.astype(np.float32)
