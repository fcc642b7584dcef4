"""Each feature against values worked out by hand on clusters of two or three nodes."""

from __future__ import annotations

import dataclasses
import math
import zlib

import numpy as np
import pytest

from rltuned.domain import ClusterSpec, Job
from rltuned.features import FEATURE_NAMES, feature_table
from rltuned.features.fit import ClusterArrays
from rltuned.features.scales import HORIZON_S, MAX_AGE_S
from rltuned.features.table import Kept
from tests.builders import cluster, job
from tests.features.snapshots import NOW, snapshot

COL = {name: i for i, name in enumerate(FEATURE_NAMES)}


def row(table: np.ndarray, i: int = 0) -> dict[str, float]:
    return {name: float(table[i, c]) for name, c in COL.items()}


def test_seventeen_features_in_table_3_order() -> None:
    assert len(FEATURE_NAMES) == 17
    assert FEATURE_NAMES[:9] == (
        "job_id",
        "user",
        "gpus",
        "account",
        "gpu_type",
        "requested_time",
        "submit",
        "cpus",
        "mem",
    )


def test_single_node_job_by_hand() -> None:
    # Two 8-GPU nodes (32 CPUs, 64 GiB each): 3 GPUs free on node 0, node 1 idle.
    spec = cluster(("A", 8, 2))
    j = job(7, NOW - 100, 4, runtime=10, estimate=3600, user="alice", account="vc1")
    f = row(feature_table(snapshot(spec, [3, 8], [j]), [j]))
    assert f["gpus"] == pytest.approx(math.log(5) / math.log(17))
    assert f["requested_time"] == pytest.approx(math.log1p(3600) / math.log1p(HORIZON_S))  # never the runtime
    assert f["submit"] == pytest.approx(100 / MAX_AGE_S)
    assert f["urgency"] == pytest.approx(math.log1p(100) / math.log1p(MAX_AGE_S))
    assert f["cpus"] == pytest.approx(math.log1p(16) / math.log1p(64))  # 4 GPUs x 4 CPUs per GPU
    assert f["mem"] == pytest.approx(math.log1p(4 * 8192) / math.log1p(2 * 8 * 8192))
    assert f["free_nodes"] == pytest.approx(0.5)
    assert f["can_schedule_now"] == 1.0
    assert f["num_ways_to_schedule"] == pytest.approx(0.5)  # only node 1 holds 4 GPUs
    assert f["demand_supply_ratio"] == pytest.approx((4 / 11) / (1 + 4 / 11))
    assert f["job_size"] == pytest.approx(math.log1p(4 * 3600) / math.log1p(16 * HORIZON_S))
    assert f["future_availability"] == pytest.approx(((11 - 4) / 16 + 1) / 2)
    assert f["cff"] == pytest.approx(1 - (9 / 8 + 64 / 8) / 11)
    assert f["user"] == pytest.approx(zlib.crc32(b"alice") / 2**32, abs=1e-6)
    assert f["account"] == pytest.approx(zlib.crc32(b"vc1") / 2**32, abs=1e-6)
    assert f["gpu_type"] == 0.0  # any GPU model


def test_explicit_cpus_and_memory_are_used_as_requested() -> None:
    spec = cluster(("A", 8, 2))
    j = job(1, NOW, 2, runtime=60, cpus=6, mem_mb=1000)
    f = row(feature_table(snapshot(spec, [8, 8], [j]), [j]))
    assert f["cpus"] == pytest.approx(math.log1p(6) / math.log1p(64))
    assert f["mem"] == pytest.approx(math.log1p(1000) / math.log1p(2 * 65536))


