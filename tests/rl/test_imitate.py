"""The imitation warm start: demonstrations are the base policy's run, and cloning learns its rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from rltuned.clusters import load_cluster
from rltuned.domain import Job
from rltuned.errors import UsageError
from rltuned.estimates import apply_estimates
from rltuned.features import ACTOR_FEATURES, MAX_JOBS
from rltuned.policies.loglinear import LogLinear
from rltuned.rl import plackett_luce as pl
from rltuned.rl import ppo
from rltuned.rl.agent import Actor, ActorCritic
from rltuned.rl.env import SchedulingEnv
from rltuned.rl.export import load_model
from rltuned.rl.imitate import clone, demonstrate, sharpen
from rltuned.rl.ppo import IMITATION_SEED_OFFSET, Args, train
from rltuned.rl.rollouts import LocalCollector
from rltuned.rl.splits import train_jobs
from rltuned.rl.tick_env import TickEnv
from rltuned.sim.simulator import SimConfig
from rltuned.sim.ticks import TickSettings
from rltuned.traces import load_trace
from rltuned.traces.bundled import resolve_trace


def exact_jobs(trace: Path) -> list[Job]:
    """The trace has no time limits; with exact estimates the requested time is the runtime."""
    return apply_estimates(load_trace(trace).jobs, "exact", 0)[0]


def env_for(burst: tuple[Path, Path], base: str) -> SchedulingEnv:
    trace, spec = burst
    jobs = train_jobs(exact_jobs(trace))  # what training sees
    return SchedulingEnv(jobs, load_cluster(str(spec)), base, "bsld", 64, SimConfig(backfill=False),
                         reward_mode="dense")  # fmt: skip


def test_a_demonstration_is_the_base_policys_own_run(burst: tuple[Path, Path]) -> None:
    demo = demonstrate(env_for(burst, "sjf"), episodes=3, seed=0, gamma=0.99)
    assert demo.gaps == (0.0, 0.0, 0.0)  # agent and base scored alike on every window
    assert len(demo.actor) == len(demo.mask) == len(demo.critic) == len(demo.returns) > 3 * 10
    assert bool(demo.mask[:, 0].all())  # every decision had the base's choice in slot 0
    assert float(demo.returns.max()) <= 0.0 < -float(demo.returns.min())  # waiting only costs


def sampled_gap(agent: ActorCritic, env: SchedulingEnv, episodes: int) -> float:
    """Mean normalized gap to the base of the policy PPO would sample (negative: worse than the base)."""
    return float(np.mean(LocalCollector(env).collect(agent, range(100, 100 + episodes)).episode_rewards))


def tiny_args(burst: tuple[Path, Path], out: Path, **overrides: Any) -> Args:
    """A warm-started SJF run on the burst trace, small enough for a unit test."""
    trace, spec = burst
    return Args(**{"trace": str(trace), "cluster": str(spec), "base": "sjf", "metric": "bsld",
                   "estimates": "exact", "backfill": False, "window": 64, "warmup": 0, "seed": 0,
                   "out": str(out), "epochs": 1, "reward": "dense", "loop": "paper",
                   **overrides})  # fmt: skip


@pytest.mark.slow
def test_cloning_starts_ppo_sampling_next_to_the_base_instead_of_uniform(burst: tuple[Path, Path]) -> None:
    """The point of the warm start: the policy PPO samples schedules about as well as SJF (the
    deployed argmax of an untrained actor is SJF too, but its samples are uniform over the queue)."""
    torch.manual_seed(0)
    env = env_for(burst, "sjf")
    demo = demonstrate(env, episodes=12, seed=0, gamma=0.99)
    cloned, uniform = ActorCritic(), ActorCritic()
    cloned.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
    stats = clone(cloned, demo, steps=300, lr=3e-3, ranks=False)
    assert stats["imitation_top1"] > 0.9, stats
    assert stats["imitation_entropy"] < 0.5, stats  # uniform over ~20 queued jobs: about 3 nats
    uniform_gap, cloned_gap = sampled_gap(uniform, env, 4), sampled_gap(cloned, env, 4)
    assert uniform_gap < -0.2, uniform_gap  # a uniform sampler is far behind SJF here
    assert cloned_gap > -0.05, cloned_gap


def test_training_with_a_warm_start_records_it_and_keeps_the_cloned_input_scaling(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """The standardization is fitted on the demonstrations; refitting it on PPO's first batch would
    silently change the function the actor had just learned."""
    args = tiny_args(burst, tmp_path / "m", episodes_per_epoch=2, imitate_episodes=3, imitate_steps=100)
    model = load_model(train(args))
    m = model.manifest
    assert m["imitate_episodes"] == 3 and m["imitation_decisions"] > 30
    assert m["imitation_top1"] > 0.9 and 0 < m["imitation_wall_s"] <= m["training_wall_s"]
    demo = demonstrate(env_for(burst, "sjf"), episodes=3, seed=IMITATION_SEED_OFFSET, gamma=0.99)
    fitted = Actor()
    fitted.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
    constants = [n.output().toIValue() for n in model.module.graph.nodes() if n.kind() == "prim::Constant"]
    tensors = [c for c in constants if isinstance(c, torch.Tensor) and c.shape == (ACTOR_FEATURES,)]
    assert any(torch.allclose(t, fitted.in_scale) for t in tensors)


def test_a_resumed_warm_started_run_keeps_the_imitation_record(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """The imitation runs once, before the first epoch; a resumed run must still say it happened."""
    run: dict[str, Any] = {"episodes_per_epoch": 1, "imitate_episodes": 2, "imitate_steps": 20}
    first = load_model(train(tiny_args(burst, tmp_path / "m", **run))).manifest
    assert first["slots"] == "gpus"  # what the daemon checks against slurm.slots
    resumed = load_model(train(tiny_args(burst, tmp_path / "m", **run, epochs=2, resume=True))).manifest
    assert resumed["epochs_done"] == 2
    for key in ("imitation_top1", "imitation_decisions", "imitation_wall_s", "training_commit"):
        assert resumed[key] == first[key], key


def test_a_run_that_stopped_on_its_budget_resumes_to_nothing_unless_given_more(
    tmp_path: Path, burst: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Resuming a finished run (e.g. a queue script run twice) must not train past the budget it had.
    The run stops at epoch 2 because one more epoch would not fit, with its wall time still inside."""
    monkeypatch.setattr(ppo, "out_of_time", lambda wall_s, *_: wall_s > 0 and ppo_epochs(tmp_path) >= 1)
    run: dict[str, Any] = {"episodes_per_epoch": 1, "epochs": 5, "minutes": 60.0}
    assert load_model(train(tiny_args(burst, tmp_path / "m", **run))).manifest["epochs_done"] == 2
    monkeypatch.setattr(ppo, "out_of_time", lambda *_: False)
    again = load_model(train(tiny_args(burst, tmp_path / "m", **run, resume=True))).manifest
    assert again["epochs_done"] == 2
    more = load_model(train(tiny_args(burst, tmp_path / "m", **{**run, "minutes": 61.0}, resume=True)))
    assert more.manifest["epochs_done"] == 5


