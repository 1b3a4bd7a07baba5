"""The UI at other sizes, driven with Pilot: the small-screen layout and its `l` toggle, the
grid's compact form (`g`, the selected host in full, `host:` in the filter) and the job table's
active-first order."""

from __future__ import annotations

from textual.widgets import Static

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GRID_PANELS, GpuGrid
from eq_tui.tui.host_panel import HostPanel
from eq_tui.tui.job_table import JobTable
from tests.tui.fake_client import T0, FakeClient, fleet_snapshot
from tests.tui.pilot_wait import eventually


def make_app(snapshot: dict | None = None) -> tuple[EqTuiApp, FakeClient]:  # type: ignore[type-arg]
    client = FakeClient(snapshot)
    return EqTuiApp([client], clock=lambda: T0), client


def ids_in_order(app: EqTuiApp) -> list[str]:
    jobs = app.query_one(JobTable)
    return [str(jobs.get_row_at(i)[1]) for i in range(jobs.row_count)]


def statuses_in_order(app: EqTuiApp) -> list[str]:
    jobs = app.query_one(JobTable)
    return [str(jobs.get_row_at(i)[3]) for i in range(jobs.row_count)]


def grid_lines(app: EqTuiApp) -> str:
    return str(app.query_one("#host-lines", Static).render())


async def test_a_small_screen_compacts_and_l_swaps_the_table_for_the_log_and_retry_queue() -> None:
    app, _ = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        grid, header = app.query_one(GpuGrid), app.query_one("#header")
        assert not grid.plan.compact and len(app.query(GRID_PANELS)) == 2
        assert header.size.height == 2 and app.query_one("#bottom").display
        await pilot.resize_terminal(80, 24)
        await eventually(pilot, lambda: app.room.small, what="the small layout")
        await pilot.pause()
        assert grid.plan.compact and app.screen.has_class("-small")
        assert header.size.height == 1
        assert not app.query_one("#bottom").display  # no squeezed panes
        table = app.query_one(JobTable)
        assert table.display and table.region.y < grid.region.y  # the table first
        assert "rtx-box" in grid_lines(app) and "a100-box" in grid_lines(app)

        await pilot.press("l")
        await pilot.pause()
        assert app.query_one("#bottom").display and not table.display
        assert app.query_one("#retry").has_focus
        await pilot.press("l")
        await pilot.pause()
        assert table.display and not app.query_one("#bottom").display and table.has_focus

        await pilot.press("g")  # the full panels even so
        await pilot.pause()
        assert not grid.plan.compact and len(app.query(GRID_PANELS)) == 2
        await pilot.press("g")  # back to what the room chooses
        await pilot.pause()
        assert grid.plan.compact

        await pilot.resize_terminal(160, 48)
        await eventually(pilot, lambda: not app.room.small, what="the full layout")
        await pilot.pause()
        assert not grid.plan.compact and header.size.height == 2
        assert app.query_one("#bottom").display and table.region.y > grid.region.y


async def test_l_on_a_large_screen_hides_the_log_panes_and_the_table_grows() -> None:
    app, _ = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(JobTable)
        before = table.size.height
        await pilot.press("l")
        await pilot.pause()
        assert not app.query_one("#bottom").display and table.size.height > before
        await pilot.press("l")
        await pilot.pause()
        assert app.query_one("#bottom").display and table.size.height == before


