"""The ETA figure (issue 41): how far off the first ETA is once a job is 20 % done, on a steady
simulated sweep, with the progress published as the engine keeps it (api/job_progress.py fed
what each probe sees, dated by the probe) and the pace of present/pace.py.

    .venv/bin/python bench/eta.py [--quick]

The sweep: 16 jobs on 4 GPUs, each 3 s of start-up and 8 epochs of 7 s; half print Keras's
`Epoch k/8` and its bar (the probe sees the epoch line and the bar at that moment), half one
`epoch k/8 loss=...` line at the end of each epoch (a line up to an epoch old). Probed every
2 s (the default poll), each job at its own offset. Figures: the header's ETA of the whole sweep
once a fifth of it has run, its error against the truth (target <= 25 %), and the same with
the undated ETA the front ends had before (time since the start over a fraction as old as its
line); each job's first ETA from 20 % done (its progress column), the median and the worst
job. The worst job's is mostly the probe's lag: a line written just after a probe is dated by
the next one, up to a poll late, on a job 7.5 s into its run."""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from eq_tui.api.job_progress import JobProgress
from eq_tui.present.pace import PaceBook
from eq_tui.present.queue_eta import estimate_eta

GROUP = "bench/train"


@dataclass
class Job:
    key: str
    keras: bool
    started: float
    startup: float
    epoch_s: float
    epochs: int
    offset: float  # when, within a poll, its probe looks
    tracker: JobProgress

    @property
    def length(self) -> float:
        return self.startup + self.epochs * self.epoch_s

    def lines(self, now: float) -> list[str]:
        """What a probe sees at `now`: the epoch line and the last line."""
        ran = now - self.started - self.startup
        if ran < 0:
            return ["loading the data"]
        if self.keras:
            epoch = min(self.epochs, int(ran // self.epoch_s) + 1)
            step = min(469, int((ran - (epoch - 1) * self.epoch_s) / self.epoch_s * 469))
            return [f"Epoch {epoch}/{self.epochs}",
                    f"{step:>4}/469 [==>...........] - ETA: 3s - loss: 0.41"]
        done = min(self.epochs, int(ran // self.epoch_s))
        return [f"epoch {done}/{self.epochs} loss=0.41"] if done else ["loading the data"]

    def record(self, now: float) -> dict[str, Any]:
        ended = self.started + self.length <= now
        return {"id": self.key, "status": "completed" if ended else "running",
                "phase": "train", "cmd": "python train.py --seed 1", "params": {},
                "started": self.started, "ended": self.started + self.length if ended else None,
                "last_line": "", "progress": self.tracker.to_json()}


def run(quick: bool = False, *, jobs: int = 16, slots: int = 4, poll: float = 2.0,
        seed: int = 0) -> dict[str, Any]:
    rng = random.Random(seed)
    epoch_s, epochs, startup = (3.0, 6, 0.5) if quick else (7.0, 8, 0.5)
    queue = [f"j{n:02d}" for n in range(jobs)]
    live: dict[str, Job] = {}
    done: list[Job] = []
    book = PaceBook()
    first: dict[str, tuple[float, float, float]] = {}  # key -> truth left, eta, undated eta
    sweeps: list[tuple[float, float | None, float | None]] = []  # now, dated, undated ETA
    now = 0.0
    step = 0.05
    probed: dict[str, float] = {}
    while queue or live:
        for key, job in list(live.items()):
            if job.started + job.length <= now:
                book.update(key, GROUP, job.record(now))
                done.append(job)
                del live[key]
        while queue and len(live) < slots:
            key = queue.pop(0)
            live[key] = Job(key, keras=len(queue) % 2 == 0, started=now, startup=startup,
                            epoch_s=epoch_s, epochs=epochs, offset=rng.uniform(0, poll),
                            tracker=JobProgress())
        for key, job in live.items():
            last = probed.get(key, job.started + job.offset - poll)
            if now - last < poll:
                continue
            probed[key] = now
            for line in job.lines(now):
                job.tracker.observe(line, now)
            book.update(key, GROUP, job.record(now))
            truth_done = (now - job.started) / job.length
            pace = book.pace(key, now)
            if key not in first and truth_done >= 0.2 and pace and pace.remaining_s is not None:
                undated = pace.elapsed_s * (1 - pace.fraction) / pace.fraction
                first[key] = (job.started + job.length - now, pace.remaining_s, undated)
        if not sweeps or now - sweeps[-1][0] >= 0.5:
            waiting = {GROUP: len(queue)}
            means, _ = book.mean_durations()
            dated = list(book.dated(now))
            sweeps.append((now, estimate_eta(dated, waiting, means),
                           estimate_eta([item[:3] for item in dated], waiting, means)))
        now = round(now + step, 6)
    makespan = max(job.started + job.length for job in done)
    at, sweep_eta, sweep_undated = next(s for s in sweeps if s[0] >= 0.2 * makespan)
    left = makespan - at
    errors = [abs(eta - truth) / truth for truth, eta, _ in first.values()]
    undated = [abs(old - truth) / truth for truth, _, old in first.values()]
    return {"jobs": jobs, "slots": slots, "poll_s": poll, "makespan_s": round(makespan, 2),
            "sweep_eta_error_pct": _pct(sweep_eta, left),
            "undated_sweep_eta_error_pct": _pct(sweep_undated, left),
            "job_first_eta_error_median_pct": round(100 * statistics.median(errors), 1),
            "job_first_eta_error_worst_pct": round(100 * max(errors), 1),
            "undated_job_first_eta_error_median_pct": round(100 * statistics.median(undated), 1)}


def _pct(eta: float | None, truth: float) -> float | None:
    return round(100 * abs(eta - truth) / truth, 1) if eta is not None else None


def describe(result: dict[str, Any]) -> str:
    return (f"the sweep's ETA at a fifth of it: {result['sweep_eta_error_pct']} % off "
            f"(undated, as before: {result['undated_sweep_eta_error_pct']} %); each job's "
            f"first ETA from 20 % done: median {result['job_first_eta_error_median_pct']} % off,"
            f" worst {result['job_first_eta_error_worst_pct']} % (undated median "
            f"{result['undated_job_first_eta_error_median_pct']} %)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    result = run(args.quick)
    print(describe(result))
    print(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
