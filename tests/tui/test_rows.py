"""Pure UI helpers: row cells, filters, progress, log tail joining, the UI's view of the run."""

from __future__ import annotations

from typing import Any

from eq_tui.api.events import (
    Alert,
    HostProbed,
    HostStateChanged,
    JobUpdated,
    QueueFinished,
    QueuePaused,
)
from eq_tui.api.model import FailureClass
from eq_tui.present.job_filter import parse_filter
from eq_tui.tui.log_pane import lines_to_append, sanitise
from eq_tui.tui.progress import measure
from eq_tui.tui.rows import (
    COLUMN_KEYS,
    changed_columns,
    format_duration,
    job_cells,
    single_line,
    sort_value,
)
from eq_tui.tui.run_view import RunView
from tests.tui.fake_client import T0, attempt, job, sample_snapshot


def cells_by_column(record: dict[str, Any], now: float = T0) -> dict[str, str]:
    return dict(zip(COLUMN_KEYS, job_cells(record, project="demo", now=now, max_attempts=3),
                    strict=True))


def test_a_running_job_row_shows_where_attempt_duration_and_last_line() -> None:
    record = job("s1", "running", history=[attempt(1, "box1", 2, T0 - 95)],
                 last_line="epoch 3/6 loss 0.41\x1b[0m")
    cells = cells_by_column(record)
    assert cells["id"] == "s1" and cells["status"] == "running" and cells["phase"] == "train"
    assert cells["where"] == "box1:2"
    assert cells["attempt"] == "1/3"
    assert cells["duration"] == "1m35s"
    assert cells["failure"] == ""
    assert cells["last_line"] == "epoch 3/6 loss 0.41 [0m"  # the escape byte is gone


def test_a_finished_job_keeps_its_run_time_and_shows_its_failure() -> None:
    record = job("bad", "stuck", history=[attempt(1, "b", 0, T0 - 4000, T0 - 100, 3)],
                 failure=("exit_nonzero", "exit 3"), reason="exit 3: ValueError")
    cells = cells_by_column(record, now=T0 + 10_000)
    assert cells["duration"] == "1h05m"
    assert cells["failure"] == "exit 3"  # the class in 9 characters, with the exit code
    for cls, short in (("output_missing", "no output"), ("cuda_oom", "cuda_oom"),
                       ("launch_failed", "no launch"), ("dependency", "upstream")):
        shown = cells_by_column({**record, "failure": {"class": cls, "detail": ""}})
        assert shown["failure"] == short
    no_code = {**record, "history": [attempt(1, "b", 0, T0 - 4000)]}
    assert cells_by_column(no_code)["failure"] == "exit≠0"
    assert cells["last_line"] == "exit 3: ValueError"  # the reason when no log line


def test_a_waiting_job_shows_why_it_waits_before_its_last_attempts_line() -> None:
    record = job("o", "failed_oom", history=[attempt(1, "b", 0, T0 - 60, T0 - 50, 1,
                                                     "cuda_oom")],
                 last_line="torch.OutOfMemoryError", reason="retry in 12s (OOM)")
    assert cells_by_column(record)["last_line"] == "retry in 12s (OOM)"
    record.update(status="running", reason=None)
    assert cells_by_column(record)["last_line"] == "torch.OutOfMemoryError"


def test_the_details_of_a_waiting_job_say_why_it_waits() -> None:
    from eq_tui.tui.screens.details import job_summary

    record = job("p", "pending", reason="behind a bigger job (packing order): w went first")
    assert "waiting behind a bigger job (packing order): w went first" in job_summary(
        record, 3).plain


def test_pending_job_has_empty_runtime_cells() -> None:
    cells = cells_by_column(job("p", "pending"))
    assert (cells["where"], cells["attempt"], cells["duration"]) == ("", "", "")


def test_changed_columns_lists_only_the_cells_that_differ() -> None:
    old = ("a", "p", "x", "running", "h:0", "1/3", "5s", "", "line")
    new = ("a", "p", "x", "running", "h:0", "1/3", "6s", "", "next line")
    assert changed_columns(old, new) == [6, 8]
    assert changed_columns(None, new) == list(range(9))


def test_durations_and_single_lines() -> None:
    assert [format_duration(s) for s in (None, -1, 0, 59.9, 61, 3600 * 2 + 61)] == \
        ["", "", "0s", "59s", "1m01s", "2h01m"]
    assert single_line("a\tb\rc") == "a b c"
    assert single_line("x" * 100, width=10) == "x" * 9 + "…"


def test_sort_values_order_statuses_by_urgency_and_durations_by_length() -> None:
    jobs = [job("c", "completed"), job("r", "running"), job("s", "stuck"),
            job("o", "failed_oom")]
    ordered = sorted(jobs, key=lambda j: sort_value("status", j, T0))
    assert [j["id"] for j in ordered] == ["r", "o", "s", "c"]
    short = job("short", "running", history=[attempt(1, "h", 0, T0 - 5)])
    long = job("long", "running", history=[attempt(1, "h", 0, T0 - 500)])
    assert sort_value("duration", short, T0) < sort_value("duration", long, T0)


