"""A search's study (runfiles/search_study.py) with the real Optuna, in a run dir's
`optuna.journal`: the same seed asks the same, a reopened journal (as after a kill -9) keeps
every told trial and asks none again, and `optuna.load_study` reads what was told."""

from __future__ import annotations

from pathlib import Path

import optuna
import pytest
from optuna.storages import JournalStorage
from optuna.storages.journal import JournalFileBackend

from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import SearchSpec
from eq_tui.runfiles.search_study import JOURNAL_NAME, SearchStudy

MANIFEST = """
project: p
goal: {val_acc: max}
search:
  space:
    lr: {low: 1.0e-4, high: 1.0, log: true}
    width: [64, 128, 256]
    layers: {low: 1, high: 9, step: 2}
    dropout: {low: 0.0, high: 0.5, step: 0.1}
  trials: 6
  sampler: SAMPLER
  seed: 7
template: {cmd: "t --lr ${lr} --w ${width} --l ${layers} --d ${dropout}"}
"""


def search(sampler: str = "tpe", goal: str = "max") -> SearchSpec:
    text = MANIFEST.replace("SAMPLER", sampler).replace("val_acc: max", f"val_acc: {goal}")
    spec = load_manifest_text(text, "m.yaml").phases[0].search
    assert spec is not None
    return spec


def load(run_dir: Path, name: str = "main") -> optuna.Study:
    return optuna.load_study(study_name=name, storage=JournalStorage(
        JournalFileBackend(str(run_dir / JOURNAL_NAME))))


@pytest.mark.parametrize("sampler", ["tpe", "random"])
def test_the_same_seed_twice_asks_the_same(tmp_path: Path, sampler: str) -> None:
    asked = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        study = SearchStudy(tmp_path / name, "main", search(sampler))
        asked.append([study.ask() for _ in range(4)])
    assert asked[0] == asked[1]
    assert len({tuple(t.values.items()) for t in asked[0]}) > 1
    first = asked[0][0].values
    assert set(first) == {"lr", "width", "layers", "dropout"}
    assert 1e-4 <= float(first["lr"]) <= 1.0 and first["width"] in ("64", "128", "256")
    assert int(first["layers"]) in (1, 3, 5, 7, 9) and "." not in first["layers"]
    assert round(float(first["dropout"]) * 10, 9) in (0, 1, 2, 3, 4, 5)


def test_a_reopened_journal_keeps_told_trials_and_asks_none_again(tmp_path: Path) -> None:
    study = SearchStudy(tmp_path, "main", search())
    trials = [study.ask() for _ in range(4)]
    assert [t.number for t in trials] == [0, 1, 2, 3]
    study.tell(0, "complete", 0.5)
    study.tell(1, "fail")
    study.tell(2, "pruned")
    # as after a kill -9: a new study object on the same journal
    again = SearchStudy(tmp_path, "main", search())
    assert again.counts() == {"complete": 1, "fail": 1, "pruned": 1, "running": 1}
    assert again.open_trials() == [trials[3]]  # the one to adopt, with its values
    assert [again.state(n) for n in range(5)] == ["complete", "fail", "pruned", "running",
                                                 "missing"]
    fresh = again.ask()
    assert fresh.number == 4
    again.tell(3, "complete", 0.75)
    again.tell(0, "complete", 0.1)  # told twice: the first stands
    read = load(tmp_path)
    assert [(t.number, t.state.name, t.value) for t in read.trials] == [
        (0, "COMPLETE", 0.5), (1, "FAIL", None), (2, "PRUNED", None), (3, "COMPLETE", 0.75),
        (4, "RUNNING", None)]
    assert read.direction == optuna.study.StudyDirection.MAXIMIZE
    assert read.best_trial.number == 3
    assert read.trials[3].params["width"] == trials[3].values["width"]


def test_a_reopened_study_does_not_start_its_sampling_over(tmp_path: Path) -> None:
    study = SearchStudy(tmp_path, "main", search("random"))
    first = [study.ask() for _ in range(2)]
    again = SearchStudy(tmp_path, "main", search("random"))
    assert again.ask().values not in [t.values for t in first]


def test_a_value_that_is_not_a_number_fails_the_trial_and_min_is_minimize(
        tmp_path: Path) -> None:
    study = SearchStudy(tmp_path, "tune", search(goal="min"))
    study.ask()
    study.ask()
    study.tell(0, "complete", float("nan"))
    study.tell(1, "complete", None)
    read = load(tmp_path, "tune")
    assert [t.state.name for t in read.trials] == ["FAIL", "FAIL"]
    assert read.direction == optuna.study.StudyDirection.MINIMIZE


def test_studies_of_two_phases_share_the_journal_apart(tmp_path: Path) -> None:
    a = SearchStudy(tmp_path, "a", search())
    b = SearchStudy(tmp_path, "b", search())
    a.ask()
    a.tell(0, "complete", 1.0)
    assert b.ask().number == 0
    assert b.counts() == {"running": 1} and a.counts() == {"complete": 1}
