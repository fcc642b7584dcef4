"""`rltunectl`: the control and offline CLI. Parsing and printing only; the work lives in the library."""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace
from pathlib import Path
from typing import Any

from rltuned import __version__
from rltuned.clusters import load_cluster
from rltuned.dataclass_cli import add_fields, from_namespace, parse_grid
from rltuned.domain import ClusterSpec, Job
from rltuned.errors import RltunedError, UsageError, exit_with
from rltuned.estimates import MODELS, apply_estimates, draw_seeds, resolve_model
from rltuned.placement.milp import MAX_K, MilpConfig
from rltuned.policies import POLICIES
from rltuned.rl import ENGINES, LOOPS, METRIC_NAMES, REWARDS
from rltuned.rl.args import Args
from rltuned.rl.splits import SPLITS, disjoint_windows, random_windows, split_range
from rltuned.sim.runner import PolicyRun, Window, choose_windows, simulate_windows
from rltuned.sim.simulator import PLACEMENTS, SimConfig
from rltuned.traces import FORMATS, load_trace
from rltuned.traces.bundled import bundled_names, resolve_trace


class _Parser(argparse.ArgumentParser):
    """argparse, but errors raise UsageError so main() reports them in one line with status 2."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rltunectl", description="Control and offline tools for rltuned.")
    parser.add_argument("--version", action="version", version=f"rltunectl {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    sim = sub.add_parser("simulate", help="replay a trace on a simulated cluster and report metrics")
    sim.add_argument(
        "--trace", required=True, help=f"trace file, or a bundled name: {', '.join(bundled_names())}"
    )
    sim.add_argument("--format", choices=FORMATS, help="trace format (default: detected from the header)")
    sim.add_argument(
        "--lenient", action="store_true", help="skip and count malformed rows instead of failing"
    )
    sim.add_argument("--cluster", required=True, help="cluster preset, swf-N, or a TOML spec file")
    sim.add_argument("--policy", default="fcfs", help=f"one or more of {','.join(POLICIES)}, comma-separated")
    sim.add_argument("--placement", choices=PLACEMENTS, default="pack", help="greedy pack/spread or the MILP")
    sim.add_argument("--milp-k", type=int, default=8, help="jobs the MILP places jointly (default 8)")
    sim.add_argument(
        "--milp-time-limit-ms", type=float, default=50.0, help="MILP solve limit before fallback"
    )
    sim.add_argument(
        "--estimates", choices=MODELS, default="auto", help="runtime-estimate model (default auto)"
    )
    sim.add_argument("--estimates-seed", type=int, default=0, help="seed of the estimate model")
    sim.add_argument("--jobs", type=int, help="jobs per window (default: the whole trace)")
    where = sim.add_mutually_exclusive_group()
    where.add_argument("--start", type=int, help="index of the window's first job")
    where.add_argument("--sequences", type=int, help="number of random windows")
    sim.add_argument("--seed", type=int, default=0, help="seed for choosing random windows")
    sim.add_argument(
        "--warmup", type=int, default=0, help="preceding jobs run first, unmeasured, to load the cluster"
    )
    sim.add_argument(
        "--backfill", action=argparse.BooleanOptionalAction, default=True, help="EASY backfilling"
    )
    sim.add_argument("--backfill-depth", type=int, default=500, help="jobs examined per backfill pass")
    sim.add_argument("--json", action="store_true", help="print one JSON object")
    _add_train(sub)
    _add_evaluate(sub)
    _add_tune(sub)
    _add_headroom(sub)
    _add_fidelity(sub)
    _add_control(sub)
    return parser


def _add_fidelity(sub: argparse._SubParsersAction[_Parser]) -> None:
    fi = sub.add_parser(
        "fidelity",
        help="replay a finished Slurm workload in the simulator and compare it with what Slurm did",
        description="Replays the jobs of `sacct -P` output (JobID, User, Account, Partition, Submit, Start, "
        "End, NodeList, Timelimit, AllocTRES, ReqTRES, State) with their submit times, limits and real "
        "runtimes in the simulator's Slurm, and compares starts and nodes job by job (docs/fidelity.md).",
    )
    mode = fi.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--sacct", type=Path, help="saved `sacct -a -X -P -o ...` output of a finished workload"
    )
    mode.add_argument(
        "--submit",
        action="store_true",
        help="submit a time-compressed trace window to the Slurm of SLURM_CONF, wait, then compare",
    )
    fi.add_argument("--cluster", help="with --sacct: cluster preset, TOML spec, or a saved `sinfo --json`")
    fi.add_argument(
        "--daemon-config", type=Path, help="the rltuned daemon's config (enforce mode) to include"
    )
    fi.add_argument(
        "--ctld-log",
        type=Path,
        help="with --sacct: slurmctld's log (LogTimeFormat=iso8601_ms); its millisecond submit, start, end "
        "times replace sacct's whole seconds",
    )
    fi.add_argument(
        "--daemon-log",
        type=Path,
        help="with --sacct: the daemon's JSON log; its accepted writes are replayed at their logged times "
        "instead of deciding again (excludes --daemon-config)",
    )
    sm = fi.add_argument_group("--submit")
    sm.add_argument("--trace", default="philly", help="trace file or bundled name (philly)")
    sm.add_argument("--start", type=int, default=0, help="index of the window's first job (0)")
    sm.add_argument("--jobs", type=int, default=60, help="jobs in the window (60; 60-300 makes sense)")
    sm.add_argument(
        "--span", type=float, default=60.0, help="seconds the window's arrivals are squeezed into"
    )
    sm.add_argument(
        "--users", help="comma-separated users to submit as (default: yourself; others need root)"
    )
    sm.add_argument("--partition", default="main", help="partition to submit to (main)")
    sm.add_argument(
        "--out", type=Path, help="directory for sacct.txt, show-config.txt, sinfo.json, fidelity.json"
    )
    fi.add_argument("--slurm-config", type=Path, help="saved `scontrol show config` of that Slurm")
    fi.add_argument(
        "--scheduler-params",
        help="SchedulerParameters, e.g. bf_interval=1,sched_interval=1 (replaces the config's)",
    )
    fi.add_argument(
        "--interval", type=float, default=2.0, help="a start within this many seconds counts as matched (2)"
    )
    fi.add_argument("--worst", type=int, default=10, help="disagreements listed (10)")
    fi.add_argument("--plot", help="write real vs simulated start per job to this PNG")
    fi.add_argument("--json", action="store_true", help="print one JSON object")


def _add_train(sub: argparse._SubParsersAction[_Parser]) -> None:
    tr = sub.add_parser(
        "train",
        help="train a PPO policy against the simulator and export it",
        description="Train a PPO policy against the simulator and export it. Every flag is a field of "
        "rltuned.rl.args.Args (its docstring is the help below).",
    )
    _add_args_fields(tr)
    sw = sub.add_parser(
        "sweep",
        help="train one model per grid point on Ray Tune and rank them on the validation split",
        description="Every flag of `train`, plus --grid: one trial per point of the grid, each judged on "
        "the validation split (never test). --ray is the Ray cluster the trials run on (local: start one).",
    )
    _add_args_fields(sw)
    sw.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2",
        help="values of one training flag to try (repeat for a product grid), e.g. --grid seed=1,2,3",
    )
    sw.add_argument("--cpus-per-trial", type=int, default=1, help="rollout processes per trial")


REQUIRED_TRAINING_FLAGS = ("trace", "cluster", "out")
"""Flags `train` and `sweep` need; `--recipe` may give the first two."""


def _add_args_fields(parser: argparse.ArgumentParser) -> None:
    add_fields(
        parser,
        Args,
        skip=("extra",),
        required=REQUIRED_TRAINING_FLAGS,
        choices={
            "metric": METRIC_NAMES,
            "estimates": MODELS,
            "loop": LOOPS,
            "lever": ("priority", "site_factor"),
            "placement": PLACEMENTS,
            "reward": REWARDS,
        },
        aliases={"num_minibatches": "--minibatches", "interval_s": "--interval"},
    )
    parser.add_argument(
        "--recipe",
        metavar="MODEL",
        help="start from the flags a model's manifest recorded (a model directory or its manifest.json); "
        "flags given here override them, and --trace and --cluster are then the model's unless given; "
        "--out is always needed (rl/recipe.py)",
    )


def _training_args(args: argparse.Namespace) -> Args:
    """Args from the flags given, over the recipe's (if any), over the defaults."""
    from rltuned.rl.recipe import read_recipe

    recipe = read_recipe(args.recipe) if args.recipe else None
    train_args = from_namespace(
        Args, args, recipe=recipe.fields if recipe else None, required=REQUIRED_TRAINING_FLAGS
    )
    if recipe is not None:
        notes = [f"recipe {args.recipe}: {len(recipe.fields)} recorded flags"]
        if recipe.unrecorded:
            notes.append(f"not recorded, today's defaults: {', '.join(recipe.unrecorded)}")
        if recipe.epochs_done:
            notes.append(f"the recorded run trained {recipe.epochs_done} epochs")
        if train_args.slurm_config is None and not recipe.in_default_slurm():
            notes.append(
                "its run trained in an older Slurm model than today's default, which this run uses "
                "(scripts/retrain_shipped.py retrains in the recorded one)"
            )
        print("; ".join(notes), file=sys.stderr)
    return train_args


