"""The UI on a real engine with simulated GPU hosts (real screen sessions, fake nvidia-smi)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Log

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import HostPanel
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.log_pane import LogPane
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.support.engine_run import EngineRun, job, make_manifest, sim_hosts, start_engine
from tests.tui.pilot_wait import eventually

pytestmark = pytest.mark.integration
LONG_JOB = "fake-train --epochs 300 --epoch-seconds 0.2 --mem 3000"
SIZE = (160, 48)


async def wait_until(pilot: Pilot[int], predicate: Callable[[], bool], what: str = "") -> None:
    await eventually(pilot, predicate, timeout=45.0, what=what)  # a real engine, real sessions


async def engine_with(tmp_path: Path, *job_ids: str) -> EngineRun:
    manifest = make_manifest(tmp_path, [job(j, LONG_JOB) for j in job_ids],
                             hosts=sim_hosts(("sim", 2)))
    return await start_engine(manifest, tmp_path / "run", exit_when_done=False)


def cell(app: EqTuiApp, job_id: str, column: str) -> str:
    return str(app.query_one(JobTable).get_cell(f"t/{job_id}", column))


async def select(app: EqTuiApp, job_id: str) -> None:
    table = app.query_one(JobTable)
    table.move_cursor(row=table.get_row_index(f"t/{job_id}"))
    table.focus()


async def test_kill_retry_requeue_and_pause_on_a_real_engine(tmp_path: Path) -> None:
    run = await engine_with(tmp_path, "a", "b")
    app = EqTuiApp([run.engine])
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: cell(app, "a", "status") == "running"
                             and cell(app, "b", "status") == "running", what="both running")
            await select(app, "a")
            await pilot.press("k")
            assert isinstance(app.screen, ConfirmScreen) and "a" in app.screen.title_text
            await pilot.press("y")
            await wait_until(pilot, lambda: cell(app, "a", "status") == "killed", what="killed")
            assert run.status("a") == "killed"
            # its GPU is shown free once the engine sees the memory released
            await wait_until(pilot, lambda: "free" in str(app.query(HostPanel).first()
                                                           .render()), what="a free GPU")
            await pilot.press("r")
            await wait_until(pilot, lambda: run.status("a") in ("pending", "launching",
                                                                "running"), what="retried")
            await wait_until(pilot, lambda: cell(app, "a", "status") == "running",
                             what="a running again")
            # one counter: attempt 2 runs, with a fresh budget of three from the retry
            assert cell(app, "a", "attempt") == "2/4"
            await select(app, "b")
            await pilot.press("p")
            await wait_until(pilot, lambda: run.engine.paused, what="paused")
            assert "PAUSED" in str(app.query_one("#header").render())
            await pilot.press("u")  # b runs: it asks first
            assert isinstance(app.screen, ConfirmScreen) and "b" in app.screen.title_text
            await pilot.press("y")
            await wait_until(pilot, lambda: cell(app, "b", "status") == "pending",
                             what="b requeued")
            # two full ticks later (the first may have begun before the requeue), a GPU free
            # all along: paused, it is not launched again
            ticks = run.engine.pacing.full_ticks
            await wait_until(pilot, lambda: run.engine.pacing.full_ticks >= ticks + 2,
                             what="two more full ticks")
            assert run.status("b") == "pending"
            await pilot.press("p")
            await wait_until(pilot, lambda: cell(app, "b", "status") == "running",
                             what="b relaunched after resume")
            assert "PAUSED" not in str(app.query_one("#header").render())
    finally:
        await run.engine.command("kill", ["a", "b"])
        await run.stop()


async def test_bulk_kill_details_and_live_log_on_a_real_engine(tmp_path: Path) -> None:
    run = await engine_with(tmp_path, "x1", "x2")
    app = EqTuiApp([run.engine])
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: cell(app, "x1", "status") == "running"
                             and cell(app, "x2", "status") == "running", what="running")
            await select(app, "x1")
            pane = app.query_one(LogPane)
            await wait_until(pilot, lambda: any("[fake-train] job=x1" in line
                                                for line in pane.log_widget.lines),
                             what="x1's log in the log pane")
            await pilot.press("enter")
            await wait_until(pilot, lambda: isinstance(app.screen, JobDetailsScreen))
            screen = app.screen
            assert isinstance(screen, JobDetailsScreen)
            await wait_until(pilot, lambda: any("job=x1" in line for line in
                                                screen.query_one("#details-log", Log).lines),
                             what="the details log")
            await pilot.press("escape")
            await pilot.press("space", "space", "k")
            assert isinstance(app.screen, ConfirmScreen) and "2 jobs" in app.screen.title_text
            await pilot.press("y")
            await wait_until(pilot, lambda: run.status("x1") == run.status("x2") == "killed",
                             what="both killed")
            await wait_until(pilot, lambda: cell(app, "x2", "status") == "killed")
    finally:
        await run.stop()
