#!/usr/bin/env bash
# The whole test suite: install, lint, type-check, then every test (slow ones included).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest -q --durations=15 "$@"  # the slowest tests, to keep CI under 25 minutes
