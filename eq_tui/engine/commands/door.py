"""What a command may ask of the engine beyond the run's state (RunContext): its lock, a wake,
a stop, a write to disk, a look at whether the queue has finished, and the stop of a running
attempt's session. The engine builds one (Engine.__init__); the handlers never see the Engine."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from eq_tui.api.model import JobState
from eq_tui.engine.tick.stops import BackgroundStops
from eq_tui.hosts.base import Stop


class Persist(Protocol):
    def __call__(self, *, whole: bool = False) -> None:
        """The state file now (`whole`: rewritten, not appended to its journal)."""


@dataclass(frozen=True)
class Door:
    lock: asyncio.Lock  # the engine's: a command's changes never interleave with a tick's
    wake: Callable[[], None]  # a full tick soon, to act on what the command changed
    stop_engine: Callable[[], None]  # after the current tick; jobs keep running
    check_finished: Callable[[], None]  # the queue finished (or opened again)?
    persist: Persist
    persist_if_unsaved: Callable[[], None]
    stop_session: Callable[[JobState, str, Stop], Awaitable[None]]
    # wait for the launches under way on a host (run without the lock): a drain's
    settle_launches: Callable[[str], Awaitable[None]]
    stops: BackgroundStops  # stops run beside the ticks (drain --now's)
