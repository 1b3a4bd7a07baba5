"""Pure parts of the UI at every size: the grid's plan, a host's line and totals, the room each
pane gets, the ETA."""

from __future__ import annotations

from eq_tui.api.events import QueueEta, QueueFinished
from eq_tui.present.queue_eta import ALL, EtaBook, counted_down, estimate_eta
from eq_tui.tui.grid_plan import full_height, plan_grid
from eq_tui.tui.header import view_eta
from eq_tui.tui.host_line import gpu_totals, host_line, line_widths
from eq_tui.tui.layout import LAST_LINE_MIN, fit_table, room_for
from eq_tui.tui.rows import GPU_ONLY_WIDTH, where_width
from eq_tui.tui.run_view import RunView
from tests.tui.fake_client import T0, attempt, gpu, job, sample_snapshot


def test_panels_wrap_into_rows_of_a_readable_width_and_go_compact_when_they_do_not_fit() -> None:
    assert full_height([4, 2, 4], 2) == 6 + 6
    two = plan_grid(160, 17, [4, 2], 68)
    assert not two.compact and two.columns == 2
    sixteen = plan_grid(240, 27, [4] * 16, 68)
    assert not sixteen.compact and sixteen.columns == 4  # 4 rows of 6 lines: 24 <= 27
    crowded = plan_grid(160, 17, [4] * 16, 68)
    assert crowded.compact and crowded.expanded == "right" and crowded.columns == 1
    narrow = plan_grid(100, 10, [4] * 16, 68)
    assert narrow.compact and narrow.expanded == "top"
    wide = plan_grid(240, 27, [8] * 64, 68)
    assert wide.compact and wide.columns == 2
    small = plan_grid(80, 6, [4], 68, small=True)
    assert small.compact and small.expanded == ""
    assert not plan_grid(80, 6, [4], 68, small=True, force="full").compact
    assert plan_grid(160, 17, [4, 2], 68, force="compact").compact


def test_a_host_line_has_its_name_state_cells_jobs_and_totals() -> None:
    gpus = [gpu(0, 12000, 24000, job_id="a"), gpu(1, 0, 24000), gpu(2, 9000, 24000, other=True),
            gpu(3, 0, 24000, quarantined=True), gpu(4, 100, 24000, settling=True)]
    totals = gpu_totals(gpus)
    assert (totals.busy, totals.free, totals.other, totals.quarantined) == (1, 1, 2, 1)
    host = {"name": "gpu-node-01", "state": "up", "rtt_s": 0.012, "gpus": gpus}
    down = {"name": "gpu-node-02", "state": "down", "reason": "ssh: refused", "gpus": []}
    widths = line_widths(["gpu-node-01", "gpu-node-02"], [host, down])
    line = host_line("gpu-node-01", host, widths).plain
    assert line.startswith("gpu-node-01 up   ") and "12ms" in line
    assert "▅▁▄▁▁" in line and " 1 job " in line and "1 busy 1 free 2 other 1 quar" in line
    assert host_line("gpu-node-02", down, widths).plain.endswith("ssh: refused")
    assert len(line) <= widths.total


def test_the_room_leaves_the_table_a_third_and_a_small_screen_its_own_layout() -> None:
    for width, height in ((100, 30), (160, 48), (240, 70)):
        room = room_for(width, height)
        table = height - room.header_height - 1 - room.bottom_height - room.grid_budget
        assert not room.small and table >= height / 3
    small = room_for(80, 24)
    assert small.small and small.header_height == 1 and small.bottom_height == 0
    assert room_for(80, 24, small.toggled_logs()).logs_tab
    assert not room_for(160, 48, small.toggled_logs()).logs_tab  # a tab only when small


