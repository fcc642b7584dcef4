"""The paper's Table 5 formulas, computed with the current wait, and Slurm's multifactor breakdown."""

from __future__ import annotations

import math
from types import MappingProxyType

import pytest

from rltuned.domain import ClusterSnapshot, History, Job, PriorityContext
from rltuned.errors import UsageError
from rltuned.policies import make_policy, rank
from rltuned.policies.multifactor import Multifactor, fairshare
from tests.builders import cluster, job


def ctx(now: float, **usage: float) -> PriorityContext:
    return PriorityContext(now, 64, History(usage=MappingProxyType(usage)))


def test_wfp3_uses_the_wait_so_far_not_a_start_time() -> None:
    long_waiter = job(0, 0, 1, 1000)
    newcomer = job(1, 900, 1, 10)
    wfp3 = make_policy("wfp3")
    assert wfp3.key(long_waiter, ctx(1000)) == pytest.approx(-((1000 / 1000) ** 3))
    assert wfp3.key(newcomer, ctx(1000)) == pytest.approx(-((100 / 10) ** 3))
    # Order flips as time passes: a job's priority grows with its wait.
    assert wfp3.key(newcomer, ctx(901)) > wfp3.key(long_waiter, ctx(901))


def test_unicep_is_finite_for_single_gpu_jobs() -> None:
    value = make_policy("unicep").key(job(0, 0, 1, 100), ctx(50))
    assert value == pytest.approx(-50 / (math.log2(2) * 100))


def test_f1_measures_submit_from_the_origin() -> None:
    f1 = make_policy("f1")
    j = job(0, 1_000_100, 2, 1000)
    origin_ctx = PriorityContext(0, 64, origin=1_000_000)
    assert f1.key(j, origin_ctx) == pytest.approx(math.log10(1000) * 2 + 870 * math.log10(100))


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        # estimate 400 s, 4 GPUs, submitted 100 s after the origin (Carastan-Santos and de Camargo, SC'17)
        ("f1", math.log10(400) * 4 + 870 * 2),
        ("f2", 20 * 4 + 25_600 * 2),
        ("f3", 400 * 4 + 6_860_000 * 2),
        ("f4", 400 * 2 + 530_000 * 2),
        ("saf", 400 * 4),
    ],
)
def test_sc17_rules_and_saf_by_hand(name: str, expected: float) -> None:
    at_origin = PriorityContext(5_000, 64, origin=1_000_000)
    assert make_policy(name).key(job(0, 1_000_100, 4, runtime=50, estimate=400), at_origin) == pytest.approx(
        expected
    )


def test_saf_prefers_the_smaller_area_not_the_shorter_job() -> None:
    """A 1-GPU job of 1,000 s (area 1,000) goes before an 8-GPU job of 200 s (area 1,600); SJF does the
    opposite."""
    long_thin, short_wide = job(0, 0, 1, 1000), job(1, 0, 8, 200)
    saf, sjf = make_policy("saf"), make_policy("sjf")
    assert saf.key(long_thin, ctx(0)) < saf.key(short_wide, ctx(0))
    assert sjf.key(long_thin, ctx(0)) > sjf.key(short_wide, ctx(0))


def test_f3_weighs_submit_time_far_above_area() -> None:
    """F3's 6.86e6 * log10(r) term: a job submitted 10x later waits behind any job whose area is below
    6.86e6 GPU-seconds more."""
    at_origin = PriorityContext(0, 64, origin=0)
    early_big, late_small = job(0, 100, 8, 100_000), job(1, 1_000, 1, 10)
    f3 = make_policy("f3")
    assert f3.key(early_big, at_origin) < f3.key(late_small, at_origin)


def test_sjf_reads_the_estimate_never_the_true_runtime() -> None:
    assert make_policy("sjf").key(job(0, 0, 1, runtime=10, estimate=500), ctx(0)) == 500


