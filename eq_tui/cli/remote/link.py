"""One SSH connection to the host of a remote run dir: find the run dir and its control socket
there, and open a byte stream to that socket through the connection (a direct-streamlocal
channel, as `ssh -L local.sock:remote.sock` would, without a local socket file)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import asyncssh

from eq_tui.api.control_client import ControlClient, LineReader, LineWriter
from eq_tui.cli.remote.shell import remote_script
from eq_tui.cli.remote.target import RemoteTarget
from eq_tui.errors import HostError, RunDirError
from eq_tui.hosts.ssh import SshRunner

CONNECT_TIMEOUT_S = 15.0


@dataclass(frozen=True)
class RemoteRunDir:
    host: str
    path: str            # absolute, on the host
    has_state: bool
    socket: str | None   # from the engine's control pointer; None when no engine said it runs

    def __str__(self) -> str:
        return f"{self.host}:{self.path}"


class _ChannelReader:
    """An SSH channel's reader whose failures read as the end of the stream."""

    def __init__(self, reader: asyncssh.SSHReader[bytes]) -> None:
        self._reader = reader

    async def readline(self) -> bytes:
        try:
            line = await self._reader.readline()
        except (OSError, asyncssh.Error):
            return b""
        return line


class _ChannelWriter:
    def __init__(self, writer: asyncssh.SSHWriter[bytes]) -> None:
        self._writer = writer

    def write(self, data: bytes) -> None:
        try:
            self._writer.write(data)
        except (OSError, asyncssh.Error) as exc:
            raise ConnectionError(f"connection to the engine lost: {exc}") from None

    async def drain(self) -> None:
        try:
            await self._writer.drain()
        except (OSError, asyncssh.Error) as exc:
            raise ConnectionError(f"connection to the engine lost: {exc}") from None

    def close(self) -> None:
        self._writer.close()


class RemoteLink(SshRunner):
    """The SSH connection to one host, with the lookups the remote commands need."""

    def __init__(self, host: str, *, config_path: str | None = None) -> None:
        super().__init__(host, host, config_path=config_path, connect_timeout=CONNECT_TIMEOUT_S)

    async def locate(self, target: RemoteTarget) -> RemoteRunDir:
        result = await self.run(remote_script("locate.sh"), [target.run_dir])
        if result.returncode == 3:
            raise RunDirError(f"{target}: no such directory on {target.host}")
        fields = result.stdout.split(b"\0")
        if result.returncode != 0 or len(fields) < 3:
            said = result.stderr.decode(errors="replace").strip()
            raise RunDirError(f"{target}: could not look at it on {target.host} (exit "
                              f"{result.returncode}: {said})")
        path, state, pointer = (f.decode(errors="surrogateescape") for f in fields[:3])
        socket: str | None = None
        try:
            socket = str(json.loads(pointer)["socket"]) if pointer.strip() else None
        except (ValueError, KeyError, TypeError):
            socket = None
        return RemoteRunDir(target.host, path, state == "state", socket)

    async def read_json(self, path: str) -> Any:
        """A JSON file on the host, or None when it is missing or unreadable."""
        result = await self.run(remote_script("read_file.sh"), [path], timeout=120)
        if result.returncode != 0:
            return None
        try:
            return json.loads(result.stdout)
        except ValueError:
            return None

    async def streams(self, run_dir: RemoteRunDir) -> tuple[LineReader, LineWriter] | None:
        """A byte stream to the control socket of `run_dir`'s engine, or None when no engine
        answers there."""
        if run_dir.socket is None:
            return None
        conn = await self._ensure()
        try:
            reader, writer = await conn.open_unix_connection(run_dir.socket)
        except (OSError, asyncssh.Error):
            return None  # a pointer left by an engine that was killed: nothing listens
        return _ChannelReader(reader), _ChannelWriter(writer)

    async def control(self, run_dir: RemoteRunDir) -> ControlClient | None:
        """A client of the engine of `run_dir`, or None when no engine answers there."""
        opened = await self.streams(run_dir)
        if opened is None:
            return None
        try:
            return await ControlClient.over(*opened, where=f"{run_dir.host}:{run_dir.socket}")
        except (ConnectionError, OSError, ValueError):
            return None


async def open_link(host: str, config_path: str | None, *, read_from: str = "") -> RemoteLink:
    """A connected link, or a HostError; `read_from` is the argument the host came from."""
    link = RemoteLink(host, config_path=config_path)
    try:
        await link.run("true")
    except HostError as exc:
        await link.close()
        hint = (f"\n(read {read_from!r} as HOST:RUN_DIR; a local path with a colon is taken "
                "as a path only when it exists)") if read_from else ""
        raise HostError(f"{exc}{hint}") from None
    return link
