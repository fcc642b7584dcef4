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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from rltuned.clusters import load_cluster
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates
from rltuned.rl import LOOPS
from rltuned.rl.agent import ActorCritic
from rltuned.rl.env import SchedulingEnv, split
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.export import export_actor, git_commit
from rltuned.rl.gae import compute_gae
from rltuned.rl.imitate import clone, demonstrate
from rltuned.rl.tick_env import TickEnv
from rltuned.sim.simulator import SimConfig
from rltuned.sim.slurm import SlurmParams
from rltuned.sim.slurm_config import params_from_show_config, params_record
from rltuned.sim.ticks import TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


@dataclass
class Args:
    # Experiment
    trace: str = "philly"
    """trace file or bundled name; its first 90% by submit time trains"""
    cluster: str = "philly-slice"
    """cluster preset or TOML spec"""
    base: str = "fcfs"
    """base policy the agent re-ranks and is rewarded against"""
    metric: str = "bsld"
    """bsld | wait | jct | util"""
    estimates: str = "qssf-noise"
    """runtime-estimate model the scheduler sees"""
    estimates_seed: int = 0
    """seed of the estimate model"""
    loop: str = "ticks"
    """ticks: the daemon's loop (one ranking per tick, Slurm's schedulers behind it; rl/tick_env.py);
    paper: the paper-replication loop (one job chosen per decision; rl/env.py)"""
    interval_s: float = 60.0
    """ticks: the daemon's interval_s"""
    lever: str = "priority"
    """ticks: the daemon's apply.lever (priority | site_factor)"""
    slurm_config: str | None = None
    """ticks: a saved `scontrol show config` of the Slurm to model (default: Slurm 22.05's defaults, with
    --backfill choosing sched/backfill or sched/builtin)"""
    placement_levers: bool = False
    """ticks: OverSubscribe and ExcNodeList steering on (the MILP runs every tick, as in the daemon
    with placement.oversubscribe or placement.steer_untyped)"""
    backfill: bool = True
    """ticks: sched/backfill behind the main scheduler; paper: EASY backfilling behind the chosen head"""
    placement: str = "pack"
    """paper: pack | spread | milp"""
    window: int = 256
    """jobs per episode (the paper's batch)"""
    warmup: int = 512
    """preceding jobs scheduled first (unscored) so each window meets a busy cluster"""
    reward: str = "terminal"
    """terminal: the paper's normalized gap at the end; dense: the waiting cost as it accrues (env.py)"""
    seed: int = 0
    """seeds torch, numpy, random and the window sampler"""
    out: str = "models/philly-fcfs-bsld"
    """model directory: actor.pt, manifest.json, curve.csv, curve.json, checkpoint.pt"""
    # Algorithm
    epochs: int = 40
    """training epochs"""
    episodes_per_epoch: int = 24
    """episodes (windows) collected per update"""
    minutes: float | None = None
    """stop after this much wall time, at the end of an epoch"""
    pi_lr: float = 3e-3
    """actor learning rate"""
    vf_lr: float = 3e-3
    """critic learning rate"""
    update_epochs: int = 6
    """passes over the batch per update (early-stopped by target_kl)"""
    num_minibatches: int = 4
    """minibatches per pass"""
    clip_ratio: float = 0.2
    """PPO clipping of the probability ratio"""
    target_kl: float = 0.02
    """stop the policy steps once the approximate KL exceeds 1.5x this"""
    gamma: float = 1.0
    """discount (episodes are short and the reward terminal)"""
    gae_lambda: float = 1.0
    """GAE lambda: 1 because the only reward comes at the end of ~500-1,000 decisions, which
    lambda^T would otherwise erase for all but the last few"""
    ent_coef: float = 0.0
    """entropy bonus"""
    rank_prior: float = 0.0
    """score penalty per base-order slot: > 0 starts sampling near the base policy (see agent.Actor)"""
    imitate_episodes: int = 0
    """base-policy episodes the actor imitates before PPO (0: start uniform; see rl.imitate)"""
    imitate_steps: int = 500
    """gradient steps of that imitation (minibatches of 256 decisions)"""
    imitate_lr: float = 3e-3
    """learning rate of that imitation, actor and critic"""
    checkpoint_every: int = 5
    """epochs between checkpoints"""
    resume: bool = False
    """continue from out/checkpoint.pt"""
    # Filled at runtime
    extra: dict[str, Any] = field(default_factory=dict)
    """what the manifest records besides the fields above"""


