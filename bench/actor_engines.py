"""Whether the compiled actor ranks as the TorchScript interpreter does, on the states models really see.

Usage: python bench/actor_engines.py [MODEL_DIR ...] [--draws 1] [--windows N]

For each model trained in the daemon's loop (default: every one under models/), runs its own validation
(`model_validator`: its windows, warm-up, loop settings, first draw of the estimate noise) with the
compiled kernel serving, and at every decision also runs the TorchScript module on the same state.
Prints, per model: decisions, the largest score difference, and on how many decisions the two
rankings of the real rows (argsort, stable, as `core/ranking.rank_jobs` takes it) differ, and where
they do, the score gap between the swapped rows; the time of each engine on the same states, back to
back (warm caches: the loop's own figure is bench/tick_parts.py's); the mean validation score (the
model's metric) under each engine, the number of windows they score differently and the largest
per-window difference; and
the wall time of the model's validation run by each engine (TorchScript first, then the kernel again,
which must score as it did the first time).
"""

from __future__ import annotations

import argparse
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from rltuned.rl.export import LoadedModel, load_model
from rltuned.rl.validation import model_validator

MODELS = Path(__file__).resolve().parents[1] / "models"


@dataclass(frozen=True)
class Both(LoadedModel):
    """Serves the kernel's scores; records the TorchScript's beside them."""

    seen: list[tuple[npt.NDArray[np.float32], npt.NDArray[np.bool_]]] = field(default_factory=list)
    diffs: list[float] = field(default_factory=list)
    flips: list[float] = field(default_factory=list)

    def score_rows(
        self, actor: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.float64]:
        assert self.kernel is not None
        got = self.kernel.scores(actor, mask)
        out = self.scores(torch.from_numpy(np.array(actor)), torch.from_numpy(np.array(mask)))
        expected = out.numpy().astype(np.float64)
        n = int(mask.sum())
        self.seen.append((np.array(actor), np.array(mask)))
        self.diffs.append(float(np.abs(got[:n] - expected[:n]).max()))
        a, b = np.argsort(-got[:n], kind="stable"), np.argsort(-expected[:n], kind="stable")
        if not np.array_equal(a, b):
            at = int(np.argmax(a != b))
            self.flips.append(float(abs(expected[a[at]] - expected[b[at]])))
        return got


def timed(f: Any, seen: list[tuple[Any, Any]]) -> float:
    started = time.perf_counter()
    for actor, mask in seen:
        f(actor, mask)
    return (time.perf_counter() - started) / len(seen) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*")
    parser.add_argument("--draws", type=int, default=1)
    parser.add_argument("--windows", type=int, default=None, help="only the first N windows of each model")
    args = parser.parse_args()
    torch.set_num_threads(1)
    dirs = [Path(m) for m in args.models] or sorted(p.parent for p in MODELS.glob("*/manifest.json"))
    for path in dirs:
        model = load_model(path)
        if model.manifest.get("loop") != "ticks" or model.kernel is None:
            print(json.dumps({"model": path.name, "skipped": model.manifest.get("loop") or model.engine}))
            continue
        both = Both(model.module, model.manifest, model.path, model.kernel)
        validator = model_validator(model.manifest, args.draws)
        windows = range(len(validator.windows))[: args.windows]
        compiled = [validator.score(both, i) for i in windows]
        started = time.perf_counter()
        interpreted = [validator.score(replace(model, kernel=None), i) for i in windows]
        interpreted_s = time.perf_counter() - started
        started = time.perf_counter()
        again = [validator.score(model, i) for i in windows]
        compiled_s = time.perf_counter() - started
        assert again == compiled
        scripted = replace(model, kernel=None).score_rows
        kernel = model.kernel.scores
        body = {
            "model": path.name,
            "windows": len(windows),
            "decisions": len(both.diffs),
            "max_score_diff": max(both.diffs),
            "rankings_differ": len(both.flips),
            "score_gaps_where_they_differ": sorted(both.flips)[:5],
            "us_torchscript": round(min(timed(scripted, both.seen) for _ in range(3)), 1),
            "us_compiled": round(min(timed(kernel, both.seen) for _ in range(3)), 1),
            "validation_s_torchscript": round(interpreted_s, 2),
            "validation_s_compiled": round(compiled_s, 2),
            "score_compiled": round(float(np.mean(compiled)), 4),
            "score_torchscript": round(float(np.mean(interpreted)), 4),
            "windows_scored_differently": sum(a != b for a, b in zip(compiled, interpreted, strict=True)),
            "largest_window_difference": round(
                max(abs(a - b) for a, b in zip(compiled, interpreted, strict=True)), 4
            ),
        }
        print(json.dumps(body), flush=True)


if __name__ == "__main__":
    main()
