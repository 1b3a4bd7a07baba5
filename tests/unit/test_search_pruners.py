"""`early_stop:` mapped onto Optuna's pruners (runfiles/search_pruners.py) and a study's
intermediate values (SearchStudy.report), with the real Optuna in a run dir's journal: each
rule's parameters (grace, eta) where Optuna takes them, each step written once (also after a
reopen, as after a kill -9), a verdict kept in the journal, a told trial taking no report."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import optuna
import pytest

from eq_tui.manifest.loader import load_manifest_text
from eq_tui.manifest.model import EarlyStopSpec, SearchSpec
from eq_tui.runfiles.search_pruners import make_pruner, pruner_args
from eq_tui.runfiles.search_study import JOURNAL_NAME, PRUNED_AT, SearchStudy

MANIFEST = """
project: p
goal: {val_acc: GOAL}
search: {space: {lr: {low: 0.001, high: 0.1}}, trials: 20, sampler: random, seed: 0}
template: {cmd: "t --lr ${lr}"}
"""


def search(goal: str = "max") -> SearchSpec:
    spec = load_manifest_text(MANIFEST.replace("GOAL", goal), "m.yaml").phases[0].search
    assert spec is not None
    return spec


def rule(name: str, grace: int = 1, eta: int = 3, goal: str = "max") -> EarlyStopSpec:
    return EarlyStopSpec(metric="val_acc", goal=goal, rule=name,  # type: ignore[arg-type]
                         grace=grace, eta=eta)


def study(tmp_path: Path, spec: EarlyStopSpec | None, goal: str = "max") -> SearchStudy:
    return SearchStudy(tmp_path, "main", search(goal), spec)


def told_ops(tmp_path: Path) -> Counter[tuple[int, int]]:
    """(trial id, step) of each intermediate value the journal's own log holds."""
    ops = [json.loads(line) for line in (tmp_path / JOURNAL_NAME).read_text().splitlines()]
    return Counter((op["trial_id"], op["step"]) for op in ops if op["op_code"] == 7)


def test_each_rule_maps_its_keys_onto_optunas_pruner() -> None:
    assert pruner_args(None) == ("NopPruner", ())
    assert pruner_args(rule("median", grace=4, eta=5)) == ("MedianPruner", (
        ("n_startup_trials", 1), ("n_warmup_steps", 4), ("interval_steps", 1),
        ("n_min_trials", 1)))
    assert pruner_args(rule("asha", grace=2, eta=4)) == ("SuccessiveHalvingPruner", (
        ("min_resource", 2), ("reduction_factor", 4), ("min_early_stopping_rate", 0),
        ("bootstrap_count", 0)))
    assert pruner_args(rule("hyperband", grace=3, eta=2)) == ("HyperbandPruner", (
        ("min_resource", 3), ("max_resource", "auto"), ("reduction_factor", 2),
        ("bootstrap_count", 0)))
    # Optuna takes each as it is (its constructors check their arguments)
    for spec in (None, rule("median", 4), rule("asha", 2, 4), rule("hyperband", 3, 2)):
        name, _ = args = pruner_args(spec)
        assert type(make_pruner(optuna, args)).__name__ == name


