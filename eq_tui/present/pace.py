"""A running job's pace: how far it is, when it should end, and whether it is slow beside the
jobs like it. Pure (no I/O, no UI toolkit), for any front end: `PaceBook` is told each job
record as it changes and answers `pace(key, now)`.

A job's progress is the engine's (the record's `progress`: the whole job's fraction, `at` when
that fraction was first seen, its unit and total; api/job_progress.py); a record from an engine
that publishes none is read from its last line (`progress_line.py`). The pace is dated: a job
that had come f of the way e_f = at - started seconds into its run goes at f / e_f, so it has
e_f (1 - f) / f - (now - at) left, and a projected total of e_f / f — a fraction read from a
line an epoch old is not divided by the time since.

Slow compares like with like: units per second (epochs, steps, a bar's items) of the jobs of its
phase of the same configuration — whose parameters differ only in the phase's `group_over` key
(the seed; a job not from a grid: whose command differs only in its `--seed`) — and the same
command template, counting the same unit. A grid value that makes a job four times as long
per epoch is another configuration, never a slow sibling, and a job with no sibling of its
configuration is never slow. A job is slow when its rate is less than its siblings' median
rate / SLOW_FACTOR — the completed ones' (their total over their duration) and the other
running ones' —, at least MIN_SIBLINGS siblings have a rate, and its own rate has something to
stand on: it has come MIN_FRACTION of the way, or run as long as WARM_SHARE of its whole run
takes at its siblings' rate (a job's first percent mostly measures its start-up). A job that
prints only a percentage counts nothing and is compared with no one. Slow is shown, never acted
on.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from eq_tui.api.progress_line import Reading, progress_reading
from eq_tui.results.group import configuration

SLOW_FACTOR = 3.0
MIN_SIBLINGS = 2
MIN_FRACTION = 0.1
WARM_SHARE = 0.25
ACTIVE_STATUSES = frozenset({"running", "launching"})

DEFAULT_GROUP_OVER = "seed"

Kind = tuple[str, str, str]  # group (project and phase), configuration and template, unit


@dataclass(frozen=True)
class Pace:
    fraction: float
    elapsed_s: float
    remaining_s: float | None  # None until it has made some progress
    projected_s: float | None  # elapsed / fraction: its whole run at this pace
    unit: str | None = None  # what its progress counts (None: a percentage alone)
    total: float | None = None  # how many of them its whole run has
    rate: float | None = None  # units per second so far
    siblings_rate: float | None = None  # their median; None with fewer than MIN_SIBLINGS
    siblings: int = 0  # siblings (same phase, template and unit) with a rate

    @property
    def slow(self) -> bool:
        median, rate, total = self.siblings_rate, self.rate, self.total
        if rate is None or not median or total is None:
            return False
        warm = self.fraction >= MIN_FRACTION or self.elapsed_s >= WARM_SHARE * total / median
        return rate * SLOW_FACTOR < median and warm


def completed_duration(job: Mapping[str, Any]) -> float | None:
    """How long a completed job ran (its last attempt); None for any other job."""
    started, ended = job.get("started"), job.get("ended")
    if job.get("status") != "completed" or started is None or ended is None:
        return None
    return float(ended) - float(started)


_NUMBER = re.compile(r"(?<![\w.])[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])")


def sibling_key(job: Mapping[str, Any], group_over: str = DEFAULT_GROUP_OVER) -> str:
    """What a job shares with the seeds of its configuration: its parameters less `group_over`
    and its command template; a job not from a grid, its command with its id and its
    `group_over` option's value masked (`train.py --lr 0.1 --seed 3` -> `train.py --lr 0.1
    --seed {seed}`)."""
    params = job.get("params") or {}
    if params:
        config = configuration(params, str(job.get("id") or ""), group_over)
        return "&".join(f"{k}={v}" for k, v in sorted(config.items())) + "\0" + \
            command_template(job)
    cmd = str(job.get("cmd") or "")
    job_id = str(job.get("id") or "")
    if job_id:
        cmd = re.sub(rf"(?<![\w-]){re.escape(job_id)}(?![\w-])", "{id}", cmd)
    key = re.escape(group_over)
    return re.sub(rf"((?<![\w-])(?:--?)?{key}(?:=|\s+))[^\s]+", rf"\1{{{group_over}}}", cmd)


def command_template(job: Mapping[str, Any]) -> str:
    """A job's command with what tells it from its siblings masked: its grid values, its id
    and every number (`fake-train --epochs 60 --seed 2` -> `fake-train --epochs # --seed #`)."""
    cmd = str(job.get("cmd") or "")
    words = {str(job.get("id") or ""): "id"}
    words |= {str(value): str(key) for key, value in (job.get("params") or {}).items()}
    for word, name in words.items():
        if word:  # as a whole word: an id `r` is no letter of `train`
            cmd = re.sub(rf"(?<![\w-]){re.escape(word)}(?![\w-])", f"{{{name}}}", cmd)
    return _NUMBER.sub("#", cmd)


