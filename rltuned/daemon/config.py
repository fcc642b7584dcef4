"""The daemon's configuration: one TOML file (`/etc/rltuned/rltuned.toml`), overridable from the environment.

pydantic-settings reads the file and `RLTUNED_<SECTION>__<KEY>` variables (environment wins over the
file); every section forbids unknown keys, so a typo fails at start-up instead of being ignored. Any
problem becomes one `ConfigError` line naming the key (exit 78, EX_CONFIG). `etc/rltuned.toml` is the
documented sample and a test fixture.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from rltuned.core import CoreSettings, Lever
from rltuned.core.guard import HEAD, GuardSettings, PromoteTo
from rltuned.core.levers import LeverSpec, enabled
from rltuned.errors import ConfigError
from rltuned.placement.milp import MilpConfig
from rltuned.policies import POLICIES
from rltuned.rl import Engine

DEFAULT_PATH = Path("/etc/rltuned/rltuned.toml")
ENV_PREFIX = "RLTUNED_"


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class SlurmSettings(_Section):
    backend: Literal["auto", "cli", "pyslurm"] = "auto"
    """cli runs squeue/sinfo/scontrol; pyslurm needs a pyslurm built for this Slurm; auto tries pyslurm."""
    conf: Path | None = None
    """SLURM_CONF for the commands (default: Slurm's own lookup)."""
    bin_dir: Path | None = None
    """Where squeue, sinfo and scontrol live (default: PATH)."""
    command_timeout_s: float = Field(10.0, gt=0)
    """A Slurm command slower than this counts as slurmctld unreachable."""
    exempt_partitions: tuple[str, ...] = ()
    """SLA-bound partitions whose jobs are left to Slurm's own priorities."""
    exempt_qos: tuple[str, ...] = ()
    """SLA-bound QOS whose jobs are left alone."""
    cluster_name: str = "slurm"
    slots: Literal["gpus", "cpus"] = "gpus"
    """What the model's slots are: GPUs (GRES), or CPU cores for a model trained on an HPC log (a CPU
    cluster: jobs without GPUs are managed too and ask for their CPUs; the placement levers are off;
    docs/slurm.md)."""
    history_interval_s: float = Field(300.0, ge=0)
    """Seconds between reads of Slurm's accounting (sshare usage, sacct runtimes) for the base policies
    that need them (multifactor, qssf); 0 never reads it. The simulator refreshes its history on the
    same interval."""
    history_lookback_days: float = Field(30.0, gt=0)
    """Finished jobs whose runtimes count (sacct's start time)."""


class PolicySettings(_Section):
    model: Path | None = None
    """Model directory (actor.pt + manifest.json); without one the base policy ranks alone."""
    base: str = "fcfs"
    """Base policy: the state's row order, the model's fallback, and the order without a model."""
    default_time_limit_min: int = Field(1440, gt=0)
    """Runtime estimate for jobs without a time limit (Slurm's INFINITE)."""
    max_inference_ms: float = Field(1000.0, gt=0)
    """A policy slower than this is treated as broken for the tick (base policy instead)."""
    refresh_s: float = Field(0.0, ge=0)
    """On a quiet tick (the same pending and running jobs and free resources as at the last decision,
    whose plan was written whole) decide again only this long after it (`core/quiet.py`); 0: every tick.
    Set it to the model's manifest `refresh_s`: the loop it was trained in."""
    model_dirs: tuple[Path, ...] = ()
    """Where `rltunectl reload-model PATH` may load a model from, besides the configured model's own
    parent directory (a model's ranking is written with the daemon's Operator rights)."""
    model_sha256: tuple[str, ...] = ()
    """actor.pt digests that `reload-model` may load from any path."""
    engine: Engine = "compiled"
    """What runs the model's forward pass: "compiled", its kernel read off the TorchScript graph and
    checked against it at load (about 4x faster in the loop; TorchScript for a graph it cannot read), or
    "torchscript", the interpreter. They agree to float32 rounding; near-ties may rank differently."""

    @field_validator("base")
    @classmethod
    def _known(cls, value: str) -> str:
        if value.lower() not in POLICIES:
            raise ValueError(f"unknown policy {value!r}; choose from {', '.join(POLICIES)}")
        return value.lower()


class PlacementSettings(_Section):
    milp_k: int = Field(8, ge=1, le=24)
    """Top-ranked jobs the MILP places jointly each tick."""
    time_limit_ms: float = Field(200.0, ge=0)
    """Solver budget; a slower solve falls back to greedy pack."""
    oversubscribe: bool = True
    """Set OverSubscribe=yes|no on the placed jobs (pack = yes, spread = no)."""
    steer_untyped: bool = True
    """Steer untyped GPU jobs to the solver's GPU model with ExcNodeList (never the job's GPU type)."""


class ApplySettings(_Section):
    mode: Literal["shadow", "enforce"] = "shadow"
    """shadow computes, logs and exports everything and writes nothing to Slurm."""
    lever: Literal["priority", "site_factor"] = "priority"
    """priority fixes each job's priority (undone by hold+release); site_factor adds to multifactor."""
    max_actions: int = Field(256, ge=0)
    """Most scontrol updates per tick; the rest wait for the next tick (top ranks first)."""
    writes_per_s: float = Field(1.0, ge=0)
    """Sustained scontrol updates per second after a burst of `write_burst` (0: unpaced): below
    slurmctld's rate limiter defaults (30, refilled at 2/s) with room for the reads."""
    write_burst: int = Field(20, ge=1)
    """Updates sent back to back before pacing starts."""
    pause_after_denied_ticks: int = Field(3, ge=1)
    """Ticks in a row in which Slurm refused every write (permission denied) before enforce mode pauses
    itself: retrying a write Slurm will refuse every tick helps nobody."""
    priority_max: int = Field(10_000_000, ge=2, le=4_294_967_293)
    """Priority given to the top-ranked job; lower ranks get lower values."""
    priority_min: int = Field(1_000, ge=1)
    """Lowest priority rltuned sets (keep it above what held or exempt jobs need)."""
    priority_step: int = Field(1_000, ge=1)
    """Gap between neighbours when renumbering, so a new job can slot in without moving others."""
    site_factor_max: int = Field(100_000, ge=1, le=2_147_483_645)
    """SiteFactor of the top-ranked job; rank r of n gets max*(n-r)/n. Scale it against sprio -w."""
    site_factor_deadband: int = Field(0, ge=0)
    """Leave a job's SiteFactor alone unless its target moved by more than this."""
    reset_on_stop: bool = False
    """Undo every change rltuned made when the daemon stops cleanly."""

    @model_validator(mode="after")
    def _band(self) -> ApplySettings:
        if self.priority_min >= self.priority_max:
            raise ValueError(
                f"priority_min ({self.priority_min}) must be below priority_max ({self.priority_max})"
            )
        return self


_GUARD = GuardSettings()


class GuardSection(_Section):
    """The starvation guard (`core/guard.py`): it runs in the decision core, so training and evaluation
    apply the same bound the daemon does."""

    enabled: bool = True
    max_wait_s: float = Field(_GUARD.max_wait_s or 0.0, gt=0)
    """A job the model ranks below its base rank goes ahead of every ranked job (or back to its base
    rank, `promote_to`) once pending this long (default 7 days, multifactor's MaxAge)."""
    max_displacement: int = Field(_GUARD.max_displacement or 0, ge=1)
    """Places below its base rank the model may push a job ..."""
    grace_s: float = Field(_GUARD.grace_s, ge=0)
    """... for this long before the guard acts on it the same way."""
    user_max_wait_s: dict[str, float] = {}
    """Per-user caps that replace `max_wait_s` (same rule), e.g. {alice = 3600}."""
    promote_to: PromoteTo = HEAD
    """Where a job the guard acts on goes: ahead of every ranked job, or back to its base rank. Must be
    what the model was trained with (its manifest's `guard.promote_to`) while the guard is enabled."""

    def served_promote_to(self) -> str | None:
        """The rule a model must have been trained with; None when the guard is off and none applies."""
        return self.promote_to if self.enabled else None

    @field_validator("user_max_wait_s")
    @classmethod
    def _positive(cls, value: dict[str, float]) -> dict[str, float]:
        bad = [user for user, cap in value.items() if not cap > 0]
        if bad:
            raise ValueError(f"caps must be positive seconds: {', '.join(bad)}")
        return value

    def settings(self) -> GuardSettings:
        if not self.enabled:
            return GuardSettings(None, None, self.grace_s, {}, self.promote_to)
        return GuardSettings(
            self.max_wait_s, self.max_displacement, self.grace_s, dict(self.user_max_wait_s), self.promote_to
        )


class DaemonSettings(_Section):
    interval_s: float = Field(60.0, gt=0)
    """Seconds from the start of one tick to the start of the next."""
    state_dir: Path = Path("/var/lib/rltuned")
    """Where rltuned remembers what it changed (for reset)."""
    backoff_max_s: float = Field(600.0, gt=0)
    """Longest wait between ticks while slurmctld is unreachable."""
    torch_threads: int = Field(1, ge=1, le=64)
    """Threads torch may use for the model (one 256-row MLP per tick: more threads only add overhead
    and contend with slurmctld on the controller)."""


class ControlSettings(_Section):
    socket: Path = Path("/run/rltuned/control.sock")
    mode: int = Field(0o660, ge=0, le=0o777)
    """Socket file mode; connections from users outside the owner and group are refused."""
    group: str | None = None
    """Group allowed to use rltunectl (default: the daemon's own)."""
    owner: str | None = None
    """User who owns the socket and may use it (default: the daemon's own)."""
    admin_group: str | None = None
    """Group whose members may also change the daemon (pause, resume, reset, reload-model). Root and the
    daemon's own user always may; everyone else the socket lets in may only read (status, plan, explain)."""

    @field_validator("mode", mode="before")
    @classmethod
    def _octal(cls, value: Any) -> Any:
        return int(value, 8) if isinstance(value, str) else value


class MetricsSettings(_Section):
    enabled: bool = True
    address: str = "127.0.0.1"
    port: int = Field(9817, ge=0, le=65535)
    """Prometheus scrape port (0 picks a free one, for tests)."""


class LogSettings(_Section):
    level: Literal["debug", "info", "warning", "error"] = "info"
    format: Literal["auto", "json", "console"] = "auto"
    """auto: JSON when stderr is not a terminal (journald), readable colours on one."""


class Settings(BaseSettings):
    """The whole configuration; sections mirror the TOML tables."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, env_nested_delimiter="__", extra="forbid", frozen=True
    )

    slurm: SlurmSettings = SlurmSettings()
    policy: PolicySettings = PolicySettings()
    placement: PlacementSettings = PlacementSettings()
    apply: ApplySettings = ApplySettings()
    guard: GuardSection = GuardSection()
    daemon: DaemonSettings = DaemonSettings()
    control: ControlSettings = ControlSettings()
    metrics: MetricsSettings = MetricsSettings()
    log: LogSettings = LogSettings()

    def levers(self) -> list[LeverSpec]:
        """The levers this configuration pulls (`core/levers.py`)."""
        p = self.placement
        return enabled(self.apply.lever, p.oversubscribe and self.placing, p.steer_untyped and self.placing)

    @property
    def placing(self) -> bool:
        """The placement levers apply: they steer GPU jobs, and with cores as slots there are none."""
        return self.slurm.slots == "gpus"

    def core(self) -> CoreSettings:
        """What the decision core needs of this config (the simulator builds the same from a file)."""
        p, a = self.placement, self.apply
        lever = Lever(
            a.lever,
            a.priority_max,
            a.priority_min,
            a.priority_step,
            a.site_factor_max,
            a.site_factor_deadband,
            a.max_actions,
            p.oversubscribe and self.placing,
            p.steer_untyped and self.placing,
        )
        milp = MilpConfig(p.milp_k, p.time_limit_ms)
        return CoreSettings(
            self.policy.max_inference_ms, milp, lever, self.guard.settings(), self.policy.refresh_s
        )

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # The file is read by `load` and passed as init values; environment overrides win over it.
        return env_settings, init_settings


def load(path: Path | None) -> Settings:
    """Read, merge and validate; raises ConfigError naming the file and key on the first problem."""
    data = _read_toml(path) if path is not None else {}
    _reject_unknown_env(os.environ)
    try:
        return Settings(**data)
    except ValidationError as exc:
        raise ConfigError(f"{path or 'environment'}: {_first_problem(exc)}") from None


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as handle:
            return tomllib.load(handle)
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such config file") from None
    except PermissionError:
        raise ConfigError(f"{path}: permission denied") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None


def _reject_unknown_env(env: Mapping[str, str]) -> None:
    """pydantic-settings ignores unknown RLTUNED_ variables; a misspelt override should fail like a key."""
    sections = Settings.model_fields
    for name in env:
        if not name.startswith(ENV_PREFIX):
            continue
        parts = name[len(ENV_PREFIX) :].lower().split("__")
        section = sections.get(parts[0])
        annotation = section.annotation if section is not None else None
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            raise ConfigError(f"environment: {name}: unknown section {parts[0]!r}")
        if len(parts) != 2 or parts[1] not in annotation.model_fields:
            raise ConfigError(f"environment: {name}: unknown key {'.'.join(parts)!r}")


def _first_problem(exc: ValidationError) -> str:
    error = exc.errors()[0]
    key = ".".join(str(part) for part in error["loc"]) or "(top level)"
    if error["type"] == "extra_forbidden":
        return f"{key}: unknown key"
    value = error.get("input")
    shown = "" if isinstance(value, dict) else f" (got {value!r})"
    return f"{key}: {error['msg']}{shown}"
