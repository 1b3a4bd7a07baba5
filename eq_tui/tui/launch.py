"""`eq-tui MANIFEST`: run the engines and the UI in one event loop; the exit code follows the
command-line contract (0 when the person quits with q, 130 on a signal before the queue
finished), and one line after the UI says what keeps running and how to come back."""

from __future__ import annotations

import asyncio
import shlex
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from eq_tui.api import EngineClient, JobState
from eq_tui.tui.app import EqTuiApp

INTERRUPTED = 130


class _Source(Protocol):
    @property
    def source(self) -> str: ...


class _RunDir(Protocol):
    @property
    def summary_file(self) -> Path: ...


class Engine(EngineClient, Protocol):
    """What the UI asks of an engine that runs in this process (cli/run.py builds it): run it,
    stop it, and what to say when the UI is gone."""

    finished: bool

    @property
    def jobs(self) -> Mapping[str, JobState]: ...

    @property
    def manifest(self) -> _Source: ...

    @property
    def run_dir(self) -> _RunDir: ...

    async def run(self) -> int: ...

    def request_stop(self) -> None: ...


async def run_app(engines: Sequence[Engine], *, theme: str | None = None) -> int:
    app = EqTuiApp(list(engines), theme=theme)
    tasks = [asyncio.create_task(engine.run()) for engine in engines]

    def report(task: asyncio.Task[int]) -> None:
        if not task.cancelled() and task.exception() is not None and app.is_running:
            app.notify(f"an engine stopped: {task.exception()!r}", severity="error",
                       timeout=60)

    for task in tasks:
        task.add_done_callback(report)
    try:
        await app.run_async()
    finally:
        for engine in engines:
            engine.request_stop()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    for result in results:
        if isinstance(result, BaseException):
            raise result
    codes = [int(code) for code in results if isinstance(code, int)]
    print(f"eq-tui: {quit_line(engines)}", file=sys.stderr)
    if not all(engine.finished for engine in engines):
        # the person chose to quit (q, y): not an interruption; a signal stays 130
        return 0 if app.quit_chosen else INTERRUPTED
    return max(codes, default=0)


def quit_line(engines: Sequence[Engine]) -> str:
    """What keeps running after the UI is gone, and how to come back."""
    running = sum(1 for e in engines for job in e.jobs.values() if job.status.is_active)
    waiting = sum(1 for e in engines for job in e.jobs.values() if job.status.is_waiting)
    again = "eq-tui " + " ".join(shlex.quote(e.manifest.source) for e in engines)
    if all(engine.finished for engine in engines):
        return "the queue has finished; summary in " + ", ".join(
            str(e.run_dir.summary_file) for e in engines)
    if running:
        return (f"{running} {'job keeps' if running == 1 else 'jobs keep'} running in "
                f"{'its session' if running == 1 else 'their sessions'}"
                f"{f' ({waiting} waiting)' if waiting else ''}; `{again}` resumes the queue "
                "and adopts them")
    return f"nothing is running; `{again}` resumes the queue ({waiting} waiting)"
