"""The main screen at 120 and 80 columns (issue 33): the failure column reads whole, the id
stays in view while the table scrolls sideways, the metric column shows when `m` picks one, the
footer and the palette list every action, and a held job gives no ETA of 0 s."""

from __future__ import annotations

from typing import Any

import pytest
from textual.command import CommandPalette

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.header import RunHeader
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.key_footer import KeyFooter
from eq_tui.tui.screens.results import ResultsScreen
from tests.tui.fake_client import T0, FakeClient, attempt, job, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZES = [(120, 40), (80, 24)]
EVERY_ACTION = ("Details", "Kill", "Retry", "Requeue", "Hold", "Priority", "Edit", "Clone",
                "Add", "Mark", "Metric", "Results", "Sort", "Filter", "Pause", "Log", "Help",
                "Quit", "palette")


def with_metrics() -> dict[str, Any]:
    snapshot = sample_snapshot()
    for record in snapshot["jobs"]:
        if record["id"] == "train_lr0.03_s1":
            record["last_line"] = "epoch 3/6 loss=0.412 val_acc=0.61"
    snapshot["settings"]["goals"] = {"val_acc": "max"}
    return snapshot


def table_lines(app: EqTuiApp) -> list[str]:
    """The job table as drawn on the screen, a line a row (the header first)."""
    table = app.query_one(JobTable)
    return [table.render_line(y).text for y in range(table.size.height)]


def row_line(app: EqTuiApp, job_id: str) -> str:
    return next(line for line in table_lines(app) if f" {job_id} " in line)


def rendered(widget: Any) -> str:
    return str(widget.render())


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_id_stays_in_view_and_the_failure_reads_whole(size: tuple[int, int]) -> None:
    app = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        for _ in range(100):  # scroll sideways until the failure column shows whole
            if "failure  " in table_lines(app)[0]:
                break
            await pilot.press("right")
        assert "failure  " in table_lines(app)[0]
        # the failure class in at most 9 characters, whole; the id still there beside it
        assert "exit 3" in row_line(app, "student_nan")
        assert "upstream" in row_line(app, "student_s7")
        assert "cuda_oom" in row_line(app, "student_big")
        assert table_lines(app)[0].split()[0] == "id"
        if size[0] == 120:  # at 120 the failure column is in view without scrolling
            await pilot.press("home")
            await eventually(pilot, lambda: table.scroll_x == 0)
            assert "exit 3" in row_line(app, "student_nan")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_m_brings_the_metric_column_into_view(size: tuple[int, int]) -> None:
    app = EqTuiApp([FakeClient(with_metrics())], clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        app.query_one(JobTable).focus()
        await pilot.press("m")
        await eventually(pilot, lambda: "val_acc" in table_lines(app)[0],
                         what="the metric column in view")
        assert "0.61" in row_line(app, "train_lr0.03_s1")
        assert table_lines(app)[0].split()[0] == "id"


@pytest.mark.parametrize("size", [(160, 48), *SIZES], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_footer_lists_every_action(size: tuple[int, int]) -> None:
    app = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        footer = app.query_one(KeyFooter)
        text = rendered(footer)
        missing = [label for label in EVERY_ACTION if label not in text]
        assert not missing, text
        assert footer.size.height == len(text.splitlines())  # every line of it on screen
        await pilot.click(KeyFooter, offset=(text.splitlines()[0].index("Results") - 2, 0)
                          if "Results" in text.splitlines()[0] else
                          (text.splitlines()[1].index("Results") - 2, 1))
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen),
                         what="a click on R opens the results")


async def test_the_palette_lists_every_action_and_runs_it() -> None:
    app = EqTuiApp([FakeClient(with_metrics())], clock=lambda: T0)
    async with app.run_test(size=(120, 40)) as pilot:
        titles = [command.title for command in app.get_system_commands(app.screen)]
        for label in ("Results (R)", "Hold (h)", "Metric (m)", "Edit (e)", "Clone (c)",
                      "Add (a)", "Priority + (+)", "Priority - (-)", "Kill (k)", "Retry (r)",
                      "Requeue (u)", "Details (enter)", "Mark (space)", "Filter (/)"):
            assert label in titles, titles
        await pilot.press("ctrl+p")
        await eventually(pilot, lambda: isinstance(app.screen, CommandPalette))
        await pilot.press(*"Metric (m)", "enter")
        await eventually(pilot, lambda: app.query_one(JobTable).metric == "val_acc",
                         what="the palette's Metric entry")


async def test_a_held_job_gives_no_eta_of_zero() -> None:
    snapshot = sample_snapshot()
    snapshot["jobs"] = [
        job("done", "completed", history=[attempt(1, "rtx-box", 0, T0 - 600, T0 - 480, 0)]),
        job("waits", "held")]
    for gpu in snapshot["hosts"][0]["gpus"] + snapshot["hosts"][1]["gpus"]:
        gpu["job"] = None
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        header = rendered(app.query_one(RunHeader))
        assert "ETA held" in header and "ETA 0s" not in header, header
