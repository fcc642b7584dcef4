"""Policy inference latency: one TorchScript forward pass over 256 visible slots.

Usage: python bench/inference.py [MODEL_DIR ...]   (default: every model under models/)

Method: load the exported model as the daemon does (`load_model`, hash and manifest checked), then time
1,000 calls of `scores(obs [256, 8], mask [256])` on one thread (perf_counter) with a full queue (all 256
slots real) and with a typical one (40 real slots), after 50 warm-up calls. The paper reports 0.7 ms.
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
from rltuned.rl.export import load_model


def latency_ms(model_dir: Path, real_slots: int) -> dict[str, float]:
    model = load_model(model_dir)
    obs = torch.rand(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[:real_slots] = True
    for _ in range(50):
        model.scores(obs, mask)
    times = []
    for _ in range(1000):
        t0 = time.perf_counter()
        model.scores(obs, mask)
        times.append((time.perf_counter() - t0) * 1000)
    return {"p50": statistics.median(times), "p95": float(np.percentile(times, 95)), "max": max(times)}


def main() -> None:
    torch.set_num_threads(1)
    dirs = [Path(a) for a in sys.argv[1:]] or sorted(p.parent for p in Path("models").glob("*/manifest.json"))
    report = {str(d): {"256_slots_ms": latency_ms(d, 256), "40_slots_ms": latency_ms(d, 40)} for d in dirs}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
