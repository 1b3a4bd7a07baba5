"""Log text for people: ANSI escapes removed, carriage-return progress bars collapsed."""

from __future__ import annotations

import re

from eq_tui.hosts.term_lines import MAX_CHARS, terminal_lines

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


def clean_line(line: str) -> str:
    """One display line: the text after the last carriage return (what a terminal shows)."""
    line = _ANSI.sub("", line)
    if "\r" in line:
        parts = [part for part in line.split("\r") if part.strip()]
        line = parts[-1] if parts else ""
    return _CONTROL.sub("", line).rstrip()


def clean_text(data: bytes | str) -> list[str]:
    """A log's lines as a terminal shows them: one line per progress bar, its newest state
    (nested bars' ESC[A redraws included; see term_lines)."""
    if isinstance(data, bytes):  # decoded from what the model reads (4 bytes a character at most)
        data = data[-4 * MAX_CHARS:].decode("utf-8", errors="replace")
    return terminal_lines(data)
