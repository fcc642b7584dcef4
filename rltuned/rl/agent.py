"""Actor-critic networks, as in RLTune's Fig. 9 (and RLScheduler's kernel actor).

The actor applies one small MLP to every slot's 8 features (shared weights), so a job's score depends on
its own features and the ranking is permutation-equivariant; a masked softmax over the 256 slots gives
the policy. The critic reads the whole 256 x 5 critic matrix, flattened, and returns one value.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.distributions import Categorical

from rltuned.features import ACTOR_FEATURES, CRITIC_FEATURES, LIMIT, MAX_JOBS
from rltuned.rl import plackett_luce as pl


def _mlp(sizes: list[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(nn.Tanh())
    return nn.Sequential(*layers)


MIN_INPUT_STD = 0.01
"""Features are in [0, 1]; one that varies less than this over a whole batch carries no signal to amplify."""


class Actor(nn.Module):
    """Scores every slot with the same MLP; padding slots score -1e9 so they are never chosen.

    Inputs are standardized with a mean and scale fitted once on the first batch (`fit_input`) and
    exported with the module. The features are on [0, 1] log or ratio scales, on which the jobs of one
    queue differ by a few hundredths (requested time: about 0.05); actors trained without the scaling
    scored the jobs of a queue within 1e-5 to 1e-3 of each other, so their argmax ranking was set by
    rounding-sized differences and changed from seed to seed (docs/training.md).

    `rank_prior` subtracts `rank_prior * slot` from each score. Slots are in base order, so the prior
    makes the sampling policy start close to the base policy (slot k drawn with weight exp(-prior * k))
    instead of uniform over the queue: exploration stays near a good schedule, and what the network
    learns is a correction of the base order (residual policy learning). The prior is part of the
    exported module, so deployment ranks exactly as training sampled.
    """

    def __init__(
        self, hidden: tuple[int, int] = (32, 16), rank_prior: float = 0.0, runtime_input: str = LIMIT
    ) -> None:
        super().__init__()
        self.rank_prior = float(rank_prior)
        self.runtime_input = runtime_input
        """What the state's `requested_time` column holds (`features.RUNTIME_INPUTS`): a property of
        the inputs it learns from, carried with it to validation and the manifest."""
        self.net = _mlp([ACTOR_FEATURES, hidden[0], hidden[1], 1])
        # Fitted, not learned (requires_grad=False): parameters only so that they are typed as tensors.
        self.in_mean = nn.Parameter(torch.zeros(ACTOR_FEATURES), requires_grad=False)
        self.in_scale = nn.Parameter(torch.ones(ACTOR_FEATURES), requires_grad=False)
        # A zero output layer scores every slot alike: sampling starts uniform and argmax picks slot 0,
        # the base policy's choice. An untrained agent is the base policy; what it gains, it learned.
        last = self.net[-1]
        assert isinstance(last, nn.Linear)
        nn.init.zeros_(last.weight)
        nn.init.zeros_(last.bias)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """obs [..., 256, 8] float, mask [..., 256] bool -> scores [..., 256]."""
        # Only real slots go through the MLP: queues are usually far shorter than 256.
        # (-1e9 is a literal: TorchScript cannot close over module globals.)
        scores = torch.full(mask.shape, -1e9, dtype=obs.dtype)
        scores = scores.masked_scatter(mask, self.net(self.standardize(obs[mask])).squeeze(-1))
        if self.rank_prior != 0.0:
            slots = torch.arange(mask.shape[-1], dtype=obs.dtype)
            scores = scores - self.rank_prior * slots
        return scores

    def standardize(self, features: torch.Tensor) -> torch.Tensor:
        """[..., 8] -> the MLP's input, with the fitted mean and scale."""
        return (features - self.in_mean) * self.in_scale

    @torch.no_grad()
    def fit_input(self, obs: torch.Tensor, mask: torch.Tensor) -> None:
        """Standardize each feature over the real slots of a batch (obs [n, 256, 8], mask [n, 256]).

        Called before the first update, while the zero output layer scores every slot alike, so the
        batch's log-probabilities stay those of the fitted policy.
        """
        real = obs[mask]
        self.in_mean.copy_(real.mean(0))
        self.in_scale.copy_(1.0 / real.std(0, unbiased=False).clamp_min(MIN_INPUT_STD))


class Critic(nn.Module):
    def __init__(self, hidden: tuple[int, int] = (64, 32)) -> None:
        super().__init__()
        self.net = _mlp([MAX_JOBS * CRITIC_FEATURES, hidden[0], hidden[1], 1])

    def forward(self, critic_obs: torch.Tensor) -> torch.Tensor:
        """critic_obs [..., 256, 5] -> value [...]."""
        return self.net(critic_obs.flatten(-2)).squeeze(-1)


class ActorCritic(nn.Module):
    def __init__(self, rank_prior: float = 0.0, runtime_input: str = LIMIT) -> None:
        super().__init__()
        self.actor = Actor(rank_prior=rank_prior, runtime_input=runtime_input)
        self.critic = Critic()

    def get_value(self, critic_obs: torch.Tensor) -> torch.Tensor:
        return self.critic(critic_obs)

    def get_action_and_value(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor,
        critic_obs: torch.Tensor,
        action: torch.Tensor | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, entropy, value); samples an action unless one is given."""
        dist = Categorical(logits=self.actor(obs, mask))
        if action is None:
            action = dist.sample()
        return action, dist.log_prob(action), dist.entropy(), self.critic(critic_obs)

    def act(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor,
        critic_obs: torch.Tensor,
        ranks: bool,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(action, log-prob, value), sampled: a ranking of the slots (the daemon's loop) or one slot
        (the paper-replication loop). The noise comes from `generator` (default: torch's global one)."""
        scores = self.actor(obs, mask)
        if ranks:
            action = pl.sample(scores, mask, generator)
            return action, pl.log_prob(scores, mask, action), self.critic(critic_obs)
        dist = Categorical(logits=scores)
        action = torch.multinomial(dist.probs, 1, generator=generator).squeeze(-1)
        return action, dist.log_prob(action), self.critic(critic_obs)

    def evaluate(
        self,
        obs: torch.Tensor,
        mask: torch.Tensor,
        critic_obs: torch.Tensor,
        action: torch.Tensor,
        ranks: bool,
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(log-prob, entropy, value) of given actions; a ranking's entropy is its first draw's."""
        scores = self.actor(obs, mask)
        if ranks:
            logp = pl.log_prob(scores, mask, action)
            return logp, pl.first_choice_entropy(scores, mask), self.critic(critic_obs)
        dist = Categorical(logits=scores)
        return dist.log_prob(action), dist.entropy(), self.critic(critic_obs)
