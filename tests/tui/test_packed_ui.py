"""Jobs that share GPUs by memory, as the UI shows them: a shared GPU's memory bar in segments
with each job's id, the job table's host:gpu with how many share it (and `cpu`), the escalation
after a CUDA OOM on a shared GPU in the retry pane, estimate and peak in the details screen."""

from __future__ import annotations

import copy
from typing import Any

from textual.widgets import DataTable, Static

from eq_tui.api.events import HostProbed
from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_grid import GRID_PANELS, HostPanel
from eq_tui.tui.gpu_segments import segment_bar, shares, spans
from eq_tui.tui.host_line import host_line, line_widths
from eq_tui.tui.host_panel import gpu_line, host_body
from eq_tui.tui.memory_text import attempt_memory, escalation_text
from eq_tui.tui.rows import SHARED_MARK, where
from eq_tui.tui.screens.details import JobDetailsScreen
from tests.tui.fake_client import T0, FakeClient, packed_snapshot
from tests.tui.pilot_wait import eventually

SIZE = (160, 48)


def a100(snapshot: dict[str, Any]) -> dict[str, Any]:
    host: dict[str, Any] = snapshot["hosts"][1]
    return host


def panel_of(app: EqTuiApp, name: str) -> HostPanel:
    [panel] = [p for p in app.query(GRID_PANELS) if name in str(p.border_title)]
    return panel


def lines(panel: Static) -> list[str]:
    return [line.rstrip() for line in str(panel.render()).splitlines()]


def test_segments_add_up_and_every_job_gets_a_cell() -> None:
    edges = spans([40, 1, 30, 9], 3, 100, 10)
    assert edges == [(0, 4), (4, 5), (5, 7), (7, 8)]
    crowded = spans([1, 1, 1, 0], 3, 1000, 10)  # tiny jobs: a cell each all the same
    assert [end - start for start, end in crowded] == [1, 1, 1, 0]
    over = spans([60, 60, 0], 2, 120, 10)  # estimates beyond the total: scaled into the bar
    assert over[-2][1] == 10


def test_a_shared_gpu_line_has_a_segment_per_job_with_its_id_and_the_count() -> None:
    host = a100(packed_snapshot())
    gpus = host["gpus"]
    wide = host_body(host, 500, width=74).plain.splitlines()
    assert wide[0].startswith("0 …r0.1_s1 …0.1_s2▒…r0.3_s1▒") and wide[0].endswith("3 jobs")
    assert wide[1].startswith("1 …al_a …l_b▒") and wide[1].endswith("2 jobs")
    # the host's bars widen together, so that its lines stay aligned
    assert len({line.index("/80.0") for line in wide}) == 1
    narrow = gpu_line(gpus[0], 500).plain  # the plain 10 cells: no room for ids, the count
    assert "sweep" not in narrow and "r0." not in narrow and narrow.endswith("3 jobs")
    alone = gpu_line(gpus[2], 500).plain  # one job: as ever
    assert alone.startswith("2 ████░░░░░░") and alone.endswith("train_lr0.03_s2")
    # what a job holds but has not allocated is hatched; someone else's memory is its own colour
    bar = segment_bar(shares(gpus[1]["jobs"]), 20480, 81920, 40)
    styles = {str(span.style) for span in bar.spans}
    assert {"$warning", "$secondary", "bold reverse $secondary", "dim"} <= styles
    assert "▒" in bar.plain and bar.cell_length == 40


def test_a_host_line_colours_a_shared_gpu_and_counts_every_job() -> None:
    host = a100(packed_snapshot())
    line = host_line("a100-box", host, line_widths(["a100-box"], [host]))
    assert " 6 jobs " in line.plain and "3 busy 0 free 0 other 1 quar" in line.plain
    cells = [str(span.style) for span in line.spans if set(line.plain[span.start:span.end])
             <= set("▁▂▃▄▅▆▇█")]
    assert cells[0] == "$accent" and "$primary" in cells


