"""`rltuned`: the daemon. `--once` runs one tick and prints its summary; `--check-config` only validates."""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from pathlib import Path

from rltuned import __version__
from rltuned.daemon.config import DEFAULT_PATH, load
from rltuned.daemon.logs import configure
from rltuned.errors import UsageError, exit_with


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(message)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="rltuned", description="rltuned: a learned job scheduler for Slurm GPU clusters.")
    parser.add_argument("--version", action="version", version=f"rltuned {__version__}")
    parser.add_argument(
        "--config", type=Path, default=DEFAULT_PATH, help=f"TOML config (default {DEFAULT_PATH})"
    )
    parser.add_argument("--mode", choices=("shadow", "enforce"), help="override the configured mode")
    parser.add_argument("--once", action="store_true", help="run one tick, print its summary as JSON, exit")
    parser.add_argument("--check-config", action="store_true", help="validate the config and exit")
    return parser


def run(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    settings = load(args.config)
    if args.check_config:
        from rltuned.daemon.preflight import check

        checked = ", ".join(check(settings))
        mode = args.mode or settings.apply.mode
        print(f"{args.config}: ok (mode {mode}, lever {settings.apply.lever}; checked {checked})")
        return 0
    configure(settings.log.level, settings.log.format)
    from rltuned.daemon.service import Service, run_once

    if args.once:
        report = run_once(settings, args.config, args.mode)
        print(json.dumps(report.summary(), default=str))
        return 0 if report.result == "ok" else 1
    service = Service(settings, args.config, args.mode)
    service.install_signals()
    service.start()
    service.run()
    return 0


def main(argv: Sequence[str] | None = None) -> None:
    exit_with("rltuned", lambda: run(argv))


if __name__ == "__main__":
    main()
