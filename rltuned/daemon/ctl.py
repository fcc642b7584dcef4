"""`rltunectl status|reload-model|pause|resume|plan|explain|reset`: talk to the daemon, or act alone.

`status`, `reload-model`, `pause` and `resume` need the running daemon (its control socket). `plan` and
`explain` ask the daemon when it runs and otherwise compute the same decision from the config file,
read-only. `reset` asks the daemon (which pauses itself first); without one it works from the ledger in
`state_dir` and writes to Slurm directly, holding the state directory's instance lock, and never while a
daemon holds that lock without answering.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from rltuned.daemon.config import Settings, load
from rltuned.daemon.control import DaemonUnreachable, request
from rltuned.daemon.instance import InstanceBusy, InstanceLock
from rltuned.daemon.views import PLAN_COLUMNS, explain_job, plan_rows, table
from rltuned.errors import RltunedError


def control(config: Path, socket: Path | None, command: str, **extra: Any) -> dict[str, Any]:
    settings = load(config)
    reply = request(socket or settings.control.socket, {"command": command, **extra})
    if not reply.get("ok"):
        raise RltunedError(str(reply.get("error", "the daemon refused")))
    return reply


def plan(config: Path, socket: Path | None, as_json: bool) -> str:
    try:
        reply = control(config, socket, "plan")
        rows, source = reply["rows"], f"daemon ({reply.get('mode')})"
    except DaemonUnreachable:
        settings = load(config)
        rows, source = plan_rows(_local_decision(settings)), "computed here (no daemon running)"
    if as_json:
        return json.dumps({"source": source, "rows": rows}, indent=2)
    if not rows:
        return f"# {source}: no managed pending jobs"
    return f"# {source}\n" + table(rows, (*PLAN_COLUMNS, "actions"))


def explain(config: Path, socket: Path | None, job_id: int, as_json: bool) -> str:
    try:
        body = control(config, socket, "explain", job_id=job_id)
        body.pop("ok", None)
    except DaemonUnreachable:
        body = explain_job(_local_decision(load(config)), job_id)
    if as_json:
        return json.dumps(body, indent=2)
    lines = [f"job {job_id}"]
    for key, value in body.items():
        if key == "features":
            lines.append("features (state row the policy saw; * = sampled for the actor):")
            sampled = set(body.get("sampled_features", ()))
            lines += [f"  {'*' if n in sampled else ' '} {n:<22} {v:.4f}" for n, v in value.items()]
        elif key != "sampled_features":
            lines.append(f"{key}: {value}")
    return "\n".join(lines)


def reset(config: Path, socket: Path | None = None) -> str:
    """Through the daemon when it runs (it pauses itself first), else directly from the ledger."""
    from rltuned.daemon.service import Service, without_metrics_server

    try:
        reply = control(config, socket, "reset")
        return (
            f"reset by the daemon, now paused (resume with rltunectl resume): {json.dumps(reply['counts'])}"
        )
    except DaemonUnreachable:
        pass
    settings = load(config)
    try:
        lock = InstanceLock(settings.daemon.state_dir, "rltunectl reset").acquire()
    except InstanceBusy as exc:
        raise InstanceBusy(
            f"{exc}; the daemon did not answer on its socket, so reset does not run beside it: retry, "
            "or stop the daemon and reset again"
        ) from None
    try:
        service = Service(without_metrics_server(settings), config, "enforce")
        before = len(service.engine.ledger)
        counts = service.engine.reset()
        left = len(service.engine.ledger)
    finally:
        lock.release()
    return f"reset {before - left} of {before} jobs rltuned had changed: {json.dumps(counts, sort_keys=True)}"


def _local_decision(settings: Settings) -> Any:
    from rltuned.daemon.service import Service, without_metrics_server

    service = Service(without_metrics_server(settings), None, None)
    return service.engine.decide(service.engine.read())
