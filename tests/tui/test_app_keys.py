"""Every key of the main screen, driven with Pilot against an in-memory engine client."""

from __future__ import annotations

import json
from pathlib import Path

from textual.widgets import Input, Log

from eq_tui.api.commands import Pause, Resume
from eq_tui.api.events import Alert, HostStateChanged
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GRID_PANELS
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.log_pane import LogPane
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.details import JobDetailsScreen
from eq_tui.tui.screens.help import HelpScreen
from eq_tui.tui.screens.summary import SummaryScreen, open_summary
from tests.tui.fake_client import T0, FakeClient, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
STATUS_COLUMN = 3  # after mark, id, phase (one project: no project column)


def make_app(client: FakeClient | None = None) -> tuple[EqTuiApp, FakeClient]:
    client = client or FakeClient()
    return EqTuiApp([client], clock=lambda: T0), client


def table(app: EqTuiApp) -> JobTable:
    return app.query_one(JobTable)


def status_cell(app: EqTuiApp, key: str) -> str:
    return str(table(app).get_cell(key, "status"))


async def goto(app: EqTuiApp, job_id: str) -> None:
    jobs = table(app)
    jobs.move_cursor(row=jobs.get_row_index(f"demo/{job_id}"))
    jobs.focus()


async def test_the_main_screen_shows_every_pane_with_the_snapshot() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        assert table(app).row_count == 10
        assert len(app.query(GRID_PANELS)) == 2
        assert status_cell(app, "demo/student_nan") == "stuck"
        retry_text = str(app.query_one("#retry-body").render())
        assert "student_s2" in retry_text and "in 0:07" in retry_text
        assert "student_nan" in retry_text and "quarantined" in retry_text


async def test_k_asks_naming_the_job_and_kills_only_after_yes() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "train_lr0.03_s1")
        await pilot.press("k")
        assert isinstance(app.screen, ConfirmScreen)
        assert "train_lr0.03_s1" in app.screen.title_text
        await pilot.press("n")
        assert client.commands == []
        await pilot.press("k", "y")
        await eventually(pilot, lambda: client.commands != [])
        assert client.commands == [("kill", ["train_lr0.03_s1"])]
        await eventually(pilot, lambda: status_cell(app, "demo/train_lr0.03_s1") == "killed")


async def test_r_retries_and_u_requeues_the_selected_job() -> None:
    """`u` stops a running job as `k` does: it asks first, as `k` does (issue 46)."""
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "student_nan")
        await pilot.press("r")
        await eventually(pilot, lambda: len(client.commands) == 1)
        await goto(app, "train_lr0.03_s2")
        await pilot.press("u")
        assert isinstance(app.screen, ConfirmScreen)
        assert "Requeue train_lr0.03_s2?" in app.screen.title_text
        await pilot.press("n")
        assert len(client.commands) == 1
        await pilot.press("u", "y")
        await eventually(pilot, lambda: len(client.commands) == 2)
        assert client.commands == [("retry", ["student_nan"]), ("requeue", ["train_lr0.03_s2"])]
        await eventually(pilot, lambda: status_cell(app, "demo/student_nan") == "pending"
                         and status_cell(app, "demo/train_lr0.03_s2") == "pending")


async def test_space_marks_rows_and_actions_apply_to_every_marked_job() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "student_s8")
        await pilot.press("space", "space")  # marks student_s8 and student_s9
        assert table(app).marked == {"demo/student_s8", "demo/student_s9"}
        await pilot.press("k")
        assert isinstance(app.screen, ConfirmScreen)
        assert "2 jobs" in app.screen.title_text
        assert "student_s8" in app.screen.message and "student_s9" in app.screen.message
        await pilot.press("y")
        await eventually(pilot, lambda: client.commands != [])
        assert client.commands == [("kill", ["student_s8", "student_s9"])]
        await eventually(pilot, lambda: table(app).marked == set())


async def test_p_pauses_and_resumes_launching_and_the_header_says_paused() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("p")
        await eventually(pilot, lambda: app.view.paused
                         and "PAUSED" in str(app.query_one("#header").render()))
        assert client.sent == [Pause(by="ui")]
        await pilot.press("p")
        await eventually(pilot, lambda: not app.view.paused
                         and "PAUSED" not in str(app.query_one("#header").render()))
        assert client.sent[-1] == Resume(by="ui")


