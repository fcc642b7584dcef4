"""Frozen TorchScript export of the actor, with a JSON manifest beside it, and verified loading.

A model is a directory: `actor.pt` (TorchScript, `forward(obs [256, 8] float32, mask [256] bool) ->
scores [256]`) and `manifest.json` (schema version, features and sampler version, what it was trained on,
the training commit and seed, and the sha256 of `actor.pt`). Loading checks the manifest first, then the
hash, and only then lets TorchScript read the file; TorchScript archives hold code and tensors, not
pickled Python objects, so nothing arbitrary is unpickled.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import warnings
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from rltuned.clusters import load_cluster
from rltuned.domain import SLOT_KINDS
from rltuned.errors import ModelLoadError, RltunedError
from rltuned.features import ACTOR_FEATURES, FEATURE_NAMES, LIMIT, MAX_JOBS, RUNTIME_INPUTS, SAMPLER_VERSION
from rltuned.rl import ENGINES
from rltuned.rl.actor_kernel import ActorKernel, kernel_of

SCHEMA_VERSION = 1
ACTOR_FILE = "actor.pt"
MANIFEST_FILE = "manifest.json"


@dataclass(frozen=True)
class LoadedModel:
    module: torch.jit.ScriptModule
    manifest: dict[str, Any]
    path: Path
    kernel: ActorKernel | None = None
    """The module's forward pass compiled (`rl/actor_kernel.py`), when its graph is the Actor's and the
    kernel was checked against it; `score_rows` runs it instead of the TorchScript interpreter."""

    def scores(self, obs: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """The TorchScript module's forward pass."""
        with torch.inference_mode():
            out: torch.Tensor = self.module(obs, mask)
        return out

    def score_rows(
        self, actor: npt.NDArray[np.float32], mask: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.float64]:
        """The scores every decision ranks by: the kernel's when there is one, else the module's."""
        if self.kernel is not None:
            return self.kernel.scores(actor, mask)
        out = self.scores(torch.from_numpy(np.array(actor)), torch.from_numpy(np.array(mask)))
        return out.detach().numpy().astype(np.float64)  # through `scores`, which a subclass may wrap

    @property
    def runtime_input(self) -> str:
        """What its state's `requested_time` column holds (`features.RUNTIME_INPUTS`; models from
        before the choice hold the limit)."""
        return str(self.manifest.get("runtime_input", LIMIT))

    @property
    def engine(self) -> str:
        """What runs the forward pass: "compiled" or "torchscript" (logged at load, in status)."""
        return "torchscript" if self.kernel is None else "compiled"


def loaded(
    module: torch.jit.ScriptModule, manifest: dict[str, Any], path: Path, engine: str = "compiled"
) -> LoadedModel:
    """A LoadedModel served by `engine` (`ENGINES`): with its compiled kernel when the module's graph
    allows one and `engine` is "compiled"."""
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; choose from {', '.join(ENGINES)}")
    return LoadedModel(module, manifest, path, kernel_of(module) if engine == "compiled" else None)


def export_actor(actor: nn.Module, out_dir: Path, info: dict[str, Any]) -> Path:
    """Script, freeze and save the actor; write the manifest with its hash. Returns the model directory."""
    out_dir.mkdir(parents=True, exist_ok=True)
    actor = actor.eval()
    path = out_dir / ACTOR_FILE
    tmp = path.with_suffix(".tmp")
    with quiet_torchscript():
        torch.jit.save(torch.jit.freeze(torch.jit.script(actor)), str(tmp))
    tmp.replace(path)
    manifest = {
        "schema_version": SCHEMA_VERSION,
        "kind": "rltuned-actor",
        "features": list(FEATURE_NAMES),
        "actor_features": ACTOR_FEATURES,
        "max_jobs": MAX_JOBS,
        "sampler_version": SAMPLER_VERSION,
        "training_commit": info.pop("training_commit", None) or git_commit(),
        **info,
        "sha256": sha256(path),
    }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2, sort_keys=True) + "\n")
    return out_dir


def trained_slots(manifest: Mapping[str, Any]) -> str | None:
    """What the model's slots were (`ClusterSpec.slots`): the manifest's `slots`, else its training
    cluster's, when that cluster is a preset or a file this machine has; None when unknown."""
    slots = manifest.get("slots")
    if slots in SLOT_KINDS:
        return str(slots)
    cluster = manifest.get("cluster")
    if not isinstance(cluster, str) or not cluster:
        return None
    try:
        return load_cluster(cluster).slots
    except RltunedError:
        return None


