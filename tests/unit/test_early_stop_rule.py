"""Early stopping's rule (decide/pruning.py) and its manifest key, without hosts."""

from __future__ import annotations

import textwrap

import pytest

from eq_tui.engine.decide.pruning import Entry, is_rung, judge, quantile
from eq_tui.engine.tick.early_stop import line_value
from eq_tui.errors import ManifestError
from eq_tui.manifest import load_manifest_text
from eq_tui.manifest.model import EarlyStopSpec, MetricsSpec

ASHA = EarlyStopSpec(metric="val_acc", goal="max")


def entry(job: str, config: str, *reports: float) -> Entry:
    return Entry(job, ("main", config), list(reports))


def test_asha_rungs_are_grace_times_powers_of_eta() -> None:
    assert [s for s in range(1, 30) if is_rung(ASHA, s)] == [1, 3, 9, 27]
    spec = EarlyStopSpec(metric="m", goal="min", grace=2, eta=2)
    assert [s for s in range(1, 20) if is_rung(spec, s)] == [2, 4, 8, 16]
    median = EarlyStopSpec(metric="m", goal="min", rule="median", grace=3)
    assert [s for s in range(1, 6) if is_rung(median, s)] == [3, 4, 5]


def test_quantile_interpolates_like_numpy() -> None:
    assert quantile([1.0, 2.0, 3.0, 4.0], 0.5) == 2.5
    assert quantile([5.0], 0.9) == 5.0
    assert quantile([0.0, 10.0], 2 / 3) == pytest.approx(6.6667, abs=1e-3)


