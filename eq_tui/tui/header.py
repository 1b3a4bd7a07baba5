"""The top of the main screen: projects, progress, counts by status, elapsed, ETA, PAUSED; on a
small screen all of it on one line."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.content import Content
from textual.widgets import Static

from eq_tui.api import ProjectState
from eq_tui.present.queue_eta import counted_down
from eq_tui.tui.palette import status_markup_style
from eq_tui.tui.progress import Progress, ordered_counts
from eq_tui.tui.rows import format_duration
from eq_tui.tui.run_view import RunView

BAR_WIDTH = 30
COMPACT_BAR_WIDTH = 10
PADDING = 2  # app.tcss: #header's padding, a column each side
SHORT_STATUS = {"running": "run", "launching": "launch", "pending": "wait",
                "failed_oom": "oom", "completed": "done", "blocked": "block"}
Part = Content | str | tuple[str, str]


def progress_bar(fraction: float, width: int = BAR_WIDTH) -> Content:
    filled = max(0, min(width, round(fraction * width)))
    return Content.assemble(("━" * filled, "$success"), ("━" * (width - filled), "dim"))


def header_content(view: RunView, now: float, eta_s: float | None = None, *,
                   compact: bool = False, width: int = 0) -> Content:
    """The header; in `width` columns (0: any), its bar narrowed, then left out, and on a
    normal screen the `eq-tui` before the projects, so that PAUSED, HELD and the counts stay
    in view; a small screen's, on two lines where one cannot hold them."""
    bars = (COMPACT_BAR_WIDTH, 0) if compact else (BAR_WIDTH, 20, COMPACT_BAR_WIDTH, 0)
    # (bar width, `eq-tui` before the projects, the counts on a line of their own)
    steps = [(bar, True, not compact) for bar in bars] + [(0, compact, True)]
    content = Content("")
    for bar, brand, two_lines in steps:
        content = _header(view, now, eta_s, compact=compact, bar=bar, brand=brand,
                          two_lines=two_lines)
        if not width or max(line.cell_length for line in content.split("\n")) <= width:
            break
    return content


def _header(view: RunView, now: float, eta_s: float | None, *, compact: bool, bar: int,
            brand: bool, two_lines: bool) -> Content:
    projects = ", ".join(view.projects) or "-"
    progress: Progress = view.progress()
    # the whole run, across resumes: from when the run dir was created
    starts = [start for p in view.projects.values()
              if (start := p.created or p.started_at) is not None]
    finished = bool(view.projects) and all(p.finished for p in view.projects.values())
    # a finished run's clock stops when its last job ended
    ends = [p.finished_at for p in view.projects.values() if p.finished_at is not None]
    end = max(ends) if finished and ends else now
    elapsed = format_duration(max(0.0, end - min(starts))) if starts else "-"
    eta = eta_text(eta_s, finished=finished, held=bool(view.keys_with_status("held")))
    done = f"{progress.completed}/{progress.total} ({progress.fraction:.0%})"
    drawn: list[Part] = [progress_bar(progress.fraction, bar), " "] if bar else []
    if compact:
        parts: list[Part] = [(projects, "bold $primary"), " ", *drawn, done,
                             " ETA ", (eta, "bold")]
    else:
        parts = [*([("eq-tui ", "bold $primary")] if brand else []), (projects, "bold"), "  ",
                 *drawn, done, "  elapsed ", (elapsed, "bold"), "  ETA ", (eta, "bold")]
    if view.paused:
        parts += [" ", (" PAUSED ", "bold reverse $warning")]
    held = sorted({phase for p in view.projects.values() for phase in p.held_phases})
    if held:  # the crash guard stopped launching these phases (the alert says why)
        parts += [" ", (f" HELD: {', '.join(held)} ", "bold reverse $error")]
    if finished:
        parts += [" ", (" FINISHED ", "bold reverse $success")]
    waiting = queue_waiting(view)
    if waiting and not compact:
        parts += ["  waiting: ", (waiting, "$warning")]
    counts: list[Part] = []
    for status, n in ordered_counts(progress.counts):
        if counts:
            counts.append(" " if compact else "  ")
        label = SHORT_STATUS.get(status, status) if compact else status
        counts.append((f"{label} {n}", status_markup_style(status)))
    if not two_lines:
        return Content.assemble(*parts, ("  ", ""), *counts)
    return Content.assemble(*parts, "\n", *(counts or [("no jobs", "dim")]))


def eta_text(eta_s: float | None, *, finished: bool, held: bool) -> str:
    """`done`, `-` (nothing to go on), `12m`; a held job keeps the queue from finishing until
    it is released, so with one the ETA is of the rest and says so: `12m+held`, or `held`."""
    if finished:
        return "done"
    if held:
        return f"{format_duration(eta_s)}+held" if eta_s else "held"
    return format_duration(eta_s) if eta_s is not None else "-"


def queue_waiting(view: RunView) -> str:
    """Why the queue's waiting jobs with no reason of their own wait (one line for all)."""
    reasons = {p.waiting_reason for p in view.projects.values()
               if p.waiting_reason and not p.finished
               and any(str(j.get("status")) in ("pending", "failed_oom") and not j.get("reason")
                       for j in p.jobs.values())}
    return "; ".join(sorted(reasons))


def with_queue_reason(project: ProjectState, job: Mapping[str, Any]) -> dict[str, Any]:
    """A waiting job's record with the queue's reason where it has none of its own."""
    if job.get("reason") or str(job.get("status")) not in ("pending", "failed_oom"):
        return dict(job)
    return {**job, "reason": project.waiting_reason or None}


class RunHeader(Static):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.compact = False
        self.screen_width = 0  # the app's (0: the app's size now)

    def show(self, view: RunView, now: float) -> None:
        width = (self.screen_width or self.app.size.width) - PADDING
        self.update(header_content(view, now, view_eta(view, now), compact=self.compact,
                                   width=max(1, width)))


def view_eta(view: RunView, now: float) -> float | None:
    """The engines' ETAs counted down to `now`: the longest of the projects still running;
    None while one of them has nothing to go on."""
    left = [counted_down(p.eta_s, p.eta_at, now) for p in view.projects.values()
            if not p.finished]
    if not left:
        return 0.0 if view.projects else None
    return None if any(eta is None for eta in left) else max(e for e in left if e is not None)
