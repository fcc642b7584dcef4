"""`rltuned`: the daemon's entry point. The Slurm loop itself lands with the daemon issue; until then this
command says so plainly instead of pretending to run."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from rltuned import __version__


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="rltuned", description="rltuned scheduler daemon for Slurm.")
    parser.add_argument("--version", action="version", version=f"rltuned {__version__}")
    parser.parse_args(argv)
    print("rltuned: the Slurm daemon is not implemented yet; use `rltunectl simulate`", file=sys.stderr)
    sys.exit(2)