def ppo_epochs(root: Path) -> int:
    """Epochs already in the run's curve (written after each epoch, before the next one's budget check)."""
    curve = root / "m" / "curve.json"
    return len(json.loads(curve.read_text())) if curve.is_file() else 0


def test_a_resumed_run_ships_the_best_actor_its_validation_record_describes(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """After a crash, best.pt can come from an epoch after the last checkpoint, whose validation record
    the resumed run no longer has: resuming puts back the best actor the checkpoint knew, and ships it."""
    run: dict[str, Any] = {"episodes_per_epoch": 1, "epochs": 2, "validate_every": 1,
                           "validation_window": 64}  # fmt: skip
    first = load_model(train(tiny_args(burst, tmp_path / "m", **run)))
    best = tmp_path / "m" / "best.pt"
    recorded = torch.load(best, weights_only=True)
    torch.save({k: v + 1.0 for k, v in recorded.items()}, best)  # a later best whose record was lost
    resumed = load_model(train(tiny_args(burst, tmp_path / "m", **run, resume=True)))
    assert resumed.manifest["validation"] == first.manifest["validation"]
    obs = torch.rand(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[:30] = True
    assert torch.equal(resumed.scores(obs, mask), first.scores(obs, mask))


def test_a_resume_must_validate_on_the_windows_and_draws_its_run_chose_on(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """The best actor's gap was measured on one validation; another would make the next gaps incomparable."""
    run: dict[str, Any] = {"episodes_per_epoch": 1, "validate_every": 1, "estimates": "qssf-noise",
                           "validation_window": 64, "validation_estimate_seeds": 2}  # fmt: skip
    first = load_model(train(tiny_args(burst, tmp_path / "m", **run))).manifest
    assert first["validation_setup"] == {"window": 64, "draws": 2, "estimates_seed": 0}
    again = {**run, "validation_estimate_seeds": 3}
    with pytest.raises(UsageError, match="resume with its --validation-window, --validation-estimate-seeds"):
        train(tiny_args(burst, tmp_path / "m", **again, epochs=2, resume=True))
    assert (
        load_model(train(tiny_args(burst, tmp_path / "m", **run, epochs=2, resume=True))).manifest[
            "epochs_done"
        ]
        == 2
    )


def test_a_teacher_is_cloned_instead_of_the_base(tmp_path: Path) -> None:
    """With a teacher the demonstrations are its run (each decision's target its ranking of the rows,
    which sit in the base's order) and the clone learns its rule, not the base's slot order."""
    jobs, _ = apply_estimates(load_trace(resolve_trace("philly")).jobs, "qssf-noise", 0)
    env = TickEnv(list(jobs[20_000:20_600]), load_cluster("philly-slice"), TickSettings(base="sjf"), "bsld",
                  window=200, warmup=200, reward_mode="dense")  # fmt: skip
    teacher = LogLinear(0.0, 1.0, 600.0)  # limit over wait: far from SJF's slot order
    torch.manual_seed(0)
    demo = demonstrate(env, episodes=2, seed=0, gamma=0.99, teacher=teacher, keys=True)
    assert demo.actions is not None and len(demo.actions) == len(demo.actor)
    moved = float((demo.actions[:, 0] != 0).mean())
    assert moved > 0.1, moved  # the teacher's first choice is often not the base's
    assert demo.keys is not None  # its scores, for a clone that regresses on them: they rank as it does
    for keys, mask, ranking in zip(demo.keys, demo.mask, demo.actions, strict=True):
        ranked = keys[ranking[: int(mask.sum())]]
        assert (np.diff(ranked) <= 0).all() and (keys[~mask] == 0).all()
    agent = ActorCritic()
    agent.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
    stats = clone(agent, demo, steps=300, lr=3e-3, ranks=True)
    assert stats["imitation_top1"] > 0.8, stats  # agreement with the teacher's first choice
    with torch.no_grad():
        first = agent.actor(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask)).argmax(-1)
    assert float((first == 0).float().mean()) < 1 - moved / 2  # it did not learn the base's order


def test_a_teacher_needs_the_daemons_loop(burst: tuple[Path, Path], tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="--imitate-teacher"):
        tiny_args(burst, tmp_path, imitate_episodes=2, imitate_teacher="loglinear:b=0,c=1,w0=600").check()
    with pytest.raises(UsageError, match="w0 must be > 0"):
        tiny_args(
            burst, tmp_path, loop="ticks", imitate_episodes=2, imitate_teacher="loglinear:b=0,c=1,w0=0"
        ).check()
    with pytest.raises(UsageError, match="needs the daemon"):
        demonstrate(env_for(burst, "sjf"), 1, 0, 0.99, LogLinear(0.0, 0.0, 1.0))


def test_the_clone_is_validated_before_ppo_and_can_be_the_checkpoint_that_ships(
    tmp_path: Path, burst: tuple[Path, Path]
) -> None:
    """PPO's first updates can move a good clone away from what it copied; the clone's own validation
    is the epoch-0 candidate, so the best-on-validation rule can keep it."""
    run: dict[str, Any] = {"episodes_per_epoch": 1, "epochs": 2, "validate_every": 1, "validation_window": 64,
                           "imitate_episodes": 2, "imitate_steps": 50}  # fmt: skip
    manifest = load_model(train(tiny_args(burst, tmp_path / "m", **run))).manifest
    cloned = manifest["imitation_validation"]
    assert cloned["val/base_score"] == pytest.approx(float(np.mean(manifest["validation_base_scores"])))
    curve = json.loads((tmp_path / "m" / "curve.json").read_text())
    gaps = {0: cloned["val/gap"], **{int(r["epoch"]): r["val/gap"] for r in curve}}
    chosen = manifest["validation"]
    assert chosen["gap"] == max(gaps.values()) and gaps[chosen["epoch"]] == chosen["gap"]


def test_sharpening_the_clone_keeps_the_served_ranking_and_narrows_what_ppo_samples(
    burst: tuple[Path, Path],
) -> None:
    """The clone's argsort is what the daemon would serve before PPO's first step; sharpening must not
    move it, only bring the sampled rankings closer to it (lower first-draw entropy, more samples
    equal to the argsort's head)."""
    torch.manual_seed(0)
    demo = demonstrate(env_for(burst, "sjf"), episodes=4, seed=0, gamma=0.99)
    agent = ActorCritic()
    agent.actor.fit_input(torch.from_numpy(demo.actor), torch.from_numpy(demo.mask))
    stats = clone(agent, demo, steps=100, lr=3e-3, ranks=False)
    actor, mask = torch.from_numpy(demo.actor), torch.from_numpy(demo.mask)
    with torch.no_grad():
        before = agent.actor(actor, mask)
    same = sharpen(agent, 1.0, demo)
    assert same["imitation_entropy_sharpened"] == pytest.approx(stats["imitation_entropy"])
    with torch.no_grad():
        assert torch.equal(agent.actor(actor, mask), before)  # 1.0: the weights as they were
    sharper = sharpen(agent, 4.0, demo)
    with torch.no_grad():
        after = agent.actor(actor, mask)
    assert torch.equal(pl.mode(after, mask), pl.mode(before, mask))
    assert sharper["imitation_entropy_sharpened"] < 0.5 * stats["imitation_entropy"], (stats, sharper)
    draws = torch.Generator().manual_seed(1)
    heads = [pl.sample(s, mask, draws)[:, 0] for s in (before, after)]
    mode_head = pl.mode(before, mask)[:, 0]
    assert (heads[1] == mode_head).float().mean() > (heads[0] == mode_head).float().mean()


def test_sharpening_needs_a_clone_and_no_rank_prior_and_the_manifest_records_it(
    burst: tuple[Path, Path], tmp_path: Path
) -> None:
    with pytest.raises(UsageError, match="--imitate-sharpen"):
        tiny_args(burst, tmp_path, imitate_sharpen=2.0).check()
    with pytest.raises(UsageError, match="--imitate-sharpen"):
        tiny_args(burst, tmp_path, imitate_sharpen=2.0, imitate_episodes=2, rank_prior=1.0).check()
    with pytest.raises(UsageError, match="--imitate-sharpen must be > 0"):
        tiny_args(burst, tmp_path, imitate_sharpen=0.0).check()
    args = tiny_args(burst, tmp_path / "m", imitate_sharpen=3.0, imitate_episodes=2, imitate_steps=50,
                     episodes_per_epoch=1)  # fmt: skip
    m = load_model(train(args)).manifest
    assert m["imitate_sharpen"] == m["imitation_sharpen"] == 3.0  # the recipe, and what ran
    assert m["imitation_entropy_sharpened"] < m["imitation_entropy"]
