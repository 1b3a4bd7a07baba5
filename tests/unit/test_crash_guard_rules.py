"""The crash guard's rules, fed judged exits directly (tests/integration/test_crash_guard.py
runs them on real sessions): what counts as a broken command, what is a result of a
configuration, what a healthy sweep pays (nothing)."""

from __future__ import annotations

from pathlib import Path

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.decide.crash_guard import CrashGuard
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


def running(job_id: str, began: float = 90.0, **params: str) -> JobState:
    job = ended(job_id, "", **params)
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
