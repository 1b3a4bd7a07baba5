"""The results screen (`R`) of a run with a search: below the trials' table, the search panel
(tui/search_panel.py) says the best trial and its parameters, the trials' values in the order
told with the best so far, and which parameters mattered, read from the run dir's Optuna journal
(made here with Optuna itself, named after its phase: no engine). It follows the journal as
trials are told, and without Optuna says how to install it."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.screens.results import ResultsScreen
from eq_tui.tui.search_panel import SearchPanel
from tests.tui.fake_client import T0, FakeClient, attempt, job, sample_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)
# trial -> (lr, width, val_acc); None: failed, "pruned": pruned
TRIALS: dict[int, tuple[str, str, float | str | None]] = {
    0: ("0.1", "64", 0.61), 1: ("0.01", "256", 0.83), 2: ("0.03", "128", 0.74),
    3: ("0.001", "64", None), 4: ("0.01", "128", 0.79), 5: ("0.03", "256", 0.88),
    6: ("0.1", "256", "pruned"), 7: ("0.001", "128", 0.66)}


def open_study(run_dir: Path) -> Any:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(
        study_name="main", direction="maximize", load_if_exists=True,
        storage=JournalStorage(JournalFileBackend(str(run_dir / "optuna.journal"))))


def tell(study: Any, lr: str, width: str, value: float | str | None) -> None:
    import optuna

    study.enqueue_trial({"lr": lr, "width": width})
    trial = study.ask({"lr": optuna.distributions.CategoricalDistribution(
                           ["0.1", "0.03", "0.01", "0.001"]),
                       "width": optuna.distributions.CategoricalDistribution(
                           ["64", "128", "256"])})
    if value is None:
        study.tell(trial, state=optuna.trial.TrialState.FAIL)
    elif value == "pruned":
        study.tell(trial, state=optuna.trial.TrialState.PRUNED)
    else:
        study.tell(trial, value)


def search_run(run_dir: Path) -> FakeClient:
    study = open_study(run_dir)
    for lr, width, value in TRIALS.values():
        tell(study, lr, width, value)
    snapshot = sample_snapshot()
    snapshot["run_dir"] = str(run_dir)
    jobs = []
    for n, (lr, width, value) in TRIALS.items():
        done = isinstance(value, float)
        status = "completed" if done else "pruned" if value == "pruned" else "stuck"
        jobs.append(job(f"t{n}", status, phase="main",
                        history=[attempt(1, "rtx-box", n % 4, T0 - 900 + 60 * n,
                                         T0 - 850 + 60 * n, 0 if done else 1)],
                        params={"lr": lr, "width": width},
                        metrics={"val_acc": value} if done else {}))
    snapshot["jobs"] = jobs
    snapshot["settings"].update(goals={"val_acc": "max"}, group_over="seed")
    return FakeClient(snapshot)


def panel_text(app: EqTuiApp) -> str:
    panel = app.screen.query_one(SearchPanel)
    return str(panel.render()) if panel.display else ""


async def open_results(pilot: Pilot[Any]) -> None:
    await pilot.press("R")
    await eventually(pilot, lambda: isinstance(pilot.app.screen, ResultsScreen))
    await eventually(pilot, lambda: pilot.app.screen.query_one(SearchPanel).loaded,
                     what="the search panel's first load")


async def test_the_panel_follows_the_journal_as_trials_are_told(tmp_path: Path) -> None:
    app = EqTuiApp([search_run(tmp_path)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await open_results(pilot)
        text = panel_text(app)
        assert text.startswith("search main (maximize): complete 6, fail 1, pruned 1\n")
        assert "  best: trial 5, 0.88 (lr=0.03 width=256)\n" in text
        assert "  told in order: 8 trials; ▁ 0.61 … █ 0.88; x failed, ∘ pruned\n" in text
        assert "    value  ▁▇▄x▆█∘▂\n    best   ▁▇▇▇▇███\n" in text
        assert "\n  importance: " in text
        tell(open_study(tmp_path), "0.01", "256", 0.95)
        await eventually(pilot, lambda: "trial 8, 0.95" in panel_text(app),
                         what="the newly told trial")
        assert "    best   ▁▆▆▆▆▇▇▇█\n" in panel_text(app)


async def test_without_optuna_the_panel_says_how_to_install_it(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    client = search_run(tmp_path)
    monkeypatch.setitem(sys.modules, "optuna", None)  # its import fails, as where it is absent
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await open_results(pilot)
        assert panel_text(app) == ("this run has a search; to see its trials here: "
                                   "pip install 'eq-tui[search]'")


async def test_a_run_without_a_search_has_no_panel(tmp_path: Path) -> None:
    snapshot = sample_snapshot()
    snapshot["run_dir"] = str(tmp_path)
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await open_results(pilot)
        assert panel_text(app) == "" and not app.screen.query_one(SearchPanel).display


def test_results_screen_with_a_search_snapshot(snap_compare: Any, tmp_path: Path) -> None:
    app = EqTuiApp([search_run(tmp_path)], clock=lambda: T0)
    assert snap_compare(app, terminal_size=SIZE, run_before=open_results)
