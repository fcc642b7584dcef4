"""`rltunectl tune`: searched on training, chosen on validation, never worse there than the current
settings, never reading the test split, and printed as slurm.conf lines Slurm 22.05 reads back
(tests/policies/test_multifactor_lab.py)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import replace

import pytest

from rltuned import tuning
from rltuned.domain import Job, PriorityContext
from rltuned.policies.multifactor import Multifactor
from rltuned.rl.splits import split_range
from rltuned.sim.slurm import SlurmParams, SlurmRun
from rltuned.sim.slurm_config import params_from_config
from tests.builders import cluster, job

SPEC = cluster(("V100", 4, 2))
WEIGHT_SUM_LIMIT = 2**32 - 1  # Slurm's priority is a 32-bit unsigned integer


def _jobs(n: int) -> list[Job]:
    rng = random.Random(3)
    t = 0.0
    out = []
    for i in range(n):
        t += rng.expovariate(1 / 400.0)
        runtime = rng.choice([60.0, 300.0, 900.0, 2400.0])
        out.append(job(i + 1, t, rng.choice([1, 1, 2, 4, 8]), runtime, runtime * 2, account=f"a{i % 3}"))
    return out


def test_favor_small_and_the_gpu_tres_weight_as_slurm_sums_them() -> None:
    ctx = PriorityContext(now=100.0, total_gpus=8)
    small, big = job(1, 100.0, 1, 60.0), job(2, 100.0, 8, 60.0)
    default = Multifactor(weight_age=0, weight_fairshare=0, weight_partition=0, weight_job_size=800)
    assert -default.key(big, ctx) == 800 and -default.key(small, ctx) == 100  # large jobs first
    favor = Multifactor(
        weight_age=0, weight_fairshare=0, weight_partition=0, weight_job_size=800, favor_small=True
    )
    assert -favor.key(small, ctx) == 700 and -favor.key(big, ctx) == 0
    tres = Multifactor(
        weight_age=0, weight_fairshare=0, weight_partition=0, weight_job_size=0, weight_tres_gpu=400
    )
    assert -tres.key(big, ctx) == 400 and tres.explain(big, ctx)["tres_gpu"] == 400


def test_the_printed_lines_are_what_the_simulators_config_reader_reads_back() -> None:
    """The lines as `scontrol show config` would print them, read by the reader the simulator and
    `rltunectl fidelity` use (Slurm itself reads them back in tests/policies/test_multifactor_lab.py)."""
    weights = Multifactor(weight_age=17, weight_fairshare=0, weight_job_size=9999, weight_partition=1000,
                          weight_tres_gpu=250, favor_small=True, max_age_s=3 * 86400 + 3661)  # fmt: skip
    config = dict(line.split("=", 1) for line in tuning.slurm_conf_lines(weights))
    # Slurm keeps PriorityMaxAge in whole minutes, rounded up: 3 days, 1 hour, 1 min and 1 s is printed
    # as 3-01:02:00, what Slurm itself would hold (tests/policies/test_multifactor_lab.py reads it back).
    assert config["PriorityMaxAge"] == "3-01:02:00"
    assert params_from_config(config).priority == replace(weights, max_age_s=3 * 86400 + 3720)
    relative = Multifactor(weight_age=100, weight_job_size=250_000_000, size_relative=True)
    config = dict(line.split("=", 1) for line in tuning.slurm_conf_lines(relative))
    assert config["PriorityFlags"] == "SMALL_RELATIVE_TO_TIME"
    assert params_from_config(config).priority == relative


def test_the_search_holds_an_sjf_like_order_that_slurm_can_keep_in_integers() -> None:
    """Under SMALL_RELATIVE_TO_TIME the size factor is tiny (1 / (nodes x minutes)); the weights the
    search may pick must keep limits apart after Slurm truncates the priority to an integer."""
    ctx = PriorityContext(now=0.0, total_gpus=800, nodes=100)
    low = Multifactor(weight_age=0, weight_fairshare=0, weight_partition=0, size_relative=True,
                      weight_job_size=round(10 ** tuning.RELATIVE_LOG10[1]))  # fmt: skip
    day, longer = job(1, 0.0, 1, 60.0, 86400.0), job(2, 0.0, 1, 60.0, 86400.0 + 3600.0)
    assert int(-low.key(day, ctx)) > int(-low.key(longer, ctx))
    assert tuning.WEIGHT_MAX * 4 + 10 ** tuning.RELATIVE_LOG10[1] < WEIGHT_SUM_LIMIT


def test_tune_chooses_on_validation_and_never_reads_the_test_split(monkeypatch: pytest.MonkeyPatch) -> None:
    jobs = _jobs(2600)
    test_start = split_range(len(jobs), "test").start
    seen: list[int] = []

    class Recording(SlurmRun):
        def __init__(self, c: object, chunk: Sequence[Job], *args: object, **kw: object) -> None:
            seen.append(max(j.id for j in chunk))
            super().__init__(c, chunk, *args, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(tuning, "SlurmRun", Recording)
    settings = tuning.TuneSettings(trials=6, train_windows=2, window=128, warmup=64, finalists=3)
    result = tuning.tune(SPEC, jobs, SlurmParams(), settings)
    assert max(seen) <= test_start  # job ids are 1-based: id test_start is the last validation job
    assert result.current.validation is not None and result.chosen.validation is not None
    assert result.chosen.validation <= result.current.validation
    assert result.chosen.validation == min(
        s.validation for s in (result.current, *result.finalists) if s.validation is not None
    )
    assert len(result.finalists) == 3 and result.validation_windows == 1
