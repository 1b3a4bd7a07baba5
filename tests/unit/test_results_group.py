"""Grouping over seeds: configurations, n of expected, missing and failed seeds, duplicate
seeds, the refusal to mix configurations, goals, sorting."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eq_tui.results.group import MixedConfigurations, group, sort_rows


def rec(job_id: str, status: str = "completed", phase: str = "train",
        **values: Any) -> dict[str, Any]:
    params = {k: str(v) for k, v in values.items() if not k.startswith("m_")}
    metrics = {k[2:]: v for k, v in values.items() if k.startswith("m_")}
    return {"id": job_id, "phase": phase, "params": params, "status": status,
            "metrics": metrics}


GRID = [rec(f"lr{lr}_s{s}", lr=lr, seed=s, m_acc=acc, m_loss=1 - acc)
        for lr, s, acc in [("0.1", 1, 0.70), ("0.1", 2, 0.72), ("0.1", 3, 0.74),
                           ("0.03", 1, 0.80), ("0.03", 2, 0.84), ("0.03", 3, 0.0)]]


def test_one_row_per_configuration_with_mean_std_min_max() -> None:
    table = group(GRID[:5], goals={"acc": "max"})
    assert [row.params for row in table.rows] == [{"lr": "0.1"}, {"lr": "0.03"}]
    cell = table.rows[0].cells["acc"]
    assert cell.n == 3 and cell.mean == pytest.approx(0.72) and cell.std == pytest.approx(0.02)
    assert (cell.min, cell.max) == (0.70, 0.74)
    assert table.metrics == ["acc"]  # the metrics with a goal, by default
    assert (table.rows[1].done, table.rows[1].expected) == (2, 2)


def test_missing_and_failed_seeds_are_named_and_not_averaged() -> None:
    records = [*GRID[:5], rec("lr0.03_s3", "stuck", lr="0.03", seed=3, m_acc=0.1),
               rec("lr0.03_s4", "running", lr="0.03", seed=4)]
    table = group(records, goals={"acc": "max"})
    row = table.rows[1]
    assert (row.done, row.expected) == (2, 4)
    assert row.cells["acc"].values == (0.80, 0.84)  # the stuck job's 0.1 is not in
    assert table.missing(row) == ["seed=3 (stuck)", "seed=4 (running)"]


def test_best_row_per_metric_by_goal() -> None:
    table = group(GRID[:5], goals={"acc": "max", "loss": "min"})
    assert table.rows[1].best == {"acc", "loss"} and not table.rows[0].best
    table = group(GRID[:5], goals={"acc": "min"})
    assert table.rows[0].best == {"acc"}


def test_best_is_per_phase_and_no_goal_marks_nothing() -> None:
    records = [*GRID[:3], rec("eval", phase="eval", m_acc=0.99)]
    assert all(not row.best for row in group(records, goals={"acc": "max"}).rows
               if row.phase == "eval")
    assert all(not row.best for row in group(GRID, metrics=["acc"]).rows)


def test_group_over_another_key() -> None:
    table = group(GRID, group_over="lr", goals={"acc": "max"})
    assert [row.params for row in table.rows] == [{"seed": "1"}, {"seed": "2"}, {"seed": "3"}]
    assert table.rows[0].cells["acc"].values == (0.70, 0.80)


def test_refuses_to_average_jobs_that_differ_in_another_parameter() -> None:
    records = [rec("a", lr="0.1", wd="0", seed=1, m_acc=0.5),
               rec("b", lr="0.1", wd="1", seed=2, m_acc=0.6)]
    with pytest.raises(MixedConfigurations, match=r"differ in wd \(0 vs 1\)"):
        group(records, by=["lr"])
    table = group(records, by=["lr", "wd"])
    assert len(table.rows) == 2
    # without --by, the two are two configurations: never averaged together
    assert len(group(records).rows) == 2


def test_duplicate_seeds_are_flagged() -> None:
    records = [*GRID[:3], rec("old_lr0.1_s2", lr="0.1", seed=2, m_acc=0.9)]
    table = group(records, goals={"acc": "max"})
    assert table.duplicates(table.rows[0]) == ["2"]


def test_jobs_outside_a_grid_are_each_their_own_row() -> None:
    table = group([rec("student_a", m_acc=0.5), rec("student_b", m_acc=0.6)])
    assert [row.params for row in table.rows] == [{"job": "student_a"}, {"job": "student_b"}]


def test_nonfinite_values_are_counted_not_averaged() -> None:
    records = [rec("a", seed=1, m_loss=0.5), rec("b", seed=2, m_loss=None),
               rec("c", seed=3, m_loss=math.nan)]
    cell = group(records).rows[0].cells["loss"]
    assert cell.values == (0.5,) and cell.nonfinite == 2 and cell.std is None


def test_default_metrics_skip_step_counters() -> None:
    table = group([rec("a", seed=1, m_epoch=3, m_step=300, m_loss=0.5)])
    assert table.metrics == ["loss"]


def test_sorting_on_a_metric_or_a_parameter() -> None:
    table = group(GRID[:5], goals={"acc": "max"})
    assert [r.params["lr"] for r in sort_rows(table, "acc", descending=True)] == ["0.03", "0.1"]
    assert [r.params["lr"] for r in sort_rows(table, "lr")] == ["0.03", "0.1"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["0.1", "0.01"]), st.sampled_from(["a", "b"]),
                          st.integers(0, 4), st.sampled_from(["completed", "stuck", "running"]),
                          st.one_of(st.none(), st.floats(-10, 10))), max_size=30))
def test_grouping_invariants(rows: list[tuple[str, str, int, str, float | None]]) -> None:
    records = [rec(f"j{i}", status, lr=lr, opt=opt, seed=seed, m_acc=value)
               for i, (lr, opt, seed, status, value) in enumerate(rows)]
    table = group(records, metrics=["acc"], goals={"acc": "max"})
    # every job is in exactly one row, and a row never mixes two configurations
    assert sorted(m["id"] for row in table.rows for m in row.members) == \
        sorted(r["id"] for r in records)
    for row in table.rows:
        assert len({(m["params"]["lr"], m["params"]["opt"]) for m in row.members}) == 1
        cell = row.cells["acc"]
        assert cell.n + cell.nonfinite <= row.done <= row.expected
        if cell.n:
            assert cell.min is not None and cell.max is not None and cell.mean is not None
            assert cell.min - 1e-9 <= cell.mean <= cell.max + 1e-9
    assert sum(1 for row in table.rows if "acc" in row.best) <= len(table.rows)
    if any(row.cells["acc"].n for row in table.rows) and len(table.rows) > 1:
        best = max(r.cells["acc"].mean for r in table.rows if r.cells["acc"].mean is not None)
        assert all(row.cells["acc"].mean == best for row in table.rows if "acc" in row.best)


def with_cmd(record: dict[str, Any], cmd: str) -> dict[str, Any]:
    return {**record, "cmd": cmd}


def ran(lr: str, seed: int, tail: str = "") -> str:
    return f"python train.py --lr {lr} --seed {seed} --out runs/s{seed}.json --epochs 3{tail}"


def test_commands_alike_but_for_the_seed() -> None:
    from eq_tui.results.group import alike

    assert alike(ran("0.1", 1), "1", ran("0.1", 2), "2")
    assert alike("t --epochs 1 --seed 1", "1", "t --epochs 1 --seed 2", "2")
    assert not alike(ran("0.1", 1), "1", ran("0.1", 2, " --epochs 2"), "2")
    assert not alike("t --epochs 3 --seed 1", "1", "t --epochs 2 --seed 1", "1")
    assert not alike("t --seed 1", None, "t --seed 2", None)  # nothing averaged over
    assert alike("t 'a b' --seed 1", "1", "t 'a b' --seed 2", "2")
    # a seed inside a word counts where it stands alone, not inside another number
    assert alike("t --out lr0.1_s1", "1", "t --out lr0.1_s2", "2")
    assert not alike("t --lr 0.1 --seed 1", "1", "t --lr 0.2 --seed 2", "2")
    assert alike("t --seed 10", "10", "t --seed 1", "1")
    assert alike("t --init a --tag run-a", "a", "t --init b --tag run-b", "b")


def test_a_row_whose_jobs_ran_different_commands_is_flagged_and_never_ranked() -> None:
    from eq_tui.results.render import render

    records = [with_cmd(r, ran(r["params"]["lr"], int(r["params"]["seed"])))
               for r in GRID[:5]]
    # one seed of the best row was edited (--set epochs=2): its mean averages unlike runs
    records[4] = with_cmd(records[4], ran("0.03", 2, " --epochs 2"))
    table = group(records, goals={"acc": "max"})
    mixed, plain = table.rows[1], table.rows[0]
    assert mixed.unlike and not plain.unlike
    assert [[m["id"] for m in g] for g in mixed.commands] == [["lr0.03_s1"], ["lr0.03_s2"]]
    assert table.unlike_note(mixed) == "commands differ: seed=1 | seed=2; not ranked"
    # the higher mean is not marked best; nor is the only other row (one row is no ranking)
    assert mixed.best == set() and plain.best == set()
    third = [with_cmd(rec(f"lr0.01_s{s}", lr="0.01", seed=s, m_acc=0.6), ran("0.01", s))
             for s in (1, 2)]
    ranked = group(records + third, goals={"acc": "max"})
    assert [row.best for row in ranked.rows] == [{"acc"}, set(), set()]
    text = render(ranked, "table")
    assert "commands differ: seed=1 | seed=2; not ranked" in text
    assert "0.820 ± 0.028 *" not in text and "0.720 ± 0.020 *" in text
    import json

    rows = json.loads(render(table, "json"))["rows"]
    assert (rows[0]["commands_differ"], rows[1]["commands_differ"]) == (False, True)
    assert rows[1]["commands"] == [
        {"cmd": ran("0.03", 1), "jobs": ["lr0.03_s1"]},
        {"cmd": ran("0.03", 2, " --epochs 2"), "jobs": ["lr0.03_s2"]}]
    assert not rows[1]["metrics"]["acc"]["best"]
    assert render(table, "csv").splitlines()[2].endswith("commands differ: seed=1 | seed=2; "
                                                         "not ranked")


def test_records_without_a_command_are_not_judged() -> None:
    table = group(GRID[:5], goals={"acc": "max"})  # results.jsonl from before `cmd`
    assert not any(row.unlike for row in table.rows) and table.rows[1].best == {"acc"}


def test_the_one_row_with_a_mean_is_best_when_the_others_were_pruned() -> None:
    """Early stopping can leave one configuration completed: it is still marked best."""
    records = [{"id": "a", "phase": "main", "params": {"lr": "0.03"}, "status": "completed",
                "metrics": {"acc": 0.9}},
               {"id": "b", "phase": "main", "params": {"lr": "3"}, "status": "pruned",
                "metrics": {"acc": 0.3}}]
    table = group(records, goals={"acc": "max"})
    assert [row.params for row in table.rows if "acc" in row.best] == [{"lr": "0.03"}]
    assert table.pruned(table.rows[1]) == ["b (acc 0.3)"] and not table.missing(table.rows[1])
