"""The control socket, the engine's side: serves the EngineClient interface over a Unix
socket (the protocol and the client are api/control_client.py)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol

from eq_tui.api.client import CommandResult, EngineClient, SecretsAnswer, Snapshot
from eq_tui.api.control_client import MAX_LINE, POINTER_NAME, socket_path_for
from eq_tui.api.events import Event


class ControlServer:
    def __init__(self, engine: Served, run_dir: Path) -> None:
        self.engine = engine
        self.run_dir = Path(run_dir)
        self.path = socket_path_for(self.run_dir)
        self._server: asyncio.AbstractServer | None = None
        self._clients: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()  # a dead engine's socket; the run-dir lock says we own it now
        old_umask = os.umask(0o177)
        try:
            self._server = await asyncio.start_unix_server(self._serve, path=str(self.path),
                                                           limit=MAX_LINE)
        finally:
            os.umask(old_umask)
        os.chmod(self.path, 0o600)
        pointer = self.run_dir / POINTER_NAME
        pointer.write_text(json.dumps({"socket": str(self.path), "pid": os.getpid()}))

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            for task in list(self._clients):
                task.cancel()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()
            self._server = None
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / POINTER_NAME).unlink()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._clients.add(task)
        connection = _Connection(self.engine, writer)
        try:
            await connection.serve(reader)
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            connection.close()
            self._clients.discard(task)


class _Connection:
    """One client's connection: each request line is handled by the handler its `op` names
    (OPS), and answered with a reply or an error carrying the request's id."""

    def __init__(self, engine: Served, writer: asyncio.StreamWriter) -> None:
        self.engine = engine
        self.writer = writer
        self.lock = asyncio.Lock()
        self.queue: asyncio.Queue[Event] | None = None
        self.pump: asyncio.Task[None] | None = None
        self.ops: dict[str, Callable[[dict[str, Any]], Awaitable[Any]]] = {
            "subscribe": self.subscribe, "snapshot": self.snapshot, "command": self.command,
            "tail": self.tail, "secrets": self.secrets}

    async def serve(self, reader: asyncio.StreamReader) -> None:
        while True:
            try:
                line = await reader.readline()
            except (ValueError, asyncio.LimitOverrunError):
                await self.send({"type": "error", "id": None, "error": "request line too long"})
                return
            if not line:
                return
            request_id = None
            try:
                request = json.loads(line)
                if not isinstance(request, dict):
                    raise ValueError("a request is a JSON object")
                request_id = request.get("id")
                handler = self.ops.get(str(request.get("op")))
                if handler is None:
                    raise ValueError(f"unknown op {request.get('op')!r}")
                answer = await handler(request)
                if handler != self.subscribe:
                    await self.send({"type": "reply", "id": request_id, "result": answer})
            except (ValueError, TypeError) as exc:
                await self.send({"type": "error", "id": request_id, "error": str(exc)})

    async def send(self, data: dict[str, Any]) -> None:
        async with self.lock:
            self.writer.write(json.dumps(data, default=str).encode() + b"\n")
            await self.writer.drain()

    def close(self) -> None:
        if self.pump is not None:
            self.pump.cancel()
        if self.queue is not None:
            self.engine.unsubscribe(self.queue)
        with contextlib.suppress(Exception):
            self.writer.close()

    # ---- the ops ---------------------------------------------------------------------------

    async def subscribe(self, request: dict[str, Any]) -> None:
        """The snapshot, then every event as it is published (once per connection)."""
        if self.queue is not None:
            return
        self.queue = self.engine.subscribe()
        await self.send({"type": "snapshot", "id": request.get("id"),
                         "snapshot": self.engine.snapshot()})
        self.pump = asyncio.create_task(self._forward(self.queue))

    async def _forward(self, events: asyncio.Queue[Event]) -> None:
        while True:
            await self.send((await events.get()).to_json())

    async def snapshot(self, request: dict[str, Any]) -> Snapshot:
        return self.engine.snapshot()

    async def command(self, request: dict[str, Any]) -> CommandResult:
        jobs = request.get("jobs") or []
        if not isinstance(jobs, list) or not all(isinstance(j, str) for j in jobs):
            raise ValueError("jobs must be a list of job ids")
        args = request.get("args") or {}
        command_id = request.get("command_id")
        if not isinstance(args, dict):
            raise ValueError("args must be an object")
        if command_id is not None and not isinstance(command_id, str):
            raise ValueError("command_id must be a string")
        return await self.engine.command(str(request.get("name")), jobs, args, command_id)

    async def tail(self, request: dict[str, Any]) -> list[str]:
        attempt = request.get("attempt")
        return await self.engine.tail(str(request.get("job")),
                                      int(attempt) if attempt is not None else None,
                                      max(1, min(5000, int(request.get("lines", 200)))))

    async def secrets(self, request: dict[str, Any]) -> SecretsAnswer:
        values = request.get("values") or {}
        if not isinstance(values, dict) or not all(
                isinstance(k, str) and isinstance(v, str) for k, v in values.items()):
            raise ValueError("values must map names to strings")
        return await self.engine.provide_secrets(values, str(request.get("project")))


class Served(EngineClient, Protocol):
    def close_with(self, closer: Callable[[], Awaitable[None]]) -> None: ...

    async def provide_secrets(self, values: dict[str, str], project: str) -> SecretsAnswer: ...


async def serve_control(engine: Served, run_dir: Path) -> ControlServer:
    """The engine's control socket, served beside it; it closes when the engine shuts down,
    before the run dir's lock is released."""
    server = ControlServer(engine, run_dir)
    await server.start()
    engine.close_with(server.close)
    return server