def test_filter_tokens_and_text() -> None:
    stuck = job("student_nan", "stuck", phase="distill",
                history=[attempt(1, "box1", 0, T0 - 5, T0, 3)], failure=("exit_nonzero", "x"))
    running = job("train_s1", "running", history=[attempt(1, "box2", 0, T0 - 5)])
    assert parse_filter("").empty
    assert parse_filter("status:stuck").matches(stuck, "demo")
    assert not parse_filter("status:stuck").matches(running, "demo")
    assert parse_filter("status:stuck,running").matches(running, "demo")
    assert parse_filter("host:box1 phase:distill").matches(stuck, "demo")
    assert not parse_filter("host:box1 phase:train").matches(stuck, "demo")
    assert parse_filter("NAN").matches(stuck, "demo")
    assert not parse_filter("nan host:box2").matches(stuck, "demo")
    assert parse_filter("project:other").matches(stuck, "other")
    assert parse_filter("failure:exit_nonzero").matches(stuck, "demo")
    assert parse_filter("weird:token").text == ("weird:token",)


def test_progress_counts() -> None:
    jobs = [job("a", "completed", history=[attempt(1, "h", 0, T0 - 200, T0 - 100, 0)]),
            job("b", "running", history=[attempt(1, "h", 0, T0 - 40)]),
            job("c", "pending"), job("d", "stuck")]
    progress = measure(jobs)
    assert (progress.total, progress.completed, progress.finished) == (4, 1, 2)
    assert progress.counts == {"completed": 1, "running": 1, "pending": 1, "stuck": 1}
    view = RunView()
    snapshot = sample_snapshot()
    snapshot["jobs"] = jobs
    view.load_snapshot(snapshot)
    assert view.progress() == progress  # the incremental numbers agree


def test_log_lines_are_appended_from_the_overlap_or_redrawn() -> None:
    assert lines_to_append([], ["a", "b"]) == ["a", "b"]
    assert lines_to_append(["a", "b"], ["a", "b"]) == []
    assert lines_to_append(["a", "b", "c"], ["b", "c", "d", "e"]) == ["d", "e"]
    assert lines_to_append(["a", "b"], ["x", "y"]) is None
    assert lines_to_append(["a"], []) == []
    assert sanitise("loss\x1b[31m 1\r\n") == "loss [31m 1"


def test_run_view_folds_events_and_reports_what_changed() -> None:
    view = RunView()
    view.load_snapshot(sample_snapshot())
    assert view.job_count == 10
    assert sorted(view.keys_with_status("stuck")) == ["demo/student_big", "demo/student_nan"]
    record = dict(view.projects["demo"].jobs["student_s9"], status="running")
    changes = view.apply(JobUpdated(project="demo", at=T0, job="student_s9", state=record))
    assert changes.jobs == {"demo/student_s9"} and changes.header
    assert "demo/student_s9" in view.keys_with_status("running")
    assert "demo/student_s9" not in view.keys_with_status("pending")
    assert changes.hosts == set()  # no host or GPU yet: nothing to show on the grid
    running = dict(record, host="rtx-box", gpus=[1])
    changes = view.apply(JobUpdated(project="demo", at=T0, job="student_s9", state=running))
    assert changes.hosts == {"demo/rtx-box"}
    assert view.projects["demo"].hosts["rtx-box"]["gpus"][1]["job"] == "student_s9"
    done = dict(running, status="completed")
    view.apply(JobUpdated(project="demo", at=T0, job="student_s9", state=done))
    assert view.projects["demo"].hosts["rtx-box"]["gpus"][1]["job"] is None
    changes = view.apply(HostStateChanged(project="demo", at=T0, host="rtx-box", state="down",
                                          reason="ssh: connection refused"))
    assert changes.hosts == {"demo/rtx-box"}
    assert view.projects["demo"].hosts["rtx-box"]["state"] == "down"
    view.apply(HostProbed(project="demo", at=T0, host="a100-box", ok=True, rtt_s=0.5,
                          gpus=({"index": 0},)))
    assert view.projects["demo"].hosts["a100-box"]["gpus"] == [{"index": 0}]
    assert view.apply(QueuePaused(project="demo", at=T0, paused=True)).header and view.paused
    changes = view.apply(Alert(project="demo", at=T0, level="error", message="disk full"))
    assert changes.alerts[0]["message"] == "disk full"
    changes = view.apply(QueueFinished(project="demo", at=T0, counts={"completed": 9,
                                                                      "stuck": 1}, exit_code=1))
    assert view.projects["demo"].finished and changes.header
    assert changes.alerts[0]["message"] == "queue finished (exit 1): completed 9, stuck 1"


