"""`e` edit, `c` clone, `a` add: a modal with a job's command (and, for a new job, its id and
phase), checked as the manifest checks them before anything is sent."""

from __future__ import annotations

from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Static

from eq_tui.manifest.ids import ID_PATTERN

MAX_ID = 100


def form_problem(values: dict[str, str], phases: list[str] | None) -> str | None:
    """Why these values cannot be sent, or None."""
    job_id = values.get("id")
    if job_id is not None and (not ID_PATTERN.fullmatch(job_id) or len(job_id) > MAX_ID):
        return "the id may only use letters, digits, '_', '.', '-'"
    cmd = values.get("cmd", "")
    if not cmd.strip():
        return "the command is empty"
    if "\0" in cmd:
        return "the command holds a NUL byte"
    phase = values.get("phase")
    if phases is not None and phase not in phases:
        return f"the phase is one of: {', '.join(phases)}"
    return None


class JobFormScreen(ModalScreen[dict[str, str] | None]):
    """Dismissed with {"cmd", and "id"/"phase" when asked for} or None (escape)."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "Cancel")]

    def __init__(self, title: str, *, cmd: str = "", new_id: str | None = None,
                 phases: list[str] | None = None, confirm_label: str = "Save") -> None:
        super().__init__()
        self.title_text = title
        self.cmd = cmd
        self.new_id = new_id
        self.phases = phases
        self.confirm_label = confirm_label

    def compose(self) -> ComposeResult:
        with Vertical(id="dialog"):
            yield Static(self.title_text, id="dialog-title", markup=False)
            if self.new_id is not None:
                yield Input(self.new_id, placeholder="job id", id="form-id")
            if self.phases is not None:
                yield Input(self.phases[0] if len(self.phases) == 1 else "",
                            placeholder="phase: " + ", ".join(self.phases), id="form-phase")
            yield Input(self.cmd, placeholder="command", id="form-cmd")
            yield Static("", id="form-problem", markup=False)
            with Horizontal(id="dialog-buttons"):
                yield Button(f"{self.confirm_label} (enter)", variant="primary", id="save")
                yield Button("Cancel (escape)", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#form-id" if self.new_id is not None else "#form-cmd", Input).focus()

    def values(self) -> dict[str, str]:
        values = {"cmd": self.query_one("#form-cmd", Input).value.strip()}
        if self.new_id is not None:
            values["id"] = self.query_one("#form-id", Input).value.strip()
        if self.phases is not None:
            values["phase"] = self.query_one("#form-phase", Input).value.strip()
        return values

    def submit(self) -> None:
        values = self.values()
        problem = form_problem(values, self.phases)
        if problem is not None:
            self.query_one("#form-problem", Static).update(problem)
            return
        self.dismiss(values)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.submit()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "save":
            self.submit()
        else:
            self.dismiss(None)

    def action_cancel(self) -> None:
        self.dismiss(None)
