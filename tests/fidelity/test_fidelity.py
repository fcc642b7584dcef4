"""`rltunectl fidelity --sacct`: a finished workload replayed in the simulator's Slurm and compared.

The fixture is a small lab workload (tests/fixtures/slurm/sinfo.json's 2 x p100:4, 2 x k80:2, m40:1)
whose schedule is worked out by hand: FCFS (priority/basic), bf_interval=1, sched_interval=1.
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from rltuned.cli import main
from rltuned.clusters import load_cluster
from rltuned.errors import TraceError
from rltuned.fidelity.compare import compare
from rltuned.fidelity.observed import load_sacct
from rltuned.fidelity.replay import BASIC, replay, slurm_settings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "slurm"
SACCT = FIXTURES / "sacct-lab-small.txt"
SINFO = FIXTURES / "sinfo.json"
PARAMS = "bf_interval=1,sched_interval=1"


def test_the_observed_workload_keeps_starts_nodes_and_request_shape() -> None:
    workload = load_sacct(SACCT)
    assert [o.job.name for o in workload.jobs] == ["1", "2", "3", "4", "5"]  # steps and CPU-only job left out
    assert workload.report.filtered == {"job_step": 1, "cpu_only": 1}
    third = workload.jobs[2]
    assert third.job.runtime == 30 and third.job.time_limit == 60 and third.job.nodes == 1
    assert third.start - workload.jobs[0].job.submit == 30
    assert third.nodes == ("p100-1",)


def test_the_replay_is_the_hand_computed_schedule() -> None:
    # 1 and 2 take the p100 nodes; 3 waits for one (a 4-GPU job never spans the two k80 nodes); 4 and 5
    # backfill at once behind it, on the nodes cons_tres picks (k80-1; then k80-2 and m40-1 form one run
    # of 16 free CPUs, where the tie goes to k80-2, the lower index); 3 starts when 1 ends.
    params, memory = slurm_settings(None, PARAMS)
    workload = load_sacct(SACCT)
    result = replay(workload, load_cluster(str(SINFO)), params, memory)
    t0 = workload.jobs[0].job.submit
    names = [n.name for n in result.cluster.nodes]
    got = {r.job.name: (r.start - t0, [names[s.node] for s in r.allocation]) for r in result.records}
    assert got == {
        "1": (0, ["p100-1"]),
        "2": (1, ["p100-2"]),
        "3": (30, ["p100-1"]),
        "4": (3, ["k80-1"]),
        "5": (5, ["k80-2"]),
    }  # fmt: skip


def test_the_figures() -> None:
    params, memory = slurm_settings(None, PARAMS)
    workload = load_sacct(SACCT)
    result = replay(workload, load_cluster(str(SINFO)), params, memory)
    f = compare(workload.jobs, result.records, result.cluster, interval_s=2.0)
    assert f.jobs == 5 and f.unsimulated == 0
    assert f.kendall_tau == pytest.approx(1.0)  # same start order
    assert f.within_interval_share == 1.0  # job 4 one second early
    assert f.same_gpu_type_share == 1.0 and f.same_nodes_share == 1.0
    assert (f.makespan_s.real, f.makespan_s.simulated) == (60, 60)
    assert f.mean_wait_s.real == pytest.approx(29 / 5) and f.mean_wait_s.simulated == pytest.approx(28 / 5)
    assert f.worst[0].job_id == "4" and f.worst[0].delta == -1
    strict = compare(workload.jobs, result.records, result.cluster, interval_s=0.0)
    assert strict.within_interval_share == pytest.approx(0.8)


def test_a_gpu_best_fit_would_put_job_5_on_the_m40() -> None:
    params, memory = slurm_settings(None, PARAMS)
    workload = load_sacct(SACCT)
    result = replay(workload, load_cluster(str(SINFO)), replace(params, node_selection="pack"), memory)
    f = compare(workload.jobs, result.records, result.cluster, interval_s=2.0)
    assert f.same_gpu_type_share == pytest.approx(0.8) and f.worst[0].job_id == "4"
    assert next(p for p in f.worst if p.job_id == "5").sim_nodes == ("m40-1",)


def test_a_later_simulated_start_lowers_tau() -> None:
    params, memory = slurm_settings(None, PARAMS)
    workload = load_sacct(SACCT)
    result = replay(workload, load_cluster(str(SINFO)), params, memory)
    # What if the simulator had held job 4 back until after job 3: one pair of five reverses order.
    late = [
        r._replace(start=r.start + 40, end=r.end + 40) if r.job.name == "4" else r for r in result.records
    ]
    f = compare(workload.jobs, late, result.cluster, interval_s=2.0)
    assert f.kendall_tau < 1.0 and f.within_interval_share == pytest.approx(0.8)


def test_settings_from_a_saved_config(tmp_path: Path) -> None:
    config = tmp_path / "show-config.txt"
    config.write_text(
        "PriorityType            = priority/multifactor\n"
        "PriorityWeightAge       = 100\n"
        "SchedulerParameters     = bf_interval=5,sched_interval=2\n"
        "SelectTypeParameters    = CR_CORE_MEMORY\n"
    )
    params, memory = slurm_settings(config, None)
    assert (params.bf_interval_s, params.sched_interval_s, params.priority.weight_age) == (5, 2, 100)
    assert memory
    params, memory = slurm_settings(config, "bf_interval=1")
    assert params.bf_interval_s == 1 and params.sched_interval_s == 60  # the override replaces it all
    basic, memory = slurm_settings(None, None)
    assert basic.priority == BASIC and not memory


def test_a_malformed_row_names_its_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "sacct.txt"
    lines = SACCT.read_text().splitlines()
    lines[3] = lines[3].replace("2026-11-24T10:00:01|2026-11-24T10:00:01", "2026-11-24T10:00:01|yesterday")
    bad.write_text("\n".join(lines) + "\n")
    with pytest.raises(TraceError, match=rf"{bad}:4: .*Start"):
        load_sacct(bad)


def test_the_command_prints_json_and_writes_the_plot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plot = tmp_path / "starts.png"
    main_args = ["fidelity", "--sacct", str(SACCT), "--cluster", str(SINFO), "--scheduler-params", PARAMS,
                 "--json", "--plot", str(plot)]  # fmt: skip
    with pytest.raises(SystemExit) as done:
        main(main_args)
    assert done.value.code == 0
    body = json.loads(capsys.readouterr().out)
    assert body["jobs"] == 5 and body["kendall_tau"] == pytest.approx(1.0)
    assert body["worst"][0]["job_id"] == "4" and body["worst"][0]["delta_s"] == -1
    assert plot.stat().st_size > 1000