def third_job_leaves_gpu_0(client: FakeClient) -> None:
    """The next probe: sweep_lr0.3_s1 is no longer on GPU 0 (two jobs share it now)."""
    gpus = copy.deepcopy(a100(client.state)["gpus"])
    gpus[0]["jobs"] = gpus[0]["jobs"][:2]
    client.publish(HostProbed(project="demo", at=T0 + 2, host="a100-box", ok=True, rtt_s=0.03,
                              gpus=tuple(gpus)))


async def test_the_grid_shows_each_shared_job_and_follows_a_probe() -> None:
    client = FakeClient(packed_snapshot())
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await eventually(pilot, lambda: "…r0.1_s1" in str(panel_of(app, "a100-box").render()),
                         what="the ids in the segments once the panel is laid out")
        text = lines(panel_of(app, "a100-box"))
        assert text[0].endswith("3 jobs") and "0.1_s2" in text[0] and "…r0.3_s1" in text[0]
        assert text[1].endswith("2 jobs") and text[2].endswith("train_lr0.03_s2")
        third_job_leaves_gpu_0(client)
        await eventually(pilot, lambda: lines(panel_of(app, "a100-box"))[0].endswith("2 jobs"))
        assert "…r0.3_s1" not in lines(panel_of(app, "a100-box"))[0]