def test_multi_node_job_by_hand() -> None:
    # Three 4-GPU nodes with 2, 4, 3 GPUs free: a 6-GPU job spans them, a 10-GPU one cannot start.
    spec = cluster(("A", 4, 3))
    six, ten = job(1, NOW, 6, 60), job(2, NOW, 10, 60)
    table = feature_table(snapshot(spec, [2, 4, 3], [six, ten]), [six, ten])
    f6, f10 = row(table, 0), row(table, 1)
    assert f6["can_schedule_now"] == 1.0
    assert f6["num_ways_to_schedule"] == 1.0  # all three nodes have usable room
    assert f6["free_nodes"] == pytest.approx(1 / 3)
    assert f6["future_availability"] == pytest.approx(((9 - 6) / 12 + 1) / 2)
    assert f10["can_schedule_now"] == 0.0
    assert f10["num_ways_to_schedule"] == 0.0
    assert f10["future_availability"] == pytest.approx(((9 - 10 - 6) / 12 + 1) / 2)
    assert f10["demand_supply_ratio"] == pytest.approx((10 / 9) / (1 + 10 / 9))


def test_a_job_some_node_can_hold_waits_for_that_node_as_in_slurm() -> None:
    # `--gres=gpu:4` is per node: with an 8-GPU node in the cluster (busy), a 4-GPU job may not be split
    # over the two free 2-GPU nodes.
    spec = cluster(("A", 2, 2), ("A", 8, 1))
    j = job(1, NOW, 4, 60)
    f = row(feature_table(snapshot(spec, [2, 2, 0], [j]), [j]))
    assert f["can_schedule_now"] == 0.0
    assert f["num_ways_to_schedule"] == 0.0


def test_a_job_that_asked_for_two_nodes_spans_the_small_ones() -> None:
    # `-N 2 --gres=gpu:2`: the two 2-GPU nodes; the 8-GPU node is not one of its ways.
    spec = cluster(("A", 2, 2), ("A", 8, 1))
    j = job(1, NOW, 4, 60, nodes=2)
    f = row(feature_table(snapshot(spec, [2, 2, 8], [j]), [j]))
    assert f["can_schedule_now"] == 1.0
    assert f["num_ways_to_schedule"] == 1.0
    assert f["free_nodes"] == 1.0


def test_cpus_can_block_a_job_with_free_gpus() -> None:
    spec = cluster(("A", 8, 1))  # 32 CPUs, 4 per GPU
    asks, share, small = job(1, NOW, 2, 60, cpus=8), job(2, NOW, 2, 60), job(3, NOW, 1, 60)
    jobs = [asks, share, small]
    table = feature_table(snapshot(spec, [8], jobs, free_cpus=[4]), jobs)
    assert [row(table, i)["can_schedule_now"] for i in range(3)] == [0.0, 0.0, 1.0]
    assert row(table, 0)["free_nodes"] == 0.0  # GPUs idle but CPUs in use: not an idle node


def test_future_availability_charges_only_competing_jobs_ahead() -> None:
    spec = cluster(("A", 8, 1), ("B", 8, 1))
    jobs = [
        job(0, NOW, 8, 60, gpu_type="A"),
        job(1, NOW, 4, 60, gpu_type="B"),
        job(2, NOW, 4, 60),  # either model: competes with both
        job(3, NOW, 2, 60, gpu_type="A"),
    ]
    table = feature_table(snapshot(spec, [8, 8], jobs), jobs)
    got = [row(table, i)["future_availability"] for i in range(4)]
    expected = [(8 - 8) / 8, (8 - 4) / 8, (16 - 4 - 8 - 4) / 16, (8 - 2 - 8 - 4) / 8]
    assert got == pytest.approx([(x + 1) / 2 for x in expected])


def test_demand_supply_ratio_is_one_when_nothing_eligible_is_free() -> None:
    spec = cluster(("A", 8, 1), ("B", 8, 1))
    j = job(1, NOW, 1, 60, gpu_type="B")
    f = row(feature_table(snapshot(spec, [8, 0], [j]), [j]))
    assert f["demand_supply_ratio"] == 1.0
    assert f["cff"] == 0.0  # nothing free on its nodes
    assert f["can_schedule_now"] == 0.0


