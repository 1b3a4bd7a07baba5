"""The crash guard's rules, fed judged exits directly (tests/integration/test_crash_guard.py
runs them on real sessions): what counts as a broken command, what is a result of a
configuration, what a healthy sweep pays (nothing)."""

from __future__ import annotations

from pathlib import Path

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.decide.crash_guard import CrashGuard
from eq_tui.engine.decide.scheduler import PhaseLimit
from eq_tui.engine.state.bus import Bus
from eq_tui.engine.state.store import RunDir
from eq_tui.manifest.model import CrashGuard as Spec


def guard(tmp_path: Path, jobs: list[JobState] | None = None, **spec: float) -> CrashGuard:
    store = RunDir(tmp_path / "run")
    store.create()
    known = jobs or []
    return CrashGuard(Spec(**spec), "p", Bus("p", store, lambda: 100.0),  # type: ignore[arg-type]
                      lambda: 100.0, group_over=lambda phase: "seed",
                      phase_jobs=lambda phase: [j for j in known if j.phase == phase])


def ended(job_id: str, line: str, ran: float = 1.0, phase: str = "main",
          **params: str) -> JobState:
    job = JobState(id=job_id, phase=phase, cmd="x", status=JobStatus.STUCK, last_line=line,
                   params=dict(params))
    job.history.append(Attempt(1, "h", [0], "s", "/d", "/d/log", start=50.0, end=50.0 + ran))
    return job


def running(job_id: str, began: float = 90.0, phase: str = "main", **params: str) -> JobState:
    job = ended(job_id, "", **params)
    job.phase = phase
    job.status = JobStatus.RUNNING
    job.history[-1].start = began
    job.history[-1].end = None
    return job


def crash(g: CrashGuard, job: JobState, tail: tuple[str, ...] = ()) -> None:
    g.saw_output(job, (*tail, job.last_line))
    g.judged(job, JobStatus.STUCK, "exit_nonzero")


