"""Regenerate the results table of docs/placement.md: pack vs spread vs MILP under FCFS and SJF.

Usage: python scripts/placement_results.py > /tmp/table.md   (then paste between the markers)

Each row: 10 random 1,024-job windows (seed 0), EASY backfilling, `qssf-noise` estimates (seed 0),
the same windows for every placement. `philly` windows get a warm-up of the 8,192 preceding jobs,
because on that whole-trace-sized preset most windows started from idle never queue.
"""

from __future__ import annotations

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.sim.runner import PolicyRun, choose_windows, simulate_windows
from rltuned.sim.simulator import SimConfig
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

CASES = (("philly", "philly", 8192), ("philly", "philly-slice", 0), ("itp", "itp", 0), ("openb", "openb", 0))
PLACEMENTS = ("pack", "spread", "milp")


def main() -> None:
    print("| trace | preset | warm-up | policy | placement | mean wait (s) | bounded slowdown | GPU util | "
          "MILP solves (fallbacks) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for trace, preset, warmup in CASES:
        jobs, _ = apply_estimates(load_trace(resolve_trace(trace)).jobs, "qssf-noise", 0)
        cluster = load_cluster(preset)
        windows = choose_windows(len(jobs), 1024, None, 10, seed=0)
        for policy in ("fcfs", "sjf"):
            runs = {
                p: simulate_windows(jobs, cluster, policy, SimConfig(placement=p), windows, warmup=warmup)
                for p in PLACEMENTS
            }
            best_wait = min(r.mean("avg_wait_s") for r in runs.values())
            for placement, run in runs.items():
                print(_row(trace, preset, warmup, policy, placement, run, best_wait))


def _row(
    trace: str, preset: str, warmup: int, policy: str, placement: str, run: PolicyRun, best: float
) -> str:
    wait = run.mean("avg_wait_s")
    mark = "**" if wait <= best + 1e-9 else ""
    solves = ""
    if placement == "milp":
        calls = sum(w.solver_calls for w in run.windows)
        fallbacks = sum(w.solver_fallbacks for w in run.windows)
        solves = f"{calls} ({fallbacks})"
    return (
        f"| {trace} | {preset} | {warmup} | {policy} | {placement} | {mark}{wait:,.0f}{mark} | "
        f"{run.mean('avg_bsld'):.2f} | {run.mean('gpu_util'):.3f} | {solves} |"
    )


if __name__ == "__main__":
    main()
