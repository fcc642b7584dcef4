#!/usr/bin/env bash
# Install rltuned and its development tools into ./.venv (idempotent). Needs only python3 (>= 3.11).
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON="${PYTHON:-python3}"
# System packages for the daemon's tests: Slurm 22.05, munge, slurmdbd and MariaDB (the real local lab with
# accounting, scripts/slurm-lab), systemd-analyze (the unit is verified) and strace (its syscall filter is
# checked). Only as root with apt; elsewhere those tests say what is missing.
missing=()
for pair in slurmctld:slurmctld slurmd:slurmd squeue:slurm-client munged:munge slurmdbd:slurmdbd \
    mariadbd:mariadb-server systemd-analyze:systemd strace:strace; do
    command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair##*:}")
done
if [ "${#missing[@]}" -gt 0 ] && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -x .venv/bin/python ]; then
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
# torch first and pinned: 2.13.0 is the CPU build these machines carry; an unpinned torch pulls CUDA.
.venv/bin/python -m pip install --quiet torch==2.13.0
.venv/bin/python -m pip install --quiet -e '.[dev,ray,tune]'
