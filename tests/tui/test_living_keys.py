"""The living-queue keys with Pilot: + / - priority, h hold/release, e edit, c clone, a add,
reload from the palette, and a kill dialog that leaves finished jobs out."""

from __future__ import annotations

import json
import os
from pathlib import Path

from textual.widgets import Input

from eq_tui.api.commands import Reload, SetPriority
from eq_tui.tui.screens.confirm import ConfirmScreen
from eq_tui.tui.screens.job_form import JobFormScreen
from tests.tui.fake_client import FakeClient, sample_snapshot
from tests.tui.pilot_wait import eventually
from tests.tui.test_app_keys import SIZE, goto, make_app, table


async def test_plus_minus_and_h_act_on_the_marked_rows() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "student_s8")
        await pilot.press("space")  # marks it and moves the cursor down
        await goto(app, "student_s9")
        await pilot.press("space")  # student_s8 and student_s9 marked
        await pilot.press("plus")
        await eventually(pilot, lambda: client.commands[-1:] == [
            ("priority", ["student_s8", "student_s9"])])
        assert client.sent[-1] == SetPriority(("student_s8", "student_s9"), delta=1, by="ui")
        await eventually(pilot, lambda: str(table(app).get_cell("demo/student_s8",
                                                                "priority")) == "1")
        await pilot.press("minus")
        await eventually(pilot, lambda: client.sent[-1] == SetPriority(
            ("student_s8", "student_s9"), delta=-1, by="ui"))
        for key in ("student_s8", "student_s9"):  # + and - keep the marks: unmark both
            await goto(app, key)
            await pilot.press("space")
        await goto(app, "student_s9")
        await pilot.press("h")
        await eventually(pilot, lambda: client.commands[-1] == ("hold", ["student_s9"]))
        await eventually(pilot, lambda: str(table(app).get_cell("demo/student_s9",
                                                                "status")) == "held")
        await pilot.press("h")  # every target held: h releases
        await eventually(pilot, lambda: client.commands[-1] == ("release", ["student_s9"]))


async def test_e_edits_the_command_in_a_modal_and_refuses_a_running_job() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "train_lr0.03_s1")  # running
        await pilot.press("e")
        await pilot.pause()
        assert not isinstance(app.screen, JobFormScreen)
        await goto(app, "student_nan")
        await pilot.press("e")
        await eventually(pilot, lambda: isinstance(app.screen, JobFormScreen))
        box = app.screen.query_one("#form-cmd", Input)
        assert box.value == "fake-train --id student_nan"
        box.value = "   "
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobFormScreen)  # an empty command is not sent
        assert "empty" in str(app.screen.query_one("#form-problem").render())
        box.value = "fake-train --id student_nan --lr 0.01"
        await pilot.press("enter")
        await eventually(pilot, lambda: client.commands[-1] == ("edit", ["student_nan"]))
        assert client.command_args[-1]["cmd"] == "fake-train --id student_nan --lr 0.01"
        await eventually(pilot, lambda: str(table(app).get_cell("demo/student_nan", "id"))
                         == "student_nan ✎")


async def test_c_clones_and_a_adds_with_the_id_checked() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "train_lr0.03_s1")
        await pilot.press("c")
        await eventually(pilot, lambda: isinstance(app.screen, JobFormScreen))
        app.screen.query_one("#form-id", Input).value = "bad id"
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, JobFormScreen)
        app.screen.query_one("#form-id", Input).value = "train_copy"
        await pilot.press("enter")
        await eventually(pilot, lambda: client.commands[-1] == ("clone", ["train_lr0.03_s1"]))
        assert client.command_args[-1]["id"] == "train_copy"
        await eventually(pilot, lambda: table(app).row_count == 11)
        await pilot.press("a")
        await eventually(pilot, lambda: isinstance(app.screen, JobFormScreen))
        app.screen.query_one("#form-id", Input).value = "extra"
        app.screen.query_one("#form-phase", Input).value = "nowhere"
        app.screen.query_one("#form-cmd", Input).value = "fake-train --epochs 1"
        await pilot.press("enter")
        await pilot.pause()
        assert "the phase is one of" in str(app.screen.query_one("#form-problem").render())
        app.screen.query_one("#form-phase", Input).value = "distill"
        await pilot.press("enter")
        await eventually(pilot, lambda: client.commands[-1] == ("add", []))
        assert client.command_args[-1]["phase"] == "distill"
        await eventually(pilot, lambda: table(app).row_count == 12)


async def test_reload_from_the_palette_shows_the_plan_then_reloads_on_yes() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        app.action_reload()
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        message = str(app.screen.query_one("#dialog-message").render())
        assert "add: new_job" in message and "retire: student_s9" in message
        assert client.sent[-1] == Reload(dry_run=True, by="ui") and not client.reloaded
        await pilot.press("y")
        await eventually(pilot, lambda: client.reloaded)


async def test_the_kill_dialog_leaves_finished_jobs_out() -> None:
    app, _client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await goto(app, "train_lr0.1_s1")  # completed
        await pilot.press("k")
        await pilot.pause()
        assert not isinstance(app.screen, ConfirmScreen)
        await pilot.press("space")  # completed, marked
        await goto(app, "train_lr0.03_s1")
        await pilot.press("space")  # and running, marked
        await pilot.press("k")
        await eventually(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        title = str(app.screen.query_one("#dialog-title").render())
        assert title.startswith("Kill ") and "train_lr0.1_s1" not in title


async def test_a_manifest_changed_on_disk_is_offered_for_a_reload(tmp_path: Path) -> None:
    source = tmp_path / "sweep.yaml"
    source.write_text("project: demo\n")
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / "manifest.json").write_text(json.dumps({"source": str(source)}))
    snapshot = sample_snapshot()
    snapshot["run_dir"] = str(run_dir)
    app, _client = make_app(FakeClient(snapshot))
    async with app.run_test(size=SIZE) as pilot:
        app.check_manifests()  # the first look only notes the file's time
        app.check_manifests()
        await pilot.pause()
        assert not any("changed on disk" in n.message for n in app._notifications)
        stat = source.stat()
        os.utime(source, (stat.st_atime, stat.st_mtime + 5))
        app.check_manifests()
        await eventually(pilot, lambda: any("sweep.yaml changed on disk" in n.message
                                            for n in app._notifications))
