"""Jobs waiting to retry (with a countdown, and what a CUDA OOM on a shared GPU asks for next),
then the ones that need a person (and the phases the crash guard holds, with what to run),
then alerts."""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.content import Content
from textual.widgets import Static

from eq_tui.api.held import held_phase_todo
from eq_tui.tui.memory_text import escalation_text
from eq_tui.tui.palette import status_markup_style
from eq_tui.tui.rows import attempt_text, failure_class, format_duration, single_line
from eq_tui.tui.run_view import RunView

MAX_LISTED = 100
ALERTS_SHOWN = 8
ALERT_STYLE = {"error": "bold $error", "warning": "$warning", "info": "dim"}


def countdown(seconds: float) -> str:
    seconds = max(0, int(seconds + 0.999))
    minutes, secs = divmod(seconds, 60)
    return f"{minutes}:{secs:02d}"


def _job_line(key: str, job: Mapping[str, Any], multi: bool) -> str:
    return key if multi else str(job.get("id", ""))


# Lines are cached: the pane is drawn again on every tick and every second, mostly the same
@lru_cache(maxsize=1024)
def _retry_line(label: str, countdown_text: str, attempt: str, failure: str) -> Content:
    return Content.assemble(f"  {label} ", (f"in {countdown_text}", "bold"),
                            f"  attempt {attempt}", (f"  {failure}", "dim"))


@lru_cache(maxsize=1024)
def _person_line(label: str, status: str, failure: str, detail: str) -> Content:
    # no word twice: "killed by the user", not "killed killed killed by the user"
    shown_status = "" if detail.startswith(status) else status
    shown_cls = "" if failure in (status, "") or detail.startswith(failure) else f" {failure}"
    return Content.assemble(f"  {label} ", (shown_status, status_markup_style(status)),
                            (shown_cls, "dim"), f"{' ' if shown_status or shown_cls else ''}"
                                                f"{single_line(detail, 70)}")


def _held_lines(view: RunView) -> list[Content]:
    """Each phase the crash guard holds, with what to run (in full: the pane wraps it)."""
    lines = []
    for project in view.projects.values():
        for phase in project.held_phases:
            stuck = next((str(job.get("id")) for job in reversed(project.jobs.values())
                          if job.get("phase") == phase and job.get("status") == "stuck"), None)
            lines.append(Content.assemble("  ", (f"phase {phase} held", "bold $error"),
                                          f": {held_phase_todo(project.run_dir, phase, stuck)}"))
    return lines


def retry_content(view: RunView, now: float) -> Content:
    multi = len(view.projects) > 1
    lines: list[Content] = []
    waiting = []
    for key in view.keys_with_status("failed_oom"):
        found = view.job(key)
        if found is not None:
            waiting.append((found[1].get("retry_at") or now, key, found))
    waiting.sort()
    lines.append(Content.styled(f"retrying ({len(waiting)})", "bold $warning"))
    for retry_at, key, (project, job) in waiting[:MAX_LISTED]:
        lines.append(_retry_line(_job_line(key, job, multi), countdown(float(retry_at) - now),
                                 attempt_text(job, project.max_attempts) or "-",
                                 escalation_text(job) or failure_class(job)))
    needing = []
    for key in view.keys_with_status("stuck", "blocked", "killed"):
        found = view.job(key)
        if found is not None:
            needing.append((key, found))
    needing.sort(key=lambda item: item[0])
    lines.append(Content.styled(f"needs a person ({len(needing)})", "bold $error"))
    lines.extend(_held_lines(view))
    for key, (_, job) in needing[:MAX_LISTED]:
        failure = job.get("failure") or {}
        detail = failure.get("detail") or job.get("reason") or ""
        lines.append(_person_line(_job_line(key, job, multi), str(job.get("status")),
                                  str(failure.get("class") or ""), str(detail)))
    if view.alerts:
        lines.append(Content.styled("alerts", "bold"))
        for alert in list(view.alerts)[-ALERTS_SHOWN:][::-1]:
            age = format_duration(now - float(alert.get("at") or now)) or "0s"
            level = str(alert.get("level", "info"))
            lines.append(Content.assemble(
                (f"  {age:>6} ago ", "dim"), (level, ALERT_STYLE.get(level, "")),
                f" {single_line(str(alert.get('message', '')), 90)}"))
    return Content("\n").join(lines)


class RetryPane(VerticalScroll, can_focus=True):
    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # held, not queried: the app's one-second timer may fire while the pane is still
        # mounting or already torn down
        self._body = Static(id="retry-body")

    def compose(self) -> ComposeResult:
        yield self._body

    def on_mount(self) -> None:
        self.border_title = "retry queue · needs a person · alerts"

    def show(self, view: RunView, now: float) -> None:
        self._body.update(retry_content(view, now))
