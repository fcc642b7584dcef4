"""The daemon's Prometheus metrics: updated inside the tick, served from memory (no Slurm call per scrape).

Names follow Prometheus practice (`rltuned_` prefix, base units, `_total` counters) and Slurm's own label
spellings (`partition`, `reason`). Each daemon owns a registry, so tests can run several side by side.
The loaded model is a gauge whose previous label set is removed on reload (an Info must not change).
"""

from __future__ import annotations

import platform
from collections.abc import Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from rltuned import __version__

STAGES = ("snapshot", "features", "policy", "solver", "apply", "total")
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0)


class Metrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.build_info = Gauge(
            "rltuned_build_info",
            "Always 1; labels say what runs.",
            ["version", "python_version", "torch_version"],
            registry=r,
        )
        self.model_info = Gauge(
            "rltuned_model_info",
            "1 for the loaded model (no series when the base policy ranks alone).",
            ["model_sha256", "model_version", "trace", "base_policy", "metric"],
            registry=r,
        )
        self.model_loaded = Gauge(
            "rltuned_model_loaded_timestamp_seconds", "When the serving model was loaded.", registry=r
        )
        self.tick_duration = Histogram(
            "rltuned_tick_duration_seconds", "Time per tick stage.", ["stage"], buckets=BUCKETS, registry=r
        )
        self.ticks = Counter(
            "rltuned_ticks_total",
            "Ticks by result (ok, error: Slurm unreadable, abandoned: stopped before writing).",
            ["result"],
            registry=r,
        )
        self.last_success = Gauge(
            "rltuned_last_successful_tick_timestamp_seconds",
            "End of the last tick that completed.",
            registry=r,
        )
        self.pending = Gauge("rltuned_pending_jobs", "Pending jobs rltuned manages.", registry=r)
        self.managed = Gauge("rltuned_managed_jobs", "Jobs in the last plan.", registry=r)
        self.managed_by_partition = Gauge(
            "rltuned_partition_managed_jobs",
            "Jobs in the last plan, by partition.",
            ["partition"],
            registry=r,
        )
        self.exempt = Gauge(
            "rltuned_exempt_jobs", "Pending jobs left alone, by reason.", ["reason"], registry=r
        )
        self.running = Gauge(
            "rltuned_running_jobs", "Running jobs that hold slots (GPUs, or cores as slots).", registry=r
        )
        self.actions = Counter(
            "rltuned_actions_total", "scontrol updates by kind and result.", ["kind", "result"], registry=r
        )
        self.planned = Counter(
            "rltuned_planned_actions_total",
            "Actions planned (also in shadow mode), by kind.",
            ["kind"],
            registry=r,
        )
        self.guarded = Counter(
            "rltuned_guard_promotions_total",
            "Job-ticks the starvation guard put a job ahead of the ranking or back at its base rank, "
            "by reason (max_wait, displaced).",
            ["reason"],
            registry=r,
        )
        self.fallbacks = Counter("rltuned_fallbacks_total", "Fallbacks by reason.", ["reason"], registry=r)
        self.solver = Counter(
            "rltuned_solver_outcomes_total", "Placement solves by outcome.", ["outcome"], registry=r
        )
        self.slurm_up = Gauge("rltuned_slurmctld_up", "1 if the last read of slurmctld worked.", registry=r)
        self.slurm_command = Histogram(
            "rltuned_slurm_command_duration_seconds",
            "Slurm client commands.",
            ["command"],
            buckets=BUCKETS,
            registry=r,
        )
        self.mode = Gauge("rltuned_mode", "1 for the current mode.", ["mode"], registry=r)
        self.paused = Gauge("rltuned_paused", "1 while paused with rltunectl pause.", registry=r)
        self.denied_pauses = Counter(
            "rltuned_denied_pauses_total",
            "Times enforce mode paused itself because Slurm refused every write for permissions.",
            registry=r,
        )
        self.malformed = Counter(
            "rltuned_slurm_records_skipped_total", "Job or node records skipped as unreadable.", registry=r
        )
        self._model_labels: tuple[str, ...] | None = None
        self.build_info.labels(__version__, platform.python_version(), _torch_version()).set(1)

    def set_mode(self, mode: str) -> None:
        for name in ("shadow", "enforce"):
            self.mode.labels(name).set(1 if name == mode else 0)

    def set_model(self, manifest: Mapping[str, Any] | None, loaded_at: float) -> None:
        """Show the serving model; the previous model's series disappears."""
        if self._model_labels is not None:
            self.model_info.remove(*self._model_labels)
            self._model_labels = None
        if manifest is None:
            return
        labels = (
            str(manifest.get("sha256", "")),
            _model_version(manifest),
            str(manifest.get("trace", "")),
            str(manifest.get("base", "")),
            str(manifest.get("metric", "")),
        )
        self.model_info.labels(*labels).set(1)
        self.model_loaded.set(loaded_at)
        self._model_labels = labels

    def serve(self, address: str, port: int) -> int:
        """Start the scrape endpoint in a thread; returns the bound port (useful with port 0)."""
        server, _thread = start_http_server(port, addr=address, registry=self.registry)
        return int(server.server_address[1])


def _torch_version() -> str:
    import torch

    return str(torch.__version__)


def _model_version(manifest: Mapping[str, Any]) -> str:
    """What tells two models of one recipe apart: the training commit (short) and the seed."""
    commit = str(manifest.get("training_commit") or "unknown")
    dirty = commit.endswith("-dirty")
    short = commit.removesuffix("-dirty")[:12] + ("-dirty" if dirty else "")
    return f"{short}/seed{manifest.get('seed', '?')}"
