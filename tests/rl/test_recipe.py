"""A manifest is its model's recipe: training again from it gives the shipped actor, bit for bit."""

from __future__ import annotations

import csv
import json
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from rltuned.cli import _training_args, build_parser, main
from rltuned.errors import UsageError
from rltuned.rl.args import Args
from rltuned.rl.recipe import read_recipe

MODELS = Path(__file__).parents[2] / "models"
WAGAP_SEED2 = MODELS / "wagap-fcfs-bsld-ticks" / "seeds" / "seed2"


def parsed(*argv: str) -> Args:
    return _training_args(build_parser().parse_args(["train", *argv]))


def test_a_recipe_gives_the_recorded_flags_and_flags_given_override_them(tmp_path: Path) -> None:
    manifest = json.loads((WAGAP_SEED2 / "manifest.json").read_text())
    args = parsed("--recipe", str(WAGAP_SEED2), "--out", str(tmp_path), "--seed", "7")
    assert (args.trace, args.cluster, args.base, args.refresh_s) == ("wagap", "wagap-slice", "fcfs", 600.0)
    assert (args.num_minibatches, args.gamma, args.validation_score) == (16, 0.99, "per_window")
    assert args.seed == 7 and manifest["seed"] == 2
    assert args.out == str(tmp_path) and args.extra == {}  # where a run writes is never the recipe's
    # A flag given with the default's own value still overrides the recipe (the run recorded 1 worker).
    assert manifest["workers"] == 1 and Args.workers == 0
    assert parsed("--recipe", str(WAGAP_SEED2), "--out", "o", "--workers", "0").workers == 0
    assert parsed("--recipe", str(WAGAP_SEED2), "--out", "o").workers == 1


