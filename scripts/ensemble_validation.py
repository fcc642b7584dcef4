"""Validation only: does the mean of several trained actors' scores rank better than each of them?

Usage: python scripts/ensemble_validation.py MODEL_DIR [MODEL_DIR ...]

The models must share a recipe (trace, base, loop settings, features); the first one's manifest sets
the validation (its windows, warm-up and estimate draws). Each of the first model's validation
window-draws is run by the base policy, by every model, and by the ensemble, whose score for a job is
the mean of the members' scores (the product of their Plackett-Luce policies). Prints each one's
per-window gap over the base (docs/training.md's `--validation-score per_window`) and its wins and
losses. Two processes. Never the test split.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np
import torch
from torch import nn

from rltuned.rl.export import LoadedModel, load_model, quiet_torchscript
from rltuned.rl.validation import Validator, gap, model_validator


class Ensemble(nn.Module):
    """The mean of the members' scores; padding rows stay far below every real row."""

    def __init__(self, members: list[torch.jit.ScriptModule]) -> None:
        super().__init__()
        self.members = nn.ModuleList(members)

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        total = torch.zeros(mask.shape, dtype=obs.dtype)
        for member in self.members:
            total = total + member(obs, mask)
        return total / len(self.members)


def ensemble(models: list[LoadedModel]) -> LoadedModel:
    with quiet_torchscript():
        module = torch.jit.freeze(torch.jit.script(Ensemble([m.module for m in models]).eval()))
    return LoadedModel(module, {}, Path("(ensemble)"))


_STATE: dict[str, object] = {}


def _setup(dirs: list[str]) -> None:
    torch.set_num_threads(1)
    models = [load_model(d) for d in dirs]
    _STATE["validator"] = model_validator(models[0].manifest)
    _STATE["sides"] = {
        "base": None,
        **{d: x for d, x in zip(dirs, models, strict=True)},
        "ensemble": ensemble(models),
    }


def _score(task: tuple[str, int]) -> tuple[str, int, float]:
    side, window = task
    validator = _STATE["validator"]
    assert isinstance(validator, Validator)
    sides = _STATE["sides"]
    assert isinstance(sides, dict)
    return side, window, validator.score(sides[side], window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+")
    args = parser.parse_args()
    _setup(args.models)
    validator = _STATE["validator"]
    assert isinstance(validator, Validator)
    metric = load_model(args.models[0]).manifest["metric"]
    names = ["base", *args.models, "ensemble"]
    tasks = [(name, w) for name in names for w in range(len(validator.windows))]
    with ProcessPoolExecutor(2, initializer=_setup, initargs=(args.models,)) as pool:
        results = list(pool.map(_score, tasks))
    scores = {name: [s for n, _, s in sorted(results) if n == name] for name in names}
    base = scores["base"]
    print(f"{len(base)} window-draws; base mean {np.mean(base):.3f}")
    for name in names[1:]:
        mine = scores[name]
        won = sum(m < b * 0.999 for m, b in zip(mine, base, strict=True))
        lost = sum(m > b * 1.001 for m, b in zip(mine, base, strict=True))
        per_window = gap(base, mine, metric, "per_window")
        print(
            f"{name:40s} mean {np.mean(mine):.3f}  per-window gap {per_window:+.1%}  won {won}  lost {lost}"
        )


if __name__ == "__main__":
    main()
