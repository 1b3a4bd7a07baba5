"""Ticks side by side. A full tick's probes take a while over many hosts (one slow host holds
them all); meanwhile an exit a watcher reports is judged, and a GPU it reads as released
served, by a tick of their own that probes just the hosts concerned, beside it and beside each
other: an exit never waits for another host's probe. A newer probe of a host wins over an older
one (Observation.apply), and every tick takes the engine's lock to judge and decide."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from typing import Protocol

from eq_tui.engine.tick.observation import Readings
from eq_tui.engine.tick.tick_timing import Pacing


class Tick(Protocol):
    def __call__(self, only: set[str] | None = None, readings: Readings | None = None, *,
                 background_launches: bool = False) -> Awaitable[None]: ...


async def ticks_side_by_side(tick: Tick, pacing: Pacing, stop: asyncio.Event,
                             only: set[str] | None, readings: Readings) -> None:
    """Run one tick (`only` these hosts, None: all), and beside it a tick for each exit or
    release reported while any of them runs; return when none is left running."""
    wake = pacing.wake_event
    ticks = {asyncio.create_task(_run(tick(only, readings, background_launches=True)))}
    try:
        while ticks:
            woken = asyncio.create_task(wake.wait())
            try:
                done, _ = await asyncio.wait({*ticks, woken}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                woken.cancel()
            for task in done & ticks:
                ticks.discard(task)
                task.result()  # a tick's failure is the run's, as when it was awaited
            if stop.is_set():
                await asyncio.gather(*ticks)  # stopping: the ticks under way finish
                ticks.clear()
            elif ticks and wake.is_set():
                wake.clear()
                exits, released = pacing.take_exits(), pacing.take_watch_readings(set())
                if exits or released:
                    ticks.add(asyncio.create_task(
                        _run(tick(exits, released, background_launches=True))))
    finally:
        for task in ticks:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
    if pacing.more_due():
        wake.set()  # woken meanwhile for an exit: the next tick probes that host


async def _run(tick: Awaitable[None]) -> None:
    await tick
