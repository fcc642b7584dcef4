"""The control socket: one JSON request line in, one JSON reply line out, for `rltunectl`.

The socket file is created with the configured mode (0660 by default) and group, so the kernel already
refuses users without write permission; the server also checks the peer's credentials (SO_PEERCRED)
and refuses anyone but root, the daemon's own user, the socket's owner and members of its group. Those
may read (status, plan, explain); changing the daemon (pause, resume, reset, reload-model) takes root,
the daemon's own user or a member of `control.admin_group`. Every request gets a reply, an error one
for anything malformed.
"""

from __future__ import annotations

import contextlib
import grp
import json
import os
import pwd
import socket
import socketserver
import struct
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from rltuned.daemon.logs import get_logger
from rltuned.errors import ConfigError, RltunedError

Handler = Callable[[Mapping[str, Any]], Mapping[str, Any]]
MAX_REQUEST = 1 << 16
CHANGING = frozenset({"pause", "resume", "reset", "reload-model"})
"""Commands that change what the daemon does or writes: root, the daemon's user and admin_group only."""


class ControlServer:
    """Serves requests on a unix socket in a background thread; `handle` does the work."""

    def __init__(
        self,
        path: Path,
        handle: Handler,
        mode: int = 0o660,
        group: str | None = None,
        owner: str | None = None,
        admin_group: str | None = None,
    ) -> None:
        self.path = path
        self.handle = handle
        self.mode = mode
        self.gid = _group_id(group) if group else os.getgid()
        self.uid = _user_id(owner) if owner else os.geteuid()
        self.admin_gid = _group_id(admin_group, "control.admin_group") if admin_group else None
        self._server: socketserver.ThreadingUnixStreamServer | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if self.path.exists() or self.path.is_symlink():
            self.path.unlink()
        outer = self

        class _Request(socketserver.StreamRequestHandler):
            def handle(self) -> None:
                outer._serve(self.connection, self.rfile, self.wfile)

        old_umask = os.umask(0o177)  # never world-accessible, even between bind and chmod
        try:
            self._server = socketserver.ThreadingUnixStreamServer(str(self.path), _Request)
        finally:
            os.umask(old_umask)
        self._server.daemon_threads = True
        os.chmod(self.path, self.mode)
        if self.gid != os.getgid() or self.uid != os.geteuid():
            try:
                os.chown(self.path, self.uid, self.gid)
            except PermissionError as exc:
                raise ConfigError(
                    f"control.owner/group: cannot give {self.path} to {self.uid}:{self.gid}: {exc}"
                ) from None
        self._thread = threading.Thread(target=self._server.serve_forever, name="control", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self.path.exists():
            self.path.unlink()

    def allowed(self, uid: int, gid: int) -> bool:
        return (
            uid in (0, os.geteuid(), self.uid) or _in_group(uid, gid, self.gid) or self.may_change(uid, gid)
        )

    def may_change(self, uid: int, gid: int) -> bool:
        if uid in (0, os.geteuid()):
            return True
        return self.admin_gid is not None and _in_group(uid, gid, self.admin_gid)

    def _serve(self, conn: socket.socket, rfile: Any, wfile: Any) -> None:
        creds = conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, struct.calcsize("3i"))
        _pid, uid, gid = struct.unpack("3i", creds)
        line = rfile.readline(MAX_REQUEST)  # read even when refusing, so the client sees the answer
        reply: Mapping[str, Any]
        if not self.allowed(uid, gid):
            reply = {"ok": False, "error": f"permission denied for uid {uid}"}
        else:
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("expected a JSON object")
                command = request.get("command")
                if command in CHANGING and not self.may_change(uid, gid):
                    reply = {
                        "ok": False,
                        "error": f"permission denied for uid {uid}: {command} needs root, the daemon's "
                        "user or control.admin_group",
                    }
                else:
                    reply = self.handle(request)
            except (ValueError, RltunedError) as exc:
                reply = {"ok": False, "error": str(exc)}
            except Exception as exc:  # a malformed request must never go unanswered (nor kill the thread)
                get_logger().error(
                    "control_request_failed", error=f"{type(exc).__name__}: {exc}", exc_info=True
                )
                reply = {"ok": False, "error": f"bad request: {type(exc).__name__}: {exc}"}
        with contextlib.suppress(OSError):  # a client that gave up waiting needs no answer
            wfile.write(json.dumps(reply, default=str).encode() + b"\n")


def request(path: Path, payload: Mapping[str, Any], timeout_s: float = 120.0) -> dict[str, Any]:
    """Send one request to a running daemon; raises RltunedError when it cannot be reached."""
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout_s)
            sock.connect(str(path))
            sock.sendall(json.dumps(payload).encode() + b"\n")
            data = b""
            while not data.endswith(b"\n"):
                chunk = sock.recv(1 << 16)
                if not chunk:
                    break
                data += chunk
    except FileNotFoundError:
        raise DaemonUnreachable(f"{path}: no daemon socket (is rltuned running?)") from None
    except PermissionError:
        raise RltunedError(f"{path}: permission denied (ask for the socket's group)") from None
    except OSError as exc:
        raise DaemonUnreachable(f"{path}: {exc.strerror or exc}") from None
    try:
        reply = json.loads(data)
    except json.JSONDecodeError:
        raise RltunedError(f"{path}: the daemon closed the connection without a reply") from None
    if not isinstance(reply, dict):
        raise RltunedError(f"{path}: unexpected reply {reply!r}")
    return reply


def _in_group(uid: int, gid: int, group: int) -> bool:
    """The peer's primary group, or a supplementary membership by name."""
    if gid == group:
        return True
    try:
        return pwd.getpwuid(uid).pw_name in grp.getgrgid(group).gr_mem
    except KeyError:
        return False


class DaemonUnreachable(RltunedError):
    """No daemon is listening on the control socket."""


def _user_id(name: str) -> int:
    try:
        return pwd.getpwnam(name).pw_uid
    except KeyError:
        raise ConfigError(f"control.owner: no user named {name!r}") from None


def _group_id(name: str, key: str = "control.group") -> int:
    try:
        return grp.getgrnam(name).gr_gid
    except KeyError:
        raise ConfigError(f"{key}: no group named {name!r}") from None
