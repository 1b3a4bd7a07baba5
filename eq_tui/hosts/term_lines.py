"""The lines a terminal would show for a log's text: one line per progress bar, its newest state.

A log written through progress bars is a stream of terminal moves, not of lines. tqdm redraws a
bar with `\\r` + the bar + blank padding (tqdm/std.py, `status_printer.print_status`); a nested
bar (`position=1`, e.g. Lightning's validation bar under the epoch bar) goes down with `\\n`,
draws, and comes back up with ESC[A (`tqdm.moveto` writes `'\\n' * n + _term_move_up() * -n`,
`display` wraps each redraw in `moveto(pos)` / `moveto(-pos)`). Split on `\\n`, such a log is
hundreds of lines of the inner bar with the outer bar's redraws glued to their ends; played
on a screen model it is the two lines the terminal showed.

The model: `\\r`, `\\n` (to column 0, as a tty's output processing does), `\\b`, and the CSI
moves and erases progress bars use (A/B/C/D/E/F/G, K); other escapes and control bytes are
dropped. The cursor may go up past the first line of the text: a log's tail starts below the
bar its redraws go back up to, so rows above the text are made as they are written. Bounded:
only the last `max_chars` of the text are read, a line keeps `MAX_COLS` columns and the model
`MAX_ROWS` rows (the newest).
"""

from __future__ import annotations

import re

MAX_CHARS = 1 << 18  # a pane's 200 lines, with room; a log of junk costs a fraction of a second
MAX_COLS = 4096
MAX_ROWS = 5000

# one control token: CSI (params, final byte), OSC (to BEL or ST), another ESC sequence (a
# charset's ESC ( B as `tput sgr0` writes it) or a lone ESC, a C0 control other than tab, DEL,
# a C1 control
_TOKEN = re.compile(r"\x1b\[([0-?]*)[ -/]*([@-~])"
                    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)"
                    r"|\x1b[ -/]*[0-~]?"
                    r"|[\x00-\x08\x0a-\x1f\x7f-\x9f]")
_MOVES = frozenset("ABCDEFGK")


def _count(params: str, default: int = 1) -> int:
    """A CSI move's count: its number (0 reads as 1, as terminals read it), capped."""
    if not params.isdigit():
        return default
    if len(params) > 7:  # int() of a long digit run is slow, and no move is that long
        return MAX_ROWS + MAX_COLS
    return int(params) or default


class _Screen:
    """Rows by index (negative above the text's first line); only rows written or passed by a
    line feed exist."""

    def __init__(self) -> None:
        self.rows: dict[int, str] = {}
        self.row = 0
        self.col = 0
        self.bottom = 0  # the lowest row that exists: a cursor-down stops there

    def put(self, run: str) -> None:
        col = self.col
        if col >= MAX_COLS:
            return
        run = run[:MAX_COLS - col]
        line = self.rows.get(self.row)
        if line is None:
            line = ""
            self._made()
        if len(line) < col:
            line += " " * (col - len(line))
        self.rows[self.row] = line[:col] + run + line[col + len(run):]
        self.col = col + len(run)

    def line_feed(self) -> None:
        if self.row not in self.rows:
            self._made()
            self.rows[self.row] = ""
        self.row += 1
        self.col = 0

    def _made(self) -> None:
        if self.row > self.bottom:
            self.bottom = self.row
        if len(self.rows) >= 2 * MAX_ROWS:  # trimmed in batches: sorting per row is slow
            for index in sorted(self.rows)[:-MAX_ROWS]:
                del self.rows[index]

    def csi(self, params: str, final: str) -> None:
        if final == "K":
            self._erase(params)
            return
        n = _count(params)
        if final in "AF":
            self.row -= min(n, MAX_ROWS)
        elif final in "BE":
            self.row = min(self.row + n, max(self.bottom, self.row))
        elif final == "C":
            self.col = min(self.col + n, MAX_COLS)
        elif final == "D":
            self.col = max(0, self.col - n)
        elif final == "G":
            self.col = min(n - 1, MAX_COLS)
        if final in "EF":
            self.col = 0

    def _erase(self, params: str) -> None:
        line = self.rows.get(self.row)
        if line is None:
            return
        mode = params or "0"
        if mode == "0":
            self.rows[self.row] = line[:self.col]
        elif mode == "1":
            self.rows[self.row] = " " * min(self.col + 1, len(line)) + line[self.col + 1:]
        elif mode == "2":
            self.rows[self.row] = ""

    def lines(self) -> list[str]:
        shown = [self.rows[index].rstrip() for index in sorted(self.rows)]
        while shown and not shown[-1]:
            shown.pop()
        return shown


def terminal_lines(text: str, *, max_chars: int = MAX_CHARS) -> list[str]:
    """The lines a terminal shows after printing `text` (its last `max_chars` characters, from
    the first line or redraw that starts inside them), trailing blank lines left out."""
    if len(text) > max_chars:
        text = text[-max_chars:]
        starts = [i for i in (text.find("\n"), text.find("\r")) if i >= 0]
        if starts:  # the cut part of a line is not shown
            first = min(starts)
            text = text[first + 1:] if text[first] == "\n" else text[first:]
    screen = _Screen()
    put = screen.put
    at = 0
    for match in _TOKEN.finditer(text):
        start = match.start()
        if start > at:
            put(text[at:start])
        at = match.end()
        char = text[start]
        if char == "\n":
            screen.line_feed()
        elif char == "\r":
            screen.col = 0
        elif char == "\b":
            screen.col = max(0, screen.col - 1)
        elif match.group(2) in _MOVES:
            screen.csi(match.group(1), match.group(2))
    if at < len(text):
        put(text[at:])
    return screen.lines()
