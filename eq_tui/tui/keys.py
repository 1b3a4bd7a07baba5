"""Every key of the main screen, declared once: its binding (on the app, so the footer lists
them in this order), its footer label, its palette entry and its line in the help screen (`?`).
The job table keeps only the keys that move its cursor (row_table.py); its actions (mark, sort,
metric) are reached through the app, which hides them, and the keys of the main screen's panes,
while another screen is on top."""

from __future__ import annotations

from dataclasses import dataclass

from textual.binding import Binding, BindingType

PRIORITY = Binding.Group("Priority", compact=True)


@dataclass(frozen=True)
class Key:
    key: str  # Textual's name of the key
    action: str  # the app's action
    label: str  # in the footer and the palette
    help: str  # its line in the help screen
    shown: str = ""  # how the help screen writes the key (default: the key)
    footer: bool = True
    palette: bool = True  # an entry in the command palette (ctrl+p)
    main_only: bool = False  # acts on the main screen's table: hidden on other screens
    group: Binding.Group | None = None
    glyph: str = ""  # how the footer writes the key (default: as the help screen does)

    @property
    def written(self) -> str:
        return self.shown or self.key


MARKED = "the selected (or marked) jobs"
KEYS: tuple[Key, ...] = (
    Key("enter", "details", "Details",
        "job details: command, host, every attempt, the log of any attempt", glyph="⏎",
        main_only=True),
    Key("k", "command('kill')", "Kill", f"kill {MARKED}, after a confirmation"),
    Key("r", "command('retry')", "Retry",
        "retry: a stuck/killed/blocked job goes back to pending; an OOM wait ends now"),
    Key("u", "command('requeue')", "Requeue",
        "requeue a running job: stop it and put it back to pending"),
    Key("h", "hold", "Hold",
        f"hold {MARKED} (they never launch, and the queue waits for them), or release held "
        "ones"),
    Key("plus", "priority(1)", "Priority +", f"raise the priority of {MARKED}", shown="+",
        group=PRIORITY),
    Key("minus", "priority(-1)", "Priority -", f"lower the priority of {MARKED}", shown="-",
        group=PRIORITY),
    Key("e", "edit", "Edit", "edit the command of the selected job (a finished one runs again)"),
    Key("c", "clone", "Clone", "clone the selected job under a new id, with its command changed"),
    Key("a", "add", "Add", "add a job to a phase"),
    Key("space", "table('toggle_mark')", "Mark",
        "mark / unmark a row; k, r, u, h, + and - then act on every marked job",
        main_only=True),
    Key("m", "table('next_metric')", "Metric",
        "metric column: the next metric's current value and sparkline (then none)",
        main_only=True),
    Key("R", "push_screen('results')", "Results",
        "results: mean ± std over seeds per configuration, best marked (s / S sort)"),
    Key("s", "table('sort_next')", "Sort",
        "sort by the next column (or click a header); after the last column, back to active "
        "first: stuck and blocked, retrying, running, pending and held, killed, completed",
        main_only=True),
    Key("S", "table('sort_reverse')", "Reverse sort", "reverse the order", footer=False,
        main_only=True),
    Key("slash", "filter", "Filter", "filter the table", shown="/", main_only=True),
    Key("d", "drain_host", "Drain host",
        "drain the GPU grid's selected host (nothing new launches there; its jobs go on), or "
        "give a drained one back; asks first", footer=False, main_only=True),
    Key("p", "toggle_pause", "Pause", "pause / resume launching (running jobs keep running)"),
    Key("l", "toggle_logs", "Log",
        "log and retry queue: hide them (a small screen: show them instead of the table)",
        main_only=True),
    Key("g", "toggle_grid", "Grid form",
        "GPU grid: one line per host / full panels (again: as the room allows)", footer=False,
        main_only=True),
    Key("left_square_bracket", "attempt(-1)", "Earlier log",
        "log of the previous attempt of the selected job", shown="[", footer=False),
    Key("right_square_bracket", "attempt(1)", "Later log",
        "log of the next attempt of the selected job", shown="]", footer=False),
    Key("escape", "clear", "Clear marks/filter", "clear the marks, or close the filter",
        footer=False, palette=False),
    Key("question_mark", "help", "Help", "this help", shown="?", palette=False),
    Key("q", "quit_app", "Quit",
        "quit (asks first); jobs keep running in their sessions and the next run resumes them",
        palette=False),
)
# keys that are no binding of the app: the help screen lists them too
OTHER_KEYS: tuple[tuple[str, str], ...] = (
    ("left / right", "scroll the table sideways (the id stays in place); home / end: its edges"),
    ("up / down", "in the GPU grid: select a host (shown in full beside the lines)"),
    ("tab / shift+tab", "move between panes"),
    ("ctrl+p", "command palette: every action above, theme, retry every OOM-stuck job, open "
               "summary, pause, reload the manifest, stop the engine"),
)
MAIN_ONLY = frozenset(key.action.partition("(")[0] for key in KEYS if key.main_only)


def bindings() -> list[BindingType]:
    return [Binding(key.key, key.action, key.label, show=key.footer, group=key.group,
                    key_display=key.glyph or key.written) for key in KEYS]


def help_lines() -> list[tuple[str, str]]:
    """(keys as written, what they do) for the help screen, `+ / -` on one line."""
    lines: list[tuple[str, str]] = []
    for key in KEYS:
        if key.group is PRIORITY and key.key == "minus":
            continue
        if key.group is PRIORITY:
            lines.append(("+ / -", f"raise / lower the priority of {MARKED}"))
        else:
            lines.append((key.written, key.help))
    return [*lines, *OTHER_KEYS]


def palette_keys() -> list[tuple[str, str, str]]:
    """(label with its key, what it does, action) of the keys the palette offers."""
    return [(f"{key.label} ({key.written})", key.help, key.action) for key in KEYS
            if key.palette]
