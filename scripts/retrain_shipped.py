"""Train shipped models again from their recipes and say whether today's code gives the same actors.

Usage: python scripts/retrain_shipped.py MODEL_DIR [MODEL_DIR ...] [--out runs/retrained] [--workers 2]

Each model is trained from its manifest (`rltunectl train --recipe`, rl/recipe.py) for the epochs its
run trained, with no time budget (a budget stops a run after a number of epochs that depends on the
machine), and the exported actor is compared with the shipped one by their scores on a fixed probe of
inputs (`export.probe_scores`; a frozen actor has no weights to compare one by one). Prints one JSON
line per model: identical or not (and the largest score difference), the chosen epoch and validation
score of both, and the wall time of the recorded run and of this one (this machine, `--workers`
rollout processes). Exit status 1 if any actor differs. Run it on an otherwise idle machine when the
times are to be quoted.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from dataclasses import replace
from pathlib import Path

import torch

from rltuned.rl.args import Args
from rltuned.rl.export import load_model, probe_scores
from rltuned.rl.ppo import train
from rltuned.rl.recipe import read_recipe


def retrain(model_dir: Path, out: Path, workers: int) -> dict[str, object]:
    recipe = read_recipe(model_dir)
    shipped = load_model(model_dir)
    args = replace(
        Args(**recipe.fields),
        out=str(out),
        epochs=recipe.epochs_done or recipe.fields["epochs"],
        minutes=None,
        workers=workers,
        extra=recipe.extra(),
    )
    started = time.perf_counter()
    retrained = load_model(train(args))
    wall = time.perf_counter() - started
    ours, theirs = probe_scores(retrained), probe_scores(shipped)
    finite = torch.isfinite(ours) & torch.isfinite(theirs)
    diff = float((ours - theirs)[finite].abs().max()) if bool(finite.any()) else None
    chosen = {
        "shipped": shipped.manifest.get("validation"),
        "retrained": retrained.manifest.get("validation"),
    }
    return {
        "model": str(model_dir),
        "identical": torch.equal(ours, theirs),
        "max_abs_score_diff": diff,
        "epochs": args.epochs,
        "chosen_epoch": {k: (v or {}).get("epoch") for k, v in chosen.items()},
        "validation_agent_score": {k: (v or {}).get("agent_score") for k, v in chosen.items()},
        "unrecorded_flags": list(recipe.unrecorded),
        "recorded_wall_s": shipped.manifest.get("training_wall_s"),
        "recorded_workers": shipped.manifest.get("workers"),
        "wall_s": round(wall, 1),
        "training_wall_s": retrained.manifest.get("training_wall_s"),
        "workers": workers,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("runs/retrained"))
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    differs = False
    for model_dir in args.models:
        parts = model_dir.resolve().parts
        name = "-".join(parts[-3:]) if model_dir.parent.name == "seeds" else model_dir.name
        result = retrain(model_dir, args.out / name, args.workers)
        differs |= not result["identical"]
        print(json.dumps(result), flush=True)
    return 1 if differs else 0


if __name__ == "__main__":
    sys.exit(main())
