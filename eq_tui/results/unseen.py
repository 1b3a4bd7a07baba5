"""What is never seen: a metric the sweep watches — a phase's `goal:` metric, or its
`early_stop:` metric — that was never read from jobs that ran long enough to print it, and what
was read from them instead (so a misspelt name, `val_accuracy` for `val_acc`, is said, not left
to show as an empty column and an early stopping that never prunes). Pure.

Which jobs count:
- completed: when its final metrics (read once at its end) lack the metric;
- running (the early_stop metric only, from the reports its log printed so far): when it has
  reported some other metric at least `grace` times and never this one, no job of its phase
  has printed this one either, and it is past half its run when its progress is known. The
  half: HF Trainer prints its training loss many times before its first evaluation, and a
  goal metric is often printed only at the end (`test_acc`): neither is missing yet;
- pruned, killed, failed, stuck: never — they ended before their end, and a metric printed at
  the end is rightly absent (a pruned job was stopped on the early_stop metric it reported).
"""

from __future__ import annotations

import difflib
import json
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from eq_tui.manifest.model import Manifest
from eq_tui.results.records import Record

HALF_RUN = 0.5  # a running job's progress past which its early_stop metric is due
NAMES_SHOWN = 5  # jobs and metrics named in a line; the rest counted
EXPLAIN = "check the name, or run `eq-tui explain-log LOG MANIFEST` on one of their logs"


@dataclass(frozen=True)
class Watched:
    """A metric a phase watches: `role` says why (goal, early_stop or both); `while_running`:
    its reports are due during the run (the early_stop metric), with `grace` the reports of
    other metrics before it is due."""

    phase: str
    metric: str
    role: str
    grace: int = 1
    while_running: bool = False


@dataclass(frozen=True)
class Sighting:
    """One job as the rule sees it: its status, its final metrics (None: not read yet), the
    reports per metric its running attempt printed (None: its log is not followed) and its
    progress (0..1, None: unknown)."""

    id: str
    phase: str
    status: str
    final: Mapping[str, Any] | None = None
    reported: Mapping[str, int] | None = None
    progress: float | None = None


@dataclass(frozen=True)
class Unseen:
    """A watched metric never read from `jobs` (of its phase); `instead`: the metrics read from
    them, the most common first."""

    phase: str
    metric: str
    role: str
    jobs: tuple[str, ...]
    instead: tuple[str, ...]

    @property
    def key(self) -> tuple[str, str]:
        return self.phase, self.metric

    def near(self) -> str | None:
        """The name read instead that looks most like the one watched (a misspelling)."""
        close = difflib.get_close_matches(self.metric, self.instead, n=1, cutoff=0.6)
        return close[0] if close else None

    def text(self) -> str:
        noun = "job" if len(self.jobs) == 1 else "jobs"
        read = (f"read instead: {_names(self.instead)}" if self.instead
                else "no metric at all was read from them")
        near = self.near()
        hint = f"is it '{near}'? {EXPLAIN[0].upper()}{EXPLAIN[1:]}" if near else EXPLAIN
        return (f"metric '{self.metric}' ({self.role}) never read from {len(self.jobs)} {noun} "
                f"of phase {self.phase} ({_names(self.jobs)}): {read} — {hint}")

    def to_json(self) -> dict[str, Any]:
        return {"phase": self.phase, "metric": self.metric, "role": self.role,
                "jobs": list(self.jobs), "instead": list(self.instead), "near": self.near()}


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:NAMES_SHOWN])
    return shown + (f" and {len(names) - NAMES_SHOWN} more" if len(names) > NAMES_SHOWN else "")


# ---- what is watched ----------------------------------------------------------------------


def _watched(phase: str, goals: Iterable[str], early_metric: str | None,
             grace: int) -> list[Watched]:
    names = list(dict.fromkeys(goals))
    if early_metric is not None and early_metric not in names:
        names.append(early_metric)
    out = []
    for name in names:
        roles = [role for role, yes in (("goal", name in goals),
                                        ("early_stop", name == early_metric)) if yes]
        out.append(Watched(phase=phase, metric=name, role=" and ".join(roles),
                           grace=max(1, grace), while_running=name == early_metric))
    return out


