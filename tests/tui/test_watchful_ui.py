"""The UI side of a queue that watches itself: releasing a quarantined GPU from the palette,
quarantine reasons and other processes in the grid, stalls and cleanups in the details."""

from __future__ import annotations

from eq_tui.tui.app import EqTuiApp
from eq_tui.tui.gpu_release import release_gpu_commands
from eq_tui.tui.host_panel import gpu_line, other_text
from tests.tui.fake_client import T0, FakeClient, sample_snapshot
from tests.tui.pilot_wait import eventually


async def test_the_palette_releases_a_quarantined_gpu() -> None:
    snapshot = sample_snapshot()
    box = next(h for h in snapshot["hosts"] if h["name"] == "a100-box")
    box["gpus"][1]["quarantine_reason"] = "uncorrected ECC errors grew from 0 to 3"
    client = FakeClient(snapshot)
    app = EqTuiApp([client], clock=lambda: T0)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.pause()
        entries = release_gpu_commands(app)
        assert [(label, help_text) for label, _, help_text in entries] == [
            ("Release GPU a100-box:1", "uncorrected ECC errors grew from 0 to 3")]
        entries[0][1]()
        await eventually(pilot, lambda: client.commands == [("release-gpu", ["a100-box:1"])])


def test_a_gpu_line_says_why_it_is_quarantined_and_whose_memory_it_holds() -> None:
    quarantined = {"index": 1, "quarantined": True, "quarantine_reason": "retired pages pending",
                   "memory_used_mib": 0, "memory_total_mib": 81920}
    assert "quarantined: retired pages pending" in gpu_line(quarantined, 500).plain
    others = [{"pid": 4242, "user": "alice", "command": "/usr/bin/python eval.py",
               "used_mib": 20000}]
    assert other_text(others) == "other: pid 4242 alice python eval.py"
    assert other_text([]) == "other process"


def test_the_details_say_since_when_a_job_is_stalled_and_what_was_cleaned_up() -> None:
    from eq_tui.tui.screens.details import job_summary

    record = {"id": "s1", "phase": "train", "status": "running", "attempts": 2, "cmd": "x",
              "stalled_since": T0 - 60, "silent_since": T0 - 700,
              "history": [{"n": 1, "cleanup": "terminated 1 leftover process(es) on GPU 0: "
                                              "4242 me (python worker.py)"}, {"n": 2}]}
    text = job_summary(record, 3).plain
    assert "stalled since" in text and "log silent since" in text
    assert "attempt 1 cleanup terminated 1 leftover process(es) on GPU 0: 4242" in text
