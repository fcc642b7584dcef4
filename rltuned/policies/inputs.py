"""What each base policy's key reads of a snapshot: one table, which the daemon reads to know what it
must fetch from Slurm (`core/inputs.py`) and the simulator to know what it must keep."""

from __future__ import annotations

from collections.abc import Mapping

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


def time_invariant(base: str) -> bool:
    """Whether base policy `base` ranks an unchanged queue the same at every tick: its key reads neither
    the clock nor Slurm's accounting (which moves as running jobs accrue usage), only what a job
    brought with it. The simulator lets such a base alone skip ticks where nothing changed
    (`sim/ticks.run_ticks`). Raises KeyError for a name that is not a base policy."""
    return not POLICY_INPUTS[base.lower()] & ({NOW} | HISTORY_INPUTS)


def reads_history(base: str) -> bool:
    """Whether base policy `base`'s key reads Slurm's accounting (fair-share usage, past runtimes): the
    daemon reads sshare and sacct only for such a base, and the simulator keeps the history of finished
    jobs only for it. Raises KeyError for a name that is not a base policy."""
    return bool(POLICY_INPUTS[base.lower()] & HISTORY_INPUTS)
