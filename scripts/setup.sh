#!/usr/bin/env bash
# Install rltuned and its development tools into ./.venv (idempotent). Needs only python3 (>= 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first and pinned: 2.13.0 is the CPU build these machines carry; an unpinned torch pulls CUDA.
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -e '.[dev]'
