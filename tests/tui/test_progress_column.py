"""The progress column: a running job's progress and ETA in the table and its details, a job far
slower than its phase siblings flagged slow, and the column only where it fits."""

from __future__ import annotations

from textual.widgets import Static

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.palette import status_rich_styles
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient, attempt, job, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
SLOW_ONE = "demo/train_lr0.03_s1"


def cell(app: EqTuiApp, key: str, column: str) -> str:
    return str(app.query_one(JobTable).get_cell(key, column))


def columns(app: EqTuiApp) -> list[str]:
    return list(app.query_one(JobTable).columns)


def summary(app: EqTuiApp) -> str:
    return str(app.screen.query_one("#details-summary", Static).render())


async def test_a_running_job_shows_how_far_it_is_and_how_long_it_has_left() -> None:
    client = FakeClient()
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        # epoch 3/6 after 95 s: half way, 95 s to go; epoch 1/6 after 30 s: 150 s to go
        assert cell(app, SLOW_ONE, "progress") == " 50% ██▌░░ 1m"
        assert cell(app, "demo/train_lr0.03_s2", "progress") == " 16% ▊░░░░ 2m"
        assert cell(app, "demo/train_lr0.1_s1", "progress") == ""  # completed
        assert cell(app, "demo/student_s8", "progress") == ""  # pending
        client.set_job("train_lr0.03_s1", last_line="Epoch 6/6: 100%|██████████| 40/40")
        await eventually(pilot, lambda: cell(app, SLOW_ONE, "progress") == "100% █████ 0s")
        client.set_job("train_lr0.03_s1", last_line="saving the checkpoint")
        await eventually(pilot, lambda: cell(app, SLOW_ONE, "progress") == "")


async def test_a_job_three_times_slower_than_its_phase_siblings_is_flagged_slow() -> None:
    snapshot = sample_snapshot()
    for done in snapshot["jobs"][:2]:
        done["last_line"] = "epoch 6/6 loss 0.2"
    client = FakeClient(snapshot)
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        assert cell(app, SLOW_ONE, "status") == "running"
        # epoch 1/6 after 95 s: 38 epochs an hour, beside 180 and 120 (6 epochs in 120 s and
        # 180 s, completed) and 120 (train_lr0.03_s2's epoch in 30 s): under a third of their
        # median
        client.set_job("train_lr0.03_s1", last_line="epoch 1/6 loss 0.9")
        await eventually(pilot, lambda: cell(app, SLOW_ONE, "status") == "slow")
        table = app.query_one(JobTable)
        warning = status_rich_styles(app)["slow"]
        progress = table.get_cell(SLOW_ONE, "progress")
        assert str(progress) == " 16% ▊░░░░ 7m" and progress.style == warning
        assert client.commands == []  # shown, never acted on
        table.move_cursor(row=table.get_row_index(SLOW_ONE))
        await pilot.press("enter")
        await eventually(pilot, lambda: isinstance(app.screen, JobDetailsScreen))
        text = summary(app)
        assert "progress 16%" in text and "ETA 7m" in text
        assert "slow 37.9 epoch/h, siblings' median 120 epoch/h" in text
        assert "projected 9m" in text
        client.set_job("train_lr0.03_s1", last_line="epoch 4/6 loss 0.3")  # caught up
        await eventually(pilot, lambda: "slow" not in summary(app))
        assert "ETA 47s" in summary(app)
        await pilot.press("escape")
        assert cell(app, SLOW_ONE, "status") == "running"
        assert table.get_cell(SLOW_ONE, "progress").style != warning


async def test_slow_and_stalled_rows_stay_among_the_running_ones_in_active_first_order() -> None:
    snapshot = sample_snapshot()
    running = next(j for j in snapshot["jobs"] if j["id"] == "train_lr0.03_s1")
    running.update(last_line="epoch 1/6", stalled_since=T0 - 10, silent_since=T0 - 700)
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.query_one(JobTable)
        assert cell(app, SLOW_ONE, "status") == "stalled"
        order = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert order.index("train_lr0.03_s1") < order.index("student_s8")  # above pending


async def test_the_column_shows_only_where_it_fits_and_the_last_line_makes_room() -> None:
    two = EqTuiApp([FakeClient(), FakeClient(sample_snapshot("other"))], clock=lambda: T0)
    async with two.run_test(size=(80, 24)) as pilot:
        # id, project, phase and status fill a phone's width: no room for it
        assert "progress" not in columns(two)
        await pilot.resize_terminal(160, 48)
        await eventually(pilot, lambda: "progress" in columns(two))
        assert cell(two, "other/train_lr0.03_s1", "progress") == " 50% ██▌░░ 1m"
    one = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with one.run_test(size=(80, 24)):
        assert "progress" in columns(one)  # right after the status, within 80 columns
        assert one.query_one(JobTable).columns["last_line"].width == 50  # off screen anyway
    wide = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with wide.run_test(size=SIZE) as pilot:
        # the last log line narrows so that the row still fits in 160 columns (no priority
        # set: no pri column)
        assert wide.query_one(JobTable).columns["last_line"].width == 49
        await pilot.resize_terminal(240, 70)
        await eventually(pilot, lambda: wide.query_one(JobTable).columns["last_line"].width
                         == 50)



async def test_long_jobs_at_their_siblings_pace_read_running_at_80x24() -> None:
    """Issue 33: twelve two-epoch jobs and three sixty-epoch ones in one phase, all at one epoch
    a minute; the long ones are thirty times as long, not slower."""
    snapshot = sample_snapshot()
    cmd = "fake-train --epochs {epochs} --seed {seed}"
    jobs = [job(f"short_s{n}", "completed", cmd=cmd.format(epochs=2, seed=n),
                history=[attempt(1, "rtx-box", n % 4, T0 - 600, T0 - 480, 0)],
                last_line="epoch 2/2 loss 0.3") for n in range(10)]
    jobs += [job(f"short_s{n}", "running", cmd=cmd.format(epochs=2, seed=n),
                 history=[attempt(1, "rtx-box", n % 4, T0 - 60)], last_line="epoch 1/2")
             for n in (10, 11)]
    # three seeds of the long configuration: a job's siblings are its configuration's seeds
    # (issue 41), never the short jobs
    jobs += [job(f"long_s{n}", "running", cmd=cmd.format(epochs=60, seed=n),
                 history=[attempt(1, "a100-box", n, T0 - 1200)], last_line="epoch 20/60")
             for n in (1, 2, 3)]
    snapshot["jobs"] = jobs
    client = FakeClient(snapshot)
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.pause()
        assert cell(app, "demo/long_s1", "status") == "running"
        assert cell(app, "demo/long_s2", "status") == "running"
        assert cell(app, "demo/long_s1", "progress").startswith(" 33% ")
        # under a third of that pace it is slow
        client.set_job("long_s1", last_line="epoch 6/60")
        await eventually(pilot, lambda: cell(app, "demo/long_s1", "status") == "slow")
