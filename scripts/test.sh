#!/usr/bin/env bash
# The whole test suite: install, lint, type-check, then every test (slow ones included).
# With arguments, they go to one pytest run as given (e.g. a single test file).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
if [ "$#" -gt 0 ]; then
    exec .venv/bin/python -m pytest -q --durations=15 "$@"
fi

# The tests on the real Slurm lab (marker `slurm`) spend most of their time waiting for real jobs to run,
# so they run in a second pytest beside the rest: the whole suite in about two thirds of the time of one
# process on 2 cores, to keep CI under 25 minutes. Each run has its own temporary directory; the lab's
# output is printed once it is done. Both must pass.
lab_tmp=$(mktemp -d) rest_tmp=$(mktemp -d) lab_log=$(mktemp)
.venv/bin/python -m pytest -q --durations=8 -m slurm --basetemp="$lab_tmp/t" >"$lab_log" 2>&1 &
lab_pid=$!
trap 'kill "$lab_pid" 2>/dev/null || true' EXIT
rest=0
.venv/bin/python -m pytest -q --durations=15 -m "not slurm" --basetemp="$rest_tmp/t" || rest=$?
lab=0
wait "$lab_pid" || lab=$?
trap - EXIT
echo "=== the Slurm lab's tests (run beside the others) ==="
cat "$lab_log"
rm -rf "$lab_tmp" "$rest_tmp" "$lab_log"
echo "pytest exit codes: the others $rest, the Slurm lab's $lab"
[ "$rest" -eq 0 ] && [ "$lab" -eq 0 ]