def watched_of(manifest: Manifest) -> list[Watched]:
    """Each phase's goal metrics and early_stop metric (a phase's results inherit the top
    level's)."""
    out: list[Watched] = []
    for phase in manifest.phases:
        early = phase.results.early_stop
        out += _watched(phase.name, [name for name, _ in phase.results.goal],
                        early.metric if early is not None else None,
                        early.grace if early is not None else 1)
    return out


def _goal_names(raw: Any) -> list[str]:
    if isinstance(raw, dict):
        return [str(name) for name in raw]
    if isinstance(raw, list):
        return [str(item[0]) for item in raw if isinstance(item, (list, tuple)) and item]
    return []


def watched_from_json(data: Any) -> list[Watched]:
    """The same from a run dir's manifest.json (Manifest.to_json); [] when unreadable."""
    if not isinstance(data, dict):
        return []
    out: list[Watched] = []
    for phase in data.get("phases") or []:
        if not isinstance(phase, dict) or not isinstance(phase.get("results"), dict):
            continue
        results = phase["results"]
        early = results.get("early_stop") if isinstance(results.get("early_stop"), dict) \
            else None
        metric = early.get("metric") if early is not None else None
        grace = early.get("grace") if early is not None else 1
        out += _watched(str(phase.get("name") or "main"), _goal_names(results.get("goal")),
                        metric if isinstance(metric, str) else None,
                        grace if isinstance(grace, int) else 1)
    return out


def read_watched(run_dir: Path) -> list[Watched]:
    try:
        return watched_from_json(json.loads((run_dir / "manifest.json").read_text()))
    except (OSError, ValueError):
        return []


# ---- the rule -----------------------------------------------------------------------------


def _reported(sighting: Sighting) -> dict[str, int]:
    return {name: count for name, count in (sighting.reported or {}).items() if count > 0}


def _running_misses(watch: Watched, job: Sighting, printed_in_phase: bool) -> bool:
    if not watch.while_running or job.reported is None or printed_in_phase:
        return False
    reported = _reported(job)
    if watch.metric in reported or max(reported.values(), default=0) < watch.grace:
        return False
    return job.progress is None or job.progress >= HALF_RUN


def _read_from(job: Sighting) -> list[str]:
    if job.status == "completed" and job.final is not None:
        return list(job.final)
    return list(_reported(job))


def unseen(watched: Sequence[Watched], jobs: Sequence[Sighting]) -> list[Unseen]:
    """Each watched metric never read from some jobs that ran long enough to print it (see the
    module's doc for which count), with the jobs and what was read from them instead."""
    out = []
    for watch in watched:
        members = [job for job in jobs if job.phase == watch.phase]
        printed = any(watch.metric in _reported(job) or
                      (job.final is not None and watch.metric in job.final) for job in members)
        missing = [job for job in members
                   if (job.status == "completed" and job.final is not None
                       and watch.metric not in job.final)
                   or (job.status == "running" and _running_misses(watch, job, printed))]
        if not missing:
            continue
        counts = Counter(name for job in missing for name in dict.fromkeys(_read_from(job)))
        instead = tuple(name for name, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
        out.append(Unseen(phase=watch.phase, metric=watch.metric, role=watch.role,
                          jobs=tuple(job.id for job in missing), instead=instead))
    return out


def from_records(records: Iterable[Record]) -> list[Sighting]:
    """results.jsonl's records as the rule sees them: a job's final metrics once collected (a
    record has no reports: a running job never counts from it)."""
    return [Sighting(id=str(r["id"]), phase=str(r.get("phase") or "main"),
                     status=str(r.get("status") or ""),
                     final=(r.get("metrics") or {}) if r.get("collected_at") is not None else None)
            for r in records]


def unseen_in_records(watched: Sequence[Watched], records: Iterable[Record]) -> list[Unseen]:
    return unseen(watched, from_records(records))


def markdown(findings: Sequence[Unseen]) -> str:
    """summary.md's section (empty when every watched metric was read)."""
    if not findings:
        return ""
    return "## Metrics never read\n\n" + "".join(f"- {f.text()}\n" for f in findings)