def _add_tune(sub: argparse._SubParsersAction[_Parser]) -> None:
    tu = sub.add_parser(
        "tune",
        help="search multifactor weights for a cluster on a trace (training split), choose them on the "
        "validation split, and print the slurm.conf lines",
    )
    tu.add_argument("--trace", required=True)
    tu.add_argument("--cluster", required=True, help="preset name or a saved `sinfo --json`")
    tu.add_argument("--slurm-config", type=Path, help="saved `scontrol show config`: the current settings")
    tu.add_argument("--metric", choices=("bsld", "wait", "jct"), default="bsld")
    tu.add_argument("--trials", type=int, default=40)
    tu.add_argument("--train-windows", type=int, default=4, help="random training windows per trial")
    tu.add_argument("--window", type=int, default=1024, help="jobs per training window")
    tu.add_argument("--warmup", type=int, default=512)
    tu.add_argument("--estimates", choices=MODELS, default="qssf-noise")
    tu.add_argument("--seed", type=int, default=0)
    tu.add_argument("--json", action="store_true")


def cmd_tune(args: argparse.Namespace) -> int:
    from rltuned.sim.slurm import SlurmParams
    from rltuned.sim.slurm_config import params_from_file
    from rltuned.tuning import TuneSettings, slurm_conf_lines, tune

    _require(args.trials >= 1, f"--trials must be >= 1, got {args.trials}")
    _require(args.train_windows >= 1, f"--train-windows must be >= 1, got {args.train_windows}")
    current = SlurmParams() if args.slurm_config is None else params_from_file(args.slurm_config)
    cluster = load_cluster(args.cluster)
    jobs, _ = apply_estimates(load_trace(_trace_path(args.trace)).jobs, args.estimates, args.seed)
    settings = TuneSettings(
        args.metric, args.trials, args.train_windows, args.window, args.warmup, seed=args.seed
    )

    def progress(done: int, value: float) -> None:
        if not args.json:
            print(
                f"trial {done}/{args.trials}: training {args.metric} {value:.3f}", file=sys.stderr, flush=True
            )

    result = tune(cluster, jobs, current, settings, progress)
    lines = slurm_conf_lines(result.chosen.weights)
    if args.json:
        body = {
            "trace": args.trace, "cluster": cluster.name, "metric": args.metric, "trials": result.trials,
            "validation_windows": result.validation_windows, "current": _scored(result.current),
            "chosen": _scored(result.chosen), "finalists": [_scored(f) for f in result.finalists],
            "gain_pct": result.gain_pct, "slurm_conf": lines,
        }  # fmt: skip
        print(json.dumps(body, indent=2))
        return 0
    kept = result.chosen is result.current
    print(f"# rltunectl tune: {args.trace} on {cluster.name}, {result.trials} trials, metric {args.metric}")
    now, best = result.current.validation, result.chosen.validation
    print(f"# validation split ({result.validation_windows} disjoint windows): current {now:.3f}, "
          f"chosen {best:.3f} ({result.gain_pct:+.1f}%)")  # fmt: skip
    if kept:
        print("# no trial beat the current settings on validation: keep them")
    if result.chosen.weights.size_relative:
        print("# PriorityFlags: add SMALL_RELATIVE_TO_TIME to the flags you set (one line holds them all)")
    elif result.current.weights.size_relative:
        print("# PriorityFlags: remove SMALL_RELATIVE_TO_TIME, keep your other flags")
    print("\n".join(lines))
    return 0


