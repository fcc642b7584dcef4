"""How validation scores a checkpoint: the rule that chooses what ships."""

from __future__ import annotations

import re

import pytest

from rltuned.errors import UsageError
from rltuned.rl.args import Args
from rltuned.rl.validation import gap


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