@pytest.mark.parametrize(
    ("free", "expected"),
    [
        ([2, 0], 0.0),  # the 2-GPU node is whole: not fragmented
        ([1, 4], 1 - (1 / 2 + 16 / 8) / 5),
        ([0, 0], 0.0),
        ([0, 8], 0.0),
        ([0, 1], 1 - 1 / 8),
    ],
)
def test_cff_normalizes_each_node_by_its_size(free: list[int], expected: float) -> None:
    spec = cluster(("A", 2, 1), ("A", 8, 1))
    j = job(1, NOW, 1, 60)
    f = row(feature_table(snapshot(spec, free, [j]), [j]))
    assert f["cff"] == pytest.approx(expected)


def test_unplaceable_job_has_no_eligible_nodes() -> None:
    spec = cluster(("A", 8, 1))
    j = job(1, NOW, 64, 60)  # more GPUs than the cluster has
    f = row(feature_table(snapshot(spec, [8], [j]), [j]))
    assert f["gpus"] == 1.0
    assert f["can_schedule_now"] == f["num_ways_to_schedule"] == f["free_nodes"] == 0.0
    assert f["future_availability"] == 0.0


def test_scales_saturate_at_their_horizons() -> None:
    spec = cluster(("A", 8, 1))
    j = Job(1, NOW - 30 * 86400.0, 8, time_limit=400 * 86400.0)
    f = row(feature_table(snapshot(spec, [8], [j]), [j]))
    assert f["submit"] == f["urgency"] == f["requested_time"] == f["job_size"] == 1.0


def test_identity_codes_are_stable_across_calls() -> None:
    spec = cluster(("A", 8, 1))
    j = job(123456789, NOW, 1, 60, user="bob", gpu_type="A")
    first = feature_table(snapshot(spec, [8], [j]), [j])
    second = feature_table(snapshot(spec, [4], [j]), [j])
    ids = [COL[name] for name in ("job_id", "user", "account", "gpu_type")]
    assert np.array_equal(first[:, ids], second[:, ids])
    assert 0.0 < first[0, COL["job_id"]] < 1.0


def test_empty_queue() -> None:
    spec = cluster(("A", 8, 1))
    table = feature_table(snapshot(spec, [8]), [])
    assert table.shape == (0, 17)
    assert table.dtype == np.float32


def test_cpus_cut_the_gpus_a_multi_node_job_can_use() -> None:
    # Two 4-GPU nodes, all GPUs free, but only 8 CPUs free on node 0: at 4 CPUs per GPU it offers 2 GPUs.
    spec = cluster(("A", 4, 2))
    six, seven = job(1, NOW, 6, 60), job(2, NOW, 7, 60)
    table = feature_table(snapshot(spec, [4, 4], [six, seven], free_cpus=[8, 16]), [six, seven])
    assert row(table, 0)["can_schedule_now"] == 1.0
    assert row(table, 0)["num_ways_to_schedule"] == 1.0
    assert row(table, 1)["can_schedule_now"] == 0.0


