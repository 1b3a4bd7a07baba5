"""SVG snapshots of the main, help and details screens: fixed clock, deterministic data.

The main screen at every size a person uses (a split pane or phone at 80x24 to a wall monitor at
240x70) with 1, 2, 16 and 64 hosts: all sixteen combinations (about 40 s with -n 2).

Update after an intended change with `pytest tests/tui/test_snapshots.py --snapshot-update`.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GRID_PANELS
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.log_pane import LogPane
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient, fleet_snapshot, packed_snapshot, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
SIZES = [(80, 24), (100, 30), (160, 48), (240, 70)]
FLEETS = {"1x8": lambda: fleet_snapshot(1, 8), "2": sample_snapshot,
          "16x4": lambda: fleet_snapshot(16, 4), "64x8": lambda: fleet_snapshot(64, 8)}


def make_app() -> EqTuiApp:
    return EqTuiApp([FakeClient()], clock=lambda: T0)


async def settle(pilot: Pilot[Any]) -> None:
    pane = pilot.app.query_one(LogPane)
    await eventually(pilot, lambda: bool(pane.log_widget.lines), what="the log pane's first tail")
    await pilot.pause()


@pytest.mark.parametrize("hosts", list(FLEETS))
@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_main_screen(snap_compare: Any, size: tuple[int, int], hosts: str) -> None:
    app = EqTuiApp([FakeClient(FLEETS[hosts]())], clock=lambda: T0)
    assert snap_compare(app, terminal_size=size, run_before=settle)


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


def test_small_screen_log_tab(snap_compare: Any) -> None:
    async def open_logs(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await pilot.press("l")
        # the log and retry queue have replaced the table, the log pane shows its tail
        await eventually(pilot, lambda: pilot.app.room.logs_tab
                         and pilot.app.retry_pane.has_focus
                         and bool(pilot.app.query_one("#log").lines), what="the log tab")
        await pilot.pause()

    assert snap_compare(make_app(), terminal_size=(80, 24), run_before=open_logs)


def test_packed_host(snap_compare: Any) -> None:
    """a100-box's GPUs shared by memory: each job a segment of the memory bar with its id, the
    table's host:gpu with how many share the GPU (and `cpu`), the escalations in the retry
    pane."""
    async def laid_out(pilot: Pilot[Any]) -> None:
        await settle(pilot)
        await eventually(pilot, lambda: any("r0.1_s1" in str(panel.render())
                                            for panel in pilot.app.query(GRID_PANELS)),
                         what="the ids in the segments")
        await pilot.pause()

    app = EqTuiApp([FakeClient(packed_snapshot())], clock=lambda: T0)
    assert snap_compare(app, terminal_size=SIZE, run_before=laid_out)
