"""`enter`: one job in full — command, where it ran, why it waits, every attempt (with the memory
it was placed for and the most it used), and any attempt's log."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.content import Content
from textual.screen import Screen
from textual.widgets import DataTable, Log, Static
from textual.worker import Worker

from eq_tui.api.holders import job_gpu_lines
from eq_tui.present.durations import format_short
from eq_tui.present.pace import SLOW_FACTOR, Pace
from eq_tui.results.cost import (
    attempt_energy_j,
    attempt_gpu_s,
    energy_text,
    gpu_hours_text,
    job_cost,
)
from eq_tui.tui.key_footer import KeyFooter
from eq_tui.tui.log_pane import MAX_LOG_LINES, TAIL_LINES, TailFetcher, sanitise
from eq_tui.tui.memory_text import attempt_memory, escalation_detail
from eq_tui.tui.palette import status_markup_style
from eq_tui.tui.rows import attempt_text, format_duration, progress_bar, where

ATTEMPT_COLUMNS = ("#", "host:gpu", "start", "end", "time", "exit", "failure", "memory", "cost",
                   "log")
WAITING = ("pending", "failed_oom")
ATTEMPTS = Binding.Group("Attempt", compact=True)  # `[]` in the footer


def clock_text(stamp: float | None) -> str:
    return time.strftime("%H:%M:%S", time.localtime(stamp)) if stamp is not None else ""


def rate_text(rate: float | None, unit: str | None, per: str | None = None) -> str:
    """Units per second, minute or hour (`per`; by default whichever reads as 1 or more):
    `37.9 epoch/h`."""
    if rate is None or unit is None:
        return "-"
    per = per or rate_per(rate)
    return f"{rate * _PER[per]:.3g} {unit}/{per}"


_PER = {"s": 1, "min": 60, "h": 3600}


def rate_per(*rates: float | None) -> str:
    """The unit of time that shows the smallest of these rates as 1 or more (at most an hour)."""
    smallest = min((rate for rate in rates if rate), default=1.0)
    return next((per for per, scale in _PER.items() if smallest * scale >= 1), "h")


def pace_lines(pace: Pace) -> list[Content]:
    """How far it is and when it should end; why it is flagged slow, with the rates compared."""
    per = rate_per(pace.rate, pace.siblings_rate)
    lines = [Content.assemble(
        ("progress ", "dim"), f"{int(pace.fraction * 100)}% ",  # as the table: never 100% early
        (progress_bar(pace.fraction, 10), "$success"),
        ("  ETA ", "dim"), (format_short(pace.remaining_s, "-"), "bold"),
        ("  running ", "dim"), format_short(pace.elapsed_s), ("  projected ", "dim"),
        format_short(pace.projected_s, "-"),
        ("  rate ", "dim"), rate_text(pace.rate, pace.unit, per),
        ("  siblings' median ", "dim"), rate_text(pace.siblings_rate, pace.unit, per),
        (f" ({pace.siblings} siblings)", "dim"))]
    if pace.slow:
        lines.append(Content.assemble(
            ("slow ", "bold $warning"),
            f"{rate_text(pace.rate, pace.unit, per)}, siblings' median "
            f"{rate_text(pace.siblings_rate, pace.unit, per)}",
            (f" (less than 1/{SLOW_FACTOR:g} of it, among its configuration's other seeds; "
             "shown only, nothing is done to it)", "dim")))
    return lines


def job_summary(job: Mapping[str, Any], max_attempts: int, pace: Pace | None = None) -> Content:
    status = str(job.get("status", ""))
    failure = job.get("failure") or {}
    lines = [
        Content.assemble(("job ", "dim"), (str(job.get("id")), "bold"), ("  phase ", "dim"),
                         str(job.get("phase", "")), ("  status ", "dim"),
                         (status, f"bold {status_markup_style(status)}"),
                         ("  attempts ", "dim"), attempt_text(job, max_attempts) or "0"),
        Content.assemble(("command ", "dim"), str(job.get("cmd", ""))),
        Content.assemble(("host ", "dim"), where(job) or "-", ("  log ", "dim"),
                         str(job.get("log") or "-")),
    ]
    if failure:
        lines.append(Content.assemble(("failure ", "dim"), (str(failure.get("class")),
                                                            "$error"),
                                      f" {failure.get('detail', '')}"))
    if job.get("reason") and job["reason"] != failure.get("detail"):
        label = "waiting " if status in WAITING else "reason "
        lines.append(Content.assemble((label, "dim"), str(job["reason"])))
    reports = job.get("reports") or []
    if reports:
        shown = " ".join(f"{v:.4g}" for v in reports[-8:])
        lines.append(Content.assemble(("reports ", "dim"), f"{len(reports)} for early "
                                      f"stopping{', last ' if len(reports) > 8 else ': '}"
                                      f"{shown}"))
    escalation = escalation_detail(job)
    if escalation:
        lines.append(Content.assemble(("memory ", "dim"), (escalation, "$warning")))
    if job.get("retry_at"):
        lines.append(Content.assemble(("retry at ", "dim"), clock_text(job["retry_at"])))
    if pace is not None:
        lines.extend(pace_lines(pace))
        source = (job.get("progress") or {}).get("source")
        if source:  # where the engine read the whole job's progress
            lines.append(Content.assemble(("progress from ", "dim"), str(source)))
    if status == "running" and job.get("stalled_since"):
        lines.append(Content.assemble(("stalled ", "dim"), ("since ", "$error"),
                                      clock_text(job["stalled_since"]), ("  log silent since ",
                                                                         "dim"),
                                      clock_text(job.get("silent_since"))))
    cost = cost_line(job)
    if cost is not None:
        lines.append(cost)
    for attempt in job.get("history") or []:
        if attempt.get("resumed_from"):
            lines.append(Content.assemble((f"attempt {attempt.get('n')} resumed from ", "dim"),
                                          str(attempt["resumed_from"])))
        if attempt.get("preempted_by"):
            lines.append(Content.assemble((f"attempt {attempt.get('n')} preempted by ", "dim"),
                                          str(attempt["preempted_by"])))
        if attempt.get("cleanup"):
            lines.append(Content.assemble((f"attempt {attempt.get('n')} cleanup ", "dim"),
                                          str(attempt["cleanup"])))
    return Content("\n").join(lines)


def attempt_cells(attempt: Mapping[str, Any]) -> tuple[Text, ...]:
    start, end = attempt.get("start"), attempt.get("end")
    gpus = ",".join(str(g) for g in attempt.get("gpus") or []) or "cpu"
    exit_code = attempt.get("exit_code")
    values = (str(attempt.get("n", "")), f"{attempt.get('host', '')}:{gpus}",
              clock_text(start), clock_text(end),
              format_duration(end - start) if start is not None and end is not None else "",
              "" if exit_code is None else str(exit_code), str(attempt.get("failure_class") or ""),
              attempt_memory(attempt), attempt_cost(attempt), str(attempt.get("log", "")))
    return tuple(Text(v, no_wrap=True, end="") for v in values)


def attempt_cost(attempt: Mapping[str, Any]) -> str:
    """`312 GPU-s, 21.4 Wh`: its GPU time (a shared GPU by its share) and energy (`-`: no
    power reading); nothing before it started."""
    if attempt.get("start") is None:
        return ""
    joules = attempt_energy_j(attempt)
    return f"{gpu_hours_text(attempt_gpu_s(attempt))}, {energy_text(joules)}"


def cost_line(job: Mapping[str, Any]) -> Content | None:
    history = job.get("history") or []
    if not any(a.get("start") is not None for a in history):
        return None
    # as metered by the engine (a running job's: up to its last write, at most a minute old)
    gpu_s, joules = job_cost(history)
    return Content.assemble(("cost ", "dim"), f"{gpu_hours_text(gpu_s)}, energy "
                            f"{energy_text(joules)}", (" (every attempt; a shared GPU by its "
                                                       "share)", "dim"))


class JobDetailsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "close", "Close"),
        Binding("q", "close", "Close", show=False),
        Binding("left_square_bracket", "attempt(-1)", "Earlier attempt", group=ATTEMPTS),
        Binding("right_square_bracket", "attempt(1)", "Later attempt", group=ATTEMPTS),
    ]

    def __init__(self, key: str, job: Mapping[str, Any], *, max_attempts: int,
                 fetch: TailFetcher, pace: Pace | None = None,
                 hosts: Callable[[], Mapping[str, Mapping[str, Any]]] | None = None) -> None:
        super().__init__()
        self.hosts = hosts  # the project's hosts now: who holds the job's GPUs
        self.key = key
        self.job = dict(job)
        self.pace = pace
        self.max_attempts = max_attempts
        self.fetch = fetch
        self.attempt: int | None = None
        self._log_worker: Worker[None] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="details"):
            yield Static(id="details-summary")
            yield DataTable(id="attempts", cursor_type="row")
            yield Log(max_lines=MAX_LOG_LINES, id="details-log")
        yield KeyFooter()  # wrapped where one line cannot hold every key

    def on_mount(self) -> None:
        self.query_one("#details").border_title = f"job {self.job.get('id')}"
        table = self.query_one("#attempts", DataTable)
        for label in ATTEMPT_COLUMNS:
            table.add_column(label, key=label)
        self.show_job(self.job, self.pace)
        history = self.job.get("history") or []
        if history:
            table.move_cursor(row=len(history) - 1)
            self.show_attempt(int(history[-1].get("n", len(history))))
        table.focus()

    def show_job(self, job: Mapping[str, Any], pace: Pace | None = None) -> None:
        """Redraw with the job's latest record (the app calls this on JobUpdated)."""
        self.job = dict(job)
        self.show_pace(pace)
        table = self.query_one("#attempts", DataTable)
        history = list(job.get("history") or [])
        table.clear()
        for attempt in history:
            table.add_row(*attempt_cells(attempt), key=str(attempt.get("n")))

    def show_pace(self, pace: Pace | None) -> None:
        """The summary again with the job's pace now (the app calls this every second)."""
        self.pace = pace
        summary = job_summary(self.job, self.max_attempts, pace)
        held = job_gpu_lines(self.job, self.hosts()) if self.hosts is not None else []
        if held:
            summary = Content("\n").join([summary, *(Content.assemble(("GPU ", "dim"), line)
                                                       for line in held)])
        self.query_one("#details-summary", Static).update(summary)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        if event.row_key.value is not None and int(event.row_key.value) != self.attempt:
            self.show_attempt(int(event.row_key.value))

    def action_attempt(self, delta: int) -> None:
        table = self.query_one("#attempts", DataTable)
        if table.row_count:
            table.move_cursor(row=max(0, min(table.row_count - 1, table.cursor_row + delta)))

    def show_attempt(self, n: int) -> None:
        self.attempt = n
        log = self.query_one("#details-log", Log)
        log.border_title = f"log of attempt {n}"

        async def load() -> None:  # created lazily: a cancelled worker leaves no coroutine
            await self._load(n)

        self._log_worker = self.run_worker(load, group="details-log", exclusive=True,
                                           exit_on_error=False)

    async def _load(self, n: int) -> None:
        try:
            lines = [sanitise(line) for line in await self.fetch(self.key, n)]
        except Exception as exc:
            lines = [f"[eq-tui] log unavailable: {exc}"]
        if n != self.attempt:
            return
        log = self.query_one("#details-log", Log)
        log.clear()
        log.write_lines(lines[-TAIL_LINES * 5:] or ["(empty log)"])

    def action_close(self) -> None:
        self.dismiss(None)
