"""A trace reads the same plain, xz-, gzip- or bzip2-compressed; a corrupt archive is a TraceError."""

from __future__ import annotations

import bz2
import gzip
import lzma
import shutil
from dataclasses import replace
from pathlib import Path

import pytest

from rltuned.errors import TraceError
from rltuned.traces import load_trace
from rltuned.traces.bundled import DATA_DIR

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "traces"


def _compressions(plain: Path) -> list[Path]:
    data = plain.read_bytes()
    outputs = []
    for suffix, compress in ((".xz", lzma.compress), (".gz", gzip.compress), (".bz2", bz2.compress)):
        target = plain.with_name(plain.name + suffix)
        target.write_bytes(compress(data))
        outputs.append(target)
    return outputs


@pytest.mark.parametrize(
    "bundled",
    [DATA_DIR / "itp" / "cluster10.csv.xz", DATA_DIR / "swf" / "hpc2n.swf.xz"],
    ids=lambda p: p.name,
)
def test_bundled_xz_equals_plain_gzip_bzip2(bundled: Path, tmp_path: Path) -> None:
    plain = tmp_path / bundled.name.removesuffix(".xz")
    with lzma.open(bundled) as source:
        plain.write_bytes(source.read())
    expected = load_trace(bundled)
    for path in [plain, *_compressions(plain)[1:]]:
        trace = load_trace(path)
        assert trace.jobs == expected.jobs
        assert replace(trace.report, path="") == replace(expected.report, path="")


@pytest.mark.parametrize("name", ["helios_cluster_log.csv", "sacct_jobs.txt", "slurm_jobcomp.log"])
def test_fixture_compressed(name: str, tmp_path: Path) -> None:
    plain = tmp_path / name
    shutil.copy(FIXTURES / name, plain)
    expected = load_trace(plain).jobs
    for path in _compressions(plain):
        assert load_trace(path).jobs == expected


def test_corrupt_archive(tmp_path: Path) -> None:
    broken = tmp_path / "philly.csv.xz"
    broken.write_bytes(b"this is not xz data")
    with pytest.raises(TraceError, match=r"philly\.csv\.xz: cannot read the file"):
        load_trace(broken)
    with pytest.raises(TraceError, match="cannot read the file"):
        load_trace(broken, "philly")