def test_the_progress_column_shows_where_it_fits_and_the_last_log_line_makes_room() -> None:
    widths = [("mark", 1), ("id", 24), ("phase", 10), ("status", 10), ("progress", 16),
              ("priority", 4), ("where", 12), ("attempt", 5), ("duration", 8), ("failure", 12)]
    # 80 columns: id, phase, status and progress fit (the rest scrolls); 160: all of it, the
    # last log line narrowed to fit; 240: all of it at full width
    fits = {width: fit_table(width, widths, 50) for width in (80, 100, 160, 240)}
    assert all(fit.progress for fit in fits.values())
    assert [fits[w].last_line for w in (80, 100, 160, 240)] == [50, 50, 32, 50]
    with_project = [*widths[:2], ("project", 12), *widths[2:]]
    assert not fit_table(80, with_project, 50).progress  # it would end past the screen
    assert fit_table(100, with_project, 50).progress
    assert fit_table(160 - 32 + LAST_LINE_MIN - 1, widths, 50).last_line == 50  # too narrow


def test_the_host_gpu_column_fits_the_longest_host_name() -> None:
    assert where_width(["a", "b"]) == 12
    assert where_width(["gpu-node-01", "gpu-node-02"]) == len("gpu-node-01:0,1")
    assert where_width(["x" * 80, "b"]) == 32
    assert where_width(["gpu-node-01"]) == GPU_ONLY_WIDTH  # one host: its GPUs only


def test_eta_from_printed_progress_before_any_job_finished_then_from_phase_durations() -> None:
    # each running job is a quarter done after 60 s: 180 s left each; 4 more of 240 s on 4 slots
    running = [("train", 60.0, 0.25)] * 4
    assert estimate_eta(running, {"train": 4}, {}) == 180 + 240
    assert estimate_eta([("train", 60.0, None)], {"train": 4}, {}) is None  # nothing to go on
    means = {"train": 100.0, "eval": 10.0, ALL: 55.0}
    # 60 s left of a train job, then an eval job of 10 s, on the one slot
    assert estimate_eta([("train", 40.0, None)], {"eval": 1}, means) == 70
    assert estimate_eta([], {}, means) == 0
    assert estimate_eta([], {"eval": 0}, means) == 0  # a phase whose waiting jobs all left


def test_the_engines_eta_book_follows_the_records_as_they_change() -> None:
    book = EtaBook()
    records = {
        "c1": job("c1", "completed", history=[attempt(1, "h", 0, T0 - 100, T0)]),
        "c2": job("c2", "completed", phase="eval", history=[attempt(1, "h", 0, T0 - 10, T0)]),
        "r": job("r", "running", history=[attempt(1, "h", 1, T0 - 40)]),
        "w": job("w", "pending", phase="eval")}
    for job_id, record in records.items():
        book.update(job_id, record)
    assert book.eta(T0) == 70  # as above: 60 s of train left, then 10 s of eval
    book.update("r", dict(records["r"], last_line="epoch 1/2"))
    assert book.eta(T0) == 50  # halfway after 40 s: 40 s left, then 10 s of eval
    book.update("w", dict(records["w"], status="held"))
    assert book.eta(T0) == 40
    book.update("w", dict(records["w"], status="pending"))
    book.update("w", None)  # retired by a reload: no longer waited for
    assert book.eta(T0) == 40


def test_the_header_counts_the_engines_eta_down_and_takes_the_longest_project() -> None:
    view = RunView()
    view.load_snapshot(sample_snapshot("a"))
    view.load_snapshot(sample_snapshot("b"))
    assert view_eta(view, T0) is None  # an engine that has said nothing yet: nothing to show
    view.apply(QueueEta(project="a", at=T0, eta_s=300.0))
    view.apply(QueueEta(project="b", at=T0 - 100, eta_s=250.0))
    assert view_eta(view, T0) == 300
    assert view_eta(view, T0 + 60) == 240  # counted down, not computed again
    view.apply(QueueFinished(project="a", at=T0 + 60, exit_code=0))
    assert view_eta(view, T0 + 60) == 90  # b's alone: 250 s from T0 - 100
    assert counted_down(10.0, T0, T0 + 60) == 0  # never below nothing left
