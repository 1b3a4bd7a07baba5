"""How the GPU grid lays its hosts out in the room it has: full panels of a readable width,
wrapped into rows; or, when those do not fit (or on a small screen), one line per host with the
selected host in full beside (or above) the lines. Pure, so every size can be tested cheaply."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

PANEL_MIN_WIDTH = 48  # a GPU line: index, memory bar, used/total, utilisation, a job id
EXPANDED_WIDTH = 56
LINE_GAP = 3  # between columns of compact lines
SCROLLBAR = 2


@dataclass(frozen=True)
class GridPlan:
    compact: bool
    columns: int  # panels per row, or compact lines per row
    expanded: str = ""  # where the selected host shows in full: "right", "top" or nowhere

    @property
    def form(self) -> str:
        return "compact" if self.compact else "full"


def full_height(heights: Sequence[int], columns: int) -> int:
    """Rows of panels: each row as tall as its tallest panel, plus its border."""
    return sum(max(heights[i:i + columns]) + 2 for i in range(0, len(heights), columns))


def panel_columns(width: int, hosts: int) -> int:
    return max(1, min(hosts, (width - SCROLLBAR) // PANEL_MIN_WIDTH))


def plan_grid(width: int, budget: int, heights: Sequence[int], line_width: int, *,
              small: bool = False, force: str | None = None) -> GridPlan:
    """`heights`: each host's body lines; `budget`: lines the grid may take before it would
    push the job table below its share; `force`: "full" or "compact" (the `g` key)."""
    hosts = len(heights)
    columns = panel_columns(width, hosts)
    fits = hosts == 0 or full_height(heights, columns) <= budget
    compact = force == "compact" if force else small or not fits
    if not compact:
        return GridPlan(False, columns)
    room = width - SCROLLBAR
    if small or hosts <= 1:
        expanded = ""
    elif room - EXPANDED_WIDTH >= line_width:
        expanded, room = "right", room - EXPANDED_WIDTH
    else:
        expanded = "top"
    lines = max(1, min(max(hosts, 1), (room + LINE_GAP) // (line_width + LINE_GAP)))
    return GridPlan(True, lines, expanded)
