"""How validation scores a checkpoint: the rule that chooses what ships."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates, draw_seeds
from rltuned.rl import ppo
from rltuned.rl.args import Args
from rltuned.rl.export import load_model
from rltuned.rl.validation import Validator, gap, model_validator
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
