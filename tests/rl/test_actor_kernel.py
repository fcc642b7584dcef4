"""The compiled actor: built only for the Actor's graph, checked against the TorchScript it was read
from, per-row deterministic, and never trusted past what the TorchScript would be."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn

from rltuned.core.scoring import score_queue
from rltuned.features import ACTOR_FEATURES, MAX_JOBS, Observation
from rltuned.rl.actor_kernel import TOLERANCE, _forward, _tanh, agrees, kernel_of, read_kernel
from rltuned.rl.agent import Actor
from rltuned.rl.export import load_model, loaded
from rltuned.rl.validation import frozen

MODELS = Path(__file__).resolve().parents[2] / "models"
SHIPPED = sorted(p.parent.name for p in MODELS.glob("*/manifest.json"))


def trained_like(rank_prior: float = 0.0, hidden: tuple[int, int] = (32, 16), seed: int = 0) -> Actor:
    """An actor with every layer random (a new one's output layer is zero) and a fitted input scaling."""
    torch.manual_seed(seed)
    actor = Actor(hidden=hidden, rank_prior=rank_prior)
    for p in actor.net[-1].parameters():
        nn.init.normal_(p, std=0.5)
    actor.fit_input(
        torch.rand(2, MAX_JOBS, ACTOR_FEATURES) * 0.2 + 0.4, torch.ones(2, MAX_JOBS, dtype=torch.bool)
    )
    return actor


def observation(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    actor = np.zeros((MAX_JOBS, ACTOR_FEATURES), dtype=np.float32)
    actor[:n] = rng.random((n, ACTOR_FEATURES), dtype=np.float32)
    return actor, np.arange(MAX_JOBS) < n


def torchscript_scores(model: object, actor: np.ndarray, mask: np.ndarray) -> np.ndarray:
    return model.scores(torch.from_numpy(actor), torch.from_numpy(mask)).numpy().astype(np.float64)  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", SHIPPED)
def test_every_shipped_model_is_compiled_and_scores_as_its_torchscript(name: str) -> None:
    model = load_model(MODELS / name)
    assert model.engine == "compiled"
    rng = np.random.default_rng(7)  # not the probes' seed
    for n in (1, 5, 64, 256):
        actor, mask = observation(rng, n)
        expected = torchscript_scores(model, actor, mask)
        got = model.score_rows(actor, mask)
        assert np.all(np.abs(got - expected) <= TOLERANCE * np.maximum(1.0, np.abs(expected)))
        assert np.all(got[n:] == -1e9)


@pytest.mark.parametrize(("rank_prior", "hidden"), [(0.0, (32, 16)), (0.05, (32, 16)), (0.0, (7, 3))])
def test_the_rank_prior_and_other_widths_are_read_off_the_graph(
    rank_prior: float, hidden: tuple[int, int]
) -> None:
    model = frozen(trained_like(rank_prior, hidden))
    assert model.kernel is not None
    assert model.kernel.rank_prior == pytest.approx(rank_prior)
    assert model.kernel.widths.tolist() == [ACTOR_FEATURES, *hidden, 1]
    actor, mask = observation(np.random.default_rng(1), 40)
    expected = torchscript_scores(model, actor, mask)
    np.testing.assert_allclose(model.score_rows(actor, mask), expected, rtol=TOLERANCE, atol=TOLERANCE)


class Relu(nn.Module):
    """The Actor's interface and shape, but another activation: not the Actor's graph."""

    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(nn.Linear(ACTOR_FEATURES, 4), nn.ReLU(), nn.Linear(4, 1))

    def forward(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        scores = torch.full(mask.shape, -1e9, dtype=obs.dtype)
        return scores.masked_scatter(mask, self.net(obs[mask]).squeeze(-1))


def test_another_graph_runs_as_torchscript() -> None:
    model = frozen(Relu())
    assert read_kernel(model.module) is None
    assert model.engine == "torchscript"
    actor, mask = observation(np.random.default_rng(2), 30)
    assert np.array_equal(model.score_rows(actor, mask), torchscript_scores(model, actor, mask))


def test_a_kernel_that_scores_otherwise_is_not_kept() -> None:
    """The probes catch a misread: one weight off by 1% is far outside float32 rounding."""
    model = frozen(trained_like())
    assert model.kernel is not None and agrees(model.kernel, model.module)
    weights = model.kernel.weights.copy()
    weights[3] *= 1.01
    assert not agrees(replace(model.kernel, weights=weights), model.module)
    prior = replace(model.kernel, rank_prior=1e-3)
    assert not agrees(prior, model.module)


def test_a_model_with_non_finite_weights_is_still_refused_per_tick() -> None:
    actor = trained_like()
    with torch.no_grad():
        actor.net[0].weight[0, 0] = float("nan")
    model = frozen(actor)
    assert kernel_of(model.module) is None  # NaN agrees with nothing; the TorchScript runs, and is refused
    actor_rows, mask = observation(np.random.default_rng(3), 10)
    obs = Observation(  # the scoring wrapper reads only the actor rows and the mask
        actor_rows,
        mask,
        np.zeros((MAX_JOBS, 5), np.float32),
        np.arange(MAX_JOBS),
        np.zeros((MAX_JOBS, 17), np.float32),
        (),
        0.0,
        (),
        (),
    )
    scored = score_queue(model, obs, float("inf"))
    assert scored.scores is None and scored.problem == "model failed: non-finite scores"


@settings(max_examples=30, deadline=None)
@given(st.integers(1, MAX_JOBS), st.integers(0, 2**31 - 1))
def test_a_jobs_score_is_its_own_features_alone(n: int, seed: int) -> None:
    """What the Actor promises (rl/agent.py): the same row scores the same, to the last bit, whatever
    the other rows, how many there are, or which slot it is in. (TorchScript's batched matrix products
    round a row differently with the batch's size, so its scores do not keep this to the last bit.)"""
    model = loaded(frozen(trained_like()).module, {}, Path("t"))
    assert model.kernel is not None
    rng = np.random.default_rng(seed)
    actor, mask = observation(rng, n)
    alone = np.zeros_like(actor)
    slot = int(rng.integers(0, MAX_JOBS))
    alone[slot] = actor[0]
    single = np.arange(MAX_JOBS) == slot
    assert model.score_rows(actor, mask)[0] == model.score_rows(alone, single)[slot]


def test_tanh_is_within_three_float32_units_in_the_last_place() -> None:
    xs = np.concatenate([np.linspace(-10.0, 10.0, 200_001), np.geomspace(1e-12, 1e-2, 2_001)])
    worst = 0.0
    for x in xs.astype(np.float32).astype(np.float64):
        exact = np.float32(math.tanh(x))
        got = np.float32(_tanh(x))
        worst = max(
            worst, abs(float(got) - float(exact)) / float(np.spacing(np.float32(max(abs(exact), 1e-38))))
        )
    assert worst <= 3.0
    assert math.isnan(_tanh(float("nan")))
    assert np.float32(_tanh(float("inf"))) == np.float32(_tanh(8.0)) > 0.9999997


def test_the_torchscript_engine_is_the_interpreter_alone(tmp_path: Path) -> None:
    """`engine = "torchscript"` (daemon) and `--engine torchscript` (evaluate) serve the module's own
    scores, to the last bit: what every figure recorded before the kernel existed was run by."""
    model = load_model(MODELS / "philly-sjf-bsld", "torchscript")
    assert model.engine == "torchscript" and model.kernel is None
    actor, mask = observation(np.random.default_rng(4), 50)
    assert np.array_equal(model.score_rows(actor, mask), torchscript_scores(model, actor, mask))
    with pytest.raises(ValueError, match="unknown engine"):
        load_model(MODELS / "philly-sjf-bsld", "onnx")


def test_a_tick_never_compiles_the_loading_did() -> None:
    """A tick's observation is read-only, another kind of array to numba than a fresh one: loading
    compiles both, so the first tick's forward pass is not a compilation timed against the budget."""
    model = load_model(MODELS / "philly-sjf-bsld")
    compiled = len(_forward.signatures)
    actor, mask = observation(np.random.default_rng(5), 12)
    for writeable in (True, False):
        actor.flags.writeable = mask.flags.writeable = writeable
        model.score_rows(actor, mask)
    assert len(_forward.signatures) == compiled >= 2
