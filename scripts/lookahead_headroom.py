"""Validation only: does a planner that looks ahead beat the best single order? Room beyond per-job orders.

Usage: python scripts/lookahead_headroom.py MODEL_DIR [--draws 3] [--workers 2] [--windows N]
       [--orders "sjf;saf;loglinear:b=-0.5,c=0,w0=60"] [--exact] [--forecast-h 0]

Every order the actor can serve is a per-job order over the state it sees (docs/training.md, "How far a
per-job order goes"); a grid over such orders and PPO both ended within a few percent of the best
heuristic. This asks whether a policy that is not a fixed per-job order does better, with nothing a
daemon could not know: at every tick whose queue changed, the planner simulates each of `--orders` from
the snapshot (running jobs hold their nodes for the rest of their time limits, pending jobs queue in the
order, EASY backfilling on time limits taken as runtimes, no future arrivals unless `--forecast-h H`
replays the last H hours' arrivals) and serves this tick the
order whose simulated mean bounded slowdown of the pending jobs (with the wait they have already had) is
lowest; ties keep the first order listed. It runs in the model's own loop settings (the daemon's loop,
no model) on the model's validation windows, `--draws` draws of the limit noise numbered as the trainer
numbers them, beside each order served alone; per-window gaps (`rl/env.reward`) with a 90% window
bootstrap. Never the test split.

The forward model is the paper loop's simulator started from the snapshot: each running job is re-queued
at `now` with its remaining limit and placed first, so where it sits may differ from where it runs
(fragmentation the planner does not see); Slurm's tick cadence, levers and backfill parameters are not in
it. A gain here is an upper bound on what such a planner-guided policy could teach the actor; a loss
says the inputs leave no room a short look ahead can find.
"""

from __future__ import annotations

import argparse
import math
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace

import numpy as np

from rltuned.domain import ClusterSnapshot, Job, PriorityContext
from rltuned.policies import Policy, make_policy
from rltuned.policies.loglinear import parse_loglinear
from rltuned.rl.env import reward
from rltuned.rl.export import load_model
from rltuned.rl.validation import Validator, by_window, gap_summary, model_validator
from rltuned.sim.metrics import BSLD_BOUND_S, compute_metrics
from rltuned.sim.simulator import SimConfig, Simulator
from rltuned.sim.ticks import TickEpisode, TickSettings, run_order

LOOKAHEAD = "lookahead"
_STATE: dict[str, object] = {}


def order_of(spec: str) -> Policy:
    return parse_loglinear(spec) if spec.startswith("loglinear:") else make_policy(spec)


@dataclass(frozen=True)
class RunningFirst:
    """The forward model's order: the re-queued running jobs first (they hold their nodes now), then
    the candidate's."""

    inner: Policy
    running: frozenset[int]
    name: str = "running-first"
    dynamic: bool = False

    def key(self, job: Job, ctx: PriorityContext) -> float:
        return -math.inf if job.id in self.running else self.inner.key(job, ctx)


def planned_bsld(
    snapshot: ClusterSnapshot, order: Policy, sim: Simulator, forecast: Sequence[Job] = ()
) -> float:
    """Mean bounded slowdown of the pending jobs (and of `forecast`, jobs expected to arrive, at their
    submit times) if `order` served from now on, limits as runtimes."""
    now = snapshot.now
    jobs = []
    for r in snapshot.running:
        rest = max(r.expected_end - now, 60.0)
        jobs.append(replace(r.job, submit=now, runtime=rest, time_limit=rest))
    waited = {j.id: now - j.submit for j in snapshot.pending}
    jobs.extend(replace(j, submit=now, runtime=j.estimate) for j in snapshot.pending)
    waited.update((j.id, 0.0) for j in forecast)
    jobs.extend(forecast)
    sim.policy = RunningFirst(order, frozenset(r.job.id for r in snapshot.running))
    result = sim.run(jobs)
    total = 0.0
    for rec in result.records:
        if rec.job.id in waited:
            run = rec.job.estimate
            wait = waited[rec.job.id] + rec.start - rec.job.submit
            total += max((wait + run) / max(run, BSLD_BOUND_S), 1.0)
    return total / len(waited)


def replayed(past: Sequence[Job], now: float, hours: float) -> list[Job]:
    """The forecast: the jobs submitted in the last `hours` (a daemon reads them from sacct) arriving
    again over the next `hours`, limits as runtimes, under new ids."""
    span = hours * 3600.0
    return [
        replace(j, id=-1 - i, submit=j.submit + span, runtime=j.estimate)
        for i, j in enumerate(j for j in past if now - span <= j.submit < now)
    ]