def test_the_command_line_trains_a_recipe_in_today_s_slurm_model_and_a_reproduction_in_the_recorded_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A model trained before submits waited for Slurm's background pass (its manifest's Slurm model
    has no `event_pass`, as `itp-fcfs-bsld-ticks`'s had until it was retrained). `--recipe` trains in
    today's default Slurm model (or `--slurm-config`'s) and says that the recipe's run did not;
    `Recipe.extra()` gives the recorded one, for a run that must train exactly as that one did."""
    from rltuned.rl.ppo import tick_settings
    from rltuned.sim.slurm import SlurmParams
    from rltuned.sim.slurm_config import params_from_record

    manifest = json.loads((MODELS / "itp-fcfs-bsld-ticks" / "manifest.json").read_text())
    del manifest["slurm_params"]["event_pass"]
    model = tmp_path / "older"
    model.mkdir()
    (model / "manifest.json").write_text(json.dumps(manifest))
    recorded = manifest["slurm_params"]
    assert tick_settings(parsed("--recipe", str(model), "--out", "o")).slurm == SlurmParams()
    assert "an older Slurm model" in capsys.readouterr().err
    reproduction = replace(parsed("--recipe", str(model), "--out", "o"), extra=read_recipe(model).extra())
    slurm = tick_settings(reproduction).slurm
    assert slurm == params_from_record(recorded) and slurm.event_pass == "at_once" != SlurmParams().event_pass
    config = tmp_path / "show-config.txt"
    config.write_text("SchedulerType = sched/backfill\nSchedulerParameters = bf_interval=90\n")
    given = tick_settings(parsed("--recipe", str(model), "--out", "o", "--slurm-config", str(config))).slurm
    assert given.bf_interval_s == 90.0 and given.event_pass == SlurmParams().event_pass
    capsys.readouterr()
    parsed("--recipe", str(WAGAP_SEED2), "--out", "o")
    assert "older Slurm model" not in capsys.readouterr().err  # wagap trained in today's


def test_without_a_recipe_the_required_flags_are_named(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(UsageError, match="missing --trace, --cluster"):
        parsed("--out", "o")
    with pytest.raises(UsageError, match="missing --out"):
        parsed("--recipe", str(WAGAP_SEED2))
    with pytest.raises(SystemExit) as exit_:
        main(["train", "--trace", "philly", "--out", "o"])
    assert exit_.value.code == 2 and "missing --cluster" in capsys.readouterr().err


def test_a_bad_recipe_names_its_file_and_key(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps({"trace": "philly", "window": "1024"}))
    with pytest.raises(UsageError, match=r"manifest.json key 'window' = '1024'"):
        read_recipe(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    with pytest.raises(UsageError, match="not valid JSON"):
        read_recipe(tmp_path)
    with pytest.raises(UsageError, match="cannot read"):
        read_recipe(tmp_path / "absent")


def test_the_probe_tells_shipped_actors_apart_and_a_reload_from_itself() -> None:
    """The check below compares actors by their scores on a fixed probe: it must see a difference
    between two seeds of one recipe, and none between two loads of one file."""
    from rltuned.rl.export import load_model, probe_scores

    seed2, seed3 = load_model(WAGAP_SEED2), load_model(WAGAP_SEED2.parent / "seed3")
    assert torch.equal(probe_scores(seed2), probe_scores(load_model(WAGAP_SEED2)))
    assert not torch.equal(probe_scores(seed2), probe_scores(seed3))
    assert bool(torch.isfinite(probe_scores(seed2)[:, 0]).all())


def test_every_shipped_manifest_is_a_recipe_today_s_args_accept() -> None:
    for manifest in sorted(MODELS.glob("**/manifest.json")):
        recipe = read_recipe(manifest)
        replace(Args(), **recipe.fields).check()
        assert recipe.epochs_done is not None and recipe.epochs_done >= 1


ROUNDED = ("losses/policy_loss", "losses/value_loss", "losses/entropy", "losses/explained_variance")
"""PPO's losses: float32 sums whose rounding follows the host's BLAS kernels (MKL picks them by CPU)."""


def curve(run: Path) -> list[dict[str, str]]:
    with (run / "curve.csv").open() as handle:
        return list(csv.DictReader(handle))


@pytest.mark.slow
def test_retraining_a_shipped_model_from_its_recipe_gives_the_same_run(tmp_path: Path) -> None:
    """The wagap model's second seed, whose validation chose epoch 2: today's simulator, features,
    sampling and PPO must train the run that shipped. Every rollout figure of both epochs (rewards, both
    sides' scores, decisions: the simulator, the state, the Plackett-Luce draws and the reward) is
    required exactly, and PPO's losses to float32 rounding: the update's sums round by the host's BLAS
    kernels, so the trained weights, and the validation score an argsort of them gives, are the shipped
    ones only on the kind of CPU the run was made on (on an AMD EPYC with AVX-512 the second update's
    policy loss reads 0.300002 against the recorded 0.299991, and validation 155.48 against 167.47;
    docs/training.md). One worker: the batch is the same for any number."""
    from rltuned.rl.export import load_model
    from rltuned.rl.ppo import train

    shipped = load_model(WAGAP_SEED2)
    args = parsed("--recipe", str(WAGAP_SEED2), "--out", str(tmp_path), "--epochs", "2", "--workers", "1")
    assert read_recipe(WAGAP_SEED2).in_default_slurm()  # so the command line's run is the recorded one
    retrained = load_model(train(args))
    assert shipped.manifest["validation"]["epoch"] == retrained.manifest["validation"]["epoch"] == 2
    assert retrained.manifest["validation"]["base_score"] == shipped.manifest["validation"]["base_score"]
    recorded, again = curve(WAGAP_SEED2)[:2], curve(tmp_path)
    assert len(again) == 2
    for old, new in zip(recorded, again, strict=True):
        rollouts = [k for k in old if k.startswith("charts/")]
        assert len(rollouts) == 4 and all(new[k] == old[k] for k in rollouts), (old, new)
        assert new["update_epochs"] == old["update_epochs"]
        for k in ROUNDED:
            assert float(new[k]) == pytest.approx(float(old[k]), rel=1e-3), k
