"""What is never seen, the pure rule (results/unseen.py): which goal and early_stop metrics were
never read from which jobs, what was read instead, and the jobs that do not count yet."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

from eq_tui.manifest.model import EarlyStopSpec, PhaseSpec, ResultsSpec
from eq_tui.results.group import group
from eq_tui.results.records import make_record
from eq_tui.results.render import render
from eq_tui.results.unseen import (
    HALF_RUN,
    Sighting,
    Watched,
    from_records,
    markdown,
    read_watched,
    unseen,
    unseen_in_records,
    watched_from_json,
    watched_of,
)
from tests.support.engine_run import job, make_manifest

GOAL = Watched(phase="main", metric="val_accuracy", role="goal")
EARLY = Watched(phase="main", metric="val_accuracy", role="goal and early_stop", grace=2,
                while_running=True)
FINAL = {"loss": 0.41, "val_acc": 0.82}


def done(job_id: str, final: dict[str, float | None] | None = None,
         status: str = "completed") -> Sighting:
    return Sighting(id=job_id, phase="main", status=status,
                    final=dict(FINAL) if final is None else final)


def running(job_id: str, reported: dict[str, int], progress: float | None = 0.6) -> Sighting:
    return Sighting(id=job_id, phase="main", status="running", reported=reported,
                    progress=progress)


def test_completed_jobs_lacking_the_goal_metric_are_named_with_what_was_read() -> None:
    [finding] = unseen([GOAL], [done("a"), done("b", {"val_acc": 0.7}), done("c", {})])
    assert finding.key == ("main", "val_accuracy")
    assert finding.jobs == ("a", "b", "c")
    assert finding.instead == ("val_acc", "loss")  # the most common first
    assert finding.near() == "val_acc"
    text = finding.text()
    assert text.startswith("metric 'val_accuracy' (goal) never read from 3 jobs of phase main "
                           "(a, b, c): read instead: val_acc, loss")
    assert "is it 'val_acc'?" in text and "eq-tui explain-log" in text


def test_the_healthy_path_says_nothing() -> None:
    jobs = [done("a", {"val_accuracy": 0.8, "loss": 0.3}),
            done("nan", {"val_accuracy": None}),  # read as nan (null in JSON): it was read
            Sighting(id="not_collected", phase="main", status="completed", final=None),
            Sighting(id="other_phase", phase="eval", status="completed", final={}),
            running("printing", {"loss": 4, "val_accuracy": 4})]
    assert unseen([GOAL, EARLY], jobs) == []
    assert unseen([], [done("a")]) == []


def test_jobs_that_ended_early_never_count() -> None:
    jobs = [done(f"x_{status}", {"loss": 1.0}, status=status)
            for status in ("pruned", "killed", "failed_oom", "stuck", "pending", "blocked")]
    assert unseen([GOAL, EARLY], jobs) == []


def test_a_running_job_counts_for_the_early_stop_metric_past_grace_and_half_its_run() -> None:
    [finding] = unseen([EARLY], [running("a", {"loss": 2, "val_acc": 2})])
    assert finding.jobs == ("a",) and finding.instead == ("loss", "val_acc")
    assert "(goal and early_stop)" in finding.text()
    assert unseen([EARLY], [running("a", {"loss": 1})]) == []  # below grace (2)
    assert unseen([EARLY], [running("a", {"loss": 5}, progress=0.2)]) == []  # early in its run
    [unknown] = unseen([EARLY], [running("a", {"loss": 2}, progress=None)])  # no progress known
    assert unknown.jobs == ("a",)
    assert unseen([EARLY], [running("a", {"loss": 9, "val_accuracy": 0})]) != []  # 0: none yet


def test_a_running_job_waits_while_a_sibling_has_printed_the_metric() -> None:
    sibling = running("b", {"loss": 3, "val_accuracy": 3})
    assert unseen([EARLY], [running("a", {"loss": 3}), sibling]) == []
    finished = done("c", {"val_accuracy": 0.9})
    assert unseen([EARLY], [running("a", {"loss": 3}), finished]) == []


def test_a_goal_metric_is_never_due_while_running() -> None:
    """A goal metric alone (a test accuracy printed at the end) is judged at the end only."""
    assert unseen([GOAL], [running("a", {"loss": 50}, progress=0.99)]) == []


def test_long_lists_are_cut_with_a_count() -> None:
    [finding] = unseen([GOAL], [done(f"job{i}", {f"m{i}": 1.0}) for i in range(8)])
    assert "(job0, job1, job2, job3, job4 and 3 more)" in finding.text()
    assert "read instead: m0, m1, m2, m3, m4 and 3 more" in finding.text()
    assert "is it" not in finding.text()  # no name looks like it


def test_watched_from_the_manifest_and_from_its_json_agree(tmp_path: Path) -> None:
    early = EarlyStopSpec(metric="val_loss", goal="min", grace=3)
    phases = (PhaseSpec(name="main", results=ResultsSpec(goal=(("val_acc", "max"),
                                                               ("val_loss", "min")),
                                                         early_stop=early)),
              PhaseSpec(name="final", results=ResultsSpec(goal=(("test_acc", "max"),))),
              PhaseSpec(name="warmup"))
    manifest = make_manifest(tmp_path, [job("a")], phases=phases)
    watched = watched_of(manifest)
    assert watched == [
        Watched("main", "val_acc", "goal", 3, False),
        Watched("main", "val_loss", "goal and early_stop", 3, True),
        Watched("final", "test_acc", "goal", 1, False)]
    assert watched_from_json(json.loads(json.dumps(manifest.to_json()))) == watched
    assert watched_from_json(None) == [] and watched_from_json({"phases": [3]}) == []
    only_early = (PhaseSpec(name="main", results=ResultsSpec(
        early_stop=EarlyStopSpec(metric="eval_accuracy", goal="max"))),)
    assert watched_of(make_manifest(tmp_path, [job("a")], phases=only_early)) == [
        Watched("main", "eval_accuracy", "early_stop", 1, True)]


def _record(job_id: str, metrics: dict[str, list[float]], collected: bool = True) -> dict:
    return make_record(job_id=job_id, phase="main", params={"lr": "0.1", "seed": job_id[-1]},
                       attempt=1, status="completed", metrics=metrics,
                       collected_at=5.0 if collected else None)


def test_records_count_once_collected_and_every_front_end_says_it() -> None:
    records = [_record("lr_s1", {"val_acc": [0.5, 0.6]}), _record("lr_s2", {"val_acc": [0.7]}),
               _record("lr_s3", {}, collected=False)]
    sightings = from_records(records)
    assert [s.final for s in sightings] == [{"val_acc": 0.6}, {"val_acc": 0.7}, None]
    findings = unseen([GOAL], sightings)
    assert [f.jobs for f in findings] == [("lr_s1", "lr_s2")]
    table = group(records, goals={"val_accuracy": "max"})
    text = render(table, "table", findings)
    assert text.rstrip().endswith(findings[0].text())
    data = json.loads(render(table, "json", findings))
    assert data["metrics_never_read"] == [{
        "phase": "main", "metric": "val_accuracy", "role": "goal", "jobs": ["lr_s1", "lr_s2"],
        "instead": ["val_acc"], "near": "val_acc"}]
    assert json.loads(render(table, "json"))["metrics_never_read"] == []
    assert "## Metrics never read\n\n- metric 'val_accuracy'" in render(table, "markdown",
                                                                         findings)
    assert findings[0].text() not in render(table, "csv", findings)
    assert markdown([]) == ""


def test_the_edges_a_running_job_is_judged_at() -> None:
    """Exactly `grace` reports of another metric, exactly half its run: due; one report fewer,
    or a hair before half: not yet."""
    assert unseen([EARLY], [running("a", {"loss": 2}, progress=HALF_RUN)]) != []
    assert unseen([EARLY], [running("a", {"loss": 2}, progress=HALF_RUN - 0.01)]) == []
    assert unseen([EARLY], [running("a", {"loss": 1, "lr": 1}, progress=0.9)]) == []
    # a running job whose log is not followed says nothing either way
    assert unseen([EARLY], [Sighting(id="a", phase="main", status="running")]) == []
    # a metric only named with no report yet is not read
    [finding] = unseen([EARLY], [running("a", {"loss": 2, "lr": 0})])
    assert finding.instead == ("loss",)


def test_what_was_read_instead_is_counted_once_per_job_most_common_first() -> None:
    [finding] = unseen([GOAL], [done("a", {"lr": 1.0, "b_loss": 1.0}),
                                done("b", {"b_loss": 2.0, "a_loss": 1.0}),
                                done("c", {"a_loss": 2.0, "zz": 3.0})])
    assert finding.instead == ("a_loss", "b_loss", "lr", "zz")  # ties by name
    [one] = unseen([GOAL], [done("only", {})])
    assert one.text() == ("metric 'val_accuracy' (goal) never read from 1 job of phase main "
                          "(only): no metric at all was read from them — check the name, or "
                          "run `eq-tui explain-log LOG MANIFEST` on one of their logs")
    [near] = unseen([GOAL], [done("x", {"val_accurac": 1.0})])
    assert near.text().endswith("read instead: val_accurac — is it 'val_accurac'? Check the "
                                "name, or run `eq-tui explain-log LOG MANIFEST` on one of "
                                "their logs")
    assert near.to_json() == {"phase": "main", "metric": "val_accuracy", "role": "goal",
                              "jobs": ["x"], "instead": ["val_accurac"], "near": "val_accurac"}
    [far] = unseen([GOAL], [done("x", {"loss": 1.0})])
    assert far.near() is None and far.to_json()["near"] is None


def test_five_names_are_shown_whole_and_a_sixth_is_counted() -> None:
    [five] = unseen([GOAL], [done(f"j{i}", {}) for i in range(5)])
    assert "(j0, j1, j2, j3, j4):" in five.text()
    [six] = unseen([GOAL], [done(f"j{i}", {}) for i in range(6)])
    assert "(j0, j1, j2, j3, j4 and 1 more):" in six.text()


def test_watched_reads_each_shape_a_manifest_json_may_have(tmp_path: Path) -> None:
    data = {"phases": [
        {"name": "a", "results": {"goal": [["acc", "max"], [], "loss"],
                                  "early_stop": {"metric": "acc", "grace": 0}}},
        {"results": {"goal": {"f1": "max"}, "early_stop": {"metric": 3, "grace": "2"}}},
        {"name": "b", "results": {"goal": "acc", "early_stop": "asha"}},
        {"name": "c", "results": None},
        {"name": "d"}]}
    assert watched_from_json(data) == [
        Watched("a", "acc", "goal and early_stop", 1, True),
        Watched("main", "f1", "goal", 1, False)]
    assert watched_from_json({"phases": None}) == [] and watched_from_json({}) == []
    (tmp_path / "manifest.json").write_text(json.dumps(data))
    assert read_watched(tmp_path) == watched_from_json(data)
    (tmp_path / "manifest.json").write_text("{not json")
    assert read_watched(tmp_path) == []
    assert read_watched(tmp_path / "gone") == []
    early = EarlyStopSpec(metric="val_loss", goal="min", grace=0)
    manifest = make_manifest(tmp_path, [job("a")], phases=(
        PhaseSpec(name="main", results=ResultsSpec(early_stop=early)),))
    assert watched_of(manifest) == [Watched("main", "val_loss", "early_stop", 1, True)]


def test_records_of_another_phase_or_with_no_status_count_as_they_say() -> None:
    records = [{"id": "a", "phase": "eval", "status": "completed", "metrics": {"x": 1.0},
                "collected_at": 3.0},
               {"id": "b", "metrics": None, "collected_at": 1.0},
               {"id": "c", "status": "completed", "metrics": {"y": 2.0}, "collected_at": None}]
    assert from_records(records) == [
        Sighting(id="a", phase="eval", status="completed", final={"x": 1.0}),
        Sighting(id="b", phase="main", status="", final={}),
        Sighting(id="c", phase="main", status="completed", final=None)]
    assert [f.jobs for f in unseen_in_records([GOAL], records)] == []
    [finding] = unseen_in_records([replace(GOAL, phase="eval")], records)
    assert finding.jobs == ("a",) and finding.instead == ("x",)
    assert markdown([finding]) == f"## Metrics never read\n\n- {finding.text()}\n"


def test_a_single_report_is_read_and_no_report_is_not_yet_due() -> None:
    one = Watched(phase="main", metric="val_accuracy", role="early_stop", grace=1,
                  while_running=True)
    assert unseen([EARLY], [running("a", {"loss": 2, "val_accuracy": 1})]) == []
    # nothing reported yet (or only names with no report): not due, whatever the grace
    assert unseen([one], [running("a", {})]) == []
    assert unseen([one], [running("a", {"loss": 0})]) == []
    # a running job is read by its reports, even where a final of an earlier attempt is known
    [finding] = unseen([one], [replace(running("a", {"loss": 1}), final={"old": 1.0})])
    assert finding.instead == ("loss",)


def test_each_watched_metric_and_each_phase_is_judged_on_its_own() -> None:
    other = Watched(phase="main", metric="loss", role="goal")
    findings = unseen([other, GOAL], [done("a", {"loss": 0.1})])
    assert [f.metric for f in findings] == ["val_accuracy"]  # loss was read; the next counts
    two = unseen([GOAL, Watched(phase="main", metric="f1", role="goal")], [done("a", {})])
    assert markdown(two) == ("## Metrics never read\n\n"
                             f"- {two[0].text()}\n- {two[1].text()}\n")
    data = {"phases": [7, {"name": "x"}, {"name": "y", "results": {"goal": {"f1": "max"}}}]}
    assert watched_from_json(data) == [Watched("y", "f1", "goal", 1, False)]