def _setup(model_dir: str, draws: int, exact: bool = False) -> None:
    import torch

    torch.set_num_threads(1)
    manifest = load_model(model_dir).manifest
    validator = model_validator(manifest, draws)
    _STATE["chosen_on"] = int(manifest.get("validation_estimate_seeds") or 1)  # draws choices read
    if exact:  # an oracle: every limit is the job's runtime, in the real run and in the forward run
        validator.draws = [[replace(j, time_limit=j.runtime) for j in validator.draws[0]]]
        validator.windows = [(0, span) for d, span in validator.windows if d == 0]
    _STATE["validator"] = validator


def _run(task: tuple[str, tuple[str, ...], int, float]) -> tuple[str, int, float, dict[str, int], float]:
    """One contender (an order alone, or the planner over `orders`) on one window-draw."""
    contender, orders, index, hours = task
    validator = _STATE["validator"]
    assert isinstance(validator, Validator) and isinstance(validator.config, TickSettings)
    draw, span = validator.windows[index]
    chunk, warm = span.with_warmup(validator.draws[draw], validator.warmup)
    start = time.perf_counter()
    if contender != LOOKAHEAD:
        result = run_order(validator.cluster, list(chunk), warm, validator.config, order_of(contender))
        return contender, index, compute_metrics(result).avg_bsld, {}, time.perf_counter() - start
    policies = {o: order_of(o) for o in orders}
    sim = Simulator(validator.cluster, policies[orders[0]], SimConfig())
    episode = TickEpisode(validator.cluster, list(chunk), warm, validator.config)
    chosen: Counter[str] = Counter()
    last: tuple[int, ...] = ()
    while episode.result is None:
        snapshot = episode.snapshot
        assert snapshot is not None
        queue = tuple(j.id for j in snapshot.pending)
        if len(queue) > 1 and queue != last:
            last = queue
            forecast = replayed(chunk, snapshot.now, hours) if hours > 0 else []
            scores = {o: planned_bsld(snapshot, p, sim, forecast) for o, p in policies.items()}
            best = min(scores, key=lambda o: (scores[o], orders.index(o)))
            chosen[best] += 1
            episode.base = policies[best]
        episode.step(None)
    return (
        LOOKAHEAD,
        index,
        compute_metrics(episode.result).avg_bsld,
        dict(chosen),
        time.perf_counter() - start,
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--draws", type=int, default=3)
    parser.add_argument("--orders", default="sjf;saf;loglinear:b=-0.5,c=0,w0=60", help="';'-separated")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--windows", type=int, default=0, help="only the first N window-draws (a trial)")
    parser.add_argument("--exact", action="store_true", help="an oracle: limits are the runtimes (one draw)")
    parser.add_argument("--forecast-h", type=float, default=0.0, help="replay the last H hours' arrivals")
    args = parser.parse_args()
    orders = tuple(o for o in args.orders.split(";") if o)
    setup = (args.model, args.draws, args.exact)
    _setup(*setup)
    validator = _STATE["validator"]
    assert isinstance(validator, Validator)
    cells = range(args.windows or len(validator.windows))
    tasks = [(c, orders, i, args.forecast_h) for c in (LOOKAHEAD, *orders) for i in cells]
    values: dict[str, list[float]] = {}
    chosen: Counter[str] = Counter()
    seconds: dict[str, float] = {}
    with ProcessPoolExecutor(args.workers, initializer=_setup, initargs=setup) as pool:
        for contender, _, value, picks, secs in pool.map(_run, tasks, chunksize=1):
            values.setdefault(contender, []).append(value)
            chosen.update(picks)
            seconds[contender] = seconds.get(contender, 0.0) + round(secs, 1)
    print(f"{args.model}: {len(cells)} window-draws ({args.draws} draw(s)); orders {orders}")
    print(f"  forecast: the last {args.forecast_h:g} h of arrivals replayed")
    print(f"  the planner served: {dict(chosen)}; seconds: {dict(seconds)}")
    full = len(cells) == len(validator.windows)
    chosen_on = _STATE["chosen_on"] if full else 0
    assert isinstance(chosen_on, int)
    table = {c: by_window(v, validator) if full else np.asarray(v)[:, None] for c, v in values.items()}
    for contender, cell in table.items():
        draws = np.round(cell.mean(axis=0), 3).tolist()
        print(f"  {contender:34s} mean bsld {cell.mean():.3f}  per draw {draws}")
    for reference in orders:
        for contender in (LOOKAHEAD, *orders):
            if contender == reference:
                continue
            gaps = np.vectorize(lambda b, o: reward(b, o, "bsld"))(table[reference], table[contender])
            print(f"  {contender:34s} over {reference:34s} {gap_summary(gaps)}")
            if 0 < chosen_on < gaps.shape[1]:  # draws no choice read
                fresh = gap_summary(gaps[:, chosen_on:])
                print(f"  {'':34s}   draws {chosen_on + 1}-{gaps.shape[1]} (fresh): {fresh}")


if __name__ == "__main__":
    main()
