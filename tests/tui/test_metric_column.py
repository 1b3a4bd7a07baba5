"""The job table's metric column (`m`): a running job's latest number from its last log line,
with a sparkline of the values seen; a finished job's final value from its record."""

from __future__ import annotations

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.job_table import JobTable
from eq_tui.tui.live_metrics import LiveMetrics, sparkline
from tests.tui.fake_client import T0, FakeClient, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (200, 48)
RUNNING = "demo/train_lr0.03_s1"
DONE = "demo/train_lr0.1_s1"


def make_app() -> tuple[EqTuiApp, FakeClient]:
    snapshot = sample_snapshot()
    for record in snapshot["jobs"]:
        if record["id"] == "train_lr0.03_s1":
            record["last_line"] = "epoch 3/6 loss=0.412 val_acc=0.61"
        if record["id"] == "train_lr0.1_s1":
            record["metrics"] = {"val_acc": 0.7512, "loss": 0.2}
    snapshot["settings"]["goals"] = {"val_acc": "max"}
    client = FakeClient(snapshot)
    return EqTuiApp([client], clock=lambda: T0), client


def cell(app: EqTuiApp, key: str) -> str:
    return str(app.query_one(JobTable).get_cell(key, "metric"))


async def test_m_shows_the_metric_column_and_cycles() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        assert "metric" not in list(table.columns)  # none until asked
        table.focus()
        await pilot.press("m")
        assert table.metric == "val_acc"  # the goal's metric first
        assert cell(app, RUNNING) == "0.61" and cell(app, DONE) == "0.7512"
        # a point per evaluation: each line says a new epoch (a second value for one epoch
        # would be a redraw of it, not a point of its own)
        for epoch, value in ((4, "0.65"), (5, "0.7"), (6, "0.68")):
            client.set_job("train_lr0.03_s1",
                           last_line=f"epoch {epoch}/6 loss=0.3 val_acc={value}")
            await eventually(pilot, lambda v=value: cell(app, RUNNING).startswith(v),
                             what="the metric cell to follow the log")
        assert cell(app, RUNNING) == "0.68 ▁▄█▆"
        await pilot.press("m")
        assert table.metric == "loss" and cell(app, DONE) == "0.2"
        await pilot.press("m")
        assert table.metric is None
        assert "metric" not in list(table.columns)


async def test_sorting_on_the_metric_column() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        table = app.query_one(JobTable)
        table.focus()
        await pilot.press("m")
        table.sort_by("metric", reverse=True)
        await pilot.pause()
        first_two = table.keys[:2]
        assert first_two == [DONE, RUNNING]


def test_sparkline_and_values() -> None:
    assert sparkline([1.0, 2.0, 3.0]) == "▁▅█"
    assert sparkline([1.0]) == "" and sparkline([2.0, 2.0]) == "▁▁"
    live = LiveMetrics()
    job = {"last_line": "loss=nan"}
    live.observe("k", job)
    assert live.cell("k", job, "loss") == "nan"
    assert live.cell("k", {"metrics": {"loss": None}}, "loss") == "nan"
