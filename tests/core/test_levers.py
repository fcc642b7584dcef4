"""One definition per lever: what it writes, how reset undoes it, its ledger field, which backend can
write it and what in slurm.conf defeats it, all from `core/levers.py`."""

from __future__ import annotations

from dataclasses import fields

from rltuned.core.levers import HOLD_RELEASE, LEVERS, LeverWrites, enabled, pyslurm_cannot
from rltuned.core.plan import Change

EVERYTHING = Change(priority=9000, site_factor=50, oversubscribe=True, excluded_nodes="k80-1",
                    oversubscribe_before="yes")  # fmt: skip


def test_every_lever_has_its_ledger_field() -> None:
    assert set(LEVERS) <= {f.name for f in fields(Change)}


def test_what_each_lever_writes() -> None:
    values: dict[str, int | bool | str] = {
        "priority": 9000,
        "site_factor": 50,
        "oversubscribe": False,
        "excluded_nodes": "k80-1",
    }
    written = {kind: LEVERS[kind].action(7, value).fields for kind, value in values.items()}
    assert written == {
        "priority": (("Priority", "9000"),),
        "site_factor": (("SiteFactor", "50"),),
        "oversubscribe": (("OverSubscribe", "no"),),
        "excluded_nodes": (("ExcNodeList", "k80-1"),),
    }
    assert [k for k, lever in LEVERS.items() if lever.needs_pending] == ["oversubscribe", "excluded_nodes"]


def test_every_lever_written_is_undone_and_nothing_else() -> None:
    undo = {kind: lever.undo(EVERYTHING) for kind, lever in LEVERS.items()}
    assert undo == {
        "priority": HOLD_RELEASE,
        "site_factor": {"SiteFactor": "0"},
        "oversubscribe": {"OverSubscribe": "yes"},  # the job's own value, not the one rltuned wrote
        "excluded_nodes": {"ExcNodeList": ""},
    }
    assert all(lever.undo(Change()) is None for lever in LEVERS.values())
    assert LEVERS["oversubscribe"].undo(Change(oversubscribe=True)) == {"OverSubscribe": "no"}


def test_the_pyslurm_backend_is_refused_exactly_the_levers_it_cannot_write() -> None:
    assert pyslurm_cannot(enabled("priority", False, False)) == []
    assert pyslurm_cannot(enabled("site_factor", True, True)) == [
        'apply.lever = "site_factor"',
        "placement.oversubscribe = true",
        "placement.steer_untyped = true",
    ]


def test_a_levers_writes_read_as_the_actions_it_makes_for_them() -> None:
    """What the daemon writes from a plan (its actions) is what a simulated tick applies (the pairs)."""
    pairs = [(7, 9000), (3, 8000), (11, 7000)]
    writes = LeverWrites(LEVERS["priority"], pairs)
    made = tuple(LEVERS["priority"].action(j, v) for j, v in pairs)
    assert len(writes) == 3 and tuple(writes) == made and writes == made and made == writes
    assert writes[1] == made[1] and writes[1:] == made[1:] and writes[:2].pairs == pairs[:2]
    assert writes != made[:2] and writes != LeverWrites(LEVERS["site_factor"], pairs)
    assert LeverWrites(LEVERS["priority"], []) == () and not LeverWrites(LEVERS["priority"], [])
