"""`?`: every key, what it does, and the filter syntax."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eq_tui.tui.keys import help_lines

KEYS: list[tuple[str, str]] = help_lines()  # keys.py: every key, declared once

FILTER_HELP = (
    "Filter: words match the id, command, reason or last log line; tokens narrow by field: "
    "status:stuck  host:box1  phase:distill  project:demo  failure:cuda_oom  "
    "(status:stuck,killed matches either). host: also narrows the GPU grid to those hosts."
)


def help_content() -> Content:
    width = max(len(key) for key, _ in KEYS)
    lines = [Content.styled("Keys", "bold $primary")]
    lines += [Content.assemble((f"  {key:<{width}}  ", "bold $accent"), text)
              for key, text in KEYS]
    lines += [Content(""), Content.styled("Filter", "bold $primary"), Content(FILTER_HELP),
              Content(""), Content.styled("press escape or ? to close", "dim")]
    return Content("\n").join(lines)


class HelpScreen(ModalScreen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,question_mark,q", "dismiss_help", "Close"),
    ]

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help"):
            yield Static(help_content(), id="help-body")

    def on_mount(self) -> None:
        self.query_one("#help").border_title = "eq-tui help"

    def action_dismiss_help(self) -> None:
        self.dismiss(None)
