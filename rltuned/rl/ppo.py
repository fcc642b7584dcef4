"""PPO training against the simulator, in CleanRL's shape: one `Args`, one readable loop in paper order.

rollout (whole episodes) -> GAE -> flattened `b_*` batch -> `mb_*` minibatch epochs (clipped policy loss,
value regression, KL early stop) -> log a row of the training curve -> checkpoint.
"""

from __future__ import annotations

import csv
import json
import random
import time
from collections.abc import Callable
from dataclasses import asdict
from functools import cache, partial
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltuned.clusters import load_cluster
from rltuned.core.guard import HEAD, GuardSettings
from rltuned.domain import ClusterSpec, Job
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates, draw_seeds
from rltuned.policies.loglinear import parse_loglinear
from rltuned.rl import LOOPS
from rltuned.rl.agent import ActorCritic
from rltuned.rl.args import Args
from rltuned.rl.env import SchedulingEnv
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.export import export_actor, git_commit
from rltuned.rl.gae import compute_gae
from rltuned.rl.imitate import clone, demonstrate, sharpen
from rltuned.rl.rollouts import Collector, Rollout, make_collector
from rltuned.rl.splits import split_range, train_jobs
from rltuned.rl.tick_env import TickEnv
from rltuned.rl.validation import Validator, confirm, frozen, gap
from rltuned.sim.simulator import SimConfig
from rltuned.sim.slurm import SlurmParams
from rltuned.sim.slurm_config import params_from_file, params_from_record, params_record
from rltuned.sim.ticks import TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace

BEST_FILE = "best.pt"
"""The actor's weights at the best validation score so far (exported instead of the last)."""
Optimizers = tuple[torch.optim.Optimizer, torch.optim.Optimizer]
"""The actor's and the critic's."""
Curve = list[dict[str, float]]
"""One row per epoch, as curve.json holds them."""
Progress = Callable[[int, dict[str, float]], None]
"""Called after each epoch with its number and curve row."""
IMITATION_SEED_OFFSET = 999_000
"""Keeps the imitation's windows apart from the PPO epochs' (seed * 1_000_003 + epoch * 1000 + e,
epoch < 999)."""


def make_env(args: Args) -> SchedulingEnv | TickEnv:
    jobs, cluster = _trace_and_cluster(args)
    train = train_jobs(jobs)
    if len(train) < args.window + args.warmup:
        raise UsageError(
            f"the training split has {len(train)} jobs; "
            f"--window {args.window} + --warmup {args.warmup} need more"
        )
    args.extra["slots"] = cluster.slots  # what the daemon must read as slots (`[slurm] slots`)
    args.extra["train_jobs"] = len(train)
    args.extra["validation_jobs"] = len(split_range(len(jobs), "validation"))
    args.extra["test_jobs"] = len(split_range(len(jobs), "test"))
    if args.loop == "ticks":
        return TickEnv(
            train,
            cluster,
            tick_settings(args),
            args.metric,
            args.window,
            args.warmup,
            args.reward,
            args.runtime_input,
        )
    return SchedulingEnv(
        train, cluster, args.base, args.metric, args.window, loop_config(args), args.warmup, args.reward
    )


def make_validator(args: Args, seeds: range | None = None) -> Validator:
    """The validation split's windows in the training loop, warmed up like the training episodes, on the
    validation draws of the estimate noise (or on `seeds`)."""
    jobs, cluster = _trace_and_cluster(args)
    config = tick_settings(args) if args.loop == "ticks" else loop_config(args)
    first = args.estimates_seed
    if seeds is None:
        seeds = draw_seeds(args.extra["estimates_resolved"], first, args.validation_estimate_seeds)
    draws = [jobs if s == first else _estimated_jobs(args.trace, args.estimates, s)[0] for s in seeds]
    return Validator(draws, cluster, args.base, config, args.warmup, args.metric, args.validation_window)


def confirmation_seeds(args: Args) -> range:
    """The `confirm_estimate_seeds` draws after the validation draws; refused for limits with one draw."""
    validation, count = args.validation_estimate_seeds, args.confirm_estimate_seeds
    seeds = draw_seeds(args.extra["estimates_resolved"], args.estimates_seed, validation + count)[validation:]
    if len(seeds) < count:
        raise UsageError(
            f"--confirm-estimate-seeds {count}: the estimates ({args.extra['estimates_resolved']}) have no "
            "other draw to confirm on"
        )
    return seeds


