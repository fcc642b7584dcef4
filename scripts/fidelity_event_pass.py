"""When the main scheduler first tries a submitted or updated job (`SlurmParams.event_pass`): saved
`rltunectl fidelity --submit` runs replayed with both rules (docs/fidelity.md).

Usage: python scripts/fidelity_event_pass.py RUN_DIR[:decide=DAEMON_TOML] [...] [--interval 2]

RUN_DIR holds a run's sacct.txt, sinfo.json, show-config.txt and, when saved, slurmctld.log (millisecond
times, and the background loop's grid fitted from it) and daemon.log (the daemon's writes, replayed at
their logged times). With `:decide=DAEMON_TOML` the simulated daemon decides again with that config
instead. Each run is replayed with `at_once` (a submit or write is tried at its instant: the model before
2026-11-24) and `background` (at slurmctld's background loop's next tick, as Slurm 22.05 does).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

from rltuned.clusters import load_cluster
from rltuned.daemon.config import load as load_daemon
from rltuned.fidelity import report
from rltuned.sim.slurm import SlurmParams


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--interval", type=float, default=2.0)
    args = parser.parse_args()
    settings = report.slurm_settings
    print("| run | replay | event_pass | tau | within 2 s | same type | same nodes | loop fitted |")
    print("|---|---|---|---|---|---|---|---|")
    for spec in args.runs:
        where, _, decide = spec.partition(":decide=")
        run = Path(where)
        daemon = load_daemon(Path(decide)) if decide else None
        log = run / "daemon.log" if not decide and (run / "daemon.log").exists() else None
        ctld = run / "slurmctld.log" if (run / "slurmctld.log").exists() else None
        how = "decides again" if decide else ("logged writes" if log else "Slurm alone")
        for mode in ("at_once", "background"):

            def with_mode(
                config: Path | None, params: str | None, mode: str = mode
            ) -> tuple[SlurmParams, bool]:
                found, memory = settings(config, params)
                return replace(found, event_pass=mode), memory

            report.slurm_settings = with_mode  # measure() reads the run's Slurm through it
            measured = report.measure(
                run / "sacct.txt", load_cluster(str(run / "sinfo.json")), run / "show-config.txt", None,
                args.interval, 0, daemon=daemon, daemon_log=log, ctld_log=ctld,
            )  # fmt: skip
            f, loop = measured.fidelity, measured.background
            fitted = f"{loop.period_s:.4f} s, {loop.passes} passes" if loop else "-"
            print(
                f"| {run.name} | {how} | {mode} | {f.kendall_tau:.3f} | {f.within_interval_share:.0%} "
                f"| {f.same_gpu_type_share:.0%} | {f.same_nodes_share:.0%} | {fitted} |"
            )
    report.slurm_settings = settings


if __name__ == "__main__":
    main()
