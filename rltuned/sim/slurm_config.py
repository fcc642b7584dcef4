"""The simulator's Slurm from an admin's own Slurm: scheduler parameters from `scontrol show config`,
the cluster from `sinfo --json`.

`rltunectl train --slurm-config FILE` (the saved output of `scontrol show config`) and `--cluster
sinfo.json` (the saved output of `sinfo --json`, read by `clusters.load_cluster`) make the daemon's loop
model that cluster's Slurm.
Parameters `scontrol show config` does not list keep Slurm 22.05's defaults.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path
from typing import Any

from rltuned.core.levers import priority_flags
from rltuned.errors import ConfigError, UsageError
from rltuned.policies.multifactor import Multifactor
from rltuned.sim.slurm import SlurmParams
from rltuned.slurm.config_check import parse_show_config

_DURATION = re.compile(r"^(?:(\d+)-)?(\d+):(\d+):(\d+)$")
_SCHED_KEYS = {
    "sched_interval": "sched_interval_s",
    "batch_sched_delay": "batch_sched_delay_s",
    "bf_interval": "bf_interval_s",
    "bf_max_job_test": "bf_max_job_test",
    "bf_window": "bf_window_min",
    "bf_resolution": "bf_resolution_s",
}
_WEIGHTS = {
    "PriorityWeightAge": "weight_age",
    "PriorityWeightFairShare": "weight_fairshare",
    "PriorityWeightJobSize": "weight_job_size",
    "PriorityWeightPartition": "weight_partition",
}


def params_from_show_config(text: str, where: str = "scontrol show config") -> SlurmParams:
    return params_from_config(parse_show_config(text), where)


def params_from_file(path: Path) -> SlurmParams:
    """`--slurm-config FILE`: the saved output of `scontrol show config`."""
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"--slurm-config {path}: {exc.strerror}") from None
    return params_from_show_config(text, str(path))


def params_from_config(config: Mapping[str, str], where: str = "scontrol show config") -> SlurmParams:
    """SchedulerType, SchedulerParameters (sched_interval, bf_*), PriorityWeight*, PriorityWeightTRES's
    GRES/gpu, PriorityFavorSmall, PriorityFlags' SMALL_RELATIVE_TO_TIME, PriorityMaxAge and
    PriorityDecayHalfLife; each malformed value is an error naming its key."""
    values: dict[str, Any] = {"backfill": _plugins(config, where)}
    for item in config.get("SchedulerParameters", "").split(","):
        key, _, raw = item.strip().partition("=")
        if key == "bf_continue":
            values["bf_continue"] = True
        elif key in _SCHED_KEYS:
            values[_SCHED_KEYS[key]] = _number(raw, f"SchedulerParameters {key}", where)
    weights: dict[str, Any] = {}
    for key, field in _WEIGHTS.items():
        if key in config:
            weights[field] = int(_number(config[key], key, where))
    if "PriorityMaxAge" in config:
        weights["max_age_s"] = _duration(config["PriorityMaxAge"], "PriorityMaxAge", where)
    if "PriorityFavorSmall" in config:
        weights["favor_small"] = config["PriorityFavorSmall"].strip().upper() in ("YES", "1")
    weights["size_relative"] = "SMALL_RELATIVE_TO_TIME" in priority_flags(config)
    for item in config.get("PriorityWeightTRES", "").split(","):
        name, _, raw = item.strip().partition("=")
        if name.lower() == "gres/gpu":  # the other TRES (CPU, Mem, ...) do not tell GPU jobs apart here
            weights["weight_tres_gpu"] = int(_number(raw, "PriorityWeightTRES GRES/gpu", where))
    if "PriorityDecayHalfLife" in config:
        values["fairshare_half_life_s"] = _duration(
            config["PriorityDecayHalfLife"], "PriorityDecayHalfLife", where
        )
    values["priority"] = Multifactor(**weights)
    try:
        return SlurmParams(**values)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None


def params_record(params: SlurmParams) -> dict[str, Any]:
    """The parameters as a model's manifest records them (`params_from_record` reads them back)."""
    return asdict(params)


def params_from_record(record: Mapping[str, Any]) -> SlurmParams:
    values = dict(record)
    values.setdefault("node_selection", "pack")  # models from before cons_tres was modelled
    values.setdefault("bf_whole_nodes", False)  # and before backfill held whole nodes
    values.setdefault("event_pass", "at_once")  # and before a submit waited for the background loop
    priority = multifactor_from_record(values.pop("priority", {}))
    return SlurmParams(**values, priority=priority)


def multifactor_from_record(record: Mapping[str, Any]) -> Multifactor:
    """Multifactor's weights as `asdict` wrote them (its fixed `name` and `dynamic` dropped)."""
    return Multifactor(**{k: v for k, v in record.items() if k not in ("name", "dynamic")})


def _plugins(config: Mapping[str, str], where: str) -> bool:
    """Whether sched/backfill runs; a scheduler or node-selection plugin the model lacks is an error."""
    scheduler = config.get("SchedulerType", "sched/backfill")
    if scheduler not in ("sched/backfill", "sched/builtin"):
        raise ConfigError(
            f"{where}: SchedulerType {scheduler!r} is not modelled (sched/backfill, sched/builtin)"
        )
    select = config.get("SelectType", "select/cons_tres")
    if select not in ("select/cons_tres", "select/cons_res"):
        raise ConfigError(
            f"{where}: SelectType {select!r} is not modelled (select/cons_tres, select/cons_res)"
        )
    return scheduler == "sched/backfill"


def _number(raw: str, key: str, where: str) -> float:
    try:
        return float(raw)
    except ValueError:
        raise ConfigError(f"{where}: {key} = {raw!r} is not a number") from None


def max_age_as_kept(seconds: float) -> float:
    """`PriorityMaxAge` as Slurm 22.05 keeps it: in whole minutes, a part of a minute rounded up
    (`time_str2mins`; the lab's `scontrol show config` gives 3-01:02:00 back for 3-01:01:01)."""
    return 60.0 * math.ceil(round(seconds) / 60)


def _duration(raw: str, key: str, where: str) -> float:
    """Slurm's [days-]hours:minutes:seconds."""
    match = _DURATION.match(raw.strip())
    if not match:
        raise ConfigError(f"{where}: {key} = {raw!r} is not [days-]hh:mm:ss")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return float(((days * 24 + hours) * 60 + minutes) * 60 + seconds)
