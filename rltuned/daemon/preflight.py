"""What `rltuned --check-config` checks beyond the file's structure: the things start-up would trip on.

Each problem is one line naming the config key, as a structural error is; the first one raises.
"""

from __future__ import annotations

import os
from pathlib import Path

from rltuned.daemon.config import Settings
from rltuned.daemon.control import _group_id, _user_id
from rltuned.daemon.ledger import Ledger
from rltuned.daemon.service import check_backend, check_model_base, check_readable_base
from rltuned.errors import ConfigError, ModelLoadError
from rltuned.rl.export import load_model


def check(settings: Settings) -> list[str]:
    """Raise ConfigError on the first problem; return what was checked, for the summary line."""
    checked: list[str] = []
    check_readable_base(settings.policy.base)
    checked.append(f"base {settings.policy.base}")
    if not settings.placing:  # said, since [placement]'s levers may be set and are not pulled
        checked.append("cores as slots (placement levers off)")
    c = settings.control
    if c.group:
        _group_id(c.group)
    if c.admin_group:
        _group_id(c.admin_group, "control.admin_group")
    if c.owner:
        _user_id(c.owner)
    checked.append("control socket owner/group")
    check_backend(settings)
    state_dir = settings.daemon.state_dir
    if not _writable(state_dir):
        raise ConfigError(f"daemon.state_dir: {state_dir} cannot be created or written by this user")
    Ledger.in_dir(state_dir)  # an unreadable ledger is a ConfigError naming the file
    checked.append("state_dir")
    if settings.policy.model is not None:
        try:
            model = load_model(settings.policy.model, settings.policy.engine)
            check_model_base(model, settings.policy, settings.slurm.slots, settings.guard.served_promote_to())
        except ModelLoadError as exc:
            raise ConfigError(f"policy.model: {exc}") from None
        manifest = model.manifest
        checked.append(f"model {manifest.get('trace')}/{manifest.get('base')}/{manifest.get('metric')}")
    return checked


def _writable(path: Path) -> bool:
    """The directory exists and is writable, or its nearest existing parent is (start-up creates it)."""
    probe = path
    while not probe.exists():
        if probe.parent == probe:
            return False
        probe = probe.parent
    return probe.is_dir() and os.access(probe, os.W_OK | os.X_OK)
