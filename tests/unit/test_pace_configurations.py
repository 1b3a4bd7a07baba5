"""Issue 41: `slow` only beside the seeds of the same configuration, and a dated ETA (the
fraction of a line an epoch old is not divided by the time since)."""

from __future__ import annotations

from typing import Any

import pytest

from eq_tui.api.job_progress import JobProgress
from eq_tui.present.pace import PaceBook, sibling_key

NOW = 100_000.0


def grid_job(job_id: str, params: dict[str, str], elapsed: float, epochs_done: float,
             *, status: str = "running", epochs: int = 10) -> dict[str, Any]:
    """A record as the engine publishes it: its progress `at` now."""
    cmd = " ".join(["python train.py", *(f"--{k} {v}" for k, v in params.items())])
    progress = {"fraction": epochs_done / epochs, "at": NOW, "unit": "epoch",
                "total": float(epochs), "source": ""}
    return {"id": job_id, "status": status, "phase": "train", "cmd": cmd, "params": params,
            "started": NOW - elapsed, "ended": None, "last_line": "", "progress": progress}


def book_of(jobs: dict[str, dict[str, Any]], group_over: str = "seed") -> PaceBook:
    book = PaceBook()
    for key, job in jobs.items():
        book.update(key, "p/train", job, group_over)
    return book


def test_a_grid_value_four_times_slower_per_epoch_is_not_slow() -> None:
    # `--width {small,large}` x 3 seeds: large takes 4x as long per epoch
    jobs = {}
    for seed in "123":
        jobs[f"small_s{seed}"] = grid_job(f"small_s{seed}", {"width": "small", "seed": seed},
                                          elapsed=400, epochs_done=4)
        jobs[f"large_s{seed}"] = grid_job(f"large_s{seed}", {"width": "large", "seed": seed},
                                          elapsed=400, epochs_done=1)
    book = book_of(jobs)
    for key in jobs:
        pace = book.pace(key, NOW)
        assert pace is not None and pace.siblings == 2 and not pace.slow, key


def test_a_genuinely_slow_seed_of_a_configuration_is_slow() -> None:
    jobs = {f"s{seed}": grid_job(f"s{seed}", {"width": "small", "seed": seed},
                                 elapsed=400, epochs_done=4) for seed in "12"}
    jobs["s3"] = grid_job("s3", {"width": "small", "seed": "3"}, elapsed=400, epochs_done=1)
    book = book_of(jobs)
    slow = book.pace("s3", NOW)
    assert slow is not None and slow.slow and slow.siblings == 2
    assert not any(book.pace(key, NOW).slow for key in ("s1", "s2"))  # type: ignore[union-attr]


def test_a_job_with_no_seed_of_its_configuration_is_never_slow() -> None:
    jobs = {"a": grid_job("a", {"lr": "0.1"}, elapsed=400, epochs_done=4),
            "b": grid_job("b", {"lr": "0.01"}, elapsed=400, epochs_done=4),
            "c": grid_job("c", {"lr": "0.001"}, elapsed=400, epochs_done=0.5)}
    pace = book_of(jobs).pace("c", NOW)
    assert pace is not None and pace.siblings == 0 and not pace.slow


def test_the_phases_group_over_names_the_seed_key() -> None:
    jobs = {f"r{n}": grid_job(f"r{n}", {"model": "m", "replica": str(n)}, elapsed=400,
                              epochs_done=4 if n else 1) for n in range(3)}
    assert not book_of(jobs).pace("r0", NOW).slow  # type: ignore[union-attr]
    assert book_of(jobs, "replica").pace("r0", NOW).slow  # type: ignore[union-attr]


def test_without_a_grid_the_command_differs_only_in_its_seed() -> None:
    def key(cmd: str, job_id: str = "j") -> str:
        return sibling_key({"cmd": cmd, "id": job_id})

    assert key("train.py --lr 0.1 --seed 1", "a") == key("train.py --lr 0.1 --seed 2", "b")
    assert key("train.py --seed=1 --out runs/a", "a") == key("train.py --seed=2 --out runs/b",
                                                             "b")
    assert key("train.py --lr 0.1 --seed 1") != key("train.py --lr 0.01 --seed 1")
    assert key("train.py --epochs 2 --seed 1") != key("train.py --epochs 60 --seed 2")


def steady_job(book: PaceBook, *, startup: float, epoch_s: float, epochs: int, poll: float,
               started: float = 0.0) -> list[tuple[float, float, float | None, float | None]]:
    """A job that prints `epoch k/N loss=...` at the end of each epoch, probed every `poll`
    seconds; (true fraction, true remaining, ETA, undated ETA) at each probe: the undated one
    divides the time since the start by a fraction as old as its line, as before issue 41."""
    total = startup + epochs * epoch_s
    tracker = JobProgress()
    seen = []
    now = started + poll
    while now < started + total:
        done = int(max(0.0, now - started - startup) // epoch_s)
        if done:
            tracker.observe(f"epoch {done}/{epochs} loss=0.41", now)
        record = {"id": "j", "status": "running", "phase": "train", "cmd": "train.py",
                  "started": started, "ended": None, "last_line": "",
                  "progress": tracker.to_json()}
        book.update("j", "p/train", record)
        pace = book.pace("j", now)
        truth = (now - started) / total
        undated = pace.elapsed_s * (1 - pace.fraction) / pace.fraction \
            if pace and pace.fraction else None
        seen.append((truth, started + total - now, pace.remaining_s if pace else None, undated))
        now += poll
    return seen


def test_the_first_eta_from_20_percent_done_is_within_25_percent_of_the_truth() -> None:
    seen = steady_job(PaceBook(), startup=2.0, epoch_s=10.0, epochs=10, poll=3.0)
    first = next((truth, remaining, eta) for truth, remaining, eta, _ in seen
                 if truth >= 0.2 and eta is not None)
    _, remaining, eta = first
    assert eta == pytest.approx(remaining, rel=0.25)
    for truth, remaining, eta, _ in seen:  # and every later one, while there is much left
        if 0.2 <= truth <= 0.8:
            assert eta is not None
            assert eta == pytest.approx(remaining, rel=0.25), (truth, remaining, eta)
    # undated, a fraction an epoch old is far off
    assert any(undated is not None and undated > 1.5 * remaining
               for truth, remaining, _, undated in seen if 0.2 <= truth <= 0.8)


def test_a_record_without_published_progress_reads_its_last_line() -> None:
    book = PaceBook()
    book.update("j", "g", {"status": "running", "started": NOW - 100, "cmd": "t",
                           "last_line": "epoch 5/10"})
    assert book.pace("j", NOW).fraction == 0.5  # type: ignore[union-attr]
    # an engine that publishes progress and has none yet: no fraction, not the line's
    book.update("j", "g", {"status": "running", "started": NOW - 100, "cmd": "t",
                           "last_line": "58/469 [==>....]", "progress": None})
    assert book.pace("j", NOW) is None