def _add_headroom(sub: argparse._SubParsersAction[_Parser]) -> None:
    hr = sub.add_parser(
        "headroom",
        help="what knowing each job's true runtime, or each window's best heuristic, would gain over the "
        "best heuristic on a trace's training or validation split: how much room an order has",
    )
    hr.add_argument("--trace", required=True)
    hr.add_argument("--cluster", required=True, help="preset name or a saved `sinfo --json`")
    hr.add_argument("--split", choices=("train", "validation"), default="validation")
    hr.add_argument("--slurm-config", type=Path, help="saved `scontrol show config`: the Slurm modelled")
    hr.add_argument("--estimates", choices=MODELS, default="auto")
    hr.add_argument("--estimates-seed", type=int, default=0, help="the first draw of the limits")
    hr.add_argument("--draws", type=int, default=3, help="draws of the limits (one for a trace's own)")
    hr.add_argument("--window", type=int, help="jobs per window (default: 1,024, or 512 or 256 to get six)")
    hr.add_argument("--warmup", type=int, default=512)
    hr.add_argument(
        "--load",
        type=float,
        default=1.0,
        help="gaps between submissions divided by this (1.3: 30%% more jobs an hour): a busier cluster",
    )
    hr.add_argument("--json", action="store_true")


def cmd_headroom(args: argparse.Namespace) -> int:
    from rltuned.rl.evaluate import tick_settings_of
    from rltuned.rl.headroom import LimitProfile, headroom
    from rltuned.sim.slurm_config import params_from_file
    from rltuned.traces.load import at_load

    _require(args.warmup >= 0, f"--warmup must be >= 0, got {args.warmup}")
    _require(args.draws >= 1, f"--draws must be >= 1, got {args.draws}")
    _require(
        args.load > 0 and math.isfinite(args.load), f"--load must be a finite number above 0, got {args.load}"
    )
    cluster = load_cluster(args.cluster)
    trace = load_trace(_trace_path(args.trace)).jobs
    estimates = resolve_model(args.estimates, trace)
    seeds = draw_seeds(estimates, args.estimates_seed, args.draws)
    draws = [at_load(apply_estimates(trace, estimates, seed)[0], args.load) for seed in seeds]
    jobs = draws[0]
    span = split_range(len(jobs), args.split)
    _require(args.window is None or 0 < args.window <= len(span),
             f"--window must be 1 to the split's {len(span)} jobs, got {args.window}")  # fmt: skip
    windows = disjoint_windows(span, args.window)
    profile = LimitProfile.of(jobs[span.start : span.stop])  # the first draw's
    _require(profile.jobs > 0, f"--trace {args.trace}: no job of the split has a runtime to know")
    settings = tick_settings_of({}, "sjf")  # what train and evaluate model: placement levers off
    if args.slurm_config is not None:
        settings = replace(settings, slurm=params_from_file(args.slurm_config))
    rows = headroom(draws, cluster, settings, windows, args.warmup)
    run = {"trace": args.trace, "cluster": cluster.name, "split": args.split, "estimates": estimates,
           "estimates_seeds": list(seeds), "windows": len(windows),
           "jobs_per_window": windows[0].stop - windows[0].start, "warmup_jobs": args.warmup,
           "load": args.load, "limits": asdict(profile)}  # fmt: skip
    print(json.dumps(_headroom_body(run, rows), indent=2) if args.json else _headroom_text(run, rows))
    return 0