async def test_enter_opens_the_details_screen_with_every_attempt_and_its_log() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "student_big")
        await pilot.press("enter")
        await eventually(pilot, lambda: isinstance(app.screen, JobDetailsScreen))
        screen = app.screen
        assert isinstance(screen, JobDetailsScreen)
        attempts = screen.query_one("#attempts")
        assert attempts.row_count == 3  # type: ignore[attr-defined]
        assert "fake-train --id student_big" in str(screen.query_one("#details-summary")
                                                     .render())
        log = screen.query_one("#details-log", Log)
        await eventually(pilot, lambda: "student_big attempt 3 line 1" in log.lines)
        await pilot.press("left_square_bracket")
        await eventually(pilot, lambda: "student_big attempt 2 line 1" in log.lines)
        await pilot.press("escape")
        assert not isinstance(app.screen, JobDetailsScreen)


async def test_slash_filters_by_tokens_and_escape_clears() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash")
        box = app.query_one("#filter", Input)
        assert box.has_focus
        await pilot.press(*"status:stuck", "enter")
        await pilot.pause()
        assert table(app).row_count == 2
        assert table(app).has_focus
        await pilot.press("slash", "escape")
        await pilot.pause()
        assert table(app).row_count == 10 and not box.display


async def test_typing_in_the_filter_does_not_trigger_keys() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("slash", *"kurpq")
        # every key has reached the box by then: none of them acted as a command
        await eventually(pilot, lambda: app.query_one("#filter", Input).value == "kurpq")
        await eventually(pilot, lambda: table(app).row_count == 0, what="the filter applied")
        assert client.commands == []


async def test_tab_moves_between_panes() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        assert table(app).has_focus
        seen = set()
        for _ in range(4):
            await pilot.press("tab")
            focused = app.focused
            assert focused is not None
            seen.add(focused.id or type(focused).__name__)
        assert {"retry", "gpus", "jobs"} <= seen
        await pilot.press("shift+tab")
        assert app.focused is not None


async def test_question_mark_opens_help_and_escape_closes_it() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("question_mark")
        assert isinstance(app.screen, HelpScreen)
        body = str(app.screen.query_one("#help-body").render())
        for key in ("k", "r", "u", "p", "enter", "space", "/", "tab", "ctrl+p", "?", "q"):
            assert f"  {key}" in body
        await pilot.press("escape")
        assert not isinstance(app.screen, HelpScreen)


async def test_q_says_jobs_keep_running_and_quits_on_yes() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")
        assert isinstance(app.screen, ConfirmScreen)
        assert "keep running" in app.screen.message
        await pilot.press("n")
        assert app.is_running
        await pilot.press("q", "y")
        await pilot.pause()
    assert app.return_value == 0 and app.quit_chosen  # chosen: exit 0, not 130


async def test_the_log_pane_follows_the_selected_job_and_steps_through_attempts() -> None:
    client = FakeClient(tails={("student_big", None): ["third try"],
                               ("student_big", 1): ["first try"]})
    app, _ = make_app(client)
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "student_big")
        pane = app.query_one(LogPane)
        await eventually(pilot, lambda: pane.log_widget.lines == ["third try"])
        assert pane.key == "demo/student_big" and pane.attempts == 3
        await pilot.press("left_square_bracket", "left_square_bracket")
        await eventually(pilot, lambda: pane.log_widget.lines == ["first try"])
        assert pane.attempt == 1
        client.tails[("student_big", 1)] = ["first try", "more"]
        # the next poll (every second) appends only the new line
        await eventually(pilot, lambda: pane.log_widget.lines == ["first try", "more"])


async def test_job_updates_change_only_their_row_and_new_jobs_are_added() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        client.set_job("student_s9", status="running", host="rtx-box", gpus=[1],
                       started=T0 - 3, last_line="epoch 1/5")
        client.state["jobs"].append(dict(client.job("student_s9"), id="late_job",
                                         status="pending"))
        client.set_job("late_job")
        await eventually(pilot, lambda: table(app).row_count == 11)
        assert status_cell(app, "demo/student_s9") == "running"
        assert str(table(app).get_cell("demo/student_s9", "where")) == "rtx-box:1"
        assert table(app).row_count == 11