def test_the_first_at_a_rung_goes_on_and_a_loser_is_told_why() -> None:
    assert judge(ASHA, ("main", "lr=1"), 1, [entry("a", "lr=1", 0.5)]) is None
    rivals = [entry(f"j{i}", f"lr={i}", v) for i, v in enumerate((0.6, 0.7, 0.8, 0.9, 0.65,
                                                                  0.75))]
    verdict = judge(ASHA, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", 0.612)])
    assert verdict is not None
    assert verdict.reason == ("pruned at report 1: val_acc 0.612, rung cutoff 0.7667 "
                              "(top 1/3 of 7)")
    assert judge(ASHA, ("main", "lr=y"), 1, [*rivals, entry("y", "lr=y", 0.85)]) is None
    # not a rung: nothing is judged at report 2
    assert judge(ASHA, ("main", "lr=x"), 2, [*rivals, entry("x", "lr=x", 0.1, 0.1)]) is None
    # a configuration none of whose jobs has reached the rung yet (others have) goes on
    assert judge(ASHA, ("main", "lr=z"), 1, rivals) is None


def test_a_configuration_is_judged_on_the_mean_of_its_seeds() -> None:
    """One unlucky seed does not stop a good configuration: its seeds' mean is compared."""
    rivals = [entry("b1", "lr=b", 0.7), entry("c1", "lr=c", 0.72)]
    good = [entry("a1", "lr=a", 0.8)]
    unlucky = entry("a2", "lr=a", 0.66)
    assert judge(ASHA, ("main", "lr=a"), 1, [*rivals, *good, unlucky]) is None
    alone = judge(ASHA, ("main", "lr=a"), 1, [*rivals, unlucky])
    assert alone is not None and alone.seeds == 1
    bad = judge(ASHA, ("main", "lr=b"), 1, [*rivals, *good, unlucky, entry("b2", "lr=b", 0.6)])
    assert bad is not None and "(mean of 2 seeds)" in bad.reason


def test_min_goal_and_the_median_rule() -> None:
    spec = EarlyStopSpec(metric="loss", goal="min", rule="median")
    rivals = [entry("a", "c=a", 1.0, 0.5), entry("b", "c=b", 1.0, 0.7), entry("c", "c=c", 1, 0.9)]
    worse = judge(spec, ("main", "c=x"), 2, [*rivals, entry("x", "c=x", 1.0, 0.8)])
    assert worse is not None and "median 0.7 of 3 other configurations" in worse.reason
    assert judge(spec, ("main", "c=y"), 2, [*rivals, entry("y", "c=y", 1.0, 0.6)]) is None


def test_a_report_is_read_the_way_metrics_reads_a_log() -> None:
    assert line_value("epoch 3/9 loss=0.41 val_acc=0.812", "val_acc", None) == 0.812
    assert line_value("epoch 3/9 loss=0.41", "val_acc", None) is None
    pattern = MetricsSpec(pattern=r"Val accuracy (?P<val_acc>[0-9.]+)%")
    assert line_value("Val accuracy 81.5% top5", "val_acc", pattern) == 81.5
    assert line_value("val_acc=0.8", "val_acc", pattern) is None


def load(text: str) -> object:
    return load_manifest_text(textwrap.dedent(text), "m.yaml")


def test_the_manifest_key_top_level_phase_and_off() -> None:
    m = load("""
        project: p
        goal: {val_acc: max}
        early_stop: {metric: val_acc, eta: 4}
        phases:
          - name: a
            jobs: [{id: a1, cmd: x}]
          - name: b
            early_stop: false
            jobs: [{id: b1, cmd: x}]
          - name: c
            early_stop: {metric: loss, goal: min, rule: median, grace: 2}
            jobs: [{id: c1, cmd: x}]
        """)
    phases = {p.name: p.results.early_stop for p in m.phases}  # type: ignore[attr-defined]
    assert phases["a"] == EarlyStopSpec(metric="val_acc", goal="max", eta=4)
    assert phases["b"] is None
    assert phases["c"] == EarlyStopSpec(metric="loss", goal="min", rule="median", grace=2)


@pytest.mark.parametrize(("text", "message", "key_path"), [
    ("early_stop: {metric: acc}", "say which way acc is better", "early_stop"),
    ("early_stop: {goal: max}", "name the metric", "early_stop"),
    ("early_stop: {metric: acc, goal: max, rule: halving}",
     "must be one of asha, median, hyperband", "early_stop.rule"),
    ("early_stop: {metric: acc, goal: max, rule: hyperband}", "has no search: use asha or "
     "median", "early_stop.rule"),
    ("early_stop: {metric: acc, goal: max, eta: 1}", "at least 2", "early_stop.eta"),
    ("early_stop: {metric: acc, goal: max, grace: 0}", "at least 1", "early_stop.grace"),
    ("early_stop: {metric: acc, goal: max, patience: 3}", "unknown key 'patience'",
     "early_stop.patience"),
])
def test_bad_early_stop_keys_name_the_key(text: str, message: str, key_path: str) -> None:
    with pytest.raises(ManifestError) as info:
        load(f"project: p\n{text}\njobs: [{{id: a, cmd: x}}]\n")
    assert message in str(info.value)
    assert info.value.key_path == key_path


def test_the_last_rung_passed_is_judged_again_as_others_reach_it() -> None:
    """A job that was first at a rung goes on; once others reach that rung and it is no longer
    in their best 1/eta, judging it again at that rung stops it."""
    from eq_tui.engine.decide.pruning import last_rung
    # asha: the highest rung passed, however far the others are
    assert [last_rung(ASHA, n, 0) for n in (0, 1, 2, 3, 8, 9)] == [None, 1, 1, 3, 3, 9]
    assert last_rung(ASHA, 9, 100) == 9
    early = entry("first", "lr=bad", 0.3, 0.4)
    assert judge(ASHA, ("main", "lr=bad"), 1, [early]) is None
    later = [early, *(entry(f"j{i}", f"lr={i}", 0.5 + i / 10) for i in range(4))]
    verdict = judge(ASHA, ("main", "lr=bad"), 1, later)
    assert verdict is not None and verdict.rivals == 4


def test_median_judges_a_job_that_ran_ahead_again_at_the_furthest_report_others_made() -> None:
    """A diverging job that started first made its reports before anyone else: judged then, it
    had no rivals. As the others reach its reports, it is judged again at the furthest one
    both made (never beyond its own, never before grace), and stopped there."""
    from eq_tui.engine.decide.pruning import last_rung
    median = EarlyStopSpec(metric="m", goal="max", rule="median", grace=2)
    assert [last_rung(median, 6, reached) for reached in (0, 1, 2, 3, 6, 9)] == \
        [None, None, 2, 3, 6, 6]
    assert [last_rung(median, reports, 9) for reports in (0, 1, 2, 5)] == [None, None, 2, 5]
    ahead = entry("ahead", "lr=1", 0.3, 0.1, 0.1, 0.1, 0.1)
    assert judge(median, ("main", "lr=1"), 2, [ahead]) is None
    rivals = [ahead, entry("a", "lr=0.1", 0.3, 0.5), entry("b", "lr=0.01", 0.3, 0.45)]
    step = last_rung(median, 5, 2)
    assert step == 2
    verdict = judge(median, ("main", "lr=1"), step, rivals)
    assert verdict is not None and verdict.rivals == 2 and verdict.step == 2


@pytest.mark.parametrize("rule", ["asha", "median"])
@pytest.mark.parametrize("goal", ["max", "min"])
def test_a_diverged_report_is_the_worst_whichever_the_goal(rule: str, goal: str) -> None:
    """nan compares false with everything: read as it is, a diverged job was never pruned
    (nan > cutoff is False for goal: min). It is the worst value there is."""
    spec = EarlyStopSpec(metric="loss", goal=goal, rule=rule)  # type: ignore[arg-type]
    rivals = [entry(f"j{i}", f"lr={i}", v) for i, v in enumerate((0.3, 0.4, 0.5, 0.6))]
    nan = float("nan")
    verdict = judge(spec, ("main", "lr=x"), 1, [*rivals, entry("x", "lr=x", nan)])
    assert verdict is not None and "loss nan" in verdict.reason
    # and a diverged rival never makes a healthy job the loser, nor the cutoff nan
    best = 0.3 if goal == "min" else 0.6
    others = [entry("n1", "lr=n1", nan), entry("n2", "lr=n2", nan),
              entry("h", "lr=h", 0.45)]
    assert judge(spec, ("main", "lr=b"), 1, [*others, entry("b", "lr=b", best)]) is None


def test_the_quantile_of_equal_infinities_is_that_infinity() -> None:
    inf = float("inf")
    assert quantile([inf, inf, 1.0], 2 / 3) == inf
    assert quantile([-inf, -inf], 0.5) == -inf
