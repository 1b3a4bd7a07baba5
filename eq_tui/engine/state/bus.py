"""Where the engine's events go: to live subscribers, and the ones that make history to
events.jsonl; alerts are also kept (bounded) for the snapshot."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from eq_tui.api.events import (
    Alert,
    Event,
    Fanout,
    GpuQuarantined,
    HostDrained,
    HostStateChanged,
    JobAdded,
    JobEdited,
    JobPreempted,
    JobPruned,
    JobRetired,
    JobStalled,
    JobStateChanged,
    PhaseHeld,
    PhaseReleased,
    PreflightReported,
    QueueFinished,
    QueuePaused,
    QueueReopened,
)
from eq_tui.engine.state.store import RunDir

MAX_ALERTS = 200
PERSISTED_EVENTS = (JobStateChanged, HostStateChanged, Alert, QueuePaused, QueueFinished,
                    QueueReopened,
                    PreflightReported, JobEdited, JobAdded, JobRetired, PhaseHeld,
                    PhaseReleased, JobStalled, GpuQuarantined, JobPruned, HostDrained,
                    JobPreempted)


class Bus:
    def __init__(self, project: str, run_dir: RunDir, clock: Callable[[], float]) -> None:
        self.project = project
        self.run_dir = run_dir
        self.clock = clock
        self.alerts: list[dict[str, Any]] = []
        self._subscribers = Fanout()
        # the engine's own readers of the stream (the queue's ETA), told as it is published
        self._listeners: list[Callable[[Event], None]] = []

    def subscribe(self) -> asyncio.Queue[Event]:
        return self._subscribers.subscribe()

    def unsubscribe(self, queue: asyncio.Queue[Event]) -> None:
        self._subscribers.unsubscribe(queue)

    def listen(self, listener: Callable[[Event], None]) -> None:
        self._listeners.append(listener)

    def publish(self, event: Event) -> None:
        if isinstance(event, PERSISTED_EVENTS):
            self.run_dir.append_event(event.to_json())
        for listener in self._listeners:
            listener(event)
        self._subscribers.publish(event)

    def alert(self, level: str, message: str, *, host: str | None = None,
              job: str | None = None) -> None:
        event = Alert(project=self.project, at=self.clock(), level=level, message=message,
                      host=host, job=job)
        self.alerts.append(event.to_json())
        del self.alerts[:-MAX_ALERTS]
        self.publish(event)
