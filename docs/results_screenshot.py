"""The README's results-screen SVG, from a finished demo run dir (its state file as a snapshot):

    .venv/bin/python docs/results_screenshot.py \
        sample_manifests/experiment_queue/demo docs/results-screen.svg
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.results.settings import read_settings
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.screens.results import ResultsScreen
from tests.tui.fake_client import FakeClient, sample_snapshot


async def shoot(run_dir: Path, out: Path) -> None:
    state = json.loads((run_dir / "queue_state.json").read_text())
    settings = read_settings(run_dir)
    now = max(job["ended"] or 0.0 for job in state["jobs"])
    snapshot = sample_snapshot()
    snapshot.update(jobs=state["jobs"], hosts=[], alerts=[], finished=True, now=now)
    snapshot["settings"].update(goals=settings.goals, group_over=settings.group_over)
    app = EqTuiApp([FakeClient(snapshot, clock=lambda: now)], clock=lambda: now)
    async with app.run_test(size=(150, 22)) as pilot:
        await pilot.pause(0.5)
        await pilot.press("R")
        while not isinstance(app.screen, ResultsScreen):
            await pilot.pause(0.05)
        await pilot.pause(0.5)
        app.save_screenshot(str(out))


if __name__ == "__main__":
    asyncio.run(shoot(Path(sys.argv[1]), Path(sys.argv[2])))
