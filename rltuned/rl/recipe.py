"""A model's recipe: the training flags its manifest recorded, so that it can be trained again.

`ppo.train` writes every `Args` field but `out`, `resume` and `extra` into the manifest, so a manifest
is the recipe of its model. Two uses: checking that today's code still trains what ships (the same
recipe and epochs give the same actor, bit for bit: tests/rl/test_recipe.py retrains a shipped model),
and training on another trace or cluster with a recipe that worked (`rltunectl train --recipe MODEL
--trace ... --cluster ... --slurm-config ... --out ...`; any flag given overrides the recipe). A run
from the command line trains in today's Slurm model (Slurm 22.05's defaults, or `--slurm-config`'s);
the manifest's own (`slurm_params`), which for older models is a less faithful one, is what
`Recipe.extra` gives a run that must train exactly as the recorded one did.

Kept free of torch, like args.py: the command line reads it.
"""

from __future__ import annotations

import dataclasses
import json
import typing
from pathlib import Path
from typing import Any

from rltuned.dataclass_cli import scalar_type
from rltuned.errors import UsageError
from rltuned.rl.args import Args

NOT_RECIPE = ("out", "resume", "extra")
"""Args fields that say where and how a run writes, not what it trains."""


@dataclasses.dataclass(frozen=True, slots=True)
class Recipe:
    fields: dict[str, Any]
    """Args values the manifest recorded."""
    unrecorded: tuple[str, ...]
    """Args fields the manifest does not record (a model trained before they existed): they take
    today's defaults, which a retrained actor identical to the shipped one shows to be what that run
    did."""
    epochs_done: int | None
    """Epochs the recorded run trained: with its time budget (`minutes`), a faster machine trains more
    of them, so retraining the same actor also gives `--epochs` this."""
    slurm_params: dict[str, Any] | None
    """The Slurm model the run trained in (`sim/slurm_config.params_record`), older ones included."""

    def extra(self) -> dict[str, Any]:
        """`Args.extra` for a run in the recorded Slurm model (`ppo.tick_settings` reads it)."""
        return {"slurm_params": self.slurm_params} if self.slurm_params is not None else {}

    def in_default_slurm(self) -> bool:
        """Whether the recorded Slurm model is today's default one (backfill aside: `--backfill`
        sets it either way)."""
        from rltuned.sim.slurm import SlurmParams
        from rltuned.sim.slurm_config import params_from_record

        if self.slurm_params is None:
            return True
        return dataclasses.replace(params_from_record(self.slurm_params), backfill=True) == SlurmParams()


def read_recipe(path: str | Path) -> Recipe:
    """The recipe in a model directory's manifest.json (or that file itself)."""
    file = Path(path)
    if file.is_dir():
        file = file / "manifest.json"
    try:
        manifest = json.loads(file.read_text())
    except OSError as exc:
        raise UsageError(f"--recipe {path}: cannot read {file} ({exc.strerror or exc})") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"--recipe {path}: {file} is not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise UsageError(f"--recipe {path}: {file} is not a JSON object")
    hints = typing.get_type_hints(Args)
    fields: dict[str, Any] = {}
    unrecorded: list[str] = []
    for f in dataclasses.fields(Args):
        if f.name in NOT_RECIPE:
            continue
        if f.name not in manifest:
            unrecorded.append(f.name)
            continue
        value, kind = manifest[f.name], scalar_type(hints[f.name], f.name)
        optional = kind is not hints[f.name]
        if not _fits(value, kind, optional):
            expected = f"{'null or ' if optional else ''}{kind.__name__}"
            raise UsageError(f"--recipe {path}: {file} key {f.name!r} = {value!r} is not {expected}")
        fields[f.name] = float(value) if kind is float and value is not None else value
    done = manifest.get("epochs_done")
    slurm = manifest.get("slurm_params")
    if slurm is not None and not isinstance(slurm, dict):
        raise UsageError(f"--recipe {path}: {file} key 'slurm_params' is not a JSON object")
    return Recipe(fields, tuple(unrecorded), done if isinstance(done, int) else None, slurm)


def _fits(value: Any, kind: type, optional: bool) -> bool:
    if value is None:
        return optional
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if kind is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, kind)
