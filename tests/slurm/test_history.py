"""Slurm's accounting into the simulator's `History`: sshare's decayed GPU usage per account, sacct's mean
runtimes per user and account."""

from __future__ import annotations

import pytest

from rltuned.errors import SlurmError
from rltuned.slurm.history import history_from_slurm, runtimes_from_sacct, usage_from_sshare

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

SACCT = """User|Account|ElapsedRaw|State
alice|physics|100|COMPLETED
alice|physics|300|TIMEOUT
bob|bio|50|FAILED
bob|bio|0|CANCELLED by 0
"""


def test_usage_is_gpu_seconds_per_account_that_used_gpus() -> None:
    # GrpTRESRaw is in TRES-minutes; the root sums every account, and an account that used nothing is
    # one fair-share does not count (the simulator never sees it either).
    assert usage_from_sshare(SSHARE) == {"physics": 1200.0, "bio": 600.0}


def test_runtimes_are_means_of_the_jobs_that_ran() -> None:
    by_user, by_account = runtimes_from_sacct(SACCT)
    assert by_user == {"alice": 200.0, "bob": 50.0}  # the cancelled job never ran
    assert by_account == {"physics": 200.0, "bio": 50.0}


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
        (SSHARE, "User|Account|ElapsedRaw|State\nalice|physics|soon|COMPLETED\n", "ElapsedRaw 'soon'"),
        ("Account|User|GrpTRESRaw\nphysics||gres/gpu=lots\nphysics|alice|gres/gpu=1\n", SACCT, "'lots'"),
        ("", SACCT, "no output"),
        (SSHARE, "User|Account|ElapsedRaw|State\nalice|physics\n", "line 2 has 2 fields"),
    ],
)
def test_bad_output_is_a_slurm_error_naming_what_is_wrong(sshare: str, sacct: str, problem: str) -> None:
    with pytest.raises(SlurmError, match=problem):
        history_from_slurm(sshare, sacct)
