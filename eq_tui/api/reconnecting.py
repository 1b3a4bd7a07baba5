"""A control client that outlives its link: when the stream to the engine drops (an SSH link
cut, a socket reset), it reconnects with a growing pause, says so with alerts, and catches its
subscribers up from a fresh snapshot (as the events they missed: each job, host and the pause
state that differ). A command whose link drops is sent again with the same command id once the
link is back, so the engine applies it once. It gives up when the engine is gone (the connector
finds no engine there) or after a while without one; an engine that exits once its queue has
finished is no lost link and raises no alert (the front end says the run finished). Alerts are
stamped with the wall clock, as the engine's are. With `local_logs`, a log the engine can no
longer be asked for is read from this machine's disk when it is there (`local_tail.py`)."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

from eq_tui.api.client import CommandResult
from eq_tui.api.control_client import ControlClient, LineReader, LineWriter
from eq_tui.api.events import (
    Alert,
    Event,
    HostProbed,
    HostStateChanged,
    JobRetired,
    JobUpdated,
    QueueFinished,
    QueuePaused,
    QueueReopened,
)
from eq_tui.api.local_tail import local_log_path, read_tail
from eq_tui.api.reducer import ProjectState

Streams = tuple[LineReader, LineWriter]
# None: nobody runs there (give up); an exception: not reachable now (try again)
Connector = Callable[[], Awaitable[Streams | None]]
PAUSES_S = (0.2, 0.5, 1.0, 2.0, 4.0, 8.0, 8.0, 8.0, 8.0, 8.0)  # about 48 s in all


def catch_up(old: ProjectState, new: ProjectState, at: float) -> list[Event]:
    """The events that take a picture from `old` to `new`."""
    project = new.project
    events: list[Event] = []
    for job_id, record in new.jobs.items():
        if old.jobs.get(job_id) != record:
            events.append(JobUpdated(project=project, at=at, job=job_id, state=dict(record)))
    events.extend(JobRetired(project=project, at=at, job=job_id)
                  for job_id in old.jobs if job_id not in new.jobs)
    for name, host in new.hosts.items():
        before = old.hosts.get(name, {})
        if (before.get("state"), before.get("reason")) != (host.get("state"),
                                                           host.get("reason")):
            events.append(HostStateChanged(project=project, at=at, host=name,
                                           state=str(host.get("state", "connecting")),
                                           reason=str(host.get("reason") or "")))
        if before.get("gpus") != host.get("gpus") or before.get("nodes") != host.get("nodes"):
            events.append(HostProbed(project=project, at=at, host=name, ok=True,
                                     rtt_s=host.get("rtt_s"),
                                     gpus=tuple(host.get("gpus") or ()),  # type: ignore[arg-type]
                                     nodes=tuple(host.get("nodes") or ())))  # type: ignore[arg-type]
    if old.paused != new.paused:
        events.append(QueuePaused(project=project, at=at, paused=new.paused))
    if new.finished and not old.finished:
        events.append(QueueFinished(project=project, at=at, exit_code=new.exit_code or 0,
                                    finished_at=new.finished_at))
    elif old.finished and not new.finished:
        events.append(QueueReopened(project=project, at=at))
    return events


class ReconnectingClient(ControlClient):
    def __init__(self, where: str, connector: Connector, *,
                 pauses: tuple[float, ...] = PAUSES_S, local_logs: bool = False,
                 clock: Callable[[], float] = time.time) -> None:
        super().__init__(where)
        self._connector = connector
        self._pauses = pauses
        self._local_logs = local_logs
        self._clock = clock
        self._up = asyncio.Event()
        self._closing = False
        self._held: list[Event] | None = None  # events kept back while catching up
        self._supervisor: asyncio.Task[None] | None = None
        self.reconnects = 0

    @classmethod
    async def open(cls, connector: Connector, *, where: str,
                   pauses: tuple[float, ...] = PAUSES_S,
                   local_logs: bool = False) -> ReconnectingClient | None:
        """A connected client, or None when no engine runs there (`local_logs`: the run dir is
        on this machine, so are its local hosts' logs)."""
        streams = await connector()
        if streams is None:
            return None
        client = cls(where, connector, pauses=pauses, local_logs=local_logs)
        try:
            await client._open(*streams)
        except BaseException:
            await client.close()
            raise
        client._up.set()
        client._supervisor = asyncio.create_task(client._supervise())
        return client

    def _deliver(self, event: Event) -> None:
        if self._held is not None:
            self._held.append(event)
        else:
            super()._deliver(event)

    async def _supervise(self) -> None:
        while True:
            if self._listener is not None:
                await asyncio.wait([self._listener])
            self._up.clear()
            if self._closing or not await self._reconnect():
                return

    def _alert(self, level: str, message: str) -> None:
        event = Alert(project=self.project, at=self._clock(), level=level, message=message)
        if self._state is not None:
            self._state.apply(event)
        super()._deliver(event)

    async def _reconnect(self) -> bool:
        old = self._state
        finished = old is not None and old.finished  # its engine exits: look once, at once
        if not finished:
            self._alert("warning", f"lost the link to the engine ({self.where}); reconnecting")
        for pause in (0.0, *self._pauses) if finished else self._pauses:
            await asyncio.sleep(pause)
            if self._closing:
                return False
            try:
                streams = await self._connector()
            except Exception:  # not reachable yet: try again after a longer pause
                continue
            if streams is None:
                if not finished:
                    self._alert("error", f"the engine of {self.where} is gone")
                return False
            self._held = []
            try:
                await self._open(*streams)
            except Exception:
                continue
            finally:
                held, self._held = self._held or [], None
            assert self._state is not None
            for event in held:  # they came before _open took its snapshot in
                self._state.apply(event)
            self.reconnects += 1
            if old is not None:
                for event in catch_up(old, self._state, self._clock()):
                    super()._deliver(event)
            for event in held:
                super()._deliver(event)
            self._alert("info", f"reconnected to the engine ({self.where}); caught up from a "
                                "fresh snapshot")
            self._up.set()
            return True
        self._alert("error", f"could not reconnect to the engine ({self.where}); giving up")
        return False

    async def tail(self, job_id: str, attempt: int | None = None,
                   lines: int = 200) -> list[str]:
        """From the engine; without one, from this machine's disk where the log is here."""
        try:
            return await super().tail(job_id, attempt, lines)
        except ConnectionError:
            path = (local_log_path(self._state, job_id, attempt)
                    if self._local_logs and self._state is not None else None)
            if path is None:
                raise
            return await asyncio.to_thread(read_tail, path, lines)

    async def command(self, name: str, job_ids: list[str] | None = None,
                      args: dict[str, Any] | None = None,
                      command_id: str | None = None) -> CommandResult:
        """Sent again with the same id after a dropped link, once it is back."""
        command_id = command_id or uuid.uuid4().hex
        while True:
            try:
                return await super().command(name, job_ids, args, command_id)
            except ConnectionError:
                if not await self._wait_up():
                    raise

    async def _wait_up(self) -> bool:
        supervisor = self._supervisor
        if supervisor is None or supervisor.done():
            return False
        if not self.connected:
            self._up.clear()  # down, and maybe not yet seen so by the supervisor
        up = asyncio.create_task(self._up.wait())
        await asyncio.wait({up, supervisor}, return_when=asyncio.FIRST_COMPLETED)
        up.cancel()
        return self._up.is_set()

    async def wait_closed(self) -> None:
        """Returns once the client has given up: the engine is gone, or unreachable."""
        if self._supervisor is not None:
            await asyncio.wait([self._supervisor])

    async def close(self) -> None:
        self._closing = True
        if self._supervisor is not None:
            self._supervisor.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._supervisor
        await super().close()