async def test_sixteen_hosts_go_compact_with_every_name_and_the_selected_host_in_full() -> None:
    app, _ = make_app(fleet_snapshot(16, 4))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        grid = app.query_one(GpuGrid)
        assert grid.plan.compact and grid.plan.expanded == "right"
        lines = grid_lines(app).splitlines()
        assert len(lines) == 16
        for n in range(1, 17):
            assert any(line.startswith(f"gpu-node-{n:02d} ") for line in lines)
        assert "ssh: connection refused" in lines[7]  # gpu-node-08 is down
        # the job table cursor picks the host shown in full
        jobs = app.query_one(JobTable)
        jobs.move_cursor(row=jobs.get_row_index("fleet/run_020"))
        expanded = app.query_one("#host-expanded", HostPanel)
        await eventually(pilot, lambda: "gpu-node-09" in str(expanded.border_title))
        assert "run_020" in str(expanded.render())
        # and so do up/down in the grid
        grid.focus()
        await pilot.press("down")
        await eventually(pilot, lambda: "gpu-node-10" in str(expanded.border_title))
        # the grid leaves the table its third of the screen
        assert jobs.outer_size.height >= 48 // 3


async def test_host_filter_narrows_the_grid_and_the_table() -> None:
    app, _ = make_app(fleet_snapshot(16, 4))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("slash", *"host:gpu-node-03", "enter")
        grid = app.query_one(GpuGrid)
        await eventually(pilot, lambda: not grid.plan.compact, what="one host: a full panel")
        panels = list(app.query(GRID_PANELS))
        assert len(panels) == 1 and "gpu-node-03" in str(panels[0].border_title)
        assert "busy" in str(panels[0].border_subtitle)  # its totals
        assert ids_in_order(app) and all(
            str(app.query_one(JobTable).get_cell(f"fleet/{job_id}", "where"))
            .startswith("gpu-node-03:") for job_id in ids_in_order(app))
        await pilot.press("slash", "escape")
        await eventually(pilot, lambda: grid.plan.compact, what="all 16 hosts again")


async def test_active_first_keeps_what_needs_eyes_on_top_and_s_still_sorts() -> None:
    app, client = make_app()
    async with app.run_test(size=(80, 24)) as pilot:
        jobs = app.query_one(JobTable)
        assert statuses_in_order(app) == ["stuck", "stuck", "blocked", "failed_oom", "running",
                                          "running", "pending", "pending", "completed",
                                          "completed"]
        assert "active first" in str(jobs.border_title)
        # a pending job starts: it moves up among the running ones, the cursor stays put
        cursor = jobs.cursor_key
        client.set_job("student_s9", status="running", host="rtx-box", gpus=[1],
                       started=T0 - 3)
        await eventually(pilot, lambda: ids_in_order(app).index("student_s9") < 7)
        assert statuses_in_order(app)[4:7] == ["running"] * 3
        assert jobs.cursor_key == cursor
        await pilot.press("s")
        assert jobs.sort_column == "id"
        await pilot.pause()
        assert ids_in_order(app) == sorted(ids_in_order(app))
        assert "by id" in str(jobs.border_title)
        for _ in range(len(jobs.columns) - 1):  # every other column, then active first again
            await pilot.press("s")
        await pilot.pause()
        assert jobs.sort_column is None and "active first" in str(jobs.border_title)
        assert statuses_in_order(app)[0] == "stuck"


async def test_with_64_hosts_the_grid_scrolls_to_the_host_selected_with_down() -> None:
    app, _ = make_app(fleet_snapshot(64, 8))
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        grid = app.query_one(GpuGrid)
        assert grid.plan.compact and grid.max_scroll_y > 0  # more lines than its room
        assert app.query_one(JobTable).outer_size.height >= 48 // 3
        grid.focus()
        await pilot.press(*["down"] * 40)
        expanded = app.query_one("#host-expanded", HostPanel)
        await eventually(pilot, lambda: "gpu-node-41" in str(expanded.border_title))
        assert grid.scroll_y > 0


async def test_a_resize_under_the_help_screen_lays_out_the_main_screen() -> None:
    app, _ = make_app()
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("question_mark")
        await pilot.resize_terminal(80, 24)
        await eventually(pilot, lambda: app.room.small, what="the small layout")
        assert app.is_running and app.table.screen.has_class("-small")
        await pilot.press("escape")
        await pilot.pause()
        assert app.query_one(GpuGrid).plan.compact
