"""What `eq-tui results` says of a search (runfiles/search_summary.py, cli/results.py), from a
run dir's real Optuna journal: the trials by state, the best trial and its parameters by the
study's direction, which parameter mattered; below the table, under json's `searches`."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from eq_tui.cli.results import with_searches
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.runfiles.search_study import SearchStudy
from eq_tui.runfiles.search_summary import read_searches

MANIFEST = """
project: p
goal: {val_acc: GOAL}
search:
  space:
    lr: {low: 1.0e-4, high: 1.0, log: true}
    width: [64, 128, 256]
  trials: 40
  sampler: random
  seed: 3
template: {cmd: "t --lr ${lr} --w ${width}"}
"""
SCORE = {"64": 0.0, "128": 1.0, "256": 2.0}  # only the width matters


def study(run_dir: Path, goal: str = "max", told: int = 30, name: str = "main") -> SearchStudy:
    spec = load_manifest_text(MANIFEST.replace("GOAL", goal), "m.yaml").phases[0].search
    assert spec is not None
    found = SearchStudy(run_dir, name, spec)
    for _ in range(told):
        trial = found.ask()
        found.tell(trial.number, "complete",
                   SCORE[trial.values["width"]] + float(trial.values["lr"]) / 1000)
    return found


def test_the_best_trial_its_parameters_and_what_mattered(tmp_path: Path) -> None:
    asked = study(tmp_path)
    asked.ask()
    asked.tell(asked.ask().number, "fail")
    [summary] = read_searches(tmp_path)
    assert summary.name == "main" and summary.direction == "maximize"
    assert summary.trials == {"complete": 30, "running": 1, "fail": 1}
    assert summary.best_params["width"] == "256"
    assert summary.best_value == max(t.value for t in _told(tmp_path))
    assert next(iter(summary.importance)) == "width" and summary.importance["width"] > 0.5
    text = summary.text()
    assert text.startswith("search main (maximize): complete 30, fail 1, running 1\n")
    assert f"  best: trial {summary.best}, " in text and "width=256" in text
    assert "  importance: width " in text


def test_a_minimized_study_is_best_at_its_least(tmp_path: Path) -> None:
    study(tmp_path, goal="min")
    [summary] = read_searches(tmp_path)
    assert summary.direction == "minimize" and summary.best_params["width"] == "64"
    assert summary.best_value == min(t.value for t in _told(tmp_path))


def test_no_complete_trial_has_no_best_and_no_importance(tmp_path: Path) -> None:
    assert read_searches(tmp_path) == []  # no journal: nothing, and none is made
    assert not (tmp_path / "optuna.journal").exists()
    study(tmp_path, told=0, name="b").ask()
    study(tmp_path, told=1, name="a")
    a, b = read_searches(tmp_path)
    assert (a.name, a.best, a.importance) == ("a", 0, {})  # one trial: nothing to compare
    assert (b.name, b.best, b.best_params, b.trials) == ("b", None, {}, {"running": 1})
    assert b.text() == "search b (maximize): running 1\n"


def test_the_results_command_puts_the_searches_below_a_table_and_in_json(
        tmp_path: Path) -> None:
    assert with_searches("T\n", tmp_path, "table") == "T\n"
    assert with_searches('{"rows": []}', tmp_path, "json") == '{"rows": []}'
    study(tmp_path)
    [summary] = read_searches(tmp_path)
    assert with_searches("T\n", tmp_path, "table") == "T\n\n" + summary.text()
    assert with_searches("T\n", tmp_path, "markdown") == "T\n\n" + summary.text()
    assert with_searches("a,b\n", tmp_path, "csv") == "a,b\n"
    data = json.loads(with_searches('{"rows": []}', tmp_path, "json"))
    assert data["searches"] == [json.loads(json.dumps(summary.to_json()))]
    assert data["searches"][0]["best_params"]["width"] == "256"


def _told(run_dir: Path) -> list[Any]:
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    loaded = optuna.load_study(study_name="main", storage=JournalStorage(
        JournalFileBackend(str(run_dir / "optuna.journal"))))
    return [t for t in loaded.trials if t.value is not None]