def _headroom_body(run: dict[str, Any], rows: Sequence[Any]) -> dict[str, Any]:
    """The run, the best heuristic, each gauge's gap over it and every row; a gauge's row is marked, as
    no admin can run it."""
    from rltuned.rl.headroom import GAUGES, best_heuristic, room

    columns = ("avg_bsld", "avg_wait_s", "p99_wait_s")
    return {
        **run, "best_heuristic": best_heuristic(rows).name,
        "gap_over_best": room(rows, len(run["estimates_seeds"])),
        "rows": [{"name": r.name, "gauge": r.name in GAUGES, **{k: r.mean(k) for k in columns},
                  "per_window": [m.avg_bsld for m in r.windows]} for r in rows],
    }  # fmt: skip


def _headroom_text(run: dict[str, Any], rows: Sequence[Any]) -> str:
    from rltuned.rl.headroom import SELECTOR, best_heuristic, room
    from rltuned.rl.standings import render_standings

    best, gains = best_heuristic(rows), room(rows, len(run["estimates_seeds"]))
    seeds, limits = run["estimates_seeds"], run["limits"]
    size = f"{run['windows']} x {run['jobs_per_window']} jobs after {run['warmup_jobs']} warm-up"
    drawn = f" (draws {seeds[0]}-{seeds[-1]})" if len(seeds) > 1 else ""
    load = f", load x{run['load']:g}" if run["load"] != 1.0 else ""
    down, pick = gains["exact-down"], gains[SELECTOR]
    return "\n".join([
        f"# rltunectl headroom: {run['trace']} on {run['cluster']}, {run['split']} split, {size},"
        f" limits {run['estimates']}{drawn}{load}",
        f"# limits: median use {limits['median_use']:.2f} of the limit; {limits['under_tenth']:.0%} of jobs"
        f" ran under a tenth of theirs; {limits['past_limit']:.0%} ran past it",
        render_standings(rows),
        f"# the best heuristic here: {best.name}, bounded slowdown {best.mean('avg_bsld'):.3f}",
        f"# exact-down, an order that knew the runtime of every overstated limit: {_gap(down)} per window"
        f" over it ({down['wins']} W / {down['losses']} L of {len(best.windows)}): the room runtime"
        " information leaves for the order (W/L/T: exact-down's)",
        f"# {SELECTOR}, the heuristic that did best in each window: {_gap(pick)}: the most a chooser that"
        " follows one heuristic a window could gain, read generously (its other columns are the winners',"
        " put together)",
    ])  # fmt: skip


def _gap(record: dict[str, Any]) -> str:
    low, high = record["interval"]
    return f"{record['gap']:+.1%} [{low:+.1%}, {high:+.1%}]"


def _scored(s: Any) -> dict[str, Any]:
    return {"weights": asdict(s.weights), "train": s.train, "validation": s.validation,
            "per_window": list(s.per_window)}  # fmt: skip


def _add_evaluate(sub: argparse._SubParsersAction[_Parser]) -> None:
    ev = sub.add_parser("evaluate", help="compare base policies with their RL-enabled counterparts")
    ev.add_argument("--model", required=True, help="model directory (actor.pt + manifest.json)")
    ev.add_argument("--trace", required=True)
    ev.add_argument("--cluster", required=True)
    ev.add_argument("--base", default="fcfs", help="comma-separated base policies")
    ev.add_argument(
        "--engine",
        choices=ENGINES,
        default="compiled",
        help="what runs the model: its compiled kernel, or the TorchScript interpreter (figures recorded "
        "before 2026-11-28 were run by it; near-ties may rank differently)",
    )
    ev.add_argument("--loop", choices=LOOPS, help="default: the loop the model was trained in")
    ev.add_argument(
        "--placement", choices=PLACEMENTS, help="paper loop; default: the model's training placement"
    )
    ev.add_argument("--estimates", choices=MODELS, help="default: the model's training estimates")
    ev.add_argument("--estimates-seed", type=int, default=0)
    ev.add_argument("--backfill", action=argparse.BooleanOptionalAction, help="default: as trained")
    ev.add_argument(
        "--sequences",
        type=int,
        help="random (possibly overlapping) windows instead of the split's disjoint windows; not for results",
    )
    ev.add_argument(
        "--jobs", type=int, help="jobs per window (default: 1,024, 512 or 256, whichever gives 6 windows)"
    )
    ev.add_argument("--warmup", type=int, help="default: the model's training warm-up")
    ev.add_argument("--seed", type=int, default=0)
    ev.add_argument(
        "--split",
        choices=SPLITS,
        default="validation",
        help="validation (first 80%% trains, next 10%%): where every choice is made; test (last 10%%): run "
        "once per shipped model; all: a trace kept apart from training",
    )
    ev.add_argument(
        "--heuristics",
        action="store_true",
        help="instead of model vs base: the model against every heuristic the daemon can serve and Slurm "
        "alone (multifactor as trained), per window, with tails and fairness",
    )
    ev.add_argument(
        "--tuned",
        type=Path,
        help="with --heuristics: also Slurm alone with the weights in this `rltunectl tune --json` output",
    )
    ev.add_argument("--json", action="store_true")
    ev.add_argument("--plot", help="write box plots and a wait CDF to this PNG")


