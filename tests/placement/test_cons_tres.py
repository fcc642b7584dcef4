"""Slurm 22.05 cons_tres's node for a job on one node, on the lab (k80-1, k80-2, m40-1, p100-1, p100-2 in
Slurm's order; 8 CPUs each; 2, 2, 1, 4, 4 GPUs): the worked examples of Slurm's `_eval_nodes` (runs of
adjacent candidate nodes, the run with the fewest free CPUs, in it the node with the fewest)."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltuned.clusters import load_cluster
from rltuned.domain import Slice
from rltuned.placement.greedy import FreeCapacity, place
from rltuned.placement.pools import build_pools, demand_for
from tests.builders import job

LAB = load_cluster(str(Path(__file__).resolve().parents[1] / "fixtures" / "slurm" / "sinfo.json"))
NAMES = [n.name for n in LAB.nodes]
POOLS = build_pools(LAB)


def node_for(gpus: int, free: FreeCapacity) -> str | None:
    demand = demand_for(job(1, 0, gpus, 60, cpus=1), POOLS)
    assert demand is not None
    alloc = place(demand, POOLS, free, "cons_tres")
    return None if alloc is None else NAMES[alloc[0].node]


def idle() -> FreeCapacity:
    return FreeCapacity([n.gpus for n in LAB.nodes], [8] * 5, [64000] * 5)


def test_the_lab_is_in_slurms_order() -> None:
    assert NAMES == ["k80-1", "k80-2", "m40-1", "p100-1", "p100-2"]


@pytest.mark.parametrize(("gpus", "node"), [(1, "k80-1"), (2, "k80-1"), (4, "p100-1")])
def test_on_the_idle_lab(gpus: int, node: str) -> None:
    # 1 GPU: one run of all five nodes, 8 CPUs each: the first. Not the m40, which a GPU best fit picks.
    # 2 GPUs: runs {k80-1, k80-2} and {p100-1, p100-2} tie at 16 CPUs: the first.
    assert node_for(gpus, idle()) == node


@pytest.mark.parametrize(("gpus", "node"), [(1, "k80-2"), (2, "k80-2"), (4, "p100-1")])
def test_with_k80_1_full(gpus: int, node: str) -> None:
    free = idle()
    free.take((Slice(0, 2, 1, 0),))
    # 2 GPUs: {k80-2} (8 CPUs) is a tighter run than {p100-1, p100-2} (16).
    assert node_for(gpus, free) == node


@pytest.mark.parametrize(("gpus", "node"), [(1, "k80-1"), (2, "k80-2")])
def test_with_one_gpu_used_on_k80_1(gpus: int, node: str) -> None:
    free = idle()
    free.take((Slice(0, 1, 1, 0),))
    # 1 GPU: k80-1 has 7 free CPUs, the fewest in the one run: Slurm packs there.
    assert node_for(gpus, free) == node


def test_a_stream_of_one_gpu_jobs_fills_the_lab_in_slurms_order() -> None:
    free, order = idle(), []
    while (name := node_for(1, free)) is not None:
        order.append(name)
        free.take((Slice(NAMES.index(name), 1, 1, 0),))
    assert order == ["k80-1"] * 2 + ["k80-2"] * 2 + ["m40-1"] + ["p100-1"] * 4 + ["p100-2"] * 4


def test_the_tightest_run_beats_the_lower_index() -> None:
    free = idle()
    free.take((Slice(2, 1, 1, 0), Slice(4, 4, 1, 0)))  # m40-1 and p100-2 GPU-full
    # Runs {k80-1, k80-2}: 16 CPUs; {p100-1}: 8. The smaller run wins.
    assert node_for(1, free) == "p100-1"
