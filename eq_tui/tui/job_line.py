"""A small screen's line under the job table: the selected job's id, status, failure class and
last log line, whole (at 80 columns the table has no room for the last line, nor the log pane
for its tail)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from textual.content import Content
from textual.widgets import Static

from eq_tui.tui.palette import status_markup_style
from eq_tui.tui.rows import COLUMN_KEYS, job_cells

# as long as a line can be: the widget's width cuts it (with an ellipsis)
WHOLE_LINE = 500


def job_line(job: Mapping[str, Any], *, now: float, max_attempts: int) -> Content:
    """`student_nan  stuck  exit 3  exit 3: ValueError: lr too high`: what the row says, with
    its last line whole."""
    cells = dict(zip(COLUMN_KEYS, job_cells(job, project="", now=now, max_attempts=max_attempts,
                                            last_width=WHOLE_LINE), strict=True))
    status = cells["status"]
    parts: list[Content | str | tuple[str, str]] = [
        (cells["id"], "bold"), "  ", (status, status_markup_style(status))]
    if cells["failure"]:
        parts += ["  ", (cells["failure"], "$error")]
    if cells["last_line"]:
        parts += ["  ", cells["last_line"]]
    return Content.assemble(*parts)


class JobLine(Static):
    DEFAULT_CSS = """
    JobLine {
        height: 1;
        padding: 0 1;
        text-wrap: nowrap;
        text-overflow: ellipsis;
        background: $panel;
    }
    """

    def show(self, job: Mapping[str, Any] | None, *, now: float, max_attempts: int) -> None:
        self.update(job_line(job, now=now, max_attempts=max_attempts) if job is not None
                    else Content(""))
