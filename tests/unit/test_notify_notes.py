"""Notes: each event a target can ask for, in words that stand on their own; digests."""

from __future__ import annotations

from eq_tui.api.events import (
    GpuQuarantined,
    HostStateChanged,
    JobStalled,
    QueueFinished,
    QueuePaused,
)
from eq_tui.notify.notes import Note, digest, event_note, phase_note


def test_every_kind_of_event_makes_a_note_with_a_stable_id() -> None:
    stalled = event_note("p", JobStalled(project="p", at=1.0, job="s1", host="box", gpus=(2,),
                                         attempt=1, silent_s=1204.0,
                                         signs=("log_silent", "gpus_idle"), action="restart",
                                         detail="stalled: silent 20m04s (log silent, gpus idle)"))
    assert stalled is not None and stalled.id == "stalled:s1:1:restart"
    assert stalled.text == ("[p] stalled: silent 20m04s (log silent, gpus idle): s1 "
                            "(attempt 1, box:2); restart")
    quarantined = event_note("p", GpuQuarantined(project="p", at=1.0, host="box", gpu=3,
                                                 reason="retired pages pending"))
    assert quarantined is not None and quarantined.kind == "quarantined"
    assert quarantined.text == "[p] box GPU 3 quarantined: retired pages pending"
    down = event_note("p", HostStateChanged(project="p", at=7.9, host="box", state="down",
                                            reason="connection lost"))
    assert down is not None and down.id == "host_down:box:7"
    finished = event_note("p", QueueFinished(project="p", at=1.0,
                                             counts={"completed": 3, "stuck": 1}, exit_code=1))
    assert finished is not None and finished.id == "finished"
    assert finished.text == "[p] queue finished (exit 1): 3 completed, 1 stuck"
    assert event_note("p", GpuQuarantined(project="p", at=1.0, host="box", gpu=3,
                                          released=True)) is None
    assert event_note("p", HostStateChanged(project="p", at=1.0, host="box",
                                            state="up")) is None
    assert event_note("p", QueuePaused(project="p", at=1.0, paused=True)) is None


def test_a_phase_note_counts_its_jobs() -> None:
    jobs = [{"phase": "a", "status": "completed"}, {"phase": "a", "status": "stuck"},
            {"phase": "b", "status": "running"}]
    note = phase_note("p", "a", jobs)
    assert (note.id, note.text) == ("phase_done:a", "[p] phase a done: 1 completed, 1 stuck")


def test_a_digest_shows_the_first_in_full_and_counts_the_rest() -> None:
    notes = [Note(f"stuck:j{i}:1", "stuck", f"j{i}", f"[p] stuck: j{i} ...") for i in range(6)]
    notes.append(Note("quarantined:b:1:x", "quarantined", "b:1", "[p] b GPU 1 quarantined: x"))
    text = digest(notes, "p")
    assert text.splitlines() == ["[p] 7 notifications", "[p] stuck: j0 ...",
                                 "5 more jobs stuck: j1, j2, j3, j4, j5",
                                 "1 more GPU quarantined: b:1"]
    assert digest(notes[:1], "p") == "[p] stuck: j0 ..."


def test_a_held_phase_is_a_stuck_note_that_says_what_to_do() -> None:
    from eq_tui.api.events import PhaseHeld

    held = event_note("p", PhaseHeld(project="p", at=12.5, phase="train", jobs=("a", "b", "c"),
                                     failure_class="exit_nonzero",
                                     line="ModuleNotFoundError: No module named 'torchh'"))
    assert held is not None and held.kind == "stuck" and held.id == "phase_held:train:12"
    assert held.text.startswith("[p] phase train held: a, b, c failed alike (exit_nonzero)")
    assert "No module named 'torchh'" in held.text and "retry one of them" in held.text
