"""Validation only: how sure can a choice made on validation be? More draws of the estimate noise.

Usage: python scripts/validation_power.py MODEL_DIR [--draws 10] [--heuristics sjf,saf,wfp3,unicep]
       [--searched "loglinear:b=1,c=0.25,w0=3600;..."]

Runs the model's own validation (its manifest's trace, cluster, loop settings, warm-up and windows, as
`model_validator` rebuilds it) on `--draws` draws of the runtime-estimate noise, numbered from its
training draw as the trainer numbers them, so the first `validation_estimate_seeds` draws are the
window-draws its seed and checkpoint were chosen on and the rest are fresh. On every window-draw: the
model's base, the other heuristics, `--searched` orders (each as the daemon's base order, no model,
in the model's loop settings) and the model. For each order against the base, per-window gap (the
measure choices are made by), wins and losses, and a 90% interval from a bootstrap that resamples
windows with all their draws (one heavy window moves every draw of it together); then the same on the
chosen-on draws and on the fresh draws alone, and for the searched orders and the model against the
best heuristic. A model chosen as the best of several seeds and
checkpoints on the first draws carries that choice's luck there; the fresh draws of the same windows
do not. Two processes. Never the test split.
"""

from __future__ import annotations

import argparse
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import numpy.typing as npt
import torch

from rltuned.policies.loglinear import parse_loglinear
from rltuned.rl.env import reward, score
from rltuned.rl.evaluate import tick_settings_of
from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.validation import Validator, by_window, gap_summary, model_validator
from rltuned.sim.metrics import compute_metrics
from rltuned.sim.ticks import TickSettings, run_order

MODEL = "model"
_STATE: dict[str, object] = {}


def _setup(model_dir: str, draws: int, orders: tuple[str, ...]) -> None:
    torch.set_num_threads(1)
    model = load_model(model_dir)
    manifest = model.manifest
    ten = model_validator(manifest, draws)
    window = manifest.get("validation_window")
    _STATE["model"] = model
    _STATE["validators"] = {
        order: Validator(
            ten.draws,
            ten.cluster,
            order,
            tick_settings_of(manifest, order),
            ten.warmup,
            ten.metric,
            None if window is None else int(window),
        )
        for order in orders
    }


def _score(task: tuple[str, int]) -> tuple[str, int, float]:
    order, window = task
    validators = _STATE["validators"]
    model = _STATE["model"]
    assert isinstance(validators, dict) and isinstance(model, LoadedModel)
    base = str(model.manifest["base"])
    if order.startswith("loglinear:"):  # a searched order as the daemon's base, in the model's loop
        validator: Validator = validators[base]
        draw, span = validator.windows[window]
        chunk, warm = span.with_warmup(validator.draws[draw], validator.warmup)
        assert isinstance(validator.config, TickSettings)
        result = run_order(validator.cluster, list(chunk), warm, validator.config, parse_loglinear(order))
        return order, window, score(compute_metrics(result), validator.metric)
    validator = validators[base if order == MODEL else order]
    return order, window, validator.score(model if order == MODEL else None, window)


def row(name: str, gaps: npt.NDArray[np.float64]) -> str:
    return f"{name}: {gap_summary(gaps)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("model")
    parser.add_argument("--draws", type=int, default=10)
    parser.add_argument("--heuristics", default="sjf,saf,wfp3,unicep")
    parser.add_argument(
        "--searched", default="", help="';'-separated loglinear orders (policies/loglinear.py) to run too"
    )
    args = parser.parse_args()
    manifest = load_model(args.model).manifest
    base, metric = str(manifest["base"]), str(manifest["metric"])
    chosen = int(manifest.get("validation_estimate_seeds") or 1)
    orders = tuple(dict.fromkeys([base, *args.heuristics.split(",")]))
    _setup(args.model, args.draws, orders)
    validators = _STATE["validators"]
    assert isinstance(validators, dict)
    cells = validators[base].windows  # (draw, window span), draw-major
    searched = tuple(o for o in args.searched.split(";") if o)
    tasks = [(order, w) for order in (*orders, *searched, MODEL) for w in range(len(cells))]
    with ProcessPoolExecutor(2, initializer=_setup, initargs=(args.model, args.draws, orders)) as pool:
        results = list(pool.map(_score, tasks))
    values: dict[str, list[float]] = {}
    for order, _, value in results:  # each order's windows in the validator's (draw-major) order
        values.setdefault(order, []).append(value)
    table = {order: by_window(v, validators[base]) for order, v in values.items()}
    spans, draws = table[base].shape
    print(f"{args.model}: {spans} windows x {draws} draws; chosen on the first {chosen} draw(s); "
          f"metric {metric}; base {base}")  # fmt: skip
    for order, grid in table.items():
        print(f"  {order:8s} mean {grid.mean():.3f}  per draw: {np.round(grid.mean(axis=0), 3).tolist()}")
    for order in (*orders, *searched, MODEL):
        if order != base:
            compare(table[base], table[order], f"{order} over {base}", metric, chosen)
    pick = max if metric == "util" else min
    best = pick(orders, key=lambda o: float(table[o].mean()))
    if best != base:
        for order in (*searched, MODEL):
            title = f"{order} over {best} (the best heuristic here by mean)"
            compare(table[best], table[order], title, metric, chosen)


def compare(
    reference: npt.NDArray[np.float64], other: npt.NDArray[np.float64], title: str, metric: str, chosen: int
) -> None:
    """Per-window gaps of `other` over `reference` ([windows, draws]): all draws, then the chosen-on
    ones and the fresh ones apart."""
    gaps = np.vectorize(lambda b, o: reward(b, o, metric))(reference, other)
    print(f"{title}:")
    print("   " + row("all draws", gaps))
    if 0 < chosen < gaps.shape[1]:
        print("   " + row(f"draws 1-{chosen} (chosen on)", gaps[:, :chosen]))
        print("   " + row(f"draws {chosen + 1}-{gaps.shape[1]} (fresh)", gaps[:, chosen:]))


if __name__ == "__main__":
    main()
