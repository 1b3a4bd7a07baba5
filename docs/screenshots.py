"""Regenerate the README's screenshots from the UI tests' in-memory engine client (fixed clock,
the same data as tests/tui/test_snapshots.py):

    .venv/bin/python docs/screenshots.py
"""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.tui.app import EqTuiApp
from tests.tui.fake_client import (
    T0,
    FakeClient,
    fleet_snapshot,
    packed_snapshot,
    sample_snapshot,
)

DOCS = Path(__file__).resolve().parent
SHOTS: dict[str, tuple[Callable[[], dict[str, Any]], tuple[int, int]]] = {
    "screenshot.svg": (sample_snapshot, (160, 48)),
    "screenshot-16-hosts.svg": (lambda: fleet_snapshot(16, 4), (160, 48)),
    "screenshot-80x24.svg": (sample_snapshot, (80, 24)),
    "screenshot-packed.svg": (packed_snapshot, (160, 48)),
}


async def shoot(name: str, snapshot: dict[str, Any], size: tuple[int, int]) -> None:
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0, theme="eq-dark")
    async with app.run_test(size=size) as pilot:
        await pilot.pause(0.5)  # the log pane's first tail
        app.save_screenshot(name, str(DOCS))
    print(f"wrote {DOCS / name}")


def main() -> None:
    for name, (make, size) in SHOTS.items():
        asyncio.run(shoot(name, make(), size))


if __name__ == "__main__":
    main()
