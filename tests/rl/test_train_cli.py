"""`rltunectl train` refuses impossible recipes before any work, naming the option."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from rltuned.cli import main


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--reward", "dense", "--metric", "util"], "--reward dense"),
        (["--gamma", "0"], "--gamma"),
        (["--gae-lambda", "1.5"], "--gae-lambda"),
        (["--minibatches", "0"], "--num-minibatches"),
        (["--clip-ratio", "1.5"], "--clip-ratio"),
        (["--workers", "-1"], "--workers"),
        (["--pi-lr", "-1"], "--pi-lr"),
    ],
)
def test_a_bad_training_option_is_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], named: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(
            ["train", "--trace", "philly", "--cluster", "philly-slice", "--out", str(tmp_path / "m"), *extra]
        )
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert named in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "m").exists()


def test_every_training_field_is_a_flag_with_its_docstring_as_help() -> None:
    """The dataclass is the one place a knob is declared: each field is settable and explained."""
    import dataclasses

    from rltuned.cli import build_parser
    from rltuned.rl.args import Args

    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    train = sub.choices["train"]
    by_dest = {a.dest: a for a in train._actions}
    for f in dataclasses.fields(Args):
        if f.name == "extra":
            continue
        assert f.name in by_dest, f.name
        assert by_dest[f.name].help, f.name
    assert "actor learning rate" in (by_dest["pi_lr"].help or "")


def test_flags_once_unreachable_reach_the_training_args() -> None:
    from rltuned.cli import build_parser
    from rltuned.dataclass_cli import from_namespace
    from rltuned.rl.args import Args

    ns = build_parser().parse_args(
        ["train", "--trace", "t", "--cluster", "c", "--out", "o", "--vf-lr", "0.01", "--clip-ratio", "0.1",
         "--target-kl", "0.05", "--ent-coef", "0.02", "--imitate-steps", "7", "--minibatches", "3",
         "--no-backfill", "--workers", "2"]
    )  # fmt: skip
    args = from_namespace(Args, ns)
    assert (args.vf_lr, args.clip_ratio, args.target_kl, args.ent_coef) == (0.01, 0.1, 0.05, 0.02)
    assert (args.imitate_steps, args.num_minibatches, args.backfill, args.workers) == (7, 3, False, 2)
    assert (args.pi_lr, args.window, args.minutes) == (Args.pi_lr, Args.window, None)  # defaults kept
