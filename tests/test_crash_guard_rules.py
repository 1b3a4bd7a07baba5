"""The crash guard's rules, fed judged exits directly (tests/test_crash_guard.py runs them on
real sessions): what counts, what breaks a streak, what proves a phase."""

from __future__ import annotations

from pathlib import Path

from eq_tui.engine.bus import Bus
from eq_tui.engine.crash_guard import CrashGuard
from eq_tui.engine.model import Attempt, JobState, JobStatus
from eq_tui.engine.store import RunDir
from eq_tui.manifest.model import CrashGuard as Spec


def guard(tmp_path: Path, **spec: float) -> CrashGuard:
    store = RunDir(tmp_path / "run")
    store.create()
    return CrashGuard(Spec(**spec), "p", Bus("p", store, lambda: 100.0),  # type: ignore[arg-type]
                      lambda: 100.0)


def ended(job_id: str, line: str, ran: float = 1.0, phase: str = "main") -> JobState:
    job = JobState(id=job_id, phase=phase, cmd="x", status=JobStatus.STUCK, last_line=line)
    job.history.append(Attempt(1, "h", [0], "s", "/d", "/d/log", start=50.0, end=50.0 + ran))
    return job


def test_three_in_a_row_with_the_same_line_numbers_aside_hold_the_phase(tmp_path: Path) -> None:
    g = guard(tmp_path)
    for i in range(2):
        g.judged(ended(f"j{i}", f"ValueError: bad lr {i}"), JobStatus.STUCK, "exit_nonzero")
    assert not g.held
    g.judged(ended("j2", "ValueError: bad lr 7"), JobStatus.STUCK, "exit_nonzero")
    assert "main" in g.held and "j0, j1, j2" in g.held["main"]
    assert g.limits([], 100.0)["main"].left == 0


def test_ooms_a_different_line_a_long_run_or_a_success_do_not_add_up(tmp_path: Path) -> None:
    g = guard(tmp_path)
    g.judged(ended("a", "boom"), JobStatus.STUCK, "exit_nonzero")
    g.judged(ended("b", "CUDA out of memory"), JobStatus.FAILED_OOM, "cuda_oom")  # ignored
    g.judged(ended("c", "other"), JobStatus.STUCK, "exit_nonzero")  # streak starts again
    g.judged(ended("d", "other"), JobStatus.STUCK, "exit_nonzero")
    assert not g.held
    g.judged(ended("e", "other", ran=120.0), JobStatus.STUCK, "exit_nonzero")  # ran a while
    g.judged(ended("f", "other"), JobStatus.STUCK, "exit_nonzero")
    g.judged(ended("g", "other"), JobStatus.STUCK, "exit_nonzero")
    assert not g.held
    g.judged(ended("h", "other"), JobStatus.STUCK, "exit_nonzero")
    assert "main" in g.held  # f, g, h


def test_an_unproven_phase_has_at_most_after_attempts_out(tmp_path: Path) -> None:
    g = guard(tmp_path, after=2, within=60.0)
    running = [ended(f"r{i}", "") for i in range(2)]
    for job in running:
        job.status = JobStatus.RUNNING
        job.history[-1].end = None
    waiting = JobState(id="w", phase="main", cmd="x")
    assert g.limits([*running, waiting], now=60.0)["main"].left == 0
    # one of them has run longer than `within`: the command works, no more limit
    assert "main" not in g.limits([*running, waiting], now=200.0)


def test_released_and_restored(tmp_path: Path) -> None:
    g = guard(tmp_path, after=1)
    g.judged(ended("a", "x"), JobStatus.STUCK, "exit_nonzero")
    saved = g.to_json()
    again = guard(tmp_path)
    again.restore(saved)
    assert "main" in again.held
    assert again.release("main", "retry of a") and not again.held
    off = guard(tmp_path, enabled=False)  # type: ignore[arg-type]
    off.judged(ended("a", "x"), JobStatus.STUCK, "exit_nonzero")
    assert not off.held and off.limits([], 0.0) == {}
