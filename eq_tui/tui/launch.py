"""`eq-tui MANIFEST`: run the engines and the UI in one event loop; the exit code follows the
command-line contract (130 when the user quits before the queue finished)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from eq_tui.engine.engine import Engine
from eq_tui.tui.app import EqTuiApp

INTERRUPTED = 130


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
    if not all(engine.finished for engine in engines):
        return INTERRUPTED
    return max(codes, default=0)