def test_multifactor_breakdown_sums_to_the_priority() -> None:
    mf = Multifactor()
    j = Job(0, 0.0, 16, runtime=10, time_limit=10, account="a")
    terms = mf.explain(j, ctx(3.5 * 86400, a=100.0, b=300.0))
    assert terms["age"] == pytest.approx(500.0)
    assert terms["job_size"] == pytest.approx(250.0)
    assert terms["fairshare"] == pytest.approx(1000 * 2 ** (-(0.25 / 0.5)))
    assert terms["partition"] == 1000.0 and terms["tres_gpu"] == 0.0  # one partition; no GPU TRES weight
    assert terms["priority"] == pytest.approx(500.0 + 250.0 + 1000 * 2**-0.5 + 1000.0)  # summed by hand
    assert mf.key(j, ctx(3.5 * 86400, a=100.0, b=300.0)) == -terms["priority"]


def test_small_relative_to_time_sizes_a_job_against_an_average_node_per_minute_of_limit() -> None:
    """Slurm's formula (priority_multifactor.c) in GPUs: max(nodes x average node, job) / minutes /
    cluster; 8 GPUs on 4 nodes, so an average node has 2."""
    at = PriorityContext(now=0.0, total_gpus=8, nodes=4)
    size = Multifactor(weight_age=0, weight_fairshare=0, weight_partition=0, weight_job_size=1000,
                       size_relative=True)  # fmt: skip
    assert size.factors(job(1, 0, 1, 60, 600), at)["job_size"] == pytest.approx(2 / 10 / 8)
    assert size.factors(job(2, 0, 4, 60, 600), at)["job_size"] == pytest.approx(4 / 10 / 8)  # wider
    assert size.factors(job(3, 0, 1, 60, 61), at)["job_size"] == pytest.approx(2 / 2 / 8)  # 2 minutes
    assert size.factors(job(4, 0, 2, 60, 60, nodes=2), at)["job_size"] == pytest.approx(4 / 1 / 8)
    assert size.factors(Job(5, 0.0, 1, runtime=60.0), at)["job_size"] == 0.0  # no limit: INFINITE
    order = sorted([job(6, 0, 1, 60, 7200), job(7, 0, 1, 60, 60), job(8, 0, 1, 60, 600)],
                   key=lambda j: size.key(j, at))  # fmt: skip
    assert [j.id for j in order] == [7, 8, 6]  # Slurm alone, shortest limit first
    small = Multifactor(weight_job_size=1000, size_relative=True, favor_small=True)
    assert small.factors(job(1, 0, 1, 60, 600), at)["job_size"] == pytest.approx(1 - 2 / 10 / 8)


def test_fairshare_is_half_at_exactly_the_fair_share_and_one_when_unused() -> None:
    assert fairshare("a", ctx(0, a=50.0, b=50.0)) == pytest.approx(0.5)
    assert fairshare("c", ctx(0, a=50.0, b=50.0)) == 1.0


def test_age_factor_saturates_at_max_age() -> None:
    mf = Multifactor()
    j = job(0, 0, 1, 10)
    assert mf.factors(j, ctx(30 * 86400))["age"] == 1.0


def test_qssf_predicts_from_the_users_past_jobs_then_the_account() -> None:
    qssf = make_policy("qssf")
    history = History(
        mean_runtime_by_user=MappingProxyType({"alice": 100.0}),
        mean_runtime_by_account=MappingProxyType({"vc1": 5000.0}),
    )
    c = PriorityContext(0, 8, history)
    assert qssf.key(job(0, 0, 2, 1, estimate=9999, user="alice", account="vc1"), c) == 200.0
    assert qssf.key(job(1, 0, 2, 1, estimate=9999, user="bob", account="vc1"), c) == 10000.0
    assert qssf.key(job(2, 0, 2, 1, estimate=30, user="bob", account="vc9"), c) == 60.0


def test_rank_orders_a_snapshot_with_ties_to_the_earlier_job() -> None:
    spec = cluster(("P100", 4, 1))
    pending = (job(5, 10, 1, 100), job(3, 10, 1, 100), job(4, 0, 1, 300))
    snap = ClusterSnapshot(20.0, spec, (4,), (16,), (32768,), pending, ())
    assert [j.id for j in rank(make_policy("fcfs"), snap)] == [4, 3, 5]
    assert [j.id for j in rank(make_policy("sjf"), snap)] == [3, 5, 4]


def test_unknown_policy_names_the_choices() -> None:
    with pytest.raises(UsageError, match="fcfs"):
        make_policy("lottery")
