"""The results screen (`R`): one row per configuration, best marked, sortable, following the run
as jobs finish. Pilot against the in-memory client, and an SVG snapshot."""

from __future__ import annotations

from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.screens.results import ResultsScreen
from tests.tui.fake_client import T0, FakeClient, attempt, job, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
ACC = {("0.1", "1"): 0.71, ("0.1", "2"): 0.73, ("0.1", "3"): 0.72,
       ("0.03", "1"): 0.86, ("0.03", "2"): 0.84, ("0.03", "3"): None,
       ("0.01", "1"): 0.79, ("0.01", "2"): 0.81, ("0.01", "3"): 0.80}


def results_snapshot() -> dict[str, Any]:
    snapshot = sample_snapshot()
    jobs = []
    for (lr, seed), acc in ACC.items():
        done = acc is not None
        jobs.append(job(f"train_lr{lr}_s{seed}", "completed" if done else "running",
                        history=[attempt(1, "rtx-box", 0, T0 - 300, T0 - 100 if done else None,
                                         0 if done else None)],
                        params={"lr": lr, "seed": seed},
                        metrics={"val_acc": acc, "loss": round(1.2 - acc, 3)} if done else {}))
    jobs.append(job("student_nan", "stuck", phase="distill",
                    failure=("exit_nonzero", "exit 3"), params={}, metrics={}))
    jobs.append(job("student_s1", "completed", phase="distill", params={},
                    metrics={"val_acc": 0.9, "loss": 0.3}))
    snapshot["jobs"] = jobs
    snapshot["settings"].update(goals={"val_acc": "max", "loss": "min"}, group_over="seed")
    return snapshot


def make_app() -> tuple[EqTuiApp, FakeClient]:
    client = FakeClient(results_snapshot())
    return EqTuiApp([client], clock=lambda: T0), client


def rows(app: EqTuiApp) -> list[list[str]]:
    grid = app.screen.query_one(DataTable)
    return [[str(cell) for cell in grid.get_row_at(i)] for i in range(grid.row_count)]


async def test_r_opens_one_row_per_configuration_with_the_best_marked() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen), what="results")
        table = rows(app)
        # phase, lr, job (a job outside the grid is its own row), n, val_acc, its range, loss...
        assert [r[:4] for r in table] == [["train", "0.1", "", "3/3"],
                                          ["train", "0.03", "", "2/3"],
                                          ["train", "0.01", "", "3/3"],
                                          ["distill", "", "student_nan", "0/1"],
                                          ["distill", "", "student_s1", "1/1"]]
        assert table[1][4] == "0.850 ± 0.014 *"  # best val_acc of the train phase
        assert table[1][5] == "0.84..0.86"
        assert table[1][6] == "0.350 ± 0.014 *"  # and best (lowest) loss
        assert table[0][4] == "0.720 ± 0.010"
        assert "missing seed=3 (running)" in table[1][-1]
        assert "missing student_nan (stuck)" in table[3][-1]
        await pilot.press("escape")
        await eventually(pilot, lambda: not isinstance(app.screen, ResultsScreen))
        await pilot.press("R")  # opens again
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen))


async def test_it_updates_as_jobs_finish() -> None:
    app, client = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen))
        client.set_job("train_lr0.03_s3", status="completed",
                       metrics={"val_acc": 0.55, "loss": 0.65})
        await eventually(pilot, lambda: rows(app)[1][3] == "3/3", what="the row to update")
        table = rows(app)
        assert table[1][4] == "0.75 ± 0.17"
        assert table[2][4].endswith(" *")  # lr 0.01 is now best at val_acc


async def test_sorting_on_a_column_and_reversing() -> None:
    app, _ = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen))
        screen = app.screen
        assert isinstance(screen, ResultsScreen)
        await pilot.press("s")  # the first column: lr
        assert screen.sort_column == "lr"
        assert [r[1] for r in rows(app)][:3] == ["0.01", "0.03", "0.1"]
        await pilot.press("s", "s", "S")  # then job, then val_acc, reversed
        assert (screen.sort_column, screen.descending) == ("val_acc", True)
        assert [r[1] for r in rows(app)][:3] == ["0.03", "0.01", "0.1"]


async def test_a_row_whose_jobs_ran_different_commands_says_so_and_is_not_best() -> None:
    client = FakeClient(results_snapshot())
    # one seed of the best row was edited after it ran (`edit --set epochs=2`)
    client.set_job("train_lr0.03_s2", cmd="fake-train --id train_lr0.03_s2 --epochs 2")
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(app.screen, ResultsScreen))
        table = rows(app)
        assert table[1][4] == "0.850 ± 0.014"  # the highest mean, averaging unlike runs
        assert "commands differ: seed=1 | seed=2; not ranked" in table[1][-1]
        assert table[2][4] == "0.800 ± 0.010 *"  # the best of the rows of like runs
        note = str(app.screen.query_one("#results-note").render())
        assert "commands differ: that row's jobs ran different commands" in note


def test_results_screen_snapshot(snap_compare: Any) -> None:
    async def open_results(pilot: Pilot[Any]) -> None:
        # the log pane has followed the selected job (its title names it)
        await eventually(pilot, lambda: str(pilot.app.log_pane.border_title).startswith("log: "),
                         what="the log pane following the selected job")
        await pilot.press("R")
        await eventually(pilot, lambda: isinstance(pilot.app.screen, ResultsScreen))
        await pilot.pause()

    app, _ = make_app()
    assert snap_compare(app, terminal_size=SIZE, run_before=open_results)
