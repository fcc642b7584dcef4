"""`rltunectl simulate` as a user runs it: a subprocess, its stdout and its exit status."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REQUIRED = {
    "jobs", "dropped", "policy", "placement", "estimates", "avg_wait_s", "avg_jct_s", "avg_bsld",
    "gpu_util", "makespan_s", "p95_wait_s", "wall_s", "jobs_per_s",
}  # fmt: skip


def rltunectl(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "rltuned", *args], capture_output=True, text=True, timeout=300, check=False
    )


def test_simulate_json_has_every_required_field() -> None:
    out = rltunectl("simulate", "--trace", "philly", "--cluster", "philly", "--jobs", "300", "--json")
    assert out.returncode == 0, out.stderr
    body = json.loads(out.stdout)
    assert set(body) >= REQUIRED
    assert body["jobs"] + body["dropped"] == 300
    assert body["estimates"] == "qssf-noise"


def test_simulate_sequences_reports_means_and_each_sequence() -> None:
    out = rltunectl(
        "simulate",
        "--trace",
        "itp",
        "--cluster",
        "itp",
        "--jobs",
        "200",
        "--sequences",
        "3",
        "--seed",
        "4",
        "--json",
    )
    body = json.loads(out.stdout)
    assert len(body["sequences"]) == 3
    mean = sum(s["avg_wait_s"] for s in body["sequences"]) / 3
    assert body["avg_wait_s"] == pytest.approx(mean)


def test_comparison_of_several_policies_prints_a_table() -> None:
    out = rltunectl(
        "simulate", "--trace", "philly", "--cluster", "philly", "--jobs", "200", "--policy", "fcfs,sjf"
    )
    assert out.returncode == 0, out.stderr
    assert "fcfs" in out.stdout and "sjf" in out.stdout and "avg_bsld" in out.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["simulate", "--trace", "philly", "--cluster", "nowhere"], "unknown cluster preset"),
        (["simulate", "--trace", "/no/such/file.csv", "--cluster", "philly"], "not found"),
        (["simulate", "--trace", "philly", "--cluster", "philly", "--policy", "lottery"], "unknown policy"),
        (["simulate", "--trace", "philly", "--cluster", "philly", "--jobs", "0"], "--jobs"),
        (["simulate", "--cluster", "philly"], "--trace"),
    ],
)
def test_bad_arguments_give_one_line_and_status_2(args: list[str], message: str) -> None:
    out = rltunectl(*args)
    assert out.returncode == 2
    assert message in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


def test_malformed_trace_names_file_and_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("job_id,submission_time,duration,num_gpu\na,0,10,1\nb,5,ten,1\n")
    out = rltunectl("simulate", "--trace", str(trace), "--cluster", "itp")
    assert out.returncode != 0
    assert f"{trace}:3" in out.stderr
    lenient = rltunectl("simulate", "--trace", str(trace), "--cluster", "itp", "--lenient", "--json")
    assert lenient.returncode == 0, lenient.stderr
    assert json.loads(lenient.stdout)["jobs"] == 1
