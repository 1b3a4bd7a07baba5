"""A running job's pace: ETA from its progress, and slow beside its phase siblings."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from eq_tui.present.pace import Pace, PaceBook

NOW = 100_000.0
HOUR = 3600.0


def running(elapsed: float, line: str, phase: str = "train") -> dict[str, Any]:
    return {"status": "running", "phase": phase, "started": NOW - elapsed, "ended": None,
            "last_line": line}


def completed(duration: float, phase: str = "train") -> dict[str, Any]:
    return {"status": "completed", "phase": phase, "started": NOW - 2 * duration,
            "ended": NOW - duration, "last_line": "epoch 10/10"}


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


def test_a_job_three_times_slower_than_its_completed_siblings_is_slow() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=completed(1.2 * HOUR),
                   slow=running(HOUR, "epoch 1/5"), fine=running(HOUR, "epoch 1/2"))
    slow, fine = pace_of(book, "slow"), pace_of(book, "fine")
    assert slow.projected_s == pytest.approx(5 * HOUR)
    # its siblings: three completed and the other running job's 2 h projection
    assert slow.siblings == 4 and slow.siblings_median_s == pytest.approx(1.1 * HOUR)
    assert slow.slow
    assert fine.projected_s == pytest.approx(2 * HOUR) and not fine.slow


def test_running_siblings_count_with_their_projections_and_a_job_never_with_its_own() -> None:
    book = book_of(a=running(HOUR, "epoch 5/5"), b=running(HOUR, "step 50/50"),
                   c=running(HOUR, "epoch 1/4"))
    c, a = pace_of(book, "c"), pace_of(book, "a")
    assert (c.siblings, c.siblings_median_s) == (2, pytest.approx(HOUR)) and c.slow
    assert a.siblings_median_s == pytest.approx(2.5 * HOUR) and not a.slow


def test_three_times_the_median_exactly_is_not_slow() -> None:
    book = book_of(a=completed(HOUR), b=completed(HOUR), c=running(HOUR, "epoch 1/3"))
    pace = pace_of(book, "c")
    assert pace.projected_s == pytest.approx(3 * HOUR)
    assert not pace.slow


def test_fewer_than_two_siblings_with_a_figure_is_never_slow() -> None:
    book = book_of(a=completed(HOUR), quiet=running(HOUR, "loading data"),
                   other_phase=completed(HOUR, phase="eval"), c=running(HOUR, "epoch 1/100"))
    pace = pace_of(book, "c")
    assert pace.projected_s == pytest.approx(100 * HOUR)
    assert pace.siblings == 1 and pace.siblings_median_s is None and not pace.slow


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
    book.update("c", "train", running(HOUR, "epoch 2/5"))  # a new line, parsed once
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
                 siblings_median_s=600, siblings=4)
    assert not early.slow  # 1 % after 30 s of start-up says little yet
    assert replace(early, fraction=0.1, elapsed_s=300, projected_s=3000).slow
    assert replace(early, elapsed_s=600, projected_s=60000).slow  # as long as its siblings
