"""The simulator's Slurm from an admin's own: `scontrol show config` and `sinfo --json`."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import pytest

from rltuned.clusters import load_cluster
from rltuned.errors import ConfigError, UsageError
from rltuned.policies.multifactor import Multifactor
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.ppo import Args, tick_settings
from rltuned.sim.slurm import SlurmParams
from rltuned.sim.slurm_config import params_from_record, params_from_show_config, params_record
from tests.slurm_lab import SlurmLab

SHOW_CONFIG = """Configuration data as of 2026-11-23T10:00:00
PriorityDecayHalfLife   = 14-00:00:00
PriorityMaxAge          = 1-12:00:00
PriorityType            = priority/multifactor
PriorityWeightAge       = 500
PriorityWeightFairShare = 10000
PriorityWeightJobSize   = 0
PriorityWeightPartition = 1000
SchedulerParameters     = bf_continue,bf_interval=45,bf_max_job_test=100,bf_window=2880,bf_resolution=300
SchedulerType           = sched/backfill
"""


def test_scheduler_and_priority_settings_are_read() -> None:
    params = params_from_show_config(SHOW_CONFIG)
    assert params.backfill and params.bf_continue
    assert (params.bf_interval_s, params.bf_max_job_test) == (45, 100)
    assert (params.bf_window_min, params.bf_resolution_s) == (2880, 300)
    assert params.sched_interval_s == 60  # not listed: Slurm's default
    assert (params.batch_sched_delay_s, params.event_pass) == (3, "background")
    assert params.priority == Multifactor(
        weight_age=500,
        weight_fairshare=10000,
        weight_job_size=0,
        weight_partition=1000,
        max_age_s=36 * 3600.0,
    )
    assert params.fairshare_half_life_s == 14 * 86400.0
    assert not params_from_show_config("SchedulerType = sched/builtin\n").backfill
    assert params_from_record(json.loads(json.dumps(params_record(params)))) == params


def test_small_relative_to_time_is_read_among_the_priority_flags() -> None:
    flags = SHOW_CONFIG + "PriorityFlags           = CALCULATE_RUNNING,SMALL_RELATIVE_TO_TIME\n"
    assert params_from_show_config(flags).priority.size_relative
    assert not params_from_show_config(SHOW_CONFIG).priority.size_relative
    other = SHOW_CONFIG + "PriorityFlags = CALCULATE_RUNNING\n"
    assert not params_from_show_config(other).priority.size_relative


def test_a_model_recorded_before_a_setting_existed_keeps_the_slurm_it_was_trained_in() -> None:
    """Manifests written before node selection, whole-node reservations and the background loop's passes
    were modelled read back as the model that trained them."""
    record = params_record(SlurmParams())
    for key in ("node_selection", "bf_whole_nodes", "event_pass"):
        del record[key]
    old = params_from_record(record)
    assert (old.node_selection, old.bf_whole_nodes, old.event_pass) == ("pack", False, "at_once")


def test_training_models_the_given_slurm_and_evaluation_reads_it_back(tmp_path: Path) -> None:
    """`train --slurm-config` trains in that Slurm, records it, and `evaluate` runs the model in it again."""
    conf = tmp_path / "show-config.txt"
    conf.write_text(SHOW_CONFIG)
    args = Args(base="sjf", slurm_config=str(conf), interval_s=30.0, lever="site_factor")
    trained = tick_settings(args)
    assert trained.slurm == params_from_show_config(SHOW_CONFIG)
    assert (trained.interval_s, trained.core.lever.kind) == (30.0, "site_factor")
    manifest = json.loads(json.dumps({**asdict(args), **args.extra}))
    assert tick_settings_of(manifest, "sjf") == trained
    with pytest.raises(UsageError, match="--slurm-config"):
        tick_settings(Args(slurm_config=str(tmp_path / "missing.txt")))


@pytest.mark.parametrize(
    ("line", "key"),
    [
        ("SchedulerParameters = bf_interval=soon", "bf_interval"),
        ("PriorityMaxAge = a week", "PriorityMaxAge"),
        ("PriorityWeightAge = lots", "PriorityWeightAge"),
        ("SchedulerType = sched/hold", "SchedulerType"),
        ("SchedulerParameters = bf_max_job_test=0", "bf_max_job_test"),
    ],
)
def test_a_malformed_setting_names_its_key(line: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key):
        params_from_show_config(line + "\n", "my.conf")


@pytest.mark.slurm
def test_the_labs_own_slurm_is_read(slurm_lab: SlurmLab, tmp_path: Path) -> None:
    """The real Slurm 22.05 lab runs the fast settings of shared/slurm (sched_interval=1, bf_interval=1);
    its `sinfo --json` gives the cluster the daemon sees."""
    params = params_from_show_config(slurm_lab.run(["scontrol", "show", "config"]).stdout)
    assert params.backfill
    assert (params.sched_interval_s, params.bf_interval_s) == (1, 1)
    assert params.batch_sched_delay_s == 0
    assert params != SlurmParams()
    sinfo = tmp_path / "lab.json"
    sinfo.write_text(json.dumps(slurm_lab.sinfo_json()))
    cluster = load_cluster(str(sinfo))
    assert cluster.describe() == "lab: 5 nodes, 13 GPUs (2 x 2 k80, 1 x 1 m40, 2 x 4 p100)"
