"""The job table over 5,000 jobs (it draws only the rows on the screen): the keys and the mouse
reach every row, sorting and filtering see every job, the cursor stays on its job."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from rich.console import Console
from rich.padding import Padding
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.renderables.styled import Styled

from eq_tui.api.events import JobUpdated
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.row_table import cell_segments
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient
from tests.tui.pilot_wait import eventually
from tests.tui.test_tick_cost import JOBS, big_snapshot

SIZE = (160, 48)


def make_app() -> tuple[EqTuiApp, dict[str, Any]]:
    snapshot = big_snapshot()
    return EqTuiApp([FakeClient(snapshot)], clock=lambda: T0), snapshot


def screen_text(table: JobTable) -> str:
    return "\n".join("".join(segment.text for segment in table.render_line(y))
                     for y in range(table.size.height))


def in_view(table: JobTable) -> bool:
    top = round(table.scroll_y)
    return top <= table.cursor_row < top + table.size.height - 1  # the header's line


async def test_ctrl_end_reaches_the_last_of_5000_rows_and_pages_move_the_cursor() -> None:
    app, snapshot = make_app()
    last = "demo/" + [j["id"] for j in snapshot["jobs"] if j["status"] == "completed"][-1]
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        await pilot.press("ctrl+end")
        assert table.row_count == JOBS and table.cursor_row == JOBS - 1
        assert table.cursor_key == last  # completed jobs last, in the manifest's order
        await eventually(pilot, lambda: app.log_pane.key == last, what="the log follows it")
        await eventually(pilot, lambda: table.scroll_y == table.max_scroll_y > 0)
        assert last.removeprefix("demo/") in screen_text(table)
        await pilot.press("ctrl+home")
        assert table.cursor_row == 0 and table.scroll_y == 0
        await pilot.press("pagedown", "pagedown")
        page = table.scrollable_content_region.height - 1
        assert table.cursor_row == 2 * page and in_view(table)
        await pilot.press("pageup", "up")
        assert table.cursor_row == page - 1 and in_view(table)
        await pilot.press("down")
        assert table.cursor_row == page


async def test_s_sorts_all_5000_rows_and_the_cursor_keeps_its_job_across_sorts() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        table.move_cursor(row=3000)
        chosen = table.cursor_key
        await pilot.press("s")
        assert table.sort_column == "id" and table.keys == sorted(table.keys)
        assert table.cursor_key == chosen and in_view(table)
        await pilot.press("S")
        assert table.keys == sorted(table.keys, reverse=True) and table.row_count == JOBS
        assert table.cursor_key == chosen and in_view(table)
        await pilot.press("s")  # status (one phase: no phase column)
        assert table.sort_column == "status" and table.cursor_key == chosen
        assert str(table.get_row_at(0)[list(table.columns).index("status")]) == "running"


async def test_a_tick_that_moves_rows_above_the_cursor_leaves_it_on_its_job() -> None:
    app, snapshot = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.move_cursor(row=200)
        chosen, moved = table.cursor_key, []
        for record in snapshot["jobs"][-60:]:  # pending ones far below the cursor
            if record["status"] == "pending":
                state = copy.deepcopy(record)
                state.update(status="stuck", last_line="boom")
                moved.append(JobUpdated(project="demo", at=T0, job=record["id"], state=state))
        app.apply_events(moved)
        stuck = sum(1 for j in snapshot["jobs"] if j["status"] == "stuck") + len(moved)
        await eventually(pilot, lambda: table.get_row_index(f"demo/{moved[-1].job}") < stuck,
                         what="the newly stuck jobs sorted up, above the cursor")
        assert table.cursor_key == chosen and table.cursor_row == 200 + len(moved)


async def test_a_filter_narrows_every_row_and_clearing_it_brings_them_back() -> None:
    app, snapshot = make_app()
    stuck = [f"demo/{j['id']}" for j in snapshot["jobs"] if j["status"] == "stuck"]
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        await pilot.press("ctrl+end")  # far down: the filter leaves a few rows
        await pilot.press("slash", *"status:stuck", "enter")
        await eventually(pilot, lambda: table.row_count == len(stuck), what="the filter")
        assert sorted(table.keys) == sorted(stuck)
        assert all(str(table.get_cell(key, "status")) == "stuck" for key in table.keys)
        assert table.scroll_y <= table.max_scroll_y and in_view(table)
        assert str(table.cursor_key).removeprefix("demo/") in screen_text(table)
        await pilot.press("ctrl+end")
        assert table.cursor_key == stuck[-1]  # the manifest's order among equals
        await pilot.press("slash", "escape")
        await eventually(pilot, lambda: table.row_count == JOBS, what="every row again")
        assert table.cursor_key == stuck[-1] and in_view(table)  # still on its job


async def test_a_click_moves_the_cursor_to_the_row_and_a_second_click_opens_it() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        second = table.keys[1]
        # under the border (one line) and the header (one line): the second row
        await pilot.click(JobTable, offset=(10, 3))
        assert table.cursor_row == 1 and table.cursor_key == second
        await eventually(pilot, lambda: app.log_pane.key == second, what="the log follows")
        await pilot.click(JobTable, offset=(10, 3))
        await eventually(pilot, lambda: isinstance(app.screen, JobDetailsScreen))
        assert app.screen.key == second  # type: ignore[attr-defined]


async def test_the_wheel_scrolls_far_rows_into_view_without_moving_the_cursor() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        for _ in range(600):  # two lines a notch: 1,200 rows down
            table.post_message(events.MouseScrollDown(table, 10, 5, 0, 1, 0, False, False,
                                                      False))
        await eventually(pilot, lambda: table.scroll_y >= 1000, what="1,000 rows down")
        top = round(table.scroll_y)
        assert table.cursor_row == 0
        assert table.keys[top].removeprefix("demo/") in screen_text(table).splitlines()[1]


async def test_at_80_columns_the_keys_scroll_the_table_sideways() -> None:
    app, _ = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        assert table.max_scroll_x > 0  # the last log line keeps its width and scrolls
        await pilot.press("right")
        assert table.scroll_x > 0 and table.cursor_row == 0
        await pilot.press("end")
        assert table.scroll_x == table.max_scroll_x
        assert "last log line" in screen_text(table).splitlines()[0]
        await pilot.press("home")
        assert table.scroll_x == 0


async def test_the_row_under_the_mouse_is_shown_until_a_key_moves_the_cursor() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.focus()

        def background(y: int) -> object:
            style = next(iter(table.render_line(y))).style
            return style.bgcolor if style else None

        plain = background(5)  # the fifth row: a zebra stripe like the third
        await pilot.hover(JobTable, offset=(10, 6))  # under the border
        await eventually(pilot, lambda: background(5) != plain, what="the hover style")
        assert background(3) == plain
        await pilot.press("down")
        await eventually(pilot, lambda: background(5) == plain, what="the hover gone")


@pytest.mark.parametrize("text", [
    Text("short", end="", no_wrap=True),
    Text("a cell far wider than its column", end="", no_wrap=True),
    Text("wide 漢字 in the cut", end="", no_wrap=True),
    Text("ends in spaces past the width      ", end="", no_wrap=True),
    Text("stuck", style=Style(color="red", bold=True), end=""),
    Text("", end="", no_wrap=True),
    Text("a header label"),
])
@pytest.mark.parametrize("post", [Style(), Style(color="blue")])
def test_a_cell_is_drawn_as_rich_draws_it(text: Text, post: Style) -> None:
    console = Console(width=200)
    pre = Style(bgcolor="grey11") + Style.from_meta({"row": 3, "column": 1})
    options = console.options.update_dimensions(14, 1).update(no_wrap=True)
    rich = console.render_lines(Styled(Padding(text or Text(no_wrap=True, end=""), (0, 1)),
                                       pre_style=pre, post_style=post), options)[0]
    assert list(Segment.simplify(cell_segments(text, 12, pre, post))) == \
        list(Segment.simplify(rich))
