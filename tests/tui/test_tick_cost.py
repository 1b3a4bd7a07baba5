"""One engine tick on the UI: 5,000 jobs, 50 of them changed. The test checks the work is
right; bench/ui.py times it (target < 30 ms)."""

from __future__ import annotations

import copy
import time
from typing import Any

from eq_tui.api.events import JobUpdated
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from tests.tui.fake_client import T0, FakeClient, attempt, job, sample_snapshot
from tests.tui.pilot_wait import eventually

JOBS = 5000
CHANGED = 50


def status_of(i: int) -> str:
    """A sweep in mid-run: a GPU's worth running, some done, some failed, most waiting."""
    if i % 300 == 0:
        return "running"
    return "completed" if i % 3 == 0 else "stuck" if i % 97 == 0 else "pending"


def big_snapshot() -> dict[str, Any]:
    snapshot = sample_snapshot()
    jobs = []
    for i in range(JOBS):
        status = status_of(i)
        history = [] if status == "pending" else [
            attempt(1, "rtx-box", i % 4, T0 - 100 - i % 50,
                    None if status == "running" else T0 - i % 50, 0)]
        jobs.append(job(f"j{i:05d}", status, history=history, last_line=f"epoch {i % 10}"))
    snapshot["jobs"] = jobs
    return snapshot


def tick_events(snapshot: dict[str, Any], round_: int) -> list[JobUpdated]:
    events = []
    for i in range(round_, JOBS, JOBS // CHANGED):
        state = copy.deepcopy(snapshot["jobs"][i])
        state["last_line"] = f"epoch {round_} loss {i}"
        state["status"] = "completed" if round_ % 2 else "running"
        state["ended"] = T0
        events.append(JobUpdated(project="demo", at=T0, job=state["id"], state=state))
    return events


async def measure_tick_ms(rounds: int = 5) -> float:
    snapshot = big_snapshot()
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    best = float("inf")
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(JobTable)
        assert table.row_count == JOBS  # every row from the first frame
        await pilot.pause()
        for round_ in range(1, rounds + 1):
            events = tick_events(snapshot, round_)
            start = time.perf_counter()
            changes = app.apply_events(events)
            best = min(best, time.perf_counter() - start)
            assert len(changes.jobs) == CHANGED
            await pilot.pause()  # let it repaint before the next tick
    return best * 1000


async def test_one_tick_of_50_changes_among_5000_jobs_updates_only_those_rows() -> None:
    await measure_tick_ms(rounds=2)  # asserts the row count and the 50 changes each round


async def test_every_row_is_in_from_the_first_frame_and_a_late_change_sorts_up() -> None:
    snapshot = big_snapshot()
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        table = app.query_one(JobTable)
        assert table.row_count == JOBS
        status = list(table.columns).index("status")
        assert str(table.get_row_at(0)[status]) == "stuck"  # stuck jobs first (active first)
        last = snapshot["jobs"][-1]  # pending, far below the first screens
        state = copy.deepcopy(last)
        state.update(status="stuck", last_line="changed far below")
        app.apply_events([JobUpdated(project="demo", at=T0, job=last["id"], state=state)])
        stuck = sum(1 for j in snapshot["jobs"] if j["status"] == "stuck") + 1
        # the last of the stuck ones (ties keep the manifest order)
        await eventually(pilot, lambda: table.get_row_index(f"demo/{last['id']}") == stuck - 1,
                         what="the newly stuck job sorted up among the stuck ones")
        assert table.row_count == JOBS
        assert str(table.get_cell(f"demo/{last['id']}", "status")) == "stuck"
