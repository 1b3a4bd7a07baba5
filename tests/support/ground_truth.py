"""What ran, as the hosts recorded it: the fake jobs' own runs.jsonl, never the engine's history.

A "launch" here is a fake-train process that reached its GPU: a `start` record (it claimed its
memory) or an `oom` record (it tried and was refused) — not an `oom` during its ramp, which
follows that process's own `start`. Tests that promise "nothing launched twice" count these.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Container, Iterable
from pathlib import Path

from eq_tui.sim.state import find_overlaps, read_runs

LAUNCH_EVENTS = ("start", "oom")


def launches(state_dirs: Iterable[Path], *, since: float = 0.0,
             jobs: Container[str] | None = None) -> Counter[tuple[str, int]]:
    """(job, attempt) -> how many processes of it reached a GPU on any of the hosts, counting
    records written at or after `since` (a module-scoped bed keeps earlier tests' records)."""
    counts: Counter[tuple[str, int]] = Counter()
    for state_dir in state_dirs:
        for record in read_runs(state_dir):
            if record.get("event") not in LAUNCH_EVENTS or float(record["t"]) < since \
                    or record.get("during") == "ramp":
                continue
            job = str(record.get("job"))
            if jobs is None or job in jobs:
                counts[(job, int(record.get("attempt", 0)))] += 1
    return counts


def launches_per_job(state_dirs: Iterable[Path], *, since: float = 0.0,
                     jobs: Container[str] | None = None) -> Counter[str]:
    counts: Counter[str] = Counter()
    for (job, _attempt), n in launches(state_dirs, since=since, jobs=jobs).items():
        counts[job] += n
    return counts


def exits(state_dirs: Iterable[Path], *, since: float = 0.0) -> dict[str, list[int | None]]:
    """job -> the exit codes its processes recorded, in order."""
    found: dict[str, list[int | None]] = {}
    for state_dir in state_dirs:
        for record in read_runs(state_dir):
            if record.get("event") == "end" and float(record["t"]) >= since:
                found.setdefault(str(record.get("job")), []).append(record.get("exit"))
    return found


def overlaps(state_dir: Path) -> list[str]:
    """Starts on a GPU whose previous holder's memory had not been released yet."""
    return [f"{a.job}/a{a.attempt} then {b.job}/a{b.attempt} on GPU {a.gpu}"
            for a, b in find_overlaps(read_runs(state_dir), include_linger=True)]


def most_overlapping(spans: Iterable[tuple[float, float]]) -> int:
    """The most (start, end) spans open at one moment: a sweep over their edges (an end and a
    start at the same instant do not overlap)."""
    edges = sorted(edge for start, end in spans for edge in ((start, 1), (end, -1)))
    most = now = 0
    for _, step in edges:
        now += step
        most = max(most, now)
    return most


def gpu_seconds(state_dirs: Iterable[Path], *, since: float = 0.0) -> dict[str, float]:
    """job -> the GPU-seconds its processes held, as they recorded them: each process's start
    to its end, times its GPUs (what the GPUs were really busy with, not the engine's view)."""
    used: dict[str, float] = {}
    for state_dir in state_dirs:
        started: dict[tuple[str, int], float] = {}
        for record in read_runs(state_dir):
            if float(record["t"]) < since:
                continue
            key = (str(record.get("job")), int(record.get("pid", 0)))
            if record.get("event") == "start":
                started[key] = float(record["t"])
            elif record.get("event") == "end" and key in started:
                gpus = len(record.get("gpus") or [record.get("gpu")])
                used[key[0]] = used.get(key[0], 0.0) + \
                    (float(record["t"]) - started.pop(key)) * gpus
    return used
