"""The job table: one row per job, keyed `project/id`, drawn only where the screen shows it
(row_table.py). Until a column is chosen (`s`, a header click) the rows that need eyes come first:
see ACTIVE_FIRST."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from rich.style import Style
from rich.text import Text
from textual.message import Message
from textual.timer import Timer

from eq_tui.present.job_filter import JobFilter
from eq_tui.tui.layout import TableFit, TableShape, column_plan, table_shape
from eq_tui.tui.live_metrics import LiveMetrics
from eq_tui.tui.palette import status_rich_styles
from eq_tui.tui.row_table import RowTable, TableColumn
from eq_tui.tui.rows import (
    COLUMN_KEYS,
    COLUMNS,
    GPU_ONLY_LABEL,
    LAST_LINE_WIDTH,
    Cells,
    id_width,
    job_cells,
    sort_value,
    split_row_key,
)
from eq_tui.tui.run_view import RunView

RESORT_DELAY_S = 0.3
MARK_COLUMN = "mark"
MARK = "●"
STATUS_INDEX = COLUMN_KEYS.index("status")
PROGRESS_INDEX = COLUMN_KEYS.index("progress")
NO_CELLS: Cells = ("",) * len(COLUMNS)
# needs a person, then waiting to retry, then running (stalled and slow ones are running jobs
# whose status cell says more), then waiting (a held job waits for a person's release): what
# must be seen is at the top
ACTIVE_FIRST = {name: rank for rank, names in enumerate((
    ("stuck", "blocked"), ("failed_oom",), ("running", "stalled", "slow", "launching"),
    ("pending", "held"), ("killed",), ("completed", "pruned"))) for name in names}


class JobTable(RowTable):
    class DetailsRequested(Message):
        def __init__(self, key: str) -> None:
            super().__init__()
            self.key = key

    class JobHighlighted(Message):
        def __init__(self, key: str | None) -> None:
            super().__init__()
            self.key = key

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(self._texts, id=id)
        self.fixed_columns = 2  # the mark and the id stay in view while scrolling sideways
        self.marked: set[str] = set()
        self.job_filter = JobFilter()
        self.filter_text = ""
        self.sort_column: str | None = None  # None: active first
        self.sort_reverse = False
        self._cells: dict[str, Cells] = {}  # the rows drawn (or asked for) since they changed
        self._columns: list[int] = []
        self._styles: dict[str, Style] = {}
        self._view: RunView | None = None
        self._now = 0.0
        self.live = LiveMetrics()
        self.metric: str | None = None  # the metric column's metric (None: no column)
        self._order: dict[str, int] = {}  # manifest order, the tie-breaker of active first
        self._sort_keys: dict[str, Any] = {}  # each shown row's sort key as it last changed
        self._sort_timer: Timer | None = None
        self.screen_width = 0  # the app's, for fit_table (0: the app's size at setup)
        self._fit = TableFit(progress=True, last_line=LAST_LINE_WIDTH)
        self._shape = TableShape()  # which columns the run needs (layout.table_shape)

    # ---- building --------------------------------------------------------------------------

    def setup(self, view: RunView, now: float) -> None:
        """Columns (those the run needs: layout.column_plan; the progress column where it
        fits: layout.fit_table) and every row."""
        self._view = view
        screen = self.screen_width or self.app.size.width
        self._shape = table_shape(view)
        columns, widths, self._fit = column_plan(view, self.metric, screen, self._shape)
        self._columns = [i for i in columns if self._fit.progress or i != PROGRESS_INDEX]
        widths["last_line"] = self._fit.last_line
        labels = {"metric": self.metric} if self.metric else {}
        if self._shape.one_host:
            labels["where"] = GPU_ONLY_LABEL
        self.set_columns([TableColumn(MARK_COLUMN, " ", 1), *(
            TableColumn(c.key, labels.get(c.key, c.label), widths[c.key])
            for c in (COLUMNS[i] for i in self._columns))])
        self.refresh_styles()
        self._title()
        self.rebuild(now)

    def fit_to(self, screen_width: int) -> None:
        """The columns for a screen this wide; the table is set up again only when they
        change (the last log line narrower or wider, the progress column in or out)."""
        self.screen_width = screen_width
        view = self._view
        if view is not None and column_plan(view, self.metric, screen_width,
                                            self._shape)[2] != self._fit:
            self.setup(view, self._now)

    def refresh_styles(self) -> None:
        self._styles = status_rich_styles(self.app)

    def rebuild(self, now: float) -> None:
        """Every row again, filtered and sorted (after a filter, sort or theme change). Only
        the rows drawn get their cells: a sort needs the records, not the cells."""
        if self._view is None:
            return
        self._now = now
        self._cells.clear()
        keys = []
        for key, project, job in self._view.iter_jobs():
            self._order.setdefault(key, len(self._order))
            self.live.observe(key, job)
            if self.job_filter.matches(job, project.project):
                keys.append(key)
        self._rekey(keys)
        self._resort()

    # ---- keyed updates ---------------------------------------------------------------------

    def apply(self, keys: Iterable[str], now: float) -> None:
        """Bring the given rows up to date: drawn again where shown, new rows added, rows that
        no longer match the filter removed, a sort soon where one moves."""
        view = self._view
        if view is None:
            return
        self._now = now
        key_of = self._sort_key()
        resort = False
        gone: set[str] = set()
        new: list[str] = []
        changed: list[str] = []
        records = []
        for key in keys:
            found = view.job(key)
            self._cells.pop(key, None)
            if found is not None:
                self.live.observe(key, found[1])
            if found is None or not self.job_filter.matches(found[1], found[0].project):
                if self._sort_keys.pop(key, None) is not None:
                    gone.add(key)  # retired by a reload, or out of the filter now
                continue
            self._order.setdefault(key, len(self._order))
            records.append(found[1])
            old, self._sort_keys[key] = self._sort_keys.get(key), key_of(key)
            if old is None:
                new.append(key)
            else:
                changed.append(key)
            resort = resort or old != self._sort_keys[key]
        if (new and self._fit.id < id_width(split_row_key(key)[1] for key in new)) \
                or self._shape.outgrown_by(records):
            # a longer id (a clone, an added job): a wider id column; a new phase, a priority
            # set: their column
            self.setup(view, now)
            return
        if gone or new:
            self.set_rows([key for key in self.keys if key not in gone] + new,
                          cursor=self.cursor_key)
        self.refresh_rows(changed)
        if resort and self._sort_timer is None:
            # at most one sort per RESORT_DELAY_S, however many ticks move rows meanwhile
            self._sort_timer = self.set_timer(RESORT_DELAY_S, self._resort)

    def _texts(self, key: str) -> list[Text]:
        """A row's cells as drawn, the mark first (computed once per change of its job)."""
        cells = self._cells.get(key)
        if cells is None:
            cells = self._cells[key] = self._job_cells(key)
        return [Text(MARK if key in self.marked else " ", end="", no_wrap=True),
                *(self._cell_text(i, cells) for i in self._columns)]

    def _job_cells(self, key: str) -> Cells:
        view = self._view
        found = view.job(key) if view is not None else None
        if view is None or found is None:
            return NO_CELLS
        project, job = found
        return job_cells(job, project=project.project, now=self._now,
                         max_attempts=project.max_attempts,
                         metric=self.live.cell(key, job, self.metric),
                         pace=view.pace(key, self._now), last_width=self._fit.last_line,
                         shared=view.shared(key), host=not self._shape.one_host)

    def _cell_text(self, index: int, cells: Cells) -> Text:
        value = cells[index]
        if index == STATUS_INDEX:
            return Text(value, style=self._styles.get(value, ""), end="")
        if index == PROGRESS_INDEX and cells[STATUS_INDEX] == "slow":
            return Text(value, style=self._styles["slow"], end="", no_wrap=True)
        return Text(value, end="", no_wrap=True)

    # ---- marks -----------------------------------------------------------------------------

    def targets(self) -> list[str]:
        """The jobs an action applies to: the marked ones, else the one under the cursor."""
        if self.marked:
            return [key for key in self._order if key in self.marked
                    and key in self._sort_keys] or sorted(self.marked)
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
        self.refresh_rows([key])
        if self.cursor_row < self.row_count - 1:
            self.move_cursor(row=self.cursor_row + 1)

    def clear_marks(self) -> None:
        marked, self.marked = self.marked, set()
        self.refresh_rows(marked)

    # ---- intents ---------------------------------------------------------------------------

    def on_row_table_row_selected(self, event: RowTable.RowSelected) -> None:
        event.stop()
        self.post_message(self.DetailsRequested(event.key))

    def on_row_table_row_highlighted(self, event: RowTable.RowHighlighted) -> None:
        event.stop()
        self.post_message(self.JobHighlighted(event.key))

    def on_row_table_header_selected(self, event: RowTable.HeaderSelected) -> None:
        event.stop()
        if event.column != MARK_COLUMN:
            self.sort_by(event.column)

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
        self._rekey(self.keys)
        self._resort()

    def sort_by_activity(self) -> None:
        self.sort_column, self.sort_reverse = None, False
        self._rekey(self.keys)
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

    def _rekey(self, keys: Iterable[str]) -> None:
        key_of = self._sort_key()
        self._sort_keys = {key: key_of(key) for key in keys}

    def _resort(self) -> None:
        """Sort now by the rows' sort keys, the cursor staying on its row (also the sort a
        tick's changes asked for, RESORT_DELAY_S later: one sort now makes a pending one
        needless)."""
        if self._sort_timer is not None:
            self._sort_timer.stop()
            self._sort_timer = None
        keys = sorted(self._sort_keys, key=self._sort_keys.__getitem__,
                      reverse=self.sort_reverse)
        self.set_rows(keys, cursor=self.cursor_key)
        self._title()

    def _sort_key(self) -> Callable[[str], Any]:
        """A row's place in the order chosen, from its job's record."""
        view, now, column, metric = self._view, self._now, self.sort_column, self.metric
        assert view is not None
        if column is None:
            order = self._order

            def active_first(key: str) -> tuple[int, int]:
                found = view.job(key)
                status = str(found[1].get("status")) if found else ""
                return ACTIVE_FIRST.get(status, 9), order.get(key, 0)

            return active_first

        def by_column(key: str) -> tuple[Any, ...]:
            found = view.job(key)
            if found is None:
                return ((),)
            project, job = found
            if column == "metric" and metric:
                value = self.live.value(key, job, metric)
                missing = value is None or value != value  # last, either way round
                return (missing != self.sort_reverse, value or 0.0, job.get("id", ""))
            return sort_value(column, job, now, project.project)

        return by_column

    def _title(self) -> None:
        """`jobs · active first · filter: …`: how the rows are chosen and ordered."""
        column = self.sort_column
        order = "active first" if column is None else \
            f"by {next(c.label for c in COLUMNS if c.key == column)}"
        title = f"jobs · {order}{', reversed' if self.sort_reverse else ''}"
        self.border_title = f"{title} · filter: {self.filter_text}" if self.filter_text \
            else title

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
        if self.metric:  # in view, beside the id, however narrow the screen
            self.call_after_refresh(self.scroll_to_column, "metric")
        elif not names:
            self.app.notify("no metric yet: a job's log line or its results give one (m "
                            "again once one has)", timeout=4)
