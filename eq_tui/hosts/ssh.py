"""One asyncssh connection per host, reused for every command, kept alive by a supervisor.

Host keys are verified against known_hosts (the ssh config's UserKnownHostsFile, else
~/.ssh/known_hosts); an unknown or changed key is refused with what to run, never accepted.
While a host is down, commands fail fast with the reason and a background task reconnects
with jittered exponential backoff; the other hosts are not affected.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shlex
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncssh

from eq_tui.errors import HostError
from eq_tui.hosts.runner import CommandResult, LineStream
from eq_tui.manifest.ssh_target import FORMS, parse_ssh_target

BACKOFF_START_S = 0.5
BACKOFF_MAX_S = 30.0
REFUSED_RETRY_S = 60.0  # a refused host key is retried rarely: the user has to act first


@dataclass(frozen=True)
class HostLinkState:
    state: str  # connecting | up | down | refused
    since: float
    reason: str = ""


def default_ssh_config() -> str | None:
    home_config = Path.home() / ".ssh" / "config"
    return str(home_config) if home_config.is_file() else None


class SshRunner:
    def __init__(self, host_label: str, target: str, *, config_path: str | None = None,
                 connect_timeout: float = 10.0, keepalive_interval: float = 15.0,
                 max_channels: int = 8) -> None:
        parsed = parse_ssh_target(target)
        if parsed is None:
            raise HostError(f"{host_label}: {target!r} is not {FORMS}")
        self.label = host_label
        self.target = target
        self._host = parsed.host
        self._user = parsed.user
        self._port = parsed.port
        self.config_path = config_path or default_ssh_config()
        self.connect_timeout = connect_timeout
        self.keepalive_interval = keepalive_interval
        self._channels = asyncio.Semaphore(max_channels)
        self._conn: asyncssh.SSHClientConnection | None = None
        self._connect_lock = asyncio.Lock()
        self._supervisor: asyncio.Task[None] | None = None
        self._watcher: asyncio.Task[None] | None = None
        self._closed = False
        self.link = HostLinkState("connecting", time.time())
        self.connections_made = 0

    # ---- state -------------------------------------------------------------------------------

    def _set_state(self, state: str, reason: str = "") -> None:
        if state == self.link.state and reason == self.link.reason:
            return
        self.link = HostLinkState(state, time.time(), reason)

    def _where(self) -> str:
        return f"{self._host}:{self._port}" if self._port else self._host

    def _explain(self, exc: BaseException) -> tuple[str, str]:
        """(state, message) for a failed connection attempt."""
        if isinstance(exc, asyncssh.HostKeyNotVerifiable):
            port = self._port or 22
            known = f"[{self._host}]:{port}" if port != 22 else self._host
            return "refused", (
                f"{self.label}: the host key of {self._where()} is not trusted (unknown, or "
                f"changed since it was recorded): {exc}. eq-tui never accepts a host key on its "
                f"own. If the host is new, check its fingerprint and run `ssh-keyscan -p {port} "
                f"{self._host} >> ~/.ssh/known_hosts`; if its key changed on purpose, run "
                f"`ssh-keygen -R '{known}'` first.")
        if isinstance(exc, asyncssh.PermissionDenied):
            return "refused", f"{self.label}: permission denied for {self.target}: {exc}"
        if isinstance(exc, TimeoutError):
            return "down", f"{self.label}: no answer from {self.target} within " \
                           f"{self.connect_timeout:g} s"
        text = str(exc) or type(exc).__name__
        return "down", f"{self.label}: cannot connect to {self.target}: {text}"

    # ---- connecting --------------------------------------------------------------------------

    async def _open(self) -> asyncssh.SSHClientConnection:
        kwargs: dict[str, Any] = {
            "connect_timeout": self.connect_timeout,
            "keepalive_interval": self.keepalive_interval,
            "keepalive_count_max": 3,
        }
        if self.config_path:
            kwargs["config"] = [self.config_path]
        if self._port is not None:
            kwargs["port"] = self._port
        if self._user is not None:
            kwargs["username"] = self._user
        return await asyncssh.connect(self._host, **kwargs)

    async def _ensure(self) -> asyncssh.SSHClientConnection:
        if self._conn is not None:
            return self._conn
        if self._closed:
            raise HostError(f"{self.label}: connection closed")
        if self._supervisor is not None and not self._supervisor.done():
            since = time.strftime("%H:%M:%S", time.localtime(self.link.since))
            raise HostError(f"{self.link.reason or self.label + ' is down'} "
                            f"(since {since}; reconnecting)")
        async with self._connect_lock:
            if self._conn is not None:
                return self._conn
            try:
                conn = await self._open()
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                state, message = self._explain(exc)
                self._set_state(state, message)
                self._start_supervisor()
                raise HostError(message) from None
            self._adopt(conn)
            return conn

    def _adopt(self, conn: asyncssh.SSHClientConnection) -> None:
        self._conn = conn
        self.connections_made += 1
        self._set_state("up")
        self._watcher = asyncio.create_task(self._watch(conn))

    async def _watch(self, conn: asyncssh.SSHClientConnection) -> None:
        with contextlib.suppress(Exception):
            await conn.wait_closed()
        if self._conn is conn:
            self._conn = None
            if not self._closed:
                self._set_state("down", f"{self.label}: connection to {self.target} lost")
                self._start_supervisor()

    def _start_supervisor(self) -> None:
        if self._closed or (self._supervisor is not None and not self._supervisor.done()):
            return
        self._supervisor = asyncio.create_task(self._reconnect())

    async def _reconnect(self) -> None:
        delay = BACKOFF_START_S
        while not self._closed and self._conn is None:
            wait = REFUSED_RETRY_S if self.link.state == "refused" else delay
            await asyncio.sleep(wait * random.uniform(0.8, 1.2))
            try:
                conn = await self._open()
            except (OSError, asyncssh.Error, TimeoutError) as exc:
                state, message = self._explain(exc)
                self._set_state(state, message)
                delay = min(BACKOFF_MAX_S, delay * 2)
                continue
            self._adopt(conn)

    # ---- the CommandRunner interface ---------------------------------------------------------

    async def run(self, script: str, args: Sequence[str] = (), *, stdin: bytes = b"",
                  timeout: float | None = 30.0) -> CommandResult:
        conn = await self._ensure()
        command = shlex.join(["sh", "-c", script, "eq-tui", *args])
        try:
            async with self._channels:
                async with asyncio.timeout(timeout):
                    result = await self._exec(conn, command, stdin)
        except TimeoutError:
            raise HostError(f"{self.label}: a command took longer than {timeout} s") from None
        except (OSError, asyncssh.Error) as exc:
            if self._conn is conn and isinstance(exc, (asyncssh.ConnectionLost, OSError,
                                                       asyncssh.DisconnectError)):
                self._conn = None
                conn.abort()
                self._set_state("down", f"{self.label}: connection to {self.target} lost")
                self._start_supervisor()
            raise HostError(f"{self.label}: {exc}") from None
        stdout = result.stdout if isinstance(result.stdout, bytes) else b""
        stderr = result.stderr if isinstance(result.stderr, bytes) else b""
        code = result.exit_status if result.exit_status is not None else 255
        return CommandResult(code, stdout, stderr)

    async def stream(self, script: str, args: Sequence[str] = (), *,
                     stdin: bytes = b"") -> LineStream:
        """A long-lived command on its own channel of the shared connection (outside the
        channel cap: it would otherwise hold a slot for good)."""
        conn = await self._ensure()
        command = shlex.join(["sh", "-c", script, "eq-tui", *args])
        try:
            process = await conn.create_process(command, encoding=None)
            if stdin:
                process.stdin.write(stdin)
            process.stdin.write_eof()
        except (OSError, asyncssh.Error) as exc:
            raise HostError(f"{self.label}: {exc}") from None
        return _ChannelStream(process)

    @staticmethod
    async def _exec(conn: asyncssh.SSHClientConnection, command: str,
                    stdin: bytes) -> asyncssh.SSHCompletedProcess:
        process = await conn.create_process(command, encoding=None)
        try:
            if stdin:
                process.stdin.write(stdin)
            process.stdin.write_eof()  # scripts read requests until EOF, even when there are none
            return await process.wait(check=False)
        finally:
            process.close()

    async def close(self) -> None:
        self._closed = True
        for task in (self._supervisor, self._watcher):
            if task is not None:
                task.cancel()
                with contextlib.suppress(asyncio.CancelledError, Exception):
                    await task
        if self._conn is not None:
            self._conn.close()
            with contextlib.suppress(Exception):
                await self._conn.wait_closed()
            self._conn = None


class _ChannelStream:
    def __init__(self, process: asyncssh.SSHClientProcess[bytes]) -> None:
        self._process = process

    async def readline(self) -> bytes:
        try:
            line = await self._process.stdout.readline()
        except (OSError, asyncssh.Error):
            return b""
        return line if isinstance(line, bytes) else b""

    async def close(self) -> None:
        self._process.close()
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5):
                await self._process.wait_closed()
