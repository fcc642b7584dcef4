"""Slurm's accounting into the simulator's `History`: sshare's decayed GPU usage per account, sacct's mean
runtimes per user and account, and the last runtimes per peer group."""

from __future__ import annotations

import pytest

from rltuned.errors import SlurmError
from rltuned.slurm.history import (
    history_from_slurm,
    recent_from_sacct,
    runtimes_from_sacct,
    usage_from_sshare,
)

# As `sshare -a -P -o Account,User,GrpTRESRaw` prints it: the root, accounts, and their users.
SSHARE = """Account|User|GrpTRESRaw
root||cpu=100,mem=6400000,energy=0,node=100,billing=100,fs/disk=0,vmem=0,pages=0,gres/gpu=30
 root|root|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
 physics||cpu=60,mem=3840000,energy=0,node=60,billing=60,fs/disk=0,vmem=0,pages=0,gres/gpu=20
  physics|alice|cpu=60,mem=3840000,energy=0,node=60,billing=60,fs/disk=0,vmem=0,pages=0,gres/gpu=20
 bio||cpu=40,mem=2560000,energy=0,node=40,billing=40,fs/disk=0,vmem=0,pages=0,gres/gpu=10
  bio|bob|cpu=40,mem=2560000,energy=0,node=40,billing=40,fs/disk=0,vmem=0,pages=0,gres/gpu=10
 idle||cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
  idle|carol|cpu=0,mem=0,energy=0,node=0,billing=0,fs/disk=0,vmem=0,pages=0,gres/gpu=0
"""

# As `sacct -a -X -P -o User,Account,ElapsedRaw,State,AllocTRES,End` prints it: by job id, not by end.
SACCT = """User|Account|ElapsedRaw|State|AllocTRES|End
alice|physics|100|COMPLETED|billing=8,cpu=8,gres/gpu=2,mem=16G,node=1|2026-11-28T03:00:00
alice|physics|300|TIMEOUT|billing=8,cpu=8,gres/gpu=2,mem=16G,node=1|2026-11-28T01:00:00
bob|bio|50|FAILED|billing=1,cpu=1,gres/gpu=1,mem=8G,node=1|2026-11-28T02:00:00
bob|bio|0|CANCELLED by 0||Unknown
"""


def test_usage_is_gpu_seconds_per_account_that_used_gpus() -> None:
    # GrpTRESRaw is in TRES-minutes; the root sums every account, and an account that used nothing is
    # one fair-share does not count (the simulator never sees it either).
    assert usage_from_sshare(SSHARE) == {"physics": 1200.0, "bio": 600.0}


def test_runtimes_are_means_of_the_jobs_that_ran() -> None:
    by_user, by_account = runtimes_from_sacct(SACCT)
    assert by_user == {"alice": 200.0, "bob": 50.0}  # the cancelled job never ran
    assert by_account == {"physics": 200.0, "bio": 50.0}


def test_peers_are_the_last_runtimes_per_user_and_gpus_in_the_order_they_ended() -> None:
    assert recent_from_sacct(SACCT) == {("alice", 2): (300.0, 100.0), ("bob", 1): (50.0,)}
    # Cores as slots: the peer group counts the cores the job held.
    assert recent_from_sacct(SACCT, "cpus") == {("alice", 8): (300.0, 100.0), ("bob", 1): (50.0,)}
    five = "\n".join(
        ["User|Account|ElapsedRaw|State|AllocTRES|End"]
        + [f"|vc|{10 * i}|COMPLETED|gres/gpu=4|2026-11-28T0{i}:00:00" for i in (5, 1, 4, 2, 3)]
    )
    # No user (a GPU trace's accounts): the account is the owner; only the last three are kept.
    assert recent_from_sacct(five) == {("vc", 4): (30.0, 40.0, 50.0)}


def test_the_history() -> None:
    history = history_from_slurm(SSHARE, SACCT)
    assert history.total_usage == 1800.0 and history.mean_runtime_by_user["alice"] == 200.0


def test_with_cores_as_slots_usage_is_core_seconds() -> None:
    """The simulator counts slot-seconds; on a CPU cluster a slot is a core, and gres/gpu is 0 there."""
    assert usage_from_sshare(SSHARE, "cpus") == {"physics": 3600.0, "bio": 2400.0}
    assert history_from_slurm(SSHARE, SACCT, "cpus").total_usage == 6000.0


@pytest.mark.parametrize(
    ("sshare", "sacct", "problem"),
    [
        ("Account|User\nphysics|\n", SACCT, "missing GrpTRESRaw"),
        (
            SSHARE,
            "User|Account|ElapsedRaw|State|AllocTRES|End\nalice|physics|soon|COMPLETED||\n",
            "ElapsedRaw 'soon'",
        ),
        (
            SSHARE,
            "User|Account|ElapsedRaw|State|AllocTRES|End\na|p|5|COMPLETED|gres/gpu=x|\n",
            "AllocTRES gres/gpu='x'",
        ),
        (SSHARE, "User|Account|ElapsedRaw|State\nalice|physics|5|COMPLETED\n", "missing AllocTRES, End"),
        ("Account|User|GrpTRESRaw\nphysics||gres/gpu=lots\nphysics|alice|gres/gpu=1\n", SACCT, "'lots'"),
        (
            "Account|User|GrpTRESRaw\nphysics||gres/gpu=2,mem=16G\nphysics|alice|gres/gpu=1\n",
            SACCT,
            "mem='16G'",
        ),  # raw: no units
        ("", SACCT, "no output"),
        (SSHARE, "User|Account|ElapsedRaw|State|AllocTRES|End\nalice|physics\n", "line 2 has 2 fields"),
    ],
)
def test_bad_output_is_a_slurm_error_naming_what_is_wrong(sshare: str, sacct: str, problem: str) -> None:
    with pytest.raises(SlurmError, match=problem):
        history_from_slurm(sshare, sacct)
