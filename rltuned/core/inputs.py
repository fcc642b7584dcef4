"""Whether the daemon can read from Slurm what each base policy reads (`policies/inputs.py`).

A base policy is a pure function of the snapshot (`policies/`), but not every field of the snapshot is
filled on Slurm. `slurm/parse.read_view` builds the `ClusterSnapshot` from `squeue`/`sinfo` alone: the
jobs' submit times (epoch seconds), time limits (the estimate), GPUs, users and accounts, the clock and
the cluster's GPUs. It leaves `history` empty (no `sshare`, no `sacct`) and `origin` at 0.0. Fair-share
usage (sshare) and past runtimes (sacct) come from Slurm's accounting, read by the daemon's engine every
`slurm.history_interval_s` for a base that needs them (`slurm/history.py`), and kept by the simulator on
the same interval. A policy that reads anything else Slurm does not show would rank Slurm's queue by
another rule than the one it was trained and evaluated with, silently; the daemon refuses such a
`policy.base` instead (`unreadable_inputs`), and the simulator's tick loop asks the same function, so it
never evaluates a base the daemon cannot serve.
"""

from __future__ import annotations

from collections.abc import Mapping

from rltuned.policies.inputs import (
    ACCOUNT,
    ESTIMATE,
    FAIRSHARE_USAGE,
    GPUS,
    HISTORY_INPUTS,
    NOW,
    ORIGIN,
    PAST_RUNTIMES,
    PEER_RUNTIMES,
    POLICY_INPUTS,
    SUBMIT,
    TOTAL_GPUS,
    USER,
    reads_history,
    time_invariant,
)

__all__ = [
    "ACCOUNT",
    "ESTIMATE",
    "FAIRSHARE_USAGE",
    "GPUS",
    "HISTORY_INPUTS",
    "NOW",
    "ORIGIN",
    "PAST_RUNTIMES",
    "PEER_RUNTIMES",
    "POLICY_INPUTS",
    "READABLE_FROM_SLURM",
    "SUBMIT",
    "TOTAL_GPUS",
    "USER",
    "WHY_UNREADABLE",
    "readable_bases",
    "reads_history",
    "time_invariant",
    "unreadable_inputs",
]


READABLE_FROM_SLURM: frozenset[str] = frozenset(
    {NOW, SUBMIT, ESTIMATE, GPUS, USER, ACCOUNT, TOTAL_GPUS} | HISTORY_INPUTS
)
"""The inputs the daemon fills as the simulator does: `slurm/parse.read_view` from squeue/sinfo, and the
engine's accounting reads (slurmdbd; without it the reads fail, are counted as a `history` fallback,
and the history stays empty, which the simulator's own tick loop never sees)."""


WHY_UNREADABLE: Mapping[str, str] = {
    ORIGIN: (
        "it measures submit times from the start of the trace window (the snapshot's origin), which a "
        "Slurm snapshot does not have; on epoch-second submit times its 870 * log10(submit) term is "
        "almost the same for every job, so it ranks differently from training (F1-F4 alike)"
    ),
}
"""For each input missing from `READABLE_FROM_SLURM`, what a policy that reads it would do on Slurm."""


def unreadable_inputs(base: str) -> str | None:
    """Why the daemon cannot serve base policy `base` from what it reads from Slurm, or None if it can.

    Pure: the daemon (`--check-config`, start-up, reload) and the simulator's tick loop ask the same
    question. Raises KeyError for a name that is not a base policy.
    """
    missing = sorted(POLICY_INPUTS[base.lower()] - READABLE_FROM_SLURM)
    if not missing:
        return None
    return "; ".join(
        WHY_UNREADABLE.get(name, f"it needs {name}, which rltuned does not read") for name in missing
    )


def readable_bases() -> tuple[str, ...]:
    """The base policies the daemon can serve, in `POLICY_INPUTS` order."""
    return tuple(name for name in POLICY_INPUTS if unreadable_inputs(name) is None)
