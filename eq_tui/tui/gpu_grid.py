"""Every host of every project: full panels wrapped into rows while they fit, else one line per
host with the selected host in full (see grid_plan). `host:` in the filter narrows the hosts."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Grid, Horizontal, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from eq_tui.tui.grid_plan import LINE_GAP, GridPlan, plan_grid
from eq_tui.tui.host_line import LineWidths, host_line, line_widths
from eq_tui.tui.host_panel import HostPanel, body_height
from eq_tui.tui.rows import row_key, split_row_key
from eq_tui.tui.run_view import RunView

__all__ = ["GRID_PANELS", "GpuGrid", "HostPanel"]
GRID_PANELS = "#host-panels HostPanel"  # the full panels (not the selected host beside lines)
Shown = tuple[str, str, Mapping[str, Any], float]  # key, label, host, free threshold


class GpuGrid(VerticalScroll, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("down", "select_host(1)", "Next host", show=False),
        Binding("up", "select_host(-1)", "Previous host", show=False),
    ]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self.plan = GridPlan(False, 1)
        self.force: str | None = None  # "full" or "compact" after `g`; None: by the room
        self.selected: str | None = None
        self.host_filter: frozenset[str] = frozenset()
        self._view: RunView | None = None
        self._room = (160, 12, False)  # width, height budget, small screen
        self._panels: dict[str, HostPanel] = {}
        self._panel_box = Grid(id="host-panels")
        self._compact_box = Horizontal(id="host-compact")
        self._lines = Static(id="host-lines")
        self._expanded = HostPanel(id="host-expanded")
        self._widths = LineWidths(4, 2, 1)
        self._heights: list[int] = []
        self._line_cache: dict[str, Content] = {}
        self._line_selected: str | None = None

    def compose(self) -> ComposeResult:
        yield self._panel_box
        with self._compact_box:
            yield self._lines
            yield self._expanded

    # ---- what is shown --------------------------------------------------------------------

    def hosts(self) -> Iterator[Shown]:
        view = self._view
        if view is None:
            return
        multi = len(view.projects) > 1
        for project in view.projects.values():
            for name, host in project.hosts.items():
                label = f"{project.project}/{name}" if multi else name
                if self.host_filter and name.lower() not in self.host_filter \
                        and label.lower() not in self.host_filter:
                    continue
                yield row_key(project.project, name), label, host, project.threshold_mib

    def show(self, view: RunView, keys: set[str] | None = None) -> None:
        """Redraw the given host keys (all when None); a host not seen before replans."""
        self._view = view
        shown = list(self.hosts())
        if keys is None or self._layout_changed(shown):
            self._replan(shown)
        else:
            self._redraw(shown, keys)

    def fit_to(self, width: int, budget: int, *, small: bool) -> None:
        """The room the app gives the grid: its width and how many lines it may take."""
        self._room = (width, budget, small)
        self.styles.max_height = budget
        if self._view is not None:
            self._replan(list(self.hosts()))

    def set_host_filter(self, hosts: frozenset[str]) -> None:
        self.host_filter = hosts
        self.show(self._view or RunView())

    def toggle_form(self) -> str:
        """`g`: the other form than the one shown; again: back to what the room chooses."""
        self.force = None if self.force else ("full" if self.plan.compact else "compact")
        self.show(self._view or RunView())
        return self.plan.form

    def select(self, key: str | None) -> None:
        if key is None or key == self.selected:
            return
        self.selected = key
        if self.plan.compact and self._view is not None:
            self._redraw(list(self.hosts()), None)

    def action_select_host(self, delta: int) -> None:
        keys = [key for key, *_ in self.hosts()]
        if not keys:
            return
        index = keys.index(self.selected) if self.selected in keys else -delta
        index = max(0, min(len(keys) - 1, index + delta))
        self.select(keys[index])
        if self.plan.compact:  # keep the selected line in view when the lines scroll
            row = index // self.plan.columns
            if not self.scroll_y <= row < self.scroll_y + self.scrollable_content_region.height:
                self.scroll_to(y=max(0, row - 1), animate=False)

    def selected_host(self) -> tuple[str, str, bool] | None:
        """(project, host, whether a person drained it) of the selected host (else the
        first shown): what `d` drains or gives back."""
        shown = list(self.hosts())
        if not shown:
            return None
        key, _label, host, _threshold = next((s for s in shown if s[0] == self.selected),
                                             shown[0])
        project, name = split_row_key(key)
        return project, name, bool(host.get("drained"))

    # ---- layout ---------------------------------------------------------------------------

    def _layout_changed(self, shown: list[Shown]) -> bool:
        if [body_height(s[2]) for s in shown] != self._heights:
            return True
        if self.plan.compact:
            return line_widths([s[1] for s in shown], [s[2] for s in shown]) != self._widths
        return [s[0] for s in shown] != list(self._panels)

    def _replan(self, shown: list[Shown]) -> None:
        width, budget, small = self._room
        self._widths = line_widths([s[1] for s in shown], [s[2] for s in shown])
        self._heights = [body_height(s[2]) for s in shown]
        self.plan = plan_grid(width, budget, self._heights,
                              self._widths.total, small=small, force=self.force)
        self._panel_box.display = not self.plan.compact
        self._compact_box.display = self.plan.compact
        wanted = [] if self.plan.compact else [s[0] for s in shown]
        if wanted != list(self._panels):
            for panel in self._panels.values():
                panel.remove()
            self._panels = {key: HostPanel(classes="host") for key in wanted}
            self._panel_box.mount_all(self._panels.values())
        self._panel_box.styles.grid_size_columns = self.plan.columns
        self._compact_box.set_class(self.plan.expanded == "top", "-stacked")
        self._expanded.display = bool(self.plan.expanded)
        self._redraw(shown, None)

    def _redraw(self, shown: list[Shown], keys: set[str] | None) -> None:
        if not self.plan.compact:
            for key, label, host, threshold in shown:
                if keys is None or key in keys:
                    self._panels[key].show(label, host, threshold)
            return
        selected = self.selected if any(s[0] == self.selected for s in shown) else None
        if selected is None and shown:
            selected = shown[0][0]
        if selected != self._line_selected:
            keys = None if keys is None else keys | {selected or "", self._line_selected or ""}
            self._line_selected = selected
        self._lines.update(self._compact_lines(shown, selected, keys))
        for key, label, host, threshold in shown:
            if key == selected and self.plan.expanded:
                self._expanded.show(label, host, threshold)

    def _compact_lines(self, shown: list[Shown], selected: str | None,
                       keys: set[str] | None) -> Content:
        """Every host's line, drawn again only for the hosts in `keys` (all when None)."""
        width, columns, cache = self._widths.total, self.plan.columns, self._line_cache
        if keys is None:
            cache.clear()
        lines = []
        for key, label, host, _ in shown:
            line = cache.get(key)
            if line is None or key in (keys or ()):
                line = cache[key] = host_line(label, host, self._widths, selected=key == selected
                                              ).truncate(width, ellipsis=True, pad=True)
            lines.append(line)
        rows = [Content(" " * LINE_GAP).join(lines[i:i + columns])
                for i in range(0, len(lines), columns)]
        return Content("\n").join(rows) if rows else Content.styled("no host", "dim")
