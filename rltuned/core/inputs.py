"""What each base policy reads, and whether the daemon can read it from Slurm.

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

# --- the inputs a policy's key may read -----------------------------------------------------------

NOW = "now"
"""`PriorityContext.now`: the snapshot's clock (on Slurm, the time of the read)."""
SUBMIT = "submit"
"""`Job.submit` (on Slurm, squeue's submit_time in epoch seconds)."""
ESTIMATE = "estimate"
"""`Job.estimate` (on Slurm, the job's time limit, or `policy.default_time_limit_min`)."""
GPUS = "gpus"
"""`Job.gpus` (squeue's GRES/TRES request)."""
USER = "user"
"""`Job.user` (squeue's user_name)."""
ACCOUNT = "account"
"""`Job.account` (squeue's account)."""
TOTAL_GPUS = "total_gpus"
"""`PriorityContext.total_gpus`: the cluster's GPUs (sinfo)."""
FAIRSHARE_USAGE = "fairshare_usage"
"""`History.usage`: decayed GPU-seconds per account (Slurm's `sshare`)."""
PAST_RUNTIMES = "past_runtimes"
"""`History.mean_runtime_by_user` / `mean_runtime_by_account` (Slurm's `sacct`)."""
PEER_RUNTIMES = "peer_runtimes"
"""`History.recent_runtimes`: the last finished runtimes per user (else account) and slot count
(Slurm's `sacct`, with `AllocTRES` and `End`)."""
ORIGIN = "origin"
"""`ClusterSnapshot.origin`: the instant submit times are measured from (the simulated window's start)."""

HISTORY_INPUTS: frozenset[str] = frozenset({FAIRSHARE_USAGE, PAST_RUNTIMES, PEER_RUNTIMES})
"""The inputs read from Slurm's accounting (sshare, sacct) rather than from squeue/sinfo."""

READABLE_FROM_SLURM: frozenset[str] = frozenset(
    {NOW, SUBMIT, ESTIMATE, GPUS, USER, ACCOUNT, TOTAL_GPUS} | HISTORY_INPUTS
)
"""The inputs the daemon fills as the simulator does: `slurm/parse.read_view` from squeue/sinfo, and the
engine's accounting reads (slurmdbd; without it the reads fail, are counted as a `history` fallback,
and the history stays empty, which the simulator's own tick loop never sees)."""

POLICY_INPUTS: Mapping[str, frozenset[str]] = {
    # key = submit
    "fcfs": frozenset({SUBMIT}),
    # key = estimate
    "sjf": frozenset({ESTIMATE}),
    # key = -((now - submit) / estimate)^3 * gpus
    "wfp3": frozenset({NOW, SUBMIT, ESTIMATE, GPUS}),
    # key = -(now - submit) / (log2(gpus + 1) * estimate)
    "unicep": frozenset({NOW, SUBMIT, ESTIMATE, GPUS}),
    # key = estimate * gpus
    "saf": frozenset({ESTIMATE, GPUS}),
    # key = log10(estimate) * gpus + 870 * log10(submit - origin); F2-F4 alike with other terms
    "f1": frozenset({SUBMIT, ORIGIN, ESTIMATE, GPUS}),
    "f2": frozenset({SUBMIT, ORIGIN, ESTIMATE, GPUS}),
    "f3": frozenset({SUBMIT, ORIGIN, ESTIMATE, GPUS}),
    "f4": frozenset({SUBMIT, ORIGIN, ESTIMATE, GPUS}),
    # age (now - submit), fair-share (the account's usage against everyone's), job size (gpus / total)
    "multifactor": frozenset({NOW, SUBMIT, ACCOUNT, FAIRSHARE_USAGE, GPUS, TOTAL_GPUS}),
    # mean past runtime of the user, else of the account, else the estimate; times gpus
    "qssf": frozenset({USER, ACCOUNT, PAST_RUNTIMES, ESTIMATE, GPUS}),
    # the estimate, lowered toward what the same owner's finished jobs of as many GPUs ran; psaf x gpus
    "psjf": frozenset({USER, ACCOUNT, GPUS, PEER_RUNTIMES, ESTIMATE}),
    "psaf": frozenset({USER, ACCOUNT, GPUS, PEER_RUNTIMES, ESTIMATE}),
}
"""Per base policy (`policies.POLICIES`), every snapshot input its key reads (see `policies/`)."""

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


def time_invariant(base: str) -> bool:
    """Whether base policy `base` ranks an unchanged queue the same at every tick: its key reads neither
    the clock nor Slurm's accounting (which moves as running jobs accrue usage), only what a job
    brought with it. The simulator lets such a base alone skip ticks where nothing changed
    (`sim/ticks.run_ticks`). Raises KeyError for a name that is not a base policy."""
    return not POLICY_INPUTS[base.lower()] & ({NOW} | HISTORY_INPUTS)
