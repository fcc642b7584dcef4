"""Derive the `swf-ratio` estimate model's table from SWF logs with user-requested times.

Usage: python scripts/derive_swf_ratios.py LOG.swf [LOG.swf ...] > rltuned/data/swf_ratio_quantiles.txt

Each job with a known runtime (field 4) and requested time (field 9) contributes runtime/request; the
output is 1001 quantiles of that ratio, pooled over the logs, one per line.
"""

from __future__ import annotations

import sys

import numpy as np


def ratios(path: str) -> list[float]:
    out = []
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.startswith(";") or not line.strip():
                continue
            fields = line.split()
            run, req = float(fields[3]), float(fields[8])
            if run > 0 and req > 0:
                out.append(run / req)
    return out


def main() -> None:
    pooled = np.array([r for path in sys.argv[1:] for r in ratios(path)])
    print(f"# runtime/requested-time quantiles from {len(pooled)} jobs of: {' '.join(sys.argv[1:])}")
    for q in np.quantile(pooled, np.linspace(0.0, 1.0, 1001)):
        print(f"{q:.6g}")


if __name__ == "__main__":
    main()
