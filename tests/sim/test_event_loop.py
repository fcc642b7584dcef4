"""The event loop: equal times pop in priority order, then in the order they were scheduled."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltuned.sim.engine import Engine

EVENTS = st.lists(st.tuples(st.integers(0, 5).map(float), st.integers(0, 1), st.integers()), max_size=40)


def drain(engine: Engine[int]) -> list[tuple[float, list[tuple[int, int]]]]:
    out = []
    while len(engine):
        batch = engine.pop_simultaneous()
        out.append((engine.now, batch))
    return out


@given(EVENTS, EVENTS)
def test_scheduling_many_at_once_pops_as_scheduling_each(
    first: list[tuple[float, int, int]], more: list[tuple[float, int, int]]
) -> None:
    """A run's arrivals go in with one heapify (`schedule_all`); the batches, their order within each
    instant included, are those of scheduling the events one by one, also after others."""
    one, many = Engine[int](), Engine[int]()
    for time, priority, payload in first:
        one.schedule(time, priority, payload)
        many.schedule(time, priority, payload)
    for time, priority, payload in more:
        one.schedule(time, priority, payload)
    many.schedule_all(more)
    assert drain(many) == drain(one)


def test_no_event_goes_before_the_clock() -> None:
    engine = Engine[str]()
    engine.schedule(10.0, 0, "a")
    engine.pop_simultaneous()
    with pytest.raises(ValueError, match="before the current time"):
        engine.schedule_all([(11.0, 0, "b"), (9.0, 0, "c")])
    assert len(engine) == 0  # nothing of a refused batch was scheduled
