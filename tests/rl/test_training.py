"""The agent: masking, and a short training run that must measurably beat its base policy."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from rltuned.clusters import load_cluster
from rltuned.features import ACTOR_FEATURES, CRITIC_FEATURES, MAX_JOBS
from rltuned.rl.agent import ActorCritic
from rltuned.rl.evaluate import compare, tick_settings_of
from rltuned.rl.export import load_model
from rltuned.rl.ppo import Args, make_validator, out_of_time, train
from rltuned.rl.splits import disjoint_windows, split_range
from rltuned.sim.simulator import SimConfig
from rltuned.traces import load_trace


@given(st.integers(1, MAX_JOBS), st.integers(0, 10_000))
@settings(max_examples=40, deadline=None)
def test_masking_never_selects_padding(valid: int, seed: int) -> None:
    torch.manual_seed(seed)
    agent = ActorCritic()
    for p in agent.actor.net[-1].parameters():  # non-zero scores, so argmax is not trivially slot 0
        torch.nn.init.normal_(p, std=1.0)
    obs = torch.rand(4, MAX_JOBS, ACTOR_FEATURES) * 10
    mask = torch.zeros(4, MAX_JOBS, dtype=torch.bool)
    mask[:, :valid] = True
    critic = torch.rand(4, MAX_JOBS, CRITIC_FEATURES)
    for _ in range(5):
        action, logp, _, _ = agent.get_action_and_value(obs, mask, critic)
        assert bool((action < valid).all())
        assert bool(torch.isfinite(logp).all())
    assert bool((agent.actor(obs, mask).argmax(-1) < valid).all())


def write_trace(path: Path, n: int, seed: int) -> None:
    """Bursts of long and short 1-GPU jobs on a tiny cluster: FCFS lets long jobs block short ones, so
    preferring short requested times cuts bounded slowdown a lot; the agent has to learn that."""
    rng = np.random.default_rng(seed)
    rows = ["job_id,submission_time,duration,num_gpu"]
    t = 0
    for i in range(n):
        t += int(rng.integers(0, 40))
        duration = int(rng.integers(2000, 4000)) if rng.random() < 0.4 else int(rng.integers(20, 120))
        rows.append(f"j{i},{t},{duration},1")
    path.write_text("\n".join(rows) + "\n")


def burst(tmp_path: Path) -> tuple[Path, Path]:
    """The burst trace and a one-node, 4-GPU cluster."""
    trace = tmp_path / "burst.csv"
    write_trace(trace, 4000, seed=1)
    spec = tmp_path / "tiny.toml"
    spec.write_text('name = "tiny"\n[[nodes]]\ngpu_type = "T4"\ngpus = 4\ncpus = 16\nmem_mb = 65536\n')
    return trace, spec


@pytest.mark.slow
@pytest.mark.parametrize("reward", ["terminal", "dense"])
def test_short_training_run_beats_fcfs_on_held_out_windows(tmp_path: Path, reward: str) -> None:
    trace, spec = burst(tmp_path)
    args = Args(trace=str(trace), cluster=str(spec), base="fcfs", metric="bsld", estimates="exact",
                backfill=False, window=64, warmup=0, seed=0, out=str(tmp_path / "model"), epochs=20,
                episodes_per_epoch=8, pi_lr=3e-3, vf_lr=3e-3, reward=reward, loop="paper")  # fmt: skip
    model = load_model(train(args))
    jobs = load_trace(trace).jobs
    windows = disjoint_windows(split_range(len(jobs), "test"), 64)
    result = compare(model, jobs, load_cluster(str(spec)), "fcfs", SimConfig(backfill=False), windows, 0)
    base = np.mean([m.avg_bsld for m in result.base_metrics])
    rl = np.mean([m.avg_bsld for m in result.rl_metrics])
    assert rl < 0.85 * base, (base, rl)  # the untrained agent is exactly FCFS (zero output layer)


def test_a_rank_prior_starts_sampling_near_the_base_order() -> None:
    """Slot k is drawn with weight exp(-prior * k) before training: mostly the base policy's choice."""
    agent = ActorCritic(rank_prior=1.0)
    obs = torch.rand(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[:50] = True
    with torch.no_grad():
        probs = torch.softmax(agent.actor(obs, mask), -1)
        uniform = torch.softmax(ActorCritic().actor(obs, mask), -1)
    assert float(probs[0]) == pytest.approx(1 - np.exp(-1.0), abs=1e-4)
    assert float(probs[50:].sum()) == 0.0
    assert float(uniform[0]) == pytest.approx(1 / 50)


def test_fitted_inputs_are_standardized_over_real_slots_and_leave_the_initial_policy_uniform() -> None:
    """Jobs of one queue differ by hundredths on the [0, 1] feature scales; the MLP must see unit spread."""
    torch.manual_seed(0)
    actor = ActorCritic().actor
    obs = 0.6 + 0.05 * torch.randn(6, MAX_JOBS, ACTOR_FEATURES)
    obs[..., 3] = 1.0  # a constant feature: its scale is capped, not divided by zero
    mask = torch.zeros(6, MAX_JOBS, dtype=torch.bool)
    mask[:, :40] = True
    obs[~mask] = 99.0  # padding must not move the statistics
    actor.fit_input(obs, mask)
    x = actor.standardize(obs[mask])
    varying = [i for i in range(ACTOR_FEATURES) if i != 3]
    assert torch.allclose(x[:, varying].mean(0), torch.zeros(len(varying)), atol=1e-4)
    assert torch.allclose(x[:, varying].std(0, unbiased=False), torch.ones(len(varying)), atol=1e-3)
    assert float(actor.in_scale[3]) == pytest.approx(100.0)  # 1 / MIN_INPUT_STD
    with torch.no_grad():
        probs = torch.softmax(actor(obs[0], mask[0]), -1)
    assert torch.allclose(probs[:40], torch.full((40,), 1 / 40))
    assert not any(p.requires_grad for p in (actor.in_mean, actor.in_scale))


@pytest.mark.slow
def test_short_training_run_in_the_daemons_loop_beats_its_base_and_ships_its_best_validated_actor(
    tmp_path: Path,
) -> None:
    """The same burst trace in the daemon's loop: a ranking per 60 s tick, Slurm's main scheduler behind
    it. The base side is the daemon without a model; the untrained agent's argsort is exactly that. The
    exported actor is the one that scored best on the validation split, and it is scored on test windows
    it was never chosen on."""
    trace, spec = burst(tmp_path)
    args = Args(trace=str(trace), cluster=str(spec), base="fcfs", metric="bsld", estimates="exact",
                backfill=False, window=64, warmup=0, seed=0, out=str(tmp_path / "model"), epochs=20,
                episodes_per_epoch=8, pi_lr=1e-2, vf_lr=3e-3, num_minibatches=16, reward="dense",
                gamma=0.99, gae_lambda=0.95, loop="ticks", validate_every=5,
                validation_window=64)  # fmt: skip
    model = load_model(train(args))
    manifest = model.manifest
    assert manifest["loop"] == "ticks" and manifest["train_jobs"] == 3200 and manifest["test_jobs"] == 400
    curve = json.loads((tmp_path / "model" / "curve.json").read_text())
    validated = {int(r["epoch"]): r["val/gap"] for r in curve if "val/gap" in r}
    assert sorted(validated) == [5, 10, 15, 20]
    chosen = manifest["validation"]
    assert validated[chosen["epoch"]] == max(validated.values()) == chosen["gap"] > 0
    # The shipped file ranks as the chosen epoch did: its validation score is the recorded one.
    validator = make_validator(replace(args, extra={}))
    shipped = [validator.score(model, i) for i in range(len(validator.windows))]
    assert len(shipped) == chosen["windows"] == 6
    assert np.mean(shipped) == pytest.approx(chosen["agent_score"])
    jobs = load_trace(trace).jobs
    windows = disjoint_windows(split_range(len(jobs), "test"), 64)
    settings = tick_settings_of(manifest, "fcfs")
    assert not settings.slurm.backfill
    result = compare(model, jobs, load_cluster(str(spec)), "fcfs", settings, windows, 0)
    base = np.mean([m.avg_bsld for m in result.base_metrics])
    rl = np.mean([m.avg_bsld for m in result.rl_metrics])
    assert rl < 0.85 * base, (base, rl)


def test_the_time_budget_covers_validation_so_a_run_ends_inside_it() -> None:
    # 40 min spent, epochs of 5 min, validations of 15 min, budget 60 min.
    # Continuing after an epoch that does not validate: 40 + 5 + 15 = 60, on the budget: go on.
    assert not out_of_time(40 * 60, 60 * 60, 5 * 60, 15 * 60, validates=False)
    # The same epoch scheduled to validate: 40 + 15 + 5 + 15 = 75 > 60: this one is the last.
    assert out_of_time(40 * 60, 60 * 60, 5 * 60, 15 * 60, validates=True)
    # Wall time alone (the old check) would have started an epoch at 50 min that ends at 70 with validation.
    assert out_of_time(50 * 60, 60 * 60, 5 * 60, 15 * 60, validates=False)
    # Without validation only the next epoch has to fit.
    assert not out_of_time(54 * 60, 60 * 60, 5 * 60, 0.0, validates=False)
    assert out_of_time(56 * 60, 60 * 60, 5 * 60, 0.0, validates=False)
