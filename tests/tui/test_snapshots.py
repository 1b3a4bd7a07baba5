"""SVG snapshots of the main, help and details screens: fixed clock, deterministic data.

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.log_pane import LogPane
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)


def make_app() -> EqTuiApp:
    return EqTuiApp([FakeClient()], clock=lambda: T0)


async def settle(pilot: Pilot[Any]) -> None:
    pane = pilot.app.query_one(LogPane)
    await eventually(pilot, lambda: bool(pane.log_widget.lines), what="the log pane's first tail")
    await pilot.pause()


def test_main_screen(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=SIZE, run_before=settle)


def test_main_screen_at_100x30(snap_compare: Any) -> None:
    assert snap_compare(make_app(), terminal_size=(100, 30), run_before=settle)


def test_help_screen(snap_compare: Any) -> None:
    async def open_help(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("question_mark")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=open_help)


def test_details_screen(snap_compare: Any) -> None:
    async def open_details(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        table = pilot.app.query_one(JobTable)
        table.move_cursor(row=table.get_row_index("demo/student_big"))
        await pilot.press("enter")
        await eventually(pilot, lambda: isinstance(pilot.app.screen, JobDetailsScreen)
                         and bool(pilot.app.screen.query_one("#details-log").lines))
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=SIZE, run_before=open_details)
