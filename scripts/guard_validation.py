"""Validation only: does a tighter starvation guard keep a model's gain and cut its worst windows?

Usage: python scripts/guard_validation.py MODEL_DIR [--only PREFIXES]

The model's own validation (its manifest's windows, warm-up and estimate draws) is run by the base
policy and by the model under several guard settings (core/guard.py): the default, the default sending
jobs back to their base rank, tighter bounds on displacement and on waiting, and none. The guard acts
only on jobs the ranking pushed below their base rank, so the base side is the same under every setting.
Prints each setting's mean bounded slowdown, per-window gap over the base, wins and losses, its worst
window against the base's, the mean p99 wait and the longest wait, and how many jobs the guard promoted.
Two processes. Never the test split.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace

import numpy as np
import torch

from rltuned.core.guard import GuardSettings
from rltuned.rl.env import score
from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.validation import gap, model_validator
from rltuned.sim.metrics import Metrics
from rltuned.sim.ticks import TickSettings

HOUR = 3600.0
GUARDS: dict[str, GuardSettings] = {
    "default (7 d, 128 places for 12 h)": GuardSettings(),
    "default, back to base rank": GuardSettings(promote_to="base_rank"),
    "32 places for 2 h": GuardSettings(max_displacement=32, grace_s=2 * HOUR),
    "16 places for 1 h": GuardSettings(max_displacement=16, grace_s=1 * HOUR),
    "waits over 1 d first": GuardSettings(max_wait_s=24 * HOUR),
    "none": GuardSettings(max_wait_s=None, max_displacement=None),
}

_STATE: dict[str, object] = {}


def _setup(model_dir: str) -> None:
    torch.set_num_threads(1)
    model = load_model(model_dir)
    validator = model_validator(model.manifest)
    assert isinstance(validator.config, TickSettings)
    core = validator.config.core
    _STATE["model"] = model
    _STATE["validators"] = {
        name: validator.under(replace(validator.config, core=replace(core, guard=guard)))
        for name, guard in GUARDS.items()
    }


def _score(task: tuple[str, int]) -> tuple[str, int, Metrics]:
    name, window = task
    validators = _STATE["validators"]
    assert isinstance(validators, dict)
    model = _STATE["model"]
    assert isinstance(model, LoadedModel)
    validator = validators[next(iter(GUARDS)) if name == "base" else name]
    return name, window, validator.metrics(None if name == "base" else model, window)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--only", default="", help="comma-separated name prefixes of the settings to run")
    args = parser.parse_args()
    if args.only:  # the first setting (the default) is always run: it names the worst window
        keep = [name for name in GUARDS if any(name.startswith(p) for p in args.only.split(","))]
        for name in [name for name in list(GUARDS)[1:] if name not in keep]:
            del GUARDS[name]
    _setup(args.model)
    validators = _STATE["validators"]
    assert isinstance(validators, dict)
    windows = len(next(iter(validators.values())).windows)
    metric = load_model(args.model).manifest["metric"]
    names = ["base", *GUARDS]
    tasks = [(name, w) for name in names for w in range(windows)]
    with ProcessPoolExecutor(2, initializer=_setup, initargs=(args.model,)) as pool:
        results = list(pool.map(_score, tasks))
    runs = {name: [r for n, _, r in sorted(results, key=lambda t: t[:2]) if n == name] for name in names}
    scores = {name: [score(r, metric) for r in rs] for name, rs in runs.items()}
    base = scores["base"]
    worst = int(np.argmax(np.array(scores[next(iter(GUARDS))]) - np.array(base)))
    base_p99 = np.mean([r.p99_wait_s for r in runs["base"]]) / 3600
    base_longest = max(r.max_wait_s for r in runs["base"]) / 3600
    print(f"{windows} window-draws; base mean {np.mean(base):.3f}; the default's worst window vs base: "
          f"#{worst}, base {base[worst]:.2f}; base p99 wait {base_p99:.1f} h, "
          f"longest {base_longest:.1f} h")  # fmt: skip
    for name in GUARDS:
        mine = scores[name]
        won = sum(s < b * 0.999 for s, b in zip(mine, base, strict=True))
        lost = sum(s > b * 1.001 for s, b in zip(mine, base, strict=True))
        per_window = gap(base, mine, metric, "per_window")
        p99 = np.mean([r.p99_wait_s for r in runs[name]]) / 3600
        longest = max(r.max_wait_s for r in runs[name]) / 3600
        print(f"{name:38s} mean {np.mean(mine):.3f}  per-window gap {per_window:+.1%}  won {won}  lost {lost}"
              f"  window #{worst}: {mine[worst]:.2f}  p99 wait {p99:.1f} h  longest {longest:.1f} h"
              f"  promoted {sum(r.guarded for r in runs[name])}")  # fmt: skip


if __name__ == "__main__":
    main()
