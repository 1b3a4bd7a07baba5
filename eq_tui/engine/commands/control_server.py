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

from eq_tui.api.client import EngineClient, SecretsAnswer
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
        lock = asyncio.Lock()
        queue: asyncio.Queue[Event] | None = None
        pump: asyncio.Task[None] | None = None

        async def send(data: dict[str, Any]) -> None:
            async with lock:
                writer.write(json.dumps(data, default=str).encode() + b"\n")
                await writer.drain()

        async def forward(events: asyncio.Queue[Event]) -> None:
            while True:
                await send((await events.get()).to_json())

        try:
            while True:
                try:
                    line = await reader.readline()
                except (ValueError, asyncio.LimitOverrunError):
                    await send({"type": "error", "id": None, "error": "request line too long"})
                    break
                if not line:
                    break
                request_id = None
                try:
                    request = json.loads(line)
                    if not isinstance(request, dict):
                        raise ValueError("a request is a JSON object")
                    request_id = request.get("id")
                    op = request.get("op")
                    if op == "subscribe":
                        if queue is None:
                            queue = self.engine.subscribe()
                            await send({"type": "snapshot", "id": request_id,
                                        "snapshot": self.engine.snapshot()})
                            pump = asyncio.create_task(forward(queue))
                    elif op == "snapshot":
                        await send({"type": "reply", "id": request_id,
                                    "result": self.engine.snapshot()})
                    elif op == "command":
                        jobs = request.get("jobs") or []
                        if not isinstance(jobs, list) or not all(isinstance(j, str)
                                                                 for j in jobs):
                            raise ValueError("jobs must be a list of job ids")
                        args = request.get("args") or {}
                        command_id = request.get("command_id")
                        if not isinstance(args, dict):
                            raise ValueError("args must be an object")
                        if command_id is not None and not isinstance(command_id, str):
                            raise ValueError("command_id must be a string")
                        result = await self.engine.command(str(request.get("name")), jobs,
                                                           args, command_id)
                        await send({"type": "reply", "id": request_id, "result": result})
                    elif op == "tail":
                        attempt = request.get("attempt")
                        lines = await self.engine.tail(
                            str(request.get("job")),
                            int(attempt) if attempt is not None else None,
                            max(1, min(5000, int(request.get("lines", 200)))))
                        await send({"type": "reply", "id": request_id, "result": lines})
                    elif op == "secrets":
                        values = request.get("values") or {}
                        if not isinstance(values, dict) or not all(
                                isinstance(k, str) and isinstance(v, str)
                                for k, v in values.items()):
                            raise ValueError("values must map names to strings")
                        taken = await self.engine.provide_secrets(
                            values, str(request.get("project")))
                        await send({"type": "reply", "id": request_id, "result": taken})
                    else:
                        raise ValueError(f"unknown op {op!r}")
                except (ValueError, TypeError) as exc:
                    await send({"type": "error", "id": request_id, "error": str(exc)})
        except (ConnectionError, asyncio.CancelledError):
            pass
        finally:
            if pump is not None:
                pump.cancel()
            if queue is not None:
                self.engine.unsubscribe(queue)
            with contextlib.suppress(Exception):
                writer.close()
            self._clients.discard(task)


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