def test_median_judges_from_report_grace_on(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median", grace=3))
    good = s.ask().number
    assert s.report(good, [(1, 0.5), (2, 0.6), (3, 0.7), (4, 0.8)]).pruned_at is None
    s.tell(good, "complete", 0.8)
    bad = s.ask().number
    assert s.report(bad, [(1, 0.1), (2, 0.1)]).pruned_at is None  # before grace
    reported = s.report(bad, [(1, 0.1), (2, 0.1), (3, 0.1), (4, 0.1)])
    assert (reported.pruned_at, reported.last_step, reported.value) == (3, 3, 0.1)
    assert reported.others == (0.7,)
    assert told_ops(tmp_path)[(1, 4)] == 0  # nothing is told past the verdict


def test_median_follows_the_studys_direction(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median", goal="min"), goal="min")
    first = s.ask().number
    s.report(first, [(1, 0.5)])
    s.tell(first, "complete", 0.5)
    low, high = s.ask().number, s.ask().number
    assert s.report(low, [(1, 0.4)]).pruned_at is None
    assert s.report(high, [(1, 0.6)]).pruned_at == 1


def test_median_needs_a_completed_trial(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median"))
    first, second = s.ask().number, s.ask().number
    s.report(first, [(1, 0.9)])
    assert s.report(second, [(1, 0.1)]).pruned_at is None


def rung_of_four(tmp_path: Path, eta: int) -> int | None:
    """Three trials reach report 2 (grace 2) with 0.9, 0.8, 0.1; where a fourth with 0.85 and
    a report 1 far worse than all of theirs is pruned."""
    tmp_path.mkdir()
    s = study(tmp_path, rule("asha", grace=2, eta=eta))
    for value in (0.9, 0.8, 0.1):
        # their jobs ended: the pruner still records their rung, for the others
        assert s.report(s.ask().number, [(1, value), (2, value)], judge=False).pruned_at is None
    return s.report(s.ask().number, [(1, 0.0), (2, 0.85)]).pruned_at


def test_asha_rungs_start_at_grace_and_keep_the_best_1_in_eta(tmp_path: Path) -> None:
    # eta 3: the best 1 of 4 goes on; eta 2: the best 2 of 4
    assert rung_of_four(tmp_path / "a", eta=3) == 2
    assert rung_of_four(tmp_path / "b", eta=2) is None


def test_asha_next_rung_is_grace_times_eta(tmp_path: Path) -> None:
    s = study(tmp_path, rule("asha", grace=1, eta=2))
    best = s.ask().number
    assert s.report(best, [(1, 0.9), (2, 0.9)], judge=False).pruned_at is None
    other = s.ask().number
    # rung 0 is report 1 (grace): of the two there, only the best goes on
    assert s.report(other, [(1, 0.5)]).pruned_at == 1
    third = s.ask().number
    assert s.report(third, [(1, 0.95)]).pruned_at is None
    # report 2 is the next rung (1 * 2): the best's 0.9 there beats 0.3
    assert s.report(third, [(2, 0.3)]).pruned_at == 2


def test_each_step_is_told_once_also_after_a_reopen(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median"))
    number = s.ask().number
    s.report(number, [(1, 0.5), (2, 0.6)])
    assert s.report(number, [(1, 0.5), (2, 0.6), (3, 0.7)]).last_step == 3
    again = study(tmp_path, rule("median"))  # as after a kill -9
    # a resumed attempt makes steps 2 and 3 again, with other values: they stay as told
    assert again.report(number, [(2, 0.1), (3, 0.2), (4, 0.8)]).last_step == 4
    assert set(told_ops(tmp_path).values()) == {1} and len(told_ops(tmp_path)) == 4
    trial = optuna.load_study(study_name="main", storage=again._storage).trials[0]
    assert trial.intermediate_values == {1: 0.5, 2: 0.6, 3: 0.7, 4: 0.8}


def test_a_verdict_is_kept_in_the_journal(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median"))
    good = s.ask().number
    s.report(good, [(1, 0.9)])
    s.tell(good, "complete", 0.9)
    bad = s.ask().number
    assert s.report(bad, [(1, 0.1)]).pruned_at == 1
    again = study(tmp_path, rule("median"))
    reported = again.report(bad, [])  # after a restart, before its jobs were stopped
    assert (reported.pruned_at, reported.value, reported.others) == (1, 0.1, (0.9,))
    assert again.report(bad, [(2, 0.95)]).pruned_at == 1  # a report more changes nothing
    assert len(told_ops(tmp_path)) == 2
    trial = optuna.load_study(study_name="main", storage=again._storage).trials[bad]
    assert trial.user_attrs[PRUNED_AT] == 1


def test_judge_false_keeps_no_verdict_and_a_told_trial_takes_no_report(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median"))
    good = s.ask().number
    s.report(good, [(1, 0.9)])
    s.tell(good, "complete", 0.9)
    ended = s.ask().number
    assert s.report(ended, [(1, 0.1)], judge=False).pruned_at is None
    assert s.report(ended, []).pruned_at is None  # no mark was kept
    s.tell(ended, "complete", 0.1)
    assert s.report(ended, [(2, 0.2)]) == s.report(ended, [])
    assert s.report(ended, [(2, 0.2)]).last_step == 1
    assert s.report(99, [(1, 0.5)]).last_step == 0  # no such trial


def test_a_changed_early_stop_changes_the_pruner(tmp_path: Path) -> None:
    s = study(tmp_path, rule("median", grace=5))
    good = s.ask().number
    s.report(good, [(1, 0.9), (2, 0.9)])
    s.tell(good, "complete", 0.9)
    bad = s.ask().number
    assert s.report(bad, [(1, 0.1)]).pruned_at is None
    s.use_pruner(rule("median", grace=2))
    assert s.report(bad, [(2, 0.1)]).pruned_at == 2
    s.use_pruner(None)
    other = s.ask().number
    assert s.report(other, [(1, 0.0), (2, 0.0)]).pruned_at is None


@pytest.mark.parametrize("name", ["median", "asha", "hyperband", None])
def test_the_study_is_opened_with_the_rules_pruner(tmp_path: Path, name: str | None) -> None:
    spec = rule(name) if name is not None else None
    assert type(study(tmp_path, spec)._study.pruner).__name__ == pruner_args(spec)[0]
