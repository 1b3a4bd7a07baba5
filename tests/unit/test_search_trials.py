"""The search rules of the tick (engine/tick/search_trials.py): how a trial ended from its jobs
(the mean over its grid points), how much room there is to ask into, the GPU-hours spent."""

from __future__ import annotations

import pytest

from eq_tui.api.model import Attempt, JobState, JobStatus
from eq_tui.engine.tick.search_trials import Ending, gpu_hours, room_for, trial_ending


def job(status: JobStatus, val: float | None = None, **metrics: float | None) -> JobState:
    state = JobState(id="t0", phase="main", cmd="c", status=status)
    state.metrics = {"val_acc": val, **metrics} if val is not None or metrics else {}
    return state


def test_every_job_completed_with_the_metric_tells_their_mean() -> None:
    jobs = [job(JobStatus.COMPLETED, 0.5), job(JobStatus.COMPLETED, 0.7),
            job(JobStatus.COMPLETED, 0.9)]
    ending = trial_ending(jobs, "val_acc")
    assert ending is not None and ending.outcome == "complete"
    assert ending.value == pytest.approx(0.7)
    assert trial_ending([job(JobStatus.COMPLETED, 0.25)], "val_acc") == Ending("complete", 0.25)
    assert trial_ending([job(JobStatus.COMPLETED, 0.0)], "val_acc") == Ending("complete", 0.0)


@pytest.mark.parametrize("waiting", [JobStatus.PENDING, JobStatus.LAUNCHING, JobStatus.RUNNING,
                                     JobStatus.FAILED_OOM, JobStatus.HELD])
def test_a_trial_with_a_job_not_ended_is_not_told(waiting: JobStatus) -> None:
    assert trial_ending([job(JobStatus.COMPLETED, 0.5), job(waiting)], "val_acc") is None
    assert trial_ending([], "val_acc") is None


@pytest.mark.parametrize("bad", [JobStatus.STUCK, JobStatus.KILLED, JobStatus.BLOCKED])
def test_a_job_needing_a_person_fails_the_trial_even_beside_a_pruned_one(bad: JobStatus) -> None:
    assert trial_ending([job(JobStatus.COMPLETED, 0.5), job(bad)], "val_acc") == Ending("fail")
    assert trial_ending([job(JobStatus.PRUNED), job(bad)], "val_acc") == Ending("fail")


def test_a_pruned_job_prunes_the_trial() -> None:
    assert trial_ending([job(JobStatus.COMPLETED, 0.5), job(JobStatus.PRUNED, 0.1)],
                        "val_acc") == Ending("pruned")


def test_a_completed_job_without_the_metric_fails_the_trial() -> None:
    assert trial_ending([job(JobStatus.COMPLETED, 0.5), job(JobStatus.COMPLETED, loss=0.1)],
                        "val_acc") == Ending("fail")
    assert trial_ending([job(JobStatus.COMPLETED, None, val_acc=None)], "val_acc") == \
        Ending("fail")
    assert trial_ending([job(JobStatus.COMPLETED, loss=1.0)], "loss") == Ending("complete", 1.0)


def test_room_is_the_free_gpus_beyond_what_waits_and_one_when_nothing_waits() -> None:
    assert room_for(gpus=4, active=1, waiting=0) == 3
    assert room_for(gpus=4, active=1, waiting=2) == 1
    assert room_for(gpus=4, active=1, waiting=3) == 0
    assert room_for(gpus=4, active=1, waiting=5) == 0
    assert room_for(gpus=2, active=2, waiting=0) == 1  # asked now, it starts when one frees
    assert room_for(gpus=2, active=3, waiting=1) == 0  # packed: more active than GPUs
    assert room_for(gpus=0, active=0, waiting=0) == 1  # hosts not probed yet


def test_gpu_hours_count_each_attempts_gpus_for_its_time() -> None:
    one = job(JobStatus.COMPLETED)
    one.history = [Attempt(n=1, host="h", gpus=[0, 1], session="s", attempt_dir="d", log="l",
                           start=0.0, end=1800.0),
                   Attempt(n=2, host="h", gpus=[0], session="s", attempt_dir="d", log="l",
                           start=3600.0, end=None),
                   Attempt(n=3, host="h", gpus=[0], session="s", attempt_dir="d", log="l")]
    two = job(JobStatus.RUNNING)
    two.history = [Attempt(n=1, host="h", gpus=[], session="s", attempt_dir="d", log="l",
                           start=7000.0, end=7360.0)]
    # 2 GPUs x 0.5 h + 1 GPU x 0.5 h still running + a CPU job's 0.1 h counted as one
    assert gpu_hours([one, two], now=5400.0) == pytest.approx(1.0 + 0.5 + 0.1)
    assert gpu_hours([], now=1.0) == 0.0
    short = job(JobStatus.KILLED)  # a zero-length attempt, and one whose clock went back
    short.history = [Attempt(n=1, host="h", gpus=[0], session="s", attempt_dir="d", log="l",
                             start=50.0, end=50.0),
                     Attempt(n=2, host="h", gpus=[0], session="s", attempt_dir="d", log="l",
                             start=60.0, end=59.5)]
    assert gpu_hours([short], now=100.0) == 0.0
