"""Render the fault-injection suite's report (tests/faults, `.cache/faults.json`) as docs/reliability.md's
table: python scripts/reliability_table.py [REPORT] prints the Markdown rows; nothing is typed by hand."""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADER = (
    "| fault | injected | runs | changes made | restored by reset | lost | notes |\n"
    "|---|---|---:|---:|---:|---:|---|"
)


def main() -> int:
    path = Path(sys.argv[1] if len(sys.argv) > 1 else ".cache/faults.json")
    rows = json.loads(path.read_text())
    print(HEADER)
    for name, row in rows.items():
        notes = "; ".join(row["notes"])
        print(f"| {name} | {row['injected']} | {row['runs']} | {row['changed']} | {row['restored']} | "
              f"{row['lost']} | {notes} |")  # fmt: skip
    print(f"\nRun of {min(r['at'] for r in rows.values())} to {max(r['at'] for r in rows.values())}.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
