"""The run's summary.md, rendered as Markdown."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Markdown

from eq_tui.tui.run_view import RunView


class SummaryScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape,q", "close", "Close")]

    def __init__(self, title: str, markdown: str) -> None:
        super().__init__()
        self.title_text = title
        self.markdown = markdown

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="summary"):
            yield Markdown(self.markdown)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#summary").border_title = self.title_text

    def action_close(self) -> None:
        self.dismiss(None)


def open_summary(app: App[Any], view: RunView) -> None:
    """The palette's "Open summary": every project's summary.md, or a note that there is none
    yet (it is written when the queue finishes)."""
    parts = []
    for project in view.projects.values():
        path = Path(project.run_dir) / "summary.md" if project.run_dir else None
        if path is not None and path.is_file():
            try:
                parts.append(path.read_text(encoding="utf-8"))
            except OSError as exc:
                app.notify(f"{path}: {exc}", severity="error")
    if not parts:
        app.notify("no summary yet: summary.md is written when the queue finishes")
        return
    app.push_screen(SummaryScreen("summary", "\n\n".join(parts)))
