"""How validation scores a checkpoint: the rule that chooses what ships."""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates, draw_seeds
from rltuned.rl import ppo
from rltuned.rl.args import Args
from rltuned.rl.export import load_model
from rltuned.rl.validation import Validator, by_window, gap, model_validator, window_interval
from rltuned.traces import load_trace


def test_one_heavy_window_decides_the_pooled_gap_but_not_the_per_window_one() -> None:
    # Six windows where the model loses by 10% (3.0 -> 3.3), one heavy window it halves (30 -> 15).
    base = [3.0] * 6 + [30.0]
    agent = [3.3] * 6 + [15.0]
    pooled = gap(base, agent, "bsld")
    assert pooled == pytest.approx((48.0 - 34.8) / 48.0)  # means 48/7 and 34.8/7: +27.5%
    per_window = gap(base, agent, "bsld", "per_window")
    assert per_window == pytest.approx((6 * (-0.3 / 3.3) + 0.5) / 7)  # -0.6%: it loses on most windows
    assert pooled > 0 > per_window


def test_per_window_gap_of_utilization_rewards_the_higher_score() -> None:
    assert gap([0.5, 0.8], [0.6, 0.8], "util", "per_window") == pytest.approx((0.1 / 0.6) / 2)


def test_an_unknown_validation_score_is_refused_naming_the_flag() -> None:
    with pytest.raises(
        UsageError, match=re.escape("--validation-score must be pooled | per_window, got median")
    ):
        Args(validation_score="median").check()


def validator_for(burst: tuple[Path, Path], estimates: str, draws: int) -> Validator:
    trace, spec = burst
    args = Args(trace=str(trace), cluster=str(spec), base="sjf", metric="bsld", estimates=estimates,
                backfill=False, window=64, warmup=0, seed=0, loop="paper", validate_every=1,
                validation_window=64, validation_estimate_seeds=draws)  # fmt: skip
    ppo.make_env(args)  # resolves the estimate model, as training does first
    return ppo.make_validator(args)


def test_validation_runs_every_window_on_each_draw_of_the_estimate_noise(burst: tuple[Path, Path]) -> None:
    """A checkpoint chosen on one draw of noisy limits can win on that draw alone; the next draws are
    the training draw's seed + 1, + 2 (the test split's draws, on other jobs)."""
    one, three = validator_for(burst, "qssf-noise", 1), validator_for(burst, "qssf-noise", 3)
    windows = len(one.windows)
    assert windows == 3 and len(three.windows) == 3 * windows  # 200 validation jobs: 3 x 64
    trace = load_trace(burst[0]).jobs
    for seed in range(3):
        assert three.draws[seed] == apply_estimates(trace, "qssf-noise", seed)[0]
    first = [three.score(None, i) for i in range(windows)]
    assert first == [one.score(None, i) for i in range(windows)]
    others = [three.score(None, i) for i in range(windows, 3 * windows)]
    assert others[:windows] != first and others[windows:] != others[:windows]  # other limits, other schedules


def test_exact_estimates_have_one_draw(burst: tuple[Path, Path]) -> None:
    assert len(validator_for(burst, "exact", 3).windows) == len(validator_for(burst, "exact", 1).windows)


MODELS = Path(__file__).resolve().parents[2] / "models"


@pytest.mark.parametrize(
    ("model", "draws", "windows"), [("wagap-fcfs-bsld-ticks", 1, 6), ("philly-sjf-bsld", 3, 7)]
)
def test_a_shipped_models_validator_rebuilt_from_its_manifest_is_the_one_it_was_chosen_with(
    model: str, draws: int, windows: int
) -> None:
    """Checks run on validation after training (another guard, an ensemble) must score the windows and
    draws the checkpoint was chosen on: wagap's limits are the log's own (one draw whatever the flag),
    Philly's model was validated on three draws of the noise."""
    manifest = load_model(MODELS / model).manifest
    validator = model_validator(manifest)
    assert len(validator.draws) == draws and len(validator.windows) == draws * windows
    assert len(manifest["validation_base_scores"]) == len(validator.windows)
    assert validator.score(None, 0) == manifest["validation_base_scores"][0]
    assert validator.score(None, len(validator.windows) - 1) == manifest["validation_base_scores"][-1]


