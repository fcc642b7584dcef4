"""Cluster specs as TOML files, with bundled presets.

A spec lists node groups; each group expands to `count` identical nodes named `<prefix><i>`:

    name = "paper-testbed"
    [[nodes]]
    prefix = "p100-"
    count = 2
    gpu_type = "P100"
    gpus = 4
    cpus = 32
    mem_mb = 128000

`slots = "cpus"` (top level) says the nodes' `gpus` are cores used as slots: an HPC log's cluster,
which the daemon serves with `[slurm] slots = "cpus"`. `swf-N` is generated: N single-slot nodes, so that
an SWF log's processors map onto "GPUs".
"""

from __future__ import annotations

import re
import tomllib
from importlib import resources
from pathlib import Path
from typing import Any

from rltuned.domain import SLOT_KINDS, ClusterSpec, Node
from rltuned.errors import ConfigError, UsageError

_SWF = re.compile(r"swf-(\d+)$")
_GROUP_KEYS = {"prefix", "count", "gpu_type", "gpus", "cpus", "mem_mb", "partition", "gpu_mem_gb"}


def preset_names() -> list[str]:
    files = resources.files("rltuned.clusters").joinpath("presets").iterdir()
    return [*sorted(f.name.removesuffix(".toml") for f in files if f.name.endswith(".toml")), "swf-N"]


def load_cluster(name_or_path: str) -> ClusterSpec:
    """Resolve a preset name, `swf-N`, a path to a TOML spec, or a saved `sinfo --json` (`.json`)."""
    match = _SWF.match(name_or_path)
    if match:
        return swf_cluster(int(match.group(1)))
    preset = resources.files("rltuned.clusters").joinpath("presets", f"{name_or_path}.toml")
    if preset.is_file():
        return parse_cluster(tomllib.loads(preset.read_text()), source=f"preset {name_or_path}")
    path = Path(name_or_path)
    if path.suffix == ".json":
        return _from_sinfo(path)
    if path.suffix == ".toml" or path.exists():
        if not path.is_file():
            raise UsageError(f"cluster spec {path} does not exist")
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: invalid TOML: {exc}") from None
        except OSError as exc:
            raise UsageError(f"cluster spec {path} cannot be read: {exc.strerror}") from None
        return parse_cluster(data, source=str(path))
    raise UsageError(f"unknown cluster preset {name_or_path!r}; presets: {', '.join(preset_names())}")


def _from_sinfo(path: Path) -> ClusterSpec:
    """The nodes of a saved `sinfo --json`, as the daemon's adapter reads them."""
    from rltuned.slurm.parse import parse_nodes

    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise UsageError(f"cluster spec {path} cannot be read: {exc.strerror}") from None
    try:
        return parse_nodes(text, cluster_name=path.stem).cluster
    except ValueError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def swf_cluster(slots: int) -> ClusterSpec:
    if slots < 1:
        raise UsageError(f"swf-N needs N >= 1, got {slots}")
    nodes = tuple(Node(f"slot{i}", "cpu", 1, 1, 1024) for i in range(slots))
    return ClusterSpec(f"swf-{slots}", nodes, "cpus")


def parse_cluster(data: dict[str, Any], source: str) -> ClusterSpec:
    """Validate a spec; every error names the key so an admin can fix the file."""
    name = data.get("name")
    if not isinstance(name, str) or not name:
        raise ConfigError(f"{source}: 'name' must be a non-empty string")
    groups = data.get("nodes")
    if not isinstance(groups, list) or not groups:
        raise ConfigError(f"{source}: 'nodes' must be a non-empty list of node groups")
    unknown = set(data) - {"name", "nodes", "description", "slots"}
    if unknown:
        raise ConfigError(f"{source}: unknown key(s) {sorted(unknown)}")
    slots = data.get("slots", "gpus")
    if slots not in SLOT_KINDS:
        raise ConfigError(f"{source}: 'slots' must be one of {', '.join(SLOT_KINDS)}, got {slots!r}")
    nodes: list[Node] = []
    for index, group in enumerate(groups):
        nodes.extend(_expand_group(group, f"{source}: nodes[{index}]"))
    names = [n.name for n in nodes]
    if len(set(names)) != len(names):
        raise ConfigError(f"{source}: node names are not unique (check the 'prefix' of each group)")
    return ClusterSpec(name, tuple(nodes), slots)


def _expand_group(group: Any, where: str) -> list[Node]:
    if not isinstance(group, dict):
        raise ConfigError(f"{where}: expected a table")
    unknown = set(group) - _GROUP_KEYS
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {sorted(unknown)}")
    count = _positive_int(group, "count", where, default=1)
    gpus = _positive_int(group, "gpus", where)
    cpus = _positive_int(group, "cpus", where)
    mem_mb = _positive_int(group, "mem_mb", where)
    gpu_type = group.get("gpu_type")
    if not isinstance(gpu_type, str) or not gpu_type:
        raise ConfigError(f"{where}.gpu_type: expected a non-empty string")
    prefix = _string(group, "prefix", where, f"{gpu_type.lower()}-")
    partition = _string(group, "partition", where, "")
    gpu_mem = group.get("gpu_mem_gb", 0.0)
    if isinstance(gpu_mem, bool) or not isinstance(gpu_mem, int | float) or gpu_mem < 0:
        raise ConfigError(f"{where}.gpu_mem_gb: expected a number >= 0, got {gpu_mem!r}")
    gpu_mem_gb = float(gpu_mem)
    return [Node(f"{prefix}{i}", gpu_type, gpus, cpus, mem_mb, partition, gpu_mem_gb) for i in range(count)]


def _string(group: dict[str, Any], key: str, where: str, default: str) -> str:
    value = group.get(key, default)
    if not isinstance(value, str):
        raise ConfigError(f"{where}.{key}: expected a string, got {value!r}")
    return value


def _positive_int(group: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    value = group.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}.{key}: expected a positive integer, got {value!r}")
    return value
