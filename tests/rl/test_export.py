"""TorchScript export: parity with the eager actor, and rejection of corrupt or mismatched files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from rltuned.errors import ModelLoadError
from rltuned.features import ACTOR_FEATURES, MAX_JOBS
from rltuned.rl.agent import Actor
from rltuned.rl.export import export_actor, git_commit, load_model


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Actor, Path]:
    torch.manual_seed(0)
    actor = Actor()
    for p in actor.net[-1].parameters():  # the output layer starts at zero; parity needs real scores
        torch.nn.init.normal_(p, std=0.5)
    # A fitted input standardization, so parity covers it too.
    actor.fit_input(
        torch.rand(4, MAX_JOBS, ACTOR_FEATURES) * 0.1 + 0.3, torch.ones(4, MAX_JOBS, dtype=torch.bool)
    )
    return actor, export_actor(actor, tmp_path / "m", {"trace": "t", "seed": 0, "training_commit": "abc"})


def test_reloaded_scores_equal_the_eager_models(exported: tuple[Actor, Path]) -> None:
    actor, path = exported
    obs = torch.rand(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[:37] = True
    with torch.no_grad():
        eager = actor(obs, mask)
    assert eager[:37].std() > 0.01  # distinct scores, so parity means something
    assert torch.equal(load_model(path).scores(obs, mask), eager)


def test_a_flipped_byte_is_rejected_by_its_hash(exported: tuple[Actor, Path]) -> None:
    _, path = exported
    data = bytearray((path / "actor.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (path / "actor.pt").write_bytes(bytes(data))
    with pytest.raises(ModelLoadError, match="sha256"):
        load_model(path)


def test_a_feature_list_from_another_version_is_rejected(exported: tuple[Actor, Path]) -> None:
    _, path = exported
    manifest = json.loads((path / "manifest.json").read_text())
    manifest["sampler_version"] = "v0"
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelLoadError, match="sampler_version"):
        load_model(path)


def test_garbage_with_a_matching_hash_is_still_rejected(exported: tuple[Actor, Path]) -> None:
    _, path = exported
    (path / "actor.pt").write_bytes(b"not a torchscript archive")
    manifest = json.loads((path / "manifest.json").read_text())
    import hashlib

    manifest["sha256"] = hashlib.sha256(b"not a torchscript archive").hexdigest()
    (path / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(ModelLoadError, match="TorchScript"):
        load_model(path)


def test_missing_files_and_bad_json_are_clear(tmp_path: Path) -> None:
    with pytest.raises(ModelLoadError, match=r"expected manifest\.json"):
        load_model(tmp_path)
    (tmp_path / "manifest.json").write_text("{")
    (tmp_path / "actor.pt").write_bytes(b"")
    with pytest.raises(ModelLoadError, match="not valid JSON"):
        load_model(tmp_path)


def test_an_unreadable_manifest_is_a_model_error_not_a_crash(
    exported: tuple[Actor, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    _, path = exported

    def refuse(self: Path, *args: object, **kwargs: object) -> str:
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_text", refuse)
    with pytest.raises(ModelLoadError, match=r"manifest\.json: cannot read"):
        load_model(path)


def test_the_rank_prior_is_part_of_the_exported_model(tmp_path: Path) -> None:
    torch.manual_seed(0)
    actor = Actor(rank_prior=0.7)
    obs = torch.rand(MAX_JOBS, ACTOR_FEATURES)
    mask = torch.zeros(MAX_JOBS, dtype=torch.bool)
    mask[:20] = True
    loaded = load_model(export_actor(actor, tmp_path / "m", {"seed": 0, "training_commit": "abc"}))
    scores = loaded.scores(obs, mask)
    with torch.no_grad():
        assert torch.equal(scores, actor(obs, mask))
    # Untrained, the prior alone ranks: the base order, slot 0 first, padding never.
    assert torch.equal(scores[:20].argsort(descending=True), torch.arange(20))
    assert float(scores[:20][0] - scores[:20][1]) == pytest.approx(0.7)


def test_the_recorded_commit_is_the_imported_codes_not_the_working_directorys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A training run started from another directory records the commit of the code it runs."""
    package = Path(__file__).resolve().parents[2] / "rltuned"
    rev = ["git", "rev-parse", "HEAD"]
    head = subprocess.run(rev, check=False, capture_output=True, text=True, cwd=package)
    if head.returncode != 0:
        pytest.skip("not a git checkout")
    monkeypatch.chdir(tmp_path)
    assert git_commit().removesuffix("-dirty") == head.stdout.strip()


def test_a_model_given_the_predicted_runtime_is_served_the_state_it_was_trained_on(tmp_path: Path) -> None:
    """The manifest's `runtime_input` decides what the decision core's state holds (as the training
    environment and validation built it); a value this rltuned does not know is refused at load."""
    from dataclasses import replace

    from rltuned.core.ranking import rank_jobs
    from rltuned.domain import History, peer_key
    from rltuned.features import FEATURE_NAMES
    from rltuned.policies import make_policy
    from rltuned.rl.validation import frozen
    from tests.builders import cluster, job
    from tests.features.snapshots import NOW, snapshot

    jobs = [job(1, NOW - 300, 1, 600, estimate=36_000.0, user="u"), job(2, NOW - 200, 1, 900, user="v")]
    history = History(recent_runtimes={peer_key("u", "", 1): (600.0,)})
    snap = replace(snapshot(cluster(("A", 8, 2)), [8, 4], jobs), history=history)
    rt = FEATURE_NAMES.index("requested_time")
    tables = {}
    for runtime in ("limit", "predicted"):
        model = load_model(
            export_actor(Actor(), tmp_path / runtime, {"base": "psjf", "runtime_input": runtime})
        )
        assert model.runtime_input == runtime
        tables[runtime] = rank_jobs(snap, make_policy("psjf"), model, 1000.0).observation.table
    row = 1  # psjf puts job 1 (predicted 36,000 s -> about 4,700 s) after job 2 (900 s)
    assert tables["predicted"][row, rt] < tables["limit"][row, rt]
    assert frozen(Actor(runtime_input="predicted")).runtime_input == "predicted"
    assert frozen(Actor()).runtime_input == "limit"
    manifest = tmp_path / "predicted" / "manifest.json"
    manifest.write_text(manifest.read_text().replace('"predicted"', '"oracle"'))
    with pytest.raises(ModelLoadError, match="runtime_input is 'oracle'"):
        load_model(tmp_path / "predicted")
