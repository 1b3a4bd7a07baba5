"""The control socket, the client's side: the EngineClient interface over a Unix socket,
newline-delimited JSON (the engine's side is engine/commands/control_server.py).

Requests (one JSON object per line, `id` echoed in the reply):
    {"op": "subscribe"}                            -> {"type": "snapshot", "snapshot": {...}}
                                                      then every event as its JSON, one a line
    {"op": "snapshot", "id": 1}                    -> {"type": "reply", "id": 1, "result": {...}}
    {"op": "command", "id": 2, "name": "kill", "jobs": ["a"], "args": {}, "command_id": "c1"}
                                                   -> {"type": "reply", "id": 2, "result": {...}}
    {"op": "tail", "id": 3, "job": "a", "attempt": null, "lines": 200}
                                                   -> {"type": "reply", "id": 3, "result": [...]}
    {"op": "secrets", "id": 4, "project": "p", "values": {"WANDB_API_KEY": "..."}}
                                                   -> {"type": "reply", "id": 4, "result":
                                                       {"given", "refused", "missing", "error"}}
A malformed request gets {"type": "error", "id": ..., "error": "..."} and the connection stays.
The socket lives in the run dir (mode 0600); when that path is too long for a Unix socket it
lives in a private temp dir and `control.json` in the run dir says where.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import tempfile
import uuid
from pathlib import Path
from typing import Any, Protocol

from eq_tui.api.client import CommandResult, SecretsAnswer, Snapshot
from eq_tui.api.commands import Command
from eq_tui.api.events import Event, Fanout, event_from_json
from eq_tui.api.reducer import ProjectState

SOCKET_NAME = "control.sock"
POINTER_NAME = "control.json"
MAX_SOCKET_PATH = 100  # sun_path is 108 bytes on Linux
MAX_LINE = 1 << 20


def socket_path_for(run_dir: Path) -> Path:
    path = Path(run_dir).resolve() / SOCKET_NAME
    if len(str(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(str(path).encode()).hexdigest()[:16]
    private = Path(tempfile.gettempdir()) / f"eq-tui-{os.getuid()}"
    private.mkdir(mode=0o700, exist_ok=True)
    return private / f"{digest}.sock"


def find_socket(run_dir: Path) -> Path | None:
    pointer = Path(run_dir) / POINTER_NAME
    with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
        return Path(json.loads(pointer.read_text())["socket"])
    return None


class LineReader(Protocol):
    async def readline(self) -> bytes:
        """The next line with its newline; b"" at the end of the stream."""
        ...


class LineWriter(Protocol):
    def write(self, data: bytes) -> None: ...

    async def drain(self) -> None: ...

    def close(self) -> None: ...


class ControlClient:
    """An EngineClient for an engine in another process, reached through its control socket:
    directly (`connect`), or over any byte stream to that socket, such as an SSH channel (`over`).
    """

    def __init__(self, where: str) -> None:
        self.where = where
        self.project = ""
        self._state: ProjectState | None = None
        self._subscribers = Fanout()
        self._pending: dict[int, asyncio.Future[Any]] = {}
        self._next_id = 0
        self._reader: LineReader | None = None
        self._writer: LineWriter | None = None
        self._listener: asyncio.Task[None] | None = None
        self.connected = False

    @classmethod
    async def connect(cls, run_dir: Path) -> ControlClient:
        path = find_socket(run_dir) or socket_path_for(run_dir)
        reader, writer = await asyncio.open_unix_connection(str(path), limit=64 * MAX_LINE)
        return await cls.over(reader, writer, where=str(path))

    @classmethod
    async def over(cls, reader: LineReader, writer: LineWriter, *, where: str) -> ControlClient:
        """Subscribe through an open stream to a control socket; returns once the snapshot is in.
        """
        client = cls(where)
        try:
            await client._open(reader, writer)
        except BaseException:
            await client.close()
            raise
        return client

    async def _open(self, reader: LineReader, writer: LineWriter) -> None:
        self._reader, self._writer = reader, writer
        first = asyncio.get_running_loop().create_future()
        self._pending[-1] = first
        self._listener = asyncio.create_task(self._listen())
        await self._send({"op": "subscribe", "id": -1})
        self._state = ProjectState.from_snapshot(await first)
        self.project = self._state.project
        self.connected = True

    async def _send(self, data: dict[str, Any]) -> None:
        assert self._writer is not None
        self._writer.write(json.dumps(data).encode() + b"\n")
        await self._writer.drain()

    async def _listen(self) -> None:
        assert self._reader is not None
        try:
            while True:
                line = await self._reader.readline()
                if not line:
                    break
                data = json.loads(line)
                kind = data.get("type")
                if kind == "snapshot":
                    self._resolve(-1, data["snapshot"])
                elif kind == "reply":
                    self._resolve(data.get("id"), data.get("result"))
                elif kind == "error":
                    future = self._pending.pop(data.get("id"), None)
                    if future is not None and not future.done():
                        future.set_exception(RuntimeError(data.get("error")))
                else:
                    event = event_from_json(data)
                    if self._state is not None:
                        self._state.apply(event)
                    self._deliver(event)
        except (ConnectionError, ValueError):
            pass
        finally:
            self.connected = False
            for future in self._pending.values():
                if not future.done():
                    future.set_exception(ConnectionError("engine connection closed"))
            self._pending.clear()

    def _deliver(self, event: Event) -> None:
        self._subscribers.publish(event)

    def _resolve(self, request_id: int | None, value: Any) -> None:
        future = self._pending.pop(request_id if request_id is not None else -2, None)
        if future is not None and not future.done():
            future.set_result(value)

    async def _request(self, data: dict[str, Any]) -> Any:
        if not self.connected:
            raise ConnectionError("not connected to the engine")
        self._next_id += 1
        data["id"] = self._next_id
        future = asyncio.get_running_loop().create_future()
        self._pending[self._next_id] = future
        await self._send(data)
        return await future

    def snapshot(self) -> Snapshot:
        """Kept current by the events, so it needs no round trip."""
        return self._state.to_snapshot() if self._state is not None else {}

    def subscribe(self) -> asyncio.Queue[Event]:
        return self._subscribers.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self._subscribers.unsubscribe(queue)

    async def command(self, name: str, job_ids: list[str] | None = None,
                      args: dict[str, Any] | None = None,
                      command_id: str | None = None) -> CommandResult:
        """`command_id` defaults to a fresh one; send the same one again after a dropped link
        and the engine answers with the first one's result instead of applying it twice."""
        result: CommandResult = await self._request({
            "op": "command", "name": name, "jobs": job_ids or [], "args": args or {},
            "command_id": command_id or uuid.uuid4().hex})
        return result

    async def send(self, command: Command, command_id: str | None = None) -> CommandResult:
        name, targets, arguments = command.wire()
        return await self.command(name, targets, arguments, command_id)

    async def tail(self, job_id: str, attempt: int | None = None,
                   lines: int = 200) -> list[str]:
        result: list[str] = await self._request({"op": "tail", "job": job_id,
                                                 "attempt": attempt, "lines": lines})
        return result

    async def provide_secrets(self, values: dict[str, str], project: str) -> SecretsAnswer:
        """Hands secrets the engine lacks to it (an empty `values` asks which it lacks); they
        travel on this stream only."""
        answer: SecretsAnswer = await self._request({"op": "secrets", "project": project,
                                                     "values": values})
        return answer

    async def wait_closed(self) -> None:
        """Returns once the engine's stream has ended: it stopped, or the connection dropped."""
        if self._listener is not None:
            await asyncio.wait([self._listener])

    async def close(self) -> None:
        if self._listener is not None:
            self._listener.cancel()
        if self._writer is not None:
            with contextlib.suppress(Exception):
                self._writer.close()
        self.connected = False
