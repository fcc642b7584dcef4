"""Imitation warm start: before PPO, the actor learns to pick what the base policy (or a teacher) picks.

From the zero output layer the deployed argmax is the base policy, but the policy PPO samples and
improves is uniform over the queue, far worse than the base. Against a strong base (SJF, UNICEP) the
training signal is then mostly about avoiding the sampler's disasters, and what PPO learns need not
carry over to the argmax (docs/training.md). Cloning the base first puts the sampled policy next to the
base, so PPO explores and corrects around a good schedule. Unlike the rank prior, the base order is then
held by the network's own weights, so PPO's corrections are made in the same units.

Slots are in base order (features.encode), so the base's choice at every decision is slot 0; the critic
is fitted at the same time to the base policy's discounted returns.

In the daemon's loop a teacher other than the base can be cloned instead (`--imitate-teacher`, a
per-job order such as `policies.loglinear`): the demonstrations are then the teacher's own run, each
decision's target its ranking of the slots, and the critic learns the teacher's returns. The reward and
the fallback stay the base's: the model is still measured against, and replaced by, its base.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
import torch
from torch.distributions import Categorical

from rltuned.errors import UsageError
from rltuned.policies import Policy
from rltuned.rl import plackett_luce as pl
from rltuned.rl.agent import ActorCritic
from rltuned.rl.env import SchedulingEnv
from rltuned.rl.gae import compute_gae
from rltuned.rl.tick_env import TickEnv

BASE_CHOICE = 0
"""The base policy's choice: slot 0, since slots are in base order."""


@dataclass(frozen=True)
class Demonstration:
    """The base policy's decisions on training windows, as the agent observes them."""

    actor: npt.NDArray[np.float32]  # [n, 256, 8]
    mask: npt.NDArray[np.bool_]  # [n, 256]
    critic: npt.NDArray[np.float32]  # [n, 256, 5]
    returns: npt.NDArray[np.float32]  # [n] discounted reward-to-go under the demonstrated policy
    gaps: tuple[float, ...]  # the paper's reward per episode: 0 when the agent's run is the base's
    actions: npt.NDArray[np.int64] | None = None  # [n, 256] a teacher's rankings; None: the base's
    keys: npt.NDArray[np.float32] | None = None  # [n, 256] minus a teacher's keys (TickEnv.teacher_keys)


def demonstrate(
    env: SchedulingEnv | TickEnv,
    episodes: int,
    seed: int,
    gamma: float,
    teacher: Policy | None = None,
    keys: bool = False,
) -> Demonstration:
    """Run `episodes` windows choosing the base policy's job (or `teacher`'s ranking) at every decision.
    With `keys`, also the teacher's key for every row (`Demonstration.keys`): only a study that regresses
    on them reads them, so the warm start does not compute them."""
    if teacher is not None and not isinstance(env, TickEnv):
        raise UsageError("a teacher ranks the queue: it needs the daemon's loop (--loop ticks)")
    actor, mask, critic, rewards, dones, gaps, actions, keyed = [], [], [], [], [], [], [], []
    for e in range(episodes):
        obs, _ = env.reset(seed=seed + e)
        done = False
        while not done:
            actor.append(np.array(obs["actor"]))
            mask.append(np.array(obs["mask"]))
            critic.append(np.array(obs["critic"]))
            if teacher is None:
                obs, reward, done, _, info = env.step(env.base_action())
            else:
                assert isinstance(env, TickEnv)
                actions.append(env.teacher_action(teacher))
                if keys:
                    keyed.append(env.teacher_keys(teacher))
                obs, reward, done, _, info = env.step(actions[-1])
            rewards.append(reward)
            dones.append(done)
        gaps.append(float(info["gap"]))
    r = np.array(rewards, dtype=np.float32)
    # lambda = 1 with zero values: GAE's return is the plain discounted reward-to-go.
    _, returns = compute_gae(r, np.zeros_like(r), np.array(dones), 0.0, gamma, 1.0)
    taught = np.stack(actions) if teacher is not None else None
    scores = np.stack(keyed) if keyed else None
    return Demonstration(
        np.stack(actor), np.stack(mask), np.stack(critic), returns, tuple(gaps), taught, scores
    )


def clone(
    agent: ActorCritic, demo: Demonstration, steps: int, lr: float, ranks: bool, batch: int = 256
) -> dict[str, float]:
    """Fit the actor to the base's (or the teacher's) choices and the critic to its returns.

    Returns the actor's top-1 agreement with what it cloned and its mean entropy over the demonstration,
    so the manifest records how close to the base (or the teacher) PPO starts.
    """
    actor = torch.from_numpy(demo.actor)
    mask = torch.from_numpy(demo.mask)
    critic = torch.from_numpy(demo.critic)
    returns = torch.from_numpy(demo.returns)
    taught = None if demo.actions is None else torch.from_numpy(demo.actions)
    target = torch.full((len(actor),), BASE_CHOICE) if taught is None else taught[:, 0]
    pi_opt = torch.optim.Adam(agent.actor.parameters(), lr=lr)
    vf_opt = torch.optim.Adam(agent.critic.parameters(), lr=lr)
    for _ in range(steps):
        mb = torch.randint(len(actor), (min(batch, len(actor)),))
        scores = agent.actor(actor[mb], mask[mb])
        if ranks:  # the whole ranking: the base's is slot order
            ranking = torch.arange(mask.shape[-1]).expand(len(mb), -1) if taught is None else taught[mb]
            pi_loss = -(pl.log_prob(scores, mask[mb], ranking) / mask[mb].sum(-1)).mean()
        else:
            pi_loss = torch.nn.functional.cross_entropy(scores, target[mb])
        v_loss = ((agent.critic(critic[mb]) - returns[mb]) ** 2).mean()
        pi_opt.zero_grad()
        vf_opt.zero_grad()
        (pi_loss + v_loss).backward()
        pi_opt.step()
        vf_opt.step()
    with torch.no_grad():
        scores = agent.actor(actor, mask)
        top1 = float((scores.argmax(-1) == target).float().mean())
        entropy = float(Categorical(logits=scores).entropy().mean())
        value_error = float(((agent.critic(critic) - returns) ** 2).mean())
    return {"imitation_top1": top1, "imitation_entropy": entropy, "imitation_value_mse": value_error}


def sharpen(agent: ActorCritic, factor: float, demo: Demonstration) -> dict[str, float]:
    """Scale the actor's output layer by `factor`, and return the first draw's mean entropy over the
    demonstration afterwards.

    Why: PPO improves the policy it samples, the daemon serves its argsort. A clone fitted by maximum
    likelihood samples rankings far from its argsort over a queue of hundreds: the shipped Philly run's
    sampled rankings scored 7% behind the base on average while their argsort was 3-4% ahead, so PPO's
    steps followed a policy that is not served. Scaling the scores (no rank prior here, or it would be
    scaled too) leaves every argsort as it was and narrows the samples toward it. On Philly it halved
    that deficit but did not move the argsort past the clone (docs/training.md)."""
    if factor != 1.0:
        last = agent.actor.net[-1]
        assert isinstance(last, torch.nn.Linear)
        with torch.no_grad():
            last.weight.mul_(factor)
            last.bias.mul_(factor)
    with torch.no_grad():
        scores = agent.actor(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
        entropy = float(Categorical(logits=scores).entropy().mean())
    return {"imitation_sharpen": factor, "imitation_entropy_sharpened": entropy}