def _require(ok: bool, message: str) -> None:
    """Argument checks that argparse cannot express; they run before any trace is read."""
    if not ok:
        raise UsageError(message)


def _policy_list(text: str, what: str) -> list[str]:
    """A comma-separated list of policy names, each known."""
    names = [p.strip().lower() for p in text.split(",") if p.strip()]
    unknown = [p for p in names if p not in POLICIES]
    _require(
        bool(names) and not unknown, f"unknown {what} {unknown or text!r}; choose from {', '.join(POLICIES)}"
    )
    return names


def _trace_path(name: str) -> Path:
    """A bundled trace name or a path, which must exist."""
    path = resolve_trace(name)
    _require(path.is_file(), f"trace {name!r} not found (bundled names: {', '.join(bundled_names())})")
    return path


def cmd_simulate(args: argparse.Namespace) -> int:
    _require(args.backfill_depth >= 0, f"--backfill-depth must be >= 0, got {args.backfill_depth}")
    _require(1 <= args.milp_k <= MAX_K, f"--milp-k must be in [1, {MAX_K}], got {args.milp_k}")
    _require(
        args.milp_time_limit_ms >= 0, f"--milp-time-limit-ms must be >= 0, got {args.milp_time_limit_ms}"
    )
    _require(args.warmup >= 0, f"--warmup must be >= 0, got {args.warmup}")
    policies = _policy_list(args.policy, "policy")
    cluster = load_cluster(args.cluster)
    trace = load_trace(_trace_path(args.trace), args.format, lenient=args.lenient)
    jobs, model = apply_estimates(trace.jobs, args.estimates, args.estimates_seed)
    windows = choose_windows(len(jobs), args.jobs, args.start, args.sequences, args.seed)
    config = SimConfig(
        placement=args.placement,
        backfill=args.backfill,
        backfill_depth=args.backfill_depth,
        milp=MilpConfig(k=args.milp_k, time_limit_ms=args.milp_time_limit_ms),
    )
    runs = _run_all(jobs, cluster, policies, config, windows, args.warmup, show_progress=not args.json)
    header = {
        "trace": str(args.trace),
        "trace_report": trace.report.summary(),
        "cluster": cluster.name,
        "estimates": model,
        "estimates_seed": args.estimates_seed,
        "window_seed": args.seed if args.sequences else None,
        "warmup_jobs": args.warmup,
    }
    if args.json:
        bodies = [{**header, **run.as_dict()} for run in runs]
        print(json.dumps(bodies[0] if len(bodies) == 1 else {**header, "comparison": bodies}, indent=2))
    else:
        print(render_table(header, runs, cluster.describe()))
    return 0


def _run_all(
    jobs: Sequence[Job],
    cluster: ClusterSpec,
    policies: Sequence[str],
    config: SimConfig,
    windows: Sequence[Window],
    warmup: int,
    show_progress: bool,
) -> list[PolicyRun]:
    total = len(policies) * len(windows)
    bar = None
    if show_progress and sys.stderr.isatty() and total > 1:
        from tqdm import tqdm

        bar = tqdm(total=total, desc="simulating", unit="window", file=sys.stderr)
    try:
        tick = bar.update if bar is not None else None
        return [simulate_windows(jobs, cluster, p, config, windows, tick, warmup) for p in policies]
    finally:
        if bar is not None:
            bar.close()


def render_table(header: dict[str, object], runs: Sequence[PolicyRun], cluster: str) -> str:
    cols = (
        "policy",
        "jobs",
        "dropped",
        "avg_wait_s",
        "p95_wait_s",
        "avg_jct_s",
        "avg_bsld",
        "gpu_util",
        "jobs_per_s",
    )
    rows = [[_fmt(run.as_dict()[c]) for c in cols] for run in runs]
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(cols)]
    lines = [
        f"trace    {header['trace_report']}",
        f"cluster  {cluster}",
        f"estimates {header['estimates']} (seed {header['estimates_seed']}); "
        f"placement {runs[0].config.placement}; backfill {'EASY' if runs[0].config.backfill else 'off'}; "
        f"windows {len(runs[0].windows)}; warm-up {header['warmup_jobs']} jobs",
        "",
        "  ".join(c.rjust(w) for c, w in zip(cols, widths, strict=True)),
    ]
    lines += ["  ".join(v.rjust(w) for v, w in zip(r, widths, strict=True)) for r in rows]
    return "\n".join(lines)


