"""A search's trials over time (runfiles/search_curve.py): the order told, the best so far by
the study's direction with failed and pruned trials outside it, and the text plot of both."""

from __future__ import annotations

from eq_tui.runfiles.search_curve import Told, checkpoints, curve, plot

# told out of number order (2 ended before 1); 3 pruned with a value above every complete one
TRIALS = [Told(0, "complete", 0.5, 10.0), Told(1, "fail", None, 30.0),
          Told(2, "complete", 0.2, 20.0), Told(3, "pruned", 0.9, 40.0),
          Told(4, "complete", 0.7, 50.0), Told(5, "running", None, None),
          Told(6, "waiting", None, None)]


def test_the_trials_in_the_order_told_with_the_best_so_far_of_a_maximized_study() -> None:
    points = curve(TRIALS, maximize=True)
    assert [(p.trial, p.state, p.value, p.ended_at) for p in points] == [
        (0, "complete", 0.5, 10.0), (2, "complete", 0.2, 20.0), (1, "fail", None, 30.0),
        (3, "pruned", 0.9, 40.0), (4, "complete", 0.7, 50.0)]
    assert [p.best_so_far for p in points] == [0.5, 0.5, 0.5, 0.5, 0.7]
    assert points[0].to_json() == {"trial": 0, "ended_at": 10.0, "value": 0.5,
                                   "best_so_far": 0.5, "state": "complete"}


def test_a_minimized_study_is_best_at_its_least() -> None:
    assert [p.best_so_far for p in curve(TRIALS, maximize=False)] == [0.5, 0.2, 0.2, 0.2, 0.2]


def test_failed_and_pruned_trials_never_enter_the_best_line() -> None:
    points = curve([Told(0, "fail", None, 1.0), Told(1, "pruned", 0.1, 2.0),
                    Told(2, "complete", 1.0, 3.0), Told(3, "pruned", 7.0, 4.0)], maximize=False)
    assert [p.best_so_far for p in points] == [None, None, 1.0, 1.0]
    maximized = curve([Told(0, "complete", 1.0, 1.0), Told(1, "pruned", 7.0, 2.0)], True)
    assert [p.best_so_far for p in maximized] == [1.0, 1.0]


def test_same_end_time_goes_by_number_and_no_end_time_goes_last() -> None:
    points = curve([Told(4, "complete", 1.0, None), Told(3, "complete", 2.0, 5.0),
                    Told(1, "complete", 3.0, 5.0)], maximize=True)
    assert [p.trial for p in points] == [1, 3, 4]


def test_an_empty_study_has_no_curve_and_no_plot() -> None:
    assert curve([], maximize=True) == []
    assert curve([Told(0, "running", None, None)], maximize=True) == []
    assert plot([], maximize=True) == []


def test_the_plot_of_values_and_best_so_far_on_one_scale() -> None:
    assert plot(curve(TRIALS, True), maximize=True) == [
        "told in order: 5 trials; ▁ 0.2 … █ 0.7; x failed, ∘ pruned",
        "  value  ▅▁x∘█",
        "  best   ▅▅▅▅█",
        "  best so far: 0.5 after 2, 0.5 after 3, 0.5 after 4, 0.7 after 5 told"]
    assert plot(curve(TRIALS, False), maximize=False)[1:] == [
        "  value  ▅▁x∘█",
        "  best   ▅▁▁▁▁",
        "  best so far: 0.2 after 2, 0.2 after 3, 0.2 after 4, 0.2 after 5 told"]


def test_more_trials_than_columns_share_one_bar_each_its_best() -> None:
    trials = [Told(0, "complete", 1.0, 0), Told(1, "complete", 3.0, 1),
              Told(2, "fail", None, 2), Told(3, "pruned", None, 3), Told(4, "fail", None, 4),
              Told(5, "pruned", None, 5), Told(6, "pruned", None, 6),
              Told(7, "complete", 2.0, 7), Told(8, "complete", 0.0, 8),
              Told(9, "fail", None, 9)]
    assert plot(curve(trials, True), maximize=True, width=4) == [
        "told in order: 10 trials, one bar per 2-3; ▁ 0 … █ 3; x failed, ∘ pruned",
        "  value  █x∘▆",
        "  best   ████",
        "  best so far: 3 after 3, 3 after 5, 3 after 8, 3 after 10 told"]
    assert plot(curve(trials, False), maximize=False, width=4)[1:] == [
        "  value  ▃x∘▁",
        "  best   ▃▃▃▁",
        "  best so far: 1 after 3, 1 after 5, 1 after 8, 0 after 10 told"]
    assert plot(curve(trials[:8], True), maximize=True, width=4)[0].startswith(
        "told in order: 8 trials, one bar per 2;")


def test_before_the_first_complete_trial_the_best_line_is_blank() -> None:
    points = curve([Told(0, "fail", None, 1.0), Told(1, "complete", 1.0, 2.0)], True)
    assert plot(points, maximize=True) == [
        "told in order: 2 trials; ▁ 1 … █ 1; x failed, ∘ pruned",
        "  value  x█", "  best    █", "  best so far: 1 after 2 told"]
    failed = curve([Told(0, "fail", None, 1.0), Told(1, "pruned", None, 2.0)], True)
    assert plot(failed, maximize=True) == ["told in order: 2 trials; x failed, ∘ pruned",
                                           "  value  x∘"]


def test_a_value_off_the_scale_still_draws() -> None:
    points = curve([Told(0, "complete", 1.0, 1.0), Told(1, "complete", float("inf"), 2.0),
                    Told(2, "complete", 2.0, 3.0)], True)
    assert plot(points, maximize=True)[1] == "  value  ▁██"


def test_the_best_is_said_after_a_quarter_half_three_quarters_and_all() -> None:
    assert checkpoints(0) == []
    assert checkpoints(1) == [1]
    assert checkpoints(4) == [1, 2, 3, 4]
    assert checkpoints(5) == [2, 3, 4, 5]
    assert checkpoints(10) == [3, 5, 8, 10]


def test_a_value_that_is_no_number_or_infinite_draws_as_what_it_is() -> None:
    """Pins the bars of values off any scale: NaN is `?`, +inf the top bar and -inf the bottom
    one (not the top, nor the one above the bottom), beside a finite value's bar."""
    points = curve([Told(0, "complete", 1.0, 1.0), Told(1, "complete", float("nan"), 2.0),
                    Told(2, "complete", float("-inf"), 3.0),
                    Told(3, "complete", float("inf"), 4.0)], maximize=True)
    assert plot(points, maximize=True, width=4)[1] == "  value  █?▁█"


def test_with_no_finite_value_a_shared_bar_is_still_its_best_by_direction() -> None:
    """Pins the direction in the plot of a study with no finite value: a column holding +inf
    and -inf draws the better one (top bar when maximized, bottom when minimized)."""
    points = curve([Told(0, "complete", float("inf"), 1.0),
                    Told(1, "complete", float("-inf"), 2.0)], maximize=True)
    assert plot(points, maximize=True, width=1)[1] == "  value  █"
    assert plot(points, maximize=False, width=1)[1] == "  value  ▁"