async def test_the_compact_grid_counts_shared_jobs_and_shows_the_selected_host_in_segments(
        ) -> None:
    app = EqTuiApp([FakeClient(packed_snapshot())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("g")
        await eventually(pilot, lambda: app.grid.plan.compact)
        app.grid.select("demo/a100-box")
        expanded = app.query_one("#host-expanded", HostPanel)
        await eventually(pilot, lambda: "3 jobs" in str(expanded.render()))
        compact = str(app.query_one("#host-lines", Static).render())
        assert " 6 jobs " in compact
        first = lines(expanded)[0]
        assert first.startswith("0 ") and first.endswith("3 jobs")


def test_the_host_gpu_cell_says_how_many_share_the_gpu_and_cpu_for_a_cpu_only_job() -> None:
    running = {"host": "h1", "gpus": [2]}
    assert where(running) == "h1:2" and where(running, 1) == "h1:2"
    assert where(running, 3) == f"h1:2{SHARED_MARK}3"
    assert where({"host": "h1", "gpus": []}) == "h1:cpu"
    assert where({"host": None, "gpus": []}) == ""


async def test_the_table_marks_jobs_on_a_shared_gpu_and_follows_a_probe() -> None:
    client = FakeClient(packed_snapshot())
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        table = app.table
        assert str(table.get_cell("demo/sweep_lr0.1_s2", "where")) == f"a100-box:0{SHARED_MARK}3"
        assert str(table.get_cell("demo/eval_b", "where")) == f"a100-box:1{SHARED_MARK}2"
        assert str(table.get_cell("demo/train_lr0.03_s2", "where")) == "a100-box:2"
        assert str(table.get_cell("demo/prep_cpu", "where")) == "a100-box:cpu"
        # a probe changes who shares the GPU: the rows of its jobs follow, not only the grid
        third_job_leaves_gpu_0(client)
        await eventually(pilot, lambda: str(table.get_cell("demo/sweep_lr0.1_s1", "where"))
                         == f"a100-box:0{SHARED_MARK}2")
        assert str(table.get_cell("demo/sweep_lr0.3_s1", "where")) == "a100-box:0"


async def test_the_retry_pane_shows_what_a_shared_oom_asks_for_next() -> None:
    app = EqTuiApp([FakeClient(packed_snapshot())], clock=lambda: T0)
    async with app.run_test(size=(200, 48)) as pilot:
        await pilot.pause()
        retry = str(app.query_one("#retry-body").render())
        assert "sweep_lr1_s1 in 0:12  attempt 1/3  oom (shared) → 15.0 GiB" in retry
        assert "sweep_lr1_s2 in 0:30  attempt 2/3  oom (shared) → GPU alone" in retry
        assert "student_s2 in 0:07  attempt 1/3  cuda_oom" in retry  # not shared: as before


def test_the_escalation_words_say_the_engines_ask_and_compute_none() -> None:
    job = {"mem_escalation": 1, "next_ask_level": 1, "next_ask_mib": 15360,
           "history": [{"estimate_mib": 10240}, {"estimate_mib": None}]}
    assert escalation_text(job) == "oom (shared) → 15.0 GiB"
    assert escalation_text({**job, "next_ask_mib": 20000}) == "oom (shared) → 19.5 GiB"
    assert escalation_text({**job, "next_ask_mib": None}) == "oom (shared) → GPU alone"
    # the engine has not yet said what the latest OOM asks: nothing rather than a guess
    assert escalation_text({**job, "mem_escalation": 2}) == ""
    assert escalation_text({"mem_escalation": 0}) == ""
    assert attempt_memory({"estimate_mib": 18432, "peak_mib": 17612}) == \
        "estimate 18.0 GiB · peak 17.2 GiB"
    assert attempt_memory({"estimate_mib": None, "peak_mib": 30822}) == "GPU alone · peak 30.1 GiB"
    assert attempt_memory({"gpus": []}) == ""


def details_open(app: EqTuiApp, key: str) -> bool:
    screen = app.screen
    return isinstance(screen, JobDetailsScreen) and screen.key == key \
        and bool(screen.query("#attempts"))


async def test_the_details_screen_shows_estimate_peak_escalation_and_why_it_waits() -> None:
    app = EqTuiApp([FakeClient(packed_snapshot())], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        app.action_details("demo/sweep_lr1_s2")
        await eventually(pilot, lambda: details_open(app, "demo/sweep_lr1_s2"))
        screen = app.screen
        summary = str(screen.query_one("#details-summary").render())
        assert "memory next attempt gets its GPU alone" in summary
        attempts = screen.query_one("#attempts", DataTable)
        assert [str(attempts.get_cell(str(n), "memory")) for n in (1, 2)] == [
            "estimate 10.0 GiB · peak 15.1 GiB", "estimate 15.0 GiB · peak 15.1 GiB"]
        await pilot.press("escape")
        app.action_details("demo/sweep_lr3_s1")
        await eventually(pilot, lambda: details_open(app, "demo/sweep_lr3_s1"))
        summary = str(app.screen.query_one("#details-summary").render())
        assert "waiting a100-box GPU 1 has 30.0 GiB free of 80; needs 41.0" in summary
        await pilot.press("escape")
        app.action_details("demo/eval_b")
        await eventually(pilot, lambda: details_open(app, "demo/eval_b"))
        attempts = app.screen.query_one("#attempts", DataTable)
        assert str(attempts.get_cell("1", "memory")) == "estimate 12.0 GiB · peak 5.9 GiB"


async def test_the_details_screen_names_who_holds_the_gpus_a_job_waits_for() -> None:
    snapshot = packed_snapshot()
    gpu = a100(snapshot)["gpus"][1]
    gpu["holders"] = [{"kind": "eq-tui", "user": "bob", "project": "nlp", "job": "j7",
                       "attempt": 1, "mib": 6144, "used_mib": 0},
                      {"kind": "process", "pid": 4242, "user": "alice",
                       "command": "python eval.py", "used_mib": 2048}]
    app = EqTuiApp([FakeClient(snapshot)], clock=lambda: T0)
    async with app.run_test(size=SIZE) as pilot:
        app.action_details("demo/sweep_lr3_s1")
        await eventually(pilot, lambda: details_open(app, "demo/sweep_lr3_s1"))
        summary = str(app.screen.query_one("#details-summary").render())
        assert "GPU a100-box GPU 1" in summary
        assert "bob's nlp/j7 (6.0G); pid 4242 alice python eval.py (2.0G)" in summary
