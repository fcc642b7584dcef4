"""Cluster presets and TOML specs."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltuned.clusters import load_cluster, preset_names
from rltuned.domain import ClusterSpec
from rltuned.errors import ConfigError, UsageError


def test_paper_testbed_is_the_papers_slurm_testbed() -> None:
    spec = load_cluster("paper-testbed")
    shapes = sorted((n.gpu_type, n.gpus) for n in spec.nodes)
    assert shapes == [("K80", 2), ("K80", 2), ("M40", 1), ("P100", 4), ("P100", 4)]


def test_philly_keeps_the_machine_list_proportions() -> None:
    spec = load_cluster("philly")
    two = sum(1 for n in spec.nodes if n.gpus == 2)
    eight = sum(1 for n in spec.nodes if n.gpus == 8)
    assert two / eight == pytest.approx(321 / 231, rel=0.02)


def test_helios_has_five_vcs_of_8_gpu_nodes() -> None:
    spec = load_cluster("helios")
    counts = [sum(1 for n in spec.nodes if n.partition == f"vc{i}") for i in range(1, 6)]
    assert counts == [16, 12, 10, 8, 8]
    assert {n.gpus for n in spec.nodes} == {8}


def test_wagap_is_its_machine_file() -> None:
    """wagap-2013.swf.machines: zewura 20 x 80 cores, zegox 48 x 12 (memory there in KiB)."""
    spec = load_cluster("wagap")
    shapes = {(n.gpu_type, n.gpus, n.cpus, n.mem_mb) for n in spec.nodes}
    assert shapes == {("zewura", 80, 80, 529426432 // 1024), ("zegox", 12, 12, 94035968 // 1024)}
    assert (len(spec.nodes), spec.total_gpus) == (68, 20 * 80 + 48 * 12)


def test_every_preset_loads() -> None:
    for name in preset_names():
        spec = load_cluster(name.replace("swf-N", "swf-16"))
        assert spec.total_gpus > 0


def test_swf_n_is_n_single_slot_nodes() -> None:
    spec = load_cluster("swf-128")
    assert len(spec.nodes) == 128 and spec.total_gpus == 128


def test_unknown_preset_lists_the_presets() -> None:
    with pytest.raises(UsageError, match="paper-testbed"):
        load_cluster("nope")


def test_invalid_spec_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text('name = "x"\n[[nodes]]\ngpu_type = "A100"\ngpus = 0\ncpus = 4\nmem_mb = 100\n')
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.gpus"):
        load_cluster(str(bad))
    bad.write_text(
        'name = "x"\ncolour = "red"\n[[nodes]]\ngpu_type = "A100"\ngpus = 1\ncpus = 4\nmem_mb = 100\n'
    )
    with pytest.raises(ConfigError, match="colour"):
        load_cluster(str(bad))


def test_a_non_numeric_gpu_memory_names_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(
        'name = "x"\n[[nodes]]\ngpu_type = "A100"\ngpus = 1\ncpus = 4\nmem_mb = 100\ngpu_mem_gb = "lots"\n'
    )
    with pytest.raises(ConfigError, match=r"nodes\[0\]\.gpu_mem_gb"):
        load_cluster(str(bad))


def test_wagap_slice_is_half_of_each_wagap_cluster() -> None:
    """The slice keeps wagap's node shapes and halves each cluster, so a job that fits wagap fits it."""
    whole, half = load_cluster("wagap"), load_cluster("wagap-slice")

    def count(spec: ClusterSpec, gpu_type: str) -> int:
        return sum(1 for n in spec.nodes if n.gpu_type == gpu_type)

    assert {(n.gpu_type, n.gpus, n.cpus, n.mem_mb) for n in half.nodes} == {
        (n.gpu_type, n.gpus, n.cpus, n.mem_mb) for n in whole.nodes
    }
    assert [count(half, t) * 2 for t in ("zewura", "zegox")] == [count(whole, t) for t in ("zewura", "zegox")]


def test_an_hpc_logs_clusters_count_cores_as_slots(tmp_path: Path) -> None:
    """The daemon refuses to serve a model on the other kind of slots, so each cluster must say its own."""
    assert {name: load_cluster(name).slots for name in ("wagap", "wagap-slice", "swf-4", "philly-slice")} == {
        "wagap": "cpus",
        "wagap-slice": "cpus",
        "swf-4": "cpus",
        "philly-slice": "gpus",
    }
    assert "cores as slots" in load_cluster("wagap").describe()
    bad = tmp_path / "bad.toml"
    node = '[[nodes]]\ngpu_type = "A"\ngpus = 1\ncpus = 4\nmem_mb = 100\n'
    bad.write_text(f'name = "x"\nslots = "tpus"\n{node}')
    with pytest.raises(ConfigError, match="'slots' must be one of gpus, cpus, got 'tpus'"):
        load_cluster(str(bad))
