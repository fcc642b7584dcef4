"""The bundled real traces load with the row counts their sources state (docs/data.md)."""

from __future__ import annotations

from datetime import UTC, datetime
from functools import cache
from itertools import pairwise

import pytest

from rltuned.traces import Trace, detect_format, load_trace
from rltuned.traces.bundled import DATA_DIR, bundled_names, resolve_trace

# name -> (format, rows, jobs loaded, filtered counts)
EXPECTED: dict[str, tuple[str, int, int, dict[str, int]]] = {
    "philly": ("philly", 74_022, 74_022, {}),
    "itp-01": ("itp", 1_595, 1_595, {}),
    "itp-02": ("itp", 5_778, 5_778, {}),
    "itp-03": ("itp", 3_011, 3_011, {}),
    "itp-04": ("itp", 15_802, 15_802, {}),
    "itp-05": ("itp", 3_629, 3_629, {}),
    "itp-06": ("itp", 2_396, 2_396, {}),
    "itp-09": ("itp", 11_134, 11_134, {}),
    "itp-10": ("itp", 260, 260, {}),
    "openb": ("openb", 8_152, 6_203, {"cpu_only": 1_088, "never_started": 861}),
    "hpc2n": ("swf", 3_170, 3_145, {"unknown_runtime": 25}),
    "nasa": ("swf", 18_239, 18_066, {"unknown_runtime": 173}),
    "wagap": ("swf", 17_900, 17_898, {"unknown_runtime": 2}),
}


@cache
def bundled(name: str) -> Trace:
    return load_trace(resolve_trace(name))


def utc(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_every_bundled_name_is_checked() -> None:
    assert set(bundled_names()) == {*EXPECTED, "itp"}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_counts(name: str) -> None:
    fmt, rows, loaded, filtered = EXPECTED[name]
    report = bundled(name).report
    assert (report.format, report.rows, report.loaded, report.malformed) == (fmt, rows, loaded, 0)
    assert report.filtered == filtered


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_bundled_is_canonical(name: str) -> None:
    jobs = bundled(name).jobs
    assert [j.id for j in jobs] == list(range(len(jobs)))
    assert all(a.submit <= b.submit for a, b in pairwise(jobs))
    assert all(j.gpus > 0 and j.runtime is not None and j.runtime > 0 for j in jobs)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_detects_bundled_format(name: str) -> None:
    assert detect_format(resolve_trace(name)) == EXPECTED[name][0]


def test_itp_is_the_largest_bundled_cluster() -> None:
    assert resolve_trace("itp") == resolve_trace("itp-04")
    largest = max((n for n in EXPECTED if n.startswith("itp-")), key=lambda n: EXPECTED[n][2])
    assert largest == "itp-04"


def test_other_names_are_paths() -> None:
    assert str(resolve_trace("some/file.csv")) == "some/file.csv"
    assert resolve_trace("philly") == DATA_DIR / "philly.csv.xz"


def test_philly_values() -> None:
    jobs = bundled("philly").jobs
    first, last = jobs[0], jobs[-1]
    # line 2: 2017-09-04 10:30:41,2240194.0,8,17921552.0,7f04ca
    assert (first.submit, first.runtime, first.gpus) == (utc("2017-09-04 10:30:41"), 2_240_194.0, 8)
    assert (first.name, first.account, first.user, first.time_limit) == ("2", "7f04ca", "", None)
    assert last.submit == utc("2017-11-30 18:43:56")
    assert sum(j.account == "6214e9" for j in jobs) > 30_000


def test_itp_values() -> None:
    first = bundled("itp-01").jobs[0]
    assert (first.name, first.submit, first.runtime, first.gpus) == (
        "965d744f-0445-c1a8-12af-97e4c536c66e",
        1_932_025.0,
        2_429.0,
        64,
    )
    assert {j.gpus for j in bundled("itp-09").jobs} == {1}  # cluster 09 is 1-GPU only


def test_openb_values() -> None:
    jobs = {j.name: j for j in bundled("openb").jobs}
    pod = jobs["openb-pod-0000"]  # 12000 milli-CPU, 16384 MiB, 1 GPU, LS, created 0, deleted 12537496
    assert (pod.submit, pod.runtime, pod.gpus, pod.cpus, pod.mem_mb) == (0.0, 12_537_496.0, 1, 12, 16_384)
    assert (pod.qos, pod.gpu_type) == ("LS", None)
    assert jobs["openb-pod-0001"].gpus == 1  # gpu_milli 460: a fractional GPU counts as one
    assert max(j.gpus for j in jobs.values()) == 8


def test_swf_values() -> None:
    hpc2n = bundled("hpc2n")
    first = hpc2n.jobs[0]  # 1 0 308434 31405 30 31405 -1 30 37980 -1 1 1 1 -1 -1 1 -1 -1
    assert (first.name, first.submit, first.runtime, first.gpus) == ("1", 0.0, 31_405.0, 30)
    assert (first.time_limit, first.user, first.account, first.partition) == (37_980.0, "u1", "g1", "")
    assert hpc2n.report.has_time_limits
    nasa = bundled("nasa")
    assert not nasa.report.has_time_limits
    assert all(j.time_limit is None for j in nasa.jobs)


def test_wagap_rows_that_never_ended_are_filtered_not_malformed() -> None:
    """Rows 4185 and 4199 have run time -(submit + wait): end - start with an end time of 0."""
    wagap = bundled("wagap")
    names = {j.name for j in wagap.jobs}
    assert "4185" not in names and "4199" not in names and "4186" in names
    first = wagap.jobs[0]  # 0 1356996147 0 56011 64 1 1024 64 86400 ... 1 62 1 ... q_1d 1:ppn=64
    assert (first.submit, first.runtime, first.gpus, first.time_limit) == (1356996147.0, 56011.0, 64, 86400.0)
    assert (first.user, wagap.report.has_time_limits) == ("u62", True)