class _Running:
    __slots__ = ("at", "group", "line", "progress", "reading", "started", "template")

    def __init__(self, group: str, template: str, started: float | None, line: str,
                 progress: Any = False) -> None:
        self.group, self.template, self.started = group, template, started
        self.line, self.progress = line, progress
        self.reading, self.at = _reading(line, progress, started)

    @property
    def fraction(self) -> float | None:
        return self.reading.fraction if self.reading is not None else None

    @property
    def kind(self) -> Kind | None:
        reading = self.reading
        if reading is None or reading.unit is None:
            return None
        return self.group, self.template, reading.unit

    def dated(self, now: float) -> float | None:
        """How long it had run when its fraction was seen (None: not started)."""
        if self.started is None:
            return None
        return (self.at if self.at is not None else now) - self.started

    def rate(self, now: float) -> float | None:
        done = self.reading.done if self.reading is not None else None
        dated = self.dated(now)
        if not done or dated is None or dated <= 0:
            return None
        return done / dated


_UNPUBLISHED = False  # a record from an engine that publishes no progress: read its last line


def _reading(line: str, progress: Any, started: float | None
             ) -> tuple[Reading | None, float | None]:
    """A job's progress and when it was seen: the engine's when it publishes one, else its
    last line's (seen now)."""
    if progress is _UNPUBLISHED:
        return progress_reading(line), None
    if not isinstance(progress, Mapping) or progress.get("fraction") is None:
        return None, None
    at = progress.get("at")
    at = float(at) if at is not None else None
    if at is not None and started is not None and at < started:
        return None, None  # an earlier attempt's
    total = progress.get("total")
    unit = progress.get("unit")
    return Reading(float(progress["fraction"]), str(unit) if unit else None,
                   float(total) if total is not None and unit else None), at


def _published(job: Mapping[str, Any]) -> Any:
    return job.get("progress") if "progress" in job else _UNPUBLISHED


