"""Waiting for a state a test expects, never a fixed sleep (docs/testing.md, "Timing")."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable


async def wait_until(check: Callable[[], Awaitable[bool]], timeout: float = 10.0,
                     what: str = "condition") -> None:
    """Until `check()` is true; AssertionError naming `what` after `timeout` seconds."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.05)
