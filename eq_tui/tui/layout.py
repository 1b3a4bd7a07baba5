"""Each pane's share of the screen. Below about 100x30 the screen is small: a one-line header,
the job table first with the compact grid under it, and the log and retry queue as a tab (`l`)
instead of squeezed panes. At every size the GPU grid leaves the job table a third of the
screen."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

SMALL_WIDTH = 100
SMALL_HEIGHT = 30
FOOTER = 1
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
        grid = max(3, height - header - FOOTER - bottom - table)
    return replace(previous, size=(width, height), small=small, header_height=header,
                   bottom_height=bottom, grid_budget=grid, logs_tab=previous.logs_tab and small)
