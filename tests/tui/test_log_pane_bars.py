"""The log pane follows a log with nested progress bars: one line per bar, its newest state,
read from a real log file as the local tail reads it (api/local_tail.read_tail)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from eq_tui.api.local_tail import read_tail
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.log_pane import LogPane
from tests.support.tqdm_writes import lightning_log
from tests.tui.fake_client import T0, FakeClient
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
JOB = "train_lr0.03_s1"  # running in the sample snapshot


class FileTailClient(FakeClient):
    """The fake engine, with the selected job's log a real file read as a local tail is."""

    def __init__(self, log: Path) -> None:
        super().__init__()
        self.log = log

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        self.tail_calls.append((job_id, attempt))
        return read_tail(self.log, lines)


class HeldTailClient(FakeClient):
    """A tail that answers only when the test lets it: a slow host."""

    def __init__(self) -> None:
        super().__init__()
        self.answer = asyncio.Event()

    async def tail(self, job_id: str, attempt: int | None = None, lines: int = 200) -> list[str]:
        self.tail_calls.append((job_id, attempt))
        await self.answer.wait()
        return ["at last"]


async def show(app: EqTuiApp, job_id: str) -> LogPane:
    jobs = app.query_one(JobTable)
    jobs.move_cursor(row=jobs.get_row_index(f"demo/{job_id}"))
    jobs.focus()
    return app.query_one(LogPane)


async def test_the_pane_follows_the_main_bar_past_epoch_0_while_validation_redraws(
        tmp_path: Path) -> None:
    log = tmp_path / "log"
    writes = lightning_log(4)
    epoch = {n: next(i for i, w in enumerate(writes) if f"Epoch {n}: " in w) for n in (1, 2, 3)}
    log.write_text("".join(writes[:epoch[1]]), encoding="utf-8")
    app = EqTuiApp([FileTailClient(log)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        pane = await show(app, JOB)
        lines = pane.log_widget.lines
        await eventually(pilot, lambda: any(line.startswith("Epoch 0: 100%") for line in lines),
                         what="epoch 0's bar")
        # epoch 1's bar and half of its validation: the bar's row, the validation bar below
        with log.open("a", encoding="utf-8") as handle:
            handle.write("".join(writes[epoch[1]:epoch[1] + 20]))
        await eventually(pilot, lambda: len(lines) == 3 and lines[1].startswith("Epoch 1: 100%")
                         and lines[2].startswith("Validation DataLoader 0:  43%"),
                         what="epoch 1 above its validation bar")
        with log.open("a", encoding="utf-8") as handle:
            handle.write("".join(writes[epoch[1] + 20:epoch[3] + 3]))
        await eventually(pilot, lambda: lines[-1].startswith("Epoch 3:  40%"),
                         what="the newest epoch's bar")
        assert list(lines) == ["GPU available: True (cuda), used: True", lines[-1]]


async def test_a_slow_tail_is_awaited_not_restarted_by_the_next_poll() -> None:
    client = HeldTailClient()
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        pane = await show(app, JOB)
        mine = (JOB, None)
        await eventually(pilot, lambda: mine in client.tail_calls, what="the first tail")
        pane.poll()
        pane.poll()
        await pilot.pause()
        assert client.tail_calls.count(mine) == 1
        client.answer.set()
        await eventually(pilot, lambda: list(pane.log_widget.lines) == ["at last"],
                         what="the slow tail's lines")
