"""The long-running daemon: the tick loop, signals, systemd notification, metrics and the control socket.

Ticks run on the main thread, one at a time, `interval_s` apart (start to start); while slurmctld is
unreachable the wait between full reads doubles up to `backoff_max_s`, but a cheap `scontrol ping` every
`interval_s` ends the wait as soon as slurmctld answers, so the daemon resumes within one interval of
slurmctld's return; the first good read resets the backoff. SIGTERM/SIGINT
stop the loop: a tick that has not started applying is abandoned, one that has finishes its plan. SIGHUP
reloads the config file's model (validated before the swap). systemd hears READY=1 only after the config,
the model, the metrics server and a first snapshot (or a clear failure to take it), and a heartbeat
thread pings the watchdog unless a tick has made no progress (a read, a decision, an applied action) for
longer than every timeout it may legitimately wait on: a long outage or a long plan never trips it.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from types import FrameType
from typing import Any

import sdnotify

from rltuned.core.guard import HEAD
from rltuned.core.inputs import readable_bases, unreadable_inputs
from rltuned.core.levers import conf_problems, pyslurm_cannot
from rltuned.core.scoring import score_queue
from rltuned.daemon import config as config_mod
from rltuned.daemon.config import PolicySettings, Settings
from rltuned.daemon.control import ControlServer
from rltuned.daemon.engine import Decision, Engine, TickReport
from rltuned.daemon.instance import InstanceLock, is_paused, set_paused
from rltuned.daemon.ledger import Ledger
from rltuned.daemon.logs import get_logger
from rltuned.daemon.metrics import Metrics
from rltuned.daemon.views import explain_job, plan_rows
from rltuned.errors import ConfigError, ModelLoadError, RltunedError, SlurmError
from rltuned.features import encode
from rltuned.policies import make_policy
from rltuned.rl.export import ACTOR_FILE, LoadedModel, load_model, sha256, trained_slots
from rltuned.slurm.adapter import SlurmAdapter
from rltuned.slurm.config_check import parse_show_config

MIN_PAUSE_S = 0.2


def check_backend(settings: Settings) -> list[str]:
    """ConfigError when pyslurm is asked for explicitly with a lever it cannot write; else what it
    cannot write (for `auto`, a reason to take the commands)."""
    cannot = pyslurm_cannot(settings.levers())
    if settings.slurm.backend == "pyslurm" and cannot:
        raise ConfigError(f'slurm.backend = "pyslurm" cannot write {", ".join(cannot)}; use cli or auto')
    return cannot


def make_adapter(settings: Settings) -> SlurmAdapter:
    """`auto` takes pyslurm only when it imports with the API it needs and can write every configured
    lever; otherwise the client commands, which can do everything."""
    s = settings.slurm
    if s.backend in ("pyslurm", "auto"):
        from rltuned.slurm.pyslurm_backend import PyslurmAdapter, pyslurm_available

        cannot = check_backend(settings)
        if s.backend == "pyslurm" or (not cannot and pyslurm_available()):
            return PyslurmAdapter()
    from rltuned.slurm.cli_backend import CliAdapter

    return CliAdapter(s.conf, s.bin_dir, s.command_timeout_s)


def check_readable_base(base: str) -> None:
    """ConfigError naming `policy.base` when the daemon cannot read the base policy's inputs from Slurm
    (`core.inputs.unreadable_inputs`): it would rank by another rule than the one it was trained with."""
    reason = unreadable_inputs(base)
    if reason is not None:
        raise ConfigError(
            f"policy.base: {base!r} cannot be served from what rltuned reads from Slurm: {reason}; "
            f"choose one of {', '.join(readable_bases())}"
        )


def check_model_base(model: LoadedModel, policy: PolicySettings, slots: str, promote_to: str | None) -> None:
    """ModelLoadError when the model was trained on another base policy than `policy.base`: a model
    re-ranks its own base's order (the rows of its state and its fallback), and serving it on another
    order is not what was evaluated. Likewise for quiet ticks (`policy.refresh_s`, `core/quiet.py`): a
    model trained to act once per change must not serve every tick, nor the reverse. A manifest without
    `base` or `refresh_s` (a hand-made model, or one from before quiet ticks) is not checked for it.
    And for slots (`slurm.slots`): a model trained on an HPC log's cores ranks by CPUs, one trained on GPUs
    by GPUs; a model whose slots are unknown (its training cluster is not on this machine) is not checked.
    And for where the starvation guard puts a held-down job (`guard.promote_to`): a manifest's guard
    record from before the setting existed was trained with `head`; a manifest with no guard record, or
    a daemon whose guard is off (`promote_to` None), is not checked.

    The one check behind start-up, `reload-model`/SIGHUP and `rltuned --check-config`."""
    trained = model.manifest.get("base")
    base = policy.base
    if trained and trained != base:
        raise ModelLoadError(
            f"model {model.path} was trained on base {trained!r} but policy.base is {base!r}; "
            f"set policy.base = {trained!r} or load a model trained on {base!r}"
        )
    refresh = model.manifest.get("refresh_s")
    if refresh is not None and float(refresh) != policy.refresh_s:
        raise ModelLoadError(
            f"model {model.path} was trained with refresh_s = {float(refresh):g} but policy.refresh_s is "
            f"{policy.refresh_s:g}; set policy.refresh_s = {float(refresh):g}"
        )
    guard = model.manifest.get("guard")
    if isinstance(guard, Mapping) and promote_to is not None:
        trained_to = str(guard.get("promote_to", HEAD))
        if trained_to != promote_to:
            raise ModelLoadError(
                f"model {model.path} was trained with guard.promote_to = {trained_to!r} but guard.promote_to "
                f"is {promote_to!r}; set guard.promote_to = {trained_to!r}"
            )
    trained_on = trained_slots(model.manifest)
    if trained_on is not None and trained_on != slots:
        raise ModelLoadError(
            f"model {model.path} was trained with {trained_on} as slots (cluster "
            f"{model.manifest.get('cluster')}) but slurm.slots is {slots!r}; set slurm.slots = {trained_on!r}"
        )


def validated_model(path: Path, engine: Engine | None, settings: Settings) -> LoadedModel:
    """Load, verify, check it was trained on `base`, and run once on the current snapshot (the last
    tick's) before anyone depends on it: a model that loads but fails, returns NaN or blows the
    inference budget on the real queue is rejected here rather than discovered as a fallback on every
    tick."""
    model = load_model(path, settings.policy.engine)
    policy = settings.policy
    check_model_base(model, policy, settings.slurm.slots, settings.guard.served_promote_to())
    decision = engine.last_decided if engine is not None else None  # one reference read: no lock needed
    if engine is None or decision is None or not decision.view.snapshot.pending:
        return model
    obs = encode(decision.view.snapshot, make_policy(policy.base), model.runtime_input)
    scored = score_queue(model, obs, engine.settings.policy.max_inference_ms)
    if scored.problem is not None:
        raise ModelLoadError(f"{path}: on the current queue, {scored.problem}")
    return model


class Service:
    def __init__(self, settings: Settings, config_path: Path | None, mode: str | None = None) -> None:
        import torch

        torch.set_num_threads(settings.daemon.torch_threads)
        self.settings = settings
        self.config_path = config_path
        self.mode_override = mode
        self.log = get_logger()
        self.metrics = Metrics()
        self.stop_event = threading.Event()
        self.reload_event = threading.Event()
        self.heartbeat_stop = threading.Event()
        self.wake = threading.Event()
        """Set by signals to cut the wait between ticks short."""
        self.paused = is_paused(settings.daemon.state_dir)
        """Kept in the state directory: a paused daemon stays paused across restarts."""
        self.instance: InstanceLock | None = None
        self.lock = threading.RLock()
        """Held by a tick and by control requests that read or swap engine state."""
        self.notifier = sdnotify.SystemdNotifier()
        if self.notifier.socket is not None:  # a slow or stuck receiver must never block a tick or a reload
            self.notifier.socket.setblocking(False)
        self.control: ControlServer | None = None
        self.metrics_port: int | None = None
        self.in_tick = False
        """True while a tick runs; with `engine.progress_at` it tells the watchdog a tick is stuck."""
        self.started_at = time.monotonic()
        self.decided: tuple[Decision, float] | None = None
        """The last tick's decision and when it was made: what `plan` and `explain` answer from."""
        self.completed_at: float | None = None
        """When the last tick ended (monotonic), whatever its result: what the health check reads."""
        check_readable_base(settings.policy.base)
        self.engine = Engine(
            settings,
            make_adapter(settings),
            None,
            Ledger.in_dir(settings.daemon.state_dir),
            self.metrics,
        )
        self._report_lost_ledger()
        self._load_initial_model()

    @property
    def mode(self) -> str:
        return self.mode_override or self.settings.apply.mode

    # --- start-up -----------------------------------------------------------------------------------

    def _report_lost_ledger(self) -> None:
        """A corrupt ledger was moved aside: say where, once; `reset` then also undoes from Slurm."""
        ledger = self.engine.ledger
        if ledger.moved_aside is not None:
            self.metrics.fallbacks.labels("ledger_corrupt").inc()
            self.log.error("ledger_corrupt", moved_to=str(ledger.moved_aside), problem=ledger.unaccounted)

    def _load_initial_model(self) -> None:
        path = self.settings.policy.model
        if path is None:
            self.metrics.set_model(None, time.time())
            return
        try:
            self.engine.model = validated_model(path, None, self.settings)
            self.metrics.set_model(self.engine.model.manifest, time.time())
            self.log.info(
                "model_loaded",
                path=str(path),
                sha256=self.engine.model.manifest.get("sha256"),
                engine=self.engine.model.engine,
            )
        except ModelLoadError as exc:
            self._unavailable(path, exc)

    def _unavailable(self, path: Path, exc: ModelLoadError) -> None:
        """No model serves: the base policy ranks, and the tick line, status and metrics say why."""
        self.engine.model = None
        self.engine.model_problem = f"model unavailable: {exc}"
        self.metrics.set_model(None, time.time())
        self.metrics.fallbacks.labels("model_unavailable").inc()
        self.log.error(
            "model_load_failed", path=str(path), error=str(exc), fallback=self.settings.policy.base
        )

    def start(self) -> None:
        """The instance lock, metrics, control socket, first snapshot, then READY=1."""
        # Before the socket: only the lock's holder may replace a socket file another daemon serves.
        self.instance = InstanceLock(self.settings.daemon.state_dir, "daemon").acquire()
        m = self.settings.metrics
        if m.enabled:
            self.metrics_port = self.metrics.serve(m.address, m.port)
            self.log.info("metrics_listening", address=m.address, port=self.metrics_port)
        c = self.settings.control
        self.control = ControlServer(c.socket, self.handle, c.mode, c.group, c.owner, c.admin_group)
        self.control.start()
        self.metrics.set_mode(self.mode)
        self.metrics.paused.set(int(self.paused))
        if self.paused:
            self.log.warning("paused_at_start", why="paused before the last stop; rltunectl resume")
        try:
            with self.lock:
                view = self.engine.read()
                # What `plan` and `explain` answer until the first tick decides (and while paused).
                self.decided = (self.engine.decide(view), time.monotonic())
            self.log.info(
                "first_snapshot",
                nodes=len(view.snapshot.cluster.nodes),
                pending=view.report.pending,
                mode=self.mode,
            )
        except SlurmError as exc:
            self.log.error("first_snapshot_failed", error=str(exc))
        self._check_slurm_priorities()
        self.notifier.notify(
            f"READY=1\nSTATUS=mode {self.mode}, {'model' if self.engine.model else 'base policy'}"
        )

    def _check_slurm_priorities(self) -> None:
        show = getattr(self.engine.adapter, "show_config", None)
        if show is None:
            return
        try:
            config = parse_show_config(show())
        except SlurmError as exc:
            self.log.warning("slurm_config_unread", error=str(exc))
            return
        for problem in conf_problems(config, self.settings.levers()):
            self.log.warning("slurm_priority_setting", problem=problem, lever=self.settings.apply.lever)

    def install_signals(self) -> None:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_stop)
        signal.signal(signal.SIGHUP, self._on_hup)

    def _on_stop(self, signum: int, frame: FrameType | None) -> None:
        self.stop_event.set()
        self.wake.set()

    def _on_hup(self, signum: int, frame: FrameType | None) -> None:
        self.reload_event.set()  # handled between ticks, never mid-tick
        self.wake.set()

    # --- the loop -----------------------------------------------------------------------------------

    def run(self) -> None:
        self._start_watchdog()
        failures = 0
        while not self.stop_event.is_set():
            started = time.monotonic()
            if not self.paused:
                with self.lock:
                    self.engine.progress_at = time.monotonic()
                    self.in_tick = True
                    try:
                        report = self.engine.tick(self.mode, self.stop_event.is_set)
                    finally:
                        self.in_tick = False
                        self.completed_at = time.monotonic()
                if report.decision is not None:
                    self.decided = (report.decision, self.completed_at)
                failures = failures + 1 if report.result == "error" else 0
                if self.engine.denied_ticks >= self.settings.apply.pause_after_denied_ticks:
                    self._pause(True)
                    self.metrics.denied_pauses.inc()
                    self.log.error(
                        "enforce_paused_permission_denied",
                        ticks=self.engine.denied_ticks,
                        hint="Slurm refused every write: make rltuned's user an Operator "
                        "(sacctmgr modify user NAME set AdminLevel=Operator), then rltunectl resume",
                    )
                    self.engine.denied_ticks = 0
            wait = self._next_wait(failures) - (time.monotonic() - started)
            # Even when a tick overran its interval, pause briefly: the lock is not fair, and a control
            # request (plan, reload-model) waiting for it must get a turn between ticks.
            self._sleep(max(MIN_PAUSE_S, wait), probe=failures > 1)
        self.shutdown()

    def _next_wait(self, failures: int) -> float:
        interval = self.settings.daemon.interval_s
        if failures <= 1:
            return interval
        return float(min(interval * 2.0 ** (failures - 1), self.settings.daemon.backoff_max_s))

    def _sleep(self, seconds: float, probe: bool = False) -> None:
        """Wait between ticks; reloads happen here. With `probe` (backing off after failed reads), ping
        slurmctld every interval and end the wait once it answers."""
        deadline = time.monotonic() + seconds
        next_probe = time.monotonic() + self.settings.daemon.interval_s
        while True:
            until = min(deadline, next_probe) if probe else deadline
            self.wake.wait(max(0.0, until - time.monotonic()))
            self.wake.clear()
            if self.reload_event.is_set() and not self.stop_event.is_set():
                self.reload_event.clear()
                self.reload()
                continue
            if self.stop_event.is_set() or time.monotonic() >= deadline:
                return
            if probe and time.monotonic() >= next_probe:
                if self._slurmctld_answers():
                    self.log.info("slurmctld_back", backoff_left_s=round(deadline - time.monotonic(), 1))
                    return
                next_probe = time.monotonic() + self.settings.daemon.interval_s

    def _slurmctld_answers(self) -> bool:
        ping = getattr(self.engine.adapter, "ping", None)
        return bool(ping()) if ping is not None else False

    def stuck_limit_s(self) -> float:
        """The longest a tick may go without progress: the reads' and one action's timeouts, the solver's
        limit and the model's budget, plus a margin for a loaded host."""
        d = self.settings
        return (
            4 * d.slurm.command_timeout_s
            + d.placement.time_limit_ms / 1000
            + d.policy.max_inference_ms / 1000
            + 30
        )

    def is_stuck(self) -> bool:
        return self.in_tick and time.monotonic() - self.engine.progress_at > self.stuck_limit_s()

    def _start_watchdog(self) -> None:
        """Ping WATCHDOG=1 at half of systemd's WATCHDOG_USEC (every 5 s without one) unless a tick is
        stuck: waiting between ticks (backoff included) is progress, a hung command or model is not."""
        usec = os.environ.get("WATCHDOG_USEC", "")
        every = int(usec) / 2e6 if usec.isdigit() and int(usec) > 0 else 5.0

        def beat() -> None:
            while not self.heartbeat_stop.wait(every):
                if not self.is_stuck():
                    self.notifier.notify("WATCHDOG=1")

        threading.Thread(target=beat, name="watchdog", daemon=True).start()

    def shutdown(self) -> None:
        self.heartbeat_stop.set()
        self.notifier.notify("STOPPING=1")
        if self.settings.apply.reset_on_stop and self.mode == "enforce":
            try:
                with self.lock:
                    self.engine.reset()
            except RltunedError as exc:
                self.log.error("reset_on_stop_failed", error=str(exc))
        if self.control is not None:
            self.control.stop()
        self.log.info("stopped")

    # --- reload and control -------------------------------------------------------------------------

    def reload(self, path: Path | None = None) -> dict[str, Any]:
        """Swap in a new model only after it validated. Without a path (SIGHUP) the config file is read
        again: if valid, its policy, placement, apply, Slurm and interval settings take effect, and its
        model is loaded the same way; an invalid file (a `policy.base` whose inputs Slurm does not give
        included) changes nothing. A model trained on another base than `policy.base` is refused; when
        the file changed `policy.base`, a serving model trained on the old base stops serving (the base
        policy ranks), as it would after a restart with that file."""
        self.notifier.notify(f"RELOADING=1\nMONOTONIC_USEC={time.monotonic_ns() // 1000}")
        try:
            if path is None and self.config_path is not None:
                fresh = config_mod.load(self.config_path)
                check_readable_base(fresh.policy.base)
                self._apply_settings(fresh)
                path = fresh.policy.model
            if path is None:
                return {
                    "ok": False,
                    "error": "no model path given or configured",
                    "serving": self._model_name(),
                }
            try:
                model = validated_model(path, self.engine, self.settings)
            except ModelLoadError as exc:
                self.metrics.fallbacks.labels("reload_rejected").inc()
                self.log.error("reload_rejected", path=str(path), error=str(exc))
                return {"ok": False, "error": str(exc), "serving": self._model_name()}
            with self.lock:
                self.engine.model = model
                self.engine.model_problem = None
                self.metrics.set_model(model.manifest, time.time())
            self.log.info(
                "model_reloaded", path=str(path), sha256=model.manifest.get("sha256"), engine=model.engine
            )
            return {"ok": True, "serving": self._model_name()}
        except RltunedError as exc:
            self.log.error("reload_failed", error=str(exc))
            return {"ok": False, "error": str(exc), "serving": self._model_name()}
        finally:
            self.notifier.notify("READY=1")

    def _apply_settings(self, fresh: Settings) -> None:
        fixed = ("control", "metrics", "log")
        if any(getattr(fresh, name) != getattr(self.settings, name) for name in fixed):
            self.log.warning(
                "reload_needs_restart",
                sections=[n for n in fixed if getattr(fresh, n) != getattr(self.settings, n)],
            )
        with self.lock:
            if fresh.slurm != self.settings.slurm:
                self.engine.adapter = make_adapter(fresh)
            moved = fresh.daemon.state_dir != self.settings.daemon.state_dir
            self.settings = fresh
            self.engine.settings = fresh
            if moved:
                self.engine.ledger = Ledger.in_dir(fresh.daemon.state_dir)
                self._report_lost_ledger()
            serving = self.engine.model
            if serving is not None:
                try:
                    check_model_base(
                        serving, fresh.policy, fresh.slurm.slots, fresh.guard.served_promote_to()
                    )
                except ModelLoadError as exc:  # policy.base changed under it
                    self._unavailable(serving.path, exc)
        self.log.info("config_reloaded", mode=self.mode, base=fresh.policy.base, lever=fresh.apply.lever)

    def _model_name(self) -> str | None:
        model = self.engine.model
        return f"{model.path} ({str(model.manifest.get('sha256', ''))[:12]})" if model else None

    def handle(self, request: Any) -> dict[str, Any]:
        command = request.get("command")
        if command == "status":
            return self.status()
        if command == "pause":
            self._pause(True)
            self.log.info("paused")
            return {"ok": True, "paused": True}
        if command == "resume":
            self._pause(False)
            self.log.info("resumed")
            return {"ok": True, "paused": False}
        if command == "reset":
            self._pause(True)  # or the next enforce tick would write the plan again
            with self.lock:
                counts = self.engine.reset()
            return {"ok": True, "paused": True, "counts": counts}
        if command == "reload-model":
            raw = request.get("path")
            if raw:
                refused = self._unapproved(Path(str(raw)))
                if refused is not None:
                    self.log.error("reload_refused", path=str(raw), error=refused)
                    return {"ok": False, "error": refused, "serving": self._model_name()}
            return self.reload(Path(str(raw)) if raw else None)
        if command in ("plan", "explain"):
            # The last tick's decision, without the tick lock: a control request never waits for a
            # tick nor delays one, and costs no Slurm read or model call.
            decided = self.decided
            if decided is None:
                return {"ok": False, "error": "no tick has decided yet; ask again after the first tick"}
            decision, at = decided
            age = {"tick_age_s": round(time.monotonic() - at, 1)}
            if command == "plan":
                return {"ok": True, "mode": self.mode, **age, "rows": plan_rows(decision)}
            job_id = request.get("job_id")
            if not isinstance(job_id, int) or isinstance(job_id, bool):
                return {"ok": False, "error": f"explain needs an integer job_id, got {job_id!r:.40}"}
            return {"ok": True, **age, **explain_job(decision, job_id)}
        return {"ok": False, "error": f"unknown command {command!r}"}

    def _unapproved(self, path: Path) -> str | None:
        """Why a model at `path` may not be loaded on request, or None: it must lie in an approved
        directory (symlinks resolved) or carry a pinned actor.pt digest."""
        policy = self.settings.policy
        approved = [d.resolve() for d in policy.model_dirs]
        if policy.model is not None:
            approved.append(policy.model.resolve().parent)
        real = path.resolve()
        if any(real.is_relative_to(d) for d in approved):
            return None
        actor = real / ACTOR_FILE
        if policy.model_sha256 and actor.is_file() and sha256(actor) in policy.model_sha256:
            return None
        where = ", ".join(str(d) for d in approved) or "none configured"
        return (
            f"{path}: not in an approved model directory ({where}; policy.model_dirs) and its actor.pt "
            "digest is not pinned (policy.model_sha256)"
        )

    def _pause(self, paused: bool) -> None:
        self.paused = paused
        self.metrics.paused.set(int(paused))
        problem = set_paused(self.settings.daemon.state_dir, paused)
        if problem is not None:
            self.log.warning("pause_not_persisted", error=problem)

    def health(self) -> str | None:
        """Why the daemon is unhealthy, or None: a tick must end within two intervals of the last one,
        plus the time the last one took (a tick slower than the interval starts the next at once; a tick
        that failed still ended; a paused daemon is idle on purpose, not stuck)."""
        if self.paused:
            return None
        last = self.engine.last
        took = last.stages.get("total", 0.0) if last is not None else 0.0
        limit = 2 * self.settings.daemon.interval_s + took
        now = time.monotonic()
        if self.completed_at is None:
            # The first tick may also pay for start-up reads: allow it the stuck limit on top.
            if now - self.started_at > limit + self.stuck_limit_s():
                return f"no tick has completed in the {now - self.started_at:.0f} s since start"
            return None
        if now - self.completed_at > limit:
            idle = now - self.completed_at
            why = f"limit: two intervals and the last tick's {took:.1f} s"
            return f"no tick has completed for {idle:.0f} s ({why})"
        return None

    def status(self) -> dict[str, Any]:
        last: TickReport | None = self.engine.last
        since = None if self.completed_at is None else round(time.monotonic() - self.completed_at, 1)
        problem = self.health()
        return {
            "ok": True,
            "healthy": problem is None,
            "problem": problem,
            "seconds_since_tick": since,
            "interval_s": self.settings.daemon.interval_s,
            "mode": self.mode,
            "paused": self.paused,
            "model": self._model_name(),
            "model_problem": self.engine.model_problem,
            "base": self.settings.policy.base,
            "ticks": self.engine.ticks,
            "last_tick": last.summary() if last else None,
            "metrics_port": self.metrics_port,
            "ledger_jobs": len(self.engine.ledger),
            "ledger_unaccounted": self.engine.ledger.unaccounted,
        }


def run_once(settings: Settings, config_path: Path | None, mode: str | None) -> TickReport:
    """`rltuned --once`: one tick with the configured model (or base policy), no socket, no metrics server."""
    service = Service(without_metrics_server(settings), config_path, mode)
    if service.mode != "enforce":
        return service.engine.tick(service.mode)  # reads only: no lock, runs beside a daemon
    lock = InstanceLock(settings.daemon.state_dir, "rltuned --once --mode enforce").acquire()
    try:
        return service.engine.tick(service.mode)
    finally:
        lock.release()


def without_metrics_server(settings: Settings) -> Settings:
    """For one-shot commands next to a running daemon, whose port they must not take."""
    return settings.model_copy(update={"metrics": settings.metrics.model_copy(update={"enabled": False})})