def _fmt(value: object) -> str:
    if isinstance(value, float):
        return f"{value:.3f}" if abs(value) < 10 else f"{value:,.0f}"
    return str(value)


def cmd_fidelity(args: argparse.Namespace) -> int:
    from rltuned.daemon.config import load as load_daemon_config
    from rltuned.fidelity.plot import plot_starts
    from rltuned.fidelity.report import as_json, measure, render

    _require(args.interval >= 0, f"--interval must be >= 0, got {args.interval}")
    _require(args.worst >= 0, f"--worst must be >= 0, got {args.worst}")
    daemon = load_daemon_config(args.daemon_config) if args.daemon_config else None
    if args.submit:
        return _fidelity_submit(args, daemon)
    _require(args.cluster is not None, "--sacct needs --cluster")
    _require(
        args.daemon_log is None or args.daemon_config is None,
        "--daemon-log replays what the daemon wrote; --daemon-config decides again: give one",
    )
    cluster = load_cluster(args.cluster)
    try:
        measured = measure(
            args.sacct, cluster, args.slurm_config, args.scheduler_params, args.interval, args.worst, daemon,
            args.daemon_log, args.ctld_log,
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(f"--sacct {args.sacct}: {exc}") from None
    if args.plot:
        plot_starts(measured.pairs, args.plot, f"{args.sacct.name} on {cluster.name}")
    body = as_json(measured.fidelity)
    text = render(measured.fidelity)
    if measured.whole_seconds is not None:
        body["whole_second_jobs"] = measured.whole_seconds
        text += f"\ntimes from slurmctld's log ({measured.whole_seconds} jobs kept sacct's whole seconds)"
    if measured.background is not None:
        loop = measured.background
        body["background_loop"] = {"period_s": loop.period_s, "phase_s": loop.phase_s, "passes": loop.passes}
        text += f"\nslurmctld's background loop (from its log): every {loop.period_s:.4f} s"
        text += f", fitted on {loop.passes} passes"
    if measured.writes is not None:
        body["daemon_writes"] = len(measured.writes.writes)
        body["daemon_writes_unknown_jobs"] = measured.writes.unknown_jobs
        text += f"\ndaemon writes replayed {len(measured.writes.writes)}"
        text += f" ({measured.writes.unknown_jobs} to jobs outside the workload)"
    print(json.dumps(body, indent=2) if args.json else text)
    return 0


def _fidelity_submit(args: argparse.Namespace, daemon: Any) -> int:
    import getpass

    from rltuned.fidelity.experiment import Experiment, run_on_slurm
    from rltuned.fidelity.plot import plot_starts
    from rltuned.fidelity.report import as_json, render
    from rltuned.fidelity.submit import Commands

    _require(args.out is not None, "--submit needs --out DIR")
    _require(args.jobs >= 2 and args.start >= 0, "--jobs must be >= 2 and --start >= 0")
    trace = load_trace(_trace_path(args.trace)).jobs
    window = trace[args.start : args.start + args.jobs]
    _require(len(window) == args.jobs, f"the trace has {len(trace)} jobs; the window does not fit")
    users = tuple(u for u in (args.users or getpass.getuser()).split(",") if u)
    exp = Experiment(args.partition, users, args.span, args.interval, args.worst, args.daemon_config, daemon)
    outcome = run_on_slurm(window, exp, args.out, Commands.real())
    body = {
        **as_json(outcome.fidelity),
        "logged_writes_replayed": as_json(outcome.logged) if outcome.logged else None,
        "demand_ratio": outcome.demand_ratio,
        "slurm_job_ids": outcome.slurm_ids,
        "daemon": str(args.daemon_config) if args.daemon_config else None,
    }
    (args.out / "fidelity.json").write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")
    plot_starts(outcome.pairs, args.plot or str(args.out / "starts.png"), f"{args.trace} window on Slurm")
    print(json.dumps(body, indent=2) if args.json else render(outcome.fidelity))
    return 0


def cmd_train(args: argparse.Namespace) -> int:
    from rltuned.rl.ppo import train

    train_args = _training_args(args)
    _policy_list(train_args.base, "base policy")
    train_args.check()
    load_cluster(train_args.cluster)
    _trace_path(train_args.trace)
    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(total=train_args.epochs, desc="training", unit="epoch", file=sys.stderr)

    def progress(epoch: int, row: dict[str, float]) -> None:
        line = (f"epoch {epoch}: reward {row['charts/episode_reward']:+.4f} "
                f"base {row['charts/base_score']:.2f} agent {row['charts/agent_score']:.2f} "
                f"kl {row['losses/approx_kl']:.4f} wall {row['time/wall_s']:.0f}s")  # fmt: skip
        if bar is not None:
            bar.update(1)
            bar.set_postfix_str(line)
        else:
            print(line, flush=True)

    out = train(train_args, progress)
    if bar is not None:
        bar.close()
    print(f"model written to {out}")
    return 0


def cmd_sweep(args: argparse.Namespace) -> int:
    from rltuned.rl.sweep import render, sweep

    base = _training_args(args)
    _policy_list(base.base, "base policy")
    load_cluster(base.cluster)
    _trace_path(base.trace)
    _require(args.cpus_per_trial >= 1, f"--cpus-per-trial must be >= 1, got {args.cpus_per_trial}")
    try:
        grid = parse_grid(Args, args.grid)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    trials = sweep(base, grid, Path(base.out), base.ray or "local", args.cpus_per_trial)
    print(render(trials, base.metric, _fmt))
    return 0


def cmd_evaluate(args: argparse.Namespace) -> int:
    from rltuned.rl.evaluate import compare, plot, tick_settings_of
    from rltuned.rl.export import load_model
    from rltuned.sim.ticks import TickSettings

    _require(args.warmup is None or args.warmup >= 0, f"--warmup must be >= 0, got {args.warmup}")
    _require(args.tuned is None or args.heuristics, "--tuned needs --heuristics")
    _require(not (args.plot and args.heuristics), "--plot draws model vs base, not --heuristics")
    tuned = _tuned_weights(args.tuned, args.trace) if args.tuned is not None else None
    import torch

    torch.set_num_threads(1)  # one 256-slot MLP per decision: a second thread only adds overhead
    model = load_model(args.model, args.engine)
    manifest = model.manifest
    bases = _policy_list(args.base, "base policy")
    cluster = load_cluster(args.cluster)
    # A model trained on the users' own time limits is judged on them, not on drawn estimates.
    estimates = args.estimates or str(manifest.get("estimates", "qssf-noise"))
    trace = load_trace(_trace_path(args.trace))
    jobs, model_name = apply_estimates(trace.jobs, estimates, args.estimates_seed)
    span = split_range(len(jobs), args.split)
    if args.sequences is None:
        windows = disjoint_windows(span, args.jobs)
    else:
        windows = random_windows(span, args.jobs or 1024, args.sequences, args.seed)
    warmup = args.warmup if args.warmup is not None else int(manifest.get("warmup", 0))
    # Models from before the daemon's loop existed were trained in the paper-replication loop.
    loop = args.loop or str(manifest.get("loop", "paper"))
    backfill = args.backfill if args.backfill is not None else bool(manifest.get("backfill", True))
    config: TickSettings | SimConfig
    if loop == "ticks":
        trained = manifest.get("base")
        _require(
            trained is None or bases == [trained],
            f"--base {args.base}: the model was trained on base {trained!r}, and the daemon refuses a model "
            "on another base; evaluate it on its own",
        )
        config = tick_settings_of(manifest, bases[0], backfill)
        placement = "milp" if config.core.places else "off"
    else:
        placement = args.placement or str(manifest.get("placement", "pack"))
        config = SimConfig(placement=placement, backfill=backfill)
    header = {
        "model": str(args.model), "trace": args.trace, "split": args.split, "cluster": cluster.name,
        "loop": loop, "estimates": model_name, "estimates_seed": args.estimates_seed,
        "placement": placement, "backfill": backfill, "warmup_jobs": warmup,
        "jobs_per_window": windows[0].stop - windows[0].start, "sequences": len(windows),
        "windows": "disjoint" if args.sequences is None else "random", "window_seed": args.seed,
    }  # fmt: skip
    if args.heuristics:
        _require(len(bases) == 1, f"--heuristics compares the model on one base, got --base {args.base}")
        _require(tuned is None or loop == "ticks", "--tuned: Slurm alone exists only in the daemon's loop")
        run = (jobs, cluster, config, windows, warmup)
        metric = str(manifest.get("metric", "bsld"))
        return _print_standings(args, model, bases[0], run, tuned, metric, header)
    results = [compare(model, jobs, cluster, b, config, windows, warmup) for b in bases]
    body = {**header, "results": [r.as_dict() for r in results]}
    if args.plot:
        plot(results, args.plot)
    if args.json:
        print(json.dumps(body, indent=2))
    else:
        print(render_evaluation(body))
    return 0


def _tuned_weights(path: Path, trace: str) -> Any:
    """The weights a `rltunectl tune --json` output chose, read before any trace is: it must be for
    this trace."""
    from rltuned.sim.slurm_config import multifactor_from_record

    try:
        record = json.loads(path.read_text())
        weights = multifactor_from_record(record["chosen"]["weights"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UsageError(f"--tuned {path}: not a `rltunectl tune --json` output ({exc})") from exc
    _require(
        record.get("trace") in (None, trace),
        f"--tuned {path}: tuned on trace {record.get('trace')!r}, not {trace!r}",
    )
    return weights


def _print_standings(
    args: argparse.Namespace,
    model: Any,
    base: str,
    run: tuple[list[Job], ClusterSpec, Any, list[Window], int],
    tuned: Any,
    metric: str,
    header: dict[str, Any],
) -> int:
    from rltuned.rl.env import METRICS
    from rltuned.rl.standings import COLUMNS, render_standings, standings

    jobs, cluster, config, windows, warmup = run
    key = METRICS[metric]
    rows = standings(model, base, jobs, cluster, config, windows, warmup, tuned)
    if args.json:
        body = {
            **header,
            "record_metric": key,
            "standings": [
                {"name": r.name, **{k: r.mean(k) for k, _ in COLUMNS},
                 "per_window": [getattr(m, key) for m in r.windows],
                 "model_wins_losses_ties": None if r is rows[0] else rows[0].record_against(r, key)}
                for r in rows
            ],
        }  # fmt: skip
        print(json.dumps(body, indent=2))
    else:
        print(describe_evaluation(header) + "\n")
        print(render_standings(rows, key))
    return 0


LOOP_NAMES = {"ticks": "the daemon's loop", "paper": "paper-replication loop"}


def describe_evaluation(header: dict[str, Any]) -> str:
    return (
        f"model {header['model']} on {header['trace']} ({header['split']}), cluster {header['cluster']}, "
        f"{LOOP_NAMES[header['loop']]}, estimates "
        f"{header['estimates']}, placement {header['placement']}, backfill {header['backfill']}, "
        f"{header['sequences']} x {header['jobs_per_window']} jobs (warm-up {header['warmup_jobs']})"
    )


def render_evaluation(body: dict[str, Any]) -> str:
    lines = [
        describe_evaluation(body),
        "",
        f"{'base':>12} {'metric':>11} {'base':>12} {'RL':>12} {'improvement':>12}",
    ]
    for r in body["results"]:
        for key in ("avg_bsld", "avg_wait_s", "avg_jct_s", "gpu_util"):
            m = r[key]
            lines.append(
                f"{r['base']:>12} {key:>11} {m['base_mean']:>12.2f} {m['rl_mean']:>12.2f} "
                f"{m['improvement_pct']:>+11.1f}%"
            )
        guarded = r.get("guarded", {})
        if guarded.get("base") or guarded.get("rl"):
            lines.append(
                f"{r['base']:>12} {'guarded':>11} {guarded['base']:>12} {guarded['rl']:>12}"
                "  jobs the starvation guard acted on"
            )
    return "\n".join(lines)


def _add_control(sub: argparse._SubParsersAction[_Parser]) -> None:
    helps = {
        "status": "the running daemon's mode, model and last tick",
        "reload-model": "validate a model and swap it in (default: the config's model path)",
        "pause": "stop ticking (nothing is read or written) until resume",
        "resume": "tick again",
        "plan": "the running daemon's last plan (else computed here): ranks, priorities, placement, actions",
        "explain": "one job's features, score and rank",
        "reset": "undo every change rltuned made (hold+release fixed priorities, SiteFactor=0)",
    }
    for name, text in helps.items():
        p = sub.add_parser(name, help=text)
        p.add_argument("--config", type=Path, default=Path("/etc/rltuned/rltuned.toml"))
        p.add_argument("--socket", type=Path, help="control socket (default: from the config)")
        p.add_argument("--json", action="store_true")
        if name == "reload-model":
            p.add_argument("path", nargs="?", type=Path, help="model directory")
        if name == "status":
            p.add_argument(
                "--check",
                action="store_true",
                help="exit 1 unless the daemon answers and a tick completed within two intervals "
                "(for Docker's HEALTHCHECK and monitoring)",
            )
        if name == "explain":
            p.add_argument("job_id", type=int)


def cmd_control(args: argparse.Namespace) -> int:
    from rltuned.daemon import ctl
    from rltuned.daemon.logs import configure

    configure("warning", "auto", sys.stderr)  # stdout carries only the answer (for jq)
    if args.command == "plan":
        print(ctl.plan(args.config, args.socket, args.json))
    elif args.command == "explain":
        print(ctl.explain(args.config, args.socket, args.job_id, args.json))
    elif args.command == "reset":
        print(ctl.reset(args.config, args.socket))
    else:
        extra = {"path": str(args.path.resolve())} if getattr(args, "path", None) else {}
        reply = ctl.control(args.config, args.socket, args.command, **extra)
        reply.pop("ok", None)
        if getattr(args, "check", False) and not reply.get("healthy", False):
            raise RltunedError(f"unhealthy: {reply.get('problem')}")
        print(json.dumps(reply, indent=2, default=str) if args.json else _pairs(reply))
    return 0


def _pairs(reply: dict[str, Any]) -> str:
    return "\n".join(
        f"{k}: {json.dumps(v, default=str) if isinstance(v, dict) else v}" for k, v in reply.items()
    )


COMMANDS = {
    "simulate": cmd_simulate,
    "train": cmd_train,
    "sweep": cmd_sweep,
    "evaluate": cmd_evaluate,
    "tune": cmd_tune,
    "headroom": cmd_headroom,
    "fidelity": cmd_fidelity,
    **{
        name: cmd_control
        for name in ("status", "reload-model", "pause", "resume", "plan", "explain", "reset")
    },
}


def main(argv: Sequence[str] | None = None) -> None:
    def body() -> int:
        args = build_parser().parse_args(argv)
        return COMMANDS[args.command](args)

    exit_with("rltunectl", body)


if __name__ == "__main__":
    main()
