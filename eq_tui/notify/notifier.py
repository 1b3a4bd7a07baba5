"""The notifier: the engine's events → notes → the outbox → each target, coalesced.

It reads the engine through the front-end contract (a snapshot, then events), so it runs
beside the engine the way the control socket does. Per target: the first note after a quiet
spell goes out at once; what follows within COALESCE_S waits and goes out as one digest
("5 more jobs stuck: …"). A target that fails is retried with backoff (the same message, the
same id) and an alert says so; nothing it does touches the queue.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from eq_tui.api.client import EngineClient, JobRecord
from eq_tui.api.events import Event, JobStateChanged, JobUpdated
from eq_tui.api.reducer import ProjectState
from eq_tui.manifest.model import NotifySpec
from eq_tui.notify.notes import (
    FINISHED_NAMES,
    Note,
    digest,
    event_note,
    leading,
    phase_note,
    snapshot_notes,
    stuck_note,
)
from eq_tui.notify.outbox import Outbox
from eq_tui.notify.targets import send, target_key

COALESCE_S = 10.0
BACKOFF_S = (2.0, 5.0, 15.0, 60.0, 300.0)
FLUSH_S = 12.0  # at shutdown, how long owed messages may still take
Alert = Callable[[str, str], None]


class Notifier:
    def __init__(self, client: EngineClient, specs: tuple[NotifySpec, ...], run_dir: Path,
                 alert: Alert, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self.project = client.project
        self.specs = {target_key(spec): spec for spec in specs}
        self.outbox = Outbox(run_dir, list(self.specs))
        self.alert = alert
        self.clock = clock
        self.state = ProjectState(project=self.project)
        self.wakes = {key: asyncio.Event() for key in self.specs}
        self.last_sent: dict[str, float] = {}
        self.tasks: list[asyncio.Task[None]] = []
        self.delivered = 0
        self.stuck: dict[str, JobStateChanged] = {}
        self.unfinished: dict[str, set[str]] = {}  # phase -> its jobs not finished yet
        self.flush_s = FLUSH_S
        self.queue: asyncio.Queue[Event] | None = None
        self.reading = False  # an event is being turned into notes

    async def start(self) -> None:
        queue = self.client.subscribe()
        snapshot = self.client.snapshot()
        self.state = ProjectState.from_snapshot(snapshot)
        for job in self.state.jobs.values():
            self.unfinished.setdefault(str(job.get("phase")), set())
            if job.get("status") not in FINISHED_NAMES:
                self.unfinished[str(job.get("phase"))].add(str(job["id"]))
        for note in snapshot_notes(self.project, snapshot):
            self.add(note)
        for phase, left in self.unfinished.items():
            if not left:
                self.add(phase_note(self.project, phase, self.state.jobs.values()))
        self.tasks.append(asyncio.ensure_future(self._read(queue)))
        self.tasks += [asyncio.ensure_future(self._deliver(key)) for key in self.specs]

    def add(self, note: Note) -> None:
        for key, spec in self.specs.items():
            if note.kind in spec.on and self.outbox.add(key, note):
                self.wakes[key].set()

    async def _read(self, queue: asyncio.Queue[Event]) -> None:
        self.queue = queue
        try:
            while True:
                event = await queue.get()
                self.reading = True
                try:
                    self.state.apply(event)
                    await self.on_event(event)
                finally:
                    self.reading = False
        finally:
            self.client.unsubscribe(queue)

    async def on_event(self, event: Event) -> None:
        if isinstance(event, JobStateChanged) and event.new == "stuck":
            self.stuck[event.job] = event  # its record (exit code...) comes next
            return
        if isinstance(event, JobUpdated):
            stuck = self.stuck.pop(event.job, None)
            if stuck is not None:
                job: JobRecord = self.state.jobs.get(event.job) or {}
                self.add(stuck_note(self.project, stuck, job, await self._tail(event.job)))
            self._phase_progress(event.job, event.state)
            return
        note = event_note(self.project, event)
        if note is not None:
            self.add(note)

    def _phase_progress(self, job_id: str, record: Mapping[str, Any]) -> None:
        """Keep each phase's unfinished jobs; a phase left with none is done."""
        phase = str(record.get("phase"))
        left = self.unfinished.setdefault(phase, set())
        if record.get("status") not in FINISHED_NAMES:
            left.add(job_id)
        elif job_id in left or not left:
            left.discard(job_id)
            if not left:
                self.add(phase_note(self.project, phase, self.state.jobs.values()))

    async def _tail(self, job_id: str) -> list[str]:
        with contextlib.suppress(Exception):
            async with asyncio.timeout(5.0):
                return [line for line in await self.client.tail(job_id, None, 5) if line.strip()]
        return []

    # ---- delivery ----------------------------------------------------------------------------

    async def _deliver(self, key: str) -> None:
        spec, wake = self.specs[key], self.wakes[key]
        failures = 0
        while True:
            if not self.outbox.owed(key):
                wake.clear()
                await wake.wait()
            wait = self.last_sent.get(key, -COALESCE_S) + COALESCE_S - self.clock()
            if wait > 0:
                await asyncio.sleep(wait)  # let a burst gather into one digest
            batch = self.outbox.next_batch(key, f"{self.project}-{secrets.token_hex(6)}")
            if batch is None:
                continue
            message = self.message(batch.id, batch.notes)
            error = await send(spec, message)
            self.last_sent[key] = self.clock()
            if error is None:
                self.outbox.sent(key)
                self.delivered += 1
                if failures:
                    self.alert("info", f"notifications to {spec.label} are delivered again")
                failures = 0
                continue
            delay = BACKOFF_S[min(failures, len(BACKOFF_S) - 1)]
            if failures == 0 or failures == len(BACKOFF_S):
                self.alert("warning", f"notification to {spec.label} failed: {error}; "
                           f"retrying (next in {delay:g} s)")
            failures += 1
            await asyncio.sleep(delay)

    def message(self, message_id: str, notes: list[Note]) -> dict[str, Any]:
        notes = leading(notes)
        return {"id": message_id, "project": self.project, "text": digest(notes, self.project),
                "kind": notes[0].kind, "count": len(notes), "event": notes[0].event,
                "events": [{"kind": n.kind, "id": n.id, **n.event} for n in notes]}

    async def close(self) -> None:
        """Give owed messages a moment (FLUSH_S), then stop; the outbox keeps the rest."""
        deadline = self.clock() + self.flush_s
        while self.clock() < deadline and (
                self.reading or (self.queue is not None and not self.queue.empty())
                or any(self.outbox.owed(key) for key in self.specs)):
            await asyncio.sleep(0.1)
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


async def send_test(specs: tuple[NotifySpec, ...], project: str) -> dict[str, str | None]:
    """One test message to every target (no outbox): each target's label → error or None."""
    results: dict[str, str | None] = {}
    for spec in specs:
        message = {"id": f"{project}-test-{secrets.token_hex(4)}", "project": project,
                   "kind": "test", "count": 1,
                   "text": f"[{project}] eq-tui test notification (events: "
                           f"{', '.join(spec.on)})",
                   "event": {"type": "test", "project": project}, "events": []}
        results[spec.label] = await send(spec, message)
    return results


async def serve_notifications(engine: Any, run_dir: Path) -> Notifier | None:
    """Start the manifest's notifications beside an engine (closed before the engine lets go
    of its run dir); None when the manifest has no `notify:`."""
    specs = engine.manifest.notify
    if not specs:
        return None
    notifier = Notifier(engine, specs, run_dir,
                        alert=lambda level, text: engine.ctx.bus.alert(level, text))
    await notifier.start()
    engine.close_with(notifier.close)
    return notifier
