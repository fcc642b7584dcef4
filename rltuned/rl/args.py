"""Everything a training run is given: one dataclass, from which `rltunectl train` and `sweep` generate
their flags (rltuned/dataclass_cli.py) and which the manifest records field by field.

Kept apart from ppo.py so that building the command line does not import torch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from rltuned.errors import UsageError
from rltuned.policies.inputs import reads_history
from rltuned.policies.loglinear import parse_loglinear
from rltuned.rl import REWARDS

VALIDATION_SCORES = ("pooled", "per_window")
RUNTIME_INPUTS = ("limit", "predicted")
"""features.RUNTIME_INPUTS, restated so that the command line does not import the state's code (a test
checks that the two agree)."""
PROMOTE_TO = ("head", "base_rank")
"""core/guard.py's PROMOTE_TO, restated because importing the decision core imports torch (a test
checks that the two agree)."""


@dataclass
class Args:
    # Experiment
    trace: str = "philly"
    """trace file or bundled name; its first 80% by submit time trains (rl/splits.py)"""
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
    refresh_s: float = 0.0
    """ticks: the daemon's policy.refresh_s: a tick where nothing changed since the last decision decides
    again only this long after it (core/quiet.py; 0: every tick)"""
    guard_promote_to: str = "head"
    """ticks: the daemon's guard.promote_to, where the starvation guard puts a job the ranking held down
    (head | base_rank; core/guard.py)"""
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
    """terminal: the paper's normalized gap at the end; dense: the waiting cost as it accrues (env.py);
    relative (daemon's loop): the same less what the base side's run accrued over the same time"""
    runtime_input: str = "limit"
    """ticks: what the state's requested_time column holds: limit (the paper's) or predicted (the limit
    as the finished peers in the accounting correct it, as psjf ranks; needs a base that reads the
    accounting history, such as psjf, so that the daemon reads it too)"""
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
    """wall-time budget, validation included: an epoch is the last when one more epoch and its
    validation would not fit (as long as the last ones took)"""
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
    imitate_sharpen: float = 1.0
    """after the imitation, the actor's output layer times this (> 1: sharper): the served ranking, the
    argsort of the scores, stays the clone's, and the rankings PPO samples come closer to it (see
    rl.imitate.sharpen)"""
    imitate_teacher: str = ""
    """the order the imitation clones instead of the base's, e.g. loglinear:b=-0.5,c=0.25,w0=600
    (policies/loglinear.py; daemon's loop only); the reward and the fallback stay the base's"""
    workers: int = 0
    """rollout worker processes, each running whole episodes (0: one per core); the batch is the same
    for any number (rl/rollouts.py)"""
    ray: str | None = None
    """run the rollout workers as Ray actors on this Ray cluster (an address as `ray.init` takes it, e.g.
    `auto` or `ray://head:10001`, or `local` to start Ray on this machine); `workers` of them, 0: one per
    CPU the cluster offers (needs `pip install 'rltuned[ray]'`)"""
    checkpoint_every: int = 5
    """epochs between checkpoints"""
    validate_every: int = 0
    """epochs between runs of the deterministic policy on the validation split's disjoint windows (also
    after the last epoch); the exported actor is then the best on validation, not the last (0: never)"""
    validation_window: int | None = None
    """jobs per validation window (default: 1,024, 512 or 256, whichever gives the split six windows)"""
    validation_estimate_seeds: int = 1
    """draws of the runtime-estimate noise the validation windows run on: the training draw
    (`estimates_seed`) and the next ones (one for exact estimates or the trace's own limits)"""
    confirm_estimate_seeds: int = 0
    """after training, the exported actor and the base on this many further draws of the estimate noise
    (after the validation draws), which no choice read: the chosen checkpoint's gain without the luck of
    being chosen, recorded in the manifest's `confirmation` (0: not run; needs drawn estimates)"""
    validation_score: str = "pooled"
    """pooled: the normalized gap of the mean scores over the validation windows (the paper's); per_window:
    the mean of each window's normalized gap, so that one heavy window cannot choose the checkpoint"""
    resume: bool = False
    """continue from out/checkpoint.pt"""
    # Filled at runtime
    extra: dict[str, Any] = field(default_factory=dict)
    """what the manifest records besides the fields above"""

    def check(self) -> None:
        """Refuse values no run can use, naming the flag (train and sweep build Args the same way)."""
        rules: list[tuple[bool, str, object, str]] = [
            (self.window >= 2, "window", self.window, ">= 2"),
            (self.warmup >= 0, "warmup", self.warmup, ">= 0"),
            (self.epochs >= 1, "epochs", self.epochs, ">= 1"),
            (self.episodes_per_epoch >= 1, "episodes_per_epoch", self.episodes_per_epoch, ">= 1"),
            (self.minutes is None or self.minutes > 0, "minutes", self.minutes, "> 0"),
            (self.interval_s > 0, "interval_s", self.interval_s, "> 0"),
            (self.refresh_s >= 0, "refresh_s", self.refresh_s, ">= 0 (0: every tick)"),
            (
                self.guard_promote_to in PROMOTE_TO,
                "guard_promote_to",
                self.guard_promote_to,
                " or ".join(PROMOTE_TO),
            ),
            (self.pi_lr > 0, "pi_lr", self.pi_lr, "> 0"),
            (self.vf_lr > 0, "vf_lr", self.vf_lr, "> 0"),
            (self.update_epochs >= 1, "update_epochs", self.update_epochs, ">= 1"),
            (self.num_minibatches >= 1, "num_minibatches", self.num_minibatches, ">= 1"),
            (0 < self.clip_ratio < 1, "clip_ratio", self.clip_ratio, "in (0, 1)"),
            (self.target_kl > 0, "target_kl", self.target_kl, "> 0"),
            (0 < self.gamma <= 1, "gamma", self.gamma, "in (0, 1]"),
            (0 <= self.gae_lambda <= 1, "gae_lambda", self.gae_lambda, "in [0, 1]"),
            (self.ent_coef >= 0, "ent_coef", self.ent_coef, ">= 0"),
            (self.rank_prior >= 0, "rank_prior", self.rank_prior, ">= 0"),
            (self.imitate_episodes >= 0, "imitate_episodes", self.imitate_episodes, ">= 0"),
            (self.imitate_steps >= 1, "imitate_steps", self.imitate_steps, ">= 1"),
            (self.imitate_lr > 0, "imitate_lr", self.imitate_lr, "> 0"),
            (self.imitate_sharpen > 0, "imitate_sharpen", self.imitate_sharpen, "> 0"),
            (self.checkpoint_every >= 1, "checkpoint_every", self.checkpoint_every, ">= 1"),
            (self.validate_every >= 0, "validate_every", self.validate_every, ">= 0 (0: never)"),
            (
                self.validation_window is None or self.validation_window >= 1,
                "validation_window",
                self.validation_window,
                ">= 1",
            ),
            (self.workers >= 0, "workers", self.workers, ">= 0 (0: one per core)"),
            (self.confirm_estimate_seeds >= 0, "confirm_estimate_seeds", self.confirm_estimate_seeds, ">= 0"),
            (
                self.validation_estimate_seeds >= 1,
                "validation_estimate_seeds",
                self.validation_estimate_seeds,
                ">= 1",
            ),
        ]
        rules.append((self.validation_score in VALIDATION_SCORES, "validation_score", self.validation_score,
                      " | ".join(VALIDATION_SCORES)))  # fmt: skip
        for ok, name, value, rule in rules:
            if not ok:
                raise UsageError(f"--{name.replace('_', '-')} must be {rule}, got {value}")
        if self.imitate_teacher:
            parse_loglinear(self.imitate_teacher)
            if self.loop != "ticks" or self.imitate_episodes < 1:
                raise UsageError("--imitate-teacher needs --loop ticks and --imitate-episodes >= 1")
        if self.imitate_sharpen != 1.0 and (self.imitate_episodes < 1 or self.rank_prior != 0.0):
            raise UsageError(  # a prior would not be scaled with the network: the argsort would move
                "--imitate-sharpen scales a clone: it needs --imitate-episodes >= 1 and no --rank-prior"
            )
        if self.runtime_input not in RUNTIME_INPUTS:
            raise UsageError(
                f"--runtime-input must be one of {', '.join(RUNTIME_INPUTS)}, got {self.runtime_input}"
            )
        if self.runtime_input != "limit" and (self.loop != "ticks" or not _reads_history(self.base)):
            raise UsageError(
                f"--runtime-input {self.runtime_input} needs --loop ticks and a base that reads the"
                f" accounting history, such as psjf ({self.base!r} does not): the daemon reads sacct only"
                " for such a base"
            )
        if self.reward not in REWARDS:
            raise UsageError(f"--reward must be one of {', '.join(REWARDS)}, got {self.reward}")
        if self.reward == "relative" and self.loop != "ticks":
            raise UsageError("--reward relative needs --loop ticks (the base side's run at every tick)")
        if self.reward != "terminal" and self.metric == "util":
            raise UsageError(
                f"--reward {self.reward} needs a waiting metric (bsld, wait, jct); util has only the terminal"
                " reward"
            )


def _reads_history(base: str) -> bool:
    try:
        return reads_history(base)
    except KeyError:
        return False  # not a base policy: the base's own check names it
