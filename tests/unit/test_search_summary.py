"""What `eq-tui results` says of a search (runfiles/search_summary.py, cli/results.py), from a
run dir's real Optuna journal: the trials by state, the best trial and its parameters by the
study's direction, which parameter mattered, the trials' values in the order told with the best
so far; below the table, under json's `searches`; without Optuna, how to install it."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from eq_tui.cli.main import main
from eq_tui.cli.results import with_searches
from eq_tui.manifest.loader import load_manifest_text
from eq_tui.results.records import dumps, make_record
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


def optuna_study(run_dir: Path, direction: str = "maximize", name: str = "main") -> Any:
    """A study made with Optuna itself where the engine keeps one: no engine, no manifest."""
    import optuna
    from optuna.storages import JournalStorage
    from optuna.storages.journal import JournalFileBackend

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna.create_study(study_name=name, direction=direction, storage=JournalStorage(
        JournalFileBackend(str(run_dir / "optuna.journal"))))


def told_out_of_order(run_dir: Path, direction: str = "maximize") -> Any:
    """t1 told 0.4, t0 failed, t3 pruned after reporting 5.0 (Optuna keeps it as its value),
    t2 told 0.6 and t4 still running."""
    import optuna

    found = optuna_study(run_dir, direction)
    width = optuna.distributions.CategoricalDistribution(["64", "256"])
    t0, t1, t2, t3, _ = (found.ask({"width": width}) for _ in range(5))
    found.tell(t1, 0.4)
    found.tell(t0, state=optuna.trial.TrialState.FAIL)
    t3.report(5.0, step=1)
    found.tell(t3, state=optuna.trial.TrialState.PRUNED)
    found.tell(t2, 0.6)
    return found


def test_the_curve_is_the_order_told_with_the_best_so_far(tmp_path: Path) -> None:
    told_out_of_order(tmp_path)
    [summary] = read_searches(tmp_path)
    assert [(p.trial, p.state, p.value, p.best_so_far) for p in summary.curve] == [
        (1, "complete", 0.4, 0.4), (0, "fail", None, 0.4), (3, "pruned", 5.0, 0.4),
        (2, "complete", 0.6, 0.6)]
    ended = [p.ended_at for p in summary.curve]
    assert all(isinstance(t, float) for t in ended) and ended == sorted(ended)
    assert summary.to_json()["curve"][0] == summary.curve[0].to_json()
    assert "  told in order: 4 trials; ▁ 0.4 … █ 0.6; x failed, ∘ pruned\n" in summary.text()
    assert "    value  ▁x∘█\n    best   ▁▁▁█\n" in summary.text()
    minimized = tmp_path / "min"
    minimized.mkdir()
    told_out_of_order(minimized, "minimize")
    [least] = read_searches(minimized)
    assert [p.best_so_far for p in least.curve] == [0.4, 0.4, 0.4, 0.4]


def test_eq_tui_results_plots_the_curve_and_json_carries_it(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    told_out_of_order(tmp_path)
    (tmp_path / "results.jsonl").write_text(dumps([make_record(
        job_id=f"t{n}", phase="main", params={"width": "64"}, attempt=1, status="completed",
        metrics={"val_acc": [value]}) for n, value in ((1, 0.4), (2, 0.6))]))
    assert main(["results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "\nsearch main (maximize): complete 2, fail 1, pruned 1, running 1\n" in out
    assert "    value  ▁x∘█\n    best   ▁▁▁█\n" in out
    assert "  best so far: 0.4 after 1, 0.4 after 2, 0.4 after 3, 0.6 after 4 told\n" in out
    assert main(["results", str(tmp_path), "--format", "json"]) == 0
    [search] = json.loads(capsys.readouterr().out)["searches"]
    assert [(p["trial"], p["value"], p["best_so_far"], p["state"]) for p in search["curve"]] == [
        (1, 0.4, 0.4, "complete"), (0, None, 0.4, "fail"), (3, 5.0, 0.4, "pruned"),
        (2, 0.6, 0.6, "complete")]
    # where Optuna is not installed (its import fails), how to install it, no traceback
    monkeypatch.setitem(sys.modules, "optuna", None)
    assert main(["results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.endswith("\nthis run has a search; to see its trials here: "
                        "pip install 'eq-tui[search]'\n")
    assert main(["results", str(tmp_path), "--format", "json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["searches"] == [] and "pip install" in data["searches_unread"]
