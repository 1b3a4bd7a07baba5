"""The filter bar opened with `/`: typing narrows the table (debounced), enter keeps the filter,
escape clears it. It says what to show; the app applies it to the table and the GPU grid."""

from __future__ import annotations

from typing import Any

from textual.message import Message
from textual.widgets import Input

from eq_tui.present.job_filter import JobFilter, parse_filter

FILTER_DEBOUNCE_S = 0.15
PLACEHOLDER = ("filter: words, status:stuck host:box1 phase:distill "
               "(enter to keep, escape to clear)")


class FilterBar(Input):
    class Applied(Message):
        """A filter to show now; `kept` when the user pressed enter (or cleared it)."""

        def __init__(self, job_filter: JobFilter, text: str, *, kept: bool) -> None:
            super().__init__()
            self.job_filter = job_filter
            self.text = text
            self.kept = kept

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(placeholder=PLACEHOLDER, id=id)
        self._timer: Any = None

    def on_mount(self) -> None:
        self.display = False

    def open(self) -> None:
        self.display = True
        self.focus()

    def close(self) -> bool:
        """Clear and hide the bar; False when it was not open."""
        if not self.display:
            return False
        self._stop_timer()
        self.value = ""
        self.display = False
        self.post_message(self.Applied(parse_filter(""), "", kept=True))
        return True

    def _stop_timer(self) -> None:
        if self._timer is not None:
            self._timer.stop()
            self._timer = None

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._stop_timer()
        query = event.value
        self._timer = self.set_timer(FILTER_DEBOUNCE_S, lambda: self.post_message(
            self.Applied(parse_filter(query), query, kept=False)))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._stop_timer()
        if not event.value:
            self.display = False
        self.post_message(self.Applied(parse_filter(event.value), event.value, kept=True))