def load_model(model_dir: str | Path, engine: str = "compiled") -> LoadedModel:
    """Load and verify a model directory; every failure is a ModelLoadError that says what is wrong."""
    root = Path(model_dir)
    try:
        return _load(root, engine)
    except OSError as exc:  # unreadable (permissions, I/O): as much a bad model file as a corrupt one
        raise ModelLoadError(f"{exc.filename or root}: cannot read ({exc.strerror or exc})") from None


def _load(root: Path, engine: str) -> LoadedModel:
    manifest_path, actor_path = root / MANIFEST_FILE, root / ACTOR_FILE
    if not manifest_path.is_file() or not actor_path.is_file():
        raise ModelLoadError(f"{root}: expected {MANIFEST_FILE} and {ACTOR_FILE} in the model directory")
    try:
        manifest = json.loads(manifest_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ModelLoadError(f"{manifest_path}: not valid JSON ({exc})") from None
    if not isinstance(manifest, dict):
        raise ModelLoadError(f"{manifest_path}: expected a JSON object")
    _check_manifest(manifest, manifest_path)
    digest = sha256(actor_path)
    if digest != manifest.get("sha256"):
        raise ModelLoadError(f"{actor_path}: sha256 {digest[:12]}... does not match the manifest's")
    try:
        with quiet_torchscript():
            module = torch.jit.load(str(actor_path), map_location="cpu")
    except (RuntimeError, ValueError) as exc:
        raise ModelLoadError(
            f"{actor_path}: not a loadable TorchScript file ({str(exc).splitlines()[0]})"
        ) from None
    model = loaded(module, manifest, root, engine)
    _check_forward(model)
    return model


def _check_manifest(manifest: dict[str, Any], where: Path) -> None:
    expected = {
        "schema_version": SCHEMA_VERSION,
        "features": list(FEATURE_NAMES),
        "sampler_version": SAMPLER_VERSION,
        "actor_features": ACTOR_FEATURES,
        "max_jobs": MAX_JOBS,
    }
    for key, value in expected.items():
        if manifest.get(key) != value:
            raise ModelLoadError(f"{where}: {key} is {manifest.get(key)!r}, this rltuned expects {value!r}")
    runtime = manifest.get("runtime_input", LIMIT)
    if runtime not in RUNTIME_INPUTS:
        raise ModelLoadError(
            f"{where}: runtime_input is {runtime!r}, this rltuned knows {', '.join(RUNTIME_INPUTS)}"
        )


def _check_forward(model: LoadedModel) -> None:
    obs = torch.zeros(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[0] = True
    try:
        out = model.scores(obs, mask)
    except RuntimeError as exc:
        raise ModelLoadError(f"{model.path}: forward pass failed ({str(exc).splitlines()[0]})") from None
    if tuple(out.shape) != (MAX_JOBS,) or not torch.isfinite(out[0]):
        raise ModelLoadError(f"{model.path}: forward pass returned shape {tuple(out.shape)}, expected (256,)")


def probe_scores(model: LoadedModel, probes: int = 16) -> torch.Tensor:
    """The actor's scores on a fixed set of inputs (features in [0, 1], 1-256 real jobs): equal for
    actors with equal weights, and almost surely different otherwise. An exported actor is frozen, its
    weights folded into the graph as constants, so its `state_dict()` is empty and cannot be compared."""
    generator = torch.Generator().manual_seed(0)
    rows = []
    for k in range(probes):
        obs = torch.rand(MAX_JOBS, ACTOR_FEATURES, generator=generator)
        mask = torch.arange(MAX_JOBS) < max(1, (k + 1) * MAX_JOBS // probes)
        rows.append(model.scores(obs, mask))
    return torch.stack(rows)


@contextmanager
def quiet_torchscript() -> Iterator[None]:
    """torch 2.13 marks torch.jit deprecated in favour of torch.export; TorchScript is still the format the
    daemon loads (a self-contained, Python-free archive), so the warnings are silenced here only."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def git_commit() -> str:
    """The commit the code was trained from, marked dirty if the tree had changes. Asked of the
    checkout this package was imported from, not the working directory's (a run started elsewhere, or
    from a worktree on PYTHONPATH, would record another tree's commit)."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5, check=True, cwd=here
        )
        dirty = subprocess.run(
            ["git", "status", "--porcelain"], capture_output=True, text=True, timeout=5, check=True, cwd=here
        )
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev.stdout.strip() + ("-dirty" if dirty.stdout.strip() else "")
