"""Writes paced by a token bucket, so that rltuned stays well inside slurmctld's RPC rate limiter.

Slurm's limiter (`SlurmctldParameters=rl_enable`) gives each user a bucket of `rl_bucket_size` (30) RPCs
refilled at `rl_refill_rate` (2) per second; the defaults here (a burst of 20, 1 write per second) stay
under it with room for the reads. A write that would have to wait past the tick's deadline is not sent:
the plan is in rank order, so what is left is the least important part, and the next tick plans again.
"""

from __future__ import annotations

import time
from collections.abc import Callable


class Pacer:
    def __init__(
        self,
        rate_per_s: float,
        burst: int,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate_per_s
        self.burst = float(burst)
        self.clock = clock
        self.sleep = sleep
        self.tokens = float(burst)
        self.at = clock()

    def take(self, deadline: float) -> bool:
        """Wait for a token (rate 0: unpaced); False, without waiting, if it would come after `deadline`."""
        if self.rate <= 0:
            return True
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.at) * self.rate)
        self.at = now
        if self.tokens < 1.0:
            wait = (1.0 - self.tokens) / self.rate
            if now + wait > deadline:
                return False
            self.sleep(wait)
            self.tokens, self.at = 1.0, now + wait
        self.tokens -= 1.0
        return True