def test_applying_a_tick_of_50_changes_among_5000_jobs_touches_only_those() -> None:
    """The pure part of one engine tick on the UI; its cost is measured in bench/ui.py."""
    view = RunView()
    snapshot = sample_snapshot()
    snapshot["jobs"] = [job(f"j{i}", "running", history=[attempt(1, "h", i % 8, T0 - i)])
                        for i in range(5000)]
    view.load_snapshot(snapshot)
    cache = {key: job_cells(j, project="demo", now=T0, max_attempts=3)
             for key, _, j in view.iter_jobs()}
    events = [JobUpdated(project="demo", at=T0, job=f"j{i}",
                         state=dict(snapshot["jobs"][i], status="completed", ended=T0))
              for i in range(0, 5000, 100)]
    changed = 0
    for event in events:
        for key in view.apply(event).jobs:
            found = view.job(key)
            assert found is not None
            cells = job_cells(found[1], project="demo", now=T0, max_attempts=3)
            changed += len(changed_columns(cache[key], cells))
            cache[key] = cells
    assert changed >= 50
    assert sum(1 for key, _, j in view.iter_jobs() if j["status"] == "completed") == 50


def test_held_phases_come_and_go_with_their_events_and_show_in_the_header() -> None:
    from eq_tui.api.events import PhaseHeld, PhaseReleased
    from eq_tui.tui.header import header_content

    view = RunView()
    view.load_snapshot(sample_snapshot())
    assert "HELD" not in str(header_content(view, T0))
    view.apply(PhaseHeld(project="demo", at=T0, phase="train", jobs=("a", "b", "c"),
                         failure_class="exit_nonzero", line="boom", reason="crash guard: ..."))
    assert "HELD: train" in str(header_content(view, T0))
    view.apply(PhaseReleased(project="demo", at=T0, phase="train", by="retry of a"))
    assert "HELD" not in str(header_content(view, T0))


def test_the_try_column_reads_the_engines_attempt_limit() -> None:
    stuck = job("s", "stuck", history=[attempt(1, "box1", 0, T0 - 10)])
    stuck.update(attempts=1, attempt_limit=1)
    assert cells_by_column(stuck)["attempt"] == "1/1"
    retried = job("r", "running", history=[attempt(1, "box1", 0, T0 - 10)])
    retried.update(attempts=2, retry_base=1, attempt_limit=4)
    assert cells_by_column(retried)["attempt"] == "2/4"


def test_a_stalled_job_reads_stalled_with_how_long_it_has_been_silent() -> None:
    record = job("s1", "running", history=[attempt(1, "box1", 2, T0 - 900)],
                 last_line="epoch 3/6 loss 0.41", stalled_since=T0 - 60,
                 silent_since=T0 - 725)
    cells = cells_by_column(record)
    assert cells["status"] == "stalled"
    assert cells["last_line"].startswith("silent 12m05s · epoch 3/6")
    done = {**record, "status": "completed"}
    assert cells_by_column(done)["status"] == "completed"


def test_a_running_job_with_progress_shows_it_with_its_eta_and_slow_when_far_behind() -> None:
    view = RunView()
    snapshot = sample_snapshot()
    snapshot["jobs"] = [
        job("c1", "completed", history=[attempt(1, "h", 0, T0 - 700, T0 - 600)],
            last_line="epoch 4/4"),
        job("c2", "completed", history=[attempt(1, "h", 1, T0 - 700, T0 - 580)],
            last_line="epoch 4/4"),
        job("r", "running", history=[attempt(1, "h", 2, T0 - 100)], last_line="epoch 1/4"),
        job("q", "running", history=[attempt(1, "h", 3, T0 - 100)], last_line="loading")]
    view.load_snapshot(snapshot)

    def cells(job_id: str) -> dict[str, str]:
        found = view.job(f"demo/{job_id}")
        assert found is not None
        return dict(zip(COLUMN_KEYS, job_cells(found[1], project="demo", now=T0,
                                               max_attempts=3,
                                               pace=view.pace(f"demo/{job_id}", T0)),
                        strict=True))

    # a quarter after 100 s: 300 s left; one epoch in 100 s beside its siblings' four in 100 s
    # and 120 s
    assert (cells("r")["status"], cells("r")["progress"]) == ("slow", " 25% █▎░░░ 5m")
    assert (cells("q")["status"], cells("q")["progress"]) == ("running", "")
    assert cells("c1")["progress"] == ""
    record = dict(view.projects["demo"].jobs["r"], last_line="epoch 3/4")
    view.apply(JobUpdated(project="demo", at=T0, job="r", state=record))
    assert (cells("r")["status"], cells("r")["progress"]) == ("running", " 75% ███▊░ 33s")


def test_every_failure_class_reads_whole_in_the_failure_column() -> None:
    for cls in FailureClass:
        record = job("j", "stuck", history=[attempt(1, "b", 0, T0 - 60, T0, 137)],
                     failure=(str(cls), ""))
        assert len(cells_by_column(record)["failure"]) <= 9, cls
