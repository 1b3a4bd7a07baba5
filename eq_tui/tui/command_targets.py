"""What a command key acts on: the job shown in a details screen, else the marked jobs or the
table's cursor."""

from __future__ import annotations

from typing import Any

from eq_tui.tui.screens.details import JobDetailsScreen


def targets(app: Any) -> list[str]:
    if isinstance(app.screen, JobDetailsScreen):
        return [app.screen.key]
    return list(app.table.targets())
