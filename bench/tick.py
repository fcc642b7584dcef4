"""Daemon tick latency, and what one tick costs on a real Slurm.

Usage: python bench/tick.py [--ticks 20] [--slurm] [--pending 2000]

Part 1 (always): one tick without the scontrol calls for 1,024 pending jobs on 64 nodes. The cluster and
queue are bench/features.py's busy snapshot (64 nodes, 320 GPUs, ~85% busy), rendered as Slurm 22.05
`squeue --json`/`sinfo --json` documents (tests/slurm/render.py, the renderer the round-trip tests prove),
served from memory. Timed whole and per stage: parse the JSON into a snapshot, encode features, the
shipped model's forward pass, MILP placement of the top 8, and planning the priority writes; median and
p95 over `--ticks` ticks after 3 warm-ups. Target: <= 250 ms (the paper reports 22.8 s for 1,024 jobs).

Part 2 (`--slurm`, root): brings up the local lab (scripts/slurm-lab), fills every GPU, submits
`--pending` GPU jobs from three users, then runs the real CLI adapter in enforce mode: tick 1 with
max_actions=256 (the time to apply 256 priority changes), tick 2 with no cap (every other job), and a
third tick, which writes only where the model's order moved since (its features include waiting
time). Reports read, decide and apply times and the outcomes.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.features import busy_snapshot  # noqa: E402
from rltuned.daemon.config import Settings  # noqa: E402
from rltuned.daemon.engine import Engine  # noqa: E402
from rltuned.daemon.ledger import Ledger  # noqa: E402
from rltuned.rl.export import load_model  # noqa: E402
from rltuned.slurm.adapter import Outcome, SlurmRead, UpdateResult  # noqa: E402
from tests.slurm.render import render_sinfo, render_squeue  # noqa: E402

MODEL = REPO / "models" / "philly-fcfs-bsld-ticks"


class MemoryAdapter:
    """Serves fixed documents; counts would-be writes (none are sent: part 1 excludes scontrol)."""

    name = "memory"

    def __init__(self, squeue: Mapping[str, Any], sinfo: Mapping[str, Any], now: float) -> None:
        self.squeue, self.sinfo, self.now = squeue, sinfo, now

    def read(self) -> SlurmRead:
        return SlurmRead(self.squeue, self.sinfo, self.now, "json")

    def update_job(self, job_id: int, fields: Mapping[str, str]) -> UpdateResult:
        return UpdateResult(Outcome.OK)

    def hold(self, job_id: int) -> UpdateResult:
        return UpdateResult(Outcome.OK)

    def release(self, job_id: int) -> UpdateResult:
        return UpdateResult(Outcome.OK)

    def job_state(self, job_id: int) -> str | None:
        return "PENDING"


def in_memory(ticks: int) -> dict[str, Any]:
    snapshot = busy_snapshot(1024, seed=0)
    squeue, sinfo = render_squeue(snapshot), render_sinfo(snapshot)
    engine = Engine(Settings(), MemoryAdapter(squeue, sinfo, snapshot.now), load_model(MODEL), Ledger(None))
    stages: dict[str, list[float]] = {}
    for i in range(ticks + 3):
        t0 = time.perf_counter()
        view = engine.read()
        t1 = time.perf_counter()
        decision = engine.decide(view)
        t2 = time.perf_counter()
        if i < 3:
            continue
        assert len(decision.plan.jobs) == 1024 and decision.ranking.source == "model"
        row = {
            "snapshot": t1 - t0,
            **decision.stages,
            "plan": (t2 - t1) - sum(decision.stages.values()),
            "total": t2 - t0,
        }
        for key, value in row.items():
            stages.setdefault(key, []).append(value * 1000.0)
    return {
        "pending": 1024,
        "nodes": len(snapshot.cluster.nodes),
        "placed_by_milp": len(decision.placements.by_job),
        "solver": decision.placements.outcome,
        "ms": {
            k: {"p50": round(statistics.median(v), 2), "p95": round(_p95(v), 2)} for k, v in stages.items()
        },
    }


def real_slurm(pending: int) -> dict[str, Any]:
    from rltuned.slurm.cli_backend import CliAdapter
    from tests.slurm_lab import lab_session

    with lab_session() as lab:
        for gres in ("p100:4", "p100:4", "k80:2", "k80:2", "m40:1"):
            lab.sbatch(gres, minutes=60, user="carol")
        t0 = time.perf_counter()
        users = ("alice", "bob", "carol")
        for k, user in enumerate(users):  # the queue is split over three users, each submitting its share
            share = range(k + 1, pending + 1, len(users))
            script = (
                f"for i in $(seq {share.start} {share.step} {share.stop - 1}); do "
                "g=$([ $(( i % 2 )) = 0 ] && echo p100:1 || echo 1); "
                'sbatch -Q -t $(( 5 + i % 50 )) -o /dev/null --gres=gpu:$g --wrap "sleep 60"; done'
            )
            argv = ["runuser", "-u", user, "--", "env", f"SLURM_CONF={lab.conf}", "bash", "-c", script]
            subprocess.run(argv, env=lab.env, cwd=lab.dir, check=True, capture_output=True)
        submit_s = time.perf_counter() - t0
        results: dict[str, Any] = {"pending": pending, "submit_s": round(submit_s, 1)}
        settings = Settings(slurm={"conf": str(lab.conf)}, placement={"oversubscribe": False})  # type: ignore[arg-type]
        for label, cap in (("tick1_cap256", 256), ("tick2_uncapped", 100_000), ("tick3_next", 100_000)):
            capped = settings.model_copy(
                update={"apply": settings.apply.model_copy(update={"mode": "enforce", "max_actions": cap})}
            )
            engine = Engine(
                capped, CliAdapter(lab.conf), load_model(MODEL), Ledger(lab.dir / "bench-ledger.json")
            )
            t0 = time.perf_counter()
            report = engine.tick()
            total = time.perf_counter() - t0
            assert report.decision is not None
            results[label] = {
                "managed": len(report.decision.plan.jobs),
                "applied": report.applied,
                "stages_s": {k: round(v, 3) for k, v in report.stages.items()},
                "total_s": round(total, 2),
            }
        return results


def _p95(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--ticks", type=int, default=20)
    parser.add_argument("--slurm", action="store_true", help="also measure against the real local Slurm lab")
    parser.add_argument("--pending", type=int, default=2000)
    args = parser.parse_args()
    import torch

    from rltuned.daemon.logs import configure

    configure("warning", "json")  # one event per failed write only; the report goes to stdout
    torch.set_num_threads(1)
    out: dict[str, Any] = {"in_memory_1024_jobs_64_nodes": in_memory(args.ticks)}
    if args.slurm:
        out["real_slurm"] = real_slurm(args.pending)
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
