"""Each pane's share of the screen. Below about 100x30 the screen is small: a one-line header,
the job table first with the compact grid under it, and the log and retry queue as a tab (`l`)
instead of squeezed panes. At every size the GPU grid leaves the job table a third of the
screen."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from eq_tui.tui.key_footer import footer_height
from eq_tui.tui.rows import (
    COLUMN_KEYS,
    COLUMNS,
    LAST_LINE_WIDTH,
    id_width,
    where_width,
)

if TYPE_CHECKING:
    from eq_tui.tui.run_view import RunView

SMALL_WIDTH = 100
SMALL_HEIGHT = 30
TABLE_SHARE = 1 / 3


@dataclass(frozen=True)
class Room:
    small: bool = False
    logs_hidden: bool = False  # normal screens: `l` gives the table the log panes' room
    logs_tab: bool = False  # small screens: `l` shows the log and retry queue instead
    header_height: int = 2
    bottom_height: int = 12
    grid_budget: int = 12
    size: tuple[int, int] = (0, 0)  # the screen this room was measured on

    def toggled_logs(self) -> Room:
        if self.small:
            return replace(self, logs_tab=not self.logs_tab)
        return replace(self, logs_hidden=not self.logs_hidden)


def room_for(width: int, height: int, previous: Room = Room()) -> Room:
    small = width < SMALL_WIDTH or height < SMALL_HEIGHT
    table = math.ceil(height * TABLE_SHARE)
    if small:
        bottom = 0 if not previous.logs_tab else -1  # -1: the rest of the screen
        header, grid = 1, max(2, height // 4)
    else:
        bottom = 0 if previous.logs_hidden else max(7, min(16, height // 4))
        header = 2
        grid = max(3, height - header - footer_height(width) - bottom - table)
    return replace(previous, size=(width, height), small=small, header_height=header,
                   bottom_height=bottom, grid_budget=grid, logs_tab=previous.logs_tab and small)


TABLE_CHROME = 4  # the job table's border and its vertical scrollbar
CELL_PADDING = 2
LAST_LINE_MIN = 24  # narrower than this, the last log line keeps its width and scrolls


@dataclass(frozen=True)
class TableFit:
    progress: bool  # the progress column is shown
    last_line: int  # the last log line's width
    id: int = 0  # the id column's width (rows.id_width)


def fit_table(screen_width: int, widths: list[tuple[str, int]], last_line_max: int) -> TableFit:
    """Which columns the job table shows at this width: the progress column (it comes right
    after the status) only where it fits on the screen, and the last log line narrowed, down to
    LAST_LINE_MIN, so that it fits too. `widths`: every column in order but the last log line,
    the mark column first."""
    room = screen_width - TABLE_CHROME
    keys = [key for key, _ in widths]
    through = keys.index("progress") + 1 if "progress" in keys else 0
    progress = sum(width + CELL_PADDING for _, width in widths[:through]) <= room
    used = sum(width + CELL_PADDING for key, width in widths if progress or key != "progress")
    left = room - used - CELL_PADDING
    return TableFit(progress=progress,
                    last_line=min(last_line_max, left) if left >= LAST_LINE_MIN
                    else last_line_max)


@dataclass(frozen=True)
class TableShape:
    """What decides which columns a run needs: a column that would say the same on every row
    (one phase, no priority set, one host) gives its room to the last log line."""

    phases: frozenset[str] = frozenset()
    priorities: bool = False  # some job has a priority set
    hosts: frozenset[str] = frozenset()

    @property
    def one_host(self) -> bool:
        return len(self.hosts) <= 1

    def needs(self, key: str) -> bool:
        if key == "phase":
            return len(self.phases) > 1
        if key == "priority":
            return self.priorities
        return True

    def outgrown_by(self, jobs: Iterable[Mapping[str, Any]]) -> bool:
        """Whether these (changed) jobs need a column it leaves out: a new phase, a priority
        set, a host of its own."""
        return any(str(job.get("phase", "")) not in self.phases
                   or (not self.priorities and job.get("priority"))
                   or (job.get("host") and job["host"] not in self.hosts) for job in jobs)


def table_shape(view: RunView) -> TableShape:
    jobs = [job for _, _, job in view.iter_jobs()]
    hosts = {str(name) for project in view.projects.values() for name in project.hosts}
    hosts |= {str(job["host"]) for job in jobs if job.get("host")}
    return TableShape(phases=frozenset(str(job.get("phase", "")) for job in jobs),
                      priorities=any(job.get("priority") for job in jobs),
                      hosts=frozenset(hosts))


def column_plan(view: RunView, metric: str | None, screen_width: int,
                shape: TableShape | None = None) -> tuple[list[int], dict[str, int], TableFit]:
    """The job table's columns that may show (a project column only with several projects, a
    phase column with several phases, a priority column once one is set, the metric column
    once `m` picks one), their widths (a run on one host: its GPUs only), and what fits on the
    screen."""
    multi = len(view.projects) > 1
    shape = shape or table_shape(view)
    columns = [i for i, c in enumerate(COLUMNS) if (multi or c.key != "project")
               and (metric or c.key != "metric") and shape.needs(c.key)]
    widths = {c.key: where_width(shape.hosts) if c.key == "where" else c.width or 0
              for c in COLUMNS}
    widths["id"] = id_width(job_id for project in view.projects.values()
                            for job_id in project.jobs)
    fixed = [("mark", 1), *((COLUMN_KEYS[i], widths[COLUMN_KEYS[i]]) for i in columns
                            if COLUMN_KEYS[i] != "last_line")]
    fit = fit_table(screen_width, fixed, LAST_LINE_WIDTH)
    return columns, widths, replace(fit, id=widths["id"])