class PaceBook:
    """The figures of every job, kept as records change: each running job's progress (its
    last line parsed once per change), the completed durations of each group (a phase) sorted,
    the completed jobs' rates by kind, and — computed once per change and clock reading — the
    rates of the running ones."""

    def __init__(self) -> None:
        self._running: dict[str, _Running] = {}
        self._kind_running: dict[Kind, set[str]] = {}
        self._last: dict[str, tuple[Kind, float]] = {}  # a running job's last kind and total
        self._done: dict[str, tuple[str, float]] = {}  # key -> group, duration
        self._done_sums: dict[str, tuple[float, int]] = {}
        self._done_rate: dict[str, tuple[Kind, float]] = {}
        self._done_rates: dict[Kind, list[float]] = {}
        self._version = 0
        self._rates_at: tuple[int, float] | None = None
        self._rates: dict[Kind, tuple[list[float], dict[str, float]]] = {}

    def update(self, key: str, group: str, job: Mapping[str, Any] | None,
               group_over: str = DEFAULT_GROUP_OVER) -> None:
        """Take in a job's latest record (None: it is gone); `group_over`: the key its phase's
        seeds differ in (the manifest's `results.group_over`)."""
        self._update_running(key, group, job, group_over)
        duration = completed_duration(job) if job is not None else None
        done = (group, duration) if duration is not None else None
        if self._done.get(key) != done:
            self._count_done(key, done)
            self._version += 1
        rate = self._completed_rate(key, group, job, duration, group_over) \
            if job is not None else None
        if self._done_rate.get(key) != rate:
            self._count_rate(key, rate)
            self._version += 1
        if job is None or duration is not None or job.get("status") not in ACTIVE_STATUSES:
            self._last.pop(key, None)

    def _completed_rate(self, key: str, group: str, job: Mapping[str, Any],
                        duration: float | None, group_over: str) -> tuple[Kind, float] | None:
        """A completed job's rate: the total of its last line (else of the last one it printed
        while it ran) over its duration."""
        if duration is None or duration <= 0:
            return None
        reading, _ = _reading(str(job.get("last_line") or ""), _published(job), None)
        if reading is not None and reading.unit is not None and reading.total is not None:
            return (group, sibling_key(job, group_over), reading.unit), reading.total / duration
        last = self._last.get(key)
        return (last[0], last[1] / duration) if last is not None else None

    def _update_running(self, key: str, group: str, job: Mapping[str, Any] | None,
                        group_over: str) -> None:
        entry = self._running.get(key)
        if job is None or job.get("status") not in ACTIVE_STATUSES:
            if entry is not None:
                self._forget_running(key, entry)
            return
        started = job.get("started")
        started = float(started) if started is not None else None
        line = str(job.get("last_line") or "")
        progress = _published(job)
        template = sibling_key(job, group_over)
        if entry is not None and (entry.group, entry.template) == (group, template):
            if (entry.line, entry.progress, entry.started) != (line, progress, started):
                # a new line or progress: read once, here
                old_kind, old = entry.kind, (entry.reading, entry.at, entry.started)
                entry.reading, entry.at = _reading(line, progress, started)
                entry.line, entry.progress, entry.started = line, progress, started
                self._rekind(key, old_kind, entry.kind)
                if old != (entry.reading, entry.at, entry.started):
                    self._version += 1
        else:
            if entry is not None:
                self._forget_running(key, entry)
            entry = self._running[key] = _Running(group, template, started, line, progress)
            self._rekind(key, None, entry.kind)
            self._version += 1
        kind, reading = entry.kind, entry.reading
        if kind is not None and reading is not None and reading.total is not None:
            self._last[key] = (kind, reading.total)

    def _forget_running(self, key: str, entry: _Running) -> None:
        del self._running[key]
        self._rekind(key, entry.kind, None)
        self._version += 1

    def _rekind(self, key: str, old: Kind | None, new: Kind | None) -> None:
        if old == new:
            return
        if old is not None:
            self._kind_running[old].discard(key)
        if new is not None:
            self._kind_running.setdefault(new, set()).add(key)

    def _count_done(self, key: str, done: tuple[str, float] | None) -> None:
        old = self._done.pop(key, None)
        if old is not None:
            total, count = self._done_sums[old[0]]
            self._done_sums[old[0]] = (total - old[1], count - 1)
        if done is not None:
            self._done[key] = done
            total, count = self._done_sums.get(done[0], (0.0, 0))
            self._done_sums[done[0]] = (total + done[1], count + 1)

    def _count_rate(self, key: str, rate: tuple[Kind, float] | None) -> None:
        old = self._done_rate.pop(key, None)
        if old is not None:
            rates = self._done_rates[old[0]]
            del rates[bisect.bisect_left(rates, old[1])]
        if rate is not None:
            self._done_rate[key] = rate
            bisect.insort(self._done_rates.setdefault(rate[0], []), rate[1])

    # ---- reading ---------------------------------------------------------------------------

    def pace(self, key: str, now: float) -> Pace | None:
        """A running job's pace; None for a job that is not running or prints no progress."""
        entry = self._running.get(key)
        reading = entry.reading if entry is not None else None
        if entry is None or reading is None or entry.started is None:
            return None
        elapsed = max(0.0, now - entry.started)
        fraction = reading.fraction
        dated = entry.dated(now) or 0.0
        progressed = fraction > 0 and dated > 0
        projected = dated / fraction if progressed else None
        kind = entry.kind
        rate, median, count = None, None, 0
        if kind is not None:
            rates, own = self._kind_rates(kind, now)
            rate = own.get(key)  # None until it has run and made progress
            count = len(rates) - (rate is not None)
            skip = bisect.bisect_left(rates, rate) if rate is not None else len(rates)
            median = _median(rates, count, skip)
        return Pace(fraction=fraction, elapsed_s=elapsed,
                    remaining_s=max(0.0, projected - elapsed) if projected is not None
                    else None,
                    projected_s=projected,
                    unit=reading.unit, total=reading.total, rate=rate,
                    siblings_rate=median, siblings=count)

    def running(self) -> Iterator[tuple[str, float | None, float | None]]:
        """(group, started, fraction) of every running or launching job."""
        for entry in self._running.values():
            yield entry.group, entry.started, entry.fraction

    def dated(self, now: float) -> Iterator[tuple[str, float, float | None, float | None]]:
        """(group, elapsed, fraction, dated) of every running or launching job: `dated`, how
        long it had run when that fraction was seen."""
        for entry in self._running.values():
            started = entry.started
            yield (entry.group, now - started if started is not None else 0.0, entry.fraction,
                   entry.dated(now))

    def mean_durations(self) -> tuple[dict[str, float], float | None]:
        """The mean duration of the completed jobs of each group, and of all of them."""
        means = {group: total / count for group, (total, count) in self._done_sums.items()
                 if count}
        total = sum(t for t, _ in self._done_sums.values())
        count = sum(c for _, c in self._done_sums.values())
        return means, total / count if count else None

    def _kind_rates(self, kind: Kind, now: float) -> tuple[list[float], dict[str, float]]:
        """Every rate of a kind, sorted, and the running jobs' own."""
        if self._rates_at != (self._version, now):
            self._rates_at, self._rates = (self._version, now), {}
        cached = self._rates.get(kind)
        if cached is None:
            own = {}
            for key in self._kind_running.get(kind, ()):
                rate = self._running[key].rate(now)
                if rate is not None:
                    own[key] = rate
            rates = sorted([*self._done_rates.get(kind, ()), *own.values()])
            cached = self._rates[kind] = (rates, own)
        return cached


def _median(values: list[float], count: int, skip: int) -> float | None:
    """The median of sorted `values` less the one at index `skip` (a job's own figure; none is
    left out when skip == len(values)), `count` being how many remain; None with fewer than
    MIN_SIBLINGS."""
    if count < MIN_SIBLINGS:
        return None

    def at(k: int) -> float:
        return values[k if k < skip else k + 1]

    return (at((count - 1) // 2) + at(count // 2)) / 2
