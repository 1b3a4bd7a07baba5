"""The job table: one row per job, keyed `project/id`, updated cell by cell. Until a column is
chosen (`s`, a header click) the rows that need eyes come first: see ACTIVE_FIRST."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import Any, ClassVar

from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.coordinate import Coordinate
from textual.message import Message
from textual.timer import Timer
from textual.widgets import DataTable
from textual.widgets.data_table import CellDoesNotExist, RowDoesNotExist

from eq_tui.tui.filters import JobFilter
from eq_tui.tui.layout import TableFit, column_plan
from eq_tui.tui.live_metrics import LiveMetrics
from eq_tui.tui.palette import status_rich_styles
from eq_tui.tui.rows import (
    COLUMN_KEYS,
    COLUMNS,
    EDITED_MARK,
    LAST_LINE_WIDTH,
    Cells,
    changed_columns,
    job_cells,
    sort_value,
)
from eq_tui.tui.run_view import Job, ProjectView, RunView

RESORT_DELAY_S = 0.3
FIRST_ROWS = 200  # more than any screen shows
LOAD_CHUNK = 500
MARK_COLUMN = "mark"
MARK = "●"
STATUS_INDEX = COLUMN_KEYS.index("status")
PROJECT_INDEX = COLUMN_KEYS.index("project")
PROGRESS_INDEX = COLUMN_KEYS.index("progress")
# needs a person, then waiting to retry, then running (stalled and slow ones are running jobs
# whose status cell says more): what must be seen is at the top
ACTIVE_FIRST = {name: rank for rank, names in enumerate((
    ("stuck", "blocked"), ("failed_oom",), ("running", "stalled", "slow", "launching"),
    ("pending",), ("killed",), ("completed",))) for name in names}


class JobTable(DataTable[Any]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "select_cursor", "Details"),
        Binding("k", "request('kill')", "Kill"),
        Binding("r", "request('retry')", "Retry"),
        Binding("u", "request('requeue')", "Requeue"),
        Binding("space", "toggle_mark", "Mark"),
        Binding("s", "sort_next", "Sort", show=True),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("m", "next_metric", "Metric", show=False),
    ]

    class JobsRequested(Message):
        """kill, retry or requeue these jobs (row keys `project/id`)."""

        def __init__(self, command: str, keys: list[str]) -> None:
            super().__init__()
            self.command = command
            self.keys = keys

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
        self.filter_text = ""
        self.sort_column: str | None = None  # None: active first
        self.sort_reverse = False
        self._cells: dict[str, Cells] = {}
        self._columns: list[int] = []
        self._styles: dict[str, Style] = {}
        self._view: RunView | None = None
        self._now = 0.0
        self.live = LiveMetrics()
        self.metric: str | None = None  # the metric column's metric (None: no column)
        self._order: dict[str, int] = {}  # manifest order, the tie-breaker of active first
        self._sort_timer: Timer | None = None
        self._pending: dict[str, Cells] = {}  # rows still to add after the first frame
        self._loading = False
        self.screen_width = 0  # the app's, for fit_table (0: the app's size at setup)
        self._fit = TableFit(progress=True, last_line=LAST_LINE_WIDTH)

    # ---- building --------------------------------------------------------------------------

    def setup(self, view: RunView, now: float) -> None:
        """Columns (a project column only with several projects, the progress column where it
        fits: layout.fit_table) and every row."""
        self._view = view
        screen = self.screen_width or self.app.size.width
        columns, widths, self._fit = column_plan(view, self.metric, screen)
        self._columns = [i for i in columns if self._fit.progress or i != PROGRESS_INDEX]
        widths["last_line"] = self._fit.last_line
        self.clear(columns=True)
        self.add_column(" ", key=MARK_COLUMN, width=1)
        for i in self._columns:
            column = COLUMNS[i]
            label = self.metric if column.key == "metric" and self.metric else column.label
            self.add_column(label, key=column.key, width=widths[column.key])
        self.refresh_styles()
        self._title()
        self.rebuild(now)

    def fit_to(self, screen_width: int) -> None:
        """The columns for a screen this wide; the table is set up again only when they
        change (the last log line narrower or wider, the progress column in or out)."""
        self.screen_width = screen_width
        view = self._view
        if view is not None and column_plan(view, self.metric, screen_width)[2] != self._fit:
            self.setup(view, self._now)

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
            self._order.setdefault(key, len(self._order))
            if not self.job_filter.matches(job, project.project):
                continue
            cells = self._cells[key] = self._job_cells(key, project, job, now)
            rows.append((key, cells))
        # the rows a screen shows first, in their order; the rest follow a chunk per frame,
        # so that 5,000 jobs do not hold the first frame back (DataTable measures every cell)
        if len(rows) > FIRST_ROWS:
            rows.sort(key=first_rows_key(self.sort_column, self._view, self._now, self._order),
                      reverse=self.sort_reverse)
        self._pending = dict(rows[FIRST_ROWS:])
        for key, cells in rows[:FIRST_ROWS]:
            self.add_row(*self._row_cells(key, cells), key=key)
        self._apply_sort()
        self.move_to(cursor)
        if self.cursor_key != cursor:  # sorted under a cursor that did not move: say so
            self.post_message(self.JobHighlighted(self.cursor_key))
        if self._pending and not self._loading:
            self._loading = True
            self.call_after_refresh(self._load_more)

    @property
    def loaded(self) -> bool:
        """Whether every row is in the table (see rebuild)."""
        return not self._pending

    def _load_more(self) -> None:
        pending = self._pending
        for key in list(pending)[:LOAD_CHUNK]:
            self.add_row(*self._row_cells(key, pending.pop(key)), key=key)
        if pending:
            self.call_after_refresh(self._load_more)
            return
        self._loading = False
        cursor = self.cursor_key
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
                    if self._pending.pop(key, None) is None:
                        self.remove_row(key)
                continue
            cells = self._job_cells(key, project, job, now)
            old = self._cells.get(key)
            self._cells[key] = cells
            if key in self._pending:  # not in the table yet: it goes in as it is now
                self._pending[key] = cells
                continue
            if old is None:
                self._order.setdefault(key, len(self._order))
                self.add_row(*self._row_cells(key, cells), key=key)
                resort = True
                continue
            changed = changed_columns(old, cells)
            if "slow" in (old[STATUS_INDEX], cells[STATUS_INDEX]) and \
                    PROGRESS_INDEX not in changed:
                changed.append(PROGRESS_INDEX)  # its style follows the status
            for index in changed:
                if index in self._columns:
                    self.update_cell(key, COLUMNS[index].key, self._cell_text(index, cells))
            resort = resort or moves(self.sort_column, old, cells)
        if resort and self._sort_timer is None:
            # at most one sort per RESORT_DELAY_S, however many ticks move rows meanwhile
            self._sort_timer = self.set_timer(RESORT_DELAY_S, self._resort)

    def _row_cells(self, key: str, cells: Cells) -> list[Any]:
        return [MARK if key in self.marked else " ",
                *(self._cell_text(i, cells) for i in self._columns)]

    def _job_cells(self, key: str, project: ProjectView, job: Job, now: float) -> Cells:
        assert self._view is not None
        self.live.observe(key, job)
        return job_cells(job, project=project.project, now=now,
                         max_attempts=project.max_attempts,
                         metric=self.live.cell(key, job, self.metric),
                         pace=self._view.pace(key, now), last_width=self._fit.last_line,
                         shared=self._view.shared(key))

    def _cell_text(self, index: int, cells: Cells) -> Text:
        value = cells[index]
        if index == STATUS_INDEX:
            return Text(value, style=self._styles.get(value, ""), end="")
        if index == PROGRESS_INDEX and cells[STATUS_INDEX] == "slow":
            return Text(value, style=self._styles["slow"], end="", no_wrap=True)
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
            if key in self._cells and key not in self._pending:
                self.update_cell(key, MARK_COLUMN, " ")
        self.marked.clear()

    # ---- intents ---------------------------------------------------------------------------

    def action_request(self, command: str) -> None:
        self.post_message(self.JobsRequested(command, self.targets()))

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        if event.row_key.value is not None:
            self.post_message(self.DetailsRequested(str(event.row_key.value)))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        event.stop()
        # the row under the cursor now: a sort may have moved another row there since
        self.post_message(self.JobHighlighted(self.cursor_key))

    # ---- filter and sort -------------------------------------------------------------------

    def set_filter(self, job_filter: JobFilter, text: str | None = None) -> None:
        """Show only the matching rows; `text` (when kept) goes into the title."""
        self.job_filter = job_filter
        if text is not None:
            self.filter_text = text
            self._title()
        self.rebuild(self._now)

    def sort_by(self, column: str, *, reverse: bool | None = None) -> None:
        if reverse is None:
            reverse = not self.sort_reverse if column == self.sort_column else False
        self.sort_column, self.sort_reverse = column, reverse
        self._resort()

    def _resort(self) -> None:
        """Sort now, the cursor staying on its row (also the sort a tick's changes asked for,
        RESORT_DELAY_S later: one sort now makes a pending one needless)."""
        if self._sort_timer is not None:
            self._sort_timer.stop()
            self._sort_timer = None
        cursor = self.cursor_key
        self._apply_sort()
        self.move_to(cursor)
        self._title()

    def _title(self) -> None:
        """`jobs · active first · filter: …`: how the rows are chosen and ordered."""
        column = self.sort_column
        order = "active first" if column is None else \
            f"by {next(c.label for c in COLUMNS if c.key == column)}"
        title = f"jobs · {order}{', reversed' if self.sort_reverse else ''}"
        self.border_title = f"{title} · filter: {self.filter_text}" if self.filter_text \
            else title

    def sort_by_activity(self) -> None:
        self.sort_column, self.sort_reverse = None, False
        self._resort()

    def action_sort_next(self) -> None:
        """The next column; after the last one, back to active first."""
        keys: list[str | None] = [None, *(COLUMNS[i].key for i in self._columns)]
        following = (keys.index(self.sort_column) + 1) % len(keys)
        column = keys[following]
        if column is None:
            self.sort_by_activity()
        else:
            self.sort_by(column, reverse=False)

    def action_sort_reverse(self) -> None:
        if self.sort_column is None:
            self.sort_reverse = not self.sort_reverse
            self._resort()
        else:
            self.sort_by(self.sort_column, reverse=not self.sort_reverse)


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
        if view is None:
            return
        id_column = COLUMNS[0].key
        multi = PROJECT_INDEX in self._columns
        columns = (id_column, "project") if multi else (id_column,)
        if column is None:
            self.sort(*columns, key=self._activity_key(multi), reverse=self.sort_reverse)
            return

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

        self.sort(*columns, key=key_of, reverse=self.sort_reverse)

    def _activity_key(self, multi: bool) -> Any:
        cells, order = self._cells, self._order
        project = next(iter(self._view.projects), "") if self._view else ""

        def key_of(values: Any) -> tuple[int, int]:
            key = f"{values[1]}/{values[0]}" if multi else f"{project}/{values}"
            row = cells.get(key)
            rank = ACTIVE_FIRST.get(row[STATUS_INDEX], 9) if row else 9
            return rank, order.get(key, 0)

        return key_of


def moves(sort_column: str | None, old: Cells, new: Cells) -> bool:
    """Whether a row's change can move it in the order sorted by `sort_column`."""
    if sort_column is None:
        return ACTIVE_FIRST.get(old[STATUS_INDEX]) != ACTIVE_FIRST.get(new[STATUS_INDEX])
    index = COLUMN_KEYS.index(sort_column)
    return old[index] != new[index] or sort_column == "duration"


def first_rows_key(column: str | None, view: RunView | None, now: float,
                   order: dict[str, int]) -> Any:
    """A sort key over (row key, cells) in the table's order, for choosing the first rows."""
    if column is None or view is None:
        return lambda row: (ACTIVE_FIRST.get(row[1][STATUS_INDEX], 9), order.get(row[0], 0))

    def key_of(row: tuple[str, Cells]) -> tuple[Any, ...]:
        found = view.job(row[0])
        return sort_value(column, found[1], now, found[0].project) if found else ((),)

    return key_of