IMITATION_SEED_OFFSET = 999_000
"""Keeps the imitation's windows apart from the PPO epochs' (seed * 1_000_003 + epoch * 1000 + e,
epoch < 999)."""


@dataclass
class Rollout:
    actor: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    critic: list[np.ndarray] = field(default_factory=list)
    actions: list[np.ndarray] = field(default_factory=list)
    """One slot (paper loop) or a ranking of the 256 slots (ticks) per decision."""
    logps: list[float] = field(default_factory=list)
    values: list[float] = field(default_factory=list)
    rewards: list[float] = field(default_factory=list)
    dones: list[bool] = field(default_factory=list)
    episode_rewards: list[float] = field(default_factory=list)
    base_scores: list[float] = field(default_factory=list)
    agent_scores: list[float] = field(default_factory=list)


def make_env(args: Args) -> SchedulingEnv | TickEnv:
    trace = load_trace(resolve_trace(args.trace))
    jobs, model = apply_estimates(trace.jobs, args.estimates, args.estimates_seed)
    args.extra["estimates_resolved"] = model
    train, held_out = split(jobs)
    if len(train) < args.window + args.warmup:
        raise UsageError(
            f"the training split has {len(train)} jobs; "
            f"--window {args.window} + --warmup {args.warmup} need more"
        )
    args.extra["train_jobs"] = len(train)
    args.extra["held_out_jobs"] = len(held_out)
    cluster = load_cluster(args.cluster)
    if args.loop == "ticks":
        return TickEnv(
            train, cluster, tick_settings(args), args.metric, args.window, args.warmup, args.reward
        )
    if args.loop != "paper":
        raise UsageError(f"--loop must be one of {LOOPS}, got {args.loop!r}")
    config = SimConfig(placement=args.placement, backfill=args.backfill)
    return SchedulingEnv(
        train, cluster, args.base, args.metric, args.window, config, args.warmup, args.reward
    )


def tick_settings(args: Args) -> TickSettings:
    """The daemon and Slurm a model is trained with: the Slurm parameters are recorded in the manifest,
    and the settings are read back from what the manifest records, as `rltunectl evaluate` reads them."""
    if args.slurm_config is None:
        slurm = SlurmParams(backfill=args.backfill)
    else:
        path = Path(args.slurm_config)
        try:
            slurm = params_from_show_config(path.read_text(encoding="utf-8"), str(path))
        except OSError as exc:
            raise UsageError(f"--slurm-config {path}: {exc.strerror}") from None
    args.extra["slurm_params"] = params_record(slurm)
    return tick_settings_of({**asdict(args), **args.extra}, args.base)


def collect(env: SchedulingEnv | TickEnv, agent: ActorCritic, episodes: int, seed: int) -> Rollout:
    """Run whole episodes with the current stochastic policy."""
    ro = Rollout()
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        done = False
        while not done:
            actor, mask, critic = (torch.from_numpy(np.array(obs[k])) for k in ("actor", "mask", "critic"))
            with torch.no_grad():
                action, logp, value = agent.act(actor, mask, critic, env.ranks)
            ro.actor.append(np.array(obs["actor"]))
            ro.mask.append(np.array(obs["mask"]))
            ro.critic.append(np.array(obs["critic"]))
            ro.actions.append(action.numpy())
            ro.logps.append(float(logp))
            ro.values.append(float(value))
            obs, reward, done, _, info = env.step(action.numpy())
            ro.rewards.append(reward)
            ro.dones.append(done)
        ro.episode_rewards.append(info["gap"])  # the paper's reward, whichever reward trains
        ro.base_scores.append(info["base_score"])
        ro.agent_scores.append(info["agent_score"])
    return ro


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