def test_a_paper_loop_manifest_has_no_daemon_loop_validator() -> None:
    with pytest.raises(UsageError, match="'paper' loop"):
        model_validator({"loop": "paper"})


def test_draws_repeat_nothing_for_limits_without_noise() -> None:
    assert draw_seeds("qssf-noise", 4, 3) == range(4, 7)
    assert draw_seeds("exact", 4, 3) == draw_seeds("trace", 4, 3) == range(4, 5)
    assert draw_seeds("qssf-noise", 0, 0) == range(0, 1)


def test_the_interval_resamples_windows_so_a_window_heavy_on_every_draw_is_not_ten_samples() -> None:
    """Two windows, ten draws each: the model wins one window by 10% and loses the other by 10% on
    every draw. Twenty window-draws resampled one by one would put the mean within a few points of 0;
    there are two windows, so the mean may as well be either one's."""
    gaps = np.array([[0.1] * 10, [-0.1] * 10])
    low, high = window_interval(gaps)
    assert low == pytest.approx(-0.1) and high == pytest.approx(0.1)
    assert window_interval(np.full((7, 3), 0.04)) == pytest.approx((0.04, 0.04))


def test_figures_come_back_per_window_with_their_draws(burst: tuple[Path, Path]) -> None:
    validator = validator_for(burst, "qssf-noise", 2)  # 3 windows x 2 draws, draw-major
    assert by_window([0, 1, 2, 10, 11, 12], validator).tolist() == [[0, 10], [1, 11], [2, 12]]


def test_a_trained_model_is_confirmed_on_draws_no_choice_read(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """The checkpoint is chosen on the validation draws (seed 0 here); the confirmation runs the shipped
    actor and the base on the next draws (1 and 2), which the choice never saw, and records them."""
    trace, spec = burst
    args = Args(trace=str(trace), cluster=str(spec), base="sjf", metric="bsld", estimates="qssf-noise",
                backfill=False, window=64, warmup=0, seed=0, out=str(tmp_path / "m"), epochs=1,
                episodes_per_epoch=1, loop="paper", validate_every=1, validation_window=64,
                confirm_estimate_seeds=2)  # fmt: skip
    model = load_model(ppo.train(args))
    record = model.manifest["confirmation"]
    assert record["draws"] == [1, 2] and record["windows"] == 6
    again = replace(args, extra={})
    ppo.make_env(again)
    fresh = ppo.make_validator(again, range(1, 3))
    base = [fresh.score(None, w) for w in range(6)]
    agent = [fresh.score(model, w) for w in range(6)]
    assert record["base_score"] == pytest.approx(np.mean(base))
    assert record["agent_score"] == pytest.approx(np.mean(agent))
    gaps = [gap([b], [a], "bsld") for b, a in zip(base, agent, strict=True)]
    assert record["gap"] == pytest.approx(np.mean(gaps))
    assert record["interval"][0] <= record["gap"] <= record["interval"][1]
    assert record["wins"] == sum(g > 0.001 for g in gaps) and record["losses"] == sum(
        g < -0.001 for g in gaps
    )
    # The validation draw itself is not among them: its base scores are the manifest's own.
    assert model.manifest["validation_base_scores"] != base[:3]


def test_a_confirmation_needs_limits_with_other_draws_and_is_refused_before_training(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    trace, spec = burst
    args = Args(trace=str(trace), cluster=str(spec), base="sjf", metric="bsld", estimates="exact",
                window=64, warmup=0, out=str(tmp_path / "m"), epochs=1, loop="paper",
                confirm_estimate_seeds=1)  # fmt: skip
    with pytest.raises(
        UsageError, match=r"--confirm-estimate-seeds 1: the estimates \(exact\) have no other"
    ):
        ppo.train(args)
    assert not (tmp_path / "m" / "curve.json").exists()
