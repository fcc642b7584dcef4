"""Compiled multi-node pack (`placement/compiled.py`) against greedy's Python rule, on random capacity."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.domain import ClusterSpec, Job, Slice
from rltuned.placement import greedy
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import build_pools, demand_for
from tests.builders import cluster


@st.composite
def busy_pools(draw: st.DrawFn) -> tuple[FreeCapacity, list[Job], ClusterSpec]:
    """A pool of 16-40 nodes (past `COMPILED_FROM`) with 1, 2 or 4 GPUs each, every node partly used,
    and jobs larger than a node, with or without CPUs asked."""
    per_node = draw(st.sampled_from([1, 2, 4]))
    count = draw(st.integers(greedy.COMPILED_FROM, 40))
    spec = cluster(("V100", per_node, count), cpus_per_gpu=4, mem_per_gpu=8192)
    used = [draw(st.integers(0, per_node)) for _ in range(count)]
    cpu_used = [draw(st.integers(0, 4 * (per_node - u))) if u < per_node else 4 * per_node for u in used]
    free = FreeCapacity(
        [per_node - u for u in used],
        [n.cpus - c for n, c in zip(spec.nodes, cpu_used, strict=True)],
        [n.mem_mb - 8192 * u for n, u in zip(spec.nodes, used, strict=True)],
    )
    jobs = [
        Job(
            i,
            0.0,
            draw(st.integers(per_node + 1, per_node * count)),
            runtime=1.0,
            cpus=draw(st.sampled_from([0, 0, 3])),
        )
        for i in range(5)
    ]
    return free, jobs, spec


@given(busy_pools())
@settings(max_examples=200, deadline=None)
def test_compiled_multi_node_pack_places_as_the_python_rule(
    case: tuple[FreeCapacity, list[Job], ClusterSpec],
) -> None:
    free, jobs, spec = case
    pools = build_pools(spec)
    for job in jobs:
        demand = demand_for(job, pools)
        if demand is None:
            continue
        compiled = place(demand, pools, free, "pack")
        saved = greedy.COMPILED_FROM
        greedy.COMPILED_FROM = 10**9  # the Python scan for every pool size
        try:
            python = place(demand, pools, free, "pack")
        finally:
            greedy.COMPILED_FROM = saved
        assert compiled == python


def test_a_multi_node_placement_shares_its_slices_and_the_table_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Slices are immutable, so the compiled pack hands out one object per distinct slice: an SWF job's
    tens of slices are not built again for every job (`greedy._SLICES`). They must still be Slices
    (a plain tuple compares equal to one), and once the table is full new ones are built, not kept."""
    spec = cluster(("V100", 1, 32), cpus_per_gpu=4, mem_per_gpu=8192)
    pools = build_pools(spec)
    free = FreeCapacity(
        [n.gpus for n in spec.nodes], [n.cpus for n in spec.nodes], [n.mem_mb for n in spec.nodes]
    )
    demand = demand_for(Job(1, 0.0, 20, runtime=1.0), pools)
    assert demand is not None
    monkeypatch.setattr(greedy, "_SLICES", {})
    first, again = place(demand, pools, free, "pack"), place(demand, pools, free, "pack")
    assert first is not None and again is not None and len(first) == 20
    assert all(type(s) is Slice for s in first)
    assert all(a is b for a, b in zip(first, again, strict=True))
    assert len(greedy._SLICES) == 20
    monkeypatch.setattr(greedy, "_SLICES_KEPT", 20)
    wider = place(demand_for(Job(2, 0.0, 24, runtime=1.0), pools), pools, free, "pack")  # type: ignore[arg-type]
    assert wider is not None and [tuple(s) for s in wider] == [(n, 1, 4, 8192) for n in range(24)]
    assert all(type(s) is Slice for s in wider) and len(greedy._SLICES) == 20
