"""The `--no-ui` front end: a line per job state change and a compact summary every 30 s,
or one JSON object per event with `--json`. Same engine, same interface as the UI: it reads
only the front-end contract (snapshot, events, commands), so the engine may be in this
process or behind a control socket."""

from __future__ import annotations

import asyncio
import contextlib
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TextIO

from eq_tui.api import CommandResult, EngineClient
from eq_tui.api.events import (
    Alert,
    Event,
    HostProbed,
    HostStateChanged,
    JobAdded,
    JobEdited,
    JobRetired,
    JobStateChanged,
    JobUpdated,
    PreflightReported,
    QueueFinished,
    QueuePaused,
    QueueReopened,
)

SUMMARY_EVERY_S = 30.0
INTERRUPTED = 130


def _clock_text(stamp: float) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp))


def format_event(event: Event, *, with_project: bool) -> str | None:
    """One human line for an event, or None for events that only the UI draws."""
    prefix = f"{_clock_text(event.at)} "
    if with_project:
        prefix += f"[{event.project}] "
    if isinstance(event, JobStateChanged):
        where = f"{event.host}:{','.join(map(str, event.gpus))}" if event.host else "-"
        line = f"{prefix}{event.job:<28} {where:<14} {event.old} → {event.new}"
        if event.attempt:
            line += f" (attempt {event.attempt})"
        detail = event.detail if len(event.detail) <= 110 else event.detail[:107] + "..."
        if event.failure_class:
            line += f" [{event.failure_class}]"
            if detail:
                line += f" {detail}"
        elif detail:
            line += f" — {detail}"
        return line
    if isinstance(event, HostStateChanged):
        reason = f": {event.reason}" if event.reason else ""
        return f"{prefix}host {event.host} is {event.state}{reason}"
    if isinstance(event, Alert):
        return f"{prefix}{event.level.upper()}: {event.message}"
    if isinstance(event, QueuePaused):
        return f"{prefix}launching {'paused' if event.paused else 'resumed'}"
    if isinstance(event, PreflightReported):
        if event.ok:
            return None
        job = f" (job {event.job})" if event.job else ""
        return f"{prefix}preflight {event.host}: {event.check} failed{job}: {event.detail}"
    if isinstance(event, QueueFinished):
        counts = ", ".join(f"{k} {v}" for k, v in event.counts.items())
        return f"{prefix}queue finished (exit {event.exit_code}): {counts}"
    if isinstance(event, QueueReopened):
        return f"{prefix}queue reopened: a job has work again"
    return _living_line(event, prefix)


def _living_line(event: Event, prefix: str) -> str | None:
    """What a person changed while the queue runs (edit, clone, add, reload)."""
    who = str(getattr(event, "by", "") or "")
    by = f" (by {who})" if who else ""
    if isinstance(event, JobEdited):
        again = "; it runs again" if event.requeued else ""
        return f"{prefix}{event.job:<28} edited: `{event.old_cmd}` → `{event.new_cmd}`{again}{by}"
    if isinstance(event, JobAdded):
        source = f" of {event.source}" if event.source else ""
        return f"{prefix}{event.job:<28} added ({event.origin}{source}) to {event.phase}{by}"
    if isinstance(event, JobRetired):
        return f"{prefix}{event.job:<28} retired by a reload{by}"
    return None


def status_counts(client: EngineClient) -> Counter[str]:
    return Counter(str(job.get("status")) for job in client.snapshot().get("jobs", []))


def summary_line(client: EngineClient, now: float) -> str:
    snap = client.snapshot()
    jobs = snap.get("jobs", [])
    counts = Counter(str(job.get("status")) for job in jobs)
    parts = [f"{status} {n}" for status, n in sorted(counts.items())]
    hosts = " ".join(f"{h.get('name')}:{h.get('state')}" for h in snap.get("hosts", []))
    elapsed = int(now - float(snap.get("created") or snap.get("started_at") or now))
    paused = " PAUSED" if snap.get("paused") else ""
    held = snap.get("held_phases") or {}
    if held:  # the alert said what to run; this line repeats that the run waits for a person
        paused += f" HELD {', '.join(held)} (waits for a person: `eq-tui status` says what to run)"
    return (f"{_clock_text(now)} [{client.project}] {len(jobs)} "
            f"{'job' if len(jobs) == 1 else 'jobs'}: "
            f"{', '.join(parts)} | hosts {hosts} | {elapsed // 60}m{elapsed % 60:02d}s{paused}")


class Headless:
    def __init__(self, engines: list[EngineClient], *, json_mode: bool = False,
                 out: TextIO | None = None, summary_every: float = SUMMARY_EVERY_S,
                 clock: Callable[[], float] = time.time) -> None:
        self.engines = engines
        self.json_mode = json_mode
        self.out = out or sys.stdout
        self.summary_every = summary_every
        self.clock = clock
        self.interrupted = False
        self._shutdowns: set[asyncio.Future[CommandResult]] = set()

    def _emit(self, text: str) -> None:
        try:
            self.out.write(text + "\n")
            self.out.flush()
        except BrokenPipeError:  # `| head`: keep the engine going, stop printing
            self.out = open("/dev/null", "w")  # noqa: SIM115

    def _print(self, event: Event) -> None:
        if self.json_mode:
            if not isinstance(event, (JobUpdated, HostProbed)):
                self._emit(json.dumps(event.to_json(), default=str))
            return
        line = format_event(event, with_project=len(self.engines) > 1)
        if line is not None:
            self._emit(line)

    async def _pump(self, queue: asyncio.Queue[Event]) -> None:
        while True:
            self._print(await queue.get())

    async def _summaries(self) -> None:
        while True:
            await asyncio.sleep(self.summary_every)
            for engine in self.engines:
                if self.json_mode:
                    self._emit(json.dumps({"type": "summary", "project": engine.project,
                                           "at": self.clock(),
                                           "counts": dict(status_counts(engine))}))
                else:
                    self._emit(summary_line(engine, self.clock()))

    def interrupt(self) -> None:
        self.interrupted = True
        for engine in self.engines:
            task = asyncio.ensure_future(engine.command("shutdown"))
            self._shutdowns.add(task)
            task.add_done_callback(self._shutdowns.discard)

    async def run(self, engines_run: Callable[[], Awaitable[list[int]]]) -> int:
        """Follow the engines until `engines_run` (which runs them, or waits for them) returns
        their exit codes; the exit code follows the README's contract."""
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, self.interrupt)
        queues = [engine.subscribe() for engine in self.engines]
        pumps = [asyncio.create_task(self._pump(q)) for q in queues]
        summaries = asyncio.create_task(self._summaries())
        try:
            codes = await engines_run()
        finally:
            # let the pumps print what the engines published last
            for queue in queues:
                while not queue.empty():
                    self._print(queue.get_nowait())
            for task in (*pumps, summaries):
                task.cancel()
            for sig in (signal.SIGINT, signal.SIGTERM):
                with contextlib.suppress(NotImplementedError, RuntimeError):
                    loop.remove_signal_handler(sig)
        if self.interrupted:
            if not self.json_mode:
                self._emit("interrupted: jobs keep running in their sessions; run the same "
                           "command again to resume")
            return INTERRUPTED
        for engine in self.engines:
            if not self.json_mode:
                self._emit(summary_line(engine, self.clock()))
                run_dir = engine.snapshot().get("run_dir", "")
                self._emit(f"summary: {Path(run_dir) / 'summary.md'}")
        return max(codes) if codes else 0
