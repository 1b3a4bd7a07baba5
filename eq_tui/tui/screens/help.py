"""`?`: every key, what it does, and the filter syntax."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.content import Content
from textual.screen import ModalScreen
from textual.widgets import Static

from eq_tui.tui.living import LIVING_KEYS

KEYS: tuple[tuple[str, str], ...] = (
    ("k", "kill the selected (or marked) jobs, after a confirmation"),
    ("r", "retry: a stuck/killed/blocked job goes back to pending; an OOM wait ends now"),
    ("u", "requeue a running job: stop it and put it back to pending"),
    ("p", "pause / resume launching (running jobs keep running)"),
    ("enter", "job details: command, host, every attempt, the log of any attempt"),
    ("space", "mark / unmark a row; k, r and u then act on every marked job"),
    ("escape", "clear the marks, or close the filter"),
    ("/", "filter the table"),
    ("s / S", "sort by the next column / reverse the order (or click a header); after the "
              "last column, back to active first: stuck and blocked, retrying, running, "
              "pending, killed, completed"),
    ("l", "log and retry queue: hide them (a small screen: show them instead of the table)"),
    ("g", "GPU grid: one line per host / full panels (again: as the room allows)"),
    ("up / down", "in the GPU grid: select a host (shown in full beside the lines)"),
    ("[ / ]", "log of the previous / next attempt of the selected job"),
    ("m", "metric column: the next metric's current value and sparkline (then none)"),
    ("R", "results: mean ± std over seeds per configuration, best marked (s / S sort)"),
    ("tab / shift+tab", "move between panes"),
    ("ctrl+p", "command palette: theme, retry every OOM-stuck job, open summary, pause, "
     "reload the manifest"),
    *LIVING_KEYS,
    ("?", "this help"),
    ("q", "quit; jobs keep running in their sessions and the next run resumes them"),
)

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
