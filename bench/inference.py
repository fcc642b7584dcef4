"""Policy inference latency: one forward pass over 256 visible slots, by each engine.

Usage: python bench/inference.py [MODEL_DIR ...]   (default: every model under models/)

Method: load the exported model as the daemon does (`load_model`, hash and manifest checked) with each
engine (`rl.ENGINES`: the compiled kernel, the TorchScript interpreter), then time 1,000 calls of
`score_rows(actor [256, 8], mask [256])`, what every decision calls, on one thread (perf_counter) with
a full queue (all 256 slots real) and with a typical one (40 real slots), after 50 warm-up calls. Back
to back, so caches stay warm: inside the daemon's loop the interpreter costs 2-3x more
(bench/tick_parts.py). The paper reports 0.7 ms.
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

from rltuned.features import ACTOR_FEATURES, MAX_JOBS
from rltuned.rl import ENGINES
from rltuned.rl.export import load_model


def latency_ms(model_dir: Path, real_slots: int, engine: str) -> dict[str, float]:
    model = load_model(model_dir, engine)
    obs = np.random.default_rng(0).random((MAX_JOBS, ACTOR_FEATURES), dtype=np.float32)
    mask = np.arange(MAX_JOBS) < real_slots
    for _ in range(50):
        model.score_rows(obs, mask)
    times = []
    for _ in range(1000):
        t0 = time.perf_counter()
        model.score_rows(obs, mask)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": statistics.median(times), "p95": float(np.percentile(times, 95)), "max": max(times)}


def main() -> None:
    torch.set_num_threads(1)
    dirs = [Path(a) for a in sys.argv[1:]] or sorted(p.parent for p in Path("models").glob("*/manifest.json"))
    report = {
        f"{d} ({engine})": {
            "256_slots_ms": latency_ms(d, 256, engine),
            "40_slots_ms": latency_ms(d, 40, engine),
        }
        for d in dirs
        for engine in ENGINES
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
