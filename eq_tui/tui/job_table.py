"""The job table: one row per job, keyed `project/id`, updated cell by cell."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist, RowKey

from eq_tui.tui.filters import JobFilter
from eq_tui.tui.live_metrics import LiveMetrics
from eq_tui.tui.palette import status_rich_styles
from eq_tui.tui.rows import (
    COLUMNS,
    EDITED_MARK,
    Cells,
    changed_columns,
    job_cells,
    sort_value,
    split_row_key,
)
from eq_tui.tui.run_view import RunView

MARK_COLUMN = "mark"
MARK = "●"
STATUS_INDEX = next(i for i, c in enumerate(COLUMNS) if c.key == "status")
PROJECT_INDEX = next(i for i, c in enumerate(COLUMNS) if c.key == "project")


class JobTable(DataTable[Any]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Details"),
        Binding("k", "kill", "Kill"),
        Binding("r", "retry", "Retry"),
        Binding("u", "requeue", "Requeue"),
        Binding("space", "toggle_mark", "Mark"),
        Binding("s", "sort_next", "Sort", show=True),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("m", "next_metric", "Metric", show=False),
    ]

    class JobsRequested(Message):
        """Base of the intents that act on jobs (row keys `project/id`)."""

        def __init__(self, keys: list[str]) -> None:
            super().__init__()
            self.keys = keys

    class KillRequested(JobsRequested):
        pass

    class RetryRequested(JobsRequested):
        pass

    class RequeueRequested(JobsRequested):
        pass

    class DetailsRequested(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class JobHighlighted(Message):
        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True)
        self.marked: set[str] = set()
        self.job_filter = JobFilter()
        self.sort_column: str | None = None
        self.sort_reverse = False
        self._cells: dict[str, Cells] = {}
        self._columns: list[int] = []
        self._styles: dict[str, Style] = {}
        self._view: RunView | None = None
        self._now = 0.0
        self.live = LiveMetrics()
        self.metric: str | None = None  # the metric column's metric (None: no column)

    # ---- building --------------------------------------------------------------------------

    def setup(self, view: RunView, now: float) -> None:
        """Columns (a project column only with several projects) and every row."""
        self._view = view
        multi = len(view.projects) > 1
        self._columns = [i for i, c in enumerate(COLUMNS) if (multi or c.key != "project")
                         and (self.metric or c.key != "metric")]
        self.clear(columns=True)
        self.add_column(" ", key=MARK_COLUMN, width=1)
        for i in self._columns:
            column = COLUMNS[i]
            label = self.metric if column.key == "metric" and self.metric else column.label
            self.add_column(label, key=column.key, width=column.width)
        self.refresh_styles()
        self.rebuild(now)

    def refresh_styles(self) -> None:
        self._styles = status_rich_styles(self.app)

    def rebuild(self, now: float) -> None:
        """Every row again, filtered and sorted (after a filter, sort or theme change)."""
        if self._view is None:
            return
        self._now = now
        cursor = self.cursor_key
        self.clear()
        self._cells.clear()
        rows = []
        for key, project, job in self._view.iter_jobs():
            if not self.job_filter.matches(job, project.project):
                continue
            self.live.observe(key, job)
            cells = job_cells(job, project=project.project, now=now,
                              max_attempts=project.max_attempts,
                              metric=self.live.cell(key, job, self.metric))
            self._cells[key] = cells
            rows.append((key, cells))
        for key, cells in rows:
            self.add_row(*self._row_cells(key, cells), key=key)
        self._apply_sort()
        self.move_to(cursor)

    # ---- keyed updates ---------------------------------------------------------------------

    def apply(self, keys: Iterable[str], now: float) -> None:
        """Bring the given rows up to date: changed cells only, new rows added, rows that no
        longer match the filter removed."""
        if self._view is None:
            return
        self._now = now
        resort = False
        for key in keys:
            found = self._view.job(key)
            if found is None:
                if key in self._cells:  # retired by a reload
                    del self._cells[key]
                    self.remove_row(key)
                continue
            project, job = found
            if not self.job_filter.matches(job, project.project):
                if key in self._cells:
                    del self._cells[key]
                    self.remove_row(key)
                continue
            self.live.observe(key, job)
            cells = job_cells(job, project=project.project, now=now,
                              max_attempts=project.max_attempts,
                              metric=self.live.cell(key, job, self.metric))
            old = self._cells.get(key)
            self._cells[key] = cells
            if old is None:
                self.add_row(*self._row_cells(key, cells), key=key)
                resort = resort or self.sort_column is not None
                continue
            for index in changed_columns(old, cells):
                if index in self._columns:
                    self.update_cell(key, COLUMNS[index].key, self._cell_text(index, cells))
                    resort = resort or COLUMNS[index].key == self.sort_column
        if resort:
            cursor = self.cursor_key
            self._apply_sort()
            self.move_to(cursor)

    def _row_cells(self, key: str, cells: Cells) -> list[Any]:
        return [MARK if key in self.marked else " ",
                *(self._cell_text(i, cells) for i in self._columns)]

    def _cell_text(self, index: int, cells: Cells) -> Text:
        value = cells[index]
        if index == STATUS_INDEX:
            return Text(value, style=self._styles.get(value, ""), end="")
        return Text(value, end="", no_wrap=True)

    # ---- cursor and marks ------------------------------------------------------------------

    @property
    def cursor_key(self) -> str | None:
        if not self.row_count:
            return None
        try:
            row_key, _ = self.coordinate_to_cell_key(Coordinate(self.cursor_row, 0))
        except CellDoesNotExist:
            return None
        return str(row_key.value) if row_key.value is not None else None

    def move_to(self, key: str | None) -> None:
        if key is None:
            return
        with contextlib.suppress(RowDoesNotExist):
            self.move_cursor(row=self.get_row_index(key), scroll=True)

    def targets(self) -> list[str]:
        """The jobs an action applies to: the marked ones, else the one under the cursor."""
        if self.marked:
            return [key for key in self._cells if key in self.marked] or sorted(self.marked)
        key = self.cursor_key
        return [key] if key else []

    def action_toggle_mark(self) -> None:
        key = self.cursor_key
        if key is None:
            return
        if key in self.marked:
            self.marked.discard(key)
        else:
            self.marked.add(key)
        self.update_cell(key, MARK_COLUMN, MARK if key in self.marked else " ")
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1)

    def clear_marks(self) -> None:
        for key in list(self.marked):
            if key in self._cells:
                self.update_cell(key, MARK_COLUMN, " ")
        self.marked.clear()

    # ---- intents ---------------------------------------------------------------------------

    def action_kill(self) -> None:
        self.post_message(self.KillRequested(self.targets()))

    def action_retry(self) -> None:
        self.post_message(self.RetryRequested(self.targets()))

    def action_requeue(self) -> None:
        self.post_message(self.RequeueRequested(self.targets()))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DetailsRequested(str(event.row_key.value)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        key: RowKey = event.row_key
        self.post_message(self.JobHighlighted(str(key.value) if key.value is not None else None))

    # ---- filter and sort -------------------------------------------------------------------

    def set_filter(self, job_filter: JobFilter) -> None:
        self.job_filter = job_filter
        self.rebuild(self._now)

    def sort_by(self, column: str, *, reverse: bool | None = None) -> None:
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        cursor = self.cursor_key
        self._apply_sort()
        self.move_to(cursor)

    def action_sort_next(self) -> None:
        keys = [COLUMNS[i].key for i in self._columns]
        following = (keys.index(self.sort_column) + 1) % len(keys) \
            if self.sort_column in keys else 0
        self.sort_by(keys[following], reverse=False)

    def action_sort_reverse(self) -> None:
        self.sort_by(self.sort_column or "id", reverse=not self.sort_reverse)

    def action_next_metric(self) -> None:
        """`m`: the metric column shows the next metric seen (the goals first), then none."""
        if self._view is None:
            return
        goals = [g for p in self._view.projects.values() for g in p.settings.get("goals") or {}]
        names = self.live.names((job for _, _, job in self._view.iter_jobs()), goals)
        order: list[str | None] = [None, *names]
        self.metric = order[(order.index(self.metric) + 1) % len(order)] \
            if self.metric in order else (names[0] if names else None)
        self.setup(self._view, self._now)

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        event.stop()
        column = event.column_key.value
        if column and column != MARK_COLUMN:
            self.sort_by(column)

    def _apply_sort(self) -> None:
        column, view, now = self.sort_column, self._view, self._now
        if column is None or view is None:
            return
        id_column = COLUMNS[0].key
        multi = PROJECT_INDEX in self._columns

        def key_of(cells: Any) -> tuple[Any, ...]:
            found = job_of(cells)
            if found is None:
                return ((),)
            if column == "metric" and self.metric:
                value = self.live.value(found[0], found[1], self.metric)
                missing = value is None or value != value  # last, either way round
                return (missing != self.sort_reverse, value or 0.0, found[1].get("id", ""))
            return sort_value(column, found[1], now, found[2])

        def job_of(cells: Any) -> tuple[str, Any, str] | None:
            if multi:
                id_text, project_text = cells
                project = str(project_text)
            else:
                id_text, project = cells, next(iter(view.projects), "")
            key = f"{project}/{str(id_text).removesuffix(EDITED_MARK)}"
            found = view.job(key)
            return None if found is None else (key, found[1], project)

        columns = (id_column, "project") if multi else (id_column,)
        self.sort(*columns, key=key_of, reverse=self.sort_reverse)


def job_id_of(key: str) -> str:
    return split_row_key(key)[1]
