"""`d` on the GPU grid's selected host (issue 44 item 4): it asks first, then the real engine
drains the host (nothing new launches there) and the grid marks it `drained`; `d` again gives
it back and the mark goes. A real engine on simulated hosts (real screen sessions)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.content import Content
from textual.pilot import Pilot

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GpuGrid, HostPanel
from eq_tui.tui.host_line import host_line, line_widths
from eq_tui.tui.screens.confirm import ConfirmScreen
from tests.support.engine_run import job, make_manifest, sim_hosts, start_engine
from tests.tui.pilot_wait import eventually

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.2 --mem 3000"


async def wait_until(pilot: Pilot[int], predicate: Callable[[], bool], what: str) -> None:
    await eventually(pilot, predicate, timeout=45.0, what=what)  # a real engine, real sessions


def title(app: EqTuiApp, host: str) -> str:
    """The border title of the host's full panel ("" when it has none)."""
    for panel in app.query(HostPanel):
        shown = Content.from_markup(str(panel.border_title or "")).plain
        if shown.startswith(f"{host} "):
            return shown
    return ""


def last_line(app: EqTuiApp) -> str:
    found = app.view.job("t/a")
    return str(found[1].get("last_line") or "") if found else ""


def moved_on(app: EqTuiApp) -> Callable[[], bool]:
    """True once the job's last line differs from the one it shows now."""
    seen = last_line(app)
    return lambda: last_line(app) != seen


async def test_d_drains_the_selected_host_after_asking_and_gives_it_back(
        tmp_path: Path) -> None:
    manifest = make_manifest(tmp_path, [job("a", LONG_JOB)],
                             hosts=sim_hosts(("h1", 1), ("h2", 1)))
    run = await start_engine(manifest, tmp_path / "run", exit_when_done=False)
    app = EqTuiApp([run.engine])
    try:
        async with app.run_test(size=(160, 48)) as pilot:
            await wait_until(pilot, lambda: title(app, "h2") != "", "the grid's panels")
            grid = app.query_one(GpuGrid)
            await wait_until(pilot, lambda: grid.selected == "t/h1",
                             "the grid following the table's job to its host")
            grid.focus()
            grid.select("t/h2")
            # the followed job's updates (its epochs) leave the person's pick alone
            for _ in range(3):
                await wait_until(pilot, moved_on(app), "the job's next line")
            assert grid.selected == "t/h2"
            await pilot.press("d")
            assert isinstance(app.screen, ConfirmScreen), app.screen
            assert app.screen.title_text == "Drain h2?"
            await pilot.press("y")
            await wait_until(pilot, lambda: run.engine.ctx.hosts["h2"].cordon == "all",
                             "h2 drained")
            await wait_until(pilot, lambda: "drained" in title(app, "h2"), "the mark")
            assert "drained" not in title(app, "h1")
            await pilot.press("d")
            assert isinstance(app.screen, ConfirmScreen)
            assert app.screen.title_text == "Give h2 back?"
            await pilot.press("y")
            await wait_until(pilot, lambda: run.engine.ctx.hosts["h2"].cordon is None,
                             "h2 given back")
            await wait_until(pilot, lambda: "drained" not in title(app, "h2"), "no mark")
    finally:
        await run.stop()


def test_a_drained_host_line_says_so_and_its_free_gpus_are_not_counted_free() -> None:
    gpus = [{"index": 0, "memory_used_mib": 0, "memory_total_mib": 24576, "drained": True},
            {"index": 1, "memory_used_mib": 0, "memory_total_mib": 24576}]
    host = {"name": "box", "state": "up", "gpus": gpus, "drained": [0]}
    line = host_line("box", host, line_widths(["box"], [host])).plain
    assert line.endswith("drained GPU 0") and "1 free" in line, line
    whole = host_line("box", {**host, "drained": "all"}, line_widths(["box"], [host])).plain
    assert whole.endswith("  drained"), whole
