"""The engine's side of a job's progress (engine/tick/progress.py): each probe's epoch line and
last line in order, dated by the probe, kept in the job (and its state file), new with each
attempt."""

from __future__ import annotations

import pytest

from eq_tui.api.model import JobState, JobStatus
from eq_tui.engine.tick.progress import ProgressKeeper
from eq_tui.hosts.base import AttemptProbe


def probe(last_line: str, epoch_line: str = "") -> AttemptProbe:
    return AttemptProbe(key="j", session_alive=True, pid=1, pid_alive=True, started=100.0,
                        exit_code=None, exited_at=None, log_size=1, output_ok=None,
                        last_line=last_line, epoch_line=epoch_line)


def running(cmd: str = "python train.py") -> JobState:
    return JobState(id="j", phase="train", cmd=cmd, status=JobStatus.RUNNING, attempts=1)


def test_the_epoch_line_and_the_bar_make_the_jobs_progress_dated_by_the_probe() -> None:
    keeper, job = ProgressKeeper(), running()
    assert keeper.saw(job, probe("  58/469 [==>....] - loss: 0.4", "Epoch 5/8"), 130.0)
    assert job.progress is not None
    assert job.progress["fraction"] == pytest.approx((4 + 58 / 469) / 8)
    assert (job.progress["at"], job.progress["unit"], job.progress["total"]) == (130.0, "epoch",
                                                                              8)
    assert not keeper.saw(job, probe("  58/469 [==>....] - loss: 0.4", "Epoch 5/8"), 135.0)
    # later probes see the bar only: it started over, so epoch 6
    assert keeper.saw(job, probe("  3/469 [....] - loss: 0.4"), 140.0)
    assert job.progress["fraction"] == pytest.approx((5 + 3 / 469) / 8)


def test_a_restarted_engine_goes_on_from_the_state_file() -> None:
    job = running()
    ProgressKeeper().saw(job, probe("  400/469 [====>.] - loss: 0.4", "Epoch 5/8"), 130.0)
    again = JobState.from_json(job.to_json())
    assert again.progress == job.progress and again.progress_attempt == 1
    ProgressKeeper().saw(again, probe("  3/469 [....] - loss: 0.4"), 140.0)
    assert again.progress is not None
    assert again.progress["fraction"] == pytest.approx((5 + 3 / 469) / 8)


def test_a_new_attempt_starts_over_and_the_command_gives_the_total() -> None:
    keeper, job = ProgressKeeper(), running("python train.py --max_epochs 8")
    keeper.saw(job, probe("Epoch 3:  40%|████  | 20/50 [00:10<00:12, v_num=0]"), 130.0)
    assert job.progress is not None
    assert job.progress["fraction"] == pytest.approx(3.4 / 8)
    job.attempts = 2
    assert keeper.saw(job, probe(""), 200.0)  # the old attempt's progress goes at once
    assert job.progress is None
    keeper.saw(job, probe("Epoch 0:  10%|█     | 5/50 [00:10<00:12, v_num=0]"), 210.0)
    assert job.progress is not None and job.progress["fraction"] == pytest.approx(0.1 / 8)
    assert job.progress_attempt == 2


def test_an_old_state_file_without_progress_loads() -> None:
    data = running().to_json()
    del data["progress"], data["progress_attempt"]
    job = JobState.from_json(data)
    assert job.progress is None and job.progress_attempt == 0