async def test_alerts_notify_and_a_down_host_shows_in_its_column() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        client.publish(Alert(project="demo", at=T0, level="error",
                             message="rtx-box: disk full", host="rtx-box"))
        client.publish(HostStateChanged(project="demo", at=T0, host="rtx-box", state="down",
                                        reason="connection refused"))
        panel = app.query(GRID_PANELS).first()
        await eventually(pilot, lambda: panel.has_class("-down"))
        await eventually(pilot, lambda: any("disk full" in n.message
                                            for n in app._notifications))
        assert "disk full" in str(app.query_one("#retry-body").render())
        assert "connection refused" in str(panel.render())


async def test_a_failing_command_becomes_a_notification_not_a_crash() -> None:
    app, client = make_app()
    client.fail_commands = True
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("r")
        await eventually(pilot, lambda: any("control socket closed" in n.message
                                            for n in app._notifications))
        assert app.is_running


async def test_palette_commands_retry_oom_stuck_and_open_summary(tmp_path: Path) -> None:
    snapshot = sample_snapshot()
    snapshot["run_dir"] = str(tmp_path)
    app, client = make_app(FakeClient(snapshot))
    async with app.run_test(size=SIZE) as pilot:
        app.sender.retry_oom_stuck(app.view)
        await eventually(pilot, lambda: client.commands != [])
        assert client.commands == [("retry", ["student_big"])]  # not the exit_nonzero one
        open_summary(app, app.view)
        await pilot.pause()
        assert not isinstance(app.screen, SummaryScreen)  # not written yet: a notification
        (tmp_path / "summary.md").write_text("# eq-tui summary: demo\n")
        open_summary(app, app.view)
        await pilot.pause()
        assert isinstance(app.screen, SummaryScreen)


async def test_palette_lists_eq_commands_and_a_theme_switch_is_remembered(
        isolated_ui_config: Path) -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+p")
        await eventually(pilot, lambda: bool(app.screen.query("CommandList")))
        await pilot.press(*"retry every")

        def first_option() -> str:
            options = app.screen.query_one("CommandList")
            return str(options.get_option_at_index(0).prompt) \
                if options.option_count else ""  # type: ignore[attr-defined]

        await eventually(pilot, lambda: "Retry every OOM-stuck job" in first_option())
        await pilot.press("escape")
        app.theme = "eq-light"  # what the palette's "Switch theme: eq-light" does
        await eventually(pilot, lambda: app.theme == "eq-light")
        assert status_cell(app, "demo/student_nan") == "stuck"
    settings = json.loads((isolated_ui_config / "settings.json").read_text())
    assert settings["theme"] == "eq-light"
    again = EqTuiApp([FakeClient()], clock=lambda: T0)
    assert again.theme == "eq-light"


async def test_sorting_by_key_and_by_header_click() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        jobs = table(app)
        jobs.sort_by("status")
        ids = [str(jobs.get_row_at(i)[1]) for i in range(jobs.row_count)]
        assert ids[:2] == ["train_lr0.03_s1", "train_lr0.03_s2"]  # running first
        jobs.sort_by("status")  # again: reversed
        assert str(jobs.get_row_at(0)[STATUS_COLUMN]) == "completed"
        await pilot.press("s")
        assert jobs.sort_column == "failure"  # the column after the status
        await pilot.click(JobTable, offset=(6, 1))  # the id header, under the border
        await pilot.pause()
        assert jobs.sort_column == "id"


async def test_several_projects_get_a_project_column_and_their_own_commands() -> None:
    first, second = FakeClient(), FakeClient(sample_snapshot("other"))
    app = EqTuiApp([first, second], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        jobs = table(app)
        assert jobs.row_count == 20
        assert str(jobs.get_cell("other/student_nan", "project")) == "other"
        assert len(app.query(GRID_PANELS)) == 4
        jobs.move_cursor(row=jobs.get_row_index("other/student_nan"))
        await pilot.press("r")
        await eventually(pilot, lambda: second.commands != [])
        assert first.commands == [] and second.commands == [("retry", ["student_nan"])]


async def test_usable_at_100_by_30() -> None:
    app, _ = make_app()
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.pause()
        for selector in ("#header", "#gpus", "#jobs", "#log-pane", "#retry"):
            region = app.query_one(selector).region
            assert region.height >= 2 and region.width > 0, selector
        assert app.query_one("#jobs").region.height >= 8