def train(args: Args, progress: Callable[[int, dict[str, float]], None] | None = None) -> Path:
    """Train, write the curve and checkpoints as it goes, and export the actor. Returns the model dir."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    args.extra.setdefault("training_commit", git_commit())  # the code as training starts, not as it ends
    seed_everything(args.seed)
    torch.set_num_threads(1)
    env = make_env(args)
    agent = ActorCritic(args.rank_prior)
    pi_opt = torch.optim.Adam(agent.actor.parameters(), lr=args.pi_lr)
    vf_opt = torch.optim.Adam(agent.critic.parameters(), lr=args.vf_lr)
    curve: list[dict[str, float]] = []
    first_epoch, wall_before = 0, 0.0
    checkpoint = out / "checkpoint.pt"
    if args.resume and checkpoint.is_file():
        state = torch.load(checkpoint, weights_only=True)
        agent.load_state_dict(state["agent"])
        pi_opt.load_state_dict(state["pi_opt"])
        vf_opt.load_state_dict(state["vf_opt"])
        first_epoch, wall_before = int(state["epoch"]), float(state["wall_s"])
        args.extra.update(state.get("extra", {}))  # e.g. the imitation's statistics and the first commit
        # The curve is written every epoch, the checkpoint every few: drop rows after the checkpoint.
        curve = json.loads((out / "curve.json").read_text())[:first_epoch]
    t0 = time.perf_counter()
    if first_epoch == 0 and args.imitate_episodes > 0:
        demo = demonstrate(
            env, args.imitate_episodes, args.seed * 1_000_003 + IMITATION_SEED_OFFSET, args.gamma
        )
        agent.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
        args.extra.update(clone(agent, demo, args.imitate_steps, args.imitate_lr, env.ranks))
        args.extra["imitation_decisions"] = len(demo.returns)
        args.extra["imitation_wall_s"] = time.perf_counter() - t0
        del demo
    epoch = first_epoch
    for epoch in range(first_epoch, args.epochs):
        ro = collect(env, agent, args.episodes_per_epoch, seed=args.seed * 1_000_003 + epoch * 1000)
        if epoch == 0 and args.imitate_episodes == 0:
            agent.actor.fit_input(torch.from_numpy(np.stack(ro.actor)), torch.from_numpy(np.stack(ro.mask)))
        stats = update(agent, pi_opt, vf_opt, ro, args)
        wall = wall_before + time.perf_counter() - t0
        row = {
            "epoch": float(epoch + 1),
            "charts/episode_reward": float(np.mean(ro.episode_rewards)),
            "charts/base_score": float(np.mean(ro.base_scores)),
            "charts/agent_score": float(np.mean(ro.agent_scores)),
            "charts/decisions": float(len(ro.actions)),
            **stats,
            "time/wall_s": wall,
        }
        curve.append(row)
        _write_curve(out, curve)
        if progress is not None:
            progress(epoch + 1, row)
        if (epoch + 1) % args.checkpoint_every == 0 or epoch + 1 == args.epochs:
            _checkpoint(checkpoint, agent, pi_opt, vf_opt, epoch + 1, wall, args.extra)
        if args.minutes is not None and wall >= args.minutes * 60:
            _checkpoint(checkpoint, agent, pi_opt, vf_opt, epoch + 1, wall, args.extra)
            break
    info = {k: v for k, v in asdict(args).items() if k not in ("extra", "resume", "out")}
    info.update(args.extra)
    info["epochs_done"] = len(curve)
    info["training_wall_s"] = curve[-1]["time/wall_s"] if curve else 0.0
    return export_actor(agent.actor, out, info)


def _write_curve(out: Path, curve: list[dict[str, float]]) -> None:
    (out / "curve.json").write_text(json.dumps(curve, indent=1) + "\n")
    with (out / "curve.csv").open("w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(curve[0]))
        writer.writeheader()
        writer.writerows(curve)


def _checkpoint(path: Path, agent: ActorCritic, pi_opt: torch.optim.Optimizer, vf_opt: torch.optim.Optimizer,
                epoch: int, wall: float, extra: dict[str, Any]) -> None:  # fmt: skip
    tmp = path.with_suffix(".tmp")
    state = {"agent": agent.state_dict(), "pi_opt": pi_opt.state_dict(), "vf_opt": vf_opt.state_dict(),
             "epoch": epoch, "wall_s": wall, "extra": extra}  # fmt: skip
    torch.save(state, tmp)
    tmp.replace(path)
