"""Which theme colour each status (and each meaning) is drawn in.

Widgets that render Content use the `$variable` names; the job table (Rich cells) resolves the
same names against the app's current theme.
"""

from __future__ import annotations

from typing import Any

from rich.style import Style
from textual.app import App
from textual.color import Color, ColorParseError

STATUS_VARIABLE = {
    "running": "primary",
    "stalled": "error",  # running, but hang detection says it is stuck
    "slow": "warning",  # running, but far slower than its phase siblings
    "launching": "accent",
    "pending": "",
    "completed": "success",
    "pruned": "secondary",  # early stopping stopped it: finished, not a failure
    "failed_oom": "warning",
    "stuck": "error",
    "killed": "error",
    "blocked": "warning",
    "held": "secondary",
}


def status_markup_style(status: str) -> str:
    """A Content style for a status: a theme variable, or dim for the quiet ones."""
    variable = STATUS_VARIABLE.get(status, "")
    return f"${variable}" if variable else "dim"


def status_rich_styles(app: App[Any]) -> dict[str, Style]:
    """Rich styles for the job table's status cells in the app's current theme."""
    theme = app.current_theme
    styles: dict[str, Style] = {}
    for status, variable in STATUS_VARIABLE.items():
        value = getattr(theme, variable, None) if variable else None
        if not value:
            styles[status] = Style(dim=True)
            continue
        try:
            styles[status] = Style(color=Color.parse(value).rich_color,
                                   bold=status in ("stuck", "failed_oom", "stalled", "slow"))
        except ColorParseError:
            styles[status] = Style()
    return styles
