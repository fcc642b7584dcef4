"""Policy names for the CLI and config."""

from __future__ import annotations

from collections.abc import Callable

from rltuned.errors import UsageError
from rltuned.policies.base import Policy
from rltuned.policies.heuristics import F1, F2, F3, F4, Fcfs, Saf, Sjf, Unicep, Wfp3
from rltuned.policies.multifactor import Multifactor
from rltuned.policies.predicted import Psaf, Psjf
from rltuned.policies.qssf import Qssf

POLICIES: dict[str, Callable[[], Policy]] = {
    "fcfs": Fcfs,
    "sjf": Sjf,
    "wfp3": Wfp3,
    "unicep": Unicep,
    "saf": Saf,
    "f1": F1,
    "f2": F2,
    "f3": F3,
    "f4": F4,
    "multifactor": Multifactor,
    "qssf": Qssf,
    "psjf": Psjf,
    "psaf": Psaf,
}


def make_policy(name: str) -> Policy:
    try:
        return POLICIES[name.lower()]()
    except KeyError:
        raise UsageError(f"unknown policy {name!r}; choose from {', '.join(POLICIES)}") from None
