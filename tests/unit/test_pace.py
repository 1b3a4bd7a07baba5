"""A running job's pace: ETA from its progress, and slow only beside jobs like it (its phase,
its command template, the same unit), by units per second."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from eq_tui.present.pace import Pace, PaceBook, command_template

NOW = 100_000.0
HOUR = 3600.0


def running(elapsed: float, line: str, phase: str = "train",
            cmd: str = "python train.py") -> dict[str, Any]:
    return {"status": "running", "phase": phase, "started": NOW - elapsed, "ended": None,
            "last_line": line, "cmd": cmd}


def completed(duration: float, phase: str = "train", line: str = "epoch 10/10",
              cmd: str = "python train.py") -> dict[str, Any]:
    return {"status": "completed", "phase": phase, "started": NOW - 2 * duration,
            "ended": NOW - duration, "last_line": line, "cmd": cmd}


def pace_of(book: PaceBook, key: str, now: float = NOW) -> Pace:
    pace = book.pace(key, now)
    assert pace is not None, key
    return pace


def book_of(**jobs: dict[str, Any]) -> PaceBook:
    book = PaceBook()
    for key, job in jobs.items():
        book.update(key, job["phase"], job)
    return book


def test_remaining_and_projected_time_come_from_elapsed_and_the_fraction() -> None:
    pace = pace_of(book_of(j=running(HOUR, "epoch 3/12")), "j")
    assert (pace.fraction, pace.elapsed_s) == (0.25, HOUR)
    assert pace.remaining_s == pytest.approx(3 * HOUR)
    assert pace.projected_s == pytest.approx(4 * HOUR)
    assert (pace.unit, pace.total, pace.rate) == ("epoch", 12, pytest.approx(3 / HOUR))


def test_long_jobs_at_their_siblings_epochs_per_second_are_not_slow() -> None:
    # issue 33: twelve two-epoch jobs and three sixty-epoch ones in one phase, every one at
    # one epoch per 10 minutes: the long ones are 30 times as long, not slower. Issue 41: a
    # job's siblings are the seeds of its configuration (its command differs only in
    # `--seed`), so the long ones are compared with each other, never with the short ones
    cmd = "fake-train --epochs {} --seed {}"
    jobs = {f"short{n}": completed(1200, line="epoch 2/2", cmd=cmd.format(2, n))
            for n in range(10)}
    jobs |= {f"short_run{n}": running(600, "epoch 1/2", cmd=cmd.format(2, 10 + n))
             for n in range(2)}
    jobs |= {f"long{n}": running(HOUR, "epoch 6/60", cmd=cmd.format(60, n)) for n in range(3)}
    book = book_of(**jobs)
    for key in ("long0", "long1", "long2"):
        pace = pace_of(book, key)
        assert pace.projected_s == pytest.approx(10 * HOUR)  # 30 x the short ones' 20 min
        assert pace.rate == pytest.approx(pace.siblings_rate)
        assert pace.siblings == 2 and not pace.slow
    assert pace_of(book, "short_run0").siblings == 11
    # the same long job at a third of its seeds' pace is slow
    book.update("long0", "train", running(3 * HOUR, "epoch 3/60", cmd=cmd.format(60, 0)))
    assert pace_of(book, "long0").slow


def test_a_job_three_times_slower_than_its_siblings_rate_is_slow() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=completed(1.2 * HOUR),
                   slow=running(HOUR, "epoch 1/5"), fine=running(HOUR, "epoch 4/10"))
    slow, fine = pace_of(book, "slow"), pace_of(book, "fine")
    assert slow.rate == pytest.approx(1 / HOUR)
    # its siblings: three completed (10 epochs in 1, 1 and 1.2 h) and the other running job
    assert slow.siblings == 4
    assert slow.siblings_rate == pytest.approx((10 / 1.2 + 10) / 2 / HOUR)
    assert slow.slow
    assert fine.rate == pytest.approx(4 / HOUR) and not fine.slow


def test_only_the_same_unit_phase_and_command_template_are_siblings() -> None:
    book = book_of(a=completed(HOUR, line="step 100/100"), b=completed(HOUR, line="step 50/50"),
                   other_cmd=completed(0.1 * HOUR, cmd="python distill.py"),
                   other_cmd2=completed(0.1 * HOUR, cmd="python distill.py"),
                   other_phase=completed(0.1 * HOUR, phase="eval"),
                   other_phase2=completed(0.1 * HOUR, phase="eval"),
                   c=running(HOUR, "epoch 1/10"))
    pace = pace_of(book, "c")
    assert pace.siblings == 0 and pace.siblings_rate is None and not pace.slow
    book.update("d", "train", completed(0.1 * HOUR))
    book.update("e", "train", completed(0.1 * HOUR))
    assert pace_of(book, "c").siblings == 2 and pace_of(book, "c").slow


def test_a_percentage_alone_counts_nothing_and_is_compared_with_no_one() -> None:
    book = book_of(a=completed(HOUR, line="100% done"), b=completed(HOUR, line="100% done"),
                   c=running(HOUR, "10% done"))
    pace = pace_of(book, "c")
    assert pace.projected_s == pytest.approx(10 * HOUR) and pace.unit is None
    assert pace.siblings == 0 and not pace.slow


def test_three_times_slower_exactly_is_not_slow() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=running(3 * HOUR, "epoch 10/30"))
    pace = pace_of(book, "c")
    assert pace.rate * 3 == pace.siblings_rate
    assert not pace.slow


def test_fewer_than_two_siblings_with_a_rate_is_never_slow() -> None:
    book = book_of(a=completed(HOUR), quiet=running(HOUR, "loading data"),
                   no_total=completed(HOUR, line="saved"), c=running(HOUR, "epoch 1/100"))
    pace = pace_of(book, "c")
    assert pace.siblings == 1 and pace.siblings_rate is None and not pace.slow


def test_a_completed_job_keeps_the_total_it_printed_while_it_ran() -> None:
    book = PaceBook()
    for key in ("a", "b"):
        book.update(key, "train", running(HOUR / 2, "epoch 5/10"))
        book.update(key, "train", completed(HOUR, line="saving the checkpoint"))
    book.update("c", "train", running(HOUR, "epoch 1/10"))
    pace = pace_of(book, "c")
    assert pace.siblings == 2 and pace.siblings_rate == pytest.approx(10 / HOUR)
    assert pace.slow


def test_no_progress_yet_gives_no_eta_and_no_flag() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=running(HOUR, "epoch 0/10"))
    pace = pace_of(book, "c")
    assert pace.fraction == 0
    assert pace.remaining_s is None and pace.projected_s is None and not pace.slow
    assert pace.siblings == 2


def test_a_job_that_prints_no_progress_or_does_not_run_has_no_pace() -> None:
    book = book_of(a=completed(HOUR), b=running(HOUR, "loss=0.41 lr=1/3"),
                   c={"status": "pending", "phase": "train", "started": None})
    assert book.pace("a", NOW) is None and book.pace("b", NOW) is None
    assert book.pace("c", NOW) is None and book.pace("unknown", NOW) is None


def test_the_book_follows_each_record_as_it_changes() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=running(HOUR, "epoch 1/5"))
    assert pace_of(book, "c").slow
    book.update("c", "train", running(HOUR, "epoch 4/10"))  # a new line, parsed once
    assert not pace_of(book, "c").slow
    book.update("b", "train", None)  # retired: one sibling left
    assert pace_of(book, "c").siblings == 1
    book.update("c", "train", completed(2.5 * HOUR))
    assert book.pace("c", NOW) is None
    assert book.mean_durations() == ({"train": pytest.approx(1.75 * HOUR)},
                                     pytest.approx(1.75 * HOUR))
    assert list(book.running()) == []
    # the clock moves on: a projection grows with it
    book.update("d", "train", running(HOUR, "epoch 1/2"))
    assert pace_of(book, "d").projected_s == pytest.approx(2 * HOUR)
    assert pace_of(book, "d", NOW + HOUR).projected_s == pytest.approx(4 * HOUR)


def test_a_job_just_started_is_not_called_slow_on_its_first_percent() -> None:
    early = Pace(fraction=0.01, elapsed_s=30, remaining_s=2970, projected_s=3000,
                 unit="step", total=1000, rate=10 / 30, siblings_rate=1000 / 600, siblings=4)
    assert not early.slow  # 1 % after 30 s of start-up says little yet
    assert replace(early, fraction=0.1, elapsed_s=300, rate=100 / 300).slow
    # as long as a quarter of its whole run takes at its siblings' rate
    assert not replace(early, elapsed_s=149, rate=10 / 149).slow
    assert replace(early, elapsed_s=150, rate=10 / 150).slow


def test_the_template_masks_grid_values_the_id_and_numbers() -> None:
    def template(cmd: str, **params: str) -> str:
        return command_template({"cmd": cmd, "id": "tr_s1", "params": params})

    assert template("fake-train --epochs 60 --seed 2") == "fake-train --epochs # --seed #"
    assert template("python t.py --out runs/tr_s1 --model resnet", model="resnet") \
        == "python t.py --out runs/{id} --model {model}"
    assert template("python t.py --data cifar10") != template("python t.py --data imagenet")
    assert command_template({"cmd": "fake-train --id r", "id": "r"}) == "fake-train --id {id}"