def _trace_and_cluster(args: Args) -> tuple[tuple[Job, ...], ClusterSpec]:
    if args.loop not in LOOPS:
        raise UsageError(f"--loop must be one of {LOOPS}, got {args.loop!r}")
    jobs, model = _estimated_jobs(args.trace, args.estimates, args.estimates_seed)
    args.extra["estimates_resolved"] = model
    return jobs, load_cluster(args.cluster)


@cache
def _estimated_jobs(trace: str, estimates: str, seed: int) -> tuple[tuple[Job, ...], str]:
    """Loaded once per process: the environment and the validator of a process read the same trace."""
    jobs, model = apply_estimates(load_trace(resolve_trace(trace)).jobs, estimates, seed)
    return tuple(jobs), model


def loop_config(args: Args) -> SimConfig:
    """The paper-replication loop's settings."""
    return SimConfig(placement=args.placement, backfill=args.backfill)


def tick_settings(args: Args) -> TickSettings:
    """The daemon and Slurm a model is trained with: the Slurm parameters are recorded in the manifest,
    and the settings are read back from what the manifest records, as `rltunectl evaluate` reads them.
    The Slurm model is `--slurm-config`'s, else one a recipe recorded, else Slurm 22.05's defaults."""
    recorded = args.extra.get("slurm_params")
    if args.slurm_config is not None:
        slurm = params_from_file(Path(args.slurm_config))
    elif isinstance(recorded, dict):  # a recipe's Slurm model (rl/recipe.py), possibly an older one
        slurm = params_from_record(recorded)
    else:
        slurm = SlurmParams(backfill=args.backfill)
    args.extra["slurm_params"] = params_record(slurm)
    # The daemon's default `[guard]` with the run's promote_to, recorded with the model.
    args.extra["guard"] = asdict(GuardSettings(promote_to=args.guard_promote_to))
    return tick_settings_of({**asdict(args), **args.extra}, args.base)


