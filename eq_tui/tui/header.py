"""The top of the main screen: projects, progress, counts by status, elapsed, ETA, PAUSED."""

from __future__ import annotations

from textual.content import Content
from textual.widgets import Static

from eq_tui.tui.palette import status_markup_style
from eq_tui.tui.progress import Progress, ordered_counts
from eq_tui.tui.rows import format_duration
from eq_tui.tui.run_view import RunView

BAR_WIDTH = 30


def progress_bar(fraction: float, width: int = BAR_WIDTH) -> Content:
    filled = max(0, min(width, round(fraction * width)))
    return Content.assemble(("━" * filled, "$success"), ("━" * (width - filled), "dim"))


def header_content(view: RunView, now: float) -> Content:
    projects = ", ".join(view.projects) or "-"
    progress: Progress = view.progress(now)
    # the whole run, across resumes: from when the run dir was created
    starts = [start for p in view.projects.values()
              if (start := p.created or p.started_at) is not None]
    elapsed = format_duration(now - min(starts)) if starts else "-"
    eta = format_duration(progress.eta_s) if progress.eta_s is not None else "-"
    finished = bool(view.projects) and all(p.finished for p in view.projects.values())
    parts: list[Content | str | tuple[str, str]] = [
        ("eq-tui ", "bold $primary"), (projects, "bold"), "  ",
        progress_bar(progress.fraction),
        f" {progress.completed}/{progress.total} ({progress.fraction:.0%})",
        "  elapsed ", (elapsed, "bold"), "  ETA ", (eta if not finished else "done", "bold"),
    ]
    if view.paused:
        parts += ["  ", (" PAUSED ", "bold reverse $warning")]
    held = sorted({phase for p in view.projects.values() for phase in p.held_phases})
    if held:  # the crash guard stopped launching these phases (the alert says why)
        parts += ["  ", (f" HELD: {', '.join(held)} ", "bold reverse $error")]
    if finished:
        parts += ["  ", (" FINISHED ", "bold reverse $success")]
    counts: list[Content | str | tuple[str, str]] = []
    for status, n in ordered_counts(progress.counts):
        if counts:
            counts.append("  ")
        counts.append((f"{status} {n}", status_markup_style(status)))
    return Content.assemble(*parts, "\n", *(counts or [("no jobs", "dim")]))


class RunHeader(Static):
    def show(self, view: RunView, now: float) -> None:
        self.update(header_content(view, now))
