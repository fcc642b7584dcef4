"""A hash of every schedule the paper-replication loop produces, to show a speed change left them unchanged.

Usage: python bench/paper_digest.py [--windows 2]
       PYTHONPATH=<worktree of an older commit> python bench/paper_digest.py   # the reference

`bench/schedule_digest.py` covers the daemon's loop; this covers `Simulator.run` and the choosing
`Episode`. Runs 1,024-job windows (window seed 0) after a 512-job warm-up of NASA iPSC (`swf-128`,
exact runtimes), wagap (`wagap-slice`), HPC2N (`hpc2n`), Philly (`philly-slice` and `philly`) and
ITP (`itp-slice`), with `qssf-noise` limits on every trace but NASA, under FCFS, SJF, multifactor, SAF,
WFP3, UNICEP, QSSF and PSJF with pack and spread placement, a backfill depth of 20, no backfilling
and full passes (`incremental=False`), FCFS with `--placement milp` on Philly and ITP, and one
choosing episode per window with seeded random choices. Each line prints a SHA-256 over every job's
(id, start, end, allocation), warm-up jobs included, and the start promised to each reserved head.
Two commits whose lines match schedule every job identically. Uses only public names, so it runs
against older commits too.
"""

from __future__ import annotations

import argparse
import hashlib
import random
from collections.abc import Sequence
from dataclasses import replace

from rltuned.clusters import load_cluster
from rltuned.domain import ClusterSpec, Job
from rltuned.estimates import apply_estimates
from rltuned.policies import make_policy
from rltuned.sim.runner import choose_windows
from rltuned.sim.simulator import SimConfig, SimResult, Simulator
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

TRACES = (
    ("nasa", "swf-128", "exact"),
    ("wagap", "wagap-slice", "qssf-noise"),
    ("hpc2n", "hpc2n", "qssf-noise"),
    ("philly", "philly-slice", "qssf-noise"),
    ("philly", "philly", "qssf-noise"),
    ("itp", "itp-slice", "qssf-noise"),
)
POLICIES = ("fcfs", "sjf", "multifactor", "saf", "wfp3", "unicep", "qssf", "psjf")
CONFIGS = {
    "pack": SimConfig(),
    "spread": SimConfig(placement="spread"),
    "depth20": SimConfig(backfill_depth=20),
    "nobackfill": SimConfig(backfill=False),
    "full": SimConfig(incremental=False),
}


def digest(result: SimResult) -> str:
    h = hashlib.sha256()
    for r in (*result.background, *result.records):
        h.update(repr((r.job.id, r.start, r.end, tuple(tuple(s) for s in r.allocation))).encode())
    h.update(repr(sorted(result.promised.items())).encode())
    return h.hexdigest()[:16]


def choosing(cluster: ClusterSpec, jobs: Sequence[Job], warm: int, seed: int) -> SimResult:
    """One episode whose every decision names a random pending job (seeded)."""
    episode = Simulator(cluster, make_policy("fcfs"), SimConfig()).episode(jobs, warm)
    rng = random.Random(seed)
    while not episode.done:
        pending = sorted(job.id for job in episode.snapshot().pending)
        episode.choose(rng.choice(pending))
    assert episode.result is not None
    return episode.result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=2)
    args = parser.parse_args()
    for trace, preset, estimates in TRACES:
        jobs, _ = apply_estimates(load_trace(resolve_trace(trace)).jobs, estimates, 0)
        cluster = load_cluster(preset)
        for w in choose_windows(len(jobs) - 512, 1024, None, args.windows, seed=0):
            chunk, warm = w.with_warmup(jobs, 512)
            tag = f"{trace:6} {preset:12} w{w.start:<6}"
            for policy in POLICIES:
                for name, config in CONFIGS.items():
                    result = Simulator(cluster, make_policy(policy), config).run(chunk, warm)
                    print(f"{tag} {policy:11} {name:10} {digest(result)}", flush=True)
            if trace in ("philly", "itp"):
                milp = replace(SimConfig(), placement="milp")
                result = Simulator(cluster, make_policy("fcfs"), milp).run(chunk, warm)
                print(f"{tag} fcfs        milp       {digest(result)}", flush=True)
            chosen = choosing(cluster, chunk, warm, w.start)
            print(f"{tag} random      choosing   {digest(chosen)}", flush=True)


if __name__ == "__main__":
    main()
