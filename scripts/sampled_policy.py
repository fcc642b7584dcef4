"""Validation only: does the policy PPO samples beat the argsort the daemon serves?

Usage: python scripts/sampled_policy.py MODEL_DIR [TEMPERATURES, e.g. 1,0.3]

PPO trains the Plackett-Luce policy (the argsort of the actor's scores plus Gumbel noise); the daemon
ranks by the argsort alone. This scores the base, the argsort and the sampled ranking (three noise seeds
per temperature) on the model's validation windows, in the loop it was trained in. Never the test split.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field

import numpy as np
import torch

from rltuned.clusters import load_cluster
from rltuned.estimates import apply_estimates
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.validation import Validator
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


@dataclass(frozen=True)
class Sampled(LoadedModel):
    """The model's scores plus Gumbel noise: their argsort is a Plackett-Luce sample of its ranking."""

    rng: np.random.Generator = field(default_factory=np.random.default_rng)
    temperature: float = 1.0

    def scores(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        out = super().scores(obs, mask)
        noise = torch.from_numpy(self.rng.gumbel(size=out.shape[-1]).astype(np.float32))
        return out + self.temperature * noise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("temperatures", nargs="?", default="1")
    args = parser.parse_args()
    torch.set_num_threads(1)
    model = load_model(args.model)
    m = model.manifest
    if m.get("loop") != "ticks":
        parser.error(f"{args.model}: a paper-replication-loop model; this compares the daemon's ranking")
    jobs, _ = apply_estimates(load_trace(resolve_trace(m["trace"])).jobs, m["estimates"], m["estimates_seed"])
    config = tick_settings_of(m, m["base"])
    cluster = load_cluster(m["cluster"])
    validator = Validator([jobs], cluster, m["base"], config, int(m["warmup"]), m["metric"],
                          m.get("validation_window"))  # fmt: skip
    windows = range(len(validator.windows))

    def show(name: str, side: LoadedModel | None) -> None:
        scores = [validator.score(side, i) for i in windows]
        print(
            f"{name:24s} mean {np.mean(scores):9.3f}  per window {np.round(scores, 3).tolist()}", flush=True
        )

    show(f"base {m['base']}", None)
    show("argsort (served)", model)
    for t in (float(x) for x in args.temperatures.split(",")):
        for seed in range(3):
            show(
                f"sampled T={t:g} seed {seed}",
                Sampled(model.module, m, model.path, rng=np.random.default_rng(seed), temperature=t),
            )


if __name__ == "__main__":
    main()