def update(agent: ActorCritic, pi_opt: torch.optim.Optimizer, vf_opt: torch.optim.Optimizer,
           ro: Rollout, args: Args) -> dict[str, float]:  # fmt: skip
    values = np.array(ro.values, dtype=np.float32)
    adv, ret = compute_gae(np.array(ro.rewards, dtype=np.float32), values, np.array(ro.dones), 0.0,
                           args.gamma, args.gae_lambda)  # fmt: skip
    b_actor = torch.from_numpy(np.stack(ro.actor))
    b_mask = torch.from_numpy(np.stack(ro.mask))
    b_critic = torch.from_numpy(np.stack(ro.critic))
    b_actions = torch.from_numpy(np.stack(ro.actions))
    ranks = args.loop == "ticks"
    b_logp = torch.tensor(ro.logps)
    b_adv = torch.from_numpy(adv)
    # Normalized over the whole batch: a minibatch can be a single step, whose std is undefined.
    b_adv = (b_adv - b_adv.mean()) / (b_adv.std(unbiased=False) + 1e-8)
    b_ret = torch.from_numpy(ret)
    n = len(ro.actions)
    size = max(1, n // args.num_minibatches)
    stats: dict[str, float] = {}
    kls: list[float] = []
    clipfracs: list[float] = []
    entropies: list[float] = []
    stop = False
    for epoch in range(args.update_epochs):
        order = torch.randperm(n)
        for lo in range(0, n, size):
            mb = order[lo : lo + size]
            logp, entropy, value = agent.evaluate(b_actor[mb], b_mask[mb], b_critic[mb], b_actions[mb], ranks)
            ratio = torch.exp(logp - b_logp[mb])
            mb_adv = b_adv[mb]
            clipped = torch.clamp(ratio, 1 - args.clip_ratio, 1 + args.clip_ratio)
            pi_loss = -(torch.min(ratio * mb_adv, clipped * mb_adv)).mean() - args.ent_coef * entropy.mean()
            v_loss = ((value - b_ret[mb]) ** 2).mean()
            with torch.no_grad():
                kls.append(float(((ratio - 1) - torch.log(ratio)).mean()))
                clipfracs.append(float(((ratio - 1).abs() > args.clip_ratio).float().mean()))
                entropies.append(float(entropy.mean()))
            # Checked before every step, not after a full pass: one pass of large steps can move the
            # policy several nats away from the one that collected the data.
            if kls[-1] > 1.5 * args.target_kl:
                stop = True
                break
            pi_opt.zero_grad()
            vf_opt.zero_grad()
            (pi_loss + v_loss).backward()
            pi_opt.step()
            vf_opt.step()
            stats["losses/policy_loss"] = pi_loss.detach().item()
            stats["losses/value_loss"] = v_loss.detach().item()
        stats["update_epochs"] = float(epoch + 1)
        if stop:
            break
    with torch.no_grad():
        pred = agent.get_value(b_critic)
    var = float(b_ret.var()) if n > 1 else 0.0
    stats["losses/approx_kl"] = kls[-1] if kls else 0.0
    stats["losses/clipfrac"] = float(np.mean(clipfracs)) if clipfracs else 0.0
    stats["losses/entropy"] = entropies[0] if entropies else 0.0  # of the policy that collected the batch
    stats["losses/explained_variance"] = float("nan") if var == 0 else 1 - float((b_ret - pred).var()) / var
    return stats


def seed_everything(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train(args: Args, progress: Progress | None = None) -> Path:
    """Train, write the curve and checkpoints as it goes, and export the actor. Returns the model dir."""
    args.check()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.extra.setdefault("training_commit", git_commit())  # the code as training starts, not as it ends
    seed_everything(args.seed)
    torch.set_num_threads(1)
    env = make_env(args)
    if args.confirm_estimate_seeds:
        confirmation_seeds(args)  # refused now, not after the training it would follow
    agent = ActorCritic(args.rank_prior, args.runtime_input)
    opts = (
        torch.optim.Adam(agent.actor.parameters(), lr=args.pi_lr),
        torch.optim.Adam(agent.critic.parameters(), lr=args.vf_lr),
    )
    curve, wall_before, finished = _resume(args, agent, opts)
    if not finished:
        curve = _train(args, env, agent, opts, curve, wall_before, progress)
    _write_curve(out, curve)  # a resume that trained nothing drops rows written after its checkpoint
    # best.pt is the best validated actor of this run: its record is extra["validation"].
    best = out / BEST_FILE
    if args.validate_every and "validation" in args.extra and best.is_file():
        agent.actor.load_state_dict(torch.load(best, weights_only=True))
    if args.confirm_estimate_seeds:
        seeds = confirmation_seeds(args)
        args.extra["confirmation"] = {
            "draws": list(seeds),
            **confirm(make_validator(args, seeds), frozen(agent.actor)),
        }
    info = {k: v for k, v in asdict(args).items() if k not in ("extra", "resume", "out")}
    info.update(args.extra)
    info["epochs_done"] = len(curve)
    info["training_wall_s"] = curve[-1]["time/wall_s"] if curve else 0.0
    return export_actor(agent.actor, out, info)


def _train(
    args: Args,
    env: SchedulingEnv | TickEnv,
    agent: ActorCritic,
    opts: Optimizers,
    curve: Curve,
    wall_before: float,
    progress: Progress | None,
) -> Curve:
    """The imitation warm start (a new run only), the base's validation scores, then PPO's epochs."""
    t0 = time.perf_counter()
    clones = not curve and args.imitate_episodes > 0  # a new run with a warm start
    if clones:
        teacher = parse_loglinear(args.imitate_teacher) if args.imitate_teacher else None
        demo = demonstrate(
            env, args.imitate_episodes, args.seed * 1_000_003 + IMITATION_SEED_OFFSET, args.gamma, teacher
        )
        agent.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
        args.extra.update(clone(agent, demo, args.imitate_steps, args.imitate_lr, env.ranks))
        if args.imitate_sharpen != 1.0:
            args.extra.update(sharpen(agent, args.imitate_sharpen, demo))
        args.extra["imitation_decisions"] = len(demo.returns)
        args.extra["imitation_wall_s"] = time.perf_counter() - t0
        del demo
    validator = make_validator(args) if args.validate_every else None
    collector = make_collector(
        partial(make_env, args),
        env,
        args.rank_prior,
        args.workers,
        partial(make_validator, args) if validator is not None else None,
        validator,
        args.ray,
    )
    args.extra["workers"] = collector.workers
    try:
        if validator is not None:
            _base_scores(args, collector, validator)
            if clones:  # the clone itself may be the best checkpoint
                args.extra["imitation_validation"] = _validate(args, collector, agent, 0)
        return _epochs(args, collector, agent, opts, curve, wall_before - t0, progress)
    finally:
        collector.close()


def _base_scores(args: Args, collector: Collector, validator: Validator) -> None:
    """The base's validation scores, once per run; a resumed run must validate as its run did, or its
    best actor's gap and the next ones would be measured on different windows."""
    draws = len(validator.draws)
    setup = {"window": args.validation_window, "draws": draws, "estimates_seed": args.estimates_seed}
    if "validation_base_scores" not in args.extra:
        started = time.perf_counter()
        args.extra["validation_base_scores"] = collector.validate(None)
        args.extra["validation_wall_s"] = time.perf_counter() - started  # the budget's first estimate
        args.extra["validation_setup"] = setup
        return
    recorded = args.extra.get("validation_setup", setup)  # runs from before it was recorded: the count
    if recorded != setup or len(args.extra["validation_base_scores"]) != len(validator.windows):
        raise UsageError(
            f"the run being resumed validated on {recorded} ({len(args.extra['validation_base_scores'])} "
            f"windows), this one would on {setup} ({len(validator.windows)}): resume with its "
            "--validation-window, --validation-estimate-seeds and --estimates-seed, or start a new run"
        )


def _resume(args: Args, agent: ActorCritic, opts: Optimizers) -> tuple[Curve, float, bool]:
    """With `--resume` and a checkpoint: its state restored, and the curve, wall time and whether the
    run is finished (it stopped on its budget and is not given a larger one)."""
    out = Path(args.out)
    checkpoint = out / "checkpoint.pt"
    if not (args.resume and checkpoint.is_file()):
        return [], 0.0, False
    state = torch.load(checkpoint, weights_only=True)
    trained = state.get("extra", {}).get("guard", {}).get("promote_to", HEAD)
    if trained != args.guard_promote_to:
        raise UsageError(
            f"--guard-promote-to {args.guard_promote_to}: the run being resumed trained with {trained}; "
            "resume with that or start a new run"
        )
    agent.load_state_dict(state["agent"])
    opts[0].load_state_dict(state["pi_opt"])
    opts[1].load_state_dict(state["vf_opt"])
    args.extra.update(state.get("extra", {}))  # e.g. the imitation's statistics and the first commit
    if "best_actor" in state:  # checkpoints from before it was kept leave best.pt as it is
        _restore_best(out / BEST_FILE, state["best_actor"])
    # The curve is written every epoch, the checkpoint every few: drop rows after the checkpoint.
    curve = json.loads((out / "curve.json").read_text())[: int(state["epoch"])]
    spent = state.get("stopped_on_budget_min")  # no --minutes now: no budget, so it trains on
    finished = spent is not None and args.minutes is not None and args.minutes <= float(spent)
    return curve, float(state["wall_s"]), finished


def _epochs(
    args: Args,
    collector: Collector,
    agent: ActorCritic,
    opts: Optimizers,
    curve: Curve,
    clock_offset: float,
    progress: Progress | None,
) -> Curve:
    """PPO epochs from the first not in `curve` until `args.epochs` or the time budget; the training
    wall time is `perf_counter() + clock_offset`."""
    out = Path(args.out)
    checkpoint = out / "checkpoint.pt"
    pi_opt, vf_opt = opts
    for epoch in range(len(curve), args.epochs):
        started = time.perf_counter()
        if curve and args.minutes is not None and started + clock_offset >= args.minutes * 60:
            break  # resumed past the budget (a run killed after its end); a new run trains one epoch
        first_seed = args.seed * 1_000_003 + epoch * 1000
        ro = collector.collect(agent, range(first_seed, first_seed + args.episodes_per_epoch))
        if epoch == 0 and args.imitate_episodes == 0:
            agent.actor.fit_input(torch.from_numpy(np.stack(ro.actor)), torch.from_numpy(np.stack(ro.mask)))
        stats = update(agent, pi_opt, vf_opt, ro, args)
        wall = time.perf_counter() + clock_offset
        validates = bool(args.validate_every) and (epoch + 1) % args.validate_every == 0
        over_budget = args.minutes is not None and out_of_time(
            wall,
            args.minutes * 60,
            time.perf_counter() - started,
            float(args.extra.get("validation_wall_s", 0.0)) if args.validate_every else 0.0,
            validates,
        )
        row = {
            "epoch": float(epoch + 1),
            "charts/episode_reward": float(np.mean(ro.episode_rewards)),
            "charts/base_score": float(np.mean(ro.base_scores)),
            "charts/agent_score": float(np.mean(ro.agent_scores)),
            "charts/decisions": float(len(ro.actions)),
            **stats,
        }
        last = epoch + 1 == args.epochs or over_budget
        if args.validate_every and (validates or last):
            row.update(_validate(args, collector, agent, epoch + 1))
            args.extra["validation_wall_s"] = time.perf_counter() + clock_offset - wall
            wall = time.perf_counter() + clock_offset
        row["time/wall_s"] = wall
        curve.append(row)
        _write_curve(out, curve)
        if progress is not None:
            progress(epoch + 1, row)
        if (epoch + 1) % args.checkpoint_every == 0 or epoch + 1 == args.epochs or over_budget:
            stopped = args.minutes if over_budget else None
            _checkpoint(checkpoint, agent, (pi_opt, vf_opt), epoch + 1, wall, args.extra, stopped)
        if over_budget:
            break
    return curve


def out_of_time(wall_s: float, budget_s: float, epoch_s: float, validation_s: float, validates: bool) -> bool:
    """Whether the epoch that just updated must be the last: the budget covers validation too.

    An epoch that continues still pays its own scheduled validation, then one more epoch (as long as this
    one) and that epoch's closing validation (as long as the last measured one); stopping now pays only
    one validation. An ITP validation takes about as long as three epochs, so checking the wall time
    alone overran a 55-minute budget by 23 minutes.
    """
    continue_s = (validation_s if validates else 0.0) + epoch_s + validation_s
    return wall_s + continue_s > budget_s


def _validate(args: Args, collector: Collector, agent: ActorCritic, epoch: int) -> dict[str, float]:
    """Score the deterministic policy on the validation windows; keep its actor if it is the best yet."""
    base = args.extra["validation_base_scores"]
    scores = collector.validate(agent)
    g = gap(base, scores, args.metric, args.validation_score)
    best = args.extra.get("validation")
    if best is not None and best.get("score", "pooled") != args.validation_score:
        raise UsageError(
            f"--validation-score {args.validation_score}: the run being resumed chose its best actor by "
            f"{best.get('score', 'pooled')}; resume with that score or start a new run"
        )
    if best is None or g > best["gap"]:
        path = Path(args.out) / BEST_FILE
        _save(agent.actor.state_dict(), path)
        args.extra["validation"] = {
            "epoch": epoch,
            "gap": g,
            "score": args.validation_score,
            "base_score": float(np.mean(base)),
            "agent_score": float(np.mean(scores)),
            "windows": len(scores),
            "wins": int(sum(_better(a, b, args.metric) for a, b in zip(scores, base, strict=True))),
        }
    return {"val/base_score": float(np.mean(base)), "val/agent_score": float(np.mean(scores)), "val/gap": g}


def _better(agent: float, base: float, metric: str) -> bool:
    return agent > base if metric == "util" else agent < base


def _restore_best(path: Path, best_actor: dict[str, torch.Tensor] | None) -> None:
    """`best.pt` as it was at the checkpoint, so that it matches the restored validation record."""
    if best_actor is None:
        path.unlink(missing_ok=True)
        return
    _save(best_actor, path)


def _write_curve(out: Path, curve: Curve) -> None:
    (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    with (out / "curve.csv").open("w", newline="") as handle:
        # Validation columns appear only in the epochs that validated: the header is every row's keys.
        writer = csv.DictWriter(handle, fieldnames=list(dict.fromkeys(k for row in curve for k in row)))
        writer.writeheader()
        writer.writerows(curve)


def _checkpoint(path: Path, agent: ActorCritic, opts: Optimizers,
                epoch: int, wall: float, extra: dict[str, Any],
                stopped_on_budget_min: float | None) -> None:  # fmt: skip
    """The best actor so far goes in too: `best.pt` is rewritten after every better validation, so after
    a crash it can be newer than the checkpoint's `extra["validation"]`, which describes this copy."""
    best = path.parent / BEST_FILE
    validated = "validation" in extra and best.is_file()  # not a best.pt some earlier run left here
    state = {"agent": agent.state_dict(), "pi_opt": opts[0].state_dict(), "vf_opt": opts[1].state_dict(),
             "epoch": epoch, "wall_s": wall, "extra": extra,
             "best_actor": torch.load(best, weights_only=True) if validated else None,
             "stopped_on_budget_min": stopped_on_budget_min}  # fmt: skip
    _save(state, path)


def _save(obj: object, path: Path) -> None:
    """Written whole or not at all: a run killed mid-write leaves the previous file."""
    tmp = path.with_suffix(".tmp")
    torch.save(obj, tmp)
    tmp.replace(path)
