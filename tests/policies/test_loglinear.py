"""The log-linear order: the rates it trades limit, size and age at, and how a spec is read."""

from __future__ import annotations

import math
import random

import pytest

from rltuned.domain import PriorityContext
from rltuned.errors import UsageError
from rltuned.policies import make_policy
from rltuned.policies.loglinear import LogLinear, parse_loglinear
from tests.builders import job

SHORT = job(0, 0, 1, 100)  # 100 s, 1 GPU, submitted at 0
BIG = job(1, 0, 8, 400)  # 400 s on 8 GPUs
OLD_LONG = job(2, -10_000, 1, 1000)  # 1,000 s, waiting 10,000 s at time 0


def order(policy: LogLinear, now: float = 0.0) -> list[int]:
    ctx = PriorityContext(now, 64)
    return [j.id for j in sorted((SHORT, BIG, OLD_LONG), key=lambda j: policy.key(j, ctx))]


def test_the_terms_by_hand() -> None:
    ctx = PriorityContext(0.0, 64)
    rule = LogLinear(b=0.5, c=1.0, w0=600.0)
    assert rule.key(BIG, ctx) == pytest.approx(math.log(400) + 0.5 * math.log(8) - math.log(600))
    assert rule.key(OLD_LONG, ctx) == pytest.approx(math.log(1000) - math.log(10_600))


def test_without_age_it_is_sjf_or_saf_and_age_lifts_the_long_waiter() -> None:
    assert order(LogLinear(0.0, 0.0, 600.0)) == [0, 1, 2]  # SJF: 100, 400, 1,000 s
    assert order(LogLinear(1.0, 0.0, 600.0)) == [0, 2, 1]  # SAF: 100, 1,000, 3,200 GPU-s
    # 4.61 - 6.40 = -1.79 (SHORT), 6.91 - 9.27 = -2.36 (OLD_LONG), 5.99 - 6.40 = -0.41 (BIG)
    assert order(LogLinear(0.0, 1.0, 600.0)) == [2, 0, 1]
    # A negative size rate moves big jobs up: 5.99 - 1.04 = 4.95 < log(1000) = 6.91
    assert order(LogLinear(-0.5, 0.0, 600.0)) == [0, 1, 2]
    assert order(LogLinear(-1.5, 0.0, 600.0)) == [1, 0, 2]  # 5.99 - 3.12 = 2.87 < 4.61


def test_it_holds_wfp3s_order() -> None:
    """WFP3 ranks by (wait / limit)^3 x GPUs, highest first: the log of that is this rule's key x -3 for
    b = -1/3, c = 1 and w0 -> 0, so both order any queue of waiting jobs alike."""
    rnd = random.Random(0)
    jobs = [
        job(i, -rnd.uniform(1, 50_000), rnd.choice([1, 2, 4, 8]), rnd.uniform(60, 86_400)) for i in range(300)
    ]
    ctx = PriorityContext(0.0, 64)
    wfp3, rule = make_policy("wfp3"), LogLinear(-1 / 3, 1.0, 1e-9)
    assert sorted(jobs, key=lambda j: wfp3.key(j, ctx)) == sorted(jobs, key=lambda j: rule.key(j, ctx))


def test_only_an_aging_rule_is_dynamic() -> None:
    assert not LogLinear(1.0, 0.0, 600.0).dynamic
    assert LogLinear(1.0, 0.25, 600.0).dynamic


def test_a_spec_reads_back_its_name() -> None:
    rule = parse_loglinear("loglinear:b=-0.5,c=0.25,w0=600")
    assert rule == LogLinear(-0.5, 0.25, 600.0)
    assert parse_loglinear(rule.name) == rule


@pytest.mark.parametrize(
    ("spec", "problem"),
    [
        ("sjf", "written loglinear:"),
        ("loglinear:b=1,c=0", "missing w0"),
        ("loglinear:b=1,b=2,c=0,w0=1", "each of b, c and w0 once"),
        ("loglinear:b=1,c=0,w0=1,d=2", "'d'"),
        ("loglinear:b=x,c=0,w0=1", "b must be a number"),
        ("loglinear:b=nan,c=0,w0=1", "b must be finite"),
        ("loglinear:b=0,c=1,w0=0", "w0 must be > 0"),
    ],
)
def test_a_bad_spec_says_what_is_wrong(spec: str, problem: str) -> None:
    with pytest.raises(UsageError, match=problem):
        parse_loglinear(spec)
