"""`rltunectl train` refuses impossible recipes before any work, naming the option."""

from __future__ import annotations

from pathlib import Path

import pytest

from rltuned.cli import main


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        (["--reward", "dense", "--metric", "util"], "--reward dense"),
        (["--gamma", "0"], "--gamma"),
        (["--gae-lambda", "1.5"], "--gae-lambda"),
        (["--minibatches", "0"], "--minibatches"),
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
