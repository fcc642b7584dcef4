"""One error hierarchy: every expected failure is an `RltunedError`, which `main()` turns into an exit code.

Anything else escaping to `main()` is a bug and keeps its traceback.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import NoReturn


class RltunedError(Exception):
    """Base of every error rltuned expects and reports in one line."""

    exit_code = 1


class UsageError(RltunedError):
    """Bad command-line arguments, unknown presets, missing files."""

    exit_code = 2


class ConfigError(RltunedError):
    """An invalid configuration or cluster spec (EX_CONFIG)."""

    exit_code = 78


class TraceError(RltunedError):
    """A trace that cannot be read; the message names file and line."""

    exit_code = 65  # EX_DATAERR

    def __init__(self, path: str, line: int | None, problem: str) -> None:
        where = f"{path}:{line}" if line is not None else path
        super().__init__(f"{where}: {problem}")
        self.path = path
        self.line = line
        self.problem = problem


class SolverError(RltunedError):
    """The placement solver timed out, was infeasible or failed; callers fall back to greedy."""


class SlurmError(RltunedError):
    """slurmctld unreachable, a failed command, or output that cannot be parsed."""


class ModelLoadError(RltunedError):
    """A model file that is missing, corrupt or does not match its manifest."""


def exit_with(prog: str, body: Callable[[], int]) -> NoReturn:
    """Run a command's body and exit: expected errors print one line and their exit code, Ctrl-C 130."""
    try:
        code = body()
    except RltunedError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        code = exc.exit_code
    except KeyboardInterrupt:
        code = 130
    except BrokenPipeError:  # `rltunectl plan | head`: the reader left; say nothing more
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = 141
    sys.exit(code)