def test_three_in_a_row_with_the_same_line_numbers_aside_hold_the_phase(tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(2):
        crash(g, ended(f"j{i}", f"ValueError: bad lr {i}"))
    assert not g.held
    crash(g, ended("j2", "ValueError: bad lr 7"))
    assert "main" in g.held and "j0, j1, j2" in g.held["main"]
    assert g.limits([], 100.0)["main"].left == 0


def test_ooms_a_different_line_a_long_run_or_a_success_do_not_add_up(tmp_path: Path) -> None:
    g = guard(tmp_path)
    crash(g, ended("a", "boom"))
    g.judged(ended("b", "CUDA out of memory"), JobStatus.FAILED_OOM, "cuda_oom")  # ignored
    crash(g, ended("c", "other"))  # streak starts again
    crash(g, ended("d", "other"))
    assert not g.held
    crash(g, ended("e", "other", ran=120.0))  # ran a while
    crash(g, ended("f", "other"))
    crash(g, ended("g", "other"))
    assert not g.held
    g.judged(ended("ok", ""), JobStatus.COMPLETED, None)
    crash(g, ended("h", "other"))
    crash(g, ended("i", "other"))
    assert not g.held
    crash(g, ended("j", "other"))
    assert "main" in g.held  # h, i, j


def test_a_job_that_trained_then_failed_never_counts(tmp_path: Path) -> None:
    """NaN after a few epochs is the configuration's result, however fast and alike."""
    g = guard(tmp_path)
    for i in range(6):
        crash(g, ended(f"nan{i}", "ValueError: loss is nan"),
              tail=("epoch 1/3 loss=0.91 val_acc=0.41", "Traceback (most recent call last):"))
    assert not g.held and g.limits([], 100.0) == {}


def test_progress_seen_while_running_counts_though_the_tail_lost_it(tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(4):
        job = running(f"j{i}")
        g.saw_output(job, ("Epoch 2: 45%|####      | 45/100",))
        job.status, job.last_line = JobStatus.STUCK, "AssertionError"
        job.history[-1].end = 95.0
        g.judged(job, JobStatus.STUCK, "exit_nonzero")  # a long traceback: no progress in it
    assert not g.held


def test_seeds_of_one_configuration_among_many_do_not_hold(tmp_path: Path) -> None:
    jobs = [ended(f"lr{lr}_s{s}", "ValueError: lr too large", lr=lr, seed=s)
            for lr in ("0.1", "1.0") for s in ("1", "2", "3")]
    g = guard(tmp_path, jobs)
    for job in jobs[3:]:  # lr 1.0, three seeds
        crash(g, job)
    assert not g.held
    # nothing else is out: one launch at a time until a job shows progress
    assert g.limits(jobs, 100.0)["main"].left == 1
    g.saw_output(running("lr0.1_s1", lr="0.1", seed="1"), ("epoch 1/9 loss=1.2",))
    assert g.limits(jobs, 100.0) == {}  # the command works: no limit any more
    # the same crash in a second configuration too: a broken command after all
    for job in jobs[3:]:
        job.history.append(Attempt(2, "h", [0], "s", "/d", "/d/log", start=60.0, end=61.0))
        crash(g, job)
    crash(g, jobs[1])  # lr 0.1 (its seed 1 showed progress above; seed 2 did not)
    assert "main" in g.held


def test_a_phase_with_one_configuration_is_held_by_its_seeds(tmp_path: Path) -> None:
    jobs = [ended(f"s{s}", "ImportError: no module named trian", lr="0.1", seed=s)
            for s in ("1", "2", "3", "4")]
    g = guard(tmp_path, jobs)
    for job in jobs[:3]:
        crash(g, job)
    assert "main" in g.held


def test_a_healthy_phase_has_no_limit_however_many_jobs_are_out(tmp_path: Path) -> None:
    g = guard(tmp_path, after=2, within=60.0)
    out = [running(f"r{i}") for i in range(40)]
    waiting = JobState(id="w", phase="main", cmd="x")
    assert g.limits([*out, waiting], now=100.0) == {}
    crash(g, ended("other", "boom", phase="eval"))  # another phase's crash limits that one only
    assert set(g.limits([*out, waiting], now=100.0)) == {"eval"}


def test_after_a_first_crash_the_jobs_out_count_against_the_evidence_needed(
        tmp_path: Path) -> None:
    g = guard(tmp_path, after=3, within=60.0)
    out = [running(f"r{i}") for i in range(2)]
    crash(g, ended("first", "SyntaxError: invalid syntax"))
    assert g.limits(out, now=100.0)["main"].left == 0  # 2 more out: they may be the evidence
    assert g.limits(out[:1], now=100.0)["main"].left == 1
    # an attempt out longer than `within` is no longer suspect
    assert g.limits(out, now=200.0)["main"].left == 2
    g.saw_output(out[0], ("step 10/100",))
    assert "main" not in g.limits(out, now=100.0)


def test_released_and_restored(tmp_path: Path) -> None:
    g = guard(tmp_path, after=1)
    crash(g, ended("a", "x"))
    saved = g.to_json()
    again = guard(tmp_path)
    again.restore(saved)
    assert "main" in again.held
    assert again.release("main", "retry of a") and not again.held
    off = guard(tmp_path, enabled=False)  # type: ignore[arg-type]
    crash(off, ended("a", "x"))
    assert not off.held and off.limits([], 0.0) == {}


# ---- what a person reads: the held phase's reason, event and alert; a release --------------

TODO = ("it waits for a person: fix the command, then `eq-tui retry RUN_DIR --stuck --phase "
        "main` (retries every stuck job of the phase and releases it), or `eq-tui release "
        "RUN_DIR --phase main` to launch the rest as they are")


def test_a_held_phase_says_which_jobs_how_they_failed_and_what_to_do(tmp_path: Path) -> None:
    g = guard(tmp_path, within=30.5)
    for i in range(3):
        crash(g, ended(f"j{i}", f"  ValueError: bad lr {i}  "))
    reason = ("crash guard: 3 jobs of phase main (j0, j1, j2) failed the same way within 30.5s "
              "of starting, before any progress [exit_nonzero] ValueError: bad lr 2")
    assert g.held == {"main": reason}
    held, alert = g.bus.run_dir.read_events()
    assert held == {"project": "p", "at": 100.0, "phase": "main", "jobs": ["j0", "j1", "j2"],
                    "failure_class": "exit_nonzero", "line": "ValueError: bad lr 2",
                    "reason": reason, "todo": TODO, "type": "phase_held"}
    assert alert == {"project": "p", "at": 100.0, "level": "error", "host": None, "job": "j2",
                     "message": f"{reason}. Launching phase main is held; {TODO}",
                     "type": "alert"}
    assert g.bus.alerts == [alert]
    assert g.limits([], 100.0) == {"main": PhaseLimit(0, reason)}
    assert g.to_json() == {"held": {"main": reason}}


def test_a_held_phases_line_is_cut_at_200_characters_and_an_empty_one_is_named(
        tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(3):
        crash(g, ended(f"j{i}", "E" * 300))
    assert g.held["main"].endswith("[exit_nonzero] " + "E" * 200)
    quiet = guard(tmp_path / "quiet")
    for i in range(3):
        crash(quiet, ended(f"j{i}", "   "))
    assert quiet.held["main"].endswith("[exit_nonzero] (no output)")


def test_a_release_says_who_and_the_phase_needs_new_evidence(tmp_path: Path) -> None:
    g = guard(tmp_path)
    assert g.release("main", "bob") is False
    for i in range(3):
        crash(g, ended(f"j{i}", "boom"))
    assert g.release("main", "eq-tui release") is True
    assert g.held == {} and g.limits([], 100.0) == {}
    released, alert = g.bus.run_dir.read_events()[-2:]
    assert released == {"project": "p", "at": 100.0, "phase": "main", "by": "eq-tui release",
                        "type": "phase_released"}
    assert (alert["level"], alert["message"]) == (
        "info", "phase main released (eq-tui release); launching again")
    assert g.release("main", "bob") is False
    crash(g, ended("k0", "boom"))
    crash(g, ended("k1", "boom"))
    assert not g.held  # the three before the release no longer count


def test_release_all_releases_every_held_phase(tmp_path: Path) -> None:
    g = guard(tmp_path)
    for phase in ("a", "b"):
        for i in range(3):
            crash(g, ended(f"{phase}{i}", "boom", phase=phase))
    assert set(g.held) == {"a", "b"}
    g.release_all("person")
    assert g.held == {}
    assert [(e["phase"], e["by"]) for e in g.bus.run_dir.read_events()
            if e["type"] == "phase_released"] == [("a", "person"), ("b", "person")]


# ---- the edges of judging and limiting -------------------------------------------------------

def test_a_crash_with_no_start_recorded_counts_from_when_it_was_launched(tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(3):
        job = ended(f"j{i}", "boom")
        job.history[-1].start, job.history[-1].decided_at = None, 55.0
        crash(g, job)
    assert "main" in g.held


def test_a_crash_judged_before_its_end_is_written_counts_up_to_now(tmp_path: Path) -> None:
    g = guard(tmp_path)  # the clock reads 100: started at 50, 50 s ago
    for i in range(3):
        job = ended(f"j{i}", "boom")
        job.history[-1].end = None
        crash(g, job)
    assert "main" in g.held


def test_a_crash_exactly_within_seconds_after_its_start_counts(tmp_path: Path) -> None:
    g = guard(tmp_path, within=60.0)
    for i in range(3):
        crash(g, ended(f"j{i}", "boom", ran=60.0))
    assert "main" in g.held


def test_a_failure_with_no_class_or_a_job_with_no_attempt_is_not_evidence(
        tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(3):
        g.judged(ended(f"j{i}", "boom"), JobStatus.STUCK, None)
    bare = JobState(id="b", phase="main", cmd="x", status=JobStatus.STUCK, last_line="boom")
    g.saw_output(bare, ("epoch 1/3 loss=0.5",))
    for _ in range(3):
        g.judged(bare, JobStatus.STUCK, "exit_nonzero")
    assert not g.held and g.limits([], 100.0) == {}


def test_jobs_not_from_a_grid_are_each_their_own_configuration(tmp_path: Path) -> None:
    jobs = [ended(n, "boom") for n in ("a", "b", "c")] + [ended("g", "boom", lr="0.1")]
    g = guard(tmp_path, jobs)
    for job in jobs[:3]:
        crash(g, job)
    assert "main" in g.held


def test_the_key_seeds_differ_in_is_the_phases_own(tmp_path: Path) -> None:
    jobs = [ended(f"lr{lr}_s{s}", "boom", lr=lr, seed=s)
            for lr in ("0.1", "1.0") for s in ("1", "2", "3")]
    store = RunDir(tmp_path / "run")
    store.create()
    g = CrashGuard(Spec(), "p", Bus("p", store, lambda: 100.0), lambda: 100.0,
                   group_over=lambda phase: {"main": "seed"}.get(phase, ""),
                   phase_jobs=lambda phase: [j for j in jobs if j.phase == phase])
    for job in jobs[3:]:  # one configuration's three seeds
        crash(g, job)
    assert not g.held


def test_a_job_out_that_already_showed_progress_is_not_evidence_to_wait_for(
        tmp_path: Path) -> None:
    g = guard(tmp_path, after=3, within=60.0)
    trained = running("t")
    g.saw_output(trained, ("epoch 1/3 loss=0.5",))  # before the phase had a crash
    g.saw_output(trained, ("epoch 2/3 loss=0.4",))  # shown once is enough
    crash(g, ended("first", "boom"))
    other = running("o", phase="eval")
    unproven = running("u")
    assert g.limits([other, trained, unproven], now=100.0)["main"] == PhaseLimit(1, (
        "crash guard: 1 job(s) of phase main failed before any progress; waiting for the jobs "
        "out to show progress or fail the same way"))
    # an attempt out exactly `within` seconds may still crash the same way
    assert g.limits([running("v", began=40.0)], now=100.0)["main"].left == 1


def test_restored_reasons_are_the_saved_ones(tmp_path: Path) -> None:
    g = guard(tmp_path)
    g.restore({"held": {"main": "crash guard: as saved"}})
    assert g.limits([], 0.0) == {"main": PhaseLimit(0, "crash guard: as saved")}
    g.restore(None)
    assert g.held == {"main": "crash guard: as saved"}
