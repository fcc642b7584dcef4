"""A discrete-event loop in SimPy's shape: a heap of (time, priority, seq, payload), knowing nothing of jobs.

Events at the same time pop in priority order, then in the order they were scheduled, so every run of
the same input is identical.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from itertools import count
from typing import Generic, TypeVar

T = TypeVar("T")


class EmptySchedule(Exception):
    """Raised by `step` when no event is left."""


class Engine(Generic[T]):
    def __init__(self) -> None:
        self.now = float("-inf")
        self._heap: list[tuple[float, int, int, T]] = []
        self._seq = count()

    def __len__(self) -> int:
        return len(self._heap)

    def schedule(self, time: float, priority: int, payload: T) -> None:
        if time < self.now:
            raise ValueError(f"event time ({time}) must not be before the current time ({self.now})")
        heapq.heappush(self._heap, (time, priority, next(self._seq), payload))

    def schedule_all(self, events: Iterable[tuple[float, int, T]]) -> None:
        """`schedule` each (time, priority, payload) in turn, in one heapify: a run's arrivals, known
        before it starts, cost a C loop instead of a push each."""
        heap, seq, now = self._heap, self._seq, self.now
        added = [(time, priority, next(seq), payload) for time, priority, payload in events]
        if any(e[0] < now for e in added):
            raise ValueError(f"event times must not be before the current time ({now})")
        heap.extend(added)
        heapq.heapify(heap)

    def peek(self) -> float:
        """The time of the next event, or +inf when none is left."""
        return self._heap[0][0] if self._heap else float("inf")

    def step(self) -> tuple[float, int, T]:
        """Pop the next event and advance the clock to it."""
        if not self._heap:
            raise EmptySchedule()
        time, priority, _, payload = heapq.heappop(self._heap)
        self.now = time
        return time, priority, payload

    def pop_simultaneous(self) -> list[tuple[int, T]]:
        """Pop every event at the next event time (a scheduler decides once per instant)."""
        heap = self._heap
        if not heap:
            raise EmptySchedule()
        time, priority, _, payload = heapq.heappop(heap)
        self.now = time
        batch = [(priority, payload)]
        while heap and heap[0][0] == time:
            _, priority, _, payload = heapq.heappop(heap)
            batch.append((priority, payload))
        return batch
