"""How far Slurm agrees with itself: two or more `rltunectl fidelity --submit` runs of the same window,
compared run against run as the simulator is compared against a run (docs/fidelity.md).

Usage: python scripts/fidelity_repeat.py RUN_DIR RUN_DIR [...] [--interval 2]

Jobs are matched by submit order (each run submits the same window in the same order), and the figures
are `fidelity.compare`'s, with the second run where the simulator's records stand and GPU types from the
first run's `sinfo.json`. Times come from each run's `slurmctld.log` (milliseconds) when it was saved,
else from sacct's whole seconds.
"""

from __future__ import annotations

import argparse
import itertools
from pathlib import Path

from rltuned.clusters import load_cluster
from rltuned.domain import ClusterSpec, Slice
from rltuned.fidelity.compare import compare
from rltuned.fidelity.ctld_log import load_ctld_log, refine
from rltuned.fidelity.observed import Observed, load_sacct
from rltuned.sim.simulator import JobRecord


def load_run(run: Path) -> list[Observed]:
    workload = load_sacct(run / "sacct.txt")
    if (run / "slurmctld.log").exists():
        workload, _ = refine(workload, load_ctld_log(run / "slurmctld.log"))
    return sorted(workload.jobs, key=lambda o: int(o.job.name))


def agreement(
    a: list[Observed], b: list[Observed], cluster: ClusterSpec, interval_s: float
) -> dict[str, float]:
    """Run b stands where the simulator's records stand in `compare`: its jobs take a's ids (same submit
    order) and its times are moved onto a's clock (same first submit)."""
    if len(a) != len(b):
        raise SystemExit(f"the runs hold {len(a)} and {len(b)} jobs: not the same window")
    index = {n.name: i for i, n in enumerate(cluster.nodes)}
    shift = a[0].job.submit - b[0].job.submit
    records = [
        JobRecord(x.job, y.start + shift, y.start + shift + (y.job.runtime or 0.0),
                  tuple(Slice(index[n], 0, 0, 0) for n in y.nodes))
        for x, y in zip(a, b, strict=True)
    ]  # fmt: skip
    f = compare(a, records, cluster, interval_s, worst=0)
    return {
        "kendall_tau": f.kendall_tau,
        "within_interval_share": f.within_interval_share,
        "same_nodes_share": f.same_nodes_share or 0.0,
        "same_gpu_type_share": f.same_gpu_type_share or 0.0,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", type=Path)
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    runs = {run.name: load_run(run) for run in args.runs}
    cluster = load_cluster(str(args.runs[0] / "sinfo.json"))
    for (name_a, a), (name_b, b) in itertools.combinations(runs.items(), 2):
        got = agreement(a, b, cluster, args.interval)
        print(f"{name_a} vs {name_b}: " + "  ".join(f"{k} {v:.3f}" for k, v in got.items()))


if __name__ == "__main__":
    main()
