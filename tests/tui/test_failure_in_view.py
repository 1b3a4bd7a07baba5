"""Why a job failed is in view at every width (issue 46): at 80x24 a stuck job's failure class
beside its status and its last line under the table; at 120x36 the last line gets the room of
the columns that would say the same on every row (one phase, no priority, one host); the
header and the details footer fit at 80 and 120. And a killed job's row says why it ended."""

from __future__ import annotations

from typing import Any

import pytest

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.header import RunHeader
from eq_tui.tui.job_line import JobLine
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.key_footer import KeyFooter
from eq_tui.tui.rows import COLUMN_KEYS, job_cells
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient, attempt, gpu, job, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZES = [(120, 36), (80, 24)]
CUDA_LINE = "RuntimeError: CUDA error: an illegal memory access was encountered"


def table_lines(app: EqTuiApp) -> list[str]:
    table = app.query_one(JobTable)
    return [table.render_line(y).text for y in range(table.size.height)]


def row_line(app: EqTuiApp, job_id: str) -> str:
    return next(line for line in table_lines(app) if f" {job_id} " in line)


def one_phase_one_host() -> dict[str, Any]:
    """A sweep as `eq-tui init` writes one: one phase, one host, no priority set."""
    snapshot = sample_snapshot()
    snapshot["jobs"] = [
        job("lr0.1_seed1", "stuck", history=[attempt(1, "box", 0, T0 - 300, T0 - 200, 1,
                                                     "exit_nonzero")],
            failure=("exit_nonzero", f"exit 1: {CUDA_LINE}"), last_line=CUDA_LINE),
        job("lr0.1_seed2", "running", history=[attempt(1, "box", 1, T0 - 100)],
            last_line="epoch 2/6 loss 0.52"),
        job("lr0.03_seed1", "completed", history=[attempt(1, "box", 0, T0 - 600, T0 - 400, 0)],
            last_line="done: val_acc 0.91"),
        job("lr0.03_seed2", "pending")]
    snapshot["hosts"] = [{**snapshot["hosts"][0], "name": "box",
                          "gpus": [gpu(0, 0, 24576), gpu(1, 9000, 24576, job_id="lr0.1_seed2")]}]
    return snapshot


async def test_at_80_columns_a_stuck_job_shows_its_failure_and_its_last_line_under_the_table(
        ) -> None:
    app = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with app.run_test(size=(80, 24)) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        await pilot.pause()
        assert table.scroll_x == 0
        assert "stuck" in row_line(app, "student_nan") and "exit 3" in row_line(app, "student_nan")
        assert "cuda_oom" in row_line(app, "student_big")
        line = app.query_one(JobLine)
        assert line.display and line.region.width == 80
        await eventually(pilot, lambda: "ValueError: lr too high for this seed"
                         in str(line.render()), what="the selected job's last line")
        table.move_cursor(row=table.get_row_index("demo/student_s7"))
        await eventually(pilot, lambda: "distill has a stuck job" in str(line.render()),
                         what="the line follows the cursor")


async def test_at_120_columns_the_last_line_takes_the_room_of_columns_that_say_nothing() -> None:
    client = FakeClient(one_phase_one_host())
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=(120, 36)) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        await pilot.pause()
        header = table_lines(app)[0].split()
        assert "phase" not in header and "pri" not in header and "gpu" in header, header
        # the CUDA error reads to its point without scrolling sideways
        assert "RuntimeError: CUDA error" in row_line(app, "lr0.1_seed1")
        assert " 1 " in row_line(app, "lr0.1_seed2")  # the GPU, without the one host's name
        assert not app.query_one(JobLine).display  # the log pane has the tail here
        # a priority set: its column comes back
        table.move_cursor(row=table.get_row_index("demo/lr0.03_seed2"))
        await pilot.press("plus")
        await eventually(pilot, lambda: "pri" in table_lines(app)[0].split(),
                         what="the priority column once a priority is set")


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_paused_and_held_header_fits(size: tuple[int, int]) -> None:
    snapshot = sample_snapshot("mnist-sweep")
    snapshot["paused"] = True
    snapshot["held_phases"] = {"distill": "crash guard: 2 jobs failed alike"}
    snapshot["waiting_reason"] = "launching is paused"
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        await pilot.pause()
        header = app.query_one(RunHeader)
        content = header.render()
        lines = str(content).splitlines()
        width = header.content_region.width
        assert all(len(line) <= width for line in lines), (width, lines)
        assert header.size.height == len(lines) == 2
        assert "PAUSED" in lines[0] and "HELD: distill" in lines[0]
        assert "stuck 2" in lines[-1]


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
async def test_the_details_footer_shows_every_key(size: tuple[int, int]) -> None:
    app = EqTuiApp([FakeClient()], clock=lambda: T0)
    async with app.run_test(size=size) as pilot:
        app.query_one(JobTable).focus()
        await pilot.press("enter")
        await eventually(pilot, lambda: isinstance(app.screen, JobDetailsScreen))
        await pilot.pause()
        footer = app.screen.query_one(KeyFooter)
        text = str(footer.render())
        for label in ("Close", "Attempt", "Kill", "Retry", "Requeue", "Hold", "Priority",
                      "Edit", "Clone", "palette"):
            assert label in text, text
        assert footer.size.height == len(text.splitlines())
        assert all(len(line) <= size[0] for line in text.splitlines())


def test_a_killed_jobs_row_says_why_it_ended() -> None:
    record = job("lr0.1_seed1", "killed", history=[attempt(1, "box", 0, T0 - 90, T0 - 10, 137,
                                                           "killed")],
                 failure=("killed", "killed by the user"), reason="killed by the user",
                 last_line="epoch 4/6")
    cells = dict(zip(COLUMN_KEYS, job_cells(record, project="demo", now=T0, max_attempts=3),
                     strict=True))
    assert cells["last_line"] == "killed by the user"


async def test_a_killed_jobs_row_in_the_table() -> None:
    client = FakeClient()
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=(120, 36)) as pilot:
        client.set_job("train_lr0.03_s1", status="killed", reason="killed by the user",
                       ended=T0, last_line="epoch 4/6")
        table = app.query_one(JobTable)
        await eventually(pilot, lambda: str(table.get_cell("demo/train_lr0.03_s1", "last_line"))
                         == "killed by the user", what="the killed row's reason")
