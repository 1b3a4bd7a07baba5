"""The queue's ETA counts a search's trials not asked yet (engine/tick/queue_eta.py): without
them a search's ETA read 'done in 2 s' with a third of its trials still to come."""

from __future__ import annotations

from pathlib import Path

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.queue_eta import trials_to_come
from eq_tui.present.queue_eta import EtaBook
from tests.unit.test_search_trials_engine import bed, flat


def finished(job_id: str, phase: str, seconds: float) -> JobState:
    attempt = Attempt(n=1, host="g1", gpus=[0], session="s", attempt_dir="d", log="l",
                      start=100.0, end=100.0 + seconds, exit_code=0)
    return JobState(id=job_id, phase=phase, cmd="train", status=JobStatus.COMPLETED,
                    attempts=1, history=[attempt])


def test_the_trials_to_come_count_in_the_eta_each_its_grid_points() -> None:
    book = EtaBook()
    book.update("t0_seed1", finished("t0_seed1", "main", 10.0).to_json())
    assert book.eta(500.0) == 0.0  # nothing runs, nothing waits: done, as far as it knows
    assert book.eta(500.0, {"main": 6}) == 60.0  # six jobs of 10 s, one slot
    assert book.eta(500.0, {}) == 0.0


async def test_trials_to_come_are_those_not_asked_times_the_grid(tmp_path: Path) -> None:
    text = flat(trials="trials: 5", grid="grid: {seed: [1, 2]}\n").replace(
        "--lr ${lr}", "--lr ${lr} --seed ${seed}")
    _ctx, trials, _ = bed(tmp_path, text, gpus={"g1": 4})
    assert trials_to_come(trials) == {}  # no study opened yet: nothing known
    await trials.step()
    asked = trials.studies["main"].asked()
    assert 0 < asked < 5
    assert trials_to_come(trials) == {"main": (5 - asked) * 2}


async def test_a_search_bounded_by_its_budget_alone_adds_nothing_known(tmp_path: Path) -> None:
    _ctx, trials, _ = bed(tmp_path, flat(trials="budget: {gpu_hours: 1}"), gpus={"g1": 1})
    await trials.step()
    assert trials_to_come(trials) == {}
