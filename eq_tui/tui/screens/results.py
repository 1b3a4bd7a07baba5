"""The results screen (`R`): one row per configuration — grid parameters minus the seed-like key
— with n of expected, mean ± std of each metric, the best row of each phase marked by its goal,
the missing or failed seeds named. Sortable on any column; it follows the run as jobs finish.
Below it, for a run with a search, the search panel (tui/search_panel.py): the best trial and
its parameters, the trials' values over time and which parameters mattered."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widgets import DataTable, Static

from eq_tui.api import ProjectState
from eq_tui.results.cost import cost_record
from eq_tui.results.group import MixedConfigurations, Row, Table, group, sort_rows
from eq_tui.results.render import (
    energy_cell,
    goal_hint,
    gpu_time_cell,
    mean_std,
    notes,
    param_keys,
    span,
)
from eq_tui.tui.search_panel import SearchPanel

Projects = Callable[[], Iterable[ProjectState]]


def records_of(project: ProjectState) -> list[dict[str, Any]]:
    """The job records as results records (the job record carries params and final metrics)."""
    return [{"id": job_id, "phase": job.get("phase", "main"),
             "params": dict(job.get("params") or {}), "status": job.get("status"),
             "metrics": dict(job.get("metrics") or {}), "cmd": job.get("cmd"),
             "cost": cost_record(job.get("history") or [])}
            for job_id, job in project.jobs.items()]


def project_table(project: ProjectState) -> Table:
    settings = project.settings
    return group(records_of(project), group_over=str(settings.get("group_over") or "seed"),
                 goals=dict(settings.get("goals") or {}))


def signature(projects: Iterable[ProjectState]) -> tuple[Any, ...]:
    """Changes when a row of the results would: a status or a metric of some job."""
    return tuple((p.project, tuple((k, j.get("status"), tuple(sorted(
        (j.get("metrics") or {}).items()))) for k, j in p.jobs.items())) for p in projects)


class ResultsScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,q,R", "close", "Close"),
        Binding("s", "sort", "Sort by next column"),
        Binding("S", "reverse", "Reverse order"),
    ]
    DEFAULT_CSS = """
    ResultsScreen #results-note { height: auto; padding: 0 1; color: $text-muted; }
    ResultsScreen DataTable { height: 1fr; }
    """

    def __init__(self, projects: Projects | None = None) -> None:
        super().__init__()
        # the app's picture of each run (the same reducer the job table is drawn from)
        self.projects = projects or self._app_projects
        self.sort_column = ""  # a parameter, a metric, or "" for the run's order
        self.descending = False
        self._seen: tuple[Any, ...] | None = None
        self.tables: dict[str, Table] = {}

    def _app_projects(self) -> list[ProjectState]:
        view = self.app.view  # type: ignore[attr-defined]
        return list(view.projects.values())

    def compose(self) -> ComposeResult:
        yield DataTable(id="results", cursor_type="row", zebra_stripes=True)
        yield SearchPanel()
        yield Static(id="results-note")  # the keys too: a Footer costs a full restyle on open

    def on_mount(self) -> None:
        self.query_one(DataTable).border_title = "results"
        self.redraw()
        self.query_one(SearchPanel).follow(self.run_dirs())
        self.set_interval(1.0, self.follow)

    def run_dirs(self) -> dict[str, str]:
        return {p.project: p.run_dir for p in self.projects()}

    def follow(self) -> None:
        """Redraw when a job's status or metrics changed (as jobs finish), and the search panel
        when a journal did."""
        if signature(self.projects()) != self._seen:
            self.redraw()
        self.query_one(SearchPanel).follow(self.run_dirs())

    def columns(self) -> list[str]:
        keys: dict[str, None] = {}
        metrics: dict[str, None] = {}
        for table in self.tables.values():
            keys.update(dict.fromkeys(param_keys(table)))
            metrics.update(dict.fromkeys(table.metrics))
        return [*keys, *metrics]

    def redraw(self) -> None:
        projects = list(self.projects())
        self._seen = signature(projects)
        problems = []
        self.tables = {}
        for project in projects:
            try:
                self.tables[project.project] = project_table(project)
            except MixedConfigurations as exc:
                problems.append(f"{project.project}: {exc}")
        grid = self.query_one(DataTable)
        keep = grid.cursor_row
        grid.clear(columns=True)
        keys = [k for t in self.tables.values() for k in param_keys(t)]
        keys = list(dict.fromkeys(keys))
        metrics = list(dict.fromkeys(m for t in self.tables.values() for m in t.metrics))
        several = len(self.tables) > 1
        heads = ["project"] * several + ["phase", *keys, "n"]
        for metric in metrics:
            heads += [self._title(metric), f"{metric} min..max"]
        costs = any(t.has_cost for t in self.tables.values())
        heads += ["GPU time", "energy"] * costs
        heads.append("notes")
        for head in heads:
            grid.add_column(self._arrow(head), key=head)
        for name, table in self.tables.items():
            rows = sort_rows(table, self.sort_column, descending=self.descending) \
                if self.sort_column else table.rows
            for row in rows:
                grid.add_row(*self._cells(name, table, row, keys, metrics, several, costs),
                             key=f"{name}/{row.phase}/{row.label()}")
        if grid.row_count:
            grid.move_cursor(row=min(keep, grid.row_count - 1))
        empty = not any(t.rows and t.metrics for t in self.tables.values())
        hints = [h for t in self.tables.values() if (h := goal_hint(t))]
        best = hints[0] if hints else "* best of its phase by the metric's goal (↑ max, ↓ min)"
        note = "  ".join(problems) or ("no metrics yet: they are read as jobs finish" if empty
                                       else f"{best}; mean ± std over the seeds; "
                                            "s / S: sort, reverse; escape: close")
        if any(row.unlike for table in self.tables.values() for row in table.rows):
            note += ("\ncommands differ: that row's jobs ran different commands (edited, cloned "
                     "with --set, or the manifest changed after some completed); not ranked")
        self.query_one("#results-note", Static).update(note)

    def _title(self, metric: str) -> str:
        goals: dict[str, str] = {}
        for table in self.tables.values():
            goals.update(table.goals)
        way = goals.get(metric)
        return f"{metric} {'↑' if way == 'max' else '↓'}" if way else metric

    def _arrow(self, head: str) -> str:
        name = head.split(" ")[0] if head not in ("project", "phase", "n", "notes", "GPU time",
                                                  "energy") else head
        if name and name == self.sort_column and "min..max" not in head:
            return f"{head} {'▼' if self.descending else '▲'}"
        return head

    @staticmethod
    def _cells(project: str, table: Table, row: Row, keys: list[str], metrics: list[str],
               several: bool, costs: bool = False) -> list[Text | str]:
        cells: list[Text | str] = [project] if several else []
        cells.append(row.phase)
        cells.extend(row.params.get(k, "") for k in keys)
        cells.append(f"{row.done}/{row.expected}")
        for metric in metrics:
            cell = row.cells.get(metric)
            text = mean_std(cell) if cell is not None else ""
            cells.append(Text(f"{text} *", style="bold green") if metric in row.best
                         else Text(text))
            cells.append(span(cell) if cell is not None else "")
        if costs:
            cells += [gpu_time_cell(row.cost.gpu_h), energy_cell(row.cost.energy_wh)]
        cells.append(notes(table, row))
        return cells

    def action_sort(self) -> None:
        order = ["", *self.columns()]
        position = order.index(self.sort_column) if self.sort_column in order else 0
        self.sort_column = order[(position + 1) % len(order)]
        self.redraw()

    def action_reverse(self) -> None:
        self.descending = not self.descending
        self.redraw()

    def on_data_table_header_selected(self, event: DataTable.HeaderSelected) -> None:
        name = str(event.column_key.value or "").split(" ")[0]
        if name in self.columns():
            self.descending = not self.descending if name == self.sort_column else False
            self.sort_column = name
            self.redraw()

    def action_close(self) -> None:
        self.dismiss(None)
