"""Waiting in Pilot tests: poll for the state expected, never a fixed sleep."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from textual.pilot import Pilot


async def eventually(pilot: Pilot[int], predicate: Callable[[], bool], timeout: float = 5.0,
                     what: str = "") -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {what or predicate}")
        await pilot.pause(0.05)
