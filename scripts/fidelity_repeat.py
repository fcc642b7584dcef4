"""How far Slurm agrees with itself: two or more `rltunectl fidelity --submit` runs of the same window,
compared run against run as the simulator is compared against a run (docs/fidelity.md).

Usage: python scripts/fidelity_repeat.py RUN_DIR RUN_DIR [...] [--interval 2]

Jobs are matched by submit order (each run submits the same window in the same order). Times come from
each run's `slurmctld.log` (milliseconds) when it was saved, else from sacct's whole seconds.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from scipy.stats import kendalltau

from rltuned.fidelity.ctld_log import load_ctld_log, refine
from rltuned.fidelity.observed import Observed, load_sacct


def load_run(run: Path) -> list[Observed]:
    workload = load_sacct(run / "sacct.txt")
    if (run / "slurmctld.log").exists():
        workload, _ = refine(workload, load_ctld_log(run / "slurmctld.log"))
    return sorted(workload.jobs, key=lambda o: int(o.job.name))


def agreement(a: list[Observed], b: list[Observed], interval_s: float) -> dict[str, float]:
    if len(a) != len(b):
        raise SystemExit(f"the runs hold {len(a)} and {len(b)} jobs: not the same window")
    starts_a = [o.start - a[0].job.submit for o in a]
    starts_b = [o.start - b[0].job.submit for o in b]
    n = len(a)
    return {
        "kendall_tau": float(kendalltau(starts_a, starts_b).statistic),
        "within_interval_share": sum(
            abs(x - y) <= interval_s for x, y in zip(starts_a, starts_b, strict=True)
        )
        / n,
        "same_nodes_share": sum(x.nodes == y.nodes for x, y in zip(a, b, strict=True)) / n,
        "same_gpu_type_share": sum(
            {n.rsplit("-", 1)[0] for n in x.nodes} == {n.rsplit("-", 1)[0] for n in y.nodes}
            for x, y in zip(a, b, strict=True)
        )
        / n,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    runs = {run.name: load_run(run) for run in args.runs}
    for (name_a, a), (name_b, b) in itertools.combinations(runs.items(), 2):
        got = agreement(a, b, args.interval)
        print(f"{name_a} vs {name_b}: " + "  ".join(f"{k} {v:.3f}" for k, v in got.items()))


if __name__ == "__main__":
    main()