def test_a_later_tick_on_the_same_queue_and_capacity_recomputes_only_the_age(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from rltuned.features import table as table_module

    spec = cluster(("V100", 8, 2))
    jobs = [job(0, NOW - 600.0, 2, 3600.0), job(1, NOW - 60.0, 8, 7200.0)]
    first = snapshot(spec, [3, 8], jobs)
    table_module.forget()
    before = feature_table(first, jobs)

    def no_full_build(*args: object) -> None:
        raise AssertionError("the kept table should have been used")

    monkeypatch.setattr(table_module, "_combine", no_full_build)
    later = feature_table(dataclasses.replace(first, now=first.now + 3600.0), jobs)
    age_columns = [COL["submit"], COL["urgency"]]
    others = [c for c in range(len(FEATURE_NAMES)) if c not in age_columns]
    assert (later[:, others] == before[:, others]).all()
    assert (later[:, age_columns] > before[:, age_columns]).all()
    with pytest.raises(AssertionError, match="kept table"):
        feature_table(dataclasses.replace(first, free_gpus=(2, 8)), jobs)  # other free capacity


def test_a_tick_where_only_jobs_or_only_free_capacity_moved_recomputes_only_the_part_that_reads_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An arrival on the same free capacity reuses what the capacity gave each shape; a job ending with
    the queue as it was reuses what the jobs gave. The table is the one a fresh build gives."""
    from rltuned.features import table as table_module

    spec = cluster(("V100", 8, 2))
    jobs = [job(0, NOW - 600.0, 2, 3600.0), job(1, NOW - 60.0, 8, 7200.0)]
    first = snapshot(spec, [3, 8], jobs)
    table_module.forget()
    feature_table(first, jobs)

    def not_again(*args: object) -> None:
        raise AssertionError("the kept part should have been used")

    arrived = [*jobs, job(2, NOW - 30.0, 2, 600.0)]  # a shape already queued
    with monkeypatch.context() as patch:
        patch.setattr(table_module, "_cluster_part", not_again)
        kept = feature_table(first, arrived)
    table_module.forget()
    assert kept.tobytes() == feature_table(first, arrived).tobytes()

    freed = dataclasses.replace(first, free_gpus=(5, 8))
    with monkeypatch.context() as patch:
        patch.setattr(table_module, "_job_part", not_again)
        kept = feature_table(freed, arrived)
    table_module.forget()
    assert kept.tobytes() == feature_table(freed, arrived).tobytes()

    with pytest.raises(AssertionError, match="kept part"):  # a new shape on the same capacity
        monkeypatch.setattr(table_module, "_cluster_part", not_again)
        feature_table(freed, [*arrived, job(3, NOW, 4, 600.0)])


def test_an_equal_copy_of_the_cluster_is_looked_up_by_value_once_then_by_identity(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A simulated run holds its own equal copy of the spec; hashing a spec walks every node, so after
    the first lookup the copy must be recognized by identity."""
    from rltuned.features import fit

    spec = cluster(("V100", 8, 2), ("K80", 4, 3))
    copy = dataclasses.replace(spec)
    first = fit.cluster_arrays(spec)
    lookups: list[ClusterSpec] = []

    class Counting(dict[ClusterSpec, ClusterArrays]):
        def get(self, key: ClusterSpec, default: ClusterArrays | None = None) -> ClusterArrays | None:  # type: ignore[override]
            lookups.append(key)
            return super().get(key, default)

    monkeypatch.setattr(fit, "_by_value", Counting(fit._by_value))
    assert fit.cluster_arrays(copy) is first
    assert fit.cluster_arrays(copy) is first
    assert fit.cluster_arrays(copy) is first
    assert len(lookups) == 1
    assert copy.total_gpus == spec.total_gpus == 8 * 2 + 4 * 3


def test_a_kept_queue_is_the_same_unless_a_renewed_job_differs() -> None:
    """The daemon reads new job objects from squeue every tick: equal ones still serve the kept
    table. A renewed job with a field changed does not, nor does a queue of another length."""
    jobs = tuple(job(i, float(i), 1, 100.0) for i in range(5))
    kept = Kept(jobs)
    assert kept.same(jobs)
    renewed = (jobs[0], dataclasses.replace(jobs[1]), *jobs[2:])
    assert kept.same(renewed)
    assert kept.jobs is renewed  # the next tick most likely shows these very objects
    assert not kept.same((*renewed[:3], dataclasses.replace(renewed[3], gpus=2), renewed[4]))
    assert not kept.same((*renewed[:3], dataclasses.replace(renewed[3], submit=0.5), renewed[4]))
    assert not kept.same(renewed[:4])
